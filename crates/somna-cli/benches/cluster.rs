//! The cluster under many agents: `SOMNA_BENCH_PG_URL=postgres://… cargo bench -p somna-cli --bench
//! cluster` runs `somna run --cluster --serve` processes on one Postgres schema with (by default)
//! 10,000 agents on 256 shards and prints one table:
//!
//! 1. one node starts and takes every shard (at most `acquire_per_round` a round);
//! 2. inputs/s one node accepts (closed-loop HTTP clients posting to its API, agents round robin);
//! 3. two more nodes join: the time until the shards are spread over three, then inputs/s the
//!    three accept together (the clients spread over the three APIs);
//! 4. one node is SIGKILLed: the time until the two survivors hold every shard;
//! 5. each node's tick lateness p50/p99 (its `/metrics`) at the end of each phase.
//!
//! Knobs: SOMNA_CLUSTER_AGENTS (10,000), SOMNA_CLUSTER_SECS (seconds of input per phase, 10),
//! SOMNA_CLUSTER_CLIENTS (32), SOMNA_BENCH_NATS_URL (NATS for wake-ups; none by default).
//! Without SOMNA_BENCH_PG_URL it prints that it skipped (so `cargo test --benches` passes anywhere).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

const SHARDS: u32 = 256;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A node process with its API address; killed when dropped.
struct Node {
    name: String,
    child: Child,
    url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn somna(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_somna"));
    c.current_dir(dir)
        .env_remove("SOMNA_API_TOKEN")
        .env("SOMNA_LOG", "error");
    c
}

fn start(dir: &Path, name: &str) -> Node {
    use std::io::BufRead;
    let mut child = somna(dir)
        .args(["--set", &format!("cluster.node={name}")])
        .args(["run", "--cluster", "--serve", "127.0.0.1:0", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if let Some(rest) = line.strip_prefix("somna: API on ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("no API address");
    Node {
        name: name.to_string(),
        child,
        url,
    }
}

fn status(dir: &Path) -> Value {
    let o = somna(dir)
        .args(["cluster", "status", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

/// Shards per live node.
fn held(s: &Value) -> Vec<(String, u64)> {
    s["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter(|n| n["live"] == true && n["shards"].as_u64() > Some(0))
                .map(|n| {
                    (
                        n["node"].as_str().unwrap_or("").to_string(),
                        n["shards"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Polls the status until `done`; the time it took.
fn until(dir: &Path, limit: Duration, done: impl Fn(&Value) -> bool) -> Duration {
    let started = Instant::now();
    loop {
        let s = status(dir);
        if done(&s) {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "waited {limit:?}: {s}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Exactly `nodes` hold shards, all of them between them.
fn spread_over(s: &Value, nodes: usize) -> bool {
    let h = held(s);
    h.len() == nodes
        && h.iter().map(|(_, n)| n).sum::<u64>() == u64::from(SHARDS)
        && s["unowned_shards"] == 0
}

/// Tick lateness p50 and p99 from a node's `/metrics`, in ms.
fn lateness(rt: &tokio::runtime::Runtime, node: &Node) -> (f64, f64) {
    let text = rt.block_on(async {
        reqwest::get(format!("{}/metrics", node.url))
            .await
            .ok()?
            .text()
            .await
            .ok()
    });
    let quantile = |q: &str| {
        text.as_deref()
            .unwrap_or("")
            .lines()
            .find(|l| l.starts_with(&format!("somna_tick_lateness_seconds{{quantile=\"{q}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |s| s * 1000.0)
    };
    (quantile("0.5"), quantile("0.99"))
}

/// Closed-loop clients posting inputs to `nodes` for `secs`; accepted inputs per second.
fn inputs_per_second(
    rt: &tokio::runtime::Runtime,
    nodes: &[&Node],
    agents: u64,
    clients: u64,
    secs: u64,
) -> f64 {
    let accepted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
    let started = Instant::now();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (http, urls, accepted, stop) =
                (http.clone(), urls.clone(), accepted.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let url = &urls[(i as usize) % urls.len()];
                    let agent = format!("npc{:05}", (i * 7919) % agents);
                    let body = serde_json::json!({
                        "type": "user",
                        "content": format!("Line {i}: have you seen the wolves?"),
                        "name": "Aldric",
                    });
                    let sent = http
                        .post(format!("{url}/v1/agents/{agent}/input"))
                        .json(&body)
                        .send()
                        .await;
                    if sent.is_ok_and(|r| r.status().as_u16() == 202) {
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    i += clients;
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(secs)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            let _ = t.await;
        }
    });
    accepted.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let Ok(url) = std::env::var("SOMNA_BENCH_PG_URL") else {
        println!("skipped: SOMNA_BENCH_PG_URL is unset (a PostgreSQL URL)");
        return;
    };
    let benching = std::env::args().any(|a| a == "--bench");
    if !benching {
        println!("skipped: run with `cargo bench` (the cluster bench takes minutes)");
        return;
    }
    let agents = env_num("SOMNA_CLUSTER_AGENTS", 10_000);
    let secs = env_num("SOMNA_CLUSTER_SECS", 10);
    let clients = env_num("SOMNA_CLUSTER_CLIENTS", 32);
    let nats = std::env::var("SOMNA_BENCH_NATS_URL").unwrap_or_default();
    let schema = format!("somna_bench_cluster_{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut config = format!(
        "[store]\nbackend = \"postgres\"\nurl = \"{url}\"\nschema = \"{schema}\"\n\
         [cluster]\nshards = {SHARDS}\nlease_ttl = \"6s\"\nrenew_every = \"2s\"\n\
         poll_every = \"1s\"\nnats_url = \"{nats}\"\n\
         [defaults]\ntick_every = \"1s\"\nsleep_every = \"6h\"\nsleep_jitter = \"1h\"\n\
         persona = \"You are a villager of Emberfield.\"\n"
    );
    for i in 0..agents {
        config.push_str(&format!("[[agents]]\nid = \"npc{i:05}\"\n"));
    }
    std::fs::write(dir.join("runtime.toml"), config).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<(String, String)> = Vec::new();

    let n1 = start(dir, "node-1");
    let took = until(dir, Duration::from_secs(600), |s| spread_over(s, 1));
    rows.push((
        format!(
            "one node takes all {SHARDS} shards ({agents} agents, ≤32 shards a round every 2 s)"
        ),
        format!("{:.1} s", took.as_secs_f64()),
    ));
    std::thread::sleep(Duration::from_secs(5));
    let one = inputs_per_second(&rt, &[&n1], agents, clients, secs);
    rows.push(("inputs/s accepted, 1 node".into(), format!("{one:.0}")));
    let (p50, p99) = lateness(&rt, &n1);
    rows.push((
        "tick lateness p50 / p99, 1 node".into(),
        format!("{p50:.2} / {p99:.2} ms"),
    ));

    let n2 = start(dir, "node-2");
    let n3 = start(dir, "node-3");
    let took = until(dir, Duration::from_secs(600), |s| spread_over(s, 3));
    let s = status(dir);
    rows.push((
        "two nodes join: shards spread over three".into(),
        format!("{:.1} s ({:?})", took.as_secs_f64(), held(&s)),
    ));
    std::thread::sleep(Duration::from_secs(5));
    let three = inputs_per_second(&rt, &[&n1, &n2, &n3], agents, clients, secs);
    rows.push((
        "inputs/s accepted, 3 nodes".into(),
        format!("{three:.0} ({:.2}× one node)", three / one),
    ));
    for n in [&n1, &n2, &n3] {
        let (p50, p99) = lateness(&rt, n);
        rows.push((
            format!("tick lateness p50 / p99, {} of 3", n.name),
            format!("{p50:.2} / {p99:.2} ms"),
        ));
    }

    drop(n1);
    let killed = Instant::now();
    until(dir, Duration::from_secs(600), |s| spread_over(s, 2));
    rows.push((
        "node-1 SIGKILLed: the survivors hold every shard".into(),
        format!("{:.1} s (lease TTL 6 s)", killed.elapsed().as_secs_f64()),
    ));
    for n in [&n2, &n3] {
        let (p50, p99) = lateness(&rt, n);
        rows.push((
            format!("tick lateness p50 / p99, {} after the takeover", n.name),
            format!("{p50:.2} / {p99:.2} ms"),
        ));
    }
    drop((n2, n3));

    println!("| phase | measured |");
    println!("|---|---|");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
    // Drop the schema.
    drop(somna_store::Store::temporary_postgres_in(&url, &schema));
}
