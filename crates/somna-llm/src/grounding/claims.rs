//! The checkable values of a text ([`claims`]) and what a source text supports ([`Evidence`]).
//!
//! A claim is a value a model can get wrong in a way that matters and that a plain lookup can
//! check: a number or amount (`470`, `1,200`, `forty`, `14th`), a day (`2026-11-24`, `May 7`,
//! `Tuesday`, a month), a time (`9:05`), an ID-like token (`LX-4471`, `B12`, `NATO`) or a proper
//! name (the project's entity detection, [`text::entity_runs`]). Everything else in a note (its
//! wording, its verbs) is the model's to choose, with one exception the [`Grounder`] adds: a word
//! its sources say only once ([`Claim::Word`]).
//!
//! [`Grounder`]: super::Grounder

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

use somna_core::retrieval::visit_terms;
use somna_text::words as text;

/// One checkable value of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// A number, normalized (`1200`, `4.5`).
    Number(String),
    /// A calendar day, `2026-11-24`.
    Day(String),
    /// A day of a month without a year (`May 7`): (month 1–12, day).
    MonthDay(u8, u8),
    /// A month named alone (1–12).
    Month(u8),
    /// A weekday named (0 = Monday).
    Weekday(u8),
    /// A time of day, `9:05`.
    Time(String),
    /// An ID-like token, lower-cased and without punctuation (`lx4471`).
    Id(String),
    /// A proper name: its words, lower-cased.
    Name(Vec<String>),
    /// The capitalized first word of a sentence that is no common note starter (`Zorbath sold
    /// …`), lower-cased: a name unless the sources use it as a plain word.
    Lead(String),
    /// A lower-case word that the sources an item may cite say in one source only (see
    /// [`super::Grounder`]): `word` as the item writes it, `term` its search term (stemmed), by
    /// which it is looked up.
    Word { word: String, term: String },
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Claim::Number(n) => write!(f, "{n}"),
            Claim::Day(d) => write!(f, "{d}"),
            Claim::MonthDay(m, d) => write!(f, "{} {d}", MONTHS[usize::from(*m) - 1]),
            Claim::Month(m) => write!(f, "{}", MONTHS[usize::from(*m) - 1]),
            Claim::Weekday(w) => write!(f, "{}", WEEKDAYS[usize::from(*w)]),
            Claim::Time(t) => write!(f, "{t}"),
            Claim::Id(id) => write!(f, "{id}"),
            Claim::Name(words) => write!(f, "{}", words.join(" ")),
            Claim::Lead(word) | Claim::Word { word, .. } => write!(f, "{word}"),
        }
    }
}

use somna_core::retrieval::when::MONTHS;

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Upper-case words that name nothing checkable.
const PLAIN_CAPS: &[&str] = &["I", "OK", "AM", "PM", "A", "TODO", "FYI", "NB", "PS"];

/// Capitalized words that start a note without naming anyone: a note's first word is a name claim
/// unless it is one of these, a stop word, or shaped like a verb or adverb (`-ed`, `-ing`, `-ly`).
const NOTE_STARTERS: &[&str] = &[
    "assistant",
    "user",
    "player",
    "customer",
    "visitor",
    "everyone",
    "someone",
    "nobody",
    "together",
    "plans",
    "plan",
    "payment",
    "price",
    "meeting",
    "discussion",
    "talk",
    "conversation",
    "topic",
    "topics",
    "trade",
    "order",
    "request",
    "question",
    "questions",
    "both",
    "later",
    "earlier",
    "first",
    "then",
    "next",
    "finally",
    "also",
    "agreement",
    "deal",
    "nothing",
    "none",
];

/// The number words a claim or a source may spell out, with their values.
const UNITS: [(&str, u64); 20] = [
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
];
const TENS: [(&str, u64); 8] = [
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];

fn small_number_word(word: &str) -> Option<u64> {
    UNITS
        .iter()
        .chain(TENS.iter())
        .find(|(w, _)| *w == word)
        .map(|(_, v)| *v)
        .or_else(|| {
            let (tens, unit) = word.split_once('-')?;
            let t = TENS.iter().find(|(w, _)| *w == tens)?.1;
            let u = UNITS[1..10].iter().find(|(w, _)| *w == unit)?.1;
            Some(t + u)
        })
}

/// A number written as digits (`1,200`, `4.50`, `$40`), normalized; `None` for anything else.
fn digits_value(token: &str) -> Option<String> {
    let t = token.trim_start_matches(['$', '£', '€', '¥', '#', '+']);
    if t.is_empty() || !t.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
    {
        return None;
    }
    let t = t.trim_end_matches(['.', ',']);
    // `1,200` groups thousands; `4,5` is not a grouping we read as one number.
    let grouped = t.contains(',')
        && t.split(',')
            .skip(1)
            .all(|g| g.len() == 3 || g.contains('.'));
    let plain = if grouped {
        t.replace(',', "")
    } else {
        t.to_string()
    };
    if plain.contains(',') || plain.matches('.').count() > 1 {
        return None;
    }
    Some(normalize_number(&plain))
}

fn normalize_number(n: &str) -> String {
    match n.split_once('.') {
        Some((int, frac)) => {
            let frac = frac.trim_end_matches('0');
            let int = int.trim_start_matches('0');
            let int = if int.is_empty() { "0" } else { int };
            if frac.is_empty() {
                int.to_string()
            } else {
                format!("{int}.{frac}")
            }
        }
        None => {
            let t = n.trim_start_matches('0');
            if t.is_empty() { "0".into() } else { t.into() }
        }
    }
}

/// An ISO day `2026-11-24`.
fn iso_day(token: &str) -> Option<String> {
    let b = token.as_bytes();
    (b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        }))
    .then(|| token.to_string())
}

/// A time of day `9:05`, `09:05`, `9:05pm`, normalized to `9:05` (24-hour when am/pm is given).
fn time_of_day(token: &str) -> Option<String> {
    let lower = token.to_lowercase();
    let (body, pm) = if let Some(b) = lower.strip_suffix("pm").or(lower.strip_suffix("p.m")) {
        (b.trim_end(), Some(true))
    } else if let Some(b) = lower.strip_suffix("am").or(lower.strip_suffix("a.m")) {
        (b.trim_end(), Some(false))
    } else {
        (lower.as_str(), None)
    };
    let (h, m) = body.split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (Ok(mut h), Ok(m)) = (h.parse::<u32>(), m.parse::<u32>()) else {
        return None;
    };
    if pm == Some(true) && h < 12 {
        h += 12;
    }
    if pm == Some(false) && h == 12 {
        h = 0;
    }
    (h < 24 && m < 60).then(|| format!("{h}:{m:02}"))
}

fn month_of(word: &str) -> Option<u8> {
    const SHORT: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let lower = word.to_lowercase();
    let lower = lower.trim_end_matches('.');
    let lower = if lower == "sept" { "sep" } else { lower };
    MONTHS
        .iter()
        .position(|m| *m == lower)
        .or_else(|| SHORT.iter().position(|m| *m == lower))
        .map(|i| i as u8 + 1)
}

fn weekday_of(word: &str) -> Option<u8> {
    let lower = word.to_lowercase();
    WEEKDAYS.iter().position(|d| *d == lower).map(|i| i as u8)
}

/// A day of the month written as a token: `7`, `7th`, `21st`, `seventh`, `twenty-first`.
fn day_of_month(token: &str) -> Option<u8> {
    let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return ordinal_word(token);
    }
    let suffix = &token[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse::<u8>().ok().filter(|d| (1..=31).contains(d))
}

/// The ordinals a day of the month is written with, below twenty.
const ORDINALS: [&str; 19] = [
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
];

/// The value of an ordinal word up to a month's last day (`seventh` = 7, `twenty-seventh` = 27,
/// `thirtieth` = 30), any case.
fn ordinal_word(word: &str) -> Option<u8> {
    // Every ordinal ends so: the rest of the words are turned away before they are lower-cased.
    let end = word.as_bytes().get(word.len().saturating_sub(2)..)?;
    if !["th", "st", "nd", "rd"]
        .iter()
        .any(|s| end.eq_ignore_ascii_case(s.as_bytes()))
    {
        return None;
    }
    let lower = word.to_lowercase();
    let unit = |w: &str| {
        ORDINALS
            .iter()
            .position(|o| *o == w)
            .and_then(|i| u8::try_from(i + 1).ok())
    };
    match lower.as_str() {
        "twentieth" => return Some(20),
        "thirtieth" => return Some(30),
        _ => {}
    }
    if let Some(v) = unit(&lower) {
        return Some(v);
    }
    let (tens, rest) = lower.split_once('-')?;
    let tens = match tens {
        "twenty" => 20,
        "thirty" => 30,
        _ => return None,
    };
    let v = tens + unit(rest).filter(|u| *u < 10)?;
    (v <= 31).then_some(v)
}

/// A token of a text: a word as written, without the punctuation around it.
fn tokens(text: &str) -> Vec<&str> {
    text::bare_words(text, &['‘', '’', '*', '…'])
        .filter(|t| !t.is_empty())
        .collect()
}

/// The values of a token that holds digits: numbers, an ID, a day or a time.
fn digit_claims(token: &str, out: &mut Vec<Claim>) {
    if let Some(day) = iso_day(token) {
        out.push(Claim::Day(day));
        return;
    }
    if let Some(t) = time_of_day(token) {
        out.push(Claim::Time(t));
        return;
    }
    if let Some(n) = digits_value(token) {
        out.push(Claim::Number(n));
        return;
    }
    let t = token.trim_start_matches(['$', '£', '€', '¥', '#', '+', '~']);
    let t = t.trim_end_matches('%');
    if let Some(n) = digits_value(t) {
        out.push(Claim::Number(n));
        return;
    }
    // A range or a list of numbers: `40-50`, `3/4`.
    if t.contains(['-', '–', '/', 'x'])
        && t.split(['-', '–', '/', 'x'])
            .all(|p| !p.is_empty() && digits_value(p).is_some())
    {
        for p in t.split(['-', '–', '/', 'x']) {
            if let Some(n) = digits_value(p) {
                out.push(Claim::Number(n));
            }
        }
        return;
    }
    // A number with a short unit or an ordinal: `14th`, `5kg`, `1990s`, `9am`.
    let digits: String = t
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .collect();
    let unit = &t[digits.len()..];
    if !digits.is_empty()
        && unit.len() <= 3
        && unit.chars().all(|c| c.is_ascii_lowercase())
        && let Some(n) = digits_value(&digits)
    {
        out.push(Claim::Number(n));
        return;
    }
    let id = id_key(t);
    if !id.is_empty() {
        out.push(Claim::Id(id));
    }
}

/// True for a token that reads as an ID-like code (`GF-1187`, `room12`), not as a number, a day,
/// a time, a range or a number with a unit; a token with other punctuation in it is no code (the
/// `"price":35` of a tool call's arguments, written without spaces, holds 35).
fn is_code(token: &str) -> bool {
    if !token
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '#'))
    {
        return false;
    }
    let mut values = Vec::new();
    digit_claims(token, &mut values);
    matches!(values.as_slice(), [Claim::Id(_)])
}

/// An ID-like token as it is compared: lower-cased letters and digits only.
fn id_key(token: &str) -> String {
    token
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn is_acronym(token: &str) -> bool {
    let letters = token.chars().filter(char::is_ascii_alphabetic).count();
    letters >= 2
        && token
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '-' || c == '&' || c == '.')
        && !PLAIN_CAPS.contains(&token)
}

/// The checkable values of `text` (its markers already stripped), in order, without repeats.
pub fn claims(text: &str) -> Vec<Claim> {
    let mut out: Vec<Claim> = Vec::new();
    let toks = tokens(text);
    let mut skip = HashSet::new();
    // Days of a month: `May 7`, `7 May`, `7th of May`.
    for (i, t) in toks.iter().enumerate() {
        let Some(m) = month_of(t).filter(|_| t.starts_with(char::is_uppercase)) else {
            continue;
        };
        let next = toks
            .get(i + 1)
            .and_then(|n| day_of_month(n))
            .map(|d| (i + 1, d));
        let before = i
            .checked_sub(1)
            .and_then(|j| day_of_month(toks[j]).map(|d| (j, d)))
            .or_else(|| {
                let j = i.checked_sub(2)?;
                (toks[i - 1] == "of")
                    .then(|| day_of_month(toks[j]).map(|d| (j, d)))
                    .flatten()
            });
        skip.insert(i);
        match next.or(before) {
            Some((j, d)) => {
                skip.insert(j);
                out.push(Claim::MonthDay(m, d));
            }
            None => out.push(Claim::Month(m)),
        }
    }
    let mut words_run: Vec<u64> = Vec::new();
    let flush = |run: &mut Vec<u64>, out: &mut Vec<Claim>| {
        if let Some(v) = words_value(run) {
            out.push(Claim::Number(v.to_string()));
        }
        run.clear();
    };
    for (i, t) in toks.iter().enumerate() {
        if skip.contains(&i) {
            flush(&mut words_run, &mut out);
            continue;
        }
        let lower = t.to_lowercase();
        if let Some(v) = small_number_word(&lower) {
            words_run.push(v);
            continue;
        }
        if matches!(lower.as_str(), "hundred" | "thousand") && !words_run.is_empty() {
            words_run.push(if lower == "hundred" { 100 } else { 1000 });
            continue;
        }
        if lower == "and" && !words_run.is_empty() {
            continue;
        }
        flush(&mut words_run, &mut out);
        if t.chars().any(|c| c.is_ascii_digit()) {
            digit_claims(t, &mut out);
        } else if let Some(w) = weekday_of(t).filter(|_| t.starts_with(char::is_uppercase)) {
            out.push(Claim::Weekday(w));
        } else if is_acronym(t) {
            out.push(Claim::Id(id_key(t)));
        }
    }
    flush(&mut words_run, &mut out);
    out.extend(name_claims(text));
    let mut unique = Vec::new();
    for c in out {
        if !unique.contains(&c) {
            unique.push(c);
        }
    }
    unique
}

/// The value of a run of number words (`four hundred seventy` = 470); `None` for a lone "one"
/// (mostly a pronoun: "one of them") or an empty run.
fn words_value(run: &[u64]) -> Option<u64> {
    if run.is_empty() || run == [1] {
        return None;
    }
    let mut total = 0u64;
    let mut current = 0u64;
    for &v in run {
        match v {
            100 => current = current.max(1) * 100,
            1000 => {
                total += current.max(1) * 1000;
                current = 0;
            }
            _ => current += v,
        }
    }
    Some(total + current)
}

/// The proper names of `text`: each capitalized run's words, except months and weekdays; a run
/// that starts a sentence only when its first word is not a common note starter.
fn name_claims(text: &str) -> Vec<Claim> {
    let mut out = Vec::new();
    for sentence in text::sentences(text) {
        for (run, initial) in text::entity_runs(&sentence) {
            let mut words: Vec<&str> = run
                .split_whitespace()
                .filter(|w| !matches!(*w, "of" | "the"))
                .collect();
            if initial && !words.is_empty() {
                let first = words.remove(0);
                if !is_common_starter(first)
                    && month_of(first).is_none()
                    && weekday_of(first).is_none()
                {
                    for w in text::words(first) {
                        out.push(Claim::Lead(w));
                    }
                }
            }
            let words: Vec<String> = words
                .into_iter()
                .filter(|w| month_of(w).is_none() && weekday_of(w).is_none())
                .flat_map(text::words)
                .collect();
            if !words.is_empty() {
                out.push(Claim::Name(words));
            }
        }
    }
    out
}

fn is_common_starter(word: &str) -> bool {
    let lower = word.to_lowercase();
    text::is_stop_word(&lower)
        || NOTE_STARTERS.contains(&lower.as_str())
        || super::note_verbs().contains(lower.as_str())
        || reads_as_verb(word)
}

/// True when `word` ends as a past tense, a participle, an adverb or a plural does ("-ed",
/// "-ing", "-ly", "-ies"; any case), past a stem of three letters: a sentence's first word that
/// reads so starts no name, unless the sources speak of such a person ("Alfred").
pub(super) fn reads_as_verb(word: &str) -> bool {
    let bytes = word.as_bytes();
    [&b"ed"[..], b"ing", b"ly", b"ies"].iter().any(|s| {
        bytes.len() > s.len() + 2 && bytes[bytes.len() - s.len()..].eq_ignore_ascii_case(s)
    })
}

/// A search term as the check stores it: its hash (two terms that hash alike, about 1 in 2⁶⁴ for
/// a pair, count as one: a word then looks held or common, never missing or rare).
pub(super) fn term_key(term: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(term)
}

/// What a set of source texts (and the times of their turns) supports.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    words: HashSet<String>,
    /// The search terms (stems) of `words`, by [`term_key`]: what a [`Claim::Word`] is looked up
    /// in, built the first time one is (most evidence is asked about values only).
    terms: OnceLock<HashSet<u64>>,
    numbers: HashSet<String>,
    ids: HashSet<String>,
    days: HashSet<String>,
    month_days: HashSet<(u8, u8)>,
    months: HashSet<u8>,
    weekdays: HashSet<u8>,
    times: HashSet<String>,
}

impl Evidence {
    /// Evidence of nothing.
    pub fn new() -> Self {
        Evidence::default()
    }

    /// Adds a source text (its markers already stripped).
    pub fn add_text(&mut self, text: &str) {
        // New words: the terms are read again when next asked for.
        self.terms.take();
        for w in text::words(text) {
            if let Some(v) = small_number_word(&w) {
                self.numbers.insert(v.to_string());
            }
            self.words.insert(w);
        }
        for c in claims(text) {
            self.add_claim(c);
        }
        // The digits inside a token that is no code (`9:05` holds 9, `3rd-floor` 3), and every
        // token as an ID. A code's digits are part of the code, not a quantity: `GF-1187` backs
        // the ID `gf1187` and no number (as 1187 it let an invented price of 1187 through, as
        // `HF-0657` did for 657 before), and neither does a run with a leading zero.
        for t in tokens(text) {
            // An ordinal past the ninth is the number a note writes for it ("until the
            // twenty-seventh" backs "until the 27th"); "first", "second" and the like say no
            // number.
            if let Some(v) = ordinal_word(t).filter(|v| *v >= 10) {
                self.numbers.insert(v.to_string());
            }
            if t.chars().any(|c| c.is_ascii_digit()) && !is_code(t) {
                for run in t.split(|c: char| !c.is_ascii_digit()) {
                    if !run.is_empty() && (run == "0" || !run.starts_with('0')) {
                        self.numbers.insert(normalize_number(run));
                    }
                }
            }
            let id = id_key(t);
            if !id.is_empty() {
                self.ids.insert(id);
            }
        }
    }

    /// Adds a name the source is known by (a speaker, the agent's own name).
    pub fn add_name(&mut self, name: &str) {
        self.terms.take();
        for w in text::words(name) {
            self.words.insert(w);
        }
    }

    /// Adds the time a source turn was said: its day (and year, month, weekday) and minute.
    pub fn add_time(&mut self, minute_label: &str) {
        let Some(day) = minute_label.get(..10).and_then(iso_day) else {
            return;
        };
        self.add_day(&day);
        if let Some(t) = minute_label.get(11..16).and_then(time_of_day) {
            self.times.insert(t);
        }
    }

    fn add_day(&mut self, day: &str) {
        let (Ok(y), Ok(m), Ok(d)) = (
            day[..4].parse::<i32>(),
            day[5..7].parse::<u8>(),
            day[8..10].parse::<u8>(),
        ) else {
            return;
        };
        self.days.insert(day.to_string());
        self.numbers.insert(y.to_string());
        self.months.insert(m);
        self.month_days.insert((m, d));
        if let Some(w) = weekday(y, m, d) {
            self.weekdays.insert(w);
        }
    }

    fn add_claim(&mut self, claim: Claim) {
        match claim {
            Claim::Number(n) => {
                self.numbers.insert(n);
            }
            Claim::Day(d) => self.add_day(&d),
            Claim::MonthDay(m, d) => {
                self.month_days.insert((m, d));
                self.months.insert(m);
                self.numbers.insert(d.to_string());
            }
            Claim::Month(m) => {
                self.months.insert(m);
            }
            Claim::Weekday(w) => {
                self.weekdays.insert(w);
            }
            Claim::Time(t) => {
                self.times.insert(t);
            }
            Claim::Id(id) => {
                self.ids.insert(id);
            }
            Claim::Word { word, .. } => {
                self.terms.take();
                self.words.insert(word.to_lowercase());
            }
            Claim::Name(_) | Claim::Lead(_) => {}
        }
    }

    /// True when the texts say a word whose search term is `term`.
    pub fn holds_term(&self, term: &str) -> bool {
        let terms = self.terms.get_or_init(|| {
            let mut terms = HashSet::with_capacity(self.words.len());
            for w in &self.words {
                visit_terms(w, |t| {
                    terms.insert(term_key(t));
                });
            }
            terms
        });
        terms.contains(&term_key(term))
    }

    /// True when this evidence holds `claim`'s value.
    pub fn supports(&self, claim: &Claim) -> bool {
        match claim {
            Claim::Number(n) => self.numbers.contains(n),
            Claim::Day(d) => self.days.contains(d),
            Claim::MonthDay(m, d) => self.month_days.contains(&(*m, *d)),
            Claim::Month(m) => self.months.contains(m),
            Claim::Weekday(w) => self.weekdays.contains(w),
            Claim::Time(t) => self.times.contains(t),
            Claim::Id(id) => self.ids.contains(id) || self.words.contains(id),
            Claim::Name(words) => words.iter().all(|w| self.words.contains(w)),
            Claim::Lead(w) => self.words.contains(w),
            Claim::Word { term, .. } => self.holds_term(term),
        }
    }
}

/// The weekday of a date (0 = Monday), by Sakamoto's method.
fn weekday(y: i32, m: u8, d: u8) -> Option<u8> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    const T: [i32; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let y = if m < 3 { y - 1 } else { y };
    let sunday_based =
        (y + y / 4 - y / 100 + y / 400 + T[usize::from(m) - 1] + i32::from(d)).rem_euclid(7);
    // 0 = Sunday → Monday-based.
    Some(((sunday_based + 6) % 7) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        claims(text)
            .into_iter()
            .filter_map(|c| match c {
                Claim::Name(w) => Some(w.join(" ")),
                Claim::Lead(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claims_are_numbers_days_times_ids_and_names() {
        let c = claims(
            "[2026-11-24] Mara paid 1,200 silver ($40.50) to Captain Hale for ticket LX-4471 at 9:05pm on May 7th.",
        );
        assert!(c.contains(&Claim::Day("2026-11-24".into())));
        assert!(c.contains(&Claim::Number("1200".into())));
        assert!(c.contains(&Claim::Number("40.5".into())));
        assert!(c.contains(&Claim::Id("lx4471".into())));
        assert!(c.contains(&Claim::Time("21:05".into())));
        assert!(c.contains(&Claim::MonthDay(5, 7)));
        assert!(c.contains(&Claim::Name(vec!["mara".into()])));
        assert_eq!(
            claims("Zorbath sold it"),
            vec![Claim::Lead("zorbath".into())]
        );
        assert!(c.contains(&Claim::Name(vec!["captain".into(), "hale".into()])));
        assert_eq!(
            claims("They agreed on four hundred seventy gold and the 14th, one of them said."),
            vec![Claim::Number("470".into()), Claim::Number("14".into())]
        );
        assert_eq!(
            claims("NATO met on Tuesday in March"),
            vec![Claim::Month(3), Claim::Id("nato".into()), Claim::Weekday(1)]
        );
        // Note starters, stop words and verb-shaped first words name nobody.
        assert!(names("Discussed the harvest with Tobin.").contains(&"tobin".to_string()));
        assert_eq!(names("Discussed the harvest."), Vec::<String>::new());
        assert_eq!(names("The user likes rye."), Vec::<String>::new());
        assert_eq!(names("Zorbath sold the map."), vec!["zorbath".to_string()]);
    }

    #[test]
    fn evidence_supports_what_its_sources_say() {
        let mut e = Evidence::new();
        e.add_text("I'll take forty loaves for GF-1187, paid 1200 on the 3rd of May.");
        e.add_name("Mara");
        e.add_time("2026-11-24 09:05");
        e.add_text("Meet me at 9:05 by the 3rd-floor door.");
        for text in [
            "Mara ordered 40 loaves",
            "ticket GF-1187, 1,200 paid",
            "at 9 by the door on floor 3",
            "on 2026-11-24 at 9:05, a Tuesday in November",
            "due May 3",
        ] {
            for c in claims(text) {
                assert!(e.supports(&c), "{c} of {text:?}");
            }
        }
        for invented in [
            "Mara ordered 41 loaves",
            "ticket GF-1188",
            "on 2026-11-25",
            "Tobin paid",
            "due May 4",
            "at 10:05",
            // A code's digits are no amount.
            "paid 1187 silver",
            "the ticket costs 1,187",
        ] {
            assert!(
                claims(invented).iter().any(|c| !e.supports(c)),
                "{invented:?} passed"
            );
        }
    }

    /// A day written in words ("the twenty-seventh of June") backs the same day in digits, and an
    /// ordinal past the ninth backs its number ("until the 27th"); a small ordinal ("the first
    /// time") backs no number, and a day that differs is still a day nobody said.
    #[test]
    fn a_day_in_words_backs_the_day_in_digits() {
        assert_eq!(ordinal_word("Twenty-Seventh"), Some(27));
        assert_eq!(ordinal_word("thirtieth"), Some(30));
        assert_eq!(ordinal_word("thirty-ninth"), None);
        assert_eq!(ordinal_word("twenty-seven"), None);
        assert_eq!(
            claims("on the twenty-seventh of June"),
            vec![Claim::MonthDay(6, 27)]
        );
        assert_eq!(claims("June first"), vec![Claim::MonthDay(6, 1)]);
        let mut e = Evidence::new();
        e.add_text("I'm marrying Bram on the twenty-seventh of June.");
        let mut secret = Evidence::new();
        secret.add_text(
            "Keep it secret until the twenty-seventh. The first time, at the second bell.",
        );
        for (e, text) in [
            (&e, "on June 27"),
            (&e, "on 27 June"),
            (&secret, "until the 27th"),
        ] {
            for c in claims(text) {
                assert!(e.supports(&c), "{c} of {text:?}");
            }
        }
        for (e, invented) in [
            (&e, "on June 28"),
            (&secret, "until the 26th"),
            (&secret, "paid 1 silver"),
            (&secret, "for 2 days"),
        ] {
            assert!(
                claims(invented).iter().any(|c| !e.supports(c)),
                "{invented:?} passed"
            );
        }
    }

    /// A word is held by its term ("succulent" holds "succulents"), and evidence asked once and
    /// then added to answers for what it holds now.
    #[test]
    fn a_word_is_held_by_its_term_and_evidence_that_grows_is_read_again() {
        let term = somna_core::retrieval::terms("succulents").remove(0);
        let word = Claim::Word {
            word: "succulents".into(),
            term,
        };
        let mut known = Evidence::new();
        known.add_name("Wren");
        assert!(!known.supports(&word));
        let mut grown = known.clone();
        grown.add_text("My succulent is thriving.");
        assert!(grown.supports(&word));
        assert!(!known.supports(&word));
    }

    #[test]
    fn weekdays_are_right() {
        assert_eq!(weekday(2026, 11, 24), Some(1)); // a Tuesday
        assert_eq!(weekday(2000, 1, 1), Some(5)); // a Saturday
    }
}
