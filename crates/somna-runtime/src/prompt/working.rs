//! The working context: what the agent remembers that is relevant to the latest input — memory
//! facts, then excerpts of the archive (each hit of the store's ranking, with the turn before it
//! and the reply after it when the words found it), merged where they overlap, dated and named, in
//! the order they were said — gathered into the room the rest of the prompt leaves, and rendered
//! as the context note. docs/prompt.md says how the room is filled and why.

use std::sync::Arc;

use serde::Serialize;
use somna_core::config::AgentConfig;
use somna_core::message::{Message, Role};
use somna_core::retrieval::{Period, period_in};
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Fact};
use somna_llm::prompts;
use somna_store::{DocKind, Store, StoreError};

use super::latest_user;

/// The best-ranked hits that always come with their neighbours (see [`takes_neighbours`]).
const NEIGHBOURED_HITS: usize = 2;
/// The share of a hit's score its words must have given for the hit to come with its neighbours
/// past the first [`NEIGHBOURED_HITS`] (see [`takes_neighbours`]).
const NEIGHBOUR_WORDS: f32 = 0.5;

/// About what a hit with its two neighbours takes in a note, in tokens (short chat turns): how
/// many hits the first read of a ranking takes for a room.
const HIT_ESTIMATE: u64 = 64;

/// A neighbour turn longer than this part of the working context's room is cut in an excerpt.
const MAX_TURN_SHARE: u64 = 4;
/// What a hit may not take of the working context's room: the note's framing and headings.
const HIT_CAP_MARGIN: u64 = 64;

/// What the working context is gathered for: the latest input's text, and when known its vector
/// (with the model that made it) and the period it names.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<'a> {
    /// The input's text (BM25's query).
    pub text: &'a str,
    /// The input's vector and the embedder model that made it (semantic retrieval).
    pub semantic: Option<(&'a str, &'a [f32])>,
    /// The period the input names or implies ("in May 2023", "two weeks ago"): the hits said in
    /// it come first.
    pub period: Option<Period>,
}

impl<'a> Query<'a> {
    /// The query of the latest user input of `history` (its period read relative to when it
    /// was said), with `semantic` when given.
    pub fn latest(history: &'a [Message], semantic: Option<(&'a str, &'a [f32])>) -> Self {
        let latest = latest_user(history);
        let text = latest.map_or("", |m| m.content.as_str());
        Query {
            text,
            semantic,
            period: latest.and_then(|m| period_in(text, m.created_at)),
        }
    }
}

/// What the agent remembers that is relevant to the latest input.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkingContext {
    /// Memory facts, most relevant first.
    pub facts: Vec<Fact>,
    /// Archive excerpts (each a hit with its neighbouring turns), in the order they were said.
    pub excerpts: Vec<Excerpt>,
}

/// A run of consecutive archived turns around one or more search hits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excerpt {
    /// The turns, in seq order (originals: never summaries or placeholders), shared with the
    /// store's cache.
    pub turns: Vec<Arc<Message>>,
    /// The seqs of the turns that are search hits (the others are their neighbours): a hit is
    /// shown whole (see [`Caps`]).
    pub hits: Vec<u64>,
    /// The best score of a hit in the run.
    pub score: f64,
}

impl WorkingContext {
    /// Fills at most `budget` tokens with what the agent remembers about `query`: memory facts
    /// (at most `working_facts`), then archive hits (at most `working_archive`) with their
    /// neighbouring turns, most relevant first. Reads only the index's postings for the query.
    pub fn gather(
        store: &Store,
        agent: &AgentId,
        query: &str,
        config: &AgentConfig,
        counter: &TokenCounter,
        budget: u64,
    ) -> Result<Self, StoreError> {
        let query = Query {
            text: query,
            ..Query::default()
        };
        Self::gather_with(store, agent, &query, config, counter, budget)
    }

    /// [`WorkingContext::gather`] for a [`Query`]: with its vector, archive hits rank by BM25
    /// fused with the stored vectors' similarity (`Store::search_archive_with`); with a period,
    /// the hits said in it come first.
    pub fn gather_with(
        store: &Store,
        agent: &AgentId,
        query: &Query<'_>,
        config: &AgentConfig,
        counter: &TokenCounter,
        budget: u64,
    ) -> Result<Self, StoreError> {
        let (semantic, period) = (query.semantic, query.period);
        let query = query.text;
        let mut out = WorkingContext::default();
        if query.trim().is_empty() || budget == 0 {
            return Ok(out);
        }
        let memory = &config.memory;
        // The headings and the note's framing.
        let mut used = u64::from(counter.count_text_memo(prompts::WORKING_CONTEXT_NOTE))
            + u64::from(counter.count_text_memo(prompts::MEMORY_HEADING))
            + u64::from(counter.count_text_memo(prompts::ARCHIVE_HEADING))
            + 8;
        if memory.working_facts > 0 {
            let hits = store.search(agent, DocKind::Fact, query, memory.working_facts as usize)?;
            if !hits.is_empty() {
                let facts = store.facts(agent)?;
                for hit in hits {
                    let Some(fact) = facts.iter().find(|f| f.id == hit.id) else {
                        continue;
                    };
                    let cost = u64::from(counter.count_text(&fact.text)) + 2;
                    if used + cost <= budget {
                        used += cost;
                        out.facts.push(fact.clone());
                    }
                }
            }
        }
        if memory.working_archive == 0 {
            return Ok(out);
        }
        let turn_cap = turn_cap(budget);
        let caps = Caps {
            neighbour: turn_cap,
            hit: hit_cap(budget),
        };
        let mut lines = LineCounter::new(counter);
        // Runs of consecutive seqs chosen so far.
        let mut chosen: Vec<Excerpt> = Vec::new();
        // The turns chosen so far, by seq, with their day: a run that follows a chosen turn of
        // its own day needs no day heading of its own.
        let mut have = ChosenTurns::default();
        let max_hits = memory.working_archive as usize;
        // One ranking (live messages, which the archive reads skip, take a place in it too), read
        // a few hits at a time until the room is full: a note of 6,000 tokens needs some two dozen
        // hits, not the 256 it may take. A question that names a period reads its whole ranking
        // at once, to put the hits of that period first.
        let mut ranking = store.ranking(
            agent,
            query,
            semantic,
            max_hits.saturating_mul(if period.is_some() { 4 } else { 2 }),
        )?;
        // The first batch about as many hits as the room takes (each with its neighbours), the
        // next ones more: what is read and not shown costs a copy and a lookup each.
        let first_batch = usize::try_from(budget.saturating_sub(used) / HIT_ESTIMATE)
            .unwrap_or(usize::MAX)
            .clamp(8, 32);
        let mut taken = 0;
        let mut first_read = true;
        while !ranking.is_done() && taken < max_hits && budget.saturating_sub(used) >= 8 {
            let batch = match (period, first_read) {
                (Some(_), _) => ranking.len(),
                (None, true) => first_batch,
                (None, false) => 32,
            };
            first_read = false;
            let docs = ranking.next_batch(batch);
            let seqs: Vec<u64> = docs.iter().map(|d| d.id).collect();
            let mut hits: Vec<(Arc<Message>, f64, f32)> = store
                .archived_messages(agent, &seqs)?
                .into_iter()
                .zip(docs)
                .filter_map(|(m, d)| m.map(|m| (m, d.score, d.words)))
                .collect();
            if let Some(period) = period {
                // What was said in the period the question names first, each part in rank order.
                hits.sort_by_key(|(m, _, _)| !period.contains(m.created_at));
            }
            hits.truncate(max_hits - taken);
            // Which hits come with their neighbours (see `takes_neighbours`).
            let first = taken;
            let with_neighbours = |i: usize, words: f32| takes_neighbours(first + i, words);
            taken += hits.len();
            // The new hits' neighbours, read together (one multi-key read instead of two point
            // reads a hit); a hit is its own neighbour's original.
            let mut neighbours: rustc_hash::FxHashMap<u64, Arc<Message>> = hits
                .iter()
                .map(|(m, _, _)| (m.seq, Arc::clone(m)))
                .collect();
            let wanted: Vec<u64> = {
                let mut seqs: Vec<u64> = hits
                    .iter()
                    .enumerate()
                    .filter(|&(i, (_, _, words))| with_neighbours(i, *words))
                    .flat_map(|(_, (m, _, _))| [m.seq.checked_sub(1), m.seq.checked_add(1)])
                    .flatten()
                    .filter(|s| !neighbours.contains_key(s) && !have.contains(*s))
                    .collect();
                seqs.sort_unstable();
                seqs.dedup();
                seqs
            };
            for (seq, m) in wanted.iter().zip(store.archived_messages(agent, &wanted)?) {
                if let Some(m) = m {
                    neighbours.insert(*seq, m);
                }
            }
            for (i, (message, score, words)) in hits.into_iter().enumerate() {
                let with_neighbours = with_neighbours(i, words);
                if budget.saturating_sub(used) < 8 {
                    break;
                }
                let seq = message.seq;
                if have.contains(seq) {
                    // Already in whole, as a neighbour.
                    continue;
                }
                // The turn before the hit and the reply after it, when they are archived too (a
                // live neighbour is in the prompt already) and the hit takes them.
                let mut run = Vec::with_capacity(3);
                if let Some(prev) = seq.checked_sub(1) {
                    if with_neighbours && !have.contains(prev) {
                        run.extend(neighbours.get(&prev).cloned());
                    }
                }
                run.push(message);
                if with_neighbours && !have.contains(seq + 1) {
                    run.extend(neighbours.get(&(seq + 1)).cloned());
                }
                // A neighbour longer than its cap is left out rather than cut: cut, a long reply
                // rarely keeps the part that matters, and its tokens buy the next hit instead.
                run.retain(|m| {
                    !m.content.trim().is_empty()
                        && (m.seq == seq || lines.content(m) <= caps.neighbour)
                });
                let before = |run: &[Arc<Message>]| {
                    let first = run.first().map_or(seq, |m| m.seq);
                    have.last_before(first)
                };
                let cost = run_cost(&run, seq, caps, before(&run), &mut lines);
                // The hit alone when its neighbours do not fit.
                let (run, cost) = if used + cost <= budget {
                    (run, cost)
                } else {
                    let Some(only) = run.into_iter().find(|m| m.seq == seq) else {
                        continue;
                    };
                    let alone = std::slice::from_ref(&only);
                    let cost = run_cost(alone, seq, caps, before(alone), &mut lines);
                    if used + cost > budget {
                        continue;
                    }
                    (vec![only], cost)
                };
                used += cost;
                for m in &run {
                    have.insert(m.seq, day_of(m));
                }
                chosen.push(Excerpt {
                    turns: run,
                    hits: vec![seq],
                    score,
                });
            }
        }
        // A run was charged no day heading when it follows a chosen turn of its day; that holds
        // in the note when the turns' days never go back (a run chosen later between them is of
        // that day too). Turns whose times go back (an import of shuffled lines) are checked
        // against the rendered note, and the last-ranked runs leave until it fits.
        if have.days_in_order() {
            out.excerpts = merge_runs(chosen);
            return Ok(out);
        }
        let caps = Caps::for_room(budget);
        loop {
            out.excerpts = merge_runs(chosen.clone());
            match out.render(counter, caps) {
                Some((_, bound)) if bound > budget && chosen.pop().is_some() => {}
                _ => break,
            }
        }
        Ok(out)
    }

    /// True when there is nothing to add to the prompt.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty() && self.excerpts.is_empty()
    }

    /// The archived turns the working context holds, in seq order.
    pub fn turns(&self) -> impl Iterator<Item = &Message> {
        self.excerpts
            .iter()
            .flat_map(|e| e.turns.iter().map(|m| &**m))
    }

    /// The working context as the text of the context note with an upper bound of its tokens (as
    /// a message), or `None` when empty. Hits longer than `caps.hit` tokens, and neighbours
    /// longer than `caps.neighbour`, are cut.
    pub fn render(&self, counter: &TokenCounter, caps: Caps) -> Option<(String, u64)> {
        if self.is_empty() {
            return None;
        }
        // Room for every line at once: its text, a name and a day heading.
        let size = prompts::WORKING_CONTEXT_NOTE.len()
            + self.facts.iter().map(|f| f.text.len() + 3).sum::<usize>()
            + self.turns().map(|m| m.content.len() + 32).sum::<usize>()
            + 64;
        let mut out = String::with_capacity(size);
        out.push_str(prompts::WORKING_CONTEXT_NOTE);
        let mut lines = LineCounter::new(counter);
        // The message's own overhead and the framing line.
        let mut tokens =
            u64::from(counter.count_fixed_message(Role::System, prompts::WORKING_CONTEXT_NOTE));
        if !self.facts.is_empty() {
            out.push_str("\n\n");
            out.push_str(prompts::MEMORY_HEADING);
            tokens += u64::from(counter.count_text_memo(prompts::MEMORY_HEADING)) + 2;
            for f in &self.facts {
                out.push_str("\n- ");
                out.push_str(&f.text);
                tokens += u64::from(counter.count_text(&f.text)) + 2;
            }
        }
        if !self.excerpts.is_empty() {
            out.push_str("\n\n");
            out.push_str(prompts::ARCHIVE_HEADING);
            tokens += u64::from(counter.count_text_memo(prompts::ARCHIVE_HEADING)) + 2;
            let mut prev: Option<&Message> = None;
            for (i, excerpt) in self.excerpts.iter().enumerate() {
                if i > 0 {
                    out.push_str("\n…");
                    tokens += 2;
                }
                for m in &excerpt.turns {
                    let cap = caps.of(m.seq, &excerpt.hits);
                    out.push('\n');
                    let line_tokens = push_excerpt_line(&mut out, m, prev, cap, &mut lines);
                    // The line break and a token of margin.
                    tokens += line_tokens + 2;
                    prev = Some(m);
                }
            }
        }
        Some((out, tokens))
    }
}

/// The turns a working context has chosen so far, by seq, each with its day: a vector kept in seq
/// order. A note holds at most a few hundred turns and is asked whether it holds one far more often
/// than it takes one; a binary search over one block of memory costs a fraction of a B-tree's
/// walk (the B-tree map it replaced was a tenth of the note's gathering).
#[derive(Debug, Default)]
struct ChosenTurns(Vec<(u64, u64)>);

impl ChosenTurns {
    fn position(&self, seq: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&seq, |&(s, _)| s)
    }

    fn contains(&self, seq: u64) -> bool {
        self.position(seq).is_ok()
    }

    fn insert(&mut self, seq: u64, day: u64) {
        match self.position(seq) {
            Ok(i) => self.0[i].1 = day,
            Err(i) => self.0.insert(i, (seq, day)),
        }
    }

    /// The chosen turn with the greatest seq below `seq`, and its day.
    fn last_before(&self, seq: u64) -> Option<(u64, u64)> {
        let i = self.0.partition_point(|&(s, _)| s < seq);
        i.checked_sub(1).map(|i| self.0[i])
    }

    /// Whether the days never go back in seq order.
    fn days_in_order(&self) -> bool {
        self.0.iter().map(|&(_, day)| day).is_sorted()
    }
}

/// Orders runs by their first seq and merges runs that touch or overlap into one excerpt.
fn merge_runs(mut runs: Vec<Excerpt>) -> Vec<Excerpt> {
    runs.sort_by_key(|r| r.turns.first().map_or(0, |m| m.seq));
    let mut out: Vec<Excerpt> = Vec::with_capacity(runs.len());
    for run in runs {
        match out.last_mut() {
            Some(last)
                if matches!(
                    (last.turns.last(), run.turns.first()),
                    (Some(a), Some(b)) if b.seq <= a.seq + 1
                ) =>
            {
                let end = last.turns.last().map_or(0, |m| m.seq);
                last.turns
                    .extend(run.turns.into_iter().filter(|m| m.seq > end));
                last.hits.extend(run.hits);
                last.score = last.score.max(run.score);
            }
            _ => out.push(run),
        }
    }
    out
}

/// The tokens a run of turns around the hit `hit` takes in the note at most (each on its line,
/// the run after its separator and under its own day heading), without building its lines.
/// `before` is the chosen turn nearest before the run (its seq and day), which the run will follow
/// in the note: a run that continues it needs no separator, and one said on its day no day
/// heading. What the run saves the turn after it (a heading or separator it no longer needs) is
/// not subtracted: the count stays an upper bound.
fn run_cost(
    run: &[Arc<Message>],
    hit: u64,
    caps: Caps,
    before: Option<(u64, u64)>,
    lines: &mut LineCounter<'_>,
) -> u64 {
    let first = run.first();
    let joined = before.is_some_and(|(seq, _)| first.is_some_and(|m| m.seq == seq + 1));
    let mut cost = if joined { 0 } else { 2 };
    let mut prev = None;
    for m in run {
        let cap = if m.seq == hit {
            caps.hit
        } else {
            caps.neighbour
        };
        let line = lines.turn(m, prev, cap);
        let continues_day = prev.is_none() && before.is_some_and(|(_, day)| day == day_of(m));
        cost += if continues_day {
            line.saturating_sub(lines.day)
        } else {
            line
        };
        prev = Some(m);
    }
    cost
}

/// Does the `nth` hit (0-based, in rank order), whose words gave `words` of its score, come with
/// its neighbours? A hit found by the question's words is often the turn that asks or mentions
/// it, and the answer is the reply next to it ("What did you name the puppy?" — "Biscuit!"); a
/// hit found by meaning matched what the question means, so it is likely the answer itself, and
/// alone it costs a third of what it costs with two neighbours, which buys two more hits. The
/// best two always take them: they are the likeliest to matter. With BM25 alone every hit is
/// found by its words and takes its neighbours, as before.
///
/// Measured with all-mpnet-base-v2 on the tuning split at 2k / 4k / 8k (some %, paraphrase in
/// brackets): every hit with neighbours 91.9 (58.6) / 95.8 (77.0) / 98.8 (93.7); this rule 92.5
/// (67.2) / 97.6 (89.1) / 99.7 (98.3); the best two only 92.2 (67.8) / 97.1 (87.4) / 99.2
/// (96.0), which lost the "adjacent" questions BM25 found (90.5% at 2k where all neighbours held
/// 97.1) and, with BM25 alone, 5.7 points at 4k. With all-MiniLM-L6-v2: 83.9 (21.3) / 90.9 (51.7)
/// / 96.6 (81.0) → 85.9 (39.1) / 94.3 (71.8) / 99.4 (96.6); the long-turn assistant split 93.1 /
/// 96.1 → 93.1 / 96.6 at 2k / 4k.
fn takes_neighbours(nth: usize, words: f32) -> bool {
    nth < NEIGHBOURED_HITS || words >= NEIGHBOUR_WORDS
}

/// Where an excerpt's turns are cut, in tokens of content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// A neighbour (the turn before a hit, the reply after it): a quarter of the note's room, so
    /// that context never crowds out other hits. A longer neighbour is left out, not cut.
    pub neighbour: u64,
    /// A hit: all of the note's room but its framing. The turn a search found is what the question
    /// needs; cut, it may lose the part that answers (a long reply's recommendation in its
    /// seventh point), and a long turn that does not fit whole in what is left is passed over
    /// for the next hit rather than cut.
    pub hit: u64,
}

impl Caps {
    /// The caps of a note of `room` tokens.
    pub fn for_room(room: u64) -> Self {
        Caps {
            neighbour: turn_cap(room),
            hit: hit_cap(room),
        }
    }

    fn of(self, seq: u64, hits: &[u64]) -> u64 {
        if hits.contains(&seq) {
            self.hit
        } else {
            self.neighbour
        }
    }
}

/// Counts the lines of a note without tokenizing each: a day heading's tokens are the same for
/// every day, counted once, and each speaker's name once.
struct LineCounter<'a> {
    counter: &'a TokenCounter,
    /// `[2023-05-08]` and its line break, with a token of margin.
    day: u64,
    /// Each speaker's name and the ": " after it: a few per note, a list scanned by reference.
    names: Vec<(String, u64)>,
    /// What a message's stored count spends besides its content, per role and name.
    /// A few speakers per note: a list scanned by reference, so a lookup never allocates.
    overheads: Vec<(Role, Option<String>, u64)>,
}

impl<'a> LineCounter<'a> {
    fn new(counter: &'a TokenCounter) -> Self {
        LineCounter {
            counter,
            day: u64::from(counter.count_text("[2023-05-08]\n")) + 1,
            names: Vec::new(),
            overheads: Vec::new(),
        }
    }

    /// At most the tokens of `m`'s line after `prev` (see [`push_excerpt_line`]), without building
    /// it.
    fn turn(&mut self, m: &Message, prev: Option<&Message>, cap: u64) -> u64 {
        let heading = if same_day(m, prev) { 0 } else { self.day };
        heading + self.name(speaker(m)) + self.content(m).min(cap + 2) + 2
    }

    /// At most the tokens of `m`'s content: its stored count less the message's overhead.
    fn content(&mut self, m: &Message) -> u64 {
        let known = self
            .overheads
            .iter()
            .find(|(role, name, _)| *role == m.role && name.as_deref() == m.name.as_deref());
        let overhead = match known {
            Some(&(_, _, n)) => n,
            None => {
                let mut empty = Message::new(m.role, "");
                empty.name.clone_from(&m.name);
                let n = u64::from(self.counter.count_message(&empty));
                self.overheads.push((m.role, m.name.clone(), n));
                n
            }
        };
        u64::from(m.tokens).saturating_sub(overhead)
    }

    fn name(&mut self, who: &str) -> u64 {
        if let Some((_, n)) = self.names.iter().find(|(name, _)| name == who) {
            return *n;
        }
        // The name and the ": " after it.
        let n = u64::from(self.counter.count_text(&format!("{who}: ")));
        self.names.push((who.to_string(), n));
        n
    }
}

/// Appends one archived turn to `out` as the prompt shows it — `Nora: text`, on one line (its
/// whitespace runs made single spaces), cut to about `cap` tokens, under a `[2023-05-08]` heading
/// when its day differs from the turn before it (`prev`, the previous line of the note) — and
/// returns an upper bound of its tokens: its heading's, its name's and its content's (the stored
/// count less a message's overhead), each counted apart (a piece counted alone never takes fewer
/// tokens than inside the line), so a long note is never tokenized whole; the caller adds the line
/// break and a token of margin. The day is what "when" questions need; a time of day per line
/// would cost about as many tokens as a short turn. Written in place: a note of a hundred lines
/// builds no line of its own.
fn push_excerpt_line(
    out: &mut String,
    m: &Message,
    prev: Option<&Message>,
    cap: u64,
    lines: &mut LineCounter<'_>,
) -> u64 {
    let who = speaker(m);
    let heading = if same_day(m, prev) {
        0
    } else {
        let label = m.created_at.minute_label();
        out.push('[');
        out.push_str(label.get(..10).unwrap_or(&label));
        out.push_str("]\n");
        lines.day
    };
    out.push_str(who);
    out.push_str(": ");
    let name_tokens = lines.name(who);
    let text_tokens = if u64::from(m.tokens) <= cap {
        push_collapsed(out, &m.content);
        lines.content(m)
    } else {
        // About four characters a token; cut at a word boundary.
        let max_chars = usize::try_from(cap.saturating_mul(4)).unwrap_or(usize::MAX);
        let text = m.content.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut cut: String = text.chars().take(max_chars).collect();
        if let Some(space) = cut.rfind(' ') {
            cut.truncate(space);
        }
        cut.push_str(" …");
        out.push_str(&cut);
        u64::from(lines.counter.count_text(&cut))
    };
    heading + name_tokens + text_tokens
}

/// Appends `text` to `out` with its white space runs made single spaces and its ends trimmed (its
/// words joined by one space): a turn that is so already, as most are, is copied whole.
fn push_collapsed(out: &mut String, text: &str) {
    if is_collapsed(text) {
        out.push_str(text);
        return;
    }
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
}

/// True when `text` has no white space but single spaces between words (what `push_collapsed`
/// would make of it is itself). Every note line passes through it, so the scan is written for the
/// common case: two branch-free passes over the bytes (which the compiler vectorizes) flag two
/// spaces in a row, and an ASCII white space other than a space or a byte of 0xC2 and above
/// (which may start a non-ASCII white space: U+0085 and U+00A0; U+1680; U+2000–U+200A, U+2028,
/// U+2029, U+202F, U+205F; U+3000 start with 0xC2 or 0xE1–0xE3); only a text so flagged (one
/// with an accent, a curly quote or a dash, often) is scanned again, decoding the chars that
/// start with those lead bytes. A char decoded per byte cost a long past's turn ~8% of its
/// work, a byte-by-byte branching scan ~9% of its prompt (docs/benchmarks.md).
fn is_collapsed(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
        return false;
    }
    let next = bytes.get(1..).unwrap_or_default();
    let doubled = bytes.iter().zip(next).fold(0u8, |acc, (&a, &b)| {
        acc | (u8::from(a == b' ') & u8::from(b == b' '))
    });
    // An ASCII white space other than a space, or a byte that may start a non-ASCII one.
    let suspect = bytes.iter().fold(0u8, |acc, &b| {
        acc | u8::from(b.wrapping_sub(b'\t') < 5) | u8::from(b >= 0xC2)
    });
    if doubled != 0 {
        return false;
    }
    // A lead byte starts a char, so `i` is a char boundary.
    suspect == 0
        || !bytes.iter().enumerate().any(|(i, &b)| {
            b.wrapping_sub(b'\t') < 5
                || (matches!(b, 0xC2 | 0xE1..=0xE3)
                    && text[i..].chars().next().is_some_and(char::is_whitespace))
        })
}

/// The most tokens one archived neighbour turn takes in a working context of `budget` tokens: a
/// quarter of it (at least 32), so that one long turn cannot crowd out every other hit.
fn turn_cap(budget: u64) -> u64 {
    (budget / MAX_TURN_SHARE).max(32)
}

/// The most tokens one hit takes in a working context of `budget` tokens: all of it but the
/// note's framing (a hit longer than the whole note is cut to it: a part of the best hit is worth
/// more than nothing).
fn hit_cap(budget: u64) -> u64 {
    budget.saturating_sub(HIT_CAP_MARGIN).max(32)
}

/// Who said `m`, as an excerpt names them.
fn speaker(m: &Message) -> &str {
    m.name.as_deref().unwrap_or(match m.role {
        Role::User => "user",
        Role::Assistant => "you",
        Role::Tool => "tool",
        Role::System => "system",
    })
}

/// True when `m` was said on the same (UTC) day as `prev`.
fn same_day(m: &Message, prev: Option<&Message>) -> bool {
    prev.is_some_and(|p| day_of(p) == day_of(m))
}

/// The day (UTC) `m` was said, as the note's day headings group turns.
fn day_of(m: &Message) -> u64 {
    const DAY_MS: u64 = 86_400_000;
    m.created_at.0 / DAY_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What an excerpt line held before the copy: the words joined by one space.
    fn joined(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn collapsed(text: &str) -> String {
        let mut out = String::from("Nora: ");
        push_collapsed(&mut out, text);
        out.split_off("Nora: ".len())
    }

    #[test]
    fn a_turn_is_written_with_its_white_space_collapsed() {
        for text in [
            "",
            " ",
            "plain words here",
            " leading",
            "trailing ",
            "two  spaces",
            "a\ttab",
            "a\nline",
            "no\u{a0}break",
            "ideographic\u{3000}space",
            "café au lait",
            "x",
        ] {
            assert_eq!(collapsed(text), joined(text), "{text:?}");
        }
        // The copy is taken exactly when nothing changes.
        assert!(is_collapsed("café au lait") && is_collapsed("") && is_collapsed("x"));
        assert!(!is_collapsed("two  spaces") && !is_collapsed("no\u{a0}break"));
    }

    proptest! {
        /// The chosen turns answer as the B-tree map they replaced.
        #[test]
        fn chosen_turns_answer_as_an_ordered_map(
            ops in proptest::collection::vec((0u64..64, 0u64..8, 0u64..66), 0..80),
        ) {
            let mut chosen = ChosenTurns::default();
            let mut map = std::collections::BTreeMap::new();
            for (seq, day, probe) in ops {
                chosen.insert(seq, day);
                map.insert(seq, day);
                prop_assert_eq!(chosen.contains(probe), map.contains_key(&probe));
                prop_assert_eq!(
                    chosen.last_before(probe),
                    map.range(..probe).next_back().map(|(&s, &d)| (s, d))
                );
                prop_assert_eq!(chosen.days_in_order(), map.values().is_sorted());
            }
        }

        #[test]
        fn collapsing_is_joining_the_words(
            text in "[ a\\t\\n\u{b}\u{c}\r\u{85}\u{a0}é\u{1680}\u{2009}\u{2028}\u{202f}\u{3000}\u{2003}€b]{0,24}",
        ) {
            prop_assert_eq!(collapsed(&text), joined(&text));
            // The copy is taken exactly when nothing changes.
            prop_assert_eq!(is_collapsed(&text), joined(&text) == text);
        }
    }
}
