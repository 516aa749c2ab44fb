//! Load benchmark: many agents ticking on this machine with the builtin provider.
//!
//! `cargo bench -p somna-runtime --bench load` runs 10,000 agents ticking every second for 60 s
//! while a share of them receive input (so they build prompts, call the builtin LLM and append
//! replies), then prints a table: ticks/s, tick lateness p50/p99, CPU %, RSS and RSS per agent, and
//! what a `/metrics` scrape reads of the agents (the agent gauges: by state and by usage) and how
//! long that read takes with every agent running.
//! Knobs: SOMNA_LOAD_AGENTS, SOMNA_LOAD_SECS, SOMNA_LOAD_INPUT_EVERY (seconds between inputs to
//! one agent; 0 = none), SOMNA_LOAD_PG_URL (run on the Postgres backend, in a fresh schema of that
//! database, instead of sled; the table then also gives the database's size), SOMNA_LOAD_CACHE_MB
//! (sled's page cache, default `[store] cache_mb`). It runs on jemalloc, as the `somna` binary does.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_core::AgentId;
use somna_core::config::ResolvedConfig;
use somna_runtime::gauges::{AgentGaugesSnapshot, USAGE_BUCKETS};
use somna_runtime::{AgentState, Inbound, Runtime, RuntimeOptions};
use somna_store::{Store, StoreOptions};

/// The allocator the `somna` binary ships with (somna-cli's main.rs), so RSS is what a
/// deployment sees.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident set size in bytes (Linux).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| {
            v.split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// CPU time (user + system) of this process.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks_per_sec = 100.0; // CLK_TCK on Linux
    let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    Duration::from_secs_f64((utime + stime) / ticks_per_sec)
}

fn main() {
    // `cargo bench` passes --bench; a test run (`cargo test --benches`) passes nothing: keep it tiny.
    let benching = std::env::args().any(|a| a == "--bench");
    let agents = env_num("SOMNA_LOAD_AGENTS", if benching { 10_000 } else { 50 });
    let secs = env_num("SOMNA_LOAD_SECS", if benching { 60 } else { 2 });
    let input_every = env_num("SOMNA_LOAD_INPUT_EVERY", 30);

    let dir = tempfile::tempdir().unwrap();
    let pg = std::env::var("SOMNA_LOAD_PG_URL").ok();
    let store = match &pg {
        Some(url) => Store::temporary_postgres(url).unwrap(),
        None => {
            let defaults = StoreOptions::default();
            let cache_mb = env_num("SOMNA_LOAD_CACHE_MB", defaults.cache_bytes >> 20);
            let options = StoreOptions {
                cache_bytes: cache_mb << 20,
                ..defaults
            };
            Store::open(dir.path(), options).unwrap()
        }
    };
    let mut text = String::from(
        "[defaults]\ntick_every = \"1s\"\nsleep_every = \"6h\"\nsleep_jitter = \"1h\"\n\
         persona = \"You are a villager of Emberfield.\"\n",
    );
    for i in 0..agents {
        text.push_str(&format!("[[agents]]\nid = \"npc{i:05}\"\n"));
    }
    let config = ResolvedConfig::load(&text, "load.toml", &[]).unwrap();
    let rss_before = rss();

    let system = actix::System::new();
    let report = system.block_on(async move {
        let started = Instant::now();
        let runtime = Runtime::start(
            config,
            store.clone(),
            Arc::new(somna_llm::BuiltinClient::new()),
            RuntimeOptions::default(),
        )
        .unwrap();
        let startup = started.elapsed();
        // Let the first ticks spread over one period, then measure.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_started = rss();
        runtime.tick_stats().reset();
        let cpu0 = cpu_time();
        let t0 = Instant::now();
        let ids: Vec<AgentId> = runtime.agent_ids();
        let mut inputs = 0u64;
        if let Some(per_second) = (ids.len() as u64).checked_div(input_every) {
            // Every second, 1/input_every of the agents get a line of dialogue.
            let per_second = per_second.max(1) as usize;
            let mut next = 0usize;
            while t0.elapsed() < Duration::from_secs(secs) {
                let second = Instant::now();
                for _ in 0..per_second {
                    let id = &ids[next % ids.len()];
                    next += 1;
                    let _ = runtime
                        .send(
                            id,
                            Inbound::User {
                                content: format!(
                                    "Good day! Have you seen the wolves near the mill? ({next})"
                                ),
                                name: Some("Aldric".into()),
                            },
                        )
                        .await;
                    inputs += 1;
                }
                tokio::time::sleep(Duration::from_secs(1).saturating_sub(second.elapsed())).await;
            }
        } else {
            tokio::time::sleep(Duration::from_secs(secs)).await;
        }
        let wall = t0.elapsed();
        let cpu = cpu_time().saturating_sub(cpu0);
        let ticks = runtime.tick_stats().summary();
        // What a scrape reads of the agents, while they all run.
        const READS: u32 = 10_000;
        let read_started = Instant::now();
        for _ in 0..READS {
            std::hint::black_box(runtime.agent_gauges());
        }
        let gauge_read = read_started.elapsed() / READS;
        let gauges = runtime.agent_gauges();
        let rss_end = rss();
        runtime.shutdown(Duration::from_secs(10)).await.unwrap();
        println!(
            "store: {} · {:.1} MB in the database at the end",
            store.backend_name(),
            store.size_on_disk().unwrap_or(0) as f64 / 1e6
        );
        let gauges = (gauge_read, gauges);
        (
            startup,
            wall,
            cpu,
            ticks,
            rss_started,
            rss_end,
            inputs,
            gauges,
        )
    });
    let (startup, wall, cpu, ticks, rss_started, rss_end, inputs, gauges) = report;
    let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
    let per_agent = rss_end.saturating_sub(rss_before) / agents.max(1);
    println!("| metric | value |");
    println!("|---|---|");
    println!("| agents | {agents} |");
    println!("| measured for | {:.1} s |", wall.as_secs_f64());
    println!(
        "| startup (load + spawn) | {:.2} s |",
        startup.as_secs_f64()
    );
    println!(
        "| inputs sent | {inputs} ({:.0}/s) |",
        inputs as f64 / wall.as_secs_f64()
    );
    println!("| ticks | {} |", ticks.ticks);
    println!(
        "| ticks/s | {:.0} |",
        ticks.ticks as f64 / wall.as_secs_f64()
    );
    println!("| tick lateness p50 | ≤ {:?} |", ticks.p50);
    println!("| tick lateness p99 | ≤ {:?} |", ticks.p99);
    println!("| tick lateness max | {:?} |", ticks.max);
    println!(
        "| CPU | {:.0}% of one core ({:.0}% of 2) |",
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        50.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    );
    println!("| RSS before start | {:.1} MB |", mb(rss_before));
    println!("| RSS after start | {:.1} MB |", mb(rss_started));
    println!("| RSS at end | {:.1} MB |", mb(rss_end));
    println!(
        "| RSS per agent (end − before) / agents | {:.1} KB |",
        per_agent as f64 / 1024.0
    );
    let (gauge_read, gauges) = gauges;
    println!("| agent gauges read (by state and usage) | {gauge_read:?} |");
    println!("| agents by state at the end | {} |", by_state(&gauges));
    println!("| agents by usage at the end | {} |", by_usage(&gauges));
}

/// `idle 9990 · stepping 10 …` (states with agents only).
fn by_state(g: &AgentGaugesSnapshot) -> String {
    AgentState::ALL
        .iter()
        .filter(|s| g.in_state(**s) > 0)
        .map(|s| format!("{s} {}", g.in_state(*s)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `≤ 10%: 9000 · ≤ 20%: 1000 …` (buckets with agents only).
fn by_usage(g: &AgentGaugesSnapshot) -> String {
    g.by_usage
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| match USAGE_BUCKETS.get(i) {
            Some(b) => format!("≤ {:.0}%: {n}", b * 100.0),
            None => format!("> 100%: {n}"),
        })
        .collect::<Vec<_>>()
        .join(" · ")
}
