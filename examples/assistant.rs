//! A personal assistant with host tools, served by an OpenAI-compatible model.
//!
//! The assistant, Pim, may call two tools that the host program (this file) serves: `get_weather`
//! and `add_calendar_event`. The example talks to Pim, runs the tools it calls and hands the
//! results back, forces a compaction of the conversation, prints the summary, and asks one more
//! question whose answer is no longer verbatim in the history: what is left is the summary, plus
//! the memory and the archive excerpts that the runtime puts in the prompt's working context.
//!
//! ```text
//! cargo run --example assistant                 # offline: a local stub server plays the model
//! SOMNA_LLM_URL=http://127.0.0.1:8089/v1 SOMNA_LLM_MODEL=smollm2 cargo run --example assistant
//! ```
//!
//! With `SOMNA_LLM_URL` set, a real server answers (model `SOMNA_LLM_MODEL`, default `smollm2`; the
//! key, if the server needs one, in `SOMNA_LLM_API_KEY`). Without it,
//! `somna_testkit::StubLlmServer` answers over real HTTP, scripted to call the tools, and hands
//! summary requests to Somna's offline extractive summarizer.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;
use somna::core::AgentId;
use somna::core::config::ResolvedConfig;
use somna::llm::{BuiltinClient, ChatRequest, Purpose};
use somna::runtime::{CompactionOutcome, Event, Inbound, Runtime, RuntimeOptions, Stamped};
use somna::store::Store;
use somna_testkit::{RecordedRequest, Reply, StubLlmServer};
use tokio::sync::broadcast;

/// The assistant's config; the `[llm]` section comes from overrides in `main`.
const CONFIG: &str = r#"
[llm]
timeout = "120s"

[defaults]
tick_every = "50ms"
tool_timeout = "10s"

[defaults.compaction]
max_context_tokens = 4096
preserve_messages = 2      # keep only the last exchange verbatim, so the summary has work to do
preserve_ratio = 0.02
summary_max_tokens = 300
sections = { topic_arc = 80, decisions = 50, pending = 60, user_facts = 60, artifacts = 50 }

[[agents]]
id = "pim"
persona = "You are Pim, Sam's personal assistant. Answer in one or two sentences. Use get_weather for questions about the weather and add_calendar_event to put appointments in Sam's calendar."

[[agents.tools]]
name = "get_weather"
description = "The weather forecast for a city."
parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }

[[agents.tools]]
name = "add_calendar_event"
description = "Add an event to Sam's calendar."
parameters = { type = "object", properties = { title = { type = "string" }, date = { type = "string", description = "YYYY-MM-DD" }, time = { type = "string", description = "HH:MM" } }, required = ["title", "date"] }
"#;

/// What Sam says to Pim, in order.
const CONVERSATION: &[&str] = &[
    "Hi Pim! I'm flying to Lisbon on Friday for the Systems Summit.",
    "What will the weather be like in Lisbon?",
    "Please add my dentist appointment to my calendar: Tuesday 9 June at 15:30.",
    "And put the summit keynote in my calendar too: Friday 12 June at 09:00.",
    "My sister Ana's birthday is on 20 June; she loves orchids.",
    "What's in my calendar so far?",
];

/// Asked after the compaction, when the original turns are archived.
const AFTERWARDS: &str = "When is my dentist appointment?";

/// How long to wait for a reply (a small local model on a slow machine can take a while).
const REPLY_TIMEOUT: Duration = Duration::from_secs(180);

fn main() -> Result<()> {
    // A real server if SOMNA_LLM_URL names one; else the scripted stub, alive until the end.
    let (_stub, base_url, model) = match std::env::var("SOMNA_LLM_URL") {
        Ok(url) => {
            let model = std::env::var("SOMNA_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
            (None, url, model)
        }
        Err(_) => {
            let stub = StubLlmServer::try_start()?;
            stub.set_model("scripted-stub")
                .set_default_fn(scripted_model);
            let url = stub.base_url();
            (Some(stub), url, "scripted-stub".to_string())
        }
    };
    // The server is chosen by overrides over the config, like `somna --set llm.base_url=…`.
    let mut overrides = vec![
        "llm.provider=openai".to_string(),
        format!("llm.base_url={base_url}"),
        format!("llm.model={model}"),
    ];
    if std::env::var_os("SOMNA_LLM_API_KEY").is_some() {
        overrides.push("llm.api_key_env=SOMNA_LLM_API_KEY".into());
    }
    let config = ResolvedConfig::load(CONFIG, "assistant.toml", &overrides)?;
    println!("model: {model} at {base_url}\n");
    actix::System::new().block_on(assistant(config))
}

async fn assistant(config: ResolvedConfig) -> Result<()> {
    let llm = somna::llm::build_client_from_env(&config.llm)?;
    let options = RuntimeOptions {
        schedule_sleeps: false,
        semantic: somna::Semantic::from_config(&config.embedder)?,
        ..Default::default()
    };
    let runtime = Runtime::start(config, Store::temporary()?, llm, options)?;
    let mut events = runtime.subscribe();
    let pim = AgentId::new("pim")?;
    // The host's state: Sam's calendar, which `add_calendar_event` writes to.
    let mut calendar: Vec<String> = Vec::new();

    for line in CONVERSATION {
        turn(&runtime, &mut events, &mut calendar, &pim, line).await?;
    }

    // Fold the conversation into a summary now, whatever the thresholds say.
    let outcome = compact_now(&runtime, &pim).await?;
    match outcome.report() {
        Some(r) => println!(
            "\n✂ compaction: {} messages → summary, {} → {} tokens ({:.0}% reduction), {} kept verbatim",
            r.compacted, r.tokens_before, r.tokens_after, r.reduction_pct, r.preserved
        ),
        None => println!("\ncompaction did not happen: {outcome:?}"),
    }
    let history = runtime.store().history(&pim)?;
    if let Some(summary) = history.iter().find(|m| m.summary().is_some()) {
        println!("\n{}\n", summary.content);
    }

    turn(&runtime, &mut events, &mut calendar, &pim, AFTERWARDS).await?;
    runtime.shutdown(Duration::from_secs(5)).await?;
    println!("\nSam's calendar: {calendar:?}");
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

/// Sends one line from Sam and handles events until Pim replies, serving the tools it calls.
async fn turn(
    runtime: &Runtime,
    events: &mut broadcast::Receiver<Stamped>,
    calendar: &mut Vec<String>,
    pim: &AgentId,
    line: &str,
) -> Result<()> {
    println!("Sam: {line}");
    let input = Inbound::User {
        content: line.to_string(),
        name: Some("Sam".into()),
    };
    runtime.send(pim, input).await?;
    loop {
        let received = tokio::time::timeout(REPLY_TIMEOUT, events.recv())
            .await
            .context("no reply in time")?;
        let event = match received {
            Ok(stamped) => stamped.event,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(e) => bail!("the event stream ended: {e}"),
        };
        match event {
            Event::AgentReplied { text, .. } => {
                println!("Pim: {text}");
                return Ok(());
            }
            Event::ToolCallRequested {
                call_id,
                name,
                arguments,
                ..
            } => {
                let result = serve_tool(calendar, &name, &arguments);
                println!("  ⚙ {name}({arguments}) → {result}");
                let answer = Inbound::ToolResult {
                    call_id,
                    content: result,
                };
                runtime.send(pim, answer).await?;
            }
            // A failed LLM call is retried by the agent with backoff; show it and keep waiting.
            Event::Error { message, .. } => println!("  (error: {message})"),
            _ => {}
        }
    }
}

/// The host's tools. A real host would call a weather service and a calendar API here.
fn serve_tool(calendar: &mut Vec<String>, name: &str, arguments: &str) -> String {
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let field = |key: &str| args[key].as_str().unwrap_or("").to_string();
    match name {
        "get_weather" => format!(
            "{}: sunny on Friday, 17 to 26 °C, light wind from the north-west",
            field("city")
        ),
        "add_calendar_event" => {
            let event = format!("{} on {} {}", field("title"), field("date"), field("time"));
            calendar.push(event.trim().to_string());
            format!("added event #{}: {}", calendar.len(), event.trim())
        }
        _ => format!("error: there is no tool named {name}"),
    }
}

/// The offline stand-in for a model, answering each request the stub server receives. It calls a
/// tool when Sam asks for something a tool does, words a reply from a tool's result, answers
/// questions from what its prompt holds (summary and working context included), and hands summary
/// requests to Somna's builtin extractive summarizer.
fn scripted_model(request: &RecordedRequest) -> Reply {
    let messages = request.messages();
    let Some(last) = messages.last() else {
        return Reply::text("Hello!");
    };
    let said = last["content"].as_str().unwrap_or("");
    if request.body["tools"].is_null() {
        // Only chat turns offer tools: this is the compactor asking for a summary.
        return summarize(request);
    }
    let call_id = format!("call_{}", messages.len());
    let lower = said.to_lowercase();
    match last["role"].as_str() {
        Some("tool") if said.starts_with("added") => Reply::text(format!("Done: {said}.")),
        Some("tool") => Reply::text(format!("The forecast for {said}.")),
        _ if lower.contains("weather") => {
            Reply::tool_call(&call_id, "get_weather", &json!({ "city": "Lisbon" }))
        }
        _ if lower.contains("dentist") && !said.ends_with('?') => Reply::tool_call(
            &call_id,
            "add_calendar_event",
            &json!({ "title": "Dentist", "date": "2026-06-09", "time": "15:30" }),
        ),
        _ if lower.contains("keynote") => Reply::tool_call(
            &call_id,
            "add_calendar_event",
            &json!({ "title": "Systems Summit keynote", "date": "2026-06-12", "time": "09:00" }),
        ),
        _ if lower.contains("calendar") && said.ends_with('?') => {
            let events: Vec<&str> = (messages.iter())
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["content"].as_str()?.strip_prefix("added "))
                .collect();
            Reply::text(format!("Your calendar: {}.", events.join("; ")))
        }
        _ if said.ends_with('?') => Reply::text(answer_from_prompt(said, messages)),
        _ => Reply::text("Got it, I'll keep that in mind."),
    }
}

/// The sentence of the prompt that shares the most words with the question.
fn answer_from_prompt(question: &str, messages: &[serde_json::Value]) -> String {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 4)
            .map(str::to_lowercase)
            .collect()
    };
    let asked = words(question);
    let earlier = &messages[..messages.len().saturating_sub(1)];
    let best = earlier
        .iter()
        .filter_map(|m| m["content"].as_str())
        .flat_map(|text| text.split(['\n', '.', ';']))
        .filter(|sentence| !sentence.trim_end().ends_with('?'))
        .map(|sentence| {
            let overlap = words(sentence).iter().filter(|w| asked.contains(w)).count();
            // Drop list marks and the `[#6 user (Sam)]` tags of archived excerpts.
            let sentence = sentence.trim().trim_start_matches("- ");
            let sentence = match sentence.strip_prefix('[') {
                Some(rest) => rest.split_once("] ").map_or(sentence, |(_, text)| text),
                None => sentence,
            };
            (overlap, sentence)
        })
        .filter(|(overlap, _)| *overlap > 0)
        .max_by_key(|(overlap, _)| *overlap);
    match best {
        Some((_, sentence)) => format!("From my notes: {sentence}."),
        None => "I don't know yet.".to_string(),
    }
}

/// A summary request, answered by the offline extractive summarizer.
fn summarize(request: &RecordedRequest) -> Reply {
    match serde_json::from_value::<ChatRequest>(request.body.clone()) {
        Ok(mut chat) => {
            chat.purpose = Purpose::Summarize;
            Reply::text(BuiltinClient::new().respond(&chat).text)
        }
        Err(e) => Reply::Status(400, format!("unreadable request: {e}")),
    }
}
