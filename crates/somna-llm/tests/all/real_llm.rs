//! Opt-in tests against a real OpenAI-compatible server (e.g. SmolLM2 served by llama.cpp, see
//! docs/llm.md). Skipped with a note unless SOMNA_REAL_LLM=1. The server: SOMNA_REAL_LLM_URL (default
//! http://127.0.0.1:8089/v1); the model: SOMNA_REAL_LLM_MODEL (default smollm2).

use std::time::{Duration, Instant};

use somna_core::config::{CacheHint, StructuredOutput};
use somna_llm::{
    ChatMessage, ChatRequest, LlmClient, OpenAiClient, OpenAiSettings, RetryPolicy, prompts,
};
use somna_testkit::transcript_200;
use somna_text::extractive::StructuredSummary;

fn real() -> Option<(OpenAiClient, String)> {
    let (base_url, model) = somna_testkit::real_llm()?;
    let settings = OpenAiSettings {
        base_url,
        timeout: Duration::from_secs(180),
        connect_timeout: Duration::from_secs(5),
        retry: RetryPolicy::with_max_retries(1),
        max_concurrent: 1,
        structured_output: StructuredOutput::Auto,
        cache_hint: CacheHint::Off,
        cache_slots: 0,
    };
    Some((OpenAiClient::new(settings, None).unwrap(), model))
}

#[tokio::test]
async fn real_chat_turn() {
    let Some((client, model)) = real() else {
        return;
    };
    let request = ChatRequest::new(
        model,
        vec![
            ChatMessage::system("You are Wren, the steward of the village of Millbrook. Answer in one or two sentences."),
            ChatMessage::user("Good morning! I'm Mara, the new baker. Who are you, and what do you do here?")
                .with_name("Mara"),
        ],
    )
    .with_max_tokens(80)
    .with_temperature(0.2);
    let started = Instant::now();
    let response = client.chat(request).await.unwrap();
    println!(
        "chat ({:?}, {} attempt(s), usage {:?}):\n{}",
        started.elapsed(),
        response.attempts,
        response.usage,
        response.text
    );
    assert!(!response.text.trim().is_empty());
    let usage = response.usage.expect("the server reports usage");
    assert!(usage.prompt_tokens > 0);
}

#[tokio::test]
async fn real_summary_request() {
    let Some((client, model)) = real() else {
        return;
    };
    let messages = transcript_200().unwrap();
    let cfg = somna_core::config::CompactionConfig {
        summary_max_tokens: 400,
        ..Default::default()
    };
    let request = prompts::summary_request(&model, &cfg, &messages[..16]);
    let started = Instant::now();
    let response = client.chat(request).await.unwrap();
    let parsed = StructuredSummary::parse(&response.text);
    println!(
        "summary ({:?}, {} attempt(s), usage {:?}, sections found: {}):\n{}",
        started.elapsed(),
        response.attempts,
        response.usage,
        [
            &parsed.topic_arc,
            &parsed.decisions,
            &parsed.pending,
            &parsed.user_facts,
            &parsed.artifacts
        ]
        .iter()
        .filter(|s| !s.is_empty())
        .count(),
        response.text
    );
    assert!(!response.text.trim().is_empty());
    let usage = response.usage.expect("the server reports usage");
    assert!(usage.prompt_tokens > 0);
}
