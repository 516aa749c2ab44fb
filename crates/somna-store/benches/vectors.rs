//! Semantic retrieval's storage at scale (issue 24): an agent with 100,000 archived messages
//! and a 384-dimension vector each (all-MiniLM-L6-v2's size, random unit vectors here: the scan
//! costs the same whatever the values). Prints a table: storing vectors (per 1,000 messages, as
//! a sleep stores them), the vector search alone and the fused archive search (BM25 + vectors),
//! p50 / p99 over 200 queries, and the bytes on disk per vector.
//!
//! `cargo bench -p somna-store --bench vectors` (sled; Postgres too when `SOMNA_BENCH_PG_URL` or
//! `SOMNA_TEST_PG_URL` names a database). `SOMNA_BENCH_DIMS=64` measures the builtin embedder's
//! width instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use somna_core::{AgentId, Message, Timestamp};
use somna_store::{Store, StoreOptions};
use somna_testkit::percentile;

const NOW: Timestamp = Timestamp(1_790_000_000_000);
const MESSAGES: u64 = 100_000;
/// The vectors' width: `SOMNA_BENCH_DIMS`, or 384.
fn dims() -> usize {
    static DIMS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DIMS.get_or_init(|| {
        std::env::var("SOMNA_BENCH_DIMS")
            .ok()
            .and_then(|d| d.parse().ok())
            .filter(|&d| d > 0)
            .unwrap_or(384)
    })
}

/// A xorshift generator: the same vectors every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 20_001) as f32 / 10_000.0 - 1.0
    }

    fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..dims()).map(|_| self.next()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

fn commit(covered: &[Message]) -> somna_store::CompactionCommit<'_> {
    let content = format!("{} summary", Message::SUMMARY_PREFIX);
    let plain = somna_testkit::plain_compaction(covered, content, 10, NOW);
    somna_store::CompactionCommit {
        covered: covered.into(),
        summary: plain.summary,
        journal: vec![plain.synthesis],
        record: plain.record,
    }
}

fn run(backend: &str, store: &Store) {
    let id = AgentId::new("archivist").unwrap();
    store.create_agent(&id, NOW).unwrap();
    for chunk in 0..MESSAGES / 1_000 {
        let batch = (0..1_000u64)
            .map(|i| {
                let n = chunk * 1_000 + i;
                let mut m = Message::user(format!(
                    "turn {n} about the mill, the river and the harvest"
                ))
                .with_name("Traveller");
                m.tokens = 20;
                m.at(Timestamp(NOW.0 + n))
            })
            .collect();
        store.append_batch(&id, batch, NOW).unwrap();
    }
    let history = store.history(&id).unwrap();
    store
        .commit_compaction(&id, &commit(&history[..history.len() - 20]))
        .unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Stored as sleeps store them: 1,000 a call.
    let mut put = Duration::ZERO;
    loop {
        let todo = store.messages_to_embed(&id, "bench", 1_000).unwrap();
        if todo.messages.is_empty() {
            break;
        }
        let pairs: Vec<(u64, Vec<f32>)> =
            todo.messages.iter().map(|m| (m.seq, rng.unit())).collect();
        let started = Instant::now();
        store
            .put_vectors(&id, "bench", todo.through, &pairs)
            .unwrap();
        put += started.elapsed();
    }
    let stored = store.vectors_meta(&id).unwrap().count;
    let queries: Vec<Vec<f32>> = (0..200).map(|_| rng.unit()).collect();
    let mut vector_times = Vec::new();
    let mut fused_times = Vec::new();
    for q in &queries {
        let started = Instant::now();
        let hits = store.search_vectors(&id, "bench", q, 100).unwrap();
        vector_times.push(started.elapsed());
        assert_eq!(hits.len(), 100);
        let started = Instant::now();
        let hits = store
            .search_archive_with(&id, "the mill by the river", Some(("bench", q)), 32)
            .unwrap();
        fused_times.push(started.elapsed());
        assert!(!hits.is_empty());
    }
    vector_times.sort();
    fused_times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {backend} | {stored} vectors stored | {:.1} ms per 1,000 |",
        ms(put) / (stored as f64 / 1_000.0)
    );
    println!(
        "| {backend} | search_vectors, top 100 of {stored} | p50 {:.2} ms · p99 {:.2} ms |",
        ms(percentile(&vector_times, 0.5)),
        ms(percentile(&vector_times, 0.99))
    );
    println!(
        "| {backend} | search_archive_with (BM25 + vectors, top 32) | p50 {:.2} ms · p99 {:.2} ms |",
        ms(percentile(&fused_times, 0.5)),
        ms(percentile(&fused_times, 0.99))
    );
}

fn main() {
    println!("| backend | what | result |\n|---|---|---|");
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    run("sled", &store);
    drop(store);
    if let Some(url) = somna_testkit::bench_pg_url() {
        let store = Store::temporary_postgres(&url).unwrap();
        run("postgres", &store);
    }
    println!(
        "bytes per stored vector: {} (scale + {} signed bytes + the seq's delta)",
        4 + dims() + 1,
        dims()
    );
}
