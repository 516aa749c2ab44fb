//! The cluster under many agents: `SOMNA_BENCH_PG_URL=postgres://… cargo bench -p somna-cli --bench
//! cluster` runs `somna run --cluster --serve` processes on one Postgres schema with (by default)
//! 10,000 agents on 256 shards and prints one table:
//!
//! 1. one node starts and takes every shard (at most `acquire_per_round` a round);
//! 2. inputs/s one node accepts (closed-loop HTTP clients posting to its API, agents round robin);
//! 3. two more nodes join: the time until the shards are spread over three, then inputs/s the
//!    three accept together (the clients spread over the three APIs);
//! 4. one node is SIGKILLed: the time until the two survivors hold every shard;
//! 5. each node's tick lateness p50/p99 (its `/metrics`) at the end of each phase;
//! 6. no double ownership: from the join to the end, every 200 ms, the agents the nodes host
//!    summed over the nodes (never more than there are agents), and 500 agents' event logs read
//!    back (each sampled agent is put to sleep once on node-1 and once on its final node, so the
//!    moved ones have events from two nodes): writer epochs never go back, one node per epoch.
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
use somna_testkit::env_or;

const SHARDS: u32 = 256;

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
        .env("SOMNA_LOG", "warn")
        .args(["--set", &format!("cluster.node={name}")])
        .args(["run", "--cluster", "--serve", "127.0.0.1:0", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join(format!("{name}.log"))).unwrap(),
        ))
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

/// A node's `somna_agents` gauge (agents it hosts), `None` when it does not answer.
fn hosted(node_url: &str) -> Option<u64> {
    let text = reqwest::blocking::Client::new()
        .get(format!("{node_url}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .ok()?
        .text()
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("somna_agents "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Waits until `nodes` host `agents` between them (their `somna_agents` gauges), 100 ms polls;
/// the time since `since`.
fn all_hosted(nodes: &[&Node], agents: u64, since: Instant) -> Duration {
    loop {
        let sum: u64 = nodes.iter().filter_map(|n| hosted(&n.url)).sum();
        if sum >= agents {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(600),
            "{sum} of {agents} hosted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Samples, every 200 ms until stopped, the sum over `urls` of the agents each node hosts; returns
/// the largest sum seen. More than the number of agents would mean an agent ran on two nodes.
fn sample_ownership(urls: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut most = 0;
        while !stop.load(Ordering::SeqCst) {
            let sum: u64 = urls.iter().filter_map(|u| hosted(u)).sum();
            most = most.max(sum);
            std::thread::sleep(Duration::from_millis(200));
        }
        most
    })
}

/// Puts `sample` agents (spread over all) to sleep through the node that runs each (the status's
/// `host`, asked of `nodes[0]`), so that their logs get an event from their current node.
/// Returns how many slept and why the others did not (an error code, `no host`, a transport
/// error), counted.
fn sleep_sample(
    nodes: &[&Node],
    agents: u64,
    sample: u64,
) -> (u64, std::collections::BTreeMap<String, u64>) {
    let client = reqwest::blocking::Client::new();
    let step = (agents / sample).max(1);
    let mut slept = 0;
    let mut failed = std::collections::BTreeMap::new();
    let mut fail = |why: String| *failed.entry(why).or_insert(0) += 1;
    for i in (0..agents).step_by(step as usize) {
        let path = format!("/v1/agents/npc{i:05}");
        let status: Value = match client.get(format!("{}{path}", nodes[0].url)).send() {
            Ok(answer) if !answer.status().is_success() => {
                let code = answer.status().as_u16();
                let body: Value = answer.json().unwrap_or_default();
                let error = body["error"]["code"].as_str().unwrap_or("?").to_string();
                fail(format!("status {code} {error}"));
                continue;
            }
            Ok(answer) => answer.json().unwrap_or_default(),
            Err(e) => {
                fail(format!("status: {}", transport(&e)));
                continue;
            }
        };
        let Some(host) = nodes.iter().find(|n| status["host"] == n.name.as_str()) else {
            fail(format!("no host ({})", status["host"]));
            continue;
        };
        match client
            .post(format!("{}{path}/sleep", host.url))
            .header("content-type", "application/json")
            .body("{}")
            .send()
        {
            Ok(a) if a.status().is_success() => slept += 1,
            Ok(a) => {
                let code = a.status().as_u16();
                let body: Value = a.json().unwrap_or_default();
                fail(format!(
                    "{code} {}",
                    body["error"]["code"].as_str().unwrap_or("?")
                ));
            }
            Err(e) => fail(format!("sleep: {}", transport(&e))),
        }
    }
    (slept, failed)
}

/// A transport error in a word.
fn transport(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "transport"
    }
}

/// `slept` and the reasons of the rest, for the table.
fn sleeps_row((slept, failed): &(u64, std::collections::BTreeMap<String, u64>)) -> String {
    let why: Vec<String> = failed.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    if why.is_empty() {
        format!("{slept}")
    } else {
        format!("{slept} (not: {})", why.join(", "))
    }
}

/// Reads the event logs of `sample` agents through `node`: every event names its writer, epochs
/// never go back, one epoch is one node. Returns (agents read, events checked, agents whose log
/// names more than one node).
fn check_logs(node: &Node, agents: u64, sample: u64) -> (u64, u64, u64) {
    let client = reqwest::blocking::Client::new();
    let (mut events, mut moved) = (0, 0);
    let step = (agents / sample).max(1);
    let mut read = 0;
    for i in (0..agents).step_by(step as usize) {
        let url = format!("{}/v1/agents/npc{i:05}/events?limit=1000", node.url);
        let page: Value = client.get(url).send().unwrap().json().unwrap();
        let mut last: Option<(u64, String)> = None;
        let mut nodes = std::collections::BTreeSet::new();
        for e in page["events"].as_array().unwrap().iter().rev() {
            let by = &e["by"];
            let (node, epoch) = (by["node"].as_str().unwrap(), by["epoch"].as_u64().unwrap());
            if let Some((le, ln)) = &last {
                assert!(
                    epoch > *le || (epoch == *le && node == ln),
                    "npc{i:05}: {node} wrote at epoch {epoch} after {ln} at {le}"
                );
            }
            nodes.insert(node.to_string());
            last = Some((epoch, node.to_string()));
            events += 1;
        }
        moved += u64::from(nodes.len() > 1);
        read += 1;
    }
    (read, events, moved)
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
    let agents = env_or::<u64>("SOMNA_CLUSTER_AGENTS", 10_000);
    let secs = env_or::<u64>("SOMNA_CLUSTER_SECS", 10);
    let clients = env_or::<u64>("SOMNA_CLUSTER_CLIENTS", 32);
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
    let started = Instant::now();
    let took = until(dir, Duration::from_secs(600), |s| spread_over(s, 1));
    let running = all_hosted(&[&n1], agents, started);
    rows.push((
        format!(
            "one node takes all {SHARDS} shards ({agents} agents, ≤32 shards a round, rounds every 0.5 s while catching up)"
        ),
        format!("{:.1} s", took.as_secs_f64()),
    ));
    rows.push((
        "one node hosts all the agents (each loaded, its actor started)".into(),
        format!("{:.1} s", running.as_secs_f64()),
    ));
    std::thread::sleep(Duration::from_secs(5));
    let one = inputs_per_second(&rt, &[&n1], agents, clients, secs);
    rows.push(("inputs/s accepted, 1 node".into(), format!("{one:.0}")));
    let (p50, p99) = lateness(&rt, &n1);
    rows.push((
        "tick lateness p50 / p99, 1 node".into(),
        format!("{p50:.2} / {p99:.2} ms"),
    ));

    let slept = sleep_sample(&[&n1], agents, 500);
    rows.push((
        "sleeps asked on node-1 that answered (of 500)".into(),
        sleeps_row(&slept),
    ));
    // What node-1 warned about so far (a lease it failed to renew would show here).
    let log = std::fs::read_to_string(dir.join("node-1.log")).unwrap_or_default();
    let mut warnings: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for line in log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
    {
        // The level, the target and the message, without the fields (`agent=…`).
        let message: Vec<&str> = line
            .split_whitespace()
            .skip(1)
            .take_while(|w| !w.contains('='))
            .collect();
        *warnings.entry(message.join(" ")).or_insert(0) += 1;
    }
    for (message, n) in &warnings {
        println!("node-1 logged ×{n}: {message}");
    }

    // From here on, sample how many agents the nodes host at once (all three URLs are fixed).
    let n2 = start(dir, "node-2");
    let n3 = start(dir, "node-3");
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = sample_ownership(
        vec![n1.url.clone(), n2.url.clone(), n3.url.clone()],
        stop_sampling.clone(),
    );
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
    let running = all_hosted(&[&n2, &n3], agents, killed);
    rows.push((
        "node-1 SIGKILLed: the survivors host all the agents".into(),
        format!("{:.1} s", running.as_secs_f64()),
    ));
    for n in [&n2, &n3] {
        let (p50, p99) = lateness(&rt, n);
        rows.push((
            format!("tick lateness p50 / p99, {} after the takeover", n.name),
            format!("{p50:.2} / {p99:.2} ms"),
        ));
    }
    stop_sampling.store(true, Ordering::SeqCst);
    let most = sampler.join().unwrap();
    rows.push((
        "most agents hosted at once, summed over the nodes (join, spread, kill, takeover)".into(),
        format!("{most} (of {agents}: more would be an agent on two nodes)"),
    ));
    assert!(most <= agents, "{most} agents hosted at once, of {agents}");
    // The same sample sleeps again on the nodes that run it now: the agents that moved have
    // events from two nodes, in lease order.
    let slept_again = sleep_sample(&[&n2, &n3], agents, 500);
    rows.push((
        "sleeps asked again on the nodes that run them (of 500)".into(),
        sleeps_row(&slept_again),
    ));
    let (read, events, moved) = check_logs(&n2, agents, 500);
    rows.push((
        "event logs read back: writer epochs never go back, one node per epoch".into(),
        format!(
            "{read} agents ({} + {} sleeps answered), {events} events, \
             {moved} logs written by two nodes",
            slept.0, slept_again.0
        ),
    ));
    assert!(
        moved > 0,
        "no sampled agent's log has events from two nodes"
    );
    drop((n2, n3));

    println!("| phase | measured |");
    println!("|---|---|");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
    // Drop the schema.
    drop(somna_store::Store::temporary_postgres_in(&url, &schema));
}
