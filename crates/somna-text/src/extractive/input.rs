//! The transcript as the summarizer reads it: each turn split into [`Sentence`]s (speaker,
//! normalized words, entities, numbers, questions), an earlier summary folded in as prior items,
//! the recurring entities and the artifacts; and, per section, the scored [`Candidate`]s.

use std::collections::{BTreeMap, BTreeSet};

use somna_core::Role;

use super::cues::{
    ALSO_MENTIONED, DECISION_CUES, FACT_CUES, FACT_NEGATIVE_CUES, PENDING_STRONG_CUES,
    PENDING_WEAK_CUES, UNCERTAIN_CUES,
};
use super::summary::{Section, StructuredSummary, day_of, restore_days};
use crate::cite;
use crate::transcript::Turn;
use crate::words::{self as text, EntityCounter};

/// Items longer than this many characters are cut at a clause boundary.
pub(super) const MAX_ITEM_CHARS: usize = 240;

#[derive(Debug, Clone)]
pub(super) struct Sentence {
    /// Position of the turn in the input.
    pub(super) turn: usize,
    pub(super) role: Role,
    pub(super) speaker: String,
    /// The day it was said (`2026-11-24`), when the transcript dates its turns.
    pub(super) day: Option<String>,
    pub(super) text: String,
    pub(super) norm: String,
    pub(super) words: BTreeSet<String>,
    pub(super) entities: Vec<String>,
    pub(super) number: bool,
    pub(super) question: bool,
}

impl Sentence {
    pub(super) fn item(&self) -> String {
        format!("{}: {}", self.label(), shorten(&self.text))
    }

    /// The item without its day: for lasting facts, which are true whatever day they were told.
    pub(super) fn undated_item(&self) -> String {
        format!("{}: {}", self.speaker, shorten(&self.text))
    }

    /// Who said it, after the day it was said when known: `[2026-11-24] Mara`.
    pub(super) fn label(&self) -> String {
        match &self.day {
            Some(day) => format!("[{day}] {}", self.speaker),
            None => self.speaker.clone(),
        }
    }
}

/// A candidate item of one section.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) text: String,
    pub(super) score: f64,
    /// Chronological position: earlier summaries first, then by turn and sentence.
    pub(super) order: (u8, usize, usize),
    /// The sentence it came from, so no sentence appears twice.
    pub(super) sentence: Option<usize>,
    /// Content words, for near-duplicate detection.
    pub(super) words: BTreeSet<String>,
    /// The turns it cites: written after it in the summary, never counted against a cap (the
    /// prompt does not show them).
    pub(super) cites: Vec<u64>,
}

pub(super) struct Input<'a> {
    pub(super) turns: &'a [Turn],
    pub(super) sentences: Vec<Sentence>,
    pub(super) prior: StructuredSummary,
    /// Accepted entities (see [`EntityCounter::entities`]).
    pub(super) known: BTreeSet<String>,
    /// Entities occurring at least twice, most frequent first.
    pub(super) recurring: Vec<(String, u32)>,
    /// The same, for lookups.
    pub(super) recurring_set: BTreeSet<String>,
    /// Artifact → (mentions, first position).
    pub(super) artifacts: BTreeMap<String, (u32, usize)>,
}

impl<'a> Input<'a> {
    pub(super) fn new(turns: &'a [Turn]) -> Self {
        let mut sentences = Vec::new();
        let mut prior = StructuredSummary::default();
        let mut entities = EntityCounter::default();
        let mut artifacts: BTreeMap<String, (u32, usize)> = BTreeMap::new();
        let note_artifacts =
            |map: &mut BTreeMap<String, (u32, usize)>, text: &str, position: usize| {
                for a in text::artifacts(text) {
                    map.entry(a).or_insert((0, position)).0 += 1;
                }
            };
        for (ti, turn) in turns.iter().enumerate() {
            if turn.is_summary() {
                let earlier = StructuredSummary::parse(&turn.content);
                for section in Section::ALL {
                    for item in &restore_days(earlier.items(section)) {
                        // An item keeps what it cites; one that cites nothing (written before
                        // items cited their turns) cites the summary it comes from.
                        let (bare, cites) = cite::split(item);
                        let cited = if cites.is_empty() {
                            cite::with_marker(&bare, &[turn.seq])
                        } else {
                            item.clone()
                        };
                        if let Some(names) = bare.strip_prefix(ALSO_MENTIONED) {
                            for name in names.trim_end_matches('.').split(", ") {
                                entities.add_known(name.trim(), 2);
                            }
                        } else {
                            entities.add_sentence(&bare);
                        }
                        if section == Section::Artifacts {
                            // An artifact that made it into a summary once keeps some weight.
                            artifacts.entry(bare.clone()).or_insert((0, ti)).0 += 2;
                        }
                        prior.items_mut(section).push(cited);
                    }
                }
                continue;
            }
            if let Some(name) = &turn.name {
                if turn.role != Role::Tool {
                    entities.add_speaker(name);
                }
            }
            if turn.role == Role::Tool {
                note_artifacts(&mut artifacts, &strings_of(&turn.content), ti);
            } else {
                note_artifacts(&mut artifacts, &turn.content, ti);
            }
            for call in &turn.tool_calls {
                note_artifacts(&mut artifacts, &strings_of(&call.arguments), ti);
            }
            if turn.role == Role::Tool || turn.role == Role::System {
                continue;
            }
            let day = turn.day();
            for s in text::sentences(&turn.content) {
                entities.add_sentence(&s);
                let entities_here = text::entity_runs(&s).into_iter().map(|(e, _)| e).collect();
                sentences.push(Sentence {
                    turn: ti,
                    role: turn.role,
                    speaker: turn.speaker().to_string(),
                    day: day.clone(),
                    norm: text::normalized(&s),
                    words: text::content_words(&s),
                    entities: entities_here,
                    number: text::has_number(&s),
                    question: s.trim_end().ends_with('?'),
                    text: s,
                });
            }
        }
        let recurring = entities.recurring(2);
        Input {
            turns,
            sentences,
            prior,
            known: entities.entities().into_keys().collect(),
            recurring_set: recurring.iter().map(|(e, _)| e.clone()).collect(),
            recurring,
            artifacts,
        }
    }

    /// The turns that first mention each of `names` (a sentence that names it, else an earlier
    /// summary that does), in order, for a line that lists names.
    pub(super) fn cites_of_names(&self, names: &[String]) -> Vec<u64> {
        let mut cites = Vec::new();
        for name in names {
            let turn = self
                .sentences
                .iter()
                .find(|s| text::contains_phrase(&s.text, name))
                .map(|s| s.turn)
                .or_else(|| {
                    self.turns
                        .iter()
                        .position(|t| t.is_summary() && text::contains_phrase(&t.content, name))
                });
            if let Some(seq) = turn.map(|t| self.turns[t].seq) {
                if !cites.contains(&seq) {
                    cites.push(seq);
                }
            }
        }
        cites
    }

    pub(super) fn is_recurring(&self, entity: &str) -> bool {
        self.recurring_set.contains(entity)
    }

    /// Names and numbers: what makes a sentence worth keeping.
    pub(super) fn salience(&self, s: &Sentence) -> f64 {
        let entity_score: f64 = s
            .entities
            .iter()
            .filter(|e| self.known.contains(*e))
            .map(|e| if self.is_recurring(e) { 2.0 } else { 1.0 })
            .sum::<f64>()
            .min(6.0);
        let mut score = entity_score + if s.number { 1.0 } else { 0.0 };
        let len = s.text.chars().count();
        if len < 20 {
            score -= 3.0;
        } else if len > MAX_ITEM_CHARS {
            score -= 2.0;
        }
        if s.words.len() < 3 {
            score -= 2.0;
        }
        score
    }

    /// Later is slightly better (0..1): for pending work, the latest mention is the current state.
    pub(super) fn recency(&self, s: &Sentence) -> f64 {
        if self.turns.len() <= 1 {
            0.0
        } else {
            s.turn as f64 / (self.turns.len() - 1) as f64
        }
    }

    /// A candidate of the sentence at `index`: `text`, citing the sentence's turn.
    pub(super) fn candidate(&self, index: usize, text: String, score: f64) -> Candidate {
        let s = &self.sentences[index];
        Candidate {
            words: text::content_words(&s.text),
            text,
            cites: vec![self.turns[s.turn].seq],
            score,
            order: (1, s.turn, index),
            sentence: Some(index),
        }
    }

    pub(super) fn prior_candidates(&self, section: Section, bonus: f64) -> Vec<Candidate> {
        self.prior
            .items(section)
            .iter()
            .enumerate()
            .filter(|(_, item)| !item.starts_with(ALSO_MENTIONED))
            .map(|(i, item)| {
                // Scored and compared without its day, which every item of that day shares, and
                // without its citation.
                let (bare, cites) = cite::split(item);
                let said = day_of(&bare).map_or(bare.as_str(), |day| &bare[day.len() + 3..]);
                let entity_score = text::entity_runs(said).len().min(3) as f64;
                Candidate {
                    cites,
                    text: bare.clone(),
                    score: bonus + entity_score + if text::has_number(said) { 1.0 } else { 0.0 },
                    order: (0, 0, i),
                    sentence: None,
                    words: text::content_words(said),
                }
            })
            .collect()
    }

    pub(super) fn is_decision(&self, s: &Sentence) -> bool {
        !s.question && s.words.len() >= 3 && text::has_cue(&s.norm, DECISION_CUES)
    }

    pub(super) fn decision_candidates(&self) -> Vec<Candidate> {
        let mut out = self.prior_candidates(Section::Decisions, 8.0);
        for (i, s) in self.sentences.iter().enumerate() {
            if self.is_decision(s) {
                let strength = text::count_cues(&s.norm, DECISION_CUES).min(2) as f64;
                out.push(self.candidate(i, s.item(), 4.0 + 2.0 * strength + self.salience(s)));
            }
        }
        out
    }

    pub(super) fn pending_candidates(&self) -> Vec<Candidate> {
        let mut out = self.prior_candidates(Section::Pending, 6.0);
        for (i, s) in self.sentences.iter().enumerate() {
            if self.is_decision(s) || s.words.len() < 2 {
                continue;
            }
            let salience = self.salience(s);
            let score = if s.question && s.role != Role::Assistant {
                if !self.is_unanswered(i) {
                    continue;
                }
                let text = format!("{} asked: {}", s.label(), shorten(&s.text));
                out.push(self.candidate(i, text, 7.0 + salience + self.recency(s)));
                continue;
            } else if s.question {
                continue;
            } else if text::has_cue(&s.norm, PENDING_STRONG_CUES) {
                6.0
            } else if text::has_cue(&s.norm, PENDING_WEAK_CUES)
                && (s.number || !s.entities.is_empty())
            {
                2.0
            } else {
                continue;
            };
            out.push(self.candidate(i, s.item(), score + salience + self.recency(s)));
        }
        out
    }

    /// A question is unanswered when nobody else spoke before the asker's next turn, or when the replies
    /// say they do not know yet.
    pub(super) fn is_unanswered(&self, index: usize) -> bool {
        let s = &self.sentences[index];
        let asker = &self.turns[s.turn];
        // Later sentences of the same turn answer nothing; a follow-up in the same turn may be the
        // question's context, so the replies start at the next turn.
        let mut replies = String::new();
        for turn in self.turns.iter().skip(s.turn + 1).take(6) {
            if turn.role == Role::Tool || turn.content.trim().is_empty() {
                continue;
            }
            if turn.speaker() == asker.speaker() && turn.role == asker.role {
                break;
            }
            replies.push_str(&turn.content);
            replies.push(' ');
        }
        replies.trim().is_empty() || text::has_cue(&text::normalized(&replies), UNCERTAIN_CUES)
    }

    pub(super) fn fact_candidates(&self) -> Vec<Candidate> {
        let mut out = self.prior_candidates(Section::UserFacts, 6.0);
        for (i, s) in self.sentences.iter().enumerate() {
            if s.role != Role::User || s.question || text::has_cue(&s.norm, FACT_NEGATIVE_CUES) {
                continue;
            }
            let cues = text::count_cues(&s.norm, FACT_CUES);
            if cues == 0 {
                continue;
            }
            let score = 5.0 + cues.min(3) as f64 + self.salience(s) / 2.0;
            out.push(self.candidate(i, s.undated_item(), score));
        }
        out
    }

    pub(super) fn artifact_candidates(&self) -> Vec<Candidate> {
        self.artifacts
            .iter()
            .map(|(name, (mentions, first))| {
                let kind_bonus = if name.contains('.') || name.contains("://") {
                    1.0
                } else {
                    0.0
                };
                Candidate {
                    text: name.clone(),
                    cites: vec![self.turns[*first].seq],
                    score: 2.0 * f64::from(*mentions) + kind_bonus,
                    order: (1, *first, 0),
                    sentence: None,
                    words: BTreeSet::from([name.to_lowercase()]),
                }
            })
            .collect()
    }

    /// Topic-arc candidates in the order to try them: round-robin over chronological segments, each
    /// segment's best sentence first.
    pub(super) fn topic_candidates(&self, used: &BTreeSet<usize>) -> Vec<Candidate> {
        let n_turns = self.turns.len().max(1);
        let segments = (n_turns / 15).clamp(1, 10);
        let mut per_segment: Vec<Vec<Candidate>> = vec![Vec::new(); segments];
        for (i, s) in self.sentences.iter().enumerate() {
            if used.contains(&i) || s.words.len() < 3 || s.text.chars().count() < 20 {
                continue;
            }
            let bonus = if s.role == Role::User { 1.0 } else { 0.0 }
                + (s.words.len().min(8) as f64) / 4.0
                + if s.question { -1.0 } else { 0.0 };
            let segment = (s.turn * segments / n_turns).min(segments - 1);
            per_segment[segment].push(self.candidate(i, s.item(), self.salience(s) + bonus));
        }
        for list in &mut per_segment {
            list.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));
        }
        let mut ordered = Vec::new();
        let rounds = per_segment.iter().map(Vec::len).max().unwrap_or(0);
        for round in 0..rounds {
            for list in &per_segment {
                if let Some(c) = list.get(round) {
                    ordered.push(c.clone());
                }
            }
        }
        ordered
    }
}

/// The string values of a JSON text, one per line (keys and punctuation are not artifacts); other text
/// as it is.
fn strings_of(text: &str) -> String {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(value) if value.is_object() || value.is_array() => {
            let mut out = Vec::new();
            walk(&value, &mut out);
            out.join("\n")
        }
        _ => text.to_string(),
    }
}

/// Cuts a long sentence at the last clause boundary before [`MAX_ITEM_CHARS`].
pub(super) fn shorten(sentence: &str) -> String {
    if sentence.chars().count() <= MAX_ITEM_CHARS {
        return sentence.to_string();
    }
    let cut = sentence
        .char_indices()
        .nth(MAX_ITEM_CHARS)
        .map_or(sentence.len(), |(i, _)| i);
    let head = &sentence[..cut];
    let boundary = ["; ", ", ", " — ", " - "]
        .iter()
        .filter_map(|b| head.rfind(b))
        .max()
        .filter(|&i| i > MAX_ITEM_CHARS / 2)
        .unwrap_or_else(|| head.rfind(' ').unwrap_or(cut));
    format!("{}…", sentence[..boundary].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortens_long_items_at_a_clause() {
        let long = format!(
            "{}, and then {}",
            "word ".repeat(40).trim(),
            "more ".repeat(30).trim()
        );
        let cut = shorten(&long);
        assert!(cut.ends_with('…'));
        assert!(cut.chars().count() <= MAX_ITEM_CHARS + 1);
    }
}
