//! Load benchmark: many agents ticking on this machine with the builtin provider.
//!
//! `cargo bench -p somna-runtime --bench load` runs 10,000 agents ticking every second for 60 s
//! while a share of them receive input (so they build prompts, call the builtin LLM and append
//! replies), then prints a table: ticks/s, tick lateness p50/p99, CPU %, RSS and RSS per agent, and
//! what a `/metrics` scrape reads of the agents (the agent gauges: by state and by usage) and how
//! long that read takes with every agent running.
//! Inputs are sent as a host sends them: spread evenly over each second, many in flight at once
//! (at most SOMNA_LOAD_IN_FLIGHT awaiting their durable acknowledgement; a sender never waits for
//! one acknowledgement before sending the next unless the window is full). The table gives the
//! offered and delivered inputs/s, the acknowledgement latency p50/p99 and the input-to-reply
//! latency p50/p99 (from the send to the agent's `agent_replied` event).
//! Knobs: SOMNA_LOAD_AGENTS, SOMNA_LOAD_SECS, SOMNA_LOAD_INPUT_EVERY (seconds between inputs to
//! one agent; 0 = none), SOMNA_LOAD_IN_FLIGHT (default 1,024), SOMNA_LOAD_PG_URL (run on the Postgres backend, in a fresh schema of that
//! database, instead of sled; the table then also gives the database's size), SOMNA_LOAD_CACHE_MB
//! (sled's page cache, default `[store] cache_mb`), SOMNA_LOAD_HISTORY_CACHE_MB (`[store] history_cache_mb`), SOMNA_LOAD_DURABLE_ACKS=0 (`[store] durable_acks =
//! false`: an input is acknowledged without waiting for the flush), SOMNA_LOAD_LLM=instant (a fixed line at
//! once instead of the builtin provider: with the idle runtime's CPU, measured for 2 s before the
//! inputs and taken off, the table gives the runtime's own CPU per input). It runs on jemalloc, as
//! the `somna` binary does.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use somna_core::AgentId;
use somna_core::config::ResolvedConfig;
use somna_runtime::events::EventBus;
use somna_runtime::gauges::{AgentGaugesSnapshot, USAGE_BUCKETS};
use somna_runtime::protocol::Event;
use somna_runtime::{AgentState, Inbound, Runtime, RuntimeOptions};
use somna_store::{Store, StoreOptions};

use common::{InstantLlm, process_cpu};

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

fn main() {
    // `cargo bench` passes --bench; a test run (`cargo test --benches`) passes nothing: keep it tiny.
    let benching = std::env::args().any(|a| a == "--bench");
    let agents = env_num("SOMNA_LOAD_AGENTS", if benching { 10_000 } else { 50 });
    let secs = env_num("SOMNA_LOAD_SECS", if benching { 60 } else { 2 });
    let input_every = env_num("SOMNA_LOAD_INPUT_EVERY", 30);
    let in_flight = env_num("SOMNA_LOAD_IN_FLIGHT", 1_024).max(1) as usize;

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
    let history_cache_mb = env_num(
        "SOMNA_LOAD_HISTORY_CACHE_MB",
        somna_store::live::DEFAULT_HISTORY_CACHE_MB,
    );
    store.set_history_cache_bytes(history_cache_mb << 20);
    let cache_stats = {
        let store = store.clone();
        move || store.history_cache_stats()
    };
    let mut text = String::from(
        "[defaults]\ntick_every = \"1s\"\nsleep_every = \"6h\"\nsleep_jitter = \"1h\"\n\
         persona = \"You are a villager of Emberfield.\"\n",
    );
    if env_num("SOMNA_LOAD_DURABLE_ACKS", 1) == 0 {
        text.push_str("[store]\ndurable_acks = false\n");
    }
    for i in 0..agents {
        text.push_str(&format!("[[agents]]\nid = \"npc{i:05}\"\n"));
    }
    let config = ResolvedConfig::load(&text, "load.toml", &[]).unwrap();
    let rss_before = rss();

    // The builtin provider, as `somna run` has it; `instant` for a fixed line at once (the
    // runtime's own cost per input, model excluded).
    let instant = match std::env::var("SOMNA_LOAD_LLM").as_deref() {
        Ok("instant") => true,
        Ok("builtin") | Err(_) => false,
        Ok(other) => panic!("SOMNA_LOAD_LLM={other}: expected builtin or instant"),
    };
    let llm: Arc<dyn somna_llm::LlmClient> = if instant {
        Arc::new(InstantLlm)
    } else {
        Arc::new(somna_llm::BuiltinClient::new())
    };

    let system = actix::System::new();
    let report = system.block_on(async move {
        let started = Instant::now();
        // Subscribed before the start, so that no reply is missed. A broadcast channel holds
        // every slot from the start (~180 bytes each, two channels): 65,536 slots were 24 MB of
        // the process's RSS at any size, the bench's own buffer, not the runtime's (whose
        // default is 4,096). Room for half a second of events at the offered rate and more.
        let bus = EventBus::new((agents as usize / 2).clamp(4_096, 65_536));
        let mut replies = bus.subscribe();
        let runtime = Runtime::start(
            config,
            store.clone(),
            llm,
            RuntimeOptions {
                events: Some(bus),
                ..RuntimeOptions::default()
            },
        )
        .unwrap();
        // When each agent's pending input was sent; its reply's event closes it.
        let pending: Arc<Mutex<HashMap<AgentId, Instant>>> = Arc::default();
        let reply_latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let lagged = Arc::new(std::sync::atomic::AtomicU64::new(0));
        {
            let (pending, reply_latencies, lagged) =
                (pending.clone(), reply_latencies.clone(), lagged.clone());
            actix::spawn(async move {
                use tokio::sync::broadcast::error::RecvError;
                loop {
                    match replies.recv().await {
                        Ok(stamped) => {
                            if let Event::AgentReplied { agent, .. } = &stamped.event {
                                let sent = pending.lock().unwrap().remove(agent);
                                if let Some(sent) = sent {
                                    reply_latencies.lock().unwrap().push(sent.elapsed());
                                }
                            }
                        }
                        Err(RecvError::Lagged(n)) => {
                            lagged.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(RecvError::Closed) => break,
                    }
                }
            });
        }
        let startup = started.elapsed();
        // Let the first ticks spread over one period, then measure.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_started = rss();
        // With input to come: the idle runtime's CPU per second first (ticks, flushes), to take
        // off the CPU of the measured time for the cost of an input.
        let idle = if input_every > 0 {
            let (c0, t0) = (process_cpu(), Instant::now());
            tokio::time::sleep(Duration::from_secs(2)).await;
            Some((process_cpu() - c0).as_secs_f64() / t0.elapsed().as_secs_f64())
        } else {
            None
        };
        runtime.tick_stats().reset();
        runtime.turn_stats().reset();
        let cpu0 = process_cpu();
        let t0 = Instant::now();
        let ids: Vec<AgentId> = runtime.agent_ids();
        let mut inputs = 0u64;
        let window = Arc::new(tokio::sync::Semaphore::new(in_flight));
        let acks: Arc<Mutex<Vec<(Duration, bool)>>> = Arc::default();
        if let Some(per_second) = (ids.len() as u64).checked_div(input_every) {
            // 1/input_every of the agents get a line of dialogue each second, spread evenly over
            // the second; each send is its own task, at most `in_flight` awaiting their
            // acknowledgement.
            let rate = per_second.max(1) as f64;
            let mut next = 0usize;
            while t0.elapsed() < Duration::from_secs(secs) {
                let due = (t0.elapsed().as_secs_f64() * rate) as u64;
                while inputs < due {
                    let permit = window.clone().acquire_owned().await.unwrap();
                    let id = ids[next % ids.len()].clone();
                    next += 1;
                    inputs += 1;
                    let (runtime, acks, pending) = (runtime.clone(), acks.clone(), pending.clone());
                    let content =
                        format!("Good day! Have you seen the wolves near the mill? ({next})");
                    actix::spawn(async move {
                        let sent = Instant::now();
                        pending.lock().unwrap().insert(id.clone(), sent);
                        let input = Inbound::User {
                            content,
                            name: Some("Aldric".into()),
                        };
                        let ok = runtime.send(&id, input).await.is_ok();
                        acks.lock().unwrap().push((sent.elapsed(), ok));
                        drop(permit);
                    });
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        } else {
            tokio::time::sleep(Duration::from_secs(secs)).await;
        }
        let wall = t0.elapsed();
        let cpu = process_cpu().saturating_sub(cpu0);
        let turns = runtime.turn_stats().summary();
        // What was delivered within the measured time; then the stragglers, for the latencies.
        let delivered_in_time = acks.lock().unwrap().iter().filter(|(_, ok)| *ok).count() as u64;
        let _ = tokio::time::timeout(
            Duration::from_secs(30),
            window.acquire_many(u32::try_from(in_flight).unwrap_or(u32::MAX)),
        )
        .await;
        // Replies come at each agent's next tick: wait up to three periods for the last ones.
        let waited = Instant::now();
        while !pending.lock().unwrap().is_empty() && waited.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let flow = Flow {
            offered: inputs,
            delivered: delivered_in_time,
            acks: std::mem::take(&mut *acks.lock().unwrap()),
            replies: std::mem::take(&mut *reply_latencies.lock().unwrap()),
            unanswered: pending.lock().unwrap().len(),
            lagged: lagged.load(std::sync::atomic::Ordering::Relaxed),
        };
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
            (cpu, idle, turns),
            ticks,
            rss_started,
            rss_end,
            flow,
            gauges,
        )
    });
    let (startup, wall, (cpu, idle, turns), ticks, rss_started, rss_end, flow, gauges) = report;
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
    let per_s = |n: u64| n as f64 / wall.as_secs_f64();
    println!(
        "| inputs offered | {} ({:.0}/s; at most {in_flight} in flight) |",
        flow.offered,
        per_s(flow.offered)
    );
    println!(
        "| inputs delivered (durably acknowledged in the measured time) | {} ({:.0}/s, {:.1}% of offered) |",
        flow.delivered,
        per_s(flow.delivered),
        100.0 * flow.delivered as f64 / flow.offered.max(1) as f64
    );
    let failed = flow.acks.iter().filter(|(_, ok)| !ok).count();
    let mut ack: Vec<Duration> = flow.acks.iter().map(|(d, _)| *d).collect();
    println!(
        "| acknowledgement latency p50 / p99 | {:?} / {:?} ({failed} failed) |",
        percentile(&mut ack, 0.50),
        percentile(&mut ack, 0.99)
    );
    let mut replies = flow.replies;
    println!(
        "| input-to-reply latency p50 / p99 | {:?} / {:?} ({} replies; {} inputs unanswered at the end, {} events missed) |",
        percentile(&mut replies, 0.50),
        percentile(&mut replies, 0.99),
        replies.len(),
        flow.unanswered,
        flow.lagged
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
    if let Some(idle) = idle {
        // Every input of the measured time was answered within it or soon after; the CPU of the
        // stragglers' replies is not in `cpu`, so this slightly undercounts at the end of a run
        // of a few seconds, not at 30 s or more.
        let busy = cpu.as_secs_f64() - idle * wall.as_secs_f64();
        println!(
            "| CPU per delivered input, less the idle runtime's ({:.0}% of one core), {} | {:.0} µs |",
            100.0 * idle,
            if instant {
                "model excluded (SOMNA_LOAD_LLM=instant)"
            } else {
                "builtin brain included"
            },
            1e6 * busy / flow.delivered.max(1) as f64
        );
        // The runtime's own count of each turn (`somna_turn_work_seconds`) beside it: what is
        // not in a turn's own time (wake-ups, the group commit's flushes, sled's IO threads, the
        // senders' tasks) is shared by the turns, and spread evenly over them here.
        let shared = (busy - turns.sum.as_secs_f64()).max(0.0) / turns.turns.max(1) as f64;
        println!(
            "| turns in the measured time; each turn's own work (`somna_turn_work_seconds`) mean / p50 / p99 / max | {} · {} / {} / {} / {} µs |",
            turns.turns,
            turns.mean().as_micros(),
            turns.p50.as_micros(),
            turns.p99.as_micros(),
            turns.max.as_micros(),
        );
        println!(
            "| shared CPU per turn (the rest of the CPU per input); own + shared at p50 / p99 | {:.0} µs; {:.0} / {:.0} µs |",
            1e6 * shared,
            1e6 * (turns.p50.as_secs_f64() + shared),
            1e6 * (turns.p99.as_secs_f64() + shared),
        );
    }
    println!("| RSS before start | {:.1} MB |", mb(rss_before));
    println!("| RSS after start | {:.1} MB |", mb(rss_started));
    println!("| RSS at end | {:.1} MB |", mb(rss_end));
    let cache = cache_stats();
    println!(
        "| live-history cache (budget {history_cache_mb} MiB) | {:.1} MB held, {} hits, {} misses, {} evictions |",
        cache.bytes as f64 / 1e6,
        cache.hits,
        cache.misses,
        cache.evictions
    );
    println!(
        "| RSS per agent (end − before) / agents | {:.1} KB |",
        per_agent as f64 / 1024.0
    );
    let (gauge_read, gauges) = gauges;
    println!("| agent gauges read (by state and usage) | {gauge_read:?} |");
    println!("| agents by state at the end | {} |", by_state(&gauges));
    println!("| agents by usage at the end | {} |", by_usage(&gauges));
}

/// The inputs of a run: offered, delivered, and their latencies.
struct Flow {
    offered: u64,
    delivered: u64,
    /// Each acknowledgement's latency and whether it was `Ok`.
    acks: Vec<(Duration, bool)>,
    /// From each send to its agent's reply event.
    replies: Vec<Duration>,
    unanswered: usize,
    lagged: u64,
}

/// The `q` quantile of `values` (sorted in place); zero when empty.
fn percentile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let i = ((values.len() - 1) as f64 * q).round() as usize;
    values[i]
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
