//! What a recall run measured: per method, per category and overall, the share of questions
//! whose prompt holds some / all answer turns, prompt tokens and time per question.

use std::collections::BTreeMap;

use serde::Serialize;

/// The method names, in the order the report lists them.
pub const SOMNA: &str = "somna";
/// Somna after a sleep (consolidation into memory facts) following the import.
pub const SOMNA_CONSOLIDATED: &str = "somna+sleep";
/// The raw transcript's latest turns that fit in the budget.
pub const LAST_WINDOW: &str = "last-window";
/// Plain BM25 top 5 over the raw transcript.
pub const BM25_TOP5: &str = "bm25-top5";
/// Plain BM25's hits over the raw transcript, packed into the whole budget.
pub const BM25_PACKED: &str = "bm25-packed";
/// Plain BM25's hits, each with the turns before and after it, packed into the whole budget.
pub const BM25_NEIGHBOURS: &str = "bm25+nbrs";
/// Somna's working context alone (the context note): what its retrieval brought.
pub const SOMNA_RETRIEVED: &str = "somna-note";
/// [`BM25_NEIGHBOURS`] packed into the room Somna's working context took for the same question.
pub const BM25_IN_ROOM: &str = "bm25+nbrs@room";

/// The baselines a recall run with `baselines` measures besides Somna, in the order the report
/// lists them.
pub const BASELINES: [&str; 6] = [
    SOMNA_RETRIEVED,
    BM25_IN_ROOM,
    BM25_NEIGHBOURS,
    BM25_PACKED,
    LAST_WINDOW,
    BM25_TOP5,
];

/// A whole recall run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallReport {
    /// The agent's model (it picks the token counter).
    pub model: String,
    /// The embedder's model whose vectors Somna's retrieval used, or `None` for BM25 alone.
    pub embedder: Option<String>,
    /// `compaction.max_context_tokens` of the agent config used.
    pub max_context_tokens: u32,
    /// What a prompt may carry (`somna_runtime::prompt::budget`): "over budget" is above this.
    pub budget: u64,
    /// Conversations imported.
    pub conversations: usize,
    /// Turns imported, over all conversations.
    pub turns: usize,
    /// Questions asked, over all conversations.
    pub questions: usize,
    /// What each import did and how long it took.
    pub imports: Vec<ImportSummary>,
    /// Wall time of all imports (and sleeps, with consolidation), in milliseconds.
    pub import_ms: f64,
    /// One entry per method: somna first, then the baselines.
    pub methods: Vec<MethodReport>,
    /// Per question and method, what the prompt held (only when asked for: `details`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<QuestionOutcome>,
}

impl RecallReport {
    /// The report of `method`, if it ran.
    pub fn method(&self, method: &str) -> Option<&MethodReport> {
        self.methods.iter().find(|m| m.method == method)
    }
}

/// One conversation's import.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportSummary {
    pub conversation: String,
    pub turns: usize,
    pub compactions: usize,
    /// Compactions that fell back to deterministic reduction.
    pub fallbacks: usize,
    /// Archived messages after the import.
    pub archive_len: u64,
    /// Memory facts after the optional sleep (0 without consolidation).
    pub facts: usize,
    pub ms: f64,
}

/// One method's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodReport {
    /// `somna`, `somna+sleep`, `last-window` or `bm25-top5`.
    pub method: String,
    /// Over every question.
    pub overall: Stats,
    /// Per category, by name.
    pub categories: BTreeMap<String, Stats>,
}

/// Results over a set of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub questions: usize,
    /// Questions whose prompt holds at least one answer turn.
    pub some: usize,
    /// Questions whose prompt holds every answer turn.
    pub all: usize,
    /// Questions whose prompt holds an answer turn with its date next to it: the nearest date
    /// before the turn in the same message is the turn's `created_at` day (written 2023-05-08,
    /// 8 May 2023 or May 8, 2023): what a "when" question needs.
    pub dated: usize,
    /// `some / questions` (0 when there are no questions).
    pub some_share: f64,
    /// `all / questions`.
    pub all_share: f64,
    /// `dated / questions`.
    pub dated_share: f64,
    pub tokens_mean: f64,
    pub tokens_max: u64,
    /// Prompts above the budget.
    pub over_budget: usize,
    /// Time to build one prompt, in milliseconds.
    pub ms_mean: f64,
    pub ms_p95: f64,
}

/// What one method's prompt held for one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionOutcome {
    pub method: String,
    pub conversation: String,
    /// The question's 0-based index in questions.jsonl.
    pub question: usize,
    pub category: String,
    pub answer_turns: Vec<usize>,
    /// The answer turns the prompt holds.
    pub held: Vec<usize>,
    /// The prompt holds an answer turn and shows its date.
    pub dated: bool,
    pub tokens: u64,
    /// Time to build the prompt, in milliseconds.
    pub ms: f64,
    /// Where the best-ranked answer turn stands in the archive ranking the working context
    /// reads (1-based; `None` when it is not among the first [`RANK_DEPTH`]). Only Somna's
    /// outcomes with `details`: it tells a ranking miss from a packing miss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
}

/// How deep `details` looks for an answer turn in the archive ranking.
pub const RANK_DEPTH: usize = 200;

impl QuestionOutcome {
    /// The prompt holds at least one answer turn.
    pub fn some(&self) -> bool {
        !self.held.is_empty()
    }

    /// The prompt holds every answer turn.
    pub fn all(&self) -> bool {
        self.held.len() == self.answer_turns.len()
    }
}

/// Per-method report of `outcomes` (all of one method) against `budget`.
pub fn method_report(method: &str, outcomes: &[&QuestionOutcome], budget: u64) -> MethodReport {
    let mut by_category: BTreeMap<String, Vec<&QuestionOutcome>> = BTreeMap::new();
    for o in outcomes {
        by_category.entry(o.category.clone()).or_default().push(o);
    }
    MethodReport {
        method: method.to_string(),
        overall: stats(outcomes, budget),
        categories: by_category
            .into_iter()
            .map(|(c, os)| (c, stats(&os, budget)))
            .collect(),
    }
}

fn stats(outcomes: &[&QuestionOutcome], budget: u64) -> Stats {
    let n = outcomes.len();
    let share = |k: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    let some = outcomes.iter().filter(|o| o.some()).count();
    let all = outcomes.iter().filter(|o| o.all()).count();
    let dated = outcomes.iter().filter(|o| o.dated).count();
    let mut ms: Vec<f64> = outcomes.iter().map(|o| o.ms).collect();
    ms.sort_by(f64::total_cmp);
    Stats {
        questions: n,
        some,
        all,
        some_share: share(some),
        all_share: share(all),
        dated,
        dated_share: share(dated),
        tokens_mean: mean(outcomes.iter().map(|o| o.tokens as f64), n),
        tokens_max: outcomes.iter().map(|o| o.tokens).max().unwrap_or(0),
        over_budget: outcomes.iter().filter(|o| o.tokens > budget).count(),
        ms_mean: mean(ms.iter().copied(), n),
        ms_p95: percentile(&ms, 0.95),
    }
}

fn mean(values: impl Iterator<Item = f64>, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        values.sum::<f64>() / n as f64
    }
}

/// The nearest-rank percentile of sorted `values` (0 for none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(category: &str, answers: usize, held: usize, tokens: u64) -> QuestionOutcome {
        QuestionOutcome {
            method: SOMNA.into(),
            conversation: "c".into(),
            question: 0,
            category: category.into(),
            answer_turns: (0..answers).collect(),
            held: (0..held).collect(),
            dated: false,
            tokens,
            ms: tokens as f64,
            rank: None,
        }
    }

    #[test]
    fn categories_sum_to_the_overall_and_all_never_exceeds_some() {
        let os = [
            outcome("a", 1, 1, 10),
            outcome("a", 2, 1, 20),
            outcome("b", 2, 0, 50),
            outcome("b", 1, 1, 30),
        ];
        let refs: Vec<&QuestionOutcome> = os.iter().collect();
        let r = method_report(SOMNA, &refs, 40);
        assert_eq!(r.overall.questions, 4);
        assert_eq!(r.overall.some, 3);
        assert_eq!(r.overall.all, 2);
        assert_eq!(r.overall.over_budget, 1);
        assert_eq!(r.overall.tokens_max, 50);
        assert!((r.overall.tokens_mean - 27.5).abs() < 1e-9);
        assert!((r.overall.ms_p95 - 50.0).abs() < 1e-9);
        assert_eq!(r.categories["a"].some, 2);
        assert_eq!(r.categories["a"].all, 1);
        assert_eq!(r.categories["b"].some_share, 0.5);
        let sum: usize = r.categories.values().map(|s| s.questions).sum();
        assert_eq!(sum, r.overall.questions);
    }
}
