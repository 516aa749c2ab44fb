//! The prompt's assembly alone, for a profiler: `prompt::assemble` over two conversations of the
//! recall dataset imported as the runtime would have lived them (a rolling summary, an archive
//! with its search index, a live tail of ~160 turns), 40 of each one's questions, `ROUNDS` times
//! (default 5). What issue 26's turn bench spends most of a turn on, single-threaded and
//! deterministic, so that an instruction count compares two builds where wall time cannot:
//!
//! ```text
//! cargo build --release -p somna-runtime --example assemble_profile
//! ROUNDS=3 valgrind --tool=callgrind --toggle-collect='assemble_profile::run_assemble' \
//!     target/release/examples/assemble_profile
//! ```
//!
//! Only `run_assemble` is counted: the import and a warm-up (the index's catch-up) are not.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::io::BufRead;
use std::sync::Arc;
use std::time::Instant;

use somna_core::config::{AgentConfig, ResolvedConfig};
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Message, Timestamp};
use somna_llm::BuiltinClient;
use somna_runtime::{Compactor, prompt};
use somna_store::{Store, StoreOptions};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const CONVERSATIONS: [&str; 2] = ["conv01", "conv02"];

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall");
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut text = String::from(
        "[defaults]\npersona = \"You are a villager of Emberfield. Answer travellers plainly.\"\n",
    );
    for c in CONVERSATIONS {
        text.push_str(&format!("[[agents]]\nid = \"{c}\"\n"));
    }
    let config = ResolvedConfig::load(&text, "assemble_profile.toml", &[]).unwrap();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let compactor = Compactor::new(store.clone(), Arc::new(BuiltinClient::new()));
    let mut agents = Vec::new();
    for c in CONVERSATIONS {
        let id = AgentId::new(c).unwrap();
        let agent_config = config.agent(&id).unwrap().clone();
        store.create_agent(&id, Timestamp(0)).unwrap();
        let file = std::fs::File::open(root.join(format!("conversations/{c}.jsonl"))).unwrap();
        rt.block_on(somna_runtime::import::import_jsonl(
            std::io::BufReader::new(file),
            &id,
            &agent_config,
            &store,
            &compactor,
            Timestamp(1_700_000_000_000),
            |_, _| {},
        ))
        .unwrap();
        let questions: Vec<String> =
            std::io::BufReader::new(std::fs::File::open(root.join("questions.jsonl")).unwrap())
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
                .filter(|v| v["conversation"] == c)
                .map(|v| v["question"].as_str().unwrap().to_string())
                .take(40)
                .collect();
        agents.push((id, agent_config, questions));
    }
    // A warm-up, not counted: the index catches up with what the import archived.
    for (id, agent_config, questions) in &agents {
        let counter = TokenCounter::for_model(&agent_config.model);
        let mut history = store.history(id).unwrap();
        history.push(Message::user(questions[0].clone()));
        prompt::assemble(&store, id, agent_config, &history, &counter).unwrap();
    }
    let (mut prompts, mut tokens) = (0u64, 0u64);
    let start = Instant::now();
    for _ in 0..rounds {
        for (id, agent_config, questions) in &agents {
            let counter = TokenCounter::for_model(&agent_config.model);
            for q in questions {
                let mut history = store.history(id).unwrap();
                let mut input = Message::user(q.clone());
                input.tokens = counter.count_message(&input);
                history.push(input);
                tokens += run_assemble(&store, id, agent_config, &history, &counter);
                prompts += 1;
            }
        }
    }
    println!(
        "{prompts} prompts, {tokens} tokens, {:.1} µs each",
        start.elapsed().as_secs_f64() * 1e6 / prompts as f64
    );
}

/// The counted part: one prompt's assembly; its total tokens.
#[inline(never)]
fn run_assemble(
    store: &Store,
    id: &AgentId,
    config: &AgentConfig,
    history: &[Message],
    counter: &TokenCounter,
) -> u64 {
    let (built, _) = prompt::assemble(store, id, config, history, counter).expect("assemble");
    built.total_tokens()
}
