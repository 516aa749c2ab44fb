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

use std::collections::{BTreeMap, BTreeSet};

use somna_core::Role;
use somna_core::config::SectionCaps;

use super::text::{self, EntityCounter};
use crate::transcript::Turn;

/// A summary in the five default sections. Items are plain text (rendered as `- item` bullets).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StructuredSummary {
    /// How the conversation went, in order.
    pub topic_arc: Vec<String>,
    /// What was decided or agreed.
    pub decisions: Vec<String>,
    /// Open tasks, commitments and unanswered questions.
    pub pending: Vec<String>,
    /// What users said about themselves.
    pub user_facts: Vec<String>,
    /// Files, URLs, codes and names of things referenced.
    pub artifacts: Vec<String>,
}

/// One section of a [`StructuredSummary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `## Topic arc`.
    TopicArc,
    /// `## Decisions`.
    Decisions,
    /// `## Pending`.
    Pending,
    /// `## User facts`.
    UserFacts,
    /// `## Artifacts`.
    Artifacts,
}

impl Section {
    /// Every section, in rendering order.
    pub const ALL: [Section; 5] = [
        Section::TopicArc,
        Section::Decisions,
        Section::Pending,
        Section::UserFacts,
        Section::Artifacts,
    ];

    /// The heading text (without `## `).
    pub fn title(self) -> &'static str {
        match self {
            Section::TopicArc => "Topic arc",
            Section::Decisions => "Decisions",
            Section::Pending => "Pending",
            Section::UserFacts => "User facts",
            Section::Artifacts => "Artifacts",
        }
    }

    /// This section's cap in `caps`.
    pub fn cap(self, caps: &SectionCaps) -> u32 {
        match self {
            Section::TopicArc => caps.topic_arc,
            Section::Decisions => caps.decisions,
            Section::Pending => caps.pending,
            Section::UserFacts => caps.user_facts,
            Section::Artifacts => caps.artifacts,
        }
    }

    fn from_title(title: &str) -> Option<Section> {
        let title = title.trim().trim_end_matches(':').to_lowercase();
        Section::ALL.into_iter().find(|s| {
            title == s.title().to_lowercase()
                || title.starts_with(&format!("{} (", s.title().to_lowercase()))
        })
    }
}

/// The text an empty section shows.
pub const NONE: &str = "(none)";

impl StructuredSummary {
    /// The items of one section.
    pub fn items(&self, section: Section) -> &[String] {
        match section {
            Section::TopicArc => &self.topic_arc,
            Section::Decisions => &self.decisions,
            Section::Pending => &self.pending,
            Section::UserFacts => &self.user_facts,
            Section::Artifacts => &self.artifacts,
        }
    }

    pub(crate) fn items_mut(&mut self, section: Section) -> &mut Vec<String> {
        match section {
            Section::TopicArc => &mut self.topic_arc,
            Section::Decisions => &mut self.decisions,
            Section::Pending => &mut self.pending,
            Section::UserFacts => &mut self.user_facts,
            Section::Artifacts => &mut self.artifacts,
        }
    }

    /// One section's body as rendered: `- item` lines, or `(none)`.
    pub fn section_body(&self, section: Section) -> String {
        render_items(self.items(section))
    }

    /// True when every section is empty.
    pub fn is_empty(&self) -> bool {
        Section::ALL.iter().all(|s| self.items(*s).is_empty())
    }

    /// Markdown: `## Topic arc`, `## Decisions`, `## Pending`, `## User facts`, `## Artifacts`, each followed by
    /// its bullets or `(none)`, sections separated by a blank line.
    pub fn render(&self) -> String {
        Section::ALL
            .iter()
            .map(|s| format!("## {}\n{}", s.title(), self.section_body(*s)))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Reads a rendered summary back (also with a leading `[CONTEXT SUMMARY]`, other text before the first
    /// heading, `*` bullets, or headings with a suffix like `## Decisions (at most 300 tokens)`). Unknown
    /// headings are skipped; `(none)` is no item.
    pub fn parse(text: &str) -> StructuredSummary {
        let mut summary = StructuredSummary::default();
        let mut current: Option<Section> = None;
        let mut known_heading = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(title) = trimmed.strip_prefix('#') {
                let title = title.trim_start_matches('#').trim();
                current = Section::from_title(title);
                known_heading = current.is_some();
                continue;
            }
            let Some(section) = current.filter(|_| known_heading) else {
                continue;
            };
            let item = trimmed
                .strip_prefix("- ")
                .or_else(|| trimmed.strip_prefix("* "))
                .unwrap_or(trimmed)
                .trim();
            if item.is_empty() || item == NONE {
                continue;
            }
            summary.items_mut(section).push(item.to_string());
        }
        summary
    }
}

fn render_items(items: &[String]) -> String {
    if items.is_empty() {
        NONE.to_string()
    } else {
        items
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Summarizes `turns` extractively: each section within its cap of `caps` (scaled down together when they
/// and the headings would not fit `max_tokens`), the rendered whole within `max_tokens`, token counts by
/// `count`. Deterministic: the same turns give the same summary.
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

/// Items longer than this many characters are cut at a clause boundary.
const MAX_ITEM_CHARS: usize = 240;

const DECISION_CUES: &[&str] = &[
    "decided",
    "we agreed",
    "agreed",
    "we agree",
    "let's",
    "let us",
    "settled on",
    "it's settled",
    "that's settled",
    "we settled",
    "going with",
    "go with",
    "the plan is",
    "final decision",
    "confirmed",
    "we chose",
    "chose to",
    "we will",
    "we'll go",
    "approved",
    "signed off",
    "we're going to",
];

const PENDING_STRONG_CUES: &[&str] = &[
    "todo",
    "to do",
    "need to",
    "needs to",
    "still need",
    "still needs",
    "have to",
    "has to",
    "must",
    "pending",
    "not yet",
    "haven't",
    "hasn't",
    "remind me",
    "don't forget",
    "follow up",
    "get back to you",
    "is due",
    "are due",
    "due by",
    "due on",
    "waiting for",
    "waiting on",
    "on my list",
    "open question",
    "outstanding",
    "unresolved",
    "to be done",
];

const PENDING_WEAK_CUES: &[&str] = &[
    "i'll",
    "i will",
    "we'll",
    "will need",
    "should",
    "tomorrow",
    "next week",
    "later",
    "plan to",
    "going to",
    "soon",
];

const UNCERTAIN_CUES: &[&str] = &[
    "not sure",
    "don't know",
    "do not know",
    "no idea",
    "get back to you",
    "find out",
    "no entry",
    "can't say",
    "cannot say",
    "not yet",
    "unknown",
    "nobody knows",
    "no one knows",
];

/// First-person statements about oneself (matched on normalized words).
pub(crate) const FACT_CUES: &[&str] = &[
    "my name is",
    "my name",
    "call me",
    "i am a",
    "i'm a",
    "i am an",
    "i'm an",
    "i am from",
    "i'm from",
    "i come from",
    "i live",
    "i moved",
    "i grew up",
    "i was born",
    "i work",
    "i've been",
    "i have a",
    "i have an",
    "i have two",
    "i have three",
    "i've got",
    "i prefer",
    "i like",
    "i love",
    "i hate",
    "i don't like",
    "i dislike",
    "i can't stand",
    "my favorite",
    "my favourite",
    "allergic",
    "i never",
    "i always",
    "i don't eat",
    "i want to",
    "my wife",
    "my husband",
    "my son",
    "my daughter",
    "my mother",
    "my father",
    "my sister",
    "my brother",
    "my cousin",
    "my dog",
    "my cat",
    "my friend",
    "my family",
    "my grandmother",
    "my grandfather",
    "my job",
    "my birthday",
];

const FACT_NEGATIVE_CUES: &[&str] = &[
    "i'm not sure",
    "i'm sorry",
    "i'm glad",
    "i'm afraid",
    "i'm curious",
    "i'm going to",
    "i'm thinking",
    "i have a problem",
    "i have a question",
    "i have an idea",
    "when i have",
    "if i have",
    "i've been thinking",
    "i've been wondering",
];

/// The prefix of the fallback line that names entities no chosen sentence mentions.
const ALSO_MENTIONED: &str = "Also mentioned: ";

#[derive(Debug, Clone)]
struct Sentence {
    /// Position of the turn in the input.
    turn: usize,
    role: Role,
    speaker: String,
    text: String,
    norm: String,
    words: BTreeSet<String>,
    entities: Vec<String>,
    number: bool,
    question: bool,
}

impl Sentence {
    fn item(&self) -> String {
        format!("{}: {}", self.speaker, shorten(&self.text))
    }
}

/// A candidate item of one section.
#[derive(Debug, Clone)]
struct Candidate {
    text: String,
    score: f64,
    /// Chronological position: earlier summaries first, then by turn and sentence.
    order: (u8, usize, usize),
    /// The sentence it came from, so no sentence appears twice.
    sentence: Option<usize>,
    /// Content words, for near-duplicate detection.
    words: BTreeSet<String>,
}

struct Input<'a> {
    turns: &'a [Turn],
    sentences: Vec<Sentence>,
    prior: StructuredSummary,
    /// Accepted entities (see [`EntityCounter::entities`]).
    known: BTreeSet<String>,
    /// Entities occurring at least twice, most frequent first.
    recurring: Vec<(String, u32)>,
    /// The same, for lookups.
    recurring_set: BTreeSet<String>,
    /// Artifact → (mentions, first position).
    artifacts: BTreeMap<String, (u32, usize)>,
}

impl<'a> Input<'a> {
    fn new(turns: &'a [Turn]) -> Self {
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
                    for item in earlier.items(section) {
                        if let Some(names) = item.strip_prefix(ALSO_MENTIONED) {
                            for name in names.trim_end_matches('.').split(", ") {
                                entities.add_known(name.trim(), 2);
                            }
                        } else {
                            entities.add_sentence(item);
                        }
                        if section == Section::Artifacts {
                            // An artifact that made it into a summary once keeps some weight.
                            artifacts.entry(item.clone()).or_insert((0, ti)).0 += 2;
                        }
                        prior.items_mut(section).push(item.clone());
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
            for s in text::sentences(&turn.content) {
                entities.add_sentence(&s);
                let entities_here = text::entity_runs(&s).into_iter().map(|(e, _)| e).collect();
                sentences.push(Sentence {
                    turn: ti,
                    role: turn.role,
                    speaker: turn.speaker().to_string(),
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

    fn is_recurring(&self, entity: &str) -> bool {
        self.recurring_set.contains(entity)
    }

    /// Names and numbers: what makes a sentence worth keeping.
    fn salience(&self, s: &Sentence) -> f64 {
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
    fn recency(&self, s: &Sentence) -> f64 {
        if self.turns.len() <= 1 {
            0.0
        } else {
            s.turn as f64 / (self.turns.len() - 1) as f64
        }
    }

    fn candidate(&self, index: usize, text: String, score: f64) -> Candidate {
        let s = &self.sentences[index];
        Candidate {
            words: text::content_words(&s.text),
            text,
            score,
            order: (1, s.turn, index),
            sentence: Some(index),
        }
    }

    fn prior_candidates(&self, section: Section, bonus: f64) -> Vec<Candidate> {
        self.prior
            .items(section)
            .iter()
            .enumerate()
            .filter(|(_, item)| !item.starts_with(ALSO_MENTIONED))
            .map(|(i, item)| {
                let entity_score = text::entity_runs(item).len().min(3) as f64;
                Candidate {
                    text: item.clone(),
                    score: bonus + entity_score + if text::has_number(item) { 1.0 } else { 0.0 },
                    order: (0, 0, i),
                    sentence: None,
                    words: text::content_words(item),
                }
            })
            .collect()
    }

    fn is_decision(&self, s: &Sentence) -> bool {
        !s.question && s.words.len() >= 3 && text::has_cue(&s.norm, DECISION_CUES)
    }

    fn decision_candidates(&self) -> Vec<Candidate> {
        let mut out = self.prior_candidates(Section::Decisions, 8.0);
        for (i, s) in self.sentences.iter().enumerate() {
            if self.is_decision(s) {
                let strength = text::count_cues(&s.norm, DECISION_CUES).min(2) as f64;
                out.push(self.candidate(i, s.item(), 4.0 + 2.0 * strength + self.salience(s)));
            }
        }
        out
    }

    fn pending_candidates(&self) -> Vec<Candidate> {
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
                let text = format!("{} asked: {}", s.speaker, shorten(&s.text));
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
    fn is_unanswered(&self, index: usize) -> bool {
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

    fn fact_candidates(&self) -> Vec<Candidate> {
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
            out.push(self.candidate(i, s.item(), score));
        }
        out
    }

    fn artifact_candidates(&self) -> Vec<Candidate> {
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
    fn topic_candidates(&self, used: &BTreeSet<usize>) -> Vec<Candidate> {
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

struct Builder<'c> {
    count: &'c dyn Fn(&str) -> u32,
    caps: SectionCaps,
    chosen: BTreeMap<Section, Vec<Candidate>>,
    used: BTreeSet<usize>,
}

impl Builder<'_> {
    fn body_tokens(&self, items: &[Candidate]) -> u32 {
        let texts: Vec<String> = items.iter().map(|c| c.text.clone()).collect();
        (self.count)(&render_items(&texts))
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
            *summary.items_mut(*section) = items.iter().map(|c| c.text.clone()).collect();
        }
        summary
    }

    fn finish(self) -> StructuredSummary {
        self.snapshot()
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
fn shorten(sentence: &str) -> String {
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
            vec!["assistant: We decided the fair is on the 14th at the Old Mill."]
        );
        assert_eq!(
            s.pending,
            vec![
                "Mara asked: Who owns the lot behind the Old Mill?",
                "Mara: I still need to file permit_form_42.pdf before Friday."
            ]
        );
        assert_eq!(
            s.user_facts,
            vec!["Mara: My name is Mara and I am allergic to walnuts."]
        );
        assert_eq!(s.artifacts, vec!["permit_form_42.pdf"]);
        assert!(
            s.topic_arc.iter().any(|t| t.contains("fine oven")),
            "{:?}",
            s.topic_arc
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
        assert_eq!(s.decisions[0], earlier.decisions[0]);
        assert!(s.decisions.iter().any(|d| d.contains("Copper Kettle")));
        assert_eq!(s.pending[0], earlier.pending[0]);
        assert_eq!(s.user_facts, earlier.user_facts);
        assert_eq!(s.artifacts, earlier.artifacts);
        assert_eq!(s.topic_arc[0], earlier.topic_arc[0]);
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
            for section in Section::ALL {
                let body = s.section_body(section);
                if !s.items(section).is_empty() {
                    assert!(len4(&body) <= section.cap(&caps), "{section:?} {body:?}");
                }
            }
            assert!(len4(&s.render()) <= max, "{max}: {}", s.render());
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
            topic_arc: 14,
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
