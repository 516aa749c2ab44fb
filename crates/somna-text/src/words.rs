//! Text heuristics shared by the summarizer, the fact heuristics, grounding and the builtin
//! provider's brain: sentences, normalized words, cue phrases, named entities, artifacts, a stable
//! hash and a token estimate. Deterministic and dependency-free.

use std::collections::{BTreeMap, BTreeSet};

/// Splits `text` into sentences: at line breaks, and after `.`, `!`, `?` or `…` followed by white space.
/// Common abbreviations (`Mr.`, `e.g.`) do not end a sentence; bullet marks are dropped.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = strip_bullet(line.trim());
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut start = 0;
        for (k, &(i, c)) in chars.iter().enumerate() {
            // Skip the rest of a run of marks ("...", "?!") the previous cut already took.
            if !matches!(c, '.' | '!' | '?' | '…') || i < start {
                continue;
            }
            // Closing quotes and brackets belong to the sentence they close.
            let mut end_k = k;
            while let Some(&(_, next)) = chars.get(end_k + 1) {
                if matches!(next, '"' | '\'' | ')' | '”' | '’' | ']' | '.' | '!' | '?') {
                    end_k += 1;
                } else {
                    break;
                }
            }
            let Some(&(_, after)) = chars.get(end_k + 1) else {
                continue;
            };
            if !after.is_whitespace() {
                continue;
            }
            if c == '.' && is_abbreviation(&line[start..i]) {
                continue;
            }
            let end = chars.get(end_k + 1).map(|&(j, _)| j).unwrap_or(line.len());
            push_sentence(&mut out, &line[start..end]);
            start = end;
        }
        push_sentence(&mut out, &line[start..]);
    }
    out
}

/// The first of [`sentences`] of `text`, without splitting the rest of it (a long system prompt's
/// first line names the persona).
pub fn first_sentence(text: &str) -> Option<String> {
    // `sentences` cuts every line on its own, so the first line that has one holds it.
    text.lines()
        .find_map(|line| sentences(line).into_iter().next())
}

fn push_sentence(out: &mut Vec<String>, s: &str) {
    let s = s.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
}

fn strip_bullet(line: &str) -> &str {
    for mark in ["- ", "* ", "• "] {
        if let Some(rest) = line.strip_prefix(mark) {
            return rest.trim_start();
        }
    }
    line
}

fn is_abbreviation(before: &str) -> bool {
    const ABBREVIATIONS: &[&str] = &[
        "mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "no", "fig", "approx", "prof",
        "jr",
    ];
    let last = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_lowercase();
    ABBREVIATIONS.contains(&last.as_str())
        || (last.len() == 1 && last.chars().all(char::is_alphabetic))
}

/// Lower-cased words with apostrophes normalized and possessive `'s` dropped, padded with spaces on both
/// sides so that cue phrases can be matched as `" need to "`.
pub fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    for word in words(text) {
        out.push_str(&word);
        out.push(' ');
    }
    out
}

/// Lower-cased words (letters, digits, inner apostrophes; possessive `'s` dropped).
pub fn words(text: &str) -> Vec<String> {
    let lower = lowered(text);
    lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(|w| match w.strip_suffix("'s") {
            Some(stem) if !CONTRACTIONS_S.contains(&w) => stem.to_string(),
            _ => w.to_string(),
        })
        .collect()
}

/// True for a lower-case word ending in `'s` that is a contraction ("it's"), not a possessive:
/// [`words`] keeps its `'s`.
pub fn is_contraction(word: &str) -> bool {
    CONTRACTIONS_S.contains(&word)
}

/// Words ending in `'s` that are contractions, not possessives.
const CONTRACTIONS_S: &[&str] = &[
    "let's", "it's", "that's", "he's", "she's", "there's", "what's", "who's", "here's", "where's",
    "how's",
];

/// Words that carry content: not stop words, at least three characters (or digits).
pub fn content_words(text: &str) -> BTreeSet<String> {
    words(text)
        .into_iter()
        .filter(|w| (w.len() >= 3 || w.chars().any(|c| c.is_ascii_digit())) && !is_stop_word(w))
        .collect()
}

/// How many of `keys` are among the [`content_words`] of `text`: that set's intersection with
/// `keys`, counted without building it (no string a word).
pub fn content_overlap(text: &str, keys: &BTreeSet<String>) -> usize {
    let lower = lowered(text);
    let mut found: Vec<&str> = Vec::new();
    for w in lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
    {
        let w = match w.strip_suffix("'s") {
            Some(stem) if !CONTRACTIONS_S.contains(&w) => stem,
            _ => w,
        };
        if keys.contains(w)
            && (w.len() >= 3 || w.chars().any(|c| c.is_ascii_digit()))
            && !is_stop_word(w)
            && !found.contains(&w)
        {
            found.push(w);
        }
    }
    found.len()
}

/// `text` lower-cased with curly apostrophes made straight: what [`words`] splits. A key of
/// [`content_words`] absent from it as a substring is in none of `text`'s parts.
pub fn lowered(text: &str) -> String {
    text.to_lowercase().replace(['’', '‘'], "'")
}

/// True when `normalized_text` (from [`normalized`]) contains any of `cues` (each written as plain words).
pub fn has_cue(normalized_text: &str, cues: &[&str]) -> bool {
    cues.iter().any(|cue| contains_words(normalized_text, cue))
}

/// How many of `cues` occur in `normalized_text`.
pub fn count_cues(normalized_text: &str, cues: &[&str]) -> usize {
    cues.iter()
        .filter(|cue| contains_words(normalized_text, cue))
        .count()
}

fn contains_words(normalized_text: &str, cue: &str) -> bool {
    let mut needle = String::with_capacity(cue.len() + 2);
    needle.push(' ');
    needle.push_str(cue);
    needle.push(' ');
    normalized_text.contains(&needle)
}

/// True when `text` mentions a number (digits, an ordinal, or a number word).
pub fn has_number(text: &str) -> bool {
    const NUMBER_WORDS: &[&str] = &[
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "fifteen", "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "dozen", "half",
        "once", "twice", "first", "second",
    ];
    text.chars().any(|c| c.is_ascii_digit())
        || words(text).iter().any(|w| {
            NUMBER_WORDS.contains(&w.as_str()) || w.split('-').any(|p| NUMBER_WORDS.contains(&p))
        })
}

/// True for an English function word or a word too common to name anything.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Sorted, for binary search.
const STOP_WORDS: &[&str] = &[
    "about", "above", "after", "again", "all", "already", "also", "always", "am", "an", "and",
    "any", "anyway", "are", "around", "as", "at", "back", "be", "because", "been", "before",
    "being", "both", "but", "by", "can", "can't", "could", "did", "didn't", "do", "does",
    "doesn't", "don't", "done", "down", "each", "else", "even", "ever", "every", "few", "for",
    "from", "get", "go", "going", "good", "got", "had", "has", "have", "he", "he'll", "her",
    "here", "him", "his", "how", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't",
    "it", "it'll", "its", "just", "know", "let", "let's", "like", "made", "make", "many", "may",
    "maybe", "me", "might", "more", "most", "much", "must", "my", "need", "never", "new", "next",
    "no", "not", "now", "of", "off", "oh", "ok", "okay", "on", "once", "one", "only", "or",
    "other", "our", "out", "over", "please", "really", "right", "said", "same", "say", "see",
    "she", "she'll", "should", "so", "some", "still", "such", "sure", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "they'll", "this", "those", "though", "to",
    "too", "up", "us", "very", "was", "we", "we'll", "well", "were", "what", "when", "where",
    "which", "while", "who", "why", "will", "with", "would", "yes", "yet", "you", "your",
];

/// Capitalized words that begin sentences (or clauses) without naming anything; they never start an entity.
/// Sorted, for binary search.
const COMMON_CAPITALIZED: &[&str] = &[
    "A", "About", "After", "Agreed", "All", "Already", "Also", "An", "And", "Any", "Are", "As",
    "At", "Be", "Before", "Both", "But", "By", "Can", "Could", "Deal", "Did", "Do", "Does", "Each",
    "Even", "Every", "Exactly", "Fine", "For", "From", "Good", "Great", "Had", "Has", "Have", "He",
    "Hello", "Her", "Here", "Hi", "His", "How", "If", "In", "Is", "It", "Its", "Just", "Last",
    "Let", "Maybe", "My", "Next", "No", "Not", "Now", "Of", "Oh", "Ok", "Okay", "On", "Once",
    "Only", "Or", "Our", "Please", "Right", "She", "Should", "Since", "So", "Some", "Sorry",
    "Still", "Sure", "Thank", "Thanks", "That", "The", "Their", "Then", "There", "These", "They",
    "This", "To", "Today", "Tomorrow", "We", "Well", "What", "When", "Who", "Yes", "You",
];

fn is_common_capitalized(word: &str) -> bool {
    COMMON_CAPITALIZED.binary_search(&word).is_ok()
}

/// Named entities of one sentence: runs of capitalized words (joined by `of` / `the` inside, as in
/// "Order of the Lantern"), with a possessive `'s` dropped; common sentence starters (`The`, `Then`) never
/// start a run. The flag tells whether the run started the sentence (such runs prove less: every sentence
/// starts with a capital).
pub fn entity_runs(sentence: &str) -> Vec<(String, bool)> {
    let mut runs = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut current_initial = false;
    let mut connectors: Vec<&str> = Vec::new();
    let mut at_start = true;
    for raw in sentence.split_whitespace() {
        let is_initial = at_start;
        at_start = raw.ends_with(['.', '!', '?', ':']);
        let word =
            raw.trim_matches(|c: char| !c.is_alphanumeric() && !matches!(c, '\'' | '’' | '-'));
        let word = word.trim_matches(['\'', '’', '-']);
        let (word, possessive) = match word.strip_suffix("'s").or_else(|| word.strip_suffix("’s"))
        {
            Some(w) => (w, true),
            None => (word, false),
        };
        let ends_clause =
            possessive || raw.ends_with([',', '.', ';', ':', '!', '?', ')', '"', '”']);
        if is_capitalized_word(word) && !(current.is_empty() && is_common_capitalized(word)) {
            if current.is_empty() {
                current_initial = is_initial;
            }
            current.extend(connectors.drain(..).map(str::to_string));
            current.push(word.to_string());
            if ends_clause {
                runs.push((current.join(" "), current_initial));
                current.clear();
            }
        } else if !current.is_empty()
            && !ends_clause
            && connectors.len() < 2
            && matches!(word, "of" | "the")
        {
            connectors.push(if word == "of" { "of" } else { "the" });
        } else {
            if !current.is_empty() {
                runs.push((current.join(" "), current_initial));
                current.clear();
            }
            connectors.clear();
        }
    }
    if !current.is_empty() {
        runs.push((current.join(" "), current_initial));
    }
    runs
}

fn is_capitalized_word(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !first.is_uppercase() {
        return false;
    }
    let rest: Vec<char> = chars.collect();
    // Titlecase words only: `TODO`, `I`, `I'm` and codes like `GF-1187` are not names.
    !rest.is_empty()
        && rest.iter().any(|c| c.is_lowercase())
        && rest
            .iter()
            .all(|c| c.is_alphabetic() || *c == '-' || *c == '\'' || *c == '’')
}

/// Named entities across many sentences, with how often each occurs.
#[derive(Debug, Default, Clone)]
pub struct EntityCounter {
    /// Entity → (occurrences, occurrences not at the start of a sentence).
    counts: BTreeMap<String, (u32, u32)>,
    /// Names of speakers: always entities.
    speakers: BTreeSet<String>,
}

impl EntityCounter {
    /// Counts the entities of one sentence. A run of several words at the start of a sentence also counts
    /// its tail as a mid-sentence occurrence ("Later Pip" proves "Pip", not "Later Pip").
    pub fn add_sentence(&mut self, sentence: &str) {
        for (entity, initial) in entity_runs(sentence) {
            if initial {
                if let Some((_, tail)) = entity.split_once(' ') {
                    let tail = tail.trim_start_matches("of ").trim_start_matches("the ");
                    if !tail.is_empty() {
                        let entry = self.counts.entry(tail.to_string()).or_default();
                        entry.0 += 1;
                        entry.1 += 1;
                    }
                }
            }
            let entry = self.counts.entry(entity).or_default();
            entry.0 += 1;
            if !initial {
                entry.1 += 1;
            }
        }
    }

    /// Counts a turn's speaker name as one occurrence.
    pub fn add_speaker(&mut self, name: &str) {
        let name = name.trim();
        if name.is_empty() {
            return;
        }
        self.speakers.insert(name.to_string());
        self.counts.entry(name.to_string()).or_default().0 += 1;
    }

    /// Adds an entity known from elsewhere (e.g. an earlier summary's list), with `n` occurrences.
    pub fn add_known(&mut self, entity: &str, n: u32) {
        let entry = self.counts.entry(entity.to_string()).or_default();
        entry.0 += n;
        entry.1 += n;
    }

    /// The entities: seen at least once mid-sentence, or speakers, with their counts.
    pub fn entities(&self) -> BTreeMap<String, u32> {
        self.counts
            .iter()
            .filter(|(name, (_, mid))| *mid > 0 || self.speakers.contains(*name))
            .map(|(name, (n, _))| (name.clone(), *n))
            .collect()
    }

    /// Entities that occur at least `min` times, most frequent first (ties alphabetically).
    pub fn recurring(&self, min: u32) -> Vec<(String, u32)> {
        let mut list: Vec<(String, u32)> = self
            .entities()
            .into_iter()
            .filter(|(_, n)| *n >= min)
            .collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        list
    }
}

/// True when `haystack` contains `needle` as whole words, ignoring case.
pub fn contains_phrase(haystack: &str, needle: &str) -> bool {
    let h = haystack.to_lowercase();
    let n = needle.to_lowercase();
    if n.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(pos) = h[from..].find(&n) {
        let start = from + pos;
        let end = start + n.len();
        let before_ok = h[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after_ok = h[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        from = start + n.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The punctuation that wraps a word in prose, which [`bare_words`] trims from both ends.
const WRAPPING: [char; 15] = [
    ',', ';', ':', '!', '?', '(', ')', '"', '\'', '“', '”', '[', ']', '{', '}',
];

/// The words of `text` as written, without the punctuation around them: each piece between
/// white space, trimmed at both ends of commas, colons, brackets, quotes (the [`WRAPPING`] marks)
/// and of the caller's `extra` marks, then of trailing full stops. A piece that was all
/// punctuation comes out empty.
pub fn bare_words<'a>(text: &'a str, extra: &'a [char]) -> impl Iterator<Item = &'a str> + 'a {
    text.split_whitespace().map(move |raw| {
        raw.trim_matches(|c: char| WRAPPING.contains(&c) || extra.contains(&c))
            .trim_end_matches('.')
    })
}

/// Artifacts mentioned in `text`: URLs, file names, reference codes (`GF-1187`), `backticked` spans,
/// code identifiers (`snake_case`, `camelCase`, `a::b`) and quoted titles.
pub fn artifacts(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut push = |s: &str| {
        let s = s.to_string();
        if !s.is_empty() && !found.contains(&s) {
            found.push(s);
        }
    };
    // Backticked spans.
    let mut parts = text.split('`');
    let _ = parts.next();
    while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
        if !inside.trim().is_empty() && inside.len() <= 80 {
            push(inside.trim());
        }
    }
    // Quoted titles: two to six capitalized words inside double quotes.
    for quote in quoted(text) {
        let ws: Vec<&str> = quote.split_whitespace().collect();
        if (2..=6).contains(&ws.len()) && ws.iter().filter(|w| is_capitalized_word(w)).count() >= 2
        {
            push(&quote);
        }
    }
    for token in bare_words(text, &['`', '<', '>']) {
        let url = token.starts_with("http://") || token.starts_with("https://");
        if url || is_file_name(token) || is_reference_code(token) || is_identifier(token) {
            push(token);
        }
    }
    found
}

fn quoted(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('"', '"'), ('“', '”')] {
        let mut rest = text;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            out.push(after[..j].trim().to_string());
            rest = &after[j + close.len_utf8()..];
        }
    }
    out
}

fn is_file_name(token: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "c", "cfg", "conf", "cpp", "csv", "doc", "docx", "gif", "go", "h", "html", "ini", "java",
        "jpeg", "jpg", "js", "json", "lock", "log", "md", "mp3", "mp4", "pdf", "png", "py", "rb",
        "rs", "sh", "sql", "svg", "toml", "ts", "txt", "wav", "xls", "xlsx", "xml", "yaml", "yml",
        "zip",
    ];
    let Some((stem, ext)) = token.rsplit_once('.') else {
        return false;
    };
    let stem_name = stem.rsplit('/').next().unwrap_or(stem);
    EXTENSIONS.contains(&ext)
        && !stem_name.is_empty()
        && stem_name.chars().any(char::is_alphanumeric)
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

fn is_reference_code(token: &str) -> bool {
    let Some((prefix, digits)) = token.split_once('-') else {
        return false;
    };
    (1..=6).contains(&prefix.len())
        && prefix.chars().all(|c| c.is_ascii_uppercase())
        && digits.len() >= 2
        && digits.chars().all(|c| c.is_ascii_digit())
}

fn is_identifier(token: &str) -> bool {
    let token = token.strip_suffix("()").unwrap_or(token);
    if token.contains("::") {
        return token
            .split("::")
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    }
    if !token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || token.len() < 4 {
        return false;
    }
    let snake = token.contains('_')
        && !token.starts_with('_')
        && !token.ends_with('_')
        && token.chars().any(|c| c.is_ascii_lowercase())
        && token.split('_').all(|p| !p.is_empty());
    let chars: Vec<char> = token.chars().collect();
    let camel = chars[0].is_ascii_lowercase()
        && chars
            .windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    snake || camel
}

/// FNV-1a: a stable 64-bit hash (the same on every platform and Rust version), for deterministic choices.
pub fn stable_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The estimate the builtin provider reports as usage: one token per four bytes, rounded up.
pub fn estimate_tokens(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(4)).unwrap_or(u32::MAX)
}

/// Jaccard similarity of two word sets (1.0 for two empty sets).
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count() as f64;
    let union = a.union(b).count() as f64;
    inter / union
}

#[cfg(test)]
mod tests {

    proptest::proptest! {
        /// Sentence splitting, entity and artifact extraction never panic, whatever the text.
        #[test]
        fn never_panics(text in "[a-zA-Z .!?…'\"()\\n-]{0,80}") {
            let _ = sentences(&text);
            let _ = artifacts(&text);
            let _ = entity_runs(&text);
        }
    }

    #[test]
    fn ellipses_and_mark_runs_do_not_panic() {
        assert_eq!(
            sentences("Well... maybe. Yes."),
            ["Well...", "maybe.", "Yes."]
        );
        assert_eq!(
            sentences("What?! No... never!!! Ok"),
            ["What?!", "No...", "never!!!", "Ok"]
        );
        assert_eq!(sentences("... . .. ! ?"), ["...", ".", "..", "!", "?"]);
    }

    use super::*;

    #[test]
    fn stop_words_are_sorted() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
        let mut sorted = COMMON_CAPITALIZED.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, COMMON_CAPITALIZED);
    }

    #[test]
    fn splits_sentences() {
        assert_eq!(
            sentences(
                "Hello there. I'm Mara! Is it 3.5 miles? See festival_plan.md. Mr. Hale agreed."
            ),
            vec![
                "Hello there.",
                "I'm Mara!",
                "Is it 3.5 miles?",
                "See festival_plan.md.",
                "Mr. Hale agreed."
            ]
        );
        assert_eq!(
            sentences("- one\n- two\n\nthree"),
            vec!["one", "two", "three"]
        );
        assert_eq!(
            sentences("He said \"stop.\" Then left."),
            vec!["He said \"stop.\"", "Then left."]
        );
    }

    #[test]
    fn normalizes_words_and_matches_cues() {
        let n = normalized("My mother’s recipe: I NEED to bake!");
        assert_eq!(n, " my mother recipe i need to bake ");
        assert!(has_cue(&n, &["need to"]));
        assert!(!has_cue(&n, &["eed to"]));
        assert_eq!(count_cues(&n, &["my mother", "bake", "fly"]), 2);
    }

    #[test]
    fn finds_entity_runs() {
        let runs = entity_runs(
            "Then the Harvest Festival at the Silver Stag's courtyard, with Captain Hale.",
        );
        assert_eq!(
            runs,
            vec![
                ("Harvest Festival".to_string(), false),
                ("Silver Stag".to_string(), false),
                ("Captain Hale".to_string(), false)
            ]
        );
        for (text, run, single) in [
            ("The Copper Kettle sounds warm.", "Copper Kettle", false),
            ("Wren, I have GF-1187 and a TODO.", "Wren", true),
            (
                "the Order of the Lantern met",
                "Order of the Lantern",
                false,
            ),
            ("The dog. Pip laughed.", "Pip", true),
        ] {
            assert_eq!(entity_runs(text), vec![(run.to_string(), single)], "{text}");
        }
    }

    #[test]
    fn counts_entities_with_evidence() {
        let mut c = EntityCounter::default();
        for s in [
            "Wren, hello.",
            "Thank you, Wren.",
            "Steward.",
            "Steward, go.",
            "Pip laughed.",
        ] {
            c.add_sentence(s);
        }
        c.add_speaker("Mara");
        c.add_speaker("Mara");
        let recurring = c.recurring(2);
        assert_eq!(
            recurring,
            vec![("Mara".to_string(), 2), ("Wren".to_string(), 2)]
        );
    }

    #[test]
    fn finds_artifacts() {
        let found = artifacts(
            "See festival_plan.md and https://millbrook.example/map, order GF-1187, call `check_inventory` \
             or parseConfig() in somna_core::config; read \"The Baker's Almanac\". Not e.g. or U.S. or 3.5.",
        );
        assert_eq!(
            found,
            vec![
                "check_inventory",
                "The Baker's Almanac",
                "festival_plan.md",
                "https://millbrook.example/map",
                "GF-1187",
                "parseConfig",
                "somna_core::config",
            ]
        );
    }

    #[test]
    fn phrase_matching_respects_word_boundaries() {
        assert!(contains_phrase("Captain Hale agreed", "hale"));
        assert!(!contains_phrase("Whales agreed", "hale"));
        assert!(contains_phrase("the Silver Stag's", "silver stag"));
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(estimate_tokens("abcde"), 2);
    }

    /// `content_overlap` and `first_sentence` answer what the set intersection and the whole
    /// split answer, on text with possessives, contractions, curly apostrophes, digits, stop
    /// words, bullets and repeats.
    #[test]
    fn the_cheap_forms_agree_with_the_whole_ones() {
        let texts = [
            "Mara's puppy Biscuit chewed Mara’s boots. It's the 3rd time! Let's see.",
            "- Did you see the mill? The mill, the MILL and the miller's cart.\nNext line here.",
            "",
            "  \n\n  Wren here. You are the steward of Millbrook, e.g. the keeper.",
            "I'd say 42 sacks of rye; ryes aren't oats. Don't—won't! It’s fine",
        ];
        let questions = [
            "What did Mara name her puppy?",
            "How many sacks of rye at the mill?",
            "the and of",
            "Who is the steward? Millbrook's keeper",
            "it's 3rd time boots",
        ];
        for text in texts {
            assert_eq!(
                first_sentence(text),
                sentences(text).into_iter().next(),
                "{text:?}"
            );
            for q in questions {
                let keys = content_words(q);
                for sentence in sentences(text).iter().map(String::as_str).chain([text]) {
                    assert_eq!(
                        content_overlap(sentence, &keys),
                        content_words(sentence).intersection(&keys).count(),
                        "{sentence:?} / {q:?}"
                    );
                }
                // Keys that are not content words are never counted.
                let loose: BTreeSet<String> = words(q).into_iter().collect();
                assert_eq!(
                    content_overlap(text, &loose),
                    content_words(text).intersection(&loose).count(),
                    "{text:?} / {q:?} (all words)"
                );
            }
        }
    }
}
