//! Compaction benchmarks (LLM time excluded: the summary text is fixed).
//!
//! - `plan+mask+commit/2000`: read a 2,000-message history, plan, build the summarizer's masked
//!   view, and commit the compaction (one sled transaction) — everything but the LLM call.
//! - One figure per step: `history_read/2000`, `plan/2000`, `summarizer_view/2000`,
//!   `commit/2000` (the store's transaction alone) and `index_archive/2000` (the search index's
//!   catch-up over what the commit archived, which the runtime runs in the background since it
//!   took ~38 ms inside the commit).
//! - Each timed compaction meets a store filled as a running agent's is (appended turn by turn,
//!   then read once): see `filled_store`. The figures without a suffix have the store's
//!   live-history cache off (`history_cache_mb = 0`, docs/storage.md): the history is read from
//!   the trees and the commit reads the covered run again to check it. `…, cold` ones have it on
//!   but the agent not in it (an agent sleeping after a quiet spell): the compaction's read comes
//!   from the trees and is cached, and the commit checks the run in memory. `…, cached` ones find
//!   the history cached (an agent in conversation).
//! - Printed before the timings: tokens sent to the summarizer against tokens in the body on a
//!   tool-heavy transcript, with and without masking.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use somna_core::compaction::{PlanOutcome, PlanRequest, plan, prompt};
use somna_core::config::AgentConfig;
use somna_core::message::{Message, MessageKind, Role, SummaryMeta, ToolCall};
use somna_core::record::{CompactionMethod, CompactionRecord, Trigger};
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, JournalEntry, Timestamp};
use somna_store::{CompactionCommit, Store};

const MODEL: &str = "gpt-4o";

/// A tool-heavy conversation: every third exchange calls a tool that returns a long listing.
fn transcript(n: usize, counter: &TokenCounter) -> Vec<Message> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        let mut batch = match i % 3 {
            0 => vec![
                Message::assistant_calls(
                    "",
                    vec![ToolCall {
                        id: format!("call_{i}"),
                        name: "search_inventory".into(),
                        arguments: format!("{{\"query\":\"iron {i}\"}}"),
                    }],
                ),
                Message::tool_result(
                    format!("call_{i}"),
                    (0..40)
                        .map(|k| format!("item {k}: iron ingot, 4 silver, shelf {k}, batch {i}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            ],
            _ => vec![
                Message::user(format!(
                    "Aldric asks whether the plough for the mill near Millbrook is ready; he will pay {} silver on day {}.",
                    10 + i,
                    i % 7
                )),
                Message::assistant(format!(
                    "We agreed: the plough will be ready by day {}, and Aldric pays half up front.",
                    i % 7 + 1
                )),
            ],
        };
        for m in &mut batch {
            m.tokens = counter.count_message(m);
        }
        out.extend(batch);
        i += 1;
    }
    out.truncate(n);
    out
}

fn config(history: &[Message]) -> AgentConfig {
    let mut c = AgentConfig::with_builtin_defaults(AgentId::new("bench").unwrap());
    let total: u64 = history.iter().map(|m| u64::from(m.tokens)).sum();
    c.compaction.max_context_tokens = (total as f64 / 0.75) as u32;
    c.compaction.summarizer_context_tokens = 2_000_000;
    c
}

/// A store holding `history` as a running agent's does when it compacts: the messages appended
/// turn by turn (a user message and what follows it up to the next one), then the history read
/// once, as the last turn's prompt read it. (Filled by one bulk append and compacted at once,
/// the read paid for the whole fill's deferred page frees — sled's epoch garbage —, about 1.5 ms
/// of the 4.1 ms `plan+mask+commit/2000` measured that way on 2026-11-29; no compaction meets a
/// store in that state.)
fn filled_store(history: &[Message], cache: Cache) -> (Store, AgentId) {
    let store = Store::temporary().unwrap();
    if cache == Cache::Off {
        store.set_history_cache_bytes(0);
    }
    let cached = cache == Cache::Warm;
    let id = AgentId::new("bench").unwrap();
    store.create_agent(&id, Timestamp(0)).unwrap();
    for (i, turn) in history
        .chunk_by(|_, next| next.role != Role::User)
        .enumerate()
    {
        store
            .append_batch(&id, turn.to_vec(), Timestamp(0))
            .unwrap();
        // Turns read the history; in conversation, the cache holds it from the second one on and
        // the appends after extend it.
        if cached && i < 2 {
            store.live_history(&id).unwrap();
        }
    }
    store.live_history(&id).unwrap();
    (store, id)
}

/// The store's live-history cache as a compaction meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cache {
    /// Turned off.
    Off,
    /// On, without the agent's history (read once since it was filled).
    Cold,
    /// Holding the agent's history (read by its turns, extended by their appends).
    Warm,
}

/// Plans a compaction of `history` (no fixed prompt tokens, no calibration).
fn plan_at(
    history: &[Message],
    trigger: Trigger,
    cfg: &AgentConfig,
    counter: &TokenCounter,
) -> PlanOutcome {
    plan(
        &PlanRequest {
            history,
            fixed_tokens: 0,
            trigger,
            calibration: 1.0,
        },
        &cfg.compaction,
        counter,
    )
}

fn masking_report() {
    let counter = TokenCounter::for_model(MODEL);
    let history = transcript(600, &counter);
    let cfg = config(&history);
    let p = plan_at(&history, Trigger::Manual, &cfg, &counter)
        .into_plan()
        .unwrap();
    let tools = p
        .body(&history)
        .iter()
        .filter(|m| m.role == Role::Tool)
        .count();
    println!(
        "masking on a tool-heavy transcript ({} messages, {} in the body, {} tool outputs):",
        history.len(),
        p.body.len(),
        tools
    );
    println!("| | tokens |");
    println!("|---|---|");
    println!("| body as stored | {} |", p.body_tokens);
    println!(
        "| sent to the summarizer (masked, with framing) | {} |",
        p.summarizer_tokens
    );
    println!(
        "| ratio | {:.2} ({:.0}% less) |",
        p.summarizer_tokens as f64 / p.body_tokens as f64,
        100.0 * (1.0 - p.summarizer_tokens as f64 / p.body_tokens as f64)
    );
}

fn benches(c: &mut Criterion) {
    masking_report();
    let counter = TokenCounter::for_model(MODEL);
    let history = transcript(2_000, &counter);
    let cfg = config(&history);

    c.bench_function("plan/2000", |b| {
        b.iter(|| plan_at(&history, Trigger::Sleep, &cfg, &counter))
    });

    let (store, id) = filled_store(&history, Cache::Off);
    c.bench_function("history_read/2000", |b| {
        b.iter(|| store.live_history(&id).unwrap())
    });
    let (cached, cached_id) = filled_store(&history, Cache::Warm);
    c.bench_function("history_read, cached/2000", |b| {
        b.iter(|| cached.live_history(&cached_id).unwrap())
    });
    let live = store.live_history(&id).unwrap();
    let p = plan_at(&live, Trigger::Sleep, &cfg, &counter)
        .into_plan()
        .unwrap();
    c.bench_function("summarizer_view/2000", |b| {
        b.iter(|| p.summarizer_view(&live, &counter))
    });

    for (name, cache) in [
        ("plan+mask+commit", Cache::Off),
        ("plan+mask+commit, cold", Cache::Cold),
        ("plan+mask+commit, cached", Cache::Warm),
    ] {
        per_iteration(
            c,
            name,
            || filled_store(&history, cache),
            |(store, id)| {
                let outcome = compact(&store, &id, &cfg, &counter);
                (store, outcome)
            },
        );
    }

    // One figure per step of the commit side: the store's transaction alone (the cache on: the
    // commit finds the run the compactor read in memory; off: it reads and compares the run from
    // the trees), and the search index's catch-up that used to run inside it (the runtime now
    // runs it in the background).
    for (name, cache) in [("commit", Cache::Cold), ("commit, cache off", Cache::Off)] {
        commit_step(c, name, &history, &cfg, &counter, cache);
    }
    per_iteration(
        c,
        "index_archive",
        || {
            let (store, id) = filled_store(&history, Cache::Off);
            compact(&store, &id, &cfg, &counter);
            (store, id)
        },
        |(store, id)| {
            store.index_archive(&id).unwrap();
            store
        },
    );
}

/// The `commit` groups: the store's transaction alone, over the history as the compactor reads
/// it, with the cache as `cache`.
fn commit_step(
    c: &mut Criterion,
    name: &str,
    history: &[Message],
    cfg: &AgentConfig,
    counter: &TokenCounter,
    cache: Cache,
) {
    per_iteration(
        c,
        name,
        || {
            let (store, id) = filled_store(history, cache);
            let live = store.live_history_to_compact(&id).unwrap();
            let commit = prepare(&live, cfg, counter);
            // Where the covered run lies in the read (found here, outside the timing).
            let at = commit.covered[0].seq;
            let from = live.iter().position(|m| m.seq == at).unwrap();
            let len = commit.covered.len();
            let CompactionCommit {
                summary,
                journal,
                record,
                ..
            } = commit;
            (store, id, live, from, len, summary, journal, record)
        },
        |(store, id, live, from, len, summary, journal, record)| {
            // The covered run borrowed from the read, as the runtime's compactor does.
            let commit = CompactionCommit {
                covered: live[from..from + len].into(),
                summary,
                journal,
                record,
            };
            let outcome = store.commit_compaction(&id, &commit).unwrap();
            (store, outcome)
        },
    );
}

/// Benchmark group `name` (20 samples, one function, `2000`): `routine` on a fresh input from
/// `setup` each iteration. What `routine` returns (the store) is dropped outside the timing, so
/// that sled's shutdown is not measured.
fn per_iteration<I, O>(
    c: &mut Criterion,
    name: &str,
    mut setup: impl FnMut() -> I,
    mut routine: impl FnMut(I) -> O,
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.bench_function("2000", |b| {
        b.iter_batched(&mut setup, &mut routine, BatchSize::PerIteration)
    });
    group.finish();
}

/// Plans the compaction of `live` (the history as read), builds the summarizer's masked view and
/// the commit of a fixed summary: everything of a compaction between the history read and the
/// store's transaction, LLM excluded. The commit borrows the covered messages from `live`, as the
/// runtime's does.
fn prepare<'h>(
    live: &'h [Message],
    cfg: &AgentConfig,
    counter: &TokenCounter,
) -> CompactionCommit<'h> {
    let p = plan_at(live, Trigger::Sleep, cfg, counter)
        .into_plan()
        .unwrap();
    let view = p.summarizer_view(live, counter);
    assert_eq!(view.len(), p.body.len());
    let body = p.body(live);
    let text = "## Topic arc\n- Orders for the mill.\n## Decisions\n- Half up front.";
    let mut summary = Message::new(Role::System, prompt::summary_content(text));
    summary.seq = body[0].seq;
    summary.tokens = counter.count_message(&summary);
    let last = body[body.len() - 1].seq;
    summary.kind = MessageKind::Summary(SummaryMeta {
        covers_from_seq: body[0].seq,
        covers_through_seq: last,
        compacted_count: body.len() as u32,
        original_tokens: p.body_tokens as u32,
        summary_tokens: summary.tokens,
        generation: 1,
        compacted_at: Timestamp(1),
    });
    let record = CompactionRecord {
        at: Timestamp(1),
        trigger: Trigger::Sleep,
        method: CompactionMethod::Llm,
        summary_seq: body[0].seq,
        covers: (body[0].seq, last),
        compacted: body.len() as u32,
        preserved: p.tail.len() as u32,
        tokens_before: p.tokens_before,
        tokens_after: p.tokens_before - p.body_tokens + u64::from(summary.tokens),
        usage_before: None,
        usage_after: None,
        synthesis_entry: None,
        generation: 1,
        grounding: None,
    };
    CompactionCommit {
        covered: body.into(),
        summary,
        journal: vec![JournalEntry::synthesis(
            Timestamp(1),
            text,
            body[0].seq,
            last,
        )],
        record,
    }
}

/// The history read, [`prepare`] and the store's transaction: the compaction path, LLM excluded.
fn compact(
    store: &Store,
    id: &AgentId,
    cfg: &AgentConfig,
    counter: &TokenCounter,
) -> somna_store::CommitOutcome {
    // As the runtime's compactor reads it: shared, not copied, and cached for the commit.
    let live = store.live_history_to_compact(id).unwrap();
    let commit = prepare(&live, cfg, counter);
    store.commit_compaction(id, &commit).unwrap()
}

criterion_group!(compaction, benches);
criterion_main!(compaction);
