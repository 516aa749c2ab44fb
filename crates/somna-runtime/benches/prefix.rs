//! How much of each prompt a model server's prefix cache can reuse: one agent, 200 turns.
//!
//! The agent starts from an imported, compacted conversation (so every turn recalls something into
//! its working context), then talks for 200 turns with the builtin provider. Every chat request
//! the agent sends is recorded, serialized the way a chat template lays it out (ChatML), and
//! compared with the previous one: the share of its tokens (o200k) that is a prefix of the previous
//! turn's prompt, and what lies outside that prefix — which must be only the turns appended since
//! (the previous input's reply, the new input) and the per-turn context note.
//!
//! For comparison the same requests are also laid out the way Somna did before (the working
//! context inside the leading system message, before the summary).
//!
//! `cargo bench -p somna-runtime --bench prefix` prints one table per window (32,768 with no
//! compaction during the 200 turns; 4,096, which compacts on the way: the turns right after a
//! compaction are reported apart).
//!
//! With `SOMNA_PREFIX_DUMP=DIR` it also writes the requests of both layouts, one JSON array of
//! messages per line (`DIR/<window>-now.jsonl`, `DIR/<window>-before.jsonl`), which
//! `scripts/prefill.py` replays against a real server to measure its prefill per turn.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use somna_core::config::AgentConfig;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Role, Timestamp};
use somna_llm::{
    BuiltinClient, ChatMessage, ChatRequest, ChatResponse, LlmClient, LlmError, Purpose,
};
use somna_runtime::agent::AgentDeps;
use somna_runtime::{Agent, Clock, Compactor, EventBus, Inbound};
use somna_store::Store;

/// The builtin provider, recording every chat request.
#[derive(Debug, Default)]
struct Recording {
    builtin: BuiltinClient,
    chats: Mutex<Vec<ChatRequest>>,
}

impl LlmClient for Recording {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        if request.purpose == Purpose::Chat {
            self.chats.lock().unwrap().push(request.clone());
        }
        let answer = self.builtin.respond(&request);
        Box::pin(async move { Ok(answer) })
    }

    fn provider(&self) -> &str {
        "recording"
    }
}

/// A request as a chat template lays it out (ChatML).
fn chatml(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str("<|im_start|>");
        out.push_str(m.role.as_str());
        if let Some(name) = &m.name {
            out.push(' ');
            out.push_str(name);
        }
        out.push('\n');
        out.push_str(&m.content);
        for c in &m.tool_calls {
            out.push_str(&format!(
                "\n<tool_call>{}({})</tool_call>",
                c.name, c.arguments
            ));
        }
        out.push_str("<|im_end|>\n");
    }
    out
}

/// The same request laid out as before the cache-stable layout: the context note's text inside
/// the leading system message, between the persona and the summary.
fn old_layout(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let Some(note) = messages
        .iter()
        .position(|m| m.role == Role::System && m.content.starts_with("[WORKING CONTEXT]"))
    else {
        return messages.to_vec();
    };
    let mut out = messages.to_vec();
    let note = out.remove(note);
    let system = &mut out[0].content;
    let (persona, summary) = match system.find("\n\n[CONTEXT SUMMARY]") {
        Some(at) => (system[..at].to_string(), system[at..].to_string()),
        None => (system.clone(), String::new()),
    };
    *system = format!("{persona}\n\n{}{summary}", note.content);
    out
}

fn common_prefix_chars(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}

/// Per turn: the share of the prompt's tokens that is a prefix of the previous prompt.
struct Turn {
    share: f64,
    tokens: u64,
    /// What lies outside the shared prefix, by kind of message.
    outside: String,
    after_compaction: bool,
}

fn measure(prev: &str, next: &str, counter: &TokenCounter) -> (f64, u64) {
    let cut = common_prefix_chars(prev, next);
    let shared = u64::from(counter.count_text(&next[..cut]));
    let total = u64::from(counter.count_text(next)).max(1);
    (shared as f64 / total as f64, total)
}

/// Which messages of `next` lie after the prefix it shares with `prev`.
fn outside(prev: &[ChatMessage], next: &[ChatMessage]) -> String {
    let same = prev.iter().zip(next).take_while(|(a, b)| a == b).count();
    let mut kinds: Vec<String> = Vec::new();
    for m in &next[same..] {
        let kind = match m.role {
            Role::System if m.content.starts_with("[WORKING CONTEXT]") => "note",
            Role::System if m.content.contains("[CONTEXT SUMMARY]") => "system+summary",
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        match kinds.last_mut() {
            Some(last) if last.starts_with(kind) => {
                let n: usize = last
                    .rsplit('×')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                *last = format!("{kind}×{}", n + 1);
            }
            _ => kinds.push(kind.to_string()),
        }
    }
    kinds.join(" ")
}

fn run(window: u32) -> (Vec<Turn>, Vec<Turn>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = Store::temporary().unwrap();
    let id = AgentId::new("wren").unwrap();
    let recording = Arc::new(Recording::default());
    let llm: Arc<dyn LlmClient> = recording.clone();
    let mut config = AgentConfig::with_builtin_defaults(id.clone());
    config.persona = "You are Wren, steward of Millbrook. You keep the ledger, the calendar and \
                      most of the gossip."
        .into();
    config.compaction.max_context_tokens = window;
    // An archive to recall from: the village's 200-message transcript, imported ten times over.
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/transcript_200.jsonl"
    ))
    .unwrap();
    let lines: Vec<&str> = fixture.lines().collect();
    let history: String = (0..10)
        .flat_map(|_| lines.iter())
        .map(|l| format!("{l}\n"))
        .collect();
    let compactor = Compactor::new(store.clone(), Arc::clone(&llm));
    runtime
        .block_on(somna_runtime::import::import_jsonl(
            history.as_bytes(),
            &id,
            &config,
            &store,
            &compactor,
            Timestamp(1_780_000_000_000),
            |_, _| {},
        ))
        .unwrap();
    let deps = AgentDeps {
        store: store.clone(),
        compactor,
        llm,
        events: EventBus::default(),
        clock: Clock::real(),
        gauges: Default::default(),
        semantic: None,
    };
    let mut agent = Agent::load(config, deps).unwrap();
    // The user's side of the conversation: the fixture's user lines, round and round.
    let said: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["role"] == "user").then(|| v["content"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    for turn in 0..200 {
        agent
            .inbound(Inbound::User {
                content: said[turn % said.len()].clone(),
                name: Some("Mara".into()),
            })
            .unwrap();
        // Tick until the turn is answered (an emergency compaction may come first).
        for _ in 0..4 {
            let Some(job) = agent.tick().unwrap() else {
                break;
            };
            let kind = job.kind;
            let out = runtime.block_on(job.run());
            agent.finish(kind, &out);
            if out.replied {
                break;
            }
        }
    }
    let requests = recording.chats.lock().unwrap().clone();
    if let Some(dir) = std::env::var_os("SOMNA_PREFIX_DUMP") {
        dump(std::path::Path::new(&dir), window, &requests);
    }
    let counter = TokenCounter::for_model("gpt-4o");
    let mut new = Vec::new();
    let mut old = Vec::new();
    for pair in requests.windows(2) {
        let (a, b) = (&pair[0].messages, &pair[1].messages);
        // A compaction between two requests changes the summary in the leading system message.
        let compacted = a[0] != b[0];
        let (share, tokens) = measure(&chatml(a), &chatml(b), &counter);
        new.push(Turn {
            share,
            tokens,
            outside: outside(a, b),
            after_compaction: compacted,
        });
        let (oa, ob) = (old_layout(a), old_layout(b));
        let (share, tokens) = measure(&chatml(&oa), &chatml(&ob), &counter);
        old.push(Turn {
            share,
            tokens,
            outside: outside(&oa, &ob),
            after_compaction: compacted,
        });
    }
    (new, old)
}

/// Writes the requests in both layouts as JSON lines (see the module docs).
fn dump(dir: &std::path::Path, window: u32, requests: &[ChatRequest]) {
    use std::io::Write as _;
    std::fs::create_dir_all(dir).unwrap();
    let as_json = |messages: &[ChatMessage]| {
        serde_json::Value::Array(
            messages
                .iter()
                .map(|m| {
                    let mut v = serde_json::json!({"role": m.role.as_str(), "content": m.content});
                    if let Some(name) = &m.name {
                        v["name"] = name.clone().into();
                    }
                    v
                })
                .collect(),
        )
    };
    for (layout, old) in [("now", false), ("before", true)] {
        let path = dir.join(format!("{window}-{layout}.jsonl"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for r in requests {
            let messages = if old {
                old_layout(&r.messages)
            } else {
                r.messages.clone()
            };
            writeln!(f, "{}", as_json(&messages)).unwrap();
        }
        println!("wrote {} requests to {}", requests.len(), path.display());
    }
}

fn summarize(label: &str, turns: &[Turn]) {
    let steady: Vec<&Turn> = turns.iter().filter(|t| !t.after_compaction).collect();
    let across: Vec<&Turn> = turns.iter().filter(|t| t.after_compaction).collect();
    let mean = |ts: &[&Turn]| {
        if ts.is_empty() {
            f64::NAN
        } else {
            ts.iter().map(|t| t.share).sum::<f64>() / ts.len() as f64
        }
    };
    let min = steady.iter().map(|t| t.share).fold(f64::INFINITY, f64::min);
    let tokens = turns.iter().map(|t| t.tokens).sum::<u64>() / turns.len().max(1) as u64;
    let mut outside: Vec<(String, usize)> = Vec::new();
    for t in &steady {
        match outside.iter_mut().find(|(k, _)| *k == t.outside) {
            Some((_, n)) => *n += 1,
            None => outside.push((t.outside.clone(), 1)),
        }
    }
    outside.sort_by_key(|o| std::cmp::Reverse(o.1));
    let short = |kind: &str| {
        if kind.len() > 60 {
            format!("{}… ({} messages)", &kind[..40], kind.split(' ').count())
        } else {
            kind.to_string()
        }
    };
    println!(
        "| {label} | {} | {:.1}% | {:.1}% | {} | {:.1}% | {tokens} |",
        steady.len(),
        100.0 * mean(&steady),
        100.0 * min,
        across.len(),
        100.0 * mean(&across),
    );
    for (kind, n) in outside.iter().take(3) {
        println!(
            "|   outside the prefix: `{}` | {n} requests | | | | | |",
            short(kind)
        );
    }
}

fn main() {
    println!(
        "| layout | requests between compactions | mean shared prefix | min | requests after a compaction | mean shared prefix there | mean prompt tokens |"
    );
    println!("|---|---|---|---|---|---|---|");
    for window in [32_768u32, 4_096] {
        let (new, old) = run(window);
        summarize(&format!("{window} window, this layout"), &new);
        summarize(
            &format!("{window} window, note in the system message (before)"),
            &old,
        );
    }
}
