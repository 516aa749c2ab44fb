//! somna-store benchmarks: append throughput (single and batches of 100), the O(1) usage read on an
//! agent with 100,000 messages, commit_compaction of ~1,980 of 2,000 messages, and the journal
//! query for synthesis entries. Databases live in a temporary directory on disk with the default
//! 500 ms background flush.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use somna_core::{
    AgentId, CompactionMethod, CompactionRecord, JournalEntry, JournalQuery, Message, MessageKind,
    Role, SourceType, SummaryMeta, Timestamp, Trigger,
};
use somna_store::{CommitOutcome, Store, StoreOptions, UncompactOutcome};

const NOW: Timestamp = Timestamp(1_790_000_000_000);

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    (dir, store)
}

fn message(i: u64) -> Message {
    let mut m = if i % 2 == 0 {
        Message::user(format!(
            "Turn {i}: the traveller asks the blacksmith about the broken cart wheel, the price of iron \
             and whether the road north is safe after the storm."
        ))
    } else {
        Message::assistant(format!(
            "Turn {i}: the blacksmith says the wheel needs a new rim, iron is dear since the mine \
             flooded, and the north road is passable but watch the bridge."
        ))
    };
    m.tokens = 4 + (m.content.len() as u32).div_ceil(4);
    m.at(Timestamp(NOW.0 + i))
}

fn agent_with(store: &Store, name: &str, n: u64) -> AgentId {
    let id = AgentId::new(name).unwrap();
    store.create_agent(&id, NOW).unwrap();
    let mut i = 0;
    while i < n {
        let batch = (i..(i + 1_000).min(n)).map(message).collect();
        store.append_batch(&id, batch, NOW).unwrap();
        i += 1_000;
    }
    id
}

fn append(c: &mut Criterion) {
    let (_dir, store) = open();
    let id = agent_with(&store, "writer", 0);
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Elements(1));
    group.bench_function("single", |b| {
        b.iter(|| store.append(&id, black_box(message(7)), NOW).unwrap())
    });
    let batch: Vec<Message> = (0..100).map(message).collect();
    group.throughput(Throughput::Elements(100));
    group.bench_function("batch_100", |b| {
        b.iter(|| {
            store
                .append_batch(&id, black_box(batch.clone()), NOW)
                .unwrap()
        })
    });
    group.finish();
}

fn usage(c: &mut Criterion) {
    let (_dir, store) = open();
    let id = agent_with(&store, "long-lived", 100_000);
    assert_eq!(store.agent(&id).unwrap().unwrap().history_len, 100_000);
    c.bench_function("usage_tokens/100k_messages", |b| {
        b.iter(|| store.usage_tokens(black_box(&id)).unwrap())
    });

    // Space growth (printed, not benchmarked): the same 100,000 messages live, then all but the
    // last 20 compacted into one summary (archived in place), then undone.
    let mb = |store: &Store| {
        store.flush().unwrap();
        store.size_on_disk().unwrap() as f64 / 1e6
    };
    let live = mb(&store);
    let history = store.history(&id).unwrap();
    let content_bytes: usize = history.iter().map(|m| m.content.len()).sum();
    let outcome = store
        .commit_compaction(&id, &commit(&history[..99_980]))
        .unwrap();
    assert!(matches!(outcome, CommitOutcome::Committed { .. }));
    let compacted = mb(&store);
    store.uncompact(&id, 0, NOW).unwrap();
    let undone = mb(&store);
    std::thread::sleep(Duration::from_secs(3));
    let later = mb(&store);
    println!(
        "space: 100,000 messages ({:.1} MB of content): {live:.1} MB on disk; after compacting \
         99,980 into the archive: {compacted:.1} MB; after undoing it: {undone:.1} MB; 3 s later: {later:.1} MB",
        content_bytes as f64 / 1e6
    );
}

/// The commit the engine would make for `covered`.
fn commit(covered: &[Message]) -> somna_store::CompactionCommit {
    let content = format!(
        "{} {}",
        Message::SUMMARY_PREFIX,
        "summary text ".repeat(100)
    );
    let tokens = 4 + (content.len() as u32).div_ceil(4);
    let (from, through) = (covered[0].seq, covered[covered.len() - 1].seq);
    let summary = Message {
        seq: from,
        tokens,
        kind: MessageKind::Summary(SummaryMeta {
            covers_from_seq: from,
            covers_through_seq: through,
            compacted_count: covered.len() as u32,
            original_tokens: covered.iter().map(|m| m.tokens).sum(),
            summary_tokens: tokens,
            generation: 1,
            compacted_at: NOW,
        }),
        ..Message::new(Role::System, content)
    };
    somna_store::CompactionCommit {
        covered: covered.to_vec(),
        journal: vec![JournalEntry::synthesis(
            NOW,
            summary.content.clone(),
            from,
            through,
        )],
        record: CompactionRecord {
            at: NOW,
            trigger: Trigger::Sleep,
            method: CompactionMethod::Llm,
            summary_seq: from,
            covers: (from, through),
            compacted: covered.len() as u32,
            preserved: 20,
            tokens_before: 0,
            tokens_after: 0,
            synthesis_entry: None,
            generation: 1,
        },
        summary,
    }
}

fn compaction(c: &mut Criterion) {
    let (_dir, store) = open();
    let id = agent_with(&store, "compacted", 2_000);
    let history = store.history(&id).unwrap();
    let plan = commit(&history[..1_980]);
    let mut group = c.benchmark_group("commit_compaction");
    group.sample_size(20);
    group.bench_function("1980_of_2000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let outcome = store.commit_compaction(&id, black_box(&plan)).unwrap();
                total += start.elapsed();
                assert!(matches!(outcome, CommitOutcome::Committed { .. }));
                // Undo it (untimed) so every iteration compacts the same 2,000-message history.
                let undone = store.uncompact(&id, 0, NOW).unwrap();
                assert_eq!(undone, UncompactOutcome::Restored { restored: 1_980 });
            }
            total
        })
    });
    group.bench_function("uncompact_1980", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                store.commit_compaction(&id, &plan).unwrap();
                let start = Instant::now();
                store.uncompact(&id, 0, NOW).unwrap();
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

fn journal(c: &mut Criterion) {
    let (_dir, store) = open();
    let id = agent_with(&store, "diarist", 0);
    // 10,000 entries, one in twenty a synthesis entry.
    for i in 0..10_000u64 {
        let entry = if i % 20 == 0 {
            JournalEntry::synthesis(Timestamp(NOW.0 + i), format!("summary {i}"), i, i + 10)
        } else {
            JournalEntry::new(
                Timestamp(NOW.0 + i),
                SourceType::Observation,
                3,
                format!("saw {i}"),
            )
        };
        store.append_journal(&id, entry).unwrap();
    }
    let mut group = c.benchmark_group("journal_query");
    let by_source = JournalQuery {
        source_type: Some(SourceType::Compaction),
        limit: Some(20),
        ..Default::default()
    };
    assert_eq!(store.query_journal(&id, &by_source).unwrap().len(), 20);
    group.bench_function("synthesis_by_source_index_last_20", |b| {
        b.iter(|| store.query_journal(&id, black_box(&by_source)).unwrap())
    });
    let all_synthesis = JournalQuery {
        source_type: Some(SourceType::Compaction),
        ..Default::default()
    };
    group.bench_function("synthesis_by_source_index_all_500", |b| {
        b.iter(|| store.query_journal(&id, black_box(&all_synthesis)).unwrap())
    });
    let by_tag = JournalQuery {
        tags: vec!["synthesis".into()],
        limit: Some(20),
        ..Default::default()
    };
    group.bench_function("synthesis_by_tag_scan_last_20", |b| {
        b.iter(|| store.query_journal(&id, black_box(&by_tag)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, append, usage, compaction, journal);
criterion_main!(benches);
