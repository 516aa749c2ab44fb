//! Grounding: every item a model writes into memory (a summary item, an extracted fact, a
//! consolidated fact, a reflection) cites what it rests on, and is checked against it before it
//! is committed.
//!
//! An item cites turns (or journal entries) with a marker, `[#12]` or `[#12, #15]`; a structured
//! answer gives the same numbers as a `sources` list, and its reader writes them as the marker.
//! [`Grounder::check`] reads the item's checkable values ([`claims`]: numbers, days, times, IDs,
//! names; and each lower-case word the sources say in one source only, [`Claim::Word`]) and looks
//! each one up in what it cites ([`Evidence`]); a lower-case word the sources never say must be an
//! everyday word, or a common one near in meaning to what it cites (`Unsaid`):
//!
//! - every value found: **kept** as written;
//! - a value missing from what it cites (or it cites nothing, or only numbers outside what it may
//!   cite), but one source holds every value: **repaired** by citing that source instead;
//! - otherwise, when it cites a source: **repaired** by replacing it with that source's own words
//!   (the sentence closest to the item, shortened);
//! - otherwise **dropped**.
//!
//! Nothing a model invents is committed: a kept item's values are all in its sources, a repaired
//! one is either such an item or a quote.
//!
//! A journal note (`journal_add`) cites nothing: it is written only when every value in it (and,
//! in a note about someone, every word but everyday ones and paraphrases of the turn it would
//! cite) is in something the agent was shown that turn ([`Grounder::unsupported`] over the turn's
//! prompt), when it turns none of it around, and
//! its arguments are never a source for another item (a summary citing the turn that wrote it).
//!
//! The check is deterministic, local and cheap (word and value lookups in hash sets;
//! docs/benchmarks.md has its cost per compaction).
//!
//! - this file: [`Grounder`] (the sources an answer may cite, and the check of one item),
//!   [`ground_summary`] and [`ground_lines`] (a whole answer).
//! - `claims.rs`: [`claims`] and [`Evidence`].
//! - `polarity.rs`: which words a negation reaches, and where an item says the opposite of its
//!   source ([`Grounder::flip`]).
//! - the markers, read, stripped and written, are somna-text's [`somna_text::cite`].

mod claims;
mod polarity;

pub use claims::{Claim, Evidence, claims};
pub use somna_core::GroundingCounts;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

use claims::term_key;
use rustc_hash::FxHashMap;
use somna_core::retrieval::{lowercase_into, terms, visit_terms};
use somna_core::{JournalEntry, Role, SourceType};
use somna_embed::StaticEmbedder;
use somna_text::extractive::{NONE, Section};
use somna_text::transcript::Turn;
use somna_text::{cite, words as text};

/// A lower-case word that the sources an item may cite say in at most this many of them is a
/// claim of the item ([`Claim::Word`]): it must be in what the item cites. A model that writes
/// "Dmitri collects succulents [#113]" where only Bruno's turn #187 says "succulents" took the word
/// from a turn it does not cite; the check finds it like a wrong number. A word no source says is
/// no claim (it may be the model's paraphrase), nor is one said in several (a common word of the
/// conversation). Chosen on the tuning split's planted facts (docs/llm.md, `borrowed_words.rs`):
/// another person's value put under a question is caught for 91.8% of them, and a true value under
/// its question's (deliberately other) words is re-cited or quoted for 11.3%.
const RARE_WORD_SOURCES: usize = 1;

/// Words that frame what was said rather than say it ("Also mentioned: …", "Nora asked: …", "they
/// agreed to …", a reflection's "Lately much has revolved around …; what matters most: …"): never a
/// [`Claim::Word`], however rarely the sources use them (an earlier reflection among the entries a
/// sleep reflects on says "revolved" once, and the next one says it again).
const FRAMING_WORDS: &str = "mention say said tell told ask talk discuss agree decide plan want \
note share explain suggest promise offer confirm remind report describe recall remember reply answer \
respond add state update request user assistant summary conversation topic detail question also \
reflection lately revolve matter";

/// A lower-case word that no source says is the model's own. It is a claim nothing backs
/// ([`Unsaid`]) unless it is a common word (among this many of English's commonest, by the builtin
/// table's vocabulary order) near in meaning to what the item cites ([`NEAR`]): "relocated" for
/// "unpacked the last boxes in our Lisbon flat" is a paraphrase; "pilot" for "my shift on the
/// ward" or "kombucha" anywhere is an invention. Chosen on the tuning split's planted facts with
/// [`NEAR`] (docs/llm.md, `invented_words.rs`).
const COMMON_WORDS: u32 = 15_000;

/// A word no source says that is among this many of English's commonest ("take", "love", "year")
/// says too little to be an invention: never weighed.
const EVERYDAY_WORDS: u32 = 2_000;

/// In an uncited journal note, a word no source says that is among this many of the commonest
/// is not weighed: a note may give an impression ("Aldric seems worried about the sword"), and
/// the words of one are common; a value ("a fractured toe") seldom is. Chosen on the tuning
/// split's planted facts (`borrowed_words.rs`): at 2,000 (as for a cited item) invented values
/// refused 89.7% and true notes 19.3%; at 4,000 83.9% and 17.0%; at 7,000 76.5% and 15.2%.
const NOTE_EVERYDAY_WORDS: u32 = 4_000;

/// How near in meaning (the cosine of the builtin table's vectors) a common word no source says
/// must be to the text of what an item cites to be a paraphrase rather than an invention.
const NEAR: f32 = 0.05;

/// Longest repaired item, in characters (a longer source sentence is cut at a word boundary).
const MAX_REPAIR_CHARS: usize = 200;

/// What the check did with one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every value was found in what it cites: committed as written.
    Kept,
    /// Re-cited to the source holding every value, or replaced by its source's own words.
    Repaired,
    /// Not committed.
    Dropped,
}

/// One checked item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub verdict: Verdict,
    /// The text to commit, without its marker (empty when dropped).
    pub text: String,
    /// What it cites after the check (turn seqs or entry ids).
    pub cites: Vec<u64>,
    /// For items over journal entries: the history turns the cited lines cite.
    pub turns: Vec<u64>,
    /// The values that were not found where the item pointed, as written in the check's terms.
    pub missing: Vec<String>,
}

impl Checked {
    /// The text with its marker, as a summary or an entry stores it.
    pub fn cited(&self) -> String {
        cite::with_marker(&self.text, &self.cites)
    }
}

/// One line of a source: its text without markers, and what the line itself cites.
#[derive(Debug, Clone)]
struct Line {
    text: String,
    cites: Vec<u64>,
}

/// One thing an item may cite: a turn, an earlier summary's item, or a journal entry.
#[derive(Debug, Clone)]
struct Source {
    /// Who said it (a turn's name or role); `None` for summaries and entries.
    speaker: Option<String>,
    /// When it was said, `2026-11-24 09:05`.
    at: Option<String>,
    lines: Vec<Line>,
    /// A turn of the agent's own (an assistant turn): what the agent said, which backs what the
    /// agent said, did or promised, but no fact about the people it talks to
    /// ([`Grounder::check_about_others`]).
    by_agent: bool,
    /// Counted among the sources that say a word ([`Grounder::item_claims`]): false for an
    /// earlier summary's item filed again under each turn it cites (the summary itself is
    /// counted once).
    counted: bool,
}

impl Source {
    /// Adds what this source supports to `e`.
    fn add_to(&self, e: &mut Evidence) {
        for line in &self.lines {
            e.add_text(&line.text);
        }
        if let Some(s) = &self.speaker {
            e.add_name(s);
        }
        if let Some(at) = &self.at {
            e.add_time(at);
        }
    }
}

/// The sources an answer may cite, by number, and the check of one item against them.
#[derive(Debug, Clone, Default)]
pub struct Grounder {
    sources: BTreeMap<u64, Vec<Source>>,
    /// What each citable number supports, built the first time it is needed (an item that holds up
    /// needs only what it cites).
    evidence: BTreeMap<u64, OnceLock<Evidence>>,
    /// Names every item may use (the agent's own), nothing else.
    known: Evidence,
    /// Every word of the sources, lower-cased ([`Grounder::finish`]): whether they write it in
    /// lower case (a sentence's capitalized first word that is such a word, or its plural, is a
    /// plain word, not a name), and which counted sources say it.
    words: FxHashMap<String, WordSeen>,
    /// Which counted sources say each term (at most [`RARE_WORD_SOURCES`] + 1 of them), built
    /// the first time an item is checked ([`Grounder::item_claims`]).
    term_sources: OnceLock<FxHashMap<u64, Vec<u64>>>,
    /// Each citable number's text as one vector of the builtin table, built the first time an
    /// item's word no source says is weighed against it ([`Grounder::near`]).
    vectors: BTreeMap<u64, OnceLock<Vec<f32>>>,
    /// The terms (by [`term_key`]) of what the model was told about the agent (its persona):
    /// said, so never a word no source says, but no source to cite ([`Grounder::knowing`]).
    known_terms: HashSet<u64>,
    /// The words of every speaker's name, lower-cased (roles aside): the people a turn may report
    /// on ([`Grounder::credited`]), gathered the first time a turn is read for them.
    people: OnceLock<HashSet<String>>,
    /// Per citable number: whether its text says a negation, and its words read for them
    /// ([`polarity`](self::polarity)), each built the first time an item's polarity is weighed
    /// against it ([`Grounder::flip`]).
    negates: BTreeMap<u64, OnceLock<bool>>,
    polarities: BTreeMap<u64, OnceLock<Vec<polarity::Said>>>,
}

/// A lower-case word of an item that no source says ([`COMMON_WORDS`]).
#[derive(Debug)]
struct Unsaid {
    word: String,
    /// Its vector when it is a common word (a paraphrase where it is near what is cited); `None`
    /// for a rarer one, which nothing backs.
    common: Option<Vec<f32>>,
    /// Its rank among English's words (the builtin table's vocabulary order), when it is one
    /// token there.
    rank: Option<u32>,
}

/// The builtin static table (compiled in): ranks and vectors for [`Unsaid`] words. `None` only in
/// a broken build (a test reads the table), and then every such word is a claim.
fn table() -> Option<&'static StaticEmbedder> {
    static TABLE: OnceLock<Option<StaticEmbedder>> = OnceLock::new();
    TABLE
        .get_or_init(|| StaticEmbedder::builtin().ok())
        .as_ref()
}

impl Grounder {
    /// The turns of a compaction's body: each turn is citable by its seq; an earlier summary in
    /// them by its own seq (all of it) and by every seq its items cite (those items), so a folded
    /// item keeps its sources. `known_names`: names any item may use (the agent's).
    pub fn from_turns(turns: &[Turn], known_names: &[&str]) -> Self {
        let mut g = Grounder::with_names(known_names);
        for turn in turns {
            if turn.is_summary() {
                let lines = summary_lines(&turn.content);
                for line in &lines {
                    for c in &line.cites {
                        g.add(
                            *c,
                            Source {
                                speaker: None,
                                at: None,
                                lines: vec![line.clone()],
                                by_agent: false,
                                counted: false,
                            },
                        );
                    }
                }
                g.add(
                    turn.seq,
                    Source {
                        speaker: None,
                        at: None,
                        lines,
                        by_agent: false,
                        counted: true,
                    },
                );
                continue;
            }
            // A host tool's arguments are what the agent did (`give_item` of a sword for 40
            // silver); a journal note's are the model's own claim, checked when it was written
            // (`Grounder::unsupported`) and never a source for another item.
            let mut content = turn.content.clone();
            for call in turn
                .tool_calls
                .iter()
                .filter(|c| c.name != crate::builtin::JOURNAL_TOOL)
            {
                content.push('\n');
                content.push_str(&call.arguments);
            }
            let speaker = turn.name.clone().or_else(|| {
                (turn.role != Role::Tool && turn.role != Role::System)
                    .then(|| turn.role.as_str().to_string())
            });
            g.add(
                turn.seq,
                Source {
                    speaker,
                    at: turn.at.map(|t| t.minute_label()),
                    lines: content
                        .lines()
                        .map(|l| Line {
                            text: l.to_string(),
                            cites: Vec::new(),
                        })
                        .collect(),
                    by_agent: turn.role == Role::Assistant,
                    counted: true,
                },
            );
        }
        g.finish()
    }

    /// Journal entries, each citable by its id; the `[#seq]` markers of their lines are kept as
    /// the turns behind them.
    pub fn from_entries(entries: &[JournalEntry], known_names: &[&str]) -> Self {
        let mut g = Grounder::with_names(known_names);
        for e in entries {
            let mut lines = lines_of(&e.content);
            if !e.source_seqs.is_empty() {
                for line in &mut lines {
                    if line.cites.is_empty() {
                        line.cites = e.source_seqs.clone();
                    }
                }
            }
            // A note of what the agent itself said ("I told Aldric he owes me 500 gold") is the
            // agent's word, as its turn was: it backs what the agent said, no fact about Aldric.
            let by_agent = e.source_type == SourceType::Note && tells_own_words(&e.content);
            g.add(
                e.id,
                Source {
                    speaker: None,
                    at: None,
                    lines,
                    by_agent,
                    counted: true,
                },
            );
        }
        g.finish()
    }

    fn with_names(known_names: &[&str]) -> Self {
        let mut known = Evidence::new();
        for n in known_names {
            known.add_name(n);
        }
        Grounder {
            known,
            ..Grounder::default()
        }
    }

    /// Adds what the model was told about the agent (its persona): a word of it is no word the
    /// model made up ("Wren is the innkeeper" where the persona says so), though nothing there is
    /// a source to cite, and its values back nothing.
    #[must_use]
    pub fn knowing(mut self, persona: &str) -> Self {
        visit_terms(persona, |t| {
            self.known_terms.insert(term_key(t));
        });
        self
    }

    fn add(&mut self, key: u64, source: Source) {
        self.sources.entry(key).or_default().push(source);
    }

    fn finish(mut self) -> Self {
        let mut lower = String::new();
        for (key, list) in &self.sources {
            for source in list {
                let texts = source
                    .speaker
                    .iter()
                    .map(|s| (s, false))
                    .chain(source.lines.iter().map(|l| (&l.text, true)));
                for (text, written) in texts {
                    for w in text.split(|c: char| !c.is_alphanumeric() && c != '\'') {
                        if w.is_empty() {
                            continue;
                        }
                        lowercase_into(w, &mut lower);
                        let seen = match self.words.get_mut(lower.as_str()) {
                            Some(seen) => seen,
                            None => self.words.entry(lower.clone()).or_default(),
                        };
                        seen.lower_case |= written && w.starts_with(char::is_lowercase);
                        if source.counted
                            && seen.sources.len() <= RARE_WORD_SOURCES
                            && !seen.sources.contains(key)
                        {
                            seen.sources.push(*key);
                        }
                    }
                }
            }
        }
        self.evidence = self.sources.keys().map(|k| (*k, OnceLock::new())).collect();
        self.vectors = self.sources.keys().map(|k| (*k, OnceLock::new())).collect();
        self.negates = self.sources.keys().map(|k| (*k, OnceLock::new())).collect();
        self.polarities = self.sources.keys().map(|k| (*k, OnceLock::new())).collect();
        self
    }

    /// True when `sentence` of a note that names someone tells of others: it names someone or
    /// says "he", "she", "they" (of someone the note names), is not in the first person, not the
    /// agent's account with its "I" left out, and names none of the agent's names.
    fn tells_of_others(&self, sentence: &str, claims: &[Claim]) -> bool {
        let names = claims
            .iter()
            .filter(|c| matches!(c, Claim::Name(_) | Claim::Lead(_)));
        let mut any = false;
        for c in names {
            if self.known.supports(c) {
                return false;
            }
            any = true;
        }
        (any || says_third_person(sentence))
            && !in_first_person(sentence)
            && !self.starts_without_subject(sentence)
    }

    /// True when `text` starts with a verb and no subject, as notes are written in the first
    /// person with the "I" left out ("Sold Aldric the sword for 40 silver", "Told Mara about the
    /// wolves", "Ask Aldric about the harrow"): its first word is one of [`NOTE_VERBS`] or a
    /// past tense in "-ed", and no name of a person the sources speak of or write only
    /// capitalized ("Alfred owes 500 gold" is about Alfred).
    fn starts_without_subject(&self, text: &str) -> bool {
        let Some(first) = first_word(text) else {
            return false;
        };
        let lower = first.to_lowercase();
        let verb = note_verbs().contains(lower.as_str())
            || (lower.len() >= 5
                && lower.ends_with("ed")
                && lower.chars().all(char::is_alphabetic));
        verb && !self.people().contains(&lower)
            && self.words.get(&lower).is_none_or(|seen| seen.lower_case)
    }

    /// The words of every speaker's name, lower-cased (roles aside), gathered once.
    fn people(&self) -> &HashSet<String> {
        self.people.get_or_init(|| {
            let roles = [Role::User, Role::Assistant, Role::Tool, Role::System].map(Role::as_str);
            // Speakers, and whom a line quotes (`[day] Lucas: …`: an excerpt, a summary's quote).
            let quoted = self.sources.values().flatten().flat_map(|s| {
                s.lines.iter().filter_map(|l| {
                    quote_label(&l.text)
                        .map(|(label, _)| label)
                        .filter(|label| {
                            label
                                .split_whitespace()
                                .all(|w| w.starts_with(char::is_uppercase))
                        })
                })
            });
            self.sources
                .values()
                .flatten()
                .filter_map(|s| s.speaker.as_deref())
                .chain(quoted)
                .filter(|n| !roles.contains(n))
                .flat_map(text::words)
                .collect()
        })
    }

    /// The item's names (of `claims`) that the sources `keys` back only as the speaker of a turn
    /// that reports on someone else, whom the item does not name: "Lucas collects old maps [#113]"
    /// where #113 is Lucas saying "Dmitri has started collecting old maps" gives Lucas what he said
    /// of Dmitri. A turn in its speaker's own voice (a first-person word: "I", "my", "we") backs
    /// its speaker's name, and so does one that names nobody else but whom it addresses ("Ingrid,
    /// guess what: bought a car!"); a name its text says is backed as any value, and so is the
    /// speaker an item quotes (`Lucas: Dmitri has started …`, `[2026-06-03] Lise: …`).
    fn credited(&self, keys: &[u64], claims: &[Claim], text: &str) -> Vec<String> {
        let mut out = Vec::new();
        // Who the item quotes: the label before its first colon, after a leading `[day]`.
        let quoted = quote_label(text).map_or("", |(label, _)| label);
        // The item's content words, read the first time a source of many lines needs them.
        let item_words = std::cell::OnceCell::new();
        for c in claims {
            let words = match c {
                Claim::Name(words) => words.as_slice(),
                Claim::Lead(word) => std::slice::from_ref(word),
                _ => continue,
            };
            if self.known.supports(c) || words.iter().all(|w| says_word(quoted, w)) {
                continue;
            }
            let (mut backed, mut reported) = (false, false);
            let mut weigh = |others: Vec<String>| {
                if others.is_empty() || others.iter().any(|p| names(claims, p)) {
                    backed = true;
                } else {
                    reported = true;
                }
            };
            for s in keys.iter().filter_map(|k| self.sources.get(k)).flatten() {
                let says = |t: &str| words.iter().all(|w| says_word(t, w));
                let mut in_text = false;
                // The lines that quote them (`[day] Lucas: …`: an archived turn in a prompt's
                // excerpts, a summary's quote): read together as a turn they said. Of a source of
                // many lines (a context note, a summary), only the lines that say the most of the
                // item back a name they say: "Noted: Marta asks about the sword" in an excerpt
                // says nothing of Marta's turnips.
                let mut quotes: Vec<&str> = Vec::new();
                // How much of the item each line says: read only for a source of many lines.
                let overlap: Vec<usize> = if s.lines.len() > 1 {
                    s.lines
                        .iter()
                        .map(|l| {
                            let words = item_words.get_or_init(|| text::content_words(text));
                            text::content_overlap(&l.text, words)
                        })
                        .collect()
                } else {
                    vec![0]
                };
                let most = overlap.iter().copied().max().unwrap_or(0);
                for (line, shared) in s.lines.iter().zip(overlap) {
                    match quote_label(&line.text) {
                        Some((label, rest)) if says(label) && !says(rest) => quotes.push(rest),
                        _ => in_text |= shared == most && says(&line.text),
                    }
                }
                if in_text {
                    weigh(Vec::new());
                } else if !quotes.is_empty() {
                    let speaker = words.join(" ");
                    weigh(self.reported_by(&quotes, &speaker, text));
                } else if s.speaker.as_deref().is_some_and(says) {
                    let lines: Vec<&str> = s.lines.iter().map(|l| l.text.as_str()).collect();
                    weigh(self.reported_by(&lines, s.speaker.as_deref().unwrap_or(""), text));
                }
            }
            if reported && !backed {
                out.push(c.to_string());
            }
        }
        out
    }

    /// The people (name words, lower-cased) a turn tells of other than its speaker, in what it
    /// says of `item`: the clauses of the turn that share the most content words with the item
    /// (the whole turn when none shares one). A clause in its speaker's own voice (see
    /// [`FIRST_PERSON`]) tells of nobody else, nor does a name that only addresses someone
    /// ("Ingrid, …", "…, Ingrid!").
    fn reported_by(&self, lines: &[&str], speaker: &str, item: &str) -> Vec<String> {
        let mut clauses = closest_clauses_in(lines.iter().copied(), &text::content_words(item));
        if clauses.is_empty() {
            clauses = lines.to_vec();
        }
        let mut out = Vec::new();
        for clause in clauses {
            if in_first_person(clause) {
                continue;
            }
            for (word, before, after) in words_in_context(clause) {
                let lower = word.to_lowercase();
                if !word.starts_with(char::is_uppercase)
                    || !self.people().contains(&lower)
                    || says_word(speaker, &lower)
                    || out.contains(&lower)
                {
                    continue;
                }
                let end = |c: Option<char>| matches!(c, Some('.' | '!' | '?'));
                let vocative =
                    (after == Some(',') && end(before)) || (before == Some(',') && end(after));
                if !vocative {
                    out.push(lower);
                }
            }
        }
        out
    }

    /// Where `text` says the opposite of the `keys` sources it rests on: a negation dropped or
    /// added ("Marta eats meat" over Marta's "I don't eat meat any more"; see
    /// [`polarity`](self::polarity)), read over the whole of each source. Returns the word denied
    /// and whether the item is the side that denies it; `None` when they agree.
    fn flip(&self, keys: &[u64], text: &str) -> Option<(String, bool)> {
        let lines = |k: &u64| {
            self.sources
                .get(k)
                .into_iter()
                .flatten()
                .flat_map(|s| &s.lines)
                .map(|l| l.text.as_str())
        };
        // Most items and turns say no negation: nothing to read then.
        let negates = |k: &u64| {
            self.negates
                .get(k)
                .is_some_and(|cell| *cell.get_or_init(|| lines(k).any(polarity::mentions_negation)))
        };
        let item_negates = polarity::mentions_negation(text);
        if !item_negates && !keys.iter().any(negates) {
            return None;
        }
        let sources: Vec<&[polarity::Said]> = keys
            .iter()
            .filter_map(|k| {
                let cell = self.polarities.get(k)?;
                Some(
                    cell.get_or_init(|| polarity::polarity_of(lines(k)))
                        .as_slice(),
                )
            })
            .collect();
        // A negation that reaches no content word ("I can't wait!") denies nothing.
        if !item_negates && !sources.iter().any(|s| polarity::denies(s)) {
            return None;
        }
        polarity::disagreement(&polarity::polarity(text), &sources, |term| {
            telling_keys().contains(&term)
        })
    }

    /// True when the sources write `word` (lower-cased) in lower case somewhere.
    fn is_plain(&self, word: &str) -> bool {
        self.words.get(word).is_some_and(|seen| seen.lower_case)
    }

    /// What citing `key` supports: its sources and the known names.
    fn evidence_of(&self, key: u64) -> Option<&Evidence> {
        let cell = self.evidence.get(&key)?;
        Some(cell.get_or_init(|| {
            let mut e = self.known.clone();
            for s in self.sources.get(&key).into_iter().flatten() {
                s.add_to(&mut e);
            }
            e
        }))
    }

    /// True when `n` is something an item may cite.
    pub fn is_citable(&self, n: u64) -> bool {
        self.sources.contains_key(&n)
    }

    /// The checkable values of `text`: a sentence's capitalized first word is no name when the
    /// sources write it in lower case (or its singular), and is one when it is a person the
    /// sources speak of, though it reads like a verb or a note's starter.
    fn claims_of(&self, text: &str) -> Vec<Claim> {
        let mut out: Vec<Claim> = claims(text)
            .into_iter()
            .filter(|c| match c {
                Claim::Lead(w) => {
                    !(self.is_plain(w) || w.strip_suffix('s').is_some_and(|one| self.is_plain(one)))
                }
                _ => true,
            })
            .collect();
        // A sentence's first word that reads like a verb or an adverb ("Alfred", "Emily", which
        // `claims` reads as no name) is still a name when it is a person's the sources speak of
        // ("Alfred owes 500 gold").
        let starts = text
            .split(['.', '!', '?', '…', '\n'])
            .filter_map(first_word);
        for first in starts {
            // Only such a word is lower-cased and looked up: most sentences start otherwise.
            if !first.starts_with(char::is_uppercase) || !claims::reads_as_verb(first) {
                continue;
            }
            let lower = first.to_lowercase();
            let claimed = out.iter().any(|c| match c {
                Claim::Lead(w) => *w == lower,
                Claim::Name(words) => words.contains(&lower),
                _ => false,
            });
            if !claimed && !self.is_plain(&lower) && self.people().contains(&lower) {
                out.push(Claim::Lead(lower));
            }
        }
        out
    }

    /// The claims of an item that cites its sources: its values ([`Grounder::claims_of`]) and
    /// each lower-case word of it that the sources say in at most [`RARE_WORD_SOURCES`] of them,
    /// unless one of those sources names someone the item names (a name, a number, a word no
    /// source says, and a word taken from what was said of the same person are no such claims:
    /// the first two are checked as values, the third is weighed apart, and the last is the
    /// model's to choose, since re-citing it would move the item to the person it is about
    /// anyway). Beside them, the item's words that no source says ([`Unsaid`]).
    fn item_claims(&self, text: &str) -> (Vec<Claim>, Vec<Unsaid>) {
        let mut out = self.claims_of(text);
        let mut unsaid: Vec<Unsaid> = Vec::new();
        // The people the item names (the agent's own names, which every source supports, aside).
        let names: Vec<Claim> = out
            .iter()
            .filter(|c| matches!(c, Claim::Name(_) | Claim::Lead(_)) && !self.known.supports(c))
            .cloned()
            .collect();
        let sources = self.term_sources();
        for word in text.split(|c: char| !c.is_alphanumeric() && c != '\'') {
            if !word.starts_with(char::is_lowercase) || word.chars().any(|c| c.is_ascii_digit()) {
                continue;
            }
            let mut said = false;
            let mut any = false;
            for part in word.split('\'') {
                for term in terms(part) {
                    any = true;
                    if self.known_terms.contains(&term_key(&term)) {
                        said = true;
                        continue;
                    }
                    let Some(keys) = sources.get(&term_key(&term)) else {
                        continue;
                    };
                    said = true;
                    let rare = !keys.is_empty()
                        && keys.len() <= RARE_WORD_SOURCES
                        && !framing().contains(&term);
                    let known = out
                        .iter()
                        .any(|c| matches!(c, Claim::Word { term: t, .. } if *t == term));
                    if rare && !known && !keys.iter().any(|k| self.names_any(*k, &names)) {
                        out.push(Claim::Word {
                            word: part.to_string(),
                            term,
                        });
                    }
                }
            }
            // A word with an apostrophe ("didn't") is read in its parts, and a framing word is
            // the summary's own; neither is weighed as a word no source says.
            if any
                && !said
                && !word.contains('\'')
                && !terms(word).iter().any(|t| framing().contains(t))
                && !unsaid.iter().any(|u| u.word == word)
            {
                let rank = table().and_then(|t| t.word_rank(word));
                if rank.is_some_and(|r| r <= EVERYDAY_WORDS) {
                    continue;
                }
                let common = table()
                    .filter(|_| rank.is_some_and(|r| r <= COMMON_WORDS))
                    .and_then(|t| t.embed(&[word]).pop());
                unsaid.push(Unsaid {
                    word: word.to_string(),
                    common,
                    rank,
                });
            }
        }
        (out, unsaid)
    }

    /// True when every word of `unsaid` is a common word near in meaning to the text of the
    /// sources `keys` ([`COMMON_WORDS`], [`NEAR`]).
    fn near(&self, unsaid: &[Unsaid], keys: &[u64]) -> bool {
        if unsaid.is_empty() {
            return true;
        }
        let Some(table) = table() else { return false };
        let mut sum = vec![0f32; table.dims()];
        for k in keys {
            let Some(cell) = self.vectors.get(k) else {
                continue;
            };
            let v = cell.get_or_init(|| {
                let text: Vec<&str> = self
                    .sources
                    .get(k)
                    .into_iter()
                    .flatten()
                    .flat_map(|s| s.lines.iter().map(|l| l.text.as_str()))
                    .collect();
                table.embed(&[&text.join("\n")]).pop().unwrap_or_default()
            });
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        norm > 0.0
            && unsaid.iter().all(|u| {
                u.common.as_ref().is_some_and(|v| {
                    v.iter().zip(&sum).map(|(a, b)| a * b).sum::<f32>() >= NEAR * norm
                })
            })
    }

    /// True when a source of `key` says one of `names` (as its speaker or in its text; names the
    /// known ones alone hold aside: see [`Grounder::item_claims`]). Read word by word, not by
    /// building the source's evidence: most such sources are never cited.
    fn names_any(&self, key: u64, names: &[Claim]) -> bool {
        let said = |word: &str| {
            self.sources.get(&key).into_iter().flatten().any(|s| {
                s.speaker.iter().any(|n| says_word(n, word))
                    || s.lines.iter().any(|l| says_word(&l.text, word))
            })
        };
        names.iter().any(|n| match n {
            Claim::Name(words) => words.iter().all(|w| said(w)),
            Claim::Lead(w) => said(w),
            _ => false,
        })
    }

    /// Which counted sources (by key) say each term (by [`term_key`]), up to
    /// [`RARE_WORD_SOURCES`] + 1 of them (none for a term only uncounted sources say, so that every
    /// term the sources say is a key): the sources of each word ([`Grounder::finish`] counted
    /// them as it read the words), merged by the word's term. Each distinct word is analyzed once,
    /// by the thread's analyzer (a compaction's words were mostly stemmed for the compactions
    /// before it).
    fn term_sources(&self) -> &FxHashMap<u64, Vec<u64>> {
        self.term_sources.get_or_init(|| {
            let mut keys: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
            for (word, seen) in &self.words {
                visit_terms(word, |t| {
                    let list = keys.entry(term_key(t)).or_default();
                    for key in &seen.sources {
                        if list.len() <= RARE_WORD_SOURCES && !list.contains(key) {
                            list.push(*key);
                        }
                    }
                });
            }
            keys
        })
    }

    /// The values of `text` (an uncited claim: a journal note the model writes) that no source
    /// holds, nor the known names, each as the check writes it (a value only the agent's own words
    /// hold, in a note about others, marked [`ONLY_YOU_SAID`]); and, when it names someone, its
    /// words that no source says, but for English's [`NOTE_EVERYDAY_WORDS`] commonest and a common
    /// word near in meaning ([`NEAR`]) to the source that alone says one of the note's words (what
    /// the note would cite; else the sources sharing the most words with it); a name credited to
    /// whoever told it of someone else; a negation the note drops or adds. Empty when every value
    /// is in something the sources say. Unlike [`Grounder::check`], a text with no value to check
    /// passes: a note that names nothing checkable invents nothing checkable.
    pub fn unsupported(&self, text: &str) -> Vec<String> {
        let claims = self.claims_of(text.trim());
        let mut missing: Vec<String> = Vec::new();
        // A statement about others (it names someone, or says "he" or "she" in a note that
        // does, and is not in the first person, not the agent's account with its "I" left out,
        // and names none of the agent's names) rests on what they, a tool or the agent's memory
        // said: a value only the agent's own turns hold is the agent's claim ("You owe me 500
        // gold, Aldric"), not a fact about them, as for a summary's `User facts`
        // ([`Grounder::check_about_others`]). A note that names nobody ("The room is 40
        // silver") is the agent's own business. Each sentence is read for itself: "Aldric came
        // by. Sold him the sword for 40 silver." is the agent's account of the sale, and "I met
        // Aldric. He owes me 500 gold." a claim about Aldric.
        let names_someone = claims
            .iter()
            .any(|c| matches!(c, Claim::Name(_) | Claim::Lead(_)) && !self.known.supports(c));
        // The people the note names, by their names' words: whose assent to the agent's turn
        // makes its values theirs too ([`Grounder::assented`]).
        let named: Vec<&str> = name_words(&claims).collect();
        let sentences = note_sentences(text);
        let read: Vec<(Vec<Claim>, bool)> = sentences
            .iter()
            .map(|sentence| {
                let claims = self.claims_of(sentence);
                let about_others = names_someone && self.tells_of_others(sentence, &claims);
                (claims, about_others)
            })
            .collect();
        // A claim no single sentence holds (cut by the split) is read with the whole note.
        let whole = names_someone && read.iter().any(|(_, about)| *about);
        let rest: Vec<Claim> = claims
            .iter()
            .filter(|c| !read.iter().any(|(cs, _)| cs.contains(c)))
            .cloned()
            .collect();
        let judged = read
            .iter()
            .flat_map(|(cs, about)| cs.iter().map(move |c| (c, *about)))
            .chain(rest.iter().map(|c| (c, whole)));
        for (c, about_others) in judged {
            let held_by = |agents: bool| {
                self.sources.keys().any(|k| {
                    self.evidence_of(*k).is_some_and(|e| e.supports(c))
                        && (agents || self.others_say(*k, c) || self.assented(*k, &named))
                })
            };
            let shown = self.known.supports(c) || held_by(!about_others);
            let c = if !shown && about_others && held_by(true) {
                format!("{c}{ONLY_YOU_SAID}")
            } else {
                c.to_string()
            };
            if !shown && !missing.contains(&c) {
                missing.push(c);
            }
        }
        // In a note about someone, a word nothing says ("Aldric brews kombucha", "Aldric
        // collects fractured toes") is weighed as in a cited item, against what the note would
        // have cited (below). A note about nobody ("Be kind to travellers") is the agent's own
        // counsel.
        if !claims
            .iter()
            .any(|c| matches!(c, Claim::Name(_) | Claim::Lead(_)))
        {
            return missing;
        }
        let (_, unsaid) = self.item_claims(text.trim());
        // The sources that share the most words with the note: what it would have cited.
        let words = text::content_words(text);
        let mut best: Vec<u64> = Vec::new();
        let mut most = 0;
        for (key, list) in &self.sources {
            let shared = list
                .iter()
                .flat_map(|s| &s.lines)
                .map(|l| text::content_overlap(&l.text, &words))
                .max()
                .unwrap_or(0);
            if shared > most {
                most = shared;
                best.clear();
            }
            if shared == most && shared > 0 {
                best.push(*key);
            }
        }
        // A word nothing says: a rarer one is the model's; a common one is a paraphrase only
        // where it is near in meaning to what the note would have cited: the one source of a word
        // of the note that only one source says (its value, most often), else those that share
        // the most words with it.
        let mut anchors: Vec<u64> = Vec::new();
        let sources = self.term_sources();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            for term in terms(word) {
                if let Some([key]) = sources.get(&term_key(&term)).map(Vec::as_slice)
                    && !anchors.contains(key)
                {
                    anchors.push(*key);
                }
            }
        }
        let weighed_against = if anchors.is_empty() { &best } else { &anchors };
        for u in unsaid {
            if u.rank.is_some_and(|r| r <= NOTE_EVERYDAY_WORDS) {
                continue;
            }
            if u.common.is_none() || !self.near(std::slice::from_ref(&u), weighed_against) {
                missing.push(u.word);
            }
        }
        // A name taken from who said what the note says, when they told it of someone else
        // ([`Grounder::credited`] over the sources that share the most words with the note).
        for name in self.credited(&best, &claims, text.trim()) {
            missing.push(format!(
                "that it was {name}: {name} told it of someone else"
            ));
        }
        // What they said turned around ([`Grounder::flip`] over the same sources, and the one
        // source of a word of the note: "Omar did not move to Lisbon" is about the one turn that
        // says Lisbon, though other turns share more of its words).
        let mut around = best;
        for key in anchors {
            if !around.contains(&key) {
                around.push(key);
            }
        }
        missing.extend(self.flip(&around, text.trim()).as_ref().map(flip_message));
        missing
    }

    /// Checks one item (its markers included).
    pub fn check(&self, item: &str) -> Checked {
        let (text, cites) = cite::split(item);
        self.check_cited(&text, &cites)
    }

    /// Checks one item whose text and citations were read apart (a structured answer's).
    pub fn check_cited(&self, text: &str, cites: &[u64]) -> Checked {
        self.check_from(text, cites, false)
    }

    /// [`Grounder::check`] of an item about the people the agent talks to (a summary's `User
    /// facts`): its values must be in what they (or a tool, or an earlier summary) said, not only
    /// in the agent's own turns. A model that said "you owe me 500 gold" to someone who never
    /// agreed to it does not make "Aldric owes 500 gold" a fact: such an item is re-cited to a turn
    /// of theirs that holds every value, or else replaced by the agent's own words, quoted as the
    /// agent's (`[day] assistant: You owe me 500 gold…`), which is what is true.
    pub fn check_about_others(&self, item: &str) -> Checked {
        let (text, cites) = cite::split(item);
        self.check_from(&text, &cites, true)
    }

    /// True when what someone other than the agent said in the sources of `key` supports `c`:
    /// not a turn of the agent's own, and not a line that quotes the agent (`[day] assistant: …`
    /// in a summary or the context note, or under one of the agent's names).
    fn others_say(&self, key: u64, c: &Claim) -> bool {
        if self.is_agents(key) {
            return false;
        }
        let list = self.sources.get(&key).map_or(&[][..], Vec::as_slice);
        let quotes_agent = |line: &str| {
            let line = line
                .trim_start()
                .trim_start_matches(['-', '*'])
                .trim_start();
            quote_label(line).is_some_and(|(label, _)| {
                let words: Vec<String> = label.split_whitespace().map(str::to_lowercase).collect();
                words == ["assistant"] || self.known.supports(&Claim::Name(words))
            })
        };
        if !list
            .iter()
            .flat_map(|s| &s.lines)
            .any(|l| quotes_agent(&l.text))
        {
            return true;
        }
        list.iter().any(|s| {
            let mut e = Evidence::new();
            for line in s.lines.iter().filter(|l| !quotes_agent(&l.text)) {
                e.add_text(&line.text);
            }
            if let Some(speaker) = &s.speaker {
                e.add_name(speaker);
            }
            if let Some(at) = &s.at {
                e.add_time(at);
            }
            e.supports(c)
        })
    }

    /// True when `key` is a turn of the agent's own and the turn right after it is one of the
    /// people `named` (lower-cased name words) agreeing to it: "That sword is 40 silver, Aldric."
    /// then Aldric's "Deal. Here you go." — what the agent said there, its speaker took up, so
    /// "Aldric bought the sword for 40 silver" rests on both. An answer that starts otherwise, or
    /// whose first sentence says a negation ("Fine, but I won't pay"), agrees to nothing.
    fn assented(&self, key: u64, named: &[&str]) -> bool {
        if named.is_empty() || !self.is_agents(key) {
            return false;
        }
        let Some((_, next)) = self.sources.range(key + 1..).next() else {
            return false;
        };
        next.iter().any(|s| {
            let by_named = s.speaker.as_deref().is_some_and(|who| {
                who.split_whitespace()
                    .any(|w| named.iter().any(|n| w.eq_ignore_ascii_case(n)))
            });
            by_named && !s.by_agent && s.lines.first().is_some_and(|l| agrees(&l.text))
        })
    }

    /// True when every source of `key` is a turn of the agent's own.
    fn is_agents(&self, key: u64) -> bool {
        self.sources
            .get(&key)
            .is_some_and(|list| list.iter().all(|s| s.by_agent))
    }

    /// The check; `others`: values only from sources that are not the agent's own turns.
    fn check_from(&self, text: &str, cites: &[u64], others: bool) -> Checked {
        let text = text.trim().to_string();
        let (claims, unsaid) = self.item_claims(&text);
        let valid: Vec<u64> = cites
            .iter()
            .copied()
            .filter(|c| self.is_citable(*c))
            .collect();
        // What may back the item's values: about others, not the agent's own turns, unless the
        // person the item names agreed to one ([`Grounder::assented`]).
        let named: Vec<&str> = if others {
            name_words(&claims).collect()
        } else {
            Vec::new()
        };
        let backing: Vec<u64> = valid
            .iter()
            .copied()
            .filter(|c| !others || !self.is_agents(*c) || self.assented(*c, &named))
            .collect();
        let mut missing: Vec<String> = if valid.is_empty() {
            claims.iter().map(ToString::to_string).collect()
        } else {
            // With only the agent's own turns cited about others, the agent's names alone.
            let cited: Vec<&Evidence> = backing
                .iter()
                .filter_map(|c| self.evidence_of(*c))
                .collect();
            claims
                .iter()
                .filter(|c| !self.known.supports(c) && !cited.iter().any(|e| e.supports(c)))
                .map(ToString::to_string)
                .collect()
        };
        // A name backed only as the speaker of what they said of someone else.
        if !backing.is_empty() {
            missing.extend(self.credited(&backing, &claims, &text));
        }
        // What they said turned around: a negation dropped or added.
        let flip = if backing.is_empty() {
            None
        } else {
            self.flip(&backing, &text)
        };
        missing.extend(flip.as_ref().map(flip_message));
        // The words no source says: a paraphrase of what it cites, or the model's invention.
        if !self.near(&unsaid, &backing) {
            missing.extend(unsaid.iter().map(|u| u.word.clone()));
        }
        // Each value once, however often the item says it ("Lucas, Lucas, Lucas").
        let mut listed = HashSet::new();
        missing.retain(|m| listed.insert(m.clone()));
        // An item with no value to check must still be about what it cites: at least one content
        // word in common (an echo of the instructions is about nothing).
        let about = !claims.is_empty() || self.shares_words(&valid, &text);
        if !valid.is_empty() && missing.is_empty() && !text.is_empty() && about {
            let turns = self.turns_behind(&valid, &claims, &text);
            return Checked {
                verdict: Verdict::Kept,
                text,
                cites: valid,
                turns,
                missing,
            };
        }
        if !text.is_empty()
            && let Some(source) = self.one_source_of(&claims, &unsaid, &text, others, &backing)
        {
            let turns = self.turns_behind(&[source], &claims, &text);
            return Checked {
                verdict: Verdict::Repaired,
                text,
                cites: vec![source],
                turns,
                missing,
            };
        }
        if let Some((quote, cited, turns)) = self.quote(&valid, &text) {
            return Checked {
                verdict: Verdict::Repaired,
                text: quote,
                cites: cited,
                turns,
                missing,
            };
        }
        Checked {
            verdict: Verdict::Dropped,
            text: String::new(),
            cites: Vec::new(),
            turns: Vec::new(),
            missing,
        }
    }

    /// True when `text` shares a content word with a line of the `cited` sources.
    fn shares_words(&self, cited: &[u64], text: &str) -> bool {
        let words = text::content_words(text);
        cited.iter().any(|k| {
            self.sources.get(k).into_iter().flatten().any(|s| {
                s.lines
                    .iter()
                    .any(|l| !text::content_words(&l.text).is_disjoint(&words))
            })
        })
    }

    /// The one source that holds every claim (with at least one claim, or else two content words
    /// in common) and at least half of the item's words that the sources say anywhere, sharing
    /// the most content words with the item. The half keeps a re-citation to what the item says:
    /// "Bruno collects hazelnuts [#629]" holds its name and its value in Bruno's "hazelnuts make me
    /// sick" (#670), but not "collects", which the sources say elsewhere; moved there it would
    /// make a fact of the wrong sentence. And it must say every word of the item (names aside)
    /// that the `cited` sources say: what they vouched for is not dropped on the way. "Bruno
    /// spent the bonus on a vintage typewriter [#2]", #2 being Bruno telling of Lena, holds Bruno
    /// and most of its words in Hannah's "Bruno spent the whole work bonus on a weighted blanket"
    /// (#1), which does not say the typewriter: moved there it would commit a value nobody said
    /// of Bruno. The item's words no source says must be paraphrases of the source found
    /// ([`Grounder::near`]); an invention is in none.
    fn one_source_of(
        &self,
        claims: &[Claim],
        unsaid: &[Unsaid],
        text: &str,
        others: bool,
        cited: &[u64],
    ) -> Option<u64> {
        let words = text::content_words(text);
        let need_words = if claims.is_empty() { 2 } else { 1 };
        let counts = self.term_sources();
        let mut said: Vec<String> = terms(text)
            .into_iter()
            .filter(|t| {
                counts
                    .get(&term_key(t))
                    .is_some_and(|keys| !keys.is_empty())
                    && !framing().contains(t)
            })
            .collect();
        said.sort_unstable();
        said.dedup();
        // What the cited sources vouch for of the item's words (its names aside: the claims
        // check them): a source it moves to must say all of it too.
        let named: HashSet<&str> = name_words(claims).collect();
        let vouched: Vec<&String> = said
            .iter()
            .filter(|t| !named.contains(t.as_str()))
            .filter(|t| {
                cited
                    .iter()
                    .any(|k| self.evidence_of(*k).is_some_and(|e| e.holds_term(t)))
            })
            .collect();
        self.sources
            .keys()
            .filter(|k| !others || !self.is_agents(**k))
            .filter(|k| {
                self.evidence_of(**k).is_some_and(|e| {
                    claims.iter().all(|c| e.supports(c))
                        && 2 * said.iter().filter(|t| e.holds_term(t)).count() >= said.len()
                        && vouched.iter().all(|t| e.holds_term(t))
                })
            })
            .filter(|k| {
                self.credited(&[**k], claims, text).is_empty() && self.flip(&[**k], text).is_none()
            })
            .map(|k| {
                let shared = self.sources[k]
                    .iter()
                    .flat_map(|s| s.lines.iter())
                    .map(|l| text::content_words(&l.text).intersection(&words).count())
                    .max()
                    .unwrap_or(0);
                (*k, shared)
            })
            .filter(|(_, shared)| *shared >= need_words)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(k, _)| k)
            .filter(|k| self.near(unsaid, &[*k]))
    }

    /// The sentence of the cited sources closest to `text` (most content words in common, at
    /// least one), as the item that replaces it: `[day] speaker: sentence`, shortened.
    fn quote(&self, cited: &[u64], text: &str) -> Option<(String, Vec<u64>, Vec<u64>)> {
        let words = text::content_words(text);
        let mut best: Option<(usize, u64, &Source, String, &Line)> = None;
        for key in cited {
            for source in self.sources.get(key).into_iter().flatten() {
                for line in &source.lines {
                    for sentence in text::sentences(&line.text) {
                        if sentence.starts_with('#')
                            || sentence == "(none)"
                            || sentence.starts_with('[') && sentence.ends_with(']')
                        {
                            continue;
                        }
                        let shared = text::content_words(&sentence).intersection(&words).count();
                        if shared > 0 && best.as_ref().is_none_or(|b| shared > b.0) {
                            best = Some((shared, *key, source, sentence, line));
                        }
                    }
                }
            }
        }
        let (_, key, source, sentence, line) = best?;
        let sentence = shorten(&sentence);
        let text = match (&source.speaker, &source.at) {
            (Some(s), Some(at)) => format!("[{}] {s}: {sentence}", &at[..10]),
            (Some(s), None) => format!("{s}: {sentence}"),
            _ => sentence,
        };
        // A quote of an earlier summary's item keeps that item's own sources.
        let cites = if source.speaker.is_none()
            && !line.cites.is_empty()
            && self.sources.keys().any(|k| line.cites.contains(k))
        {
            line.cites
                .iter()
                .copied()
                .filter(|c| self.is_citable(*c))
                .collect()
        } else {
            vec![key]
        };
        Some((text, cites, line.cites.clone()))
    }

    /// The turns behind an item over `cited` sources: what the lines holding its values cite.
    fn turns_behind(&self, cited: &[u64], claims: &[Claim], text: &str) -> Vec<u64> {
        let words = text::content_words(text);
        let mut out = Vec::new();
        for key in cited {
            for source in self.sources.get(key).into_iter().flatten() {
                for line in &source.lines {
                    if line.cites.is_empty() {
                        continue;
                    }
                    let mut e = Evidence::new();
                    e.add_text(&line.text);
                    let holds = if claims.is_empty() {
                        text::content_words(&line.text).intersection(&words).count() >= 2
                    } else {
                        claims.iter().any(|c| e.supports(c))
                    };
                    if holds {
                        for c in &line.cites {
                            if !out.contains(c) {
                                out.push(*c);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// What a check lists for an item that says the opposite of its source ([`Grounder::flip`]).
fn flip_message((word, item_denies): &(String, bool)) -> String {
    if *item_denies {
        format!("not {word}: what it rests on says {word}")
    } else {
        format!("{word}: what it rests on says not {word}")
    }
}

/// The clauses of `lines` (split at [`polarity::CLAUSE_ENDS`]) that share the most content words
/// with `words`, at least one; empty when none shares any.
fn closest_clauses_in<'a>(
    lines: impl Iterator<Item = &'a str>,
    words: &BTreeSet<String>,
) -> Vec<&'a str> {
    let mut clauses: Vec<&str> = Vec::new();
    let mut most = 0;
    for line in lines {
        for clause in line.split(polarity::CLAUSE_ENDS) {
            let shared = text::content_overlap(clause, words);
            if shared > most {
                most = shared;
                clauses.clear();
            }
            if shared == most && shared > 0 {
                clauses.push(clause);
            }
        }
    }
    clauses
}

/// The label and the rest of a line that quotes someone: `Lucas: …` or `[2026-06-03] Lucas: …`
/// (a label of at most three words); `None` for any other line.
fn quote_label(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    let line = line
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map_or(line, |(_, rest)| rest.trim_start());
    let (label, rest) = line.split_once(':')?;
    (label.split_whitespace().count() <= 3).then_some((label, rest))
}

/// True when `text` has `word` (lower case) as a whole word, in any case.
fn says_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric()).any(|w| {
        if w.is_ascii() {
            w.eq_ignore_ascii_case(word)
        } else {
            w.to_lowercase() == word
        }
    })
}

/// The words that put a turn in its speaker's own voice as its subject or owner (a word's part
/// before an apostrophe: "I'm", "we've"); "me" and "us" do not ("Ingrid lent me her book" is
/// about what Ingrid did).
const FIRST_PERSON: [&str; 8] = [
    "i",
    "my",
    "mine",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
];

/// The first word of `text` (letters, digits and apostrophes), if it has one.
fn first_word(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .find(|w| !w.is_empty())
}

/// The sentences of a note: its text cut after each `.`, `!`, `?` or `;` that ends a word ("3.5
/// silver" stays whole), each trimmed, none empty.
fn note_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if !matches!(c, '.' | '!' | '?' | ';') {
            continue;
        }
        let end = i + c.len_utf8();
        if text[end..].chars().next().is_none_or(char::is_whitespace) {
            out.push(text[start..end].trim());
            start = end;
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| s.chars().any(char::is_alphanumeric));
    out
}

/// True when `text` says "he", "she" or "they" (or their other forms): someone else, in a note
/// that names them.
fn says_third_person(text: &str) -> bool {
    const THIRD_PERSON: [&str; 10] = [
        "he", "him", "his", "she", "her", "hers", "they", "them", "their", "theirs",
    ];
    says_any(text, &THIRD_PERSON)
}

/// True when `text` says a word of [`FIRST_PERSON`].
fn in_first_person(text: &str) -> bool {
    says_any(text, &FIRST_PERSON)
}

/// True when `text` says one of `words` (lower-case), any case, each word read up to an
/// apostrophe ("I'm" says "i", "he's" says "he").
fn says_any(text: &str, words: &[&str]) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .filter_map(|w| w.split(['\'', '’']).next())
        .any(|w| {
            words
                .iter()
                .any(|p| w.len() == p.len() && w.eq_ignore_ascii_case(p))
        })
}

/// Each word of `text` with the nearest character before it and after it that is not white
/// space: `None` when that is part of a word, `.` at the text's ends.
fn words_in_context(text: &str) -> Vec<(&str, Option<char>, Option<char>)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '\'' || c == '’';
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (start, is_word(c) && i < text.len()) {
            (None, true) => start = Some(i),
            (Some(b), false) => {
                start = None;
                let before = text[..b].chars().rev().find(|c| !c.is_whitespace());
                let after = text[i..].chars().find(|c| !c.is_whitespace());
                let mark = |c: Option<char>| match c {
                    None => Some('.'),
                    Some(c) if is_word(c) => None,
                    c => c,
                };
                let word = &text[b..i];
                // A possessive names its owner ("Dmitri's new tattoo").
                let word = ["'s", "’s", "'", "’"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s))
                    .unwrap_or(word);
                out.push((word, mark(before), mark(after)));
            }
            _ => {}
        }
    }
    out
}

/// True when `claims` name `person` (a lower-cased name word).
fn names(claims: &[Claim], person: &str) -> bool {
    claims.iter().any(|c| match c {
        Claim::Name(words) => words.iter().any(|w| w == person),
        Claim::Lead(word) => word == person,
        _ => false,
    })
}

/// The terms of [`FRAMING_WORDS`].
fn framing() -> &'static HashSet<String> {
    static FRAMING: OnceLock<HashSet<String>> = OnceLock::new();
    FRAMING.get_or_init(|| terms(FRAMING_WORDS).into_iter().collect())
}

/// What [`Grounder::unsupported`] adds to a value of a note about others that only the agent's
/// own turns hold.
pub const ONLY_YOU_SAID: &str = " (only you said it)";

/// Words of telling: a negation that reaches one first ("Nobody has told me about the wedding",
/// "I never mentioned Lisbon") denies the telling, not what was told ([`Grounder::flip`]).
const TELLING_WORDS: &str = "say said tell told mention ask talk discuss report explain describe";

/// True when `text` starts as the agent's account of its own words: "I told …", "I said …",
/// "We mentioned …" (the first person, then a word of [`TELLING_WORDS`]), or "Told …" (the "I"
/// left out).
fn tells_own_words(text: &str) -> bool {
    let mut words = text
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty());
    let Some(who) = words.next() else {
        return false;
    };
    let telling = |verb: &str| {
        terms(verb)
            .iter()
            .any(|t| telling_keys().contains(&term_key(t)))
    };
    // "Told Aldric he owes …": the "I" left out, as notes are written.
    if telling(who) && who.starts_with(char::is_uppercase) {
        return true;
    }
    words
        .next()
        .is_some_and(|verb| matches!(who.to_lowercase().as_str(), "i" | "we") && telling(verb))
}

/// The verbs a note in the first person starts with when it leaves the "I" out, besides past
/// tenses in "-ed" ([`Grounder::starts_without_subject`]): past tenses of other forms, and the
/// bare verbs of a note of what to do ("Ask Aldric about the harrow"). None is a common name.
const NOTE_VERBS: &str = "sold told gave took made paid got met saw left lent bought brought sent \
kept found heard said spoke wrote went came won lost ate drank ran sat stood fought caught taught \
thought felt forgot forgave hid held hurt knew led meant rode sang slept spent stole swore threw \
understood woke wore broke chose drove fell flew grew began built dealt dug fed fled hung laid lit \
sought shook swept tore wept became owe ask tell remind deliver buy sell pay meet bring send visit \
check fix mend give take make need warn promise";

/// [`NOTE_VERBS`] as a set.
fn note_verbs() -> &'static HashSet<&'static str> {
    static VERBS: OnceLock<HashSet<&'static str>> = OnceLock::new();
    VERBS.get_or_init(|| NOTE_VERBS.split_whitespace().collect())
}

/// The words of the names among `claims` (lower-cased): the people an item names.
fn name_words(claims: &[Claim]) -> impl Iterator<Item = &str> {
    claims
        .iter()
        .flat_map(|c| match c {
            Claim::Name(words) => words.as_slice(),
            Claim::Lead(word) => std::slice::from_ref(word),
            _ => &[],
        })
        .map(String::as_str)
}

/// The words a turn that agrees to the one before it starts with ([`agrees`]).
const ASSENT_WORDS: [&str; 15] = [
    "yes",
    "yeah",
    "yep",
    "aye",
    "deal",
    "agreed",
    "done",
    "fine",
    "ok",
    "okay",
    "sure",
    "alright",
    "gladly",
    "certainly",
    "absolutely",
];

/// True when `text` starts by agreeing ("Deal.", "Yes, here's the silver", "Here you go",
/// "Very well") and its first sentence says no negation ("Fine, but I won't pay" agrees to
/// nothing).
fn agrees(text: &str) -> bool {
    let sentence = text
        .split(['.', '!', ';', '?'])
        .find(|c| !c.trim().is_empty())
        .unwrap_or("");
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .filter(|w| !w.is_empty())
        .take(3)
        .map(str::to_lowercase)
        .collect();
    let starts = match words.as_slice() {
        [first, ..] if ASSENT_WORDS.contains(&first.as_str()) || first == "here's" => true,
        [here, next, ..] if here == "here" => matches!(next.as_str(), "you" | "is" | "it" | "are"),
        [very, well, ..] => very == "very" && well == "well",
        _ => false,
    };
    let negated = sentence
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .any(|w| {
            let w = w.to_lowercase();
            matches!(w.as_str(), "no" | "not" | "never" | "nothing")
                || w.ends_with("n't")
                || w.ends_with("n’t")
        });
    starts && !negated
}

/// [`TELLING_WORDS`]' terms by [`term_key`], as [`polarity`] compares words.
fn telling_keys() -> &'static HashSet<u64> {
    static KEYS: OnceLock<HashSet<u64>> = OnceLock::new();
    KEYS.get_or_init(|| terms(TELLING_WORDS).iter().map(|t| term_key(t)).collect())
}

/// What the sources do with one word (lower-cased): see [`Grounder::words`].
#[derive(Debug, Clone, Default)]
struct WordSeen {
    /// Written in lower case somewhere (not only capitalized).
    lower_case: bool,
    /// The counted sources that say it, up to [`RARE_WORD_SOURCES`] + 1 of them.
    sources: Vec<u64>,
}

/// A source text's lines: markers stripped, each line's own citations kept.
fn lines_of(content: &str) -> Vec<Line> {
    content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (text, cites) = cite::split(l.trim_start_matches("- ").trim_start_matches("* "));
            Line { text, cites }
        })
        .collect()
}

/// An earlier summary's lines, each with its day: a section writes a day only when it differs
/// from the item before's, so an item without one was said on the day of the dated item above it
/// (the extractive summarizer's habit, see `restore_days`).
fn summary_lines(content: &str) -> Vec<Line> {
    let mut day: Option<String> = None;
    lines_of(content)
        .into_iter()
        .map(|mut line| {
            if line.text.starts_with('#') {
                day = None;
            } else if let Some(d) = leading_day(&line.text) {
                day = Some(d.to_string());
            } else if let Some(d) = &day {
                line.text = format!("[{d}] {}", line.text);
            }
            line
        })
        .collect()
}

/// The day an item starts with: `2026-11-24` of `[2026-11-24] …`.
fn leading_day(text: &str) -> Option<&str> {
    let day = text.strip_prefix('[')?.get(..10)?;
    let ok = day.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    (ok && text[11..].starts_with(']')).then_some(day)
}

/// `sentence` cut to [`MAX_REPAIR_CHARS`] at a word boundary, with "…".
fn shorten(sentence: &str) -> String {
    if sentence.chars().count() <= MAX_REPAIR_CHARS {
        return sentence.to_string();
    }
    let mut out = String::new();
    for word in sentence.split_whitespace() {
        if out.chars().count() + word.chars().count() + 1 > MAX_REPAIR_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    format!("{}…", out.trim_end_matches([',', ';', ':']))
}

/// The proper names in `text` (a persona): names every item may use.
pub fn names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for sentence in text::sentences(text) {
        for (run, _) in text::entity_runs(&sentence) {
            if !names.contains(&run) {
                names.push(run);
            }
        }
    }
    names
}

/// A whole summary after the check: its text to commit and what happened to its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroundedSummary {
    pub text: String,
    pub counts: GroundingCounts,
    /// The items committed as the model wrote them (kept, or re-cited to the turn that holds
    /// them): the model's own work. The others were replaced by a quote of a turn, or dropped.
    pub as_written: u32,
    /// A few of the items that were repaired or dropped, with the values missing (for logs).
    pub examples: Vec<String>,
}

/// Most examples a [`GroundedSummary`] keeps.
const MAX_EXAMPLES: usize = 5;

/// Checks every item of a summary (each non-empty line that is not a `#` heading, `(none)` or
/// the `[CONTEXT SUMMARY]` prefix): kept and repaired items are written with their marker, dropped
/// ones are left out, and a section left with no item shows `(none)`. A summary whose every item
/// is kept as written comes back exactly as it was.
pub fn ground_summary(text: &str, grounder: &Grounder) -> GroundedSummary {
    // The text before the first heading, then each heading with its items.
    let mut preamble: Vec<String> = Vec::new();
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    let mut counts = GroundingCounts::default();
    let mut examples = Vec::new();
    let mut as_written = 0;
    let mut changed = false;
    let user_facts = Section::UserFacts.title().to_lowercase();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line == NONE {
            continue;
        }
        if line.starts_with('#') {
            sections.push((line.to_string(), Vec::new()));
            continue;
        }
        if line == somna_core::Message::SUMMARY_PREFIX {
            preamble.push(line.to_string());
            continue;
        }
        let (bullet, item) = match line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
            Some(rest) => ("- ", rest),
            None => ("", line),
        };
        // `User facts` are about the people the agent talks to: the agent's word is not enough.
        let about_others = sections
            .last()
            .is_some_and(|(heading, _)| heading.to_lowercase().contains(&user_facts));
        let checked = if about_others {
            grounder.check_about_others(item)
        } else {
            grounder.check(item)
        };
        tally(&mut counts, &mut examples, item, &checked);
        if checked.verdict != Verdict::Dropped && checked.text == cite::split(item).0.trim() {
            as_written += 1;
        }
        changed |= checked.verdict != Verdict::Kept || checked.cited() != item;
        if checked.verdict != Verdict::Dropped {
            let line = format!("{bullet}{}", checked.cited());
            match sections.last_mut() {
                Some((_, items)) => items.push(line),
                None => preamble.push(line),
            }
        }
    }
    // Every item as written: the text as written (its layout included).
    if !changed {
        return GroundedSummary {
            text: text.trim().to_string(),
            counts,
            as_written,
            examples,
        };
    }
    let mut blocks: Vec<String> = Vec::new();
    if !preamble.is_empty() {
        blocks.push(preamble.join("\n"));
    }
    for (heading, items) in sections {
        let body = if items.is_empty() {
            NONE.to_string()
        } else {
            items.join("\n")
        };
        blocks.push(format!("{heading}\n{body}"));
    }
    GroundedSummary {
        text: blocks.join("\n\n"),
        counts,
        as_written,
        examples,
    }
}

/// Checks each item of a list answer over journal entries (consolidated facts, reflections).
pub fn ground_lines<'a>(
    items: impl IntoIterator<Item = &'a str>,
    grounder: &Grounder,
) -> (Vec<Checked>, GroundingCounts, Vec<String>) {
    ground_each(items, grounder, Grounder::check)
}

/// Checks each fact a model pulled out of a transcript (a pre-compaction extraction) as a fact
/// about the world: held to what others said ([`Grounder::check_about_others`]), so what only the
/// agent's own turns say ("You owe me 500 gold") is committed as the agent's words, quoted, and
/// not as "Aldric owes 500 gold".
pub fn ground_facts<'a>(
    items: impl IntoIterator<Item = &'a str>,
    grounder: &Grounder,
) -> (Vec<Checked>, GroundingCounts, Vec<String>) {
    ground_each(items, grounder, Grounder::check_about_others)
}

fn ground_each<'a>(
    items: impl IntoIterator<Item = &'a str>,
    grounder: &Grounder,
    check: impl Fn(&Grounder, &str) -> Checked,
) -> (Vec<Checked>, GroundingCounts, Vec<String>) {
    let mut counts = GroundingCounts::default();
    let mut examples = Vec::new();
    let mut kept = Vec::new();
    for item in items {
        let checked = check(grounder, item);
        tally(&mut counts, &mut examples, item, &checked);
        if checked.verdict != Verdict::Dropped {
            kept.push(checked);
        }
    }
    (kept, counts, examples)
}

/// Counts what the check did with `item`, and keeps it as an example when it was not kept.
fn tally(counts: &mut GroundingCounts, examples: &mut Vec<String>, item: &str, checked: &Checked) {
    match checked.verdict {
        Verdict::Kept => counts.kept += 1,
        Verdict::Repaired => counts.repaired += 1,
        Verdict::Dropped => counts.dropped += 1,
    }
    if checked.verdict != Verdict::Kept && examples.len() < MAX_EXAMPLES {
        examples.push(example(item, checked));
    }
}

fn example(item: &str, checked: &Checked) -> String {
    let what = match checked.verdict {
        Verdict::Kept => "kept",
        Verdict::Repaired => "repaired",
        Verdict::Dropped => "dropped",
    };
    let missing = if checked.missing.is_empty() {
        "no valid citation".to_string()
    } else {
        format!("not in its sources: {}", checked.missing.join(", "))
    };
    format!("{what} {:?} ({missing})", crate::prompts::clip(item, 80))
}
