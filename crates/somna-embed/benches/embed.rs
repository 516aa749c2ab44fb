//! How fast the embedders are on ONE core: first the builtin static table (always; `cargo bench -p
//! somna-embed --bench embed`), then the in-process model's load time and messages per second for
//! batches of 32 chat-length messages (20–40 words), plus one message at a time. Prints tables.
//!
//! `SOMNA_EMBEDDER_DIR=$(scripts/local-embedder.sh | tail -n1) cargo bench -p somna-embed --features candle --bench embed`
//!
//! candle's matrix products and the tokenizer run on rayon's threads; unless `RAYON_NUM_THREADS`
//! is already set, the bench runs itself again with `RAYON_NUM_THREADS=1`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

fn main() {
    #[cfg(feature = "candle")]
    real::main();
    #[cfg(not(feature = "candle"))]
    {
        builtin();
        println!(
            "embed bench: in-process model skipped: built without the `candle` feature (--features candle)"
        );
    }
}

const WORDS: &[&str] = &[
    "the",
    "agent",
    "said",
    "we",
    "should",
    "check",
    "the",
    "logs",
    "before",
    "deploying",
    "tomorrow",
    "morning",
    "I",
    "think",
    "memory",
    "usage",
    "went",
    "up",
    "after",
    "last",
    "release",
    "can",
    "you",
    "look",
    "at",
    "dashboard",
    "and",
    "tell",
    "me",
    "what",
    "changed",
    "customer",
    "asked",
    "about",
    "refund",
    "policy",
    "for",
    "annual",
    "plans",
    "meeting",
    "moved",
    "to",
    "Thursday",
    "because",
    "of",
    "holiday",
    "please",
    "summarize",
    "thread",
    "budget",
    "quarter",
    "kitten",
    "garden",
    "weather",
    "rain",
    "coffee",
    "train",
    "late",
    "again",
    "sorry",
    "thanks",
    "great",
    "idea",
    "let's",
    "try",
    "it",
    "on",
    "staging",
    "first",
];

/// Deterministic chat-length messages: 20–40 words each.
fn messages(n: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    (0..n)
        .map(|_| {
            let words = 20 + next() % 21;
            let mut m: Vec<&str> = (0..words).map(|_| WORDS[next() % WORDS.len()]).collect();
            m[0] = "Hey,";
            m.join(" ") + "."
        })
        .collect()
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The builtin embedder (the static table compiled in): parse time, messages per second on this
/// thread, one at a time and in batches of 32, and the memory the table takes.
fn builtin() {
    use std::time::Instant;

    let rss_before = rss_mb();
    let t = Instant::now();
    let table = somna_embed::StaticEmbedder::builtin().unwrap();
    let load = t.elapsed();
    let rss_loaded = rss_mb();
    let texts = messages(32 * 64, 7);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    table.embed(&refs[..32]);
    let rounds = 20;
    let t = Instant::now();
    for _ in 0..rounds {
        for chunk in refs.chunks(32) {
            std::hint::black_box(table.embed(chunk));
        }
    }
    let batched = (rounds * refs.len()) as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..rounds {
        for text in &refs {
            std::hint::black_box(table.embed(&[text]));
        }
    }
    let single = (rounds * refs.len()) as f64 / t.elapsed().as_secs_f64();
    println!(
        "builtin embedder: {} ({} dims), one thread",
        table.model_name(),
        table.dims()
    );
    println!("| measure | value |");
    println!("| --- | --- |");
    println!("| parse the table | {:.1} ms |", load.as_secs_f64() * 1e3);
    println!(
        "| resident for the table | {:.1} MB |",
        rss_loaded - rss_before
    );
    println!("| batches of 32 | {batched:.0} messages/s |");
    println!(
        "| one at a time | {single:.0} messages/s ({:.1} µs each) |",
        1e6 / single
    );
    println!();
}

#[cfg(feature = "candle")]
mod real {
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use somna_embed::LocalEmbedder;

    use super::{messages, rss_mb};

    const BATCH: usize = 32;
    /// Timed batches of 32 per row.
    const BATCHES: usize = 8;

    pub fn main() {
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let exe = std::env::current_exe().expect("current exe");
            let status = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env("RAYON_NUM_THREADS", "1")
                .status()
                .expect("re-run with RAYON_NUM_THREADS=1");
            std::process::exit(status.code().unwrap_or(1));
        }
        super::builtin();
        let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_default();
        let dir = std::env::var_os("SOMNA_EMBEDDER_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/somna-embedder/all-MiniLM-L6-v2"))
            })
            .filter(|d| d.join(somna_embed::MODEL_FILE).is_file());
        let Some(dir) = dir else {
            println!(
                "embed bench: skipped: no model (set SOMNA_EMBEDDER_DIR; scripts/local-embedder.sh fetches it)"
            );
            return;
        };

        let t = Instant::now();
        let model = LocalEmbedder::load(&dir).expect("load");
        let first_load = t.elapsed();
        let rss_loaded = rss_mb();
        drop(model);
        let t = Instant::now();
        let model = LocalEmbedder::load(&dir).expect("load");
        let second_load = t.elapsed();

        let texts = messages(BATCH * (BATCHES + 1), 42);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
        model.embed(&refs[..BATCH]).expect("warm-up");

        let mut per_batch = Vec::new();
        for chunk in refs[BATCH..].chunks(BATCH) {
            let t = Instant::now();
            let v = model.embed(chunk).expect("embed");
            per_batch.push(t.elapsed());
            assert_eq!(v.len(), chunk.len());
        }
        let total: Duration = per_batch.iter().sum();
        let best = per_batch.iter().min().copied().unwrap_or_default();
        let batched_rate = (BATCH * BATCHES) as f64 / total.as_secs_f64();

        let singles = &refs[BATCH..BATCH + 32];
        let t = Instant::now();
        for text in singles {
            model.embed(&[text]).expect("embed");
        }
        let single = t.elapsed();
        let rss_end = rss_mb();

        println!(
            "in-process embedder: {} ({} dims), RAYON_NUM_THREADS={threads}",
            model.model_name(),
            model.dims()
        );
        println!(
            "messages: {} words on average (20–40 each)",
            words / texts.len()
        );
        println!("| measure | value |");
        println!("| --- | --- |");
        println!(
            "| load (first, cold-ish page cache) | {:.0} ms |",
            first_load.as_secs_f64() * 1e3
        );
        println!(
            "| load (again) | {:.0} ms |",
            second_load.as_secs_f64() * 1e3
        );
        println!("| batches of {BATCH}: msgs/s ({BATCHES} batches) | {batched_rate:.1} |");
        println!(
            "| batches of {BATCH}: ms per batch (mean / best) | {:.0} / {:.0} |",
            total.as_secs_f64() * 1e3 / BATCHES as f64,
            best.as_secs_f64() * 1e3
        );
        println!(
            "| one message at a time: msgs/s | {:.1} |",
            singles.len() as f64 / single.as_secs_f64()
        );
        println!("| RSS after load / at the end | {rss_loaded:.0} MB / {rss_end:.0} MB |");
    }
}
