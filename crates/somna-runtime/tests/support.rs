//! Shared fixtures: configs, a stub-backed LLM client, histories.

use std::sync::Arc;
use std::time::Duration;

use somna_core::config::{AgentConfig, LlmConfig, Provider};
use somna_core::message::{Message, ToolCall};
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Timestamp};
use somna_llm::{LlmClient, build_client};
use somna_store::Store;
use somna_testkit::StubLlmServer;

/// The model name tests use: unknown to tiktoken, so counts are the heuristic's.
pub const MODEL: &str = "stub-model";

pub fn id(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

/// An agent config with a small window so a few dozen messages fill it.
pub fn agent_config(agent: &str, max_context_tokens: u32) -> AgentConfig {
    let mut c = AgentConfig::with_builtin_defaults(id(agent));
    c.model = MODEL.into();
    c.compaction.compact_model = MODEL.into();
    c.compaction.max_context_tokens = max_context_tokens;
    c.compaction.preserve_messages = 6;
    c.compaction.preserve_ratio = 0.1;
    c.compaction.min_compact_batch = 4;
    c.compaction.summary_max_tokens = 300;
    c.compaction.sections = somna_core::config::SectionCaps {
        topic_arc: 80,
        decisions: 60,
        pending: 60,
        user_facts: 50,
        artifacts: 40,
    };
    c.compaction.summarizer_context_tokens = 8192;
    c
}

/// An OpenAI-compatible client pointed at `stub`, with no retries.
pub fn stub_client(stub: &StubLlmServer, timeout: Duration) -> Arc<dyn LlmClient> {
    let cfg = LlmConfig {
        provider: Provider::Openai,
        model: MODEL.into(),
        base_url: stub.base_url(),
        api_key_env: String::new(),
        timeout,
        max_retries: 0,
        max_concurrent: 4,
        ..LlmConfig::default()
    };
    build_client(&cfg, &|_| None).unwrap()
}

pub fn counter() -> TokenCounter {
    TokenCounter::for_model(MODEL)
}

/// A line of village talk that varies with `i` (names, numbers, decisions).
pub fn line(i: usize) -> String {
    const NAMES: [&str; 5] = ["Aldric", "Marta", "Brannoc", "Elowen", "Tobias"];
    const THINGS: [&str; 5] = ["sword", "horseshoe", "lantern", "plough", "kettle"];
    let name = NAMES[i % NAMES.len()];
    let thing = THINGS[(i / 5) % THINGS.len()];
    format!(
        "{name} asks about the {thing} for the mill near Millbrook; it costs {} silver and should be \
ready by day {}. We agreed to deliver it to the north gate, and {name} will pay half up front.",
        10 + i * 3,
        1 + i % 7
    )
}

/// Appends `n` alternating user/assistant messages with token counts; returns them as stored.
pub fn fill(store: &Store, agent: &AgentId, n: usize, start: Timestamp) -> Vec<Message> {
    let counter = counter();
    (0..n)
        .map(|i| {
            let mut m = if i % 2 == 0 {
                Message::user(line(i)).with_name("Aldric")
            } else {
                Message::assistant(format!("Noted: {}", line(i)))
            };
            m.created_at = Timestamp(start.0 + i as u64 * 1000);
            m.tokens = counter.count_message(&m);
            store.append(agent, m, start).unwrap()
        })
        .collect()
}

/// Appends a tool call with a large result.
pub fn tool_exchange(store: &Store, agent: &AgentId, call_id: &str, result_chars: usize) {
    let counter = counter();
    let mut call = Message::assistant_calls(
        "",
        vec![ToolCall {
            id: call_id.into(),
            name: "inventory".into(),
            arguments: "{}".into(),
        }],
    );
    call.tokens = counter.count_message(&call);
    store.append(agent, call, Timestamp(0)).unwrap();
    let mut result = Message::tool_result(call_id, "iron ingot x4; ".repeat(result_chars / 15 + 1));
    result.tokens = counter.count_message(&result);
    store.append(agent, result, Timestamp(0)).unwrap();
}

/// The whole live history as one comparable value.
pub fn snapshot(store: &Store, agent: &AgentId) -> Vec<Message> {
    store.history(agent).unwrap()
}

/// Asserts the store's invariants hold for `agent`.
pub fn assert_invariants(store: &Store, agent: &AgentId) {
    let report = store.check_invariants(agent).unwrap();
    assert!(report.is_ok(), "invariants broken: {report:?}");
}
