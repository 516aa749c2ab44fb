//! Embedding Somna in a host program: the "game server" view.
//!
//! The game owns the world (inventories, players); Somna owns the NPCs' minds. This example builds
//! a runtime from an inline config (two NPCs, one host tool), sends player input, prints the
//! replies as they arrive, answers the blacksmith's `give_item` calls from the game's inventory,
//! forces a compaction, reads the summary back from the journal, and shuts down. It runs offline,
//! in a second or two:
//!
//! ```text
//! cargo run --example embed
//! ```

#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
// The host needs only the facade's top-level names; the request/response types of the LLM boundary
// (for the model wrapper below) come from the `llm` module.
use somna::llm::{ChatRequest, ChatResponse};
use somna::{
    AgentId, BuiltinClient, CompactionOutcome, Event, Inbound, JournalQuery, LlmClient, LlmError,
    ResolvedConfig, Role, Runtime, RuntimeOptions, Semantic, SourceType, Stamped, Store, ToolCall,
};
use tokio::sync::broadcast;

/// The runtime's config, as the game would ship it. Real agents tick every second and sleep every
/// few hours; here they tick every 20 ms and the scheduler is off (see `RuntimeOptions` below).
const CONFIG: &str = r#"
[llm]
provider = "builtin"            # offline and deterministic; "openai" + base_url for a real model

[defaults]
tick_every = "20ms"
tool_timeout = "5s"             # how long an NPC waits for the game to answer a tool call

[defaults.compaction]
max_context_tokens = 2048
preserve_messages = 4           # keep the last 4 messages verbatim…
preserve_ratio = 0.05           # …or the last 5% of the window, whichever holds more
summary_max_tokens = 400
sections = { topic_arc = 120, decisions = 70, pending = 70, user_facts = 70, artifacts = 70 }

[[agents]]
id = "blacksmith"
persona = "You are Brenna Holt, Emberfield's blacksmith. You are gruff but fair, and you remember who owes you money."

[[agents.tools]]
name = "give_item"
description = "Hand an item from your stock to the person you are talking to."
parameters = { type = "object", properties = { item = { type = "string" }, to = { type = "string" } }, required = ["item", "to"] }

[[agents]]
id = "guard"
persona = "You are Sergeant Ilse Varga of the village watch. You are watchful and terse."
"#;

/// What the players say, in order: (agent, player, line).
#[rustfmt::skip]
const SCRIPT: &[(&str, &str, &str)] = &[
    ("blacksmith", "Aldric", "Good morning, Brenna! I'm Aldric, the farmer from the north fields."),
    ("blacksmith", "Aldric", "My plough share cracked on a stone. Forge me a new one and I will pay you forty silver on Friday."),
    ("guard", "Tobias", "Sergeant, I saw wolf tracks by the mill this morning, five sets at least."),
    ("blacksmith", "Aldric", "Wolves by the mill, they say. Hand me the iron dagger, please, just in case."),
    ("guard", "Tobias", "Will you put a watchman at the mill tonight?"),
    ("blacksmith", "Aldric", "My daughter Lise is getting married to Bram Cooper on the twenty-seventh of June."),
    ("blacksmith", "Aldric", "We agreed that the candlesticks for her wedding cost twelve silver, paid when they are done."),
    ("blacksmith", "Aldric", "Can you find out who has been buying rope at the market? Someone cut my paddock gate."),
];

fn main() -> Result<()> {
    // Agents are actix actors: the runtime must start inside an actix System.
    actix::System::new().block_on(host())
}

async fn host() -> Result<()> {
    let config = ResolvedConfig::load(CONFIG, "embed.toml", &[])?;
    let store = Store::temporary()?;
    let llm: Arc<dyn LlmClient> = Arc::new(Shopkeeper::default());
    let options = RuntimeOptions {
        schedule_sleeps: false, // this short run sleeps and compacts only when we ask
        // Retrieval by meaning as well as words: the embedder `[embedder]` asks for (the
        // builtin one, compiled in, unless the config says otherwise).
        semantic: Semantic::from_config(&config.embedder)?,
        ..Default::default()
    };
    let runtime = Runtime::start(config, store, llm, options)?;
    let mut events = runtime.subscribe();
    println!("hosting {:?}\n", runtime.agent_ids());

    // The game's own state: the smith's stock, which `give_item` draws from.
    let mut stock: HashMap<String, u32> = HashMap::from([("iron dagger".into(), 2)]);

    // Something happens in the world: every NPC sees it; no reply is owed.
    for id in runtime.agent_ids() {
        let seen = "The morning bell rings over Emberfield.".to_string();
        runtime
            .send(&id, Inbound::Observation { content: seen })
            .await?;
    }

    for (agent, player, line) in SCRIPT {
        talk(&runtime, &mut events, &mut stock, agent, player, line).await?;
    }

    // Force a compaction of the blacksmith (a manual one ignores the thresholds).
    let smith = AgentId::new("blacksmith")?;
    let outcome = compact_now(&runtime, &smith).await?;
    println!(
        "\ncompaction outcome:\n{}",
        serde_json::to_string_pretty(&outcome)?
    );

    // The summary is also in the journal, as the synthesis entry of that compaction.
    let synthesis = JournalQuery {
        source_type: Some(SourceType::Compaction),
        tags: vec!["synthesis".into()],
        ..Default::default()
    };
    for entry in runtime.store().query_journal(&smith, &synthesis)? {
        println!(
            "\nsynthesis entry #{} (importance {}, covers messages {:?}):\n{}",
            entry.id, entry.importance, entry.covers, entry.content
        );
    }
    let status = runtime.status(&smith).await?;
    println!(
        "\nblacksmith now: {} messages in history (the summary first), {} archived\n",
        status.history_len, status.archive_len
    );

    // The promise is no longer verbatim in the history, but the summary still carries it.
    let q = "When did I promise to pay you the forty silver?";
    talk(&runtime, &mut events, &mut stock, "blacksmith", "Aldric", q).await?;

    runtime.shutdown(Duration::from_secs(5)).await?;
    let left = stock.get("iron dagger").copied().unwrap_or(0);
    println!("\nshut down; iron daggers left in the smith's stock: {left}");
    Ok(())
}

/// Forces a compaction. Right after a reply the agent may still be finishing its step (`Busy`), so
/// this tries again a few times.
async fn compact_now(runtime: &Runtime, id: &AgentId) -> Result<CompactionOutcome> {
    for _ in 0..50 {
        match runtime.compact(id, true).await? {
            CompactionOutcome::Busy => tokio::time::sleep(Duration::from_millis(20)).await,
            outcome => return Ok(outcome),
        }
    }
    bail!("{id} stayed busy")
}

/// Sends one line to an NPC and handles events until it replies, answering its tool calls.
async fn talk(
    runtime: &Runtime,
    events: &mut broadcast::Receiver<Stamped>,
    stock: &mut HashMap<String, u32>,
    agent: &str,
    player: &str,
    line: &str,
) -> Result<()> {
    let id = AgentId::new(agent)?;
    println!("{player} → {agent}: {line}");
    let input = Inbound::User {
        content: line.to_string(),
        name: Some(player.to_string()),
    };
    runtime.send(&id, input).await?;
    loop {
        let event = next_event(events).await?;
        match event {
            Event::AgentReplied { agent, text, .. } if agent == id => {
                println!("{agent}: {text}");
                return Ok(());
            }
            Event::ToolCallRequested {
                agent,
                call_id,
                name,
                arguments,
            } => {
                // The game runs the tool and hands the result back to the agent that asked.
                let result = run_tool(stock, &name, &arguments);
                println!("  [game] {agent} calls {name}({arguments}) → {result}");
                let answer = Inbound::ToolResult {
                    call_id,
                    content: result,
                };
                runtime.send(&agent, answer).await?;
            }
            Event::Error { agent, message } => bail!("{agent}: {message}"),
            _ => {}
        }
    }
}

/// The next runtime event, waiting at most five seconds.
async fn next_event(events: &mut broadcast::Receiver<Stamped>) -> Result<Event> {
    loop {
        let received = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .context("no event from the runtime for 5 s")?;
        match received {
            Ok(stamped) => return Ok(stamped.event),
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(e) => bail!("the event stream ended: {e}"),
        }
    }
}

/// The game's side of the host tools: `give_item` takes the item out of the smith's stock.
fn run_tool(stock: &mut HashMap<String, u32>, name: &str, arguments: &str) -> String {
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let item = args["item"].as_str().unwrap_or("");
    let to = args["to"].as_str().unwrap_or("someone");
    match (name, stock.get_mut(item)) {
        ("give_item", Some(n)) if *n > 0 => {
            *n -= 1;
            format!("handed one {item} to {to}; {n} left in stock")
        }
        ("give_item", _) => format!("there is no {item} in stock"),
        _ => format!("unknown tool {name}"),
    }
}

/// The builtin brain is offline and never calls host tools, so this demo puts one scripted rule in
/// front of it: "hand me the X" becomes a `give_item` call. A real model decides that by itself
/// from the tool's description; everything else (replies, summaries) is the builtin provider's.
#[derive(Debug, Default)]
struct Shopkeeper(BuiltinClient);

impl LlmClient for Shopkeeper {
    fn chat(
        &self,
        request: ChatRequest,
    ) -> Pin<Box<dyn Future<Output = Result<ChatResponse, LlmError>> + Send + '_>> {
        let last = request.messages.last().filter(|m| m.role == Role::User);
        let wanted = last.and_then(|m| {
            let (_, rest) = m.content.split_once("Hand me the ")?;
            let item = rest.split([',', '.']).next()?.trim().to_string();
            Some((item, m.name.clone().unwrap_or_default()))
        });
        match wanted {
            Some((item, to)) if request.offers_tool("give_item") => {
                let call = ToolCall {
                    id: format!("call_give_{}", request.messages.len()),
                    name: "give_item".into(),
                    arguments: serde_json::json!({ "item": item, "to": to }).to_string(),
                };
                let response = ChatResponse {
                    text: String::new(),
                    tool_calls: vec![call],
                    usage: None,
                    latency: Duration::ZERO,
                    attempts: 1,
                    model: request.model,
                    structured_fallbacks: 0,
                };
                Box::pin(async move { Ok(response) })
            }
            _ => self.0.chat(request),
        }
    }

    fn provider(&self) -> &str {
        "builtin"
    }
}
