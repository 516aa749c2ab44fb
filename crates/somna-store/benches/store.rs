//! somna-store benchmarks: append throughput (single and batches of 100), the O(1) usage read on an
//! agent with 100,000 messages, commit_compaction of ~1,980 of 2,000 messages and its uncompact,
//! reading a history of 2,000, the journal query for synthesis entries, and archive search over
//! 100,000 archived messages; decoding 2,000 stored messages with serde and without
//! (`decode_2000_messages`, no IO); and reopening a sled database of 100,000 agents
//! (`sled/reopen`).
//!
//! Every benchmark runs on sled (a temporary directory on disk, the default 500 ms background
//! flush) and, when `SOMNA_BENCH_PG_URL` (or `SOMNA_TEST_PG_URL`) names a PostgreSQL database, on
//! the Postgres backend too (a fresh schema per benchmark, dropped at the end), named
//! `sled/…` and `postgres/…` side by side.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use somna_core::{
    AgentId, CompactionRecord, JournalEntry, JournalQuery, Message, SourceType, Timestamp,
};
use somna_store::{CommitOutcome, Store, StoreOptions, UncompactOutcome};
use somna_testkit::bench_pg_url;

const NOW: Timestamp = Timestamp(1_790_000_000_000);

/// What keeps a benchmark's database alive (a temporary directory; nothing for Postgres, whose
/// temporary schema lives as long as the store).
type Keep = Option<tempfile::TempDir>;

/// The backends to measure: sled, and Postgres when a URL is given.
fn backends() -> Vec<&'static str> {
    let mut out = vec!["sled"];
    if bench_pg_url().is_some() {
        out.push("postgres");
    }
    out
}

fn open(backend: &str) -> (Keep, Store) {
    match backend {
        "postgres" => (
            None,
            Store::temporary_postgres(&bench_pg_url().unwrap()).unwrap(),
        ),
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
            (Some(dir), store)
        }
    }
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

fn append_on(c: &mut Criterion, backend: &str) {
    let (_dir, store) = open(backend);
    let id = agent_with(&store, "writer", 0);
    let mut group = c.benchmark_group(format!("{backend}/append"));
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

fn usage_on(c: &mut Criterion, backend: &str) {
    let (_dir, store) = open(backend);
    let id = agent_with(&store, "long-lived", 100_000);
    assert_eq!(store.agent(&id).unwrap().unwrap().history_len, 100_000);
    c.bench_function(&format!("{backend}/usage_tokens/100k_messages"), |b| {
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
        "{backend} space: 100,000 messages ({:.1} MB of content): {live:.1} MB on disk; after compacting \
         99,980 into the archive: {compacted:.1} MB; after undoing it: {undone:.1} MB; 3 s later: {later:.1} MB",
        content_bytes as f64 / 1e6
    );
}

/// The commit the engine would make for `covered`.
fn commit(covered: &[Message]) -> somna_store::CompactionCommit<'_> {
    let content = format!(
        "{} {}",
        Message::SUMMARY_PREFIX,
        "summary text ".repeat(100)
    );
    let tokens = 4 + (content.len() as u32).div_ceil(4);
    let plain = somna_testkit::plain_compaction(covered, content, tokens, NOW);
    somna_store::CompactionCommit {
        covered: covered.into(),
        summary: plain.summary,
        journal: vec![plain.synthesis],
        record: CompactionRecord {
            preserved: 20,
            ..plain.record
        },
    }
}

fn compaction_on(c: &mut Criterion, backend: &str) {
    let (_dir, store) = open(backend);
    let id = agent_with(&store, "compacted", 2_000);
    let history = store.history(&id).unwrap();
    let plan = commit(&history[..1_980]);
    c.bench_function(&format!("{backend}/history/read_2000"), |b| {
        b.iter(|| store.history(black_box(&id)).unwrap())
    });
    let mut group = c.benchmark_group(format!("{backend}/commit_compaction"));
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

fn journal_on(c: &mut Criterion, backend: &str) {
    let (_dir, store) = open(backend);
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
    let mut group = c.benchmark_group(format!("{backend}/journal_query"));
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

/// A word of a synthetic vocabulary whose frequencies follow Zipf's law (rank r drawn with
/// probability ∝ 1/r), as words in real conversations do. The 50 most frequent ranks are left out:
/// in English they are function words, which the analyzer drops as stop words.
struct Zipf {
    cumulative: Vec<f64>,
    state: u64,
}

impl Zipf {
    fn new(words: usize) -> Self {
        let mut total = 0.0;
        let cumulative = (51..=words + 50)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        Zipf {
            cumulative,
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn word(&mut self) -> String {
        // xorshift64*: deterministic, good enough for a benchmark's text.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        let u = x as f64 / (1u64 << 53) as f64 * self.cumulative[self.cumulative.len() - 1];
        let rank = self.cumulative.partition_point(|&c| c < u);
        // Spell the rank with letters only, so no word is a stop word or a number.
        let mut word = String::from("w");
        let mut n = rank;
        loop {
            word.push(char::from(b'a' + (n % 26) as u8));
            n /= 26;
            if n == 0 {
                break word;
            }
        }
    }

    fn text(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.word())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Searching the archive of an agent with 100,000 archived messages (24 content words each,
/// Zipfian vocabulary) through the inverted index: a typical question (6 words drawn like the
/// text), and a worst case of the 6 most frequent words.
fn search_on(c: &mut Criterion, backend: &str) {
    let (_dir, store) = open(backend);
    let id = AgentId::new("archivist").unwrap();
    store.create_agent(&id, NOW).unwrap();
    let mut zipf = Zipf::new(20_000);
    for chunk in 0..100u64 {
        let batch = (0..1_000u64)
            .map(|i| {
                let mut m = Message::user(zipf.text(24)).with_name("Traveller");
                m.tokens = 40;
                m.at(Timestamp(NOW.0 + chunk * 1_000 + i))
            })
            .collect();
        store.append_batch(&id, batch, NOW).unwrap();
    }
    let history = store.history(&id).unwrap();
    let covered = &history[..history.len() - 20];
    // The commit indexes what it archives (the index's catch-up runs after the transaction).
    let started = Instant::now();
    let outcome = store.commit_compaction(&id, &commit(covered)).unwrap();
    let indexed = started.elapsed();
    assert!(matches!(outcome, CommitOutcome::Committed { .. }));
    println!(
        "{backend} search: a compaction archiving 99,980 messages committed and indexed them in {:.2} s \
         ({:.1} µs per message)",
        indexed.as_secs_f64(),
        indexed.as_secs_f64() * 1e6 / 99_980.0
    );
    let questions: Vec<String> = (0..64).map(|_| zipf.text(6)).collect();
    let common = "wa wb wc wd we wf";
    let mut group = c.benchmark_group(format!("{backend}/search_archive"));
    group.bench_function("100k_archived_top32_typical", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % questions.len();
            store
                .search_archive(&id, black_box(&questions[i]), 32)
                .unwrap()
        })
    });
    group.bench_function("100k_archived_top32_most_frequent_words", |b| {
        b.iter(|| store.search_archive(&id, black_box(common), 32).unwrap())
    });
    group.finish();
}

/// Decoding stored messages, no IO: serde's generic path against `codec::decode_message` (which
/// reads a message without serde when it can), on 2,000 messages of a conversation with names,
/// a tool call now and then, and a summary.
fn decode(c: &mut Criterion) {
    use somna_core::{MessageKind, SummaryMeta, ToolCall};
    use somna_store::codec;
    let values: Vec<Vec<u8>> = (0..2_000u64)
        .map(|i| {
            let mut m = message(i);
            m.seq = i;
            match i % 10 {
                0 => m.name = Some("Aldric".into()),
                3 => {
                    m.tool_calls = vec![ToolCall {
                        id: format!("call_{i}"),
                        name: "journal_add".into(),
                        arguments: "{\"text\":\"the bridge\"}".into(),
                    }]
                }
                7 if i == 7 => {
                    m.kind = MessageKind::Summary(SummaryMeta {
                        covers_from_seq: 0,
                        covers_through_seq: 6,
                        compacted_count: 7,
                        original_tokens: 300,
                        summary_tokens: 40,
                        generation: 1,
                        compacted_at: NOW,
                    })
                }
                _ => {}
            }
            codec::encode("history", &m).unwrap()
        })
        .collect();
    let mut group = c.benchmark_group("decode_2000_messages");
    group.throughput(Throughput::Elements(values.len() as u64));
    group.bench_function("serde", |b| {
        b.iter(|| {
            values
                .iter()
                .map(|v| codec::decode::<Message>("history", b"k", v).unwrap())
                .collect::<Vec<_>>()
        })
    });
    group.bench_function("decode_message", |b| {
        b.iter(|| {
            values
                .iter()
                .map(|v| codec::decode_message("history", b"k", v).unwrap())
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

/// Opening a closed sled database of 100,000 agents with two messages each: what a restart of a
/// node costs the store, including `Store::open`'s one seek per agent for appends whose record
/// update a crash lost (sled appends without a transaction).
fn reopen(c: &mut Criterion) {
    const AGENTS: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        for i in 0..AGENTS {
            let id = AgentId::new(format!("npc{i:06}")).unwrap();
            store.create_agent(&id, NOW).unwrap();
            store
                .append_batch(&id, vec![message(0), message(1)], NOW)
                .unwrap();
        }
        store.flush().unwrap();
    }
    let mut group = c.benchmark_group("sled/reopen");
    group.sample_size(10);
    group.bench_function("100000_agents", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
                total += t.elapsed();
                black_box(&store);
            }
            total
        })
    });
    group.finish();
}

/// Each benchmark on every backend in turn.
fn benches(c: &mut Criterion) {
    decode(c);
    reopen(c);
    let each: [fn(&mut Criterion, &str); 5] =
        [append_on, usage_on, compaction_on, journal_on, search_on];
    for bench in each {
        for backend in backends() {
            bench(c, backend);
        }
    }
}

criterion_group!(store, benches);
criterion_main!(store);
