//! A turn's own cost (issue 26, item 4): what one input costs the runtime with the model excluded,
//! and beside it what the builtin brain's reply costs.
//!
//! `cargo bench -p somna-runtime --bench turn`. Each agent is one conversation of the recall
//! dataset (`datasets/recall/conversations`) imported as the runtime would have lived it (a
//! rolling summary, an archive with its search index, a live tail), ticking every 5 ms. Inputs
//! (the dataset's questions about that conversation) are sent one at a time, each awaited to its
//! agent's `agent_replied` event; the process's CPU time (every thread: the Arbiters, the job pool,
//! sled's) is read before the send and after the reply, and the idle cost of the ticks in that
//! time (measured alone first) is taken off. Three runs on the same store:
//! - **runtime**: an LLM client that answers a fixed line at once, so what is left is Somna's own
//!   work: the durable append of the input, the tick, the prompt (summary, live history,
//!   retrieval over the archive), the reply's append, the events, the usage checks;
//! - **runtime + builtin brain**: the builtin provider, as the README's main job runs;
//! - **runtime + builtin embedder**: the first run's fixed-line client with the default
//!   `[embedder]` (every archive embedded first, as sleeps would have): each turn also embeds its
//!   input and searches the agent's vectors.
//!
//! Each run's row is followed by the rows of its turns without and with a compaction started
//! during them (these agents never sleep, so their compactions are emergencies at a tick, and the
//! process CPU of such a turn includes it).
//!
//! Then each part of the turn alone, on the same agents, single-threaded: the prompt's assembly
//! (retrieval included), an append, and the builtin brain's reply to that prompt.
//! Knobs: SOMNA_TURN_AGENTS (default 8), SOMNA_TURN_INPUTS (turns per run, default 400),
//! SOMNA_TURN_RUNTIME_ONLY (the first run only: for a profiler), SOMNA_TURN_FRESH (agents with
//! no past instead of a conversation's: each history only the bench's own turns, as the load
//! bench's agents have).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_core::config::ResolvedConfig;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Message, Timestamp};
use somna_llm::{BuiltinClient, BuiltinEmbedder, ChatRequest, LlmClient};
use somna_runtime::protocol::Event;
use somna_runtime::{Compactor, EventBus, Inbound, Runtime, RuntimeOptions, Semantic, prompt};
use somna_store::{Store, StoreOptions};
use somna_testkit::{env_or, percentile};

use common::{InstantLlm, process_cpu};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn dataset() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall")
}

/// The dataset's questions about `conversation`.
fn questions(conversation: &str) -> Vec<String> {
    let file = std::fs::File::open(dataset().join("questions.jsonl")).unwrap();
    std::io::BufReader::new(file)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .filter(|v| v["conversation"] == conversation)
        .map(|v| v["question"].as_str().unwrap().to_string())
        .collect()
}

/// The header of the table of the runtime's own count of each turn.
fn own_header() {
    println!(
        "\n| the runtime's own count (`somna_turn_work_seconds`: each turn's work on its threads, no wake-ups or flushes) | turns | mean | p50 | p99 |"
    );
    println!("|---|---|---|---|---|");
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Per-turn figures of one run.
struct Run {
    cpu: Vec<Duration>,
    wall: Vec<Duration>,
    /// Per turn: a compaction started during it (the tick's emergency check: these agents never
    /// sleep), whose work the turn's CPU includes.
    compacted: Vec<bool>,
    /// The runtime's own count of the measured turns (`Runtime::turn_stats`): each turn's work
    /// on the threads it ran on, without the wake-ups and flushes that the process CPU above
    /// includes.
    own: somna_runtime::stats::TurnSummary,
}

impl Run {
    /// The row of every turn, then the rows of the turns without and with a compaction.
    fn rows(&self, label: &str) {
        self.row(label, |_| true);
        let with = self.compacted.iter().filter(|&&c| c).count();
        self.row(
            &format!("… the {} turns without a compaction", self.cpu.len() - with),
            |i| !self.compacted[i],
        );
        if with > 0 {
            self.row(
                &format!("… the {with} turns during which a compaction started"),
                |i| self.compacted[i],
            );
        }
    }

    /// The row of the runtime's own count.
    fn own_row(&self, label: &str) {
        println!(
            "| {label} | {} | {} | {} | {} |",
            self.own.turns,
            micros(self.own.mean()),
            micros(self.own.p50),
            micros(self.own.p99),
        );
    }

    fn row(&self, label: &str, keep: impl Fn(usize) -> bool) {
        let pick = |v: &[Duration]| -> Vec<Duration> {
            v.iter()
                .enumerate()
                .filter(|&(i, _)| keep(i))
                .map(|(_, d)| *d)
                .collect()
        };
        let (mut cpu, mut wall) = (pick(&self.cpu), pick(&self.wall));
        cpu.sort();
        wall.sort();
        let mean = cpu.iter().sum::<Duration>() / cpu.len().max(1) as u32;
        println!(
            "| {label} | {} | {} | {} | {} | {} |",
            micros(mean),
            micros(percentile(&cpu, 0.5)),
            micros(percentile(&cpu, 0.99)),
            micros(percentile(&wall, 0.5)),
            micros(percentile(&wall, 0.99)),
        );
    }
}

/// Sends `inputs` questions one at a time round the agents, each awaited to its reply; per turn,
/// the process CPU time less `idle` (CPU per second of the idle runtime) for the turn's wall time.
async fn run(
    config: &ResolvedConfig,
    store: &Store,
    llm: Arc<dyn LlmClient>,
    agents: &[(AgentId, Vec<String>)],
    inputs: usize,
    semantic: Option<Semantic>,
) -> (Run, f64) {
    let bus = EventBus::new(1_024);
    let mut events = bus.subscribe();
    let runtime = Runtime::start(
        config.clone(),
        store.clone(),
        llm,
        RuntimeOptions {
            events: Some(bus),
            schedule_sleeps: false,
            semantic,
            ..RuntimeOptions::default()
        },
    )
    .unwrap();
    let turn = |i: usize| {
        let (id, questions) = &agents[i % agents.len()];
        let content = questions[(i / agents.len()) % questions.len()].clone();
        (id.clone(), content)
    };
    // Waits for `id`'s reply; true when a compaction started before it (of any agent: an agent's
    // emergency compaction comes at its first tick after the usage passed the threshold, which
    // may fall in another agent's turn).
    let reply_of = async |events: &mut tokio::sync::broadcast::Receiver<_>, id: &AgentId| {
        let mut compacted = false;
        loop {
            let stamped: somna_runtime::protocol::Stamped = events.recv().await.unwrap();
            match &stamped.event {
                Event::AgentReplied { agent, .. } if agent == id => return compacted,
                Event::CompactionStarted { .. } => compacted = true,
                _ => {}
            }
        }
    };
    // Warm up: every agent answers once (its index caught up, its caches filled).
    for i in 0..agents.len() {
        let (id, content) = turn(i);
        let input = Inbound::User {
            content,
            name: Some("Traveller".into()),
        };
        runtime.send(&id, input).await.unwrap();
        reply_of(&mut events, &id).await;
    }
    // The idle runtime's CPU per second (ticks, sled's flusher).
    let (c0, t0) = (process_cpu(), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = (process_cpu() - c0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let mut out = Run {
        cpu: Vec::with_capacity(inputs),
        wall: Vec::with_capacity(inputs),
        compacted: Vec::with_capacity(inputs),
        own: Default::default(),
    };
    runtime.turn_stats().reset();
    for i in 0..inputs {
        let (id, content) = turn(agents.len() + i);
        let input = Inbound::User {
            content,
            name: Some("Traveller".into()),
        };
        let (c0, t0) = (process_cpu(), Instant::now());
        runtime.send(&id, input).await.unwrap();
        let compacted = reply_of(&mut events, &id).await;
        let wall = t0.elapsed();
        let cpu = (process_cpu() - c0).saturating_sub(wall.mul_f64(idle));
        out.cpu.push(cpu);
        out.wall.push(wall);
        out.compacted.push(compacted);
    }
    // The last turn is recorded when its job has ended on the Arbiter, just after its reply.
    let deadline = Instant::now() + Duration::from_secs(5);
    while runtime.turn_stats().summary().turns
        < out.compacted.iter().filter(|c| !**c).count() as u64
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    out.own = runtime.turn_stats().summary();
    runtime.shutdown(Duration::from_secs(10)).await.unwrap();
    (out, idle)
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let n_agents = env_or("SOMNA_TURN_AGENTS", if benching { 8 } else { 2 });
    let inputs = env_or("SOMNA_TURN_INPUTS", if benching { 400 } else { 8 });
    // Agents that start with no history, as the load bench's villagers do, instead of a
    // conversation's past each.
    let fresh = std::env::var_os("SOMNA_TURN_FRESH").is_some();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut text = String::from(
        "[defaults]\ntick_every = \"5ms\"\nsleep_every = \"6h\"\n\
         persona = \"You are a villager of Emberfield. Answer travellers plainly.\"\n",
    );
    let conversations: Vec<String> = (1..=n_agents).map(|i| format!("conv{i:02}")).collect();
    for c in &conversations {
        text.push_str(&format!("[[agents]]\nid = \"{c}\"\n"));
    }
    let config = ResolvedConfig::load(&text, "turn.toml", &[]).unwrap();
    let system = actix::System::new();
    system.block_on(async {
        // Each agent lives its conversation first (import compacts at the emergency threshold).
        let compactor = Compactor::new(store.clone(), Arc::new(BuiltinClient::new()));
        let mut agents = Vec::new();
        for c in &conversations {
            let id = AgentId::new(c.as_str()).unwrap();
            let agent_config = config.agent(&id).unwrap().clone();
            store.create_agent(&id, Timestamp(0)).unwrap();
            if fresh {
                agents.push((id, questions(c)));
                continue;
            }
            let file = std::fs::File::open(dataset().join(format!("conversations/{c}.jsonl")));
            let report = somna_runtime::import::import_jsonl(
                std::io::BufReader::new(file.unwrap()),
                &id,
                &agent_config,
                &store,
                &compactor,
                Timestamp(1_700_000_000_000),
                |_, _| {},
            )
            .await
            .unwrap();
            let view = store.agent(&id).unwrap().unwrap();
            println!(
                "{c}: {} turns imported, {} compactions; {} live, {} archived",
                report.imported,
                report.compactions,
                store.history(&id).unwrap().len(),
                view.archive_len
            );
            agents.push((id, questions(c)));
        }
        let (runtime_only, idle_a) =
            run(&config, &store, Arc::new(InstantLlm), &agents, inputs, None).await;
        if std::env::var_os("SOMNA_TURN_RUNTIME_ONLY").is_some() {
            println!("\n| per turn | CPU mean | CPU p50 | CPU p99 | input-to-reply p50 | p99 |");
            println!("|---|---|---|---|---|---|");
            runtime_only.rows("runtime (model excluded)");
            own_header();
            runtime_only.own_row("runtime (model excluded)");
            return;
        }
        let (with_brain, idle_b) = run(
            &config,
            &store,
            Arc::new(BuiltinClient::new()),
            &agents,
            inputs,
            None,
        )
        .await;
        // The default `[embedder]` (the builtin static table): every archive embedded as a sleep
        // would, then the input embedded and the vectors searched every turn.
        let embedder: Arc<dyn somna_llm::Embedder> = Arc::new(BuiltinEmbedder::shared().unwrap());
        for (id, _) in &agents {
            somna_runtime::semantic::embed_whole_archive(&store, id, embedder.as_ref(), 1_024)
                .await
                .unwrap();
        }
        let semantic = Semantic::new(embedder, &config.embedder);
        let (with_vectors, _) = run(
            &config,
            &store,
            Arc::new(InstantLlm),
            &agents,
            inputs,
            Some(semantic),
        )
        .await;
        println!(
            "\n{inputs} turns per run over {n_agents} agents, one at a time; idle runtime: {:.2}% / {:.2}% of one core (taken off)\n",
            idle_a * 100.0,
            idle_b * 100.0
        );
        println!("| per turn | CPU mean | CPU p50 | CPU p99 | input-to-reply p50 | p99 |");
        println!("|---|---|---|---|---|---|");
        runtime_only.rows("runtime (model excluded)");
        with_brain.rows("runtime + builtin brain");
        with_vectors.rows("runtime + builtin embedder (model excluded)");
        own_header();
        runtime_only.own_row("runtime (model excluded)");
        with_brain.own_row("runtime + builtin brain");
        with_vectors.own_row("runtime + builtin embedder (model excluded)");

        // Each part alone, single-threaded, on the agents as they are now.
        let brain = BuiltinClient::new();
        let (mut assemble, mut respond, mut append) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..inputs.div_ceil(agents.len()) {
            for (id, questions) in &agents {
                let agent_config = config.agent(id).unwrap();
                let counter = TokenCounter::for_model(&agent_config.model);
                let mut history = store.history(id).unwrap();
                let mut input = Message::user(questions[round % questions.len()].clone());
                input.tokens = counter.count_message(&input);
                history.push(input);
                let t = Instant::now();
                let (built, _) =
                    prompt::assemble(&store, id, agent_config, &history, &counter).unwrap();
                assemble.push(t.elapsed());
                let request = ChatRequest::new(agent_config.model.clone(), built.messages);
                let t = Instant::now();
                std::hint::black_box(brain.respond(&request));
                respond.push(t.elapsed());
            }
        }
        let probe = AgentId::new("probe").unwrap();
        store.create_agent(&probe, Timestamp(0)).unwrap();
        for i in 0..inputs {
            let mut m = Message::user(format!("A line of dialogue, number {i}, of no consequence."));
            m.tokens = 12;
            let t = Instant::now();
            store.append(&probe, m, Timestamp(0)).unwrap();
            append.push(t.elapsed());
        }
        println!("\n| each part alone | p50 | p99 |\n|---|---|---|");
        for (label, mut v) in [
            ("`prompt::assemble` (summary, live history, retrieval)", assemble),
            ("the builtin brain's reply to that prompt", respond),
            ("`Store::append` (not awaiting the flush)", append),
        ] {
            v.sort();
            println!(
                "| {label} | {} | {} |",
                micros(percentile(&v, 0.5)),
                micros(percentile(&v, 0.99))
            );
        }
    });
}
