//! Time in questions: the period a question names or implies ("in May 2023", "two weeks ago",
//! "last month", "on 8 May 2023", "in 2022", "yesterday"), so that retrieval can put what was
//! said then first. Pure: the caller passes "now" (the question's own time).
//!
//! Only unambiguous forms are read: a month name counts when a year follows it or a preposition
//! ("in", "during", "of", "early", "late", "mid") comes before it, so "May I ask…" names no
//! period. A month without a year is its latest occurrence before now.

use crate::Timestamp;

const DAY_MS: u64 = 86_400_000;

/// A span of time, `from` inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub from: Timestamp,
    pub until: Timestamp,
}

impl Period {
    /// True when `t` falls in the period.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.from <= t && t < self.until
    }

    fn days(from_day: i64, until_day: i64) -> Option<Period> {
        let ms = |d: i64| u64::try_from(d).ok().map(|d| Timestamp(d * DAY_MS));
        Some(Period {
            from: ms(from_day.max(0))?,
            until: ms(until_day.max(from_day + 1))?,
        })
    }
}

/// The months' names, lower case, January first.
pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The period `question` names or implies, relative to `now`; `None` when it names none.
pub fn period_in(question: &str, now: Timestamp) -> Option<Period> {
    let words: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let today = i64::try_from(now.0 / DAY_MS).ok()?;
    let (this_year, this_month, _) = civil_from_days(today);
    let word = |i: usize| words.get(i).map(String::as_str);
    for i in 0..words.len() {
        let w = words[i].as_str();
        // 2023-05-08
        if let Some(day) = iso_day(w) {
            return Period::days(day, day + 1);
        }
        match w {
            "yesterday" => return Period::days(today - 1, today),
            "last" | "past" | "previous" => match word(i + 1) {
                Some("week") => return Period::days(today - 14, today),
                Some("month") => {
                    let (y, m) = month_before(this_year, this_month);
                    return month_period(y, m);
                }
                Some("year") => return year_period(this_year - 1),
                Some("weekend") => return Period::days(today - 9, today),
                _ => {}
            },
            "ago" if i > 0 => {
                let unit = word(i - 1)?;
                let n = i
                    .checked_sub(2)
                    .and_then(|j| amount(words[j].as_str()))
                    .unwrap_or(1);
                let (center, half) = match unit.trim_end_matches('s') {
                    "day" => (n, 1),
                    "week" => (7 * n, 4),
                    "month" => (30 * n, 15),
                    "year" => (365 * n, 120),
                    _ => continue,
                };
                return Period::days(today - center - half, today - center + half + 1);
            }
            _ => {}
        }
        if let Some(m) = month_number(w) {
            let year = word(i + 1).and_then(year_of);
            // "8 May 2023", "May 8, 2023"
            let day_before = i
                .checked_sub(1)
                .and_then(|j| words[j].parse::<u32>().ok())
                .filter(|d| (1..=31).contains(d));
            let day_after = word(i + 1)
                .and_then(|d| d.parse::<u32>().ok())
                .filter(|d| (1..=31).contains(d));
            let prepositioned = i.checked_sub(1).is_some_and(|j| {
                matches!(
                    words[j].as_str(),
                    "in" | "during" | "of" | "early" | "late" | "mid" | "since" | "around"
                )
            });
            match (day_before.or(day_after), year) {
                (Some(d), _) => {
                    let y = year
                        .or_else(|| day_after.and(word(i + 2)).and_then(year_of))
                        .unwrap_or_else(|| latest_year_of(m, this_year, this_month));
                    let day = days_from_civil(y, m, d);
                    return Period::days(day, day + 1);
                }
                (None, Some(y)) => return month_period(y, m),
                (None, None) if prepositioned && (w != "may" || i > 0) => {
                    return month_period(latest_year_of(m, this_year, this_month), m);
                }
                _ => {}
            }
        }
        if let Some(y) = year_of(w) {
            let before = i.checked_sub(1).map(|j| words[j].as_str());
            if matches!(before, Some("in" | "during" | "of" | "since" | "around")) {
                return year_period(y);
            }
        }
    }
    None
}

/// A count written as a digit or a word ("two", "a", "couple").
fn amount(w: &str) -> Option<i64> {
    if let Ok(n) = w.parse::<i64>() {
        return (1..=100).contains(&n).then_some(n);
    }
    Some(match w {
        "a" | "an" | "one" => 1,
        "two" | "couple" => 2,
        "three" | "few" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "several" => 4,
        _ => return None,
    })
}

/// 1–12 for a month's name or its abbreviation of three or four letters ("sep", "sept").
fn month_number(w: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| *m == w || ((3..=4).contains(&w.len()) && m.starts_with(w)))
        .and_then(|i| u32::try_from(i + 1).ok())
}

/// A plausible year (1900–2200).
fn year_of(w: &str) -> Option<i64> {
    w.parse::<i64>()
        .ok()
        .filter(|y| (1900..=2200).contains(y) && w.len() == 4)
}

/// `YYYY-MM-DD` as days since the epoch.
fn iso_day(w: &str) -> Option<i64> {
    let b = w.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = w.get(0..4)?.parse::<i64>().ok()?;
    let m = w.get(5..7)?.parse::<u32>().ok()?;
    let d = w.get(8..10)?.parse::<u32>().ok()?;
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| days_from_civil(y, m, d))
}

/// The year of month `m`'s latest occurrence that has begun by (`year`, `month`).
fn latest_year_of(m: u32, year: i64, month: u32) -> i64 {
    if m <= month { year } else { year - 1 }
}

fn month_before(year: i64, month: u32) -> (i64, u32) {
    if month == 1 {
        (year - 1, 12)
    } else {
        (year, month - 1)
    }
}

fn month_period(year: i64, month: u32) -> Option<Period> {
    let (ny, nm) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    Period::days(days_from_civil(year, month, 1), days_from_civil(ny, nm, 1))
}

fn year_period(year: i64) -> Option<Period> {
    Period::days(days_from_civil(year, 1, 1), days_from_civil(year + 1, 1, 1))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let m = u32::try_from(m).unwrap_or(1);
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    fn period(q: &str) -> Option<(String, String)> {
        let now = at("2023-06-15T12:00:00Z");
        period_in(q, now).map(|p| {
            let day = |t: Timestamp| {
                let (y, m, d) = civil_from_days((t.0 / DAY_MS) as i64);
                format!("{y}-{m:02}-{d:02}")
            };
            (day(p.from), day(p.until))
        })
    }

    fn check(q: &str, from: &str, until: &str) {
        assert_eq!(
            period(q),
            Some((from.to_string(), until.to_string())),
            "{q}"
        );
    }

    #[test]
    fn named_and_implied_periods() {
        check("What did Nora buy in May 2023?", "2023-05-01", "2023-06-01");
        check("What happened in March?", "2023-03-01", "2023-04-01");
        // A month after now's is last year's.
        check("Where did she go in September?", "2022-09-01", "2022-10-01");
        check("What did he say on 8 May 2023?", "2023-05-08", "2023-05-09");
        check("What was on May 8, 2023?", "2023-05-08", "2023-05-09");
        check("And on 2022-12-24?", "2022-12-24", "2022-12-25");
        check("What did Omar do in 2022?", "2022-01-01", "2023-01-01");
        check(
            "What did we talk about yesterday?",
            "2023-06-14",
            "2023-06-15",
        );
        check(
            "What did she adopt two weeks ago?",
            "2023-05-28",
            "2023-06-06",
        );
        check("Who called 3 days ago?", "2023-06-11", "2023-06-14");
        check("What happened last month?", "2023-05-01", "2023-06-01");
        check("What happened last year?", "2022-01-01", "2023-01-01");
        check("Anything new since last week?", "2023-06-01", "2023-06-15");
        check("Where was he a month ago?", "2023-05-01", "2023-06-01");
    }

    #[test]
    fn no_period_where_none_is_named() {
        for q in [
            "May I ask what your dog is called?",
            "What is the name of Nora's puppy?",
            "When did Mateo graduate?",
            "How many marches did she join?",
            "Room 2023 is on the left",
        ] {
            assert_eq!(period(q), None, "{q}");
        }
    }

    #[test]
    fn the_calendar_round_trips() {
        for day in [-1_000_i64, 0, 19_000, 19_500, 60_000] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(19_523), (2023, 6, 15));
    }
}
