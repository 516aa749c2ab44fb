//! Whether an item says what its source says or the opposite: a negation that reaches a word in
//! one of them and not in the other ("Marta eats meat" over Marta's "I don't eat meat any more").
//!
//! Small models drop a "not" when they summarize, and now and then add one; every value and name
//! of such an item is in its source, so the value checks keep it. This is a word-level reading, not
//! a parser: a negation ([`NEGATIONS`], or a word ending in `n't`) reaches the next [`REACH`]
//! content words of its clause, up to a word that turns the clause ([`TURNS`]); an idiom whose
//! negation says nothing against what follows ("can't wait", "won't stop talking about", "no
//! doubt") reaches nothing ([`NOT_AGAINST`]). Each word is compared by its term (stemmed), so
//! "eats" meets "eat".

use somna_core::retrieval::visit_terms;
use somna_text::words as text;

use super::claims::term_key;

/// How many content words a negation reaches: "don't eat red meat" negates `eat` and `red`,
/// enough to meet what an item that drops the "don't" keeps of the clause.
const REACH: usize = 2;

/// Words that negate what follows them (besides every word ending in `n't`). Sorted.
const NEGATIONS: &[&str] = &[
    "cannot", "neither", "never", "no", "nobody", "none", "nor", "not", "nothing", "nowhere",
    "without",
];

/// A word right after a negation that makes the pair an idiom saying nothing against the rest of
/// the clause: "can't wait for the fair", "won't stop talking about The Last Ferry", "can't
/// believe we got engaged", "no doubt", "not only", "never mind". Sorted.
const NOT_AGAINST: &[&str] = &[
    "believe", "doubt", "help", "kidding", "matter", "mind", "only", "problem", "resist", "stop",
    "wait", "wonder", "worries", "worry",
];

/// Words after a negation that belong to it and reach nothing ("no longer", "not anymore"). Sorted.
const PART_OF_NEGATION: &[&str] = &["anymore", "longer"];

/// Words that end a negation's reach: the clause turns ("I don't eat meat but love fish"). Sorted.
const TURNS: &[&str] = &[
    "although", "because", "but", "however", "instead", "though", "unless", "until", "whereas",
    "while", "yet",
];

/// The characters that end a clause (as the grounder's clause reading splits them).
pub(super) const CLAUSE_ENDS: [char; 8] = [',', ';', ':', '.', '!', '?', '—', '–'];

/// True for a word that negates what follows it.
fn is_negation(word: &str) -> bool {
    word.ends_with("n't") || NEGATIONS.binary_search(&word).is_ok()
}

/// True when `text` says a negation at all: the cheap test before [`polarity`] reads it (most
/// items and turns say none). Counts the idioms of [`NOT_AGAINST`] too.
pub(super) fn mentions_negation(text: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .any(|w| {
            let w = w.trim_end_matches(['\'', '’']);
            let lower = |suffix: &str| {
                w.len() >= suffix.len()
                    && w.is_char_boundary(w.len() - suffix.len())
                    && w[w.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            };
            lower("n't")
                || lower("n’t")
                || (w.len() <= 8
                    && NEGATIONS
                        .iter()
                        .any(|n| n.len() == w.len() && n.eq_ignore_ascii_case(w)))
        })
}

/// True for a word that carries content ([`text::content_words`]' rule).
fn is_content(word: &str) -> bool {
    (word.len() >= 3 || word.chars().any(|c| c.is_ascii_digit())) && !text::is_stop_word(word)
}

/// One content word of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Said {
    /// Its search term (stemmed), by [`term_key`]: what is compared.
    term: u64,
    /// The negation that reaches it there, if any (numbered in the order the text says them).
    negation: Option<u32>,
    /// The word as written, lower-cased, when a negation reaches it: what a check reports (only
    /// a negated word is ever reported).
    word: Option<String>,
}

/// The content words of `text`, each with the negation that reaches it there (see the module
/// docs), in order; a word said more than once appears as often.
pub(super) fn polarity(text: &str) -> Vec<Said> {
    polarity_of([text])
}

/// [`polarity`] of several texts read as one (their negations numbered apart): a source's lines.
/// Reads each word in place (lower-cased into one buffer, its term looked up by the thread's
/// analyzer): nothing is allocated for a word no negation reaches.
pub(super) fn polarity_of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Said> {
    let mut out = Vec::new();
    let mut negations = 0u32;
    let (mut word, mut next) = (String::new(), String::new());
    for clause in texts.into_iter().flat_map(|t| t.split(CLAUSE_ENDS)) {
        let mut words = clause
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
            .filter(|w| !w.trim_matches(['\'', '’']).is_empty())
            .peekable();
        let mut reach = 0;
        while let Some(raw) = words.next() {
            lower_word(raw, &mut word);
            if is_negation(&word) {
                lower_word(words.peek().copied().unwrap_or(""), &mut next);
                reach = if NOT_AGAINST.binary_search(&next.as_str()).is_ok() {
                    0
                } else {
                    negations += 1;
                    REACH
                };
                continue;
            }
            if TURNS.binary_search(&word.as_str()).is_ok() {
                reach = 0;
                continue;
            }
            if PART_OF_NEGATION.binary_search(&word.as_str()).is_ok() || !is_content(&word) {
                continue;
            }
            let negation = (reach > 0).then_some(negations);
            visit_terms(&word, |term| {
                out.push(Said {
                    term: term_key(term),
                    negation,
                    word: negation.map(|_| word.clone()),
                });
            });
            reach = reach.saturating_sub(1);
        }
    }
    out
}

/// True when a negation of `said` reaches a word.
pub(super) fn denies(said: &[Said]) -> bool {
    said.iter().any(|s| s.negation.is_some())
}

/// `raw` (a word of a clause) as [`text::words`] writes it, into `out`: lower-cased, curly
/// apostrophes made straight and trimmed, a possessive `'s` dropped.
fn lower_word(raw: &str, out: &mut String) {
    out.clear();
    for c in raw.chars() {
        match c {
            '’' | '‘' => out.push('\''),
            c => out.extend(c.to_lowercase()),
        }
    }
    let trimmed = out.trim_matches('\'');
    let trimmed = match trimmed.strip_suffix("'s") {
        Some(stem) if !text::is_contraction(trimmed) => stem,
        _ => trimmed,
    };
    if trimmed.len() != out.len() {
        *out = trimmed.to_owned();
    }
}

/// Where `item` says the opposite of its `sources` (each read by [`polarity`]): a negation of one
/// side (the item, or one source) every word of which the other side says, and whose last word
/// (what it denies: "don't eat *meat*") the other side says only plainly while this side says it
/// only negated. "Marta eats meat" against "I don't eat meat" (`eat` and `meat` negated there,
/// said plainly here); "…: not Lisbon" against "our Lisbon flat". A negation the other side does
/// not say whole is no evidence: "Marta eats fish" against "I don't eat meat any more, only fish"
/// shares `eat`, not what is denied; "Chloe is afraid of heights" against "Don't tease Chloe about
/// being afraid of heights" does not say what is denied of Chloe. Returns that last word and
/// whether the item is the side that negates it; `None` when they agree. A negation whose first
/// word `tells` (a word of telling: "Nobody has told me about the wedding" against "Bram told me:
/// … our wedding song") denies the telling, not what was told, and is no evidence either way.
pub(super) fn disagreement(
    item: &[Said],
    sources: &[&[Said]],
    tells: impl Fn(u64) -> bool,
) -> Option<(String, bool)> {
    let item_side = [item];
    for (sides, others, item_negates) in [
        (sources, item_side.as_slice(), false),
        (item_side.as_slice(), sources, true),
    ] {
        for side in sides {
            let mut negations: Vec<u32> = side.iter().filter_map(|s| s.negation).collect();
            negations.dedup();
            for negation in negations {
                let mut denied = side.iter().filter(|s| s.negation == Some(negation));
                let (Some(first), Some(last)) = (denied.clone().next(), denied.clone().next_back())
                else {
                    continue;
                };
                if tells(first.term) {
                    continue;
                }
                let opposite = denied.all(|d| sayings(others, d.term).next().is_some())
                    && sayings(others, last.term).all(|o| o.negation.is_none())
                    && sayings(sides, last.term).all(|s| s.negation.is_some());
                if opposite {
                    return Some((last.word.clone().unwrap_or_default(), item_negates));
                }
            }
        }
    }
    None
}

/// Every saying of `term` in `texts`.
fn sayings<'a>(texts: &'a [&'a [Said]], term: u64) -> impl Iterator<Item = &'a Said> + 'a {
    texts
        .iter()
        .flat_map(|t| t.iter())
        .filter(move |s| s.term == term)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negated(text: &str) -> Vec<String> {
        polarity(text).into_iter().filter_map(|s| s.word).collect()
    }

    #[test]
    fn the_lists_are_sorted() {
        for list in [NEGATIONS, NOT_AGAINST, PART_OF_NEGATION, TURNS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
    }

    #[test]
    fn a_negation_reaches_the_next_content_words_of_its_clause() {
        assert_eq!(negated("I don't eat red meat any more"), ["eat", "red"]);
        assert_eq!(
            negated("We never moved to Lisbon, we stayed in Porto"),
            ["moved", "lisbon"]
        );
        assert_eq!(negated("I no longer eat meat"), ["eat", "meat"]);
        // The clause turns: the rest is said.
        assert_eq!(negated("I don't like fish but love chicken"), ["fish"]);
        assert!(negated("Omar moved to Lisbon").is_empty());
    }

    #[test]
    fn the_cheap_test_sees_every_negation_the_reading_sees() {
        for text in [
            "I DON'T eat meat",
            "I don’t eat meat",
            "Never again",
            "nothing left",
            "without sugar",
        ] {
            assert!(mentions_negation(text), "{text}");
        }
        for text in ["Omar moved to Lisbon", "Nothings", "notable", "Dont"] {
            assert!(!mentions_negation(text), "{text}");
        }
    }

    #[test]
    fn a_word_is_read_as_the_word_reader_writes_it() {
        let mut out = String::new();
        for raw in [
            "Dmitri's",
            "IT'S",
            "don’t",
            "'quoted'",
            "Café",
            "owners'",
            "won't",
            "Ünïcode",
        ] {
            lower_word(raw, &mut out);
            assert_eq!(out, text::words(raw)[0], "{raw}");
        }
    }

    #[test]
    fn an_idiom_negates_nothing() {
        assert!(negated("Dmitri won't stop talking about The Last Ferry").is_empty());
        assert!(negated("I can't wait for the harvest fair").is_empty());
        assert!(negated("We got engaged! I still can't believe it").is_empty());
        assert!(negated("No doubt the mill will reopen").is_empty());
    }

    #[test]
    fn a_dropped_or_added_negation_disagrees_and_a_kept_one_agrees() {
        let source = polarity("I don't eat meat any more, only fish");
        let against = |item: &str| disagreement(&polarity(item), &[&source], |_| false);
        assert_eq!(against("Marta eats meat"), Some(("meat".into(), false)));
        assert_eq!(
            against("Marta eats red meat daily"),
            Some(("meat".into(), false))
        );
        assert_eq!(against("Marta does not eat meat"), None);
        assert_eq!(against("Marta no longer eats meat"), None);
        // What is denied is meat, not eating.
        assert_eq!(against("Marta eats fish"), None);
        assert_eq!(
            against("Marta doesn't eat fish"),
            Some(("fish".into(), true))
        );
        // Words the source does not say are no evidence either way.
        assert_eq!(against("Marta is not a baker"), None);
        let source = polarity("Finally unpacked the last boxes in our Lisbon flat.");
        assert_eq!(
            disagreement(
                &polarity("Which city did Omar relocate to: not Lisbon"),
                &[&source],
                |_| false
            ),
            Some(("lisbon".into(), true))
        );
        // A denial the item does not say whole: the teasing, not Chloe.
        let source = polarity("Don't tease Chloe about being afraid of heights.");
        assert_eq!(
            disagreement(
                &polarity("What is Chloe afraid of: heights"),
                &[&source],
                |_| false
            ),
            None
        );
        // A denial whose last word the item does not say: the allergy, not the plate.
        let source = polarity("Note for the menu: absolutely no hazelnuts near my plate.");
        assert_eq!(
            disagreement(
                &polarity("Which substance makes Dmitri sick: hazelnuts"),
                &[&source],
                |_| false
            ),
            None
        );
        // Said both ways on one side: no evidence.
        let source = polarity("I never eat meat. Well, I eat meat at weddings");
        assert_eq!(
            disagreement(&polarity("Marta eats meat"), &[&source], |_| false),
            None
        );
        // A denial of the telling, not of what was told, is no evidence.
        let source = polarity("Nobody has told me about the wedding.");
        let item = polarity("Bram told me: she says you're writing our wedding song");
        let told = term_key("told");
        assert_eq!(
            disagreement(&item, &[&source], |_| false),
            Some(("wedding".into(), false))
        );
        assert_eq!(disagreement(&item, &[&source], |t| t == told), None);
    }
}
