//! The analyzer: how a text becomes the terms it is indexed and searched by.
//!
//! Lower-cased alphanumeric runs; one-letter words, stop words (function words, question words and
//! the filler of chat: "did", "how", "kind", "recently", "really") dropped; every other term
//! stemmed with Snowball's English stemmer, so plural and tense variants meet ("shelters" and
//! "shelter", "adopted" and "adopt"). Documents and queries go through the same function, and a
//! document is indexed with its speaker's name (see [`document_terms`]), so a question that names
//! a speaker finds what that speaker said, not only what others said about them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::{FxHashMap, FxHashSet};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// [`STOP_WORDS`] as a hash set: checked for every word of every indexed text, where a binary
/// search was a third of the analysis.
static STOP_SET: LazyLock<FxHashSet<&'static str>> =
    LazyLock::new(|| STOP_WORDS.iter().copied().collect());

/// Words that carry no topic: articles, pronouns, auxiliaries, prepositions, question words and
/// chat filler. Compared before stemming, lower-cased. Kept sorted (a test checks it), so the list
/// reads as a list; lookups go through [`STOP_SET`].
const STOP_WORDS: &[&str] = &[
    "about",
    "above",
    "actually",
    "after",
    "again",
    "against",
    "ago",
    "all",
    "almost",
    "also",
    "always",
    "am",
    "an",
    "and",
    "any",
    "anyone",
    "anything",
    "are",
    "aren",
    "around",
    "as",
    "at",
    "back",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "enough",
    "even",
    "ever",
    "every",
    "few",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "getting",
    "give",
    "go",
    "goes",
    "going",
    "gone",
    "got",
    "gotten",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "hey",
    "hi",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "ii",
    "im",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "ive",
    "just",
    "kind",
    "kinds",
    "know",
    "lately",
    "let",
    "like",
    "ll",
    "lot",
    "lots",
    "made",
    "make",
    "many",
    "may",
    "maybe",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "never",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "oh",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "others",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "pretty",
    "quite",
    "rather",
    "re",
    "really",
    "recent",
    "recently",
    "said",
    "same",
    "say",
    "says",
    "see",
    "shall",
    "she",
    "should",
    "shouldn",
    "since",
    "so",
    "some",
    "something",
    "sometimes",
    "still",
    "such",
    "sure",
    "tell",
    "than",
    "thank",
    "thanks",
    "that",
    "thats",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "think",
    "this",
    "those",
    "though",
    "through",
    "to",
    "too",
    "type",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "ve",
    "very",
    "was",
    "wasn",
    "way",
    "we",
    "well",
    "were",
    "weren",
    "what",
    "whats",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "yeah",
    "yes",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// True for a word (lower-cased, before stemming) that is never indexed or searched.
pub fn is_stop_word(word: &str) -> bool {
    STOP_SET.contains(word)
}

/// The terms of `text`, in order, with repeats: what it is indexed and searched by.
pub fn terms(text: &str) -> Vec<String> {
    WORDS.with_borrow_mut(|analyzer| analyzer.terms(text))
}

thread_local! {
    // A turn analyzes its question once per search (journal, facts, archive), and an agent's
    // questions say the same words again; a grounding check reads a compaction's words, most of
    // which the compactions before it read: each thread remembers the words' terms.
    static WORDS: RefCell<Analyzer> = RefCell::new(Analyzer::bounded(4_096));
}

/// [`terms`] of `text`, each lent to `visit` in order (nothing allocated per term), by the
/// thread's analyzer; `visit` must not analyze text itself (the analyzer is lent to this call).
pub fn visit_terms(text: &str, visit: impl FnMut(&str)) {
    WORDS.with_borrow_mut(|analyzer| analyzer.visit_terms(text, visit));
}

/// The first character of a speaker term: the analyzer never emits it in a text term, so
/// `@nora` ("said by Nora") and `nora` ("mentions Nora") are two terms with their own document
/// frequencies.
pub const SPEAKER_MARK: char = '@';

/// The terms of a document (a message, a journal entry, a fact) with their counts, and its length
/// in terms. `speaker` (a message's `name`) is indexed as a field of its own: each of its terms
/// with [`SPEAKER_MARK`] before it ([`speaker_term`]). A name is rare among the turns that
/// mention it and common among the turns its owner said, so a question naming someone finds
/// the turns about them first and what they said after.
pub fn document_terms(text: &str, speaker: Option<&str>) -> (HashMap<String, u32>, u32) {
    document_terms_with(text, speaker, &mut term_of)
}

fn document_terms_with(
    text: &str,
    speaker: Option<&str>,
    term_of: &mut impl FnMut(&str) -> Option<String>,
) -> (HashMap<String, u32>, u32) {
    let mut counts: HashMap<String, u32> = HashMap::new();
    let mut len = 0u32;
    let mut add = |t: String| {
        len = len.saturating_add(1);
        *counts.entry(t).or_default() += 1;
    };
    if let Some(name) = speaker {
        for_each_term(name, term_of, |t| add(speaker_term(&t)));
    }
    for_each_term(text, term_of, &mut add);
    (counts, len)
}

/// The analyzer of a batch of documents (an index catch-up): [`document_terms`], remembering
/// each lower-cased word's term, since a batch says the same words many times and stemming is
/// most of the analysis. The same terms as [`document_terms`] (a property test checks it).
#[derive(Debug)]
pub struct Analyzer {
    /// Lower-cased word → its term (`None`: a stop word).
    terms: FxHashMap<String, Option<String>>,
    /// Words remembered at most; past it the memory starts over (a batch of any size stays
    /// bounded).
    max_words: usize,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::bounded(1 << 16)
    }
}

impl Analyzer {
    /// An analyzer that remembers at most `max_words` words at a time.
    pub fn bounded(max_words: usize) -> Self {
        Analyzer {
            terms: FxHashMap::default(),
            max_words: max_words.max(1),
        }
    }

    /// [`document_terms`] of one document of the batch.
    pub fn document_terms(
        &mut self,
        text: &str,
        speaker: Option<&str>,
    ) -> (HashMap<String, u32>, u32) {
        document_terms_with(text, speaker, &mut |lower: &str| self.term_of(lower))
    }

    /// [`terms`] of `text`.
    pub fn terms(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_term(text, &mut |lower: &str| self.term_of(lower), |t| {
            out.push(t)
        });
        out
    }

    /// Calls `visit` with each term of `text` ([`terms`]), in order, lent rather than
    /// allocated: for a reader that only looks the terms up.
    pub fn visit_terms(&mut self, text: &str, mut visit: impl FnMut(&str)) {
        for_each_word(text, |lower| {
            if let Some(known) = self.terms.get(lower) {
                if let Some(term) = known {
                    visit(term);
                }
                return;
            }
            if self.terms.len() >= self.max_words {
                self.terms.clear();
            }
            let term = term_of(lower);
            if let Some(term) = &term {
                visit(term);
            }
            self.terms.insert(lower.to_string(), term);
        });
    }

    /// [`term_of`], remembered.
    fn term_of(&mut self, lower: &str) -> Option<String> {
        if let Some(term) = self.terms.get(lower) {
            return term.clone();
        }
        if self.terms.len() >= self.max_words {
            self.terms.clear();
        }
        let term = term_of(lower);
        self.terms.insert(lower.to_string(), term.clone());
        term
    }
}

/// The speaker-field twin of the text term `term` (see [`document_terms`]).
pub fn speaker_term(term: &str) -> String {
    let mut out = String::with_capacity(term.len() + 1);
    out.push(SPEAKER_MARK);
    out.push_str(term);
    out
}

/// The term of a lower-cased word: `None` for a stop word, else its stem.
fn term_of(lower: &str) -> Option<String> {
    if is_stop_word(lower) {
        return None;
    }
    let mut stem = STEMMER.stem(lower).into_owned();
    // Snowball keeps a final y as i ("allergy" → "allergi") but drops it from its relatives
    // ("allergic" → "allerg"): one more cut lets them meet.
    if stem.len() > 4 && stem.ends_with('i') {
        stem.pop();
    }
    Some(stem)
}

fn for_each_term(
    text: &str,
    term_of: &mut impl FnMut(&str) -> Option<String>,
    mut emit: impl FnMut(String),
) {
    for_each_word(text, |lower| {
        if let Some(term) = term_of(lower) {
            emit(term);
        }
    });
}

/// `word` lower-cased into `out` (cleared first), by ASCII when it is ASCII.
pub fn lowercase_into(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.push_str(word);
        out.make_ascii_lowercase();
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

/// Each word of `text` that can make a term, lower-cased.
fn for_each_word(text: &str, mut each: impl FnMut(&str)) {
    let mut lower = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        // One letter says nothing ("s" of "Nora's", "I"); one digit may ("room 7").
        let mut chars = word.chars();
        match (chars.next(), chars.next()) {
            (None, _) => continue,
            (Some(c), None) if !c.is_ascii_digit() => continue,
            _ => {}
        }
        lowercase_into(word, &mut lower);
        each(&lower);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_list_is_sorted_and_lower_case() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "STOP_WORDS must stay sorted"
        );
        assert!(
            STOP_WORDS
                .iter()
                .all(|w| w.chars().all(|c| c.is_ascii_lowercase()))
        );
    }

    #[test]
    fn question_words_and_filler_are_dropped() {
        assert_eq!(
            terms("How did Caroline's kind of shelter do recently?"),
            ["carolin", "shelter"]
        );
        assert_eq!(terms("What did you do?"), Vec::<String>::new());
    }

    #[test]
    fn plural_and_tense_variants_meet() {
        assert_eq!(terms("shelters"), terms("Shelter"));
        assert_eq!(terms("adopted"), terms("adopting"));
        assert_eq!(terms("paintings"), terms("painted"));
        assert_eq!(terms("allergic"), terms("allergy"));
        assert_eq!(
            terms("The Sword of Aldric, 40 gold!"),
            ["sword", "aldric", "40", "gold"]
        );
    }

    #[test]
    fn a_document_is_indexed_with_its_speaker() {
        let (counts, len) = document_terms("I adopted the cats", Some("Nora"));
        assert_eq!(len, 3);
        // The speaker is a field of its own: said by Nora is not the same term as names Nora.
        assert_eq!(counts.get("@nora"), Some(&1));
        assert_eq!(counts.get("nora"), None);
        assert_eq!(speaker_term("nora"), "@nora");
        assert_eq!(counts.get("adopt"), Some(&1));
        assert_eq!(counts.get("cat"), Some(&1));
    }

    /// The analysis as it was before the stop set, the ASCII lower-casing and the batch memory:
    /// a binary search of the stop list, `char::to_lowercase` for every word, a stem per word.
    fn terms_before(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            let mut chars = word.chars();
            match (chars.next(), chars.next()) {
                (None, _) => continue,
                (Some(c), None) if !c.is_ascii_digit() => continue,
                _ => {}
            }
            let lower: String = word.chars().flat_map(char::to_lowercase).collect();
            if STOP_WORDS.binary_search(&lower.as_str()).is_ok() {
                continue;
            }
            let mut stem = STEMMER.stem(&lower).into_owned();
            if stem.len() > 4 && stem.ends_with('i') {
                stem.pop();
            }
            out.push(stem);
        }
        out
    }

    /// Words of chat, stop words, names, digits, punctuation, non-ASCII letters (whose
    /// lower-casing is not ASCII's) and repeats.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let word = prop_oneof![
            Just("Nora's".to_string()),
            Just("the".to_string()),
            Just("How".to_string()),
            Just("shelters".to_string()),
            Just("ALLERGY".to_string()),
            Just("allergic".to_string()),
            Just("7".to_string()),
            Just("I".to_string()),
            Just("Ünïcödé".to_string()),
            Just("İstanbul".to_string()),
            Just("ΣΊΣΥΦΟΣ".to_string()),
            "[a-zA-Z]{1,12}",
            "[a-zA-Z0-9À-ÿ]{1,8}",
            "\\PC{1,6}",
        ];
        proptest::collection::vec(
            (
                word,
                prop_oneof![Just(" "), Just(", "), Just("-"), Just("! "), Just("\n")],
            ),
            0..24,
        )
        .prop_map(|parts| parts.into_iter().map(|(w, s)| w + s).collect())
    }

    proptest::proptest! {
        #[test]
        fn terms_are_what_the_analysis_gave_before(t in text()) {
            proptest::prop_assert_eq!(terms(&t), terms_before(&t));
        }

        /// The batch analyzer, its memory shared across documents, gives each document the
        /// terms the one-off analysis gives it.
        #[test]
        fn a_batch_analyzer_gives_each_document_its_terms(
            docs in proptest::collection::vec((text(), proptest::option::of(text())), 1..8)
        ) {
            let mut analyzer = Analyzer::default();
            for (t, speaker) in &docs {
                proptest::prop_assert_eq!(
                    analyzer.document_terms(t, speaker.as_deref()),
                    document_terms(t, speaker.as_deref())
                );
            }
        }

        /// An analyzer whose memory fills at once (it starts over every few words) still gives
        /// every question its terms.
        #[test]
        fn a_small_memory_forgets_and_still_gives_the_terms(
            texts in proptest::collection::vec(text(), 1..6)
        ) {
            let mut analyzer = Analyzer::bounded(3);
            for t in &texts {
                proptest::prop_assert_eq!(analyzer.terms(t), terms_before(t));
                // Lent one by one, the same terms, whatever the memory held.
                let mut lent = Vec::new();
                analyzer.visit_terms(t, |term| lent.push(term.to_string()));
                proptest::prop_assert_eq!(&lent, &terms_before(t));
                lent.clear();
                visit_terms(t, |term| lent.push(term.to_string()));
                proptest::prop_assert_eq!(lent, terms_before(t));
            }
        }
    }

    #[test]
    fn every_stop_word_and_only_those_is_one() {
        assert!(STOP_WORDS.iter().all(|w| is_stop_word(w)));
        for word in ["nora", "shelter", "", "abou", "aboutt", "The"] {
            assert!(!is_stop_word(word), "{word}");
        }
    }
}
