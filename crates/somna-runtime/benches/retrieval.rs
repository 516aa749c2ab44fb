//! The working context's cost per turn on an agent with 100,000 archived messages: the index
//! search, the neighbouring turns, the budget — `prompt::assemble` as the live step calls it.
//! (`somna-store`'s `search` bench measures the index search alone.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use somna_core::config::AgentConfig;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Message, MessageKind, Role, SummaryMeta, Timestamp};
use somna_runtime::prompt;
use somna_store::{CompactionCommit, Store};

/// Words drawn by Zipf's law over a 20,000-word vocabulary, the 50 most frequent ranks left out
/// (function words, which the analyzer drops).
struct Words {
    cumulative: Vec<f64>,
    state: u64,
}

impl Words {
    fn new() -> Self {
        let mut total = 0.0;
        let cumulative = (51..20_051)
            .map(|r| {
                total += 1.0 / f64::from(r);
                total
            })
            .collect();
        Words {
            cumulative,
            state: 0x2545_F491_4F6C_DD1D,
        }
    }

    fn text(&mut self, n: usize) -> String {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            self.state ^= self.state >> 12;
            self.state ^= self.state << 25;
            self.state ^= self.state >> 27;
            let x =
                (self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            let rank = self
                .cumulative
                .partition_point(|&c| c < x * self.cumulative[self.cumulative.len() - 1]);
            out.push(format!("w{rank}x"));
        }
        out.join(" ")
    }
}

fn assemble(c: &mut Criterion) {
    let store = Store::temporary().unwrap();
    let id = AgentId::new("archivist").unwrap();
    store.create_agent(&id, Timestamp(0)).unwrap();
    let counter = TokenCounter::for_model("gpt-4o");
    let mut words = Words::new();
    for chunk in 0..100u64 {
        let batch = (0..1_000u64)
            .map(|i| {
                let mut m = if i % 2 == 0 {
                    Message::user(words.text(24)).with_name("Traveller")
                } else {
                    Message::assistant(words.text(24))
                };
                m.tokens = counter.count_message(&m);
                m.at(Timestamp(1_780_000_000_000 + (chunk * 1_000 + i) * 60_000))
            })
            .collect();
        store.append_batch(&id, batch, Timestamp(0)).unwrap();
    }
    // One compaction archives all but the last 20 (a plain summary, as the engine would write).
    let history = store.history(&id).unwrap();
    let covered = history[..history.len() - 20].to_vec();
    let (from, through) = (covered[0].seq, covered[covered.len() - 1].seq);
    let mut summary = Message::new(
        Role::System,
        format!("{} {}", Message::SUMMARY_PREFIX, words.text(300)),
    );
    summary.seq = from;
    summary.tokens = counter.count_message(&summary);
    summary.kind = MessageKind::Summary(SummaryMeta {
        covers_from_seq: from,
        covers_through_seq: through,
        compacted_count: covered.len() as u32,
        original_tokens: covered.iter().map(|m| m.tokens).sum(),
        summary_tokens: summary.tokens,
        generation: 1,
        compacted_at: Timestamp(0),
    });
    let commit = CompactionCommit {
        covered: covered.into(),
        journal: Vec::new(),
        record: somna_core::CompactionRecord {
            preserved: 20,
            ..somna_core::CompactionRecord::new(
                Timestamp(0),
                somna_core::Trigger::Manual,
                somna_core::CompactionMethod::Llm,
                (from, through),
                99_980,
                1,
            )
        },
        summary,
    };
    store.commit_compaction(&id, &commit).unwrap();
    let mut config = AgentConfig::with_builtin_defaults(id.clone());
    config.model = "gpt-4o".into();
    config.compaction.max_context_tokens = 32_768;
    let mut history = store.history(&id).unwrap();
    let questions: Vec<String> = (0..64).map(|_| words.text(8)).collect();
    history.push(Message::user(questions[0].clone()));
    let (built, working) = prompt::assemble(&store, &id, &config, &history, &counter).unwrap();
    println!(
        "retrieval: {} archived; a prompt of {} tokens, {} excerpts ({} turns) in a {}-token note",
        store.agent(&id).unwrap().unwrap().archive_len,
        built.total_tokens(),
        working.excerpts.len(),
        working.turns().count(),
        built.working_tokens
    );
    let mut group = c.benchmark_group("working_context");
    group.bench_function("assemble_100k_archived_32k_window", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % questions.len();
            let last = history.len() - 1;
            history[last].content.clone_from(&questions[i]);
            prompt::assemble(&store, &id, &config, black_box(&history), &counter).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, assemble);
criterion_main!(benches);
