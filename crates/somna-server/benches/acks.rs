//! Acknowledged inputs with and without durable acks (group commit).
//!
//! `cargo bench -p somna-server --bench acks` starts, for every cell, a fresh runtime over a fresh
//! on-disk store (a temporary directory, so the fsync is real) with 100 agents and the builtin LLM,
//! and the API on loopback. N concurrent clients (1, 4, 16, 64) POST `/v1/agents/{id}/input` in a
//! closed loop, spread over the agents, for a fixed time; every answer must be `202`. The same is
//! done through `Runtime::send` without HTTP (the library path). Each cell runs with `[store]
//! durable_acks = false` (acknowledged once the input is in sled's in-memory log) and `= true` (the
//! default: acknowledged after a group-commit flush). It prints one table: acknowledged inputs per
//! second, acknowledgement latency p50/p99/max, and the group commit's flushes and mean batch
//! (`Store::group_commit_stats`: waiters served per flush).
//!
//! The agents tick once an hour and sleeps are not scheduled, so no LLM turn runs during a cell:
//! the numbers are the acknowledgement path alone (HTTP, the agent's actor, the append, the flush).
//! Clients and server share the process (and the machine's cores).
//!
//! Knobs: `SOMNA_ACKS_SECS` (measured seconds per cell; default 4 under `cargo bench`, 0.3 under
//! `cargo test --benches`), `SOMNA_ACKS_CLIENTS` (comma-separated concurrencies),
//! `SOMNA_ACKS_AGENTS` (default 100), `SOMNA_ACKS_PATHS` (`http`, `library` or both).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_core::AgentId;
use somna_core::config::ResolvedConfig;
use somna_runtime::{Inbound, Runtime, RuntimeOptions};
use somna_server::{Server, ServerOptions};
use somna_store::{Store, StoreOptions};
use somna_testkit::percentile;

/// Untimed traffic before each measured cell (connections opened, the flusher thread started).
const WARM_UP: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Http,
    Library,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Http => "HTTP",
            Path::Library => "`Runtime::send`",
        }
    }
}

/// One measured cell.
struct Cell {
    path: Path,
    durable: bool,
    clients: usize,
    wall: Duration,
    /// Acknowledgement latency of every input acknowledged in the measured window, sorted.
    latencies: Vec<Duration>,
    /// Group-commit flushes in the measured window.
    flushes: u64,
    /// Waiters those flushes served.
    served: u64,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(agents: usize, durable: bool) -> ResolvedConfig {
    let mut text = format!(
        "[store]\ndurable_acks = {durable}\n\
         [defaults]\ntick_every = \"1h\"\nsleep_every = \"6h\"\nsleep_jitter = \"1h\"\n\
         persona = \"You are a villager of Emberfield.\"\n"
    );
    for i in 0..agents {
        text.push_str(&format!("[[agents]]\nid = \"npc{i:03}\"\n"));
    }
    ResolvedConfig::load(&text, "acks.toml", &[]).unwrap()
}

/// The `i`-th line of dialogue (unique, so every input is a distinct message).
fn line(i: u64) -> String {
    format!("Good day! Have you seen the wolves near the mill? ({i})")
}

/// Runs `clients` closed-loop clients for `warm_up + secs`; returns the measured latencies (sorted),
/// the measured wall time and the group-commit counters of the measured window.
async fn drive(
    path: Path,
    runtime: &Runtime,
    store: &Store,
    base: &str,
    clients: usize,
    measure: Duration,
) -> (Vec<Duration>, Duration, u64, u64) {
    let ids: Arc<Vec<AgentId>> = Arc::new(runtime.agent_ids());
    let http = reqwest::Client::new();
    let start = Instant::now();
    let measure_from = start + WARM_UP;
    let end = measure_from + measure;
    // The counters at the start of the measured window, read by the first client to cross it.
    let window_start = Arc::new(std::sync::OnceLock::new());
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let ids = Arc::clone(&ids);
        let runtime = runtime.clone();
        let store = store.clone();
        let http = http.clone();
        let window_start = Arc::clone(&window_start);
        let url_base = format!("{base}/v1/agents/");
        tasks.push(actix_rt::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = c as u64;
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                if now >= measure_from {
                    window_start.get_or_init(|| store.group_commit_stats());
                }
                // Spread over the agents: client c starts at agent c and strides by the clients.
                let id = &ids[(i as usize) % ids.len()];
                let sent = Instant::now();
                match path {
                    Path::Http => {
                        let body = serde_json::json!({
                            "type": "user", "content": line(i), "name": "Aldric"
                        });
                        let answer = http
                            .post(format!("{url_base}{id}/input"))
                            .header("content-type", "application/json")
                            .body(body.to_string())
                            .send()
                            .await
                            .unwrap();
                        let status = answer.status();
                        let text = answer.text().await.unwrap();
                        assert_eq!(status.as_u16(), 202, "{text}");
                    }
                    Path::Library => runtime
                        .send(
                            id,
                            Inbound::User {
                                content: line(i),
                                name: Some("Aldric".into()),
                            },
                        )
                        .await
                        .unwrap(),
                }
                let done = Instant::now();
                if sent >= measure_from && done <= end {
                    latencies.push(done - sent);
                }
                i += clients as u64;
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let after = store.group_commit_stats();
    let before = window_start.get().copied().unwrap_or(after);
    latencies.sort_unstable();
    (
        latencies,
        measure,
        after.flushes - before.flushes,
        after.served - before.served,
    )
}

/// One cell: a fresh store on disk, a fresh runtime (and server), the clients, then everything stopped.
async fn cell(path: Path, durable: bool, clients: usize, agents: usize, secs: f64) -> Cell {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let runtime = Runtime::start(
        config(agents, durable),
        store.clone(),
        Arc::new(somna_llm::BuiltinClient::new()),
        RuntimeOptions {
            schedule_sleeps: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut stop = None;
    let mut served = None;
    let mut base = String::new();
    if path == Path::Http {
        // The server's defaults (one worker per core), as `somna run --serve` uses them.
        let options = ServerOptions::new("127.0.0.1:0".parse().unwrap());
        let server = Server::bind(runtime.clone(), options).unwrap();
        base = format!("http://{}", server.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stop = Some(tx);
        served = Some(actix_rt::spawn(server.run(async {
            let _ = rx.await;
        })));
    }
    let measure = Duration::from_secs_f64(secs);
    let (latencies, wall, flushes, served_waiters) =
        drive(path, &runtime, &store, &base, clients, measure).await;
    if let (Some(stop), Some(served)) = (stop, served) {
        let _ = stop.send(());
        served.await.unwrap().unwrap();
    }
    runtime.shutdown(Duration::from_secs(10)).await.unwrap();
    drop(runtime);
    drop(store);
    Cell {
        path,
        durable,
        clients,
        wall,
        latencies,
        flushes,
        served: served_waiters,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes --bench; a test run (`cargo test --benches`) passes nothing: keep it tiny.
    let benching = std::env::args().any(|a| a == "--bench");
    let secs: f64 = env_or("SOMNA_ACKS_SECS", if benching { 4.0 } else { 0.3 });
    let agents: usize = env_or("SOMNA_ACKS_AGENTS", 100);
    let clients: Vec<usize> = std::env::var("SOMNA_ACKS_CLIENTS")
        .unwrap_or_else(|_| "1,4,16,64".into())
        .split(',')
        .map(|c| c.trim().parse().expect("SOMNA_ACKS_CLIENTS: numbers"))
        .collect();
    let paths: Vec<Path> = match std::env::var("SOMNA_ACKS_PATHS").as_deref() {
        Ok("http") => vec![Path::Http],
        Ok("library") => vec![Path::Library],
        _ => vec![Path::Http, Path::Library],
    };

    let system = actix::System::new();
    let cells = system.block_on(async move {
        let mut cells = Vec::new();
        for &path in &paths {
            for &n in &clients {
                for durable in [false, true] {
                    cells.push(cell(path, durable, n, agents, secs).await);
                }
            }
        }
        cells
    });

    println!(
        "{agents} agents, {secs} s per cell (after {} ms warm-up), {} cores",
        WARM_UP.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| path | clients | durable_acks | acks/s | p50 | p99 | max | flushes | mean batch | \
         acks/s vs durable |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for c in &cells {
        let rate = c.latencies.len() as f64 / c.wall.as_secs_f64();
        let batch = if c.flushes == 0 {
            "–".to_string()
        } else {
            format!("{:.1}", c.served as f64 / c.flushes as f64)
        };
        let ratio = if c.durable {
            String::new()
        } else {
            cells
                .iter()
                .find(|d| d.durable && d.path == c.path && d.clients == c.clients)
                .map(|d| {
                    let durable_rate = d.latencies.len() as f64 / d.wall.as_secs_f64();
                    format!("{:.1}×", rate / durable_rate.max(f64::MIN_POSITIVE))
                })
                .unwrap_or_default()
        };
        println!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |",
            c.path.name(),
            c.clients,
            c.durable,
            rate,
            ms(percentile(&c.latencies, 0.5)),
            ms(percentile(&c.latencies, 0.99)),
            ms(c.latencies.last().copied().unwrap_or_default()),
            c.flushes,
            batch,
            ratio,
        );
    }
}
