//! The baselines every recall run is compared with, on the same data and the same budget:
//!
//! - **last-window**: the persona, then the raw transcript's most recent turns that fit in the
//!   budget (what an agent without compaction or retrieval would send), then the question.
//! - **bm25-packed**: the persona, then the raw-transcript turns plain Okapi BM25 ranks for the
//!   question, best first, as many as fit in the whole budget, then the question.
//! - **bm25+nbrs**: the same, each hit with the turn before and the turn after it (the strongest
//!   simple baseline: a keyword search whose hits bring their context, packed into the window).
//! - **bm25+nbrs@room**: bm25+nbrs packed into only the room Somna's working context took for
//!   the same question (no persona, no question): Somna's retrieval against the baseline's at
//!   equal room.
//! - **bm25-top5**: the persona, the 5 raw-transcript turns that plain Okapi BM25 ranks best for
//!   the question, then the question (the first baseline; it leaves most of the window empty).
//!
//! The BM25 here is written out on purpose instead of calling `somna_core::retrieval`: a baseline
//! must stay frozen (k1 1.2, b 0.75, lower-cased alphanumeric terms, a short stop list, no
//! stemming, no speaker names, no neighbouring turns), so that improving Somna's own retrieval
//! moves Somna's row and never the row it is compared with.

use std::collections::HashMap;

use somna_core::message::{Message, Role};
use somna_core::tokens::TokenCounter;

use super::dataset::Turn;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// How many turns the BM25 baseline puts in its prompt.
pub const BM25_TOP: usize = 5;

/// Frozen copy of a short English stop list (do not change: it would move the baseline).
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "from", "has", "have",
    "he", "her", "his", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on",
    "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "they", "this",
    "to", "was", "we", "what", "when", "which", "who", "will", "with", "you", "your",
];

/// A baseline's prompt: its message texts and its token count.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselinePrompt {
    /// Every message's content, in order (persona, turns, question).
    pub contents: Vec<String>,
    /// Tokens, counted like Somna counts a prompt (persona as text, turns as messages).
    pub tokens: u64,
}

/// Token counts of a conversation's turns, computed once per conversation.
#[derive(Debug)]
pub struct Transcript<'a> {
    turns: &'a [Turn],
    /// `count_message` of each turn.
    tokens: Vec<u64>,
    index: Bm25Index,
}

impl<'a> Transcript<'a> {
    /// Counts and indexes `turns` with `counter`.
    pub fn new(turns: &'a [Turn], counter: &TokenCounter) -> Self {
        let tokens = turns
            .iter()
            .map(|t| u64::from(counter.count_message(&as_message(t))))
            .collect();
        let index = Bm25Index::new(turns.iter().map(|t| t.content.as_str()));
        Transcript {
            turns,
            tokens,
            index,
        }
    }

    /// The persona, the latest turns that fit in `budget` with the persona and the question, and
    /// the question.
    pub fn last_window(
        &self,
        persona: &str,
        question: &str,
        budget: u64,
        counter: &TokenCounter,
    ) -> BaselinePrompt {
        let fixed = u64::from(counter.count_text(persona))
            + u64::from(counter.count_message(&Message::user(question)));
        let mut used = fixed;
        let mut first = self.turns.len();
        while first > 0 && used + self.tokens[first - 1] <= budget {
            used += self.tokens[first - 1];
            first -= 1;
        }
        let mut contents = Vec::with_capacity(self.turns.len() - first + 2);
        contents.push(persona.to_string());
        contents.extend(self.turns[first..].iter().map(|t| t.content.clone()));
        contents.push(question.to_string());
        BaselinePrompt {
            contents,
            tokens: used,
        }
    }

    /// The persona, the [`BM25_TOP`] best-ranked turns (in transcript order), and the question.
    pub fn bm25_top(
        &self,
        persona: &str,
        question: &str,
        counter: &TokenCounter,
    ) -> BaselinePrompt {
        let mut hits = self.index.top_k(question, BM25_TOP);
        hits.sort_unstable();
        let mut tokens = u64::from(counter.count_text(persona))
            + u64::from(counter.count_message(&Message::user(question)));
        let mut contents = Vec::with_capacity(hits.len() + 2);
        contents.push(persona.to_string());
        for i in hits {
            tokens += self.tokens[i];
            contents.push(self.turns[i].content.clone());
        }
        contents.push(question.to_string());
        BaselinePrompt { contents, tokens }
    }

    /// The persona, then BM25's hits for `question` in rank order — each with the turn before
    /// and after it when `neighbours` — as many as fit in `budget` with the persona and the
    /// question (a run that does not fit is tried as its hit alone; a hit that does not fit is
    /// passed over for the next), in transcript order, then the question.
    pub fn bm25_packed(
        &self,
        persona: &str,
        question: &str,
        budget: u64,
        neighbours: bool,
        counter: &TokenCounter,
    ) -> BaselinePrompt {
        let fixed = u64::from(counter.count_text(persona))
            + u64::from(counter.count_message(&Message::user(question)));
        let (turns, used) = self.pack(question, budget.saturating_sub(fixed), neighbours);
        let mut contents = Vec::with_capacity(turns.len() + 2);
        contents.push(persona.to_string());
        contents.extend(turns.into_iter().map(|i| self.turns[i].content.clone()));
        contents.push(question.to_string());
        BaselinePrompt {
            contents,
            tokens: fixed + used,
        }
    }

    /// BM25's hits for `question` among the first `archived` turns (those Somna's live history no
    /// longer holds: what its retrieval searches) with their neighbours, packed into `room`
    /// tokens alone (no persona, no question): what the baseline retrieves in the room Somna's
    /// retrieval had, from the same turns.
    pub fn bm25_in_room(&self, question: &str, room: u64, archived: usize) -> BaselinePrompt {
        let (turns, used) = self.pack_among(question, room, true, archived);
        BaselinePrompt {
            contents: turns
                .into_iter()
                .map(|i| self.turns[i].content.clone())
                .collect(),
            tokens: used,
        }
    }

    /// The turns (in transcript order) and their tokens: BM25's hits in rank order, with their
    /// neighbours when asked, while they fit in `room`.
    fn pack(&self, question: &str, room: u64, neighbours: bool) -> (Vec<usize>, u64) {
        self.pack_among(question, room, neighbours, self.turns.len())
    }

    /// [`Transcript::pack`] over the first `among` turns only.
    fn pack_among(
        &self,
        question: &str,
        room: u64,
        neighbours: bool,
        among: usize,
    ) -> (Vec<usize>, u64) {
        let among = among.min(self.turns.len());
        let mut chosen = std::collections::BTreeSet::new();
        let mut used = 0u64;
        for hit in self.index.top_k(question, usize::MAX) {
            if hit >= among || chosen.contains(&hit) {
                continue;
            }
            let run: Vec<usize> = if neighbours {
                (hit.saturating_sub(1)..=(hit + 1).min(among - 1))
                    .filter(|i| !chosen.contains(i))
                    .collect()
            } else {
                vec![hit]
            };
            let cost: u64 = run.iter().map(|&i| self.tokens[i]).sum();
            if used + cost <= room {
                used += cost;
                chosen.extend(run);
            } else if used + self.tokens[hit] <= room {
                used += self.tokens[hit];
                chosen.insert(hit);
            }
            if room.saturating_sub(used) < 8 {
                break;
            }
        }
        (chosen.into_iter().collect(), used)
    }
}

fn as_message(t: &Turn) -> Message {
    let role = t.role.parse().unwrap_or(Role::User);
    let mut m = Message::new(role, t.content.clone());
    m.name.clone_from(&t.name);
    m
}

/// Lower-cased alphanumeric terms of two or more characters, stop words dropped, no stemming.
fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.chars().count() > 1)
        .map(str::to_lowercase)
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
}

/// Plain Okapi BM25 over a fixed set of documents: postings built once, scored per query.
#[derive(Debug, Default)]
struct Bm25Index {
    /// term → (document, term frequency).
    postings: HashMap<String, Vec<(usize, u32)>>,
    /// Terms per document.
    lengths: Vec<u32>,
    avg_len: f64,
}

impl Bm25Index {
    fn new<'t>(docs: impl Iterator<Item = &'t str>) -> Self {
        let mut index = Bm25Index::default();
        for (d, text) in docs.enumerate() {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut len = 0u32;
            for t in terms(text) {
                *tf.entry(t).or_default() += 1;
                len += 1;
            }
            index.lengths.push(len);
            for (t, f) in tf {
                index.postings.entry(t).or_default().push((d, f));
            }
        }
        let n = index.lengths.len().max(1) as f64;
        index.avg_len = (index.lengths.iter().map(|&l| f64::from(l)).sum::<f64>() / n).max(1.0);
        index
    }

    /// The best `k` documents with a positive score, best first (ties: the later document first).
    fn top_k(&self, query: &str, k: usize) -> Vec<usize> {
        let mut query_terms: Vec<String> = terms(query).collect();
        query_terms.sort_unstable();
        query_terms.dedup();
        let n = self.lengths.len() as f64;
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for t in &query_terms {
            let Some(postings) = self.postings.get(t) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(d, f) in postings {
                let f = f64::from(f);
                let len = f64::from(self.lengths[d]);
                *scores.entry(d).or_default() +=
                    idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / self.avg_len));
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores.into_iter().filter(|(_, s)| *s > 0.0).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        ranked.truncate(k);
        ranked.into_iter().map(|(d, _)| d).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(content: &str) -> Turn {
        Turn {
            role: "user".into(),
            name: Some("Priya".into()),
            content: content.into(),
            created_at: None,
        }
    }

    #[test]
    fn bm25_ranks_the_matching_turn_first_and_does_not_stem() {
        let turns = [
            turn("The weather is nice today."),
            turn("We adopted a puppy from the shelter downtown."),
            turn("Shelters are always full in spring."),
            turn("Lunch was great."),
        ];
        let index = Bm25Index::new(turns.iter().map(|t| t.content.as_str()));
        assert_eq!(index.top_k("Which shelter did Priya adopt from?", 5), [1]);
        assert!(index.top_k("what did you do", 5).is_empty());
    }

    #[test]
    fn last_window_keeps_the_latest_turns_within_the_budget() {
        let counter = TokenCounter::for_model("gpt-4o");
        let turns: Vec<Turn> = (0..100)
            .map(|i| turn(&format!("turn number {i} says something")))
            .collect();
        let t = Transcript::new(&turns, &counter);
        let p = t.last_window("You are helpful.", "What was said?", 200, &counter);
        assert!(p.tokens <= 200, "{}", p.tokens);
        assert_eq!(
            p.contents.first().map(String::as_str),
            Some("You are helpful.")
        );
        assert_eq!(
            p.contents[p.contents.len() - 2],
            "turn number 99 says something"
        );
        assert!(p.contents.len() > 3 && p.contents.len() < 100);
    }
}
