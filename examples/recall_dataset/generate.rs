//! The recall dataset generator: seeded, deterministic, self-contained (its own SplitMix64, its
//! own calendar arithmetic), so the same seed gives byte-identical files on any machine and with
//! any version of any crate. `main.rs` writes the files; the root test `recall_dataset` checks that
//! the shipped `datasets/recall/` is exactly what this produces.
//!
//! A conversation is a group chat of 3–4 named speakers over 12–20 dated sessions days or weeks
//! apart. Facts are planted in it, each the answer to one question, in ways that make retrieval
//! hard (see docs/recall.md): the answer right after (or before) the turn that mentions the
//! subject, paraphrase with no content word shared, a turn *by* the speaker that never names them,
//! dates that only the turn's timestamp carries, facts spread over sessions. Small talk full of
//! question words, names and generic words fills the rest. Every planted fact is checked: its
//! value appears in no other turn, and the word-overlap property of its category holds.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

include!("kinds.rs");

/// The seed of the shipped dataset.
pub const SEED: u64 = 0x005e_ed12_2024;
/// How many conversations the shipped dataset has.
pub const CONVERSATIONS: usize = 12;
/// Longest turn, in characters: retrieval excerpts are longer, so containment stays fair.
const MAX_TURN_CHARS: usize = 280;

/// The generated files: conversations (name, JSONL text) and questions.jsonl's text.
pub struct Generated {
    pub conversations: Vec<(String, String)>,
    pub questions: String,
    /// Questions per category.
    pub categories: BTreeMap<String, usize>,
    /// Turns per conversation.
    pub turns: Vec<usize>,
}

/// Generates `conversations` conversations from `seed`.
pub fn generate(seed: u64, conversations: usize) -> Generated {
    let mut out = Generated {
        conversations: Vec::new(),
        questions: String::new(),
        categories: BTreeMap::new(),
        turns: Vec::new(),
    };
    for c in 0..conversations {
        let mut rng = Rng::new(seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let name = format!("conv{:02}", c + 1);
        let conv = Builder::new(&mut rng, c).build(&mut rng);
        let mut jsonl = String::new();
        for t in &conv.turns {
            let _ = writeln!(
                jsonl,
                "{{\"role\":{},\"name\":{},\"content\":{},\"created_at\":{}}}",
                json(t.role),
                json(&t.name),
                json(&t.text),
                json(&t.at)
            );
        }
        for q in &conv.questions {
            *out.categories.entry(q.category.to_string()).or_default() += 1;
            let turns: Vec<String> = q.turns.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out.questions,
                "{{\"conversation\":{},\"question\":{},\"answer_turns\":[{}],\"category\":{},\"answer\":{}}}",
                json(&name),
                json(&q.question),
                turns.join(","),
                json(q.category),
                json(&q.answer)
            );
        }
        out.turns.push(conv.turns.len());
        out.conversations.push((name, jsonl));
    }
    out
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// SplitMix64: tiny, well-mixed, and frozen here (no dependency can change the bytes).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// A turn as written out.
struct Turn {
    role: &'static str,
    name: String,
    text: String,
    at: String,
}

/// A generated question with its answer turns.
struct Question {
    category: &'static str,
    question: String,
    answer: String,
    turns: Vec<usize>,
}

struct Conversation {
    turns: Vec<Turn>,
    questions: Vec<Question>,
}

/// A planted turn: who says what, and which questions it answers.
#[derive(Clone)]
struct Planted {
    speaker: usize,
    text: String,
    answers: Vec<usize>,
}

/// Consecutive planted turns, placed together in one session.
struct Block {
    session: usize,
    turns: Vec<Planted>,
}

/// A question before layout: its answer turns are found from the blocks.
struct Draft {
    category: &'static str,
    question: String,
    /// The answer text; `None` for temporal questions (the answer turn's date).
    answer: Option<String>,
    /// Words that must appear only in this question's answer turns (its values).
    unique: Vec<String>,
}

/// How many questions of each category a conversation gets (before a little jitter).
const QUOTAS: &[(&str, usize)] = &[
    ("single_hop", 14),
    ("adjacent", 20),
    ("paraphrase", 16),
    ("speaker", 14),
    ("temporal", 15),
    ("multi_hop", 12),
];

struct Builder {
    index: usize,
    speakers: Vec<&'static str>,
    sessions: usize,
    /// Session start times, in seconds since the epoch.
    starts: Vec<u64>,
    blocks: Vec<Block>,
    drafts: Vec<Draft>,
    /// (kind, speaker) pairs used.
    used_facts: BTreeSet<(usize, usize)>,
    /// Uses per kind.
    kind_uses: BTreeMap<usize, usize>,
    /// Every value used so far (lower case), so no two overlap.
    used_values: Vec<String>,
    used_events: BTreeSet<usize>,
    used_relatives: BTreeSet<usize>,
    /// (speaker, relation) pairs used.
    used_relations: BTreeSet<(usize, usize)>,
    travellers: BTreeSet<usize>,
}

impl Builder {
    fn new(rng: &mut Rng, index: usize) -> Builder {
        let n = if rng.chance(0.75) { 4 } else { 3 };
        let mut names: Vec<&'static str> = NAMES.to_vec();
        rng.shuffle(&mut names);
        names.truncate(n);
        let sessions = rng.range(12, 20);
        // 2022-01-03 plus a few weeks per conversation, 09:00–21:59 UTC starts.
        let mut day = 18_995 + index as u64 * 41 + rng.range(0, 20) as u64;
        let mut starts = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            let start = day * 86_400 + rng.range(9 * 3600, 21 * 3600 + 59 * 60) as u64;
            starts.push(start - start % 60);
            day += rng.range(2, 24) as u64;
        }
        Builder {
            index,
            speakers: names,
            sessions,
            starts,
            blocks: Vec::new(),
            drafts: Vec::new(),
            used_facts: BTreeSet::new(),
            kind_uses: BTreeMap::new(),
            used_values: Vec::new(),
            used_events: BTreeSet::new(),
            used_relatives: BTreeSet::new(),
            used_relations: BTreeSet::new(),
            travellers: BTreeSet::new(),
        }
    }

    fn build(mut self, rng: &mut Rng) -> Conversation {
        let target_turns = rng.range(420, 780);
        let mut quotas: Vec<(&'static str, usize)> = QUOTAS
            .iter()
            .map(|&(c, n)| (c, n + rng.range(0, 4) - 2))
            .collect();
        // Multi-session facts first: they constrain the rest (a traveller has no single holiday).
        for (category, n) in &mut quotas {
            if *category == "multi_hop" {
                for _ in 0..*n {
                    if rng.chance(0.4) {
                        self.trip(rng);
                    } else {
                        self.relative(rng);
                    }
                }
                *n = 0;
            }
        }
        let mut plan: Vec<&'static str> = Vec::new();
        for (category, n) in quotas {
            plan.extend(std::iter::repeat_n(category, n));
        }
        rng.shuffle(&mut plan);
        for category in plan {
            match category {
                "temporal" => self.temporal(rng),
                other => self.fact(rng, other),
            }
        }
        self.layout(rng, target_turns)
    }

    fn other_than(&self, rng: &mut Rng, speaker: usize) -> usize {
        loop {
            let s = rng.below(self.speakers.len());
            if s != speaker {
                return s;
            }
        }
    }

    fn fill(&self, template: &str, p: usize, value: &str) -> String {
        capitalized(
            &template
                .replace("{P}", self.speakers[p])
                .replace("{V}", value),
        )
    }

    /// A value of `values` that overlaps no value used so far.
    fn fresh_value(&mut self, rng: &mut Rng, values: &[&'static str]) -> Option<&'static str> {
        let mut order: Vec<&'static str> = values.to_vec();
        rng.shuffle(&mut order);
        let v = order.into_iter().find(|v| {
            let core = core(v);
            self.used_values
                .iter()
                .all(|u| !contains_word(u, &core) && !contains_word(&core, u))
        })?;
        self.used_values.push(core(v));
        Some(v)
    }

    fn question(
        &mut self,
        category: &'static str,
        question: String,
        answer: Option<String>,
        unique: Vec<String>,
    ) -> usize {
        self.drafts.push(Draft {
            category,
            question,
            answer,
            unique,
        });
        self.drafts.len() - 1
    }

    fn block(&mut self, session: usize, turns: Vec<Planted>) {
        self.blocks.push(Block { session, turns });
    }

    /// A personal fact asked in `category` (single_hop, adjacent, paraphrase, speaker).
    fn fact(&mut self, rng: &mut Rng, category: &'static str) {
        let max_uses = if self.speakers.len() == 4 { 3 } else { 2 };
        let mut attempts = 0;
        let (k, p) = loop {
            attempts += 1;
            if attempts > 10_000 {
                return;
            }
            let k = rng.below(KINDS.len());
            let p = rng.below(self.speakers.len());
            if self.used_facts.contains(&(k, p))
                || self.kind_uses.get(&k).copied().unwrap_or(0) >= max_uses
                || (KINDS[k].key == "holiday" && self.travellers.contains(&p))
            {
                continue;
            }
            break (k, p);
        };
        let kind = &KINDS[k];
        let Some(value) = self.fresh_value(rng, kind.values) else {
            return;
        };
        self.used_facts.insert((k, p));
        *self.kind_uses.entry(k).or_default() += 1;
        let x = self.other_than(rng, p);
        let session = rng.below(self.sessions);
        let name = self.speakers[p];
        let unique = vec![core(value)];
        match category {
            "single_hop" => {
                let (ask, said) = pick_pair(
                    rng,
                    kind.ask,
                    kind.plain,
                    |q, a| {
                        let q = self.fill(q, p, value);
                        let a = self.fill(a, p, value);
                        contains_word(&a, name)
                            && shared(&q, &a).iter().any(|w| w != &name.to_lowercase())
                    },
                    kind.key,
                    category,
                );
                let q = self.question(
                    category,
                    self.fill(ask, p, value),
                    Some(value.to_string()),
                    unique,
                );
                self.block(
                    session,
                    vec![Planted {
                        speaker: x,
                        text: self.fill(said, p, value),
                        answers: vec![q],
                    }],
                );
            }
            "adjacent" => {
                if rng.chance(0.5) {
                    // The answer right after the turn that mentions the subject.
                    let (ask, reply) = pick_pair(
                        rng,
                        kind.ask,
                        kind.reply,
                        |q, a| shared(&self.fill(q, p, value), &self.fill(a, p, value)).is_empty(),
                        kind.key,
                        category,
                    );
                    let prompt = self.fill(rng.pick(kind.prompt), p, value);
                    let q = self.question(
                        category,
                        self.fill(ask, p, value),
                        Some(value.to_string()),
                        unique,
                    );
                    self.block(
                        session,
                        vec![
                            Planted {
                                speaker: x,
                                text: prompt,
                                answers: vec![],
                            },
                            Planted {
                                speaker: p,
                                text: self.fill(reply, p, value),
                                answers: vec![q],
                            },
                        ],
                    );
                } else {
                    // The answer right before the turn that mentions the subject.
                    let (ask, lead) = pick_pair(
                        rng,
                        kind.ask,
                        kind.lead,
                        |q, a| shared(&self.fill(q, p, value), &self.fill(a, p, value)).is_empty(),
                        kind.key,
                        category,
                    );
                    let follow = self.fill(rng.pick(kind.follow), p, value);
                    let q = self.question(
                        category,
                        self.fill(ask, p, value),
                        Some(value.to_string()),
                        unique,
                    );
                    self.block(
                        session,
                        vec![
                            Planted {
                                speaker: p,
                                text: self.fill(lead, p, value),
                                answers: vec![q],
                            },
                            Planted {
                                speaker: x,
                                text: follow,
                                answers: vec![],
                            },
                        ],
                    );
                }
            }
            "paraphrase" => {
                let (ask, said) = pick_pair(
                    rng,
                    kind.para_ask,
                    kind.para,
                    |q, a| {
                        let a = self.fill(a, p, value);
                        shared(&self.fill(q, p, value), &a).is_empty() && !contains_word(&a, name)
                    },
                    kind.key,
                    category,
                );
                let q = self.question(
                    category,
                    self.fill(ask, p, value),
                    Some(value.to_string()),
                    unique,
                );
                self.block(
                    session,
                    vec![Planted {
                        speaker: p,
                        text: self.fill(said, p, value),
                        answers: vec![q],
                    }],
                );
            }
            _ => {
                // speaker: said by the person, who is never named in it; elsewhere someone else
                // names them next to the subject's words.
                let (ask, said) = pick_pair(
                    rng,
                    kind.ask,
                    kind.first,
                    |q, a| {
                        let a = self.fill(a, p, value);
                        !shared(&self.fill(q, p, value), &a).is_empty() && !contains_word(&a, name)
                    },
                    kind.key,
                    category,
                );
                let q = self.question(
                    "speaker",
                    self.fill(ask, p, value),
                    Some(value.to_string()),
                    unique,
                );
                self.block(
                    session,
                    vec![Planted {
                        speaker: p,
                        text: self.fill(said, p, value),
                        answers: vec![q],
                    }],
                );
                let elsewhere = (session + 1 + rng.below(self.sessions - 1)) % self.sessions;
                let mention = self.fill(rng.pick(kind.prompt), p, value);
                self.block(
                    elsewhere,
                    vec![Planted {
                        speaker: x,
                        text: mention,
                        answers: vec![],
                    }],
                );
            }
        }
        // Most facts come with a turn on the same subject that answers nothing.
        if rng.chance(0.6) {
            let speaker = rng.below(self.speakers.len());
            let noise = rng.pick(kind.noise).to_string();
            let session = rng.below(self.sessions);
            self.block(
                session,
                vec![Planted {
                    speaker,
                    text: noise,
                    answers: vec![],
                }],
            );
        }
    }

    /// "When did {P} …?": answered by the date of the turn that tells it.
    fn temporal(&mut self, rng: &mut Rng) {
        let free: Vec<usize> = (0..EVENTS.len())
            .filter(|e| !self.used_events.contains(e))
            .collect();
        if free.is_empty() {
            return;
        }
        let e = rng.pick(&free);
        self.used_events.insert(e);
        let event = &EVENTS[e];
        let p = rng.below(self.speakers.len());
        let (speaker, text) = if rng.chance(0.6) {
            (p, self.fill(rng.pick(event.first), p, ""))
        } else {
            (
                self.other_than(rng, p),
                self.fill(rng.pick(event.told), p, ""),
            )
        };
        let q = self.question(
            "temporal",
            self.fill(rng.pick(event.ask), p, ""),
            None,
            vec![],
        );
        let reactor = self.other_than(rng, speaker);
        let reactions = if event.good_news {
            GOOD_REACTIONS
        } else {
            BAD_REACTIONS
        };
        let session = rng.below(self.sessions);
        self.block(
            session,
            vec![
                Planted {
                    speaker,
                    text,
                    answers: vec![q],
                },
                Planted {
                    speaker: reactor,
                    text: rng.pick(reactions).to_string(),
                    answers: vec![],
                },
            ],
        );
    }

    /// Two or three trips of one person, each in its own session.
    fn trip(&mut self, rng: &mut Rng) {
        let free: Vec<usize> = (0..self.speakers.len())
            .filter(|p| !self.travellers.contains(p))
            .collect();
        if free.is_empty() {
            return self.relative(rng);
        }
        let p = rng.pick(&free);
        let n = rng.range(2, 3).min(self.sessions);
        let mut countries = Vec::new();
        for _ in 0..n {
            if let Some(c) = self.fresh_value(rng, COUNTRIES) {
                countries.push(c);
            }
        }
        if countries.len() < 2 {
            return;
        }
        self.travellers.insert(p);
        let answer = match countries.as_slice() {
            [a, b] => format!("{a} and {b}"),
            [a, b, c] => format!("{a}, {b} and {c}"),
            _ => countries.join(", "),
        };
        let ask = self.fill(rng.pick(TRIP_ASK), p, "");
        let q = self.question(
            "multi_hop",
            ask,
            Some(answer),
            countries.iter().map(|c| core(c)).collect(),
        );
        let sessions = distinct_sessions(rng, self.sessions, countries.len());
        for (c, session) in countries.iter().zip(sessions) {
            let planted = if rng.chance(0.6) {
                Planted {
                    speaker: p,
                    text: self.fill(rng.pick(TRIP_FIRST), p, c),
                    answers: vec![q],
                }
            } else {
                let x = self.other_than(rng, p);
                Planted {
                    speaker: x,
                    text: self.fill(rng.pick(TRIP_TOLD), p, c),
                    answers: vec![q],
                }
            };
            self.block(session, vec![planted]);
        }
    }

    /// A relative introduced in one session; their news in a later one.
    fn relative(&mut self, rng: &mut Rng) {
        let p = rng.below(self.speakers.len());
        let rels: Vec<usize> = (0..RELATIONS.len())
            .filter(|r| !self.used_relations.contains(&(p, *r)))
            .collect();
        let names: Vec<usize> = (0..RELATIVES.len())
            .filter(|r| !self.used_relatives.contains(r))
            .collect();
        if rels.is_empty() || names.is_empty() {
            return;
        }
        let rel = rng.pick(&rels);
        let r = rng.pick(&names);
        self.used_relations.insert((p, rel));
        self.used_relatives.insert(r);
        let Some(news) = self.fresh_value(rng, RELATIVE_NEWS) else {
            return;
        };
        let relation = RELATIONS[rel];
        let relative = RELATIVES[r];
        let with = |t: &str| t.replace("{REL}", relation).replace("{R}", relative);
        let ask = with(&self.fill(rng.pick(RELATIVE_ASK), p, ""));
        let q = self.question(
            "multi_hop",
            ask,
            Some(format!("{relative} {news}")),
            vec![relative.to_lowercase()],
        );
        let sessions = distinct_sessions(rng, self.sessions, 2);
        let intro = with(rng.pick(RELATIVE_INTRO));
        self.block(
            sessions[0],
            vec![Planted {
                speaker: p,
                text: intro,
                answers: vec![q],
            }],
        );
        let news_turn = if rng.chance(0.6) {
            Planted {
                speaker: p,
                text: with(&self.fill(rng.pick(RELATIVE_NEWS_FIRST), p, news)),
                answers: vec![q],
            }
        } else {
            let x = self.other_than(rng, p);
            Planted {
                speaker: x,
                text: with(&self.fill(rng.pick(RELATIVE_NEWS_TOLD), p, news)),
                answers: vec![q],
            }
        };
        self.block(sessions[1], vec![news_turn]);
    }

    /// Places the blocks in their sessions among small talk, stamps the turns, resolves the
    /// questions' answer turns and checks every planted value.
    fn layout(self, rng: &mut Rng, target_turns: usize) -> Conversation {
        let planted: usize = self.blocks.iter().map(|b| b.turns.len()).sum();
        let filler_total = target_turns
            .saturating_sub(planted + 3 * self.sessions)
            .max(self.sessions * 4);
        let weights: Vec<usize> = (0..self.sessions).map(|_| rng.range(2, 6)).collect();
        let weight_sum: usize = weights.iter().sum();
        let mut by_session: Vec<Vec<&Block>> = vec![Vec::new(); self.sessions];
        for b in &self.blocks {
            by_session[b.session].push(b);
        }
        let mut turns: Vec<Turn> = Vec::new();
        let mut answers: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (s, blocks) in by_session.iter_mut().enumerate() {
            rng.shuffle(blocks);
            let filler = filler_total * weights[s] / weight_sum;
            // Slots: None is one small-talk turn, Some(i) is block i.
            let mut slots: Vec<Option<usize>> = (0..blocks.len()).map(Some).collect();
            slots.extend(std::iter::repeat_n(None, filler));
            rng.shuffle(&mut slots);
            let mut script: Vec<Planted> = Vec::new();
            let mut said = BTreeSet::new();
            let mut last = usize::MAX;
            let opener = rng.below(self.speakers.len());
            script.push(self.small_talk(rng, opener, GREETINGS, s, &mut said));
            if rng.chance(0.5) {
                let second = self.other_than(rng, opener);
                script.push(self.small_talk(rng, second, GREETINGS, s, &mut said));
            }
            for slot in slots {
                match slot {
                    Some(i) => script.extend(blocks[i].turns.iter().cloned()),
                    None => {
                        let speaker = loop {
                            let sp = rng.below(self.speakers.len());
                            if sp != last {
                                break sp;
                            }
                        };
                        // Chat turns run from a few words to a few sentences.
                        let mut turn = self.small_talk(rng, speaker, SMALL_TALK, s, &mut said);
                        let more = if rng.chance(0.2) {
                            2
                        } else if rng.chance(0.5) {
                            1
                        } else {
                            0
                        };
                        for _ in 0..more {
                            let next = self.small_talk(rng, speaker, SMALL_TALK, s, &mut said);
                            turn.text.push(' ');
                            turn.text.push_str(&next.text);
                        }
                        script.push(turn);
                    }
                }
                last = script.last().map_or(usize::MAX, |t| t.speaker);
            }
            let closer = rng.below(self.speakers.len());
            script.push(self.small_talk(rng, closer, GOODBYES, s, &mut said));
            let mut at = self.starts[s];
            for t in script {
                for &q in &t.answers {
                    answers.entry(q).or_default().push(turns.len());
                }
                assert!(
                    t.text.chars().count() <= MAX_TURN_CHARS,
                    "too long: {}",
                    t.text
                );
                turns.push(Turn {
                    role: if t.speaker == 0 { "assistant" } else { "user" },
                    name: self.speakers[t.speaker].to_string(),
                    text: t.text,
                    at: rfc3339(at),
                });
                at += rng.range(20, 240) as u64;
            }
        }
        let mut questions: Vec<Question> = Vec::new();
        for (i, d) in self.drafts.iter().enumerate() {
            let Some(turn_ids) = answers.get(&i) else {
                continue;
            };
            for word in &d.unique {
                assert!(
                    !contains_word(&d.question, word),
                    "{}: the question names the answer: {}",
                    d.question,
                    word
                );
                for (t, turn) in turns.iter().enumerate() {
                    assert!(
                        !contains_word(&turn.text, word) || turn_ids.contains(&t),
                        "conversation {}: {word:?} of {:?} also in turn {t}: {}",
                        self.index + 1,
                        d.question,
                        turn.text
                    );
                }
            }
            let answer = match &d.answer {
                Some(a) => a.clone(),
                None => long_date(&turns[turn_ids[0]].at),
            };
            questions.push(Question {
                category: d.category,
                question: d.question.clone(),
                answer,
                turns: turn_ids.clone(),
            });
        }
        rng.shuffle(&mut questions);
        Conversation { turns, questions }
    }

    fn small_talk(
        &self,
        rng: &mut Rng,
        speaker: usize,
        templates: &[&'static str],
        session: usize,
        said: &mut BTreeSet<&'static str>,
    ) -> Planted {
        let other = self.other_than(rng, speaker);
        let month = civil(self.starts[session] / 86_400).1 as usize;
        let mut template = rng.pick(templates);
        for _ in 0..20 {
            if said.insert(template) {
                break;
            }
            template = rng.pick(templates);
        }
        let text = template
            .replace("{N}", self.speakers[other])
            .replace("{D}", rng.pick(DAYS))
            .replace("{FOOD}", rng.pick(FOODS))
            .replace("{PLACE}", rng.pick(PLACES))
            .replace("{MONTH}", MONTHS[month - 1]);
        Planted {
            speaker,
            text,
            answers: vec![],
        }
    }
}

/// A (question, answer) template pair that satisfies `ok`, at random; panics when none does (a
/// phrase-bank bug the generator must not hide).
fn pick_pair<'a>(
    rng: &mut Rng,
    asks: &'a [&'a str],
    says: &'a [&'a str],
    ok: impl Fn(&str, &str) -> bool,
    kind: &str,
    category: &str,
) -> (&'a str, &'a str) {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for q in asks {
        for a in says {
            if ok(q, a) {
                pairs.push((q, a));
            }
        }
    }
    assert!(
        !pairs.is_empty(),
        "kind {kind}: no template pair fits {category}"
    );
    rng.pick(&pairs)
}

/// `text` with its first letter upper case ("a mocha, please!" → "A mocha, please!").
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `n` distinct sessions in increasing order.
fn distinct_sessions(rng: &mut Rng, sessions: usize, n: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..sessions).collect();
    rng.shuffle(&mut all);
    all.truncate(n);
    all.sort_unstable();
    all
}

/// The searchable part of a value: lower case, without a leading article.
fn core(value: &str) -> String {
    let v = value.to_lowercase();
    for article in ["a ", "an ", "the "] {
        if let Some(rest) = v.strip_prefix(article) {
            return rest.to_string();
        }
    }
    v
}

/// Does `text` contain `phrase` as whole words (case-insensitive)?
fn contains_word(text: &str, phrase: &str) -> bool {
    let text = text.to_lowercase();
    let phrase = phrase.to_lowercase();
    let mut from = 0;
    while let Some(i) = text[from..].find(&phrase) {
        let start = from + i;
        let end = start + phrase.len();
        let before = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after = text[end..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return true;
        }
        from = start + 1;
        while !text.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

/// Words that carry no content for the overlap checks: function words, question words, light verbs.
const CHECK_STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "from",
    "by", "about", "as", "is", "are", "was", "were", "be", "been", "am", "do", "does", "did",
    "have", "has", "had", "get", "got", "go", "went", "what", "which", "who", "when", "where",
    "why", "how", "this", "that", "it", "its", "i", "me", "my", "we", "our", "you", "your", "he",
    "him", "his", "she", "her", "they", "them", "their", "not", "no", "so", "if", "than", "too",
    "very", "just", "up", "s", "t", "ll", "re", "ve", "m", "d",
];

/// Content-word stems of `text` (lower case, stop words out, -ing/-ed/-es/-s off).
fn stems(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty() && !CHECK_STOP.contains(&w.as_str()))
        .map(|w| {
            for suffix in ["ing", "ed", "es", "s"] {
                if w.len() > suffix.len() + 2 && w.ends_with(suffix) {
                    return w[..w.len() - suffix.len()].to_string();
                }
            }
            w
        })
        .collect()
}

/// The content stems two texts share.
fn shared(a: &str, b: &str) -> Vec<String> {
    stems(a).intersection(&stems(b)).cloned().collect()
}

/// (year, month, day) of a day number since 1970-01-01 (Howard Hinnant's civil_from_days).
fn civil(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn rfc3339(secs: u64) -> String {
    let (y, m, d) = civil(secs / 86_400);
    let t = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// "2023-05-08T13:56:00Z" → "8 May 2023".
fn long_date(rfc3339: &str) -> String {
    let y = &rfc3339[0..4];
    let m: usize = rfc3339[5..7].parse().unwrap_or(1);
    let d: u32 = rfc3339[8..10].parse().unwrap_or(1);
    format!("{d} {} {y}", MONTHS[m - 1])
}

/// Every kind's templates against every one of its values: the pairs each category needs exist.
/// Returns the problems found (empty when the phrase bank is sound).
pub fn audit() -> Vec<String> {
    let name = "Priya";
    let fill = |t: &str, v: &str| t.replace("{P}", name).replace("{V}", v);
    let mut problems = Vec::new();
    for kind in KINDS {
        for v in kind.values {
            let any = |asks: &[&str], says: &[&str], ok: &dyn Fn(&str, &str) -> bool| {
                asks.iter()
                    .any(|q| says.iter().any(|a| ok(&fill(q, v), &fill(a, v))))
            };
            let checks: [(&str, bool); 5] = [
                (
                    "single_hop",
                    any(kind.ask, kind.plain, &|q, a| {
                        contains_word(a, name) && shared(q, a).iter().any(|w| w != "priya")
                    }),
                ),
                (
                    "adjacent",
                    any(kind.ask, kind.reply, &|q, a| shared(q, a).is_empty()),
                ),
                (
                    "adjacent-reverse",
                    any(kind.ask, kind.lead, &|q, a| shared(q, a).is_empty()),
                ),
                (
                    "paraphrase",
                    any(kind.para_ask, kind.para, &|q, a| {
                        shared(q, a).is_empty() && !contains_word(a, name)
                    }),
                ),
                (
                    "speaker",
                    any(kind.ask, kind.first, &|q, a| {
                        !shared(q, a).is_empty() && !contains_word(a, name)
                    }),
                ),
            ];
            for (category, ok) in checks {
                if !ok {
                    problems.push(format!("{} / {v}: {category}", kind.key));
                }
            }
            for t in kind
                .ask
                .iter()
                .chain(kind.para_ask)
                .chain(kind.prompt)
                .chain(kind.follow)
                .chain(kind.noise)
            {
                if contains_word(&fill(t, v), &core(v)) {
                    problems.push(format!("{} / {v}: the value is in {t:?}", kind.key));
                }
            }
        }
    }
    problems
}
