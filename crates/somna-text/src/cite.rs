//! Citation markers: `[#12]`, `[#12, #15]`, `[#12-14]` written at the end of an item (or anywhere
//! in it), read back into the cited numbers, stripped and written again.

/// Most numbers one range marker (`[#12-40]`) expands to; a longer range cites its ends only.
const MAX_RANGE: u64 = 50;

/// An item's text without its markers, and the numbers they cite (in order, deduplicated).
pub fn split(item: &str) -> (String, Vec<u64>) {
    let mut text = String::with_capacity(item.len());
    let mut cites = Vec::new();
    split_into(item, &mut text, &mut cites);
    (text, cites)
}

/// The item's text without its markers.
pub fn strip(item: &str) -> String {
    split(item).0
}

/// Every marker of `text` removed, line by line (a summary's or an entry's whole text). One pass
/// into one string: every chat prompt strips its summary.
pub fn strip_all(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cites = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if !line.contains("[#") && !line.contains("(#") {
            out.push_str(line);
            continue;
        }
        // A leading bullet's indent is kept.
        let item = line.trim_start();
        out.push_str(&line[..line.len() - item.len()]);
        cites.clear();
        split_into(item, &mut out, &mut cites);
    }
    out
}

/// Appends `item` without its markers to `out` (white space collapsed, no space before closing
/// punctuation, trimmed) and the numbers they cite to `cites` (deduplicated).
fn split_into(item: &str, out: &mut String, cites: &mut Vec<u64>) {
    let mut tidy = Tidy::new(out);
    let mut rest = item;
    while let Some(start) = rest.find(['[', '(']) {
        let open = rest.as_bytes()[start];
        let close = if open == b'[' { ']' } else { ')' };
        let after = &rest[start + 1..];
        let inner_end = after.find(close);
        match inner_end.and_then(|end| marker_numbers(&after[..end])) {
            Some(numbers) => {
                tidy.push_str(&rest[..start]);
                for n in numbers {
                    if !cites.contains(&n) {
                        cites.push(n);
                    }
                }
                rest = &after[inner_end.unwrap_or(0) + 1..];
            }
            None => {
                tidy.push_str(&rest[..=start]);
                rest = after;
            }
        }
    }
    tidy.push_str(rest);
}

/// Writes text with white space collapsed to single spaces, none before closing punctuation
/// (`.,;:!?`), none at either end.
struct Tidy<'a> {
    out: &'a mut String,
    /// Whether anything was written yet (a space is never written first).
    started: bool,
    /// A space is due before the next character that is not closing punctuation.
    space: bool,
}

impl<'a> Tidy<'a> {
    fn new(out: &'a mut String) -> Self {
        Tidy {
            out,
            started: false,
            space: false,
        }
    }

    /// Writes `text` a word (a run without white space) at a time: only a word's first character
    /// decides the space before it.
    fn push_str(&mut self, text: &str) {
        let mut rest = text;
        while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
            if start > 0 {
                self.space = self.started;
            }
            let run = &rest[start..];
            let end = run.find(char::is_whitespace).unwrap_or(run.len());
            let word = &run[..end];
            if self.space && !word.starts_with(['.', ',', ';', ':', '!', '?']) {
                self.out.push(' ');
            }
            self.space = false;
            self.started = true;
            self.out.push_str(word);
            rest = &run[end..];
        }
        if !rest.is_empty() {
            self.space = self.started;
        }
    }
}

/// `text` with a marker citing `cites` at its end (`text [#3, #9]`); `text` alone when there is none.
pub fn with_marker(text: &str, cites: &[u64]) -> String {
    if cites.is_empty() {
        return text.to_string();
    }
    format!("{text} {}", marker(cites))
}

/// The marker of `cites`: `[#3, #9]`.
pub fn marker(cites: &[u64]) -> String {
    let inner = cites
        .iter()
        .map(|n| format!("#{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("[{inner}]")
}

/// The numbers of a marker's inside (`#12, #15`, `#12-14`, `#12 user (Mara) at 09:05`), or
/// `None` when it is not a marker (it must start with `#` and a digit).
fn marker_numbers(inner: &str) -> Option<Vec<u64>> {
    let inner = inner.trim();
    let body = inner.strip_prefix('#')?;
    if !body.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // A copied turn header (`#12 user (Mara) at 09:05`) cites its turn: read up to the first word
    // other than "and".
    let mut out = Vec::new();
    for part in body.split([',', ';', ' ', '&']) {
        let part = part.trim().trim_start_matches('#');
        if part.is_empty() || part == "and" {
            continue;
        }
        let (from, to) = match part.split_once(['-', '–']) {
            Some((a, b)) => (a, b.trim_start_matches('#')),
            None => (part, part),
        };
        let (Ok(from), Ok(to)) = (from.trim().parse::<u64>(), to.trim().parse::<u64>()) else {
            break;
        };
        if to >= from && to - from < MAX_RANGE {
            out.extend(from..=to);
        } else {
            out.push(from);
            out.push(to);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `Tidy::push_str` as it was written first, a character at a time: the reference.
    fn tidy_by_char(pieces: &[&str]) -> String {
        let mut out = String::new();
        let (mut started, mut space) = (false, false);
        for c in pieces.iter().flat_map(|p| p.chars()) {
            if c.is_whitespace() {
                space = started;
            } else {
                if space && !matches!(c, '.' | ',' | ';' | ':' | '!' | '?') {
                    out.push(' ');
                }
                space = false;
                started = true;
                out.push(c);
            }
        }
        out
    }

    proptest! {
        /// Written a word at a time, pieces give what the character-at-a-time writer gave.
        #[test]
        fn tidy_writes_words_as_it_wrote_characters(
            pieces in proptest::collection::vec("[ a.,;!?\\t\n\u{a0}é\\[#1\\]]{0,12}", 0..5),
        ) {
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let mut out = String::new();
            let mut tidy = Tidy::new(&mut out);
            for p in &pieces {
                tidy.push_str(p);
            }
            prop_assert_eq!(out, tidy_by_char(&pieces));
        }
    }

    #[test]
    fn markers_are_read_stripped_and_written() {
        assert_eq!(
            split("Mara paid 40 silver [#12, #15]."),
            ("Mara paid 40 silver.".to_string(), vec![12, 15])
        );
        assert_eq!(
            split("[#3] Tobin left (#4)"),
            ("Tobin left".into(), vec![3, 4])
        );
        assert_eq!(split("range [#7-9]").1, vec![7, 8, 9]);
        assert_eq!(split("both [#7 and #9]").1, vec![7, 9]);
        assert_eq!(split("[#1-#400]").1, vec![1, 400]);
        assert_eq!(
            split("copied [#12 user (Mara) at 09:05] header").1,
            vec![12]
        );
        // Not markers: brackets without a number after `#`, dates, links.
        assert_eq!(
            split("[2026-11-24] Mara (the baker) [see #3]"),
            ("[2026-11-24] Mara (the baker) [see #3]".into(), vec![])
        );
        assert_eq!(with_marker("a fact", &[3, 9]), "a fact [#3, #9]");
        assert_eq!(with_marker("a fact", &[]), "a fact");
        assert_eq!(
            strip_all("## Topic arc\n- one [#1]\n  - two (#2, #3)"),
            "## Topic arc\n- one\n  - two"
        );
    }
}
