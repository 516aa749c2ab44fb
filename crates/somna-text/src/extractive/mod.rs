//! The extractive summarizer: picks whole sentences from the transcript into the five summary sections,
//! each within its token cap, the whole within `max_tokens`, chronological inside each section.
//!
//! How sentences are chosen:
//! - **Decisions**: sentences with a decision cue ("we decided", "agreed", "let's", "settled on"…).
//! - **Pending**: open tasks and commitments ("todo", "need to", "still pending", "remind me", and more weakly
//!   "I'll" / "tomorrow" when the sentence names something), plus questions from the user that got no answer
//!   (no reply, or a reply that says "not sure", "not yet", "I'll get back to you"…). Later mentions score a
//!   little higher: they are the current state.
//! - **User facts**: what a user says about themselves ("my name is", "I am a", "I live", "I prefer",
//!   "allergic", "my daughter"…), labelled with who said it.
//! - **Artifacts**: file names, URLs, reference codes, code identifiers, quoted titles, by mentions.
//! - **Topic arc**: the rest of the conversation in chronological segments, best sentence of each segment
//!   first (names, numbers, content), round after round until the cap.
//!
//! Then every named entity that occurs at least twice must appear somewhere: sentences that mention missing
//! entities join the topic arc, and if the cap leaves no room, a last line `Also mentioned: …` names them.
//! Near-duplicates are dropped. An earlier summary in the turns (content starting `[CONTEXT SUMMARY]`) is
//! folded in: its items compete with the new ones (with a bonus), its old topic arc gets at most half of the
//! new one's cap.

//!
//! - this file: [`summarize`]: fitting the caps, filling each section from its candidates, covering
//!   the recurring entities, fitting the total.
//! - `summary.rs`: the result, [`StructuredSummary`] in its [`Section`]s, and its text form
//!   (render and parse).
//! - `input.rs`: the transcript read into sentences (speaker, entities, cues) and each section's
//!   scored candidates.
//! - `cues.rs`: the word lists that mark decisions, open tasks, uncertain answers and facts a user
//!   states about themselves.

mod cues;
mod input;
mod summary;

pub(crate) use cues::FACT_CUES;
pub use summary::{NONE, Section, StructuredSummary};

use std::collections::{BTreeMap, BTreeSet};

use somna_core::config::SectionCaps;

use crate::cite;
use crate::transcript::Turn;
use crate::words as text;
use cues::ALSO_MENTIONED;
use input::{Candidate, Input};
use summary::{render_items, shown_days};

/// Summarizes `turns` extractively: each section within its cap of `caps` (scaled down together when they
/// and the headings would not fit `max_tokens`), the rendered whole within `max_tokens`, token counts by
/// `count` of the text without its citations (each item cites the turns it quotes; the prompt does
/// not show citations, so they are written after the caps are met). Deterministic: the same turns give the same summary.
pub fn summarize(
    turns: &[Turn],
    caps: &SectionCaps,
    max_tokens: u32,
    count: &dyn Fn(&str) -> u32,
) -> StructuredSummary {
    let input = Input::new(turns);
    let caps = fit_caps(caps, max_tokens, count);
    let mut builder = Builder {
        count,
        caps,
        chosen: BTreeMap::new(),
        used: BTreeSet::new(),
    };

    builder.fill(Section::Decisions, input.decision_candidates());
    builder.fill(Section::Pending, input.pending_candidates());
    builder.fill(Section::UserFacts, input.fact_candidates());
    builder.fill(Section::Artifacts, input.artifact_candidates());
    builder.fill_topic_arc(&input);
    builder.cover_entities(&input);
    builder.fit_total(max_tokens);
    builder.finish()
}

/// Scales `caps` down proportionally when their sum and the headings would exceed `max_tokens`.
fn fit_caps(caps: &SectionCaps, max_tokens: u32, count: &dyn Fn(&str) -> u32) -> SectionCaps {
    let overhead = count(&StructuredSummary::default().render());
    let sum: u64 = Section::ALL.iter().map(|s| u64::from(s.cap(caps))).sum();
    let room = u64::from(max_tokens.saturating_sub(overhead));
    if sum == 0 || sum <= room {
        return *caps;
    }
    let scale = |cap: u32| u32::try_from(u64::from(cap) * room / sum).unwrap_or(cap);
    SectionCaps {
        topic_arc: scale(caps.topic_arc),
        decisions: scale(caps.decisions),
        pending: scale(caps.pending),
        user_facts: scale(caps.user_facts),
        artifacts: scale(caps.artifacts),
    }
}

struct Builder<'c> {
    count: &'c dyn Fn(&str) -> u32,
    caps: SectionCaps,
    chosen: BTreeMap<Section, Vec<Candidate>>,
    used: BTreeSet<usize>,
}

impl Builder<'_> {
    /// The tokens of `items` as their section shows them: in order, each day written once.
    fn body_tokens(&self, items: &[Candidate]) -> u32 {
        let mut sorted: Vec<&Candidate> = items.iter().collect();
        sorted.sort_by_key(|c| c.order);
        let texts: Vec<String> = sorted.iter().map(|c| c.text.clone()).collect();
        (self.count)(&render_items(&shown_days(&texts)))
    }

    fn fits(&self, section: Section, items: &[Candidate]) -> bool {
        self.body_tokens(items) <= section.cap(&self.caps)
    }

    /// True when `c` repeats a chosen item: nearly the same words, or most of its words (at least two)
    /// already said by one item (the better-scored, more detailed one, chosen first).
    fn is_near_duplicate(items: &[Candidate], c: &Candidate) -> bool {
        items.iter().any(|o| {
            if o.text == c.text {
                return true;
            }
            if c.words.is_empty() {
                return false;
            }
            let shared = o.words.intersection(&c.words).count();
            text::jaccard(&o.words, &c.words) >= 0.6
                || (shared >= 2 && shared as f64 / c.words.len() as f64 >= 0.6)
        })
    }

    /// Adds candidates in the order given while they fit, skipping used sentences and near-duplicates.
    fn add_in_order(&mut self, section: Section, candidates: Vec<Candidate>, budget: u32) {
        let mut items = self.chosen.remove(&section).unwrap_or_default();
        for c in candidates {
            if c.sentence.is_some_and(|s| self.used.contains(&s))
                || Self::is_near_duplicate(&items, &c)
            {
                continue;
            }
            items.push(c);
            if self.body_tokens(&items) > budget {
                items.pop();
                continue;
            }
            if let Some(s) = items.last().and_then(|c| c.sentence) {
                self.used.insert(s);
            }
        }
        items.sort_by_key(|c| c.order);
        self.chosen.insert(section, items);
    }

    /// Best-scored candidates first, while they fit the section's cap.
    fn fill(&mut self, section: Section, mut candidates: Vec<Candidate>) {
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));
        let cap = section.cap(&self.caps);
        self.add_in_order(section, candidates, cap);
    }

    fn fill_topic_arc(&mut self, input: &Input<'_>) {
        let cap = self.caps.topic_arc;
        let mut prior = input.prior_candidates(Section::TopicArc, 0.0);
        prior.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));
        self.add_in_order(Section::TopicArc, prior, cap / 2);
        let fresh = input.topic_candidates(&self.used);
        self.add_in_order(Section::TopicArc, fresh, cap);
    }

    fn rendered(&self) -> String {
        self.snapshot().render()
    }

    fn missing_entities(&self, input: &Input<'_>) -> Vec<String> {
        let rendered = self.rendered();
        input
            .recurring
            .iter()
            .filter(|(e, _)| !text::contains_phrase(&rendered, e))
            .map(|(e, _)| e.clone())
            .collect()
    }

    /// Makes every entity that occurs at least twice appear somewhere in the summary.
    fn cover_entities(&mut self, input: &Input<'_>) {
        let cap = self.caps.topic_arc;
        let mut tried: BTreeSet<usize> = BTreeSet::new();
        loop {
            let missing = self.missing_entities(input);
            if missing.is_empty() {
                return;
            }
            // The unused sentence that mentions the most missing entities; shorter, then earlier, wins ties.
            let best = input
                .sentences
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.used.contains(i) && !tried.contains(i))
                .map(|(i, s)| {
                    let covered = missing
                        .iter()
                        .filter(|e| text::contains_phrase(&s.text, e))
                        .count();
                    (i, s, covered)
                })
                .filter(|(_, _, covered)| *covered > 0)
                .max_by(|a, b| {
                    a.2.cmp(&b.2)
                        .then_with(|| b.1.text.len().cmp(&a.1.text.len()))
                        .then_with(|| b.0.cmp(&a.0))
                });
            let Some((index, sentence, _)) = best else {
                break;
            };
            tried.insert(index);
            let candidate = input.candidate(index, sentence.item(), input.salience(sentence));
            let mut items = self
                .chosen
                .get(&Section::TopicArc)
                .cloned()
                .unwrap_or_default();
            items.push(candidate);
            if self.fits(Section::TopicArc, &items) {
                items.sort_by_key(|c| c.order);
                self.used.insert(index);
                self.chosen.insert(Section::TopicArc, items);
            }
        }
        // No room for whole sentences: name the missing entities on one line, making room for it by
        // dropping the least salient topic-arc items (which may uncover more entities, so recompute).
        loop {
            let mut missing = self.missing_entities(input);
            if missing.is_empty() {
                return;
            }
            let mut items = self
                .chosen
                .get(&Section::TopicArc)
                .cloned()
                .unwrap_or_default();
            let line = |names: &[String]| Candidate {
                text: format!("{ALSO_MENTIONED}{}.", names.join(", ")),
                cites: input.cites_of_names(names),
                score: f64::MAX,
                order: (2, usize::MAX, 0),
                sentence: None,
                words: BTreeSet::new(),
            };
            items.push(line(&missing));
            if self.fits(Section::TopicArc, &items) {
                self.chosen.insert(Section::TopicArc, items);
                return;
            }
            items.pop();
            let weakest = items
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.score.total_cmp(&b.1.score).then(b.0.cmp(&a.0)))
                .map(|(i, _)| i);
            match weakest {
                Some(i) => {
                    let removed = items.remove(i);
                    if let Some(s) = removed.sentence {
                        self.used.remove(&s);
                    }
                    self.chosen.insert(Section::TopicArc, items);
                }
                None => {
                    // Even alone the line is too long: keep the most frequent names that fit.
                    while !missing.is_empty() {
                        missing.pop();
                        let only = vec![line(&missing)];
                        if !missing.is_empty() && self.body_tokens(&only) <= cap {
                            self.chosen.insert(Section::TopicArc, only);
                            return;
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Drops the least valuable items until the rendered whole fits `max_tokens`.
    fn fit_total(&mut self, max_tokens: u32) {
        while (self.count)(&self.rendered()) > max_tokens {
            let weakest = self
                .chosen
                .iter()
                .flat_map(|(section, items)| {
                    items
                        .iter()
                        .enumerate()
                        .map(move |(i, c)| (*section, i, c.score))
                })
                .min_by(|a, b| a.2.total_cmp(&b.2));
            let Some((section, index, _)) = weakest else {
                return;
            };
            if let Some(items) = self.chosen.get_mut(&section) {
                items.remove(index);
            }
        }
    }

    fn snapshot(&self) -> StructuredSummary {
        let mut summary = StructuredSummary::default();
        for (section, items) in &self.chosen {
            let texts: Vec<String> = items.iter().map(|c| c.text.clone()).collect();
            *summary.items_mut(*section) = shown_days(&texts);
        }
        summary
    }

    /// The summary as written: each item followed by the turns it cites.
    fn finish(self) -> StructuredSummary {
        let mut summary = StructuredSummary::default();
        for (section, items) in &self.chosen {
            let texts: Vec<String> = items
                .iter()
                .map(|c| cite::with_marker(&c.text, &c.cites))
                .collect();
            *summary.items_mut(*section) = shown_days(&texts);
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use somna_core::Role;

    use super::*;

    fn len4(s: &str) -> u32 {
        text::estimate_tokens(s)
    }

    fn user(seq: u64, name: &str, content: &str) -> Turn {
        Turn::new(seq, Role::User, content).with_name(name)
    }

    fn assistant(seq: u64, content: &str) -> Turn {
        Turn::new(seq, Role::Assistant, content)
    }

    #[test]
    fn sorts_sentences_into_sections() {
        let turns = vec![
            user(1, "Mara", "My name is Mara and I am allergic to walnuts."),
            assistant(
                2,
                "Welcome, Mara. We decided the fair is on the 14th at the Old Mill.",
            ),
            user(3, "Mara", "Who owns the lot behind the Old Mill?"),
            assistant(4, "I'm not sure; I will find out."),
            user(
                5,
                "Mara",
                "I still need to file permit_form_42.pdf before Friday.",
            ),
            assistant(
                6,
                "Good. The Old Mill has a fine oven, and Mara's bread sells well.",
            ),
        ];
        let s = summarize(&turns, &SectionCaps::default(), 1500, &len4);
        assert_eq!(
            s.decisions,
            vec!["assistant: We decided the fair is on the 14th at the Old Mill. [#2]"]
        );
        assert_eq!(
            s.pending,
            vec![
                "Mara asked: Who owns the lot behind the Old Mill? [#3]",
                "Mara: I still need to file permit_form_42.pdf before Friday. [#5]"
            ]
        );
        assert_eq!(
            s.user_facts,
            vec!["Mara: My name is Mara and I am allergic to walnuts. [#1]"]
        );
        assert_eq!(s.artifacts, vec!["permit_form_42.pdf [#5]"]);
        assert!(
            s.topic_arc.iter().any(|t| t.contains("fine oven")),
            "{:?}",
            s.topic_arc
        );
    }

    #[test]
    fn items_keep_their_day_written_once_per_day_but_lasting_facts_none() {
        let at = |s: &str| somna_core::Timestamp::parse_rfc3339(s).unwrap();
        let turns = vec![
            user(
                1,
                "Mara",
                "We decided the fair is on the 14th at the Old Mill.",
            )
            .at(at("2023-05-08T09:00:00Z")),
            user(
                2,
                "Mara",
                "We agreed Tobin paints the sign for the Old Mill.",
            )
            .at(at("2023-05-08T10:00:00Z")),
            user(3, "Mara", "We settled on rye bread for the Old Mill stall.")
                .at(at("2023-05-09T10:00:00Z")),
            user(4, "Mara", "My name is Mara and I am allergic to walnuts.")
                .at(at("2023-05-09T10:05:00Z")),
        ];
        let s = summarize(&turns, &SectionCaps::default(), 1500, &len4);
        // A lasting fact about a person is true whatever day it was told: no day.
        assert_eq!(
            s.user_facts,
            vec!["Mara: My name is Mara and I am allergic to walnuts. [#4]"]
        );
        assert_eq!(
            s.decisions,
            vec![
                "[2023-05-08] Mara: We decided the fair is on the 14th at the Old Mill. [#1]",
                "Mara: We agreed Tobin paints the sign for the Old Mill. [#2]",
                "[2023-05-09] Mara: We settled on rye bread for the Old Mill stall. [#3]",
            ]
        );
        // Folded into the next summary, the undated item gets its day back and keeps it.
        let mut next = vec![Turn::new(
            1,
            Role::Assistant,
            format!("[CONTEXT SUMMARY]\n{}", s.render()),
        )];
        next.push(
            user(
                9,
                "Mara",
                "We decided the well gets a new rope before winter.",
            )
            .at(at("2023-05-09T11:00:00Z")),
        );
        let again = summarize(&next, &SectionCaps::default(), 1500, &len4);
        assert_eq!(again.decisions[..3], s.decisions[..]);
        assert_eq!(
            again.decisions[3],
            "Mara: We decided the well gets a new rope before winter. [#9]"
        );
    }

    #[test]
    fn render_and_parse_round_trip() {
        let s = StructuredSummary {
            topic_arc: vec!["a".into(), "b".into()],
            decisions: vec![],
            pending: vec!["c".into()],
            user_facts: vec![],
            artifacts: vec!["x.md".into()],
        };
        let text = s.render();
        assert_eq!(
            text,
            "## Topic arc\n- a\n- b\n\n## Decisions\n(none)\n\n## Pending\n- c\n\n## User facts\n(none)\n\n## Artifacts\n- x.md"
        );
        assert_eq!(
            StructuredSummary::parse(&format!("[CONTEXT SUMMARY]\n{text}")),
            s
        );
        let loose = StructuredSummary::parse(
            "intro\n### decisions (at most 300 tokens)\n* one\n## Other\n- skip\n## Pending:\n- two",
        );
        assert_eq!(loose.decisions, vec!["one"]);
        assert_eq!(loose.pending, vec!["two"]);
        assert!(loose.topic_arc.is_empty());
    }

    #[test]
    fn folds_an_earlier_summary_in() {
        let earlier = StructuredSummary {
            topic_arc: vec!["Mara: I arrived from Eastmere with my dog Juniper.".into()],
            decisions: vec![
                "assistant: We decided the festival is on the 14th of Brightmoon.".into(),
            ],
            pending: vec!["Tobin: I need to replace the planks on Thornwick Bridge.".into()],
            user_facts: vec!["Mara: I am allergic to walnuts.".into()],
            artifacts: vec!["festival_plan.md".into()],
        };
        let mut turns = vec![Turn::new(
            1,
            Role::Assistant,
            format!("[CONTEXT SUMMARY]\n{}", earlier.render()),
        )];
        turns.push(user(40, "Mara", "Let's name the bakery the Copper Kettle."));
        turns.push(assistant(
            41,
            "Agreed, the Copper Kettle it is. I'll tell Tobin about the sign.",
        ));
        let s = summarize(&turns, &SectionCaps::default(), 1500, &len4);
        // Items written before items cited their turns cite the summary they come from.
        let cited = |item: &String| format!("{item} [#1]");
        assert_eq!(s.decisions[0], cited(&earlier.decisions[0]));
        assert!(s.decisions.iter().any(|d| d.contains("Copper Kettle")));
        assert_eq!(s.pending[0], cited(&earlier.pending[0]));
        assert_eq!(s.user_facts, vec![cited(&earlier.user_facts[0])]);
        assert_eq!(s.artifacts, vec![cited(&earlier.artifacts[0])]);
        assert_eq!(s.topic_arc[0], cited(&earlier.topic_arc[0]));
        // Folded again, the items keep what they cite.
        let again = summarize(
            &[Turn::new(
                7,
                Role::Assistant,
                format!("[CONTEXT SUMMARY]\n{}", s.render()),
            )],
            &SectionCaps::default(),
            1500,
            &len4,
        );
        assert_eq!(again.decisions, s.decisions);
    }

    #[test]
    fn respects_tiny_caps_and_total() {
        let turns: Vec<Turn> = (0..60)
            .map(|i| {
                if i % 2 == 0 {
                    user(i, "Mara", &format!("I need to bring {i} loaves to Greyford and we decided Tobin will help at the Old Mill."))
                } else {
                    assistant(i, &format!("Noted for Captain Hale, file report_{i}.md and ask Elsbeth about item {i}."))
                }
            })
            .collect();
        for (caps, max) in [
            (
                SectionCaps {
                    topic_arc: 20,
                    decisions: 15,
                    pending: 15,
                    user_facts: 10,
                    artifacts: 10,
                },
                1500,
            ),
            (SectionCaps::default(), 200),
            (SectionCaps::default(), 60),
        ] {
            let s = summarize(&turns, &caps, max, &len4);
            // Caps hold for what the prompt shows: the text without its citations.
            let shown = |text: &str| len4(&cite::strip_all(text));
            for section in Section::ALL {
                let body = s.section_body(section);
                if !s.items(section).is_empty() {
                    assert!(shown(&body) <= section.cap(&caps), "{section:?} {body:?}");
                }
            }
            assert!(shown(&s.render()) <= max, "{max}: {}", s.render());
        }
    }

    #[test]
    fn missing_entities_get_a_line_when_there_is_no_room() {
        let turns = vec![
            user(
                1,
                "Mara",
                "Pip and Juniper met Bram at the Old Mill yesterday afternoon.",
            ),
            user(
                2,
                "Mara",
                "Later Pip and Juniper and Bram walked to the Old Mill again.",
            ),
        ];
        let caps = SectionCaps {
            topic_arc: 16,
            decisions: 0,
            pending: 0,
            user_facts: 0,
            artifacts: 0,
        };
        let s = summarize(&turns, &caps, 1500, &len4);
        assert_eq!(s.topic_arc.len(), 1);
        assert!(
            s.topic_arc[0].starts_with(ALSO_MENTIONED),
            "{:?}",
            s.topic_arc
        );
        for name in ["Pip", "Juniper", "Bram", "Old Mill"] {
            assert!(s.topic_arc[0].contains(name), "{name} in {:?}", s.topic_arc);
        }
    }
}
