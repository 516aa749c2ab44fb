//! What the OpenAI client adds to the wire beyond the chat itself, against the stub server:
//! structured output (`response_format`) and its fallback when a server rejects it, the per-agent
//! cache hint, and the cached prompt tokens a server reports.

use std::time::Duration;

use serde_json::json;
use somna_core::config::{CacheHint, StructuredOutput};
use somna_llm::{ChatMessage, ChatRequest, LlmClient, LlmError, OpenAiClient, OpenAiSettings};
use somna_testkit::{CacheReport, Reply, ResponseFormats, StubLlmServer};

fn client(
    server: &StubLlmServer,
    structured_output: StructuredOutput,
    cache_hint: CacheHint,
) -> OpenAiClient {
    let mut settings = OpenAiSettings::from_config(&somna_core::config::LlmConfig {
        base_url: server.base_url(),
        max_retries: 2,
        structured_output,
        cache_hint,
        cache_slots: if cache_hint == CacheHint::LlamaCpp {
            4
        } else {
            0
        },
        ..somna_core::config::LlmConfig::default()
    });
    settings.timeout = Duration::from_secs(5);
    settings.retry.base_delay = Duration::from_millis(5);
    OpenAiClient::new(settings, None).unwrap()
}

/// A request with a structured form, like a summary request.
fn structured() -> ChatRequest {
    ChatRequest::new("m", vec![ChatMessage::user("Write text.")]).with_structured(
        "notes",
        json!({"type": "object", "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
               "required": ["notes"], "additionalProperties": false}),
        vec![ChatMessage::user("Write JSON.")],
    )
}

#[tokio::test]
async fn auto_sends_json_schema_to_a_server_that_takes_it() {
    let server = StubLlmServer::answering(Reply::text(r#"{"notes": ["a"]}"#));
    let c = client(&server, StructuredOutput::Auto, CacheHint::Off);
    let r = c.chat(structured()).await.unwrap();
    assert_eq!(r.structured_fallbacks, 0);
    let sent = server.last_request().unwrap();
    assert_eq!(sent.response_format(), Some("json_schema"));
    assert_eq!(sent.body["response_format"]["json_schema"]["name"], "notes");
    assert_eq!(sent.last_content("user").as_deref(), Some("Write JSON."));
    // A request without a structured form never carries one.
    c.chat(ChatRequest::new("m", vec![ChatMessage::user("hi")]))
        .await
        .unwrap();
    assert_eq!(server.last_request().unwrap().response_format(), None);
}

#[tokio::test]
async fn a_server_that_rejects_response_format_gets_plain_text_once_and_for_all() {
    let server = StubLlmServer::start();
    server.set_response_formats(ResponseFormats::Rejected);
    server.set_default(Reply::text("## Notes\n- a"));
    let c = client(&server, StructuredOutput::Auto, CacheHint::Off);
    let first = c.chat(structured()).await.unwrap();
    // json_schema refused (400), json_object refused (400), then plain text: no backoff retries
    // of a refused format, and the answer says how many steps down it took.
    let formats: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.response_format().map(str::to_string))
        .collect();
    assert_eq!(
        formats,
        [Some("json_schema".into()), Some("json_object".into()), None]
    );
    assert_eq!(first.structured_fallbacks, 2);
    assert_eq!(first.text, "## Notes\n- a");
    assert_eq!(
        server
            .last_request()
            .unwrap()
            .last_content("user")
            .as_deref(),
        Some("Write text.")
    );
    // Remembered, also by a clone: the next request goes out plain at once.
    let clone = c.clone();
    let second = clone.chat(structured()).await.unwrap();
    assert_eq!(server.request_count(), 4);
    assert_eq!(server.last_request().unwrap().response_format(), None);
    assert_eq!(second.structured_fallbacks, 0);
}

#[tokio::test]
async fn llama_cpp_python_gets_json_object_with_the_schema() {
    let server = StubLlmServer::start();
    server.set_response_formats(ResponseFormats::LlamaCppPython);
    server.set_default(Reply::text(r#"{"notes": ["a"]}"#));
    let c = client(&server, StructuredOutput::Auto, CacheHint::Off);
    let first = c.chat(structured()).await.unwrap();
    assert_eq!(first.structured_fallbacks, 1);
    assert_eq!(server.request_count(), 2);
    let sent = server.last_request().unwrap();
    assert_eq!(sent.response_format(), Some("json_object"));
    assert_eq!(
        sent.body["response_format"]["schema"]["required"],
        json!(["notes"])
    );
    c.chat(structured()).await.unwrap();
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        server.last_request().unwrap().response_format(),
        Some("json_object")
    );
}

#[tokio::test]
async fn a_pinned_format_that_is_rejected_fails_without_retrying() {
    let server = StubLlmServer::start();
    server.set_response_formats(ResponseFormats::LlamaCppPython);
    let c = client(&server, StructuredOutput::JsonSchema, CacheHint::Off);
    let err = c.chat(structured()).await.unwrap_err();
    // A 500 is normally retried; one that names response_format cannot succeed on a retry.
    assert!(
        matches!(
            &err,
            LlmError::Server {
                status: 500,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 1);
    // Off sends the plain form to the same server.
    let off = client(&server, StructuredOutput::Off, CacheHint::Off);
    off.chat(structured()).await.unwrap();
    assert_eq!(server.last_request().unwrap().response_format(), None);
}

#[tokio::test]
async fn cache_hints_appear_in_the_body_only_when_configured() {
    let server = StubLlmServer::start();
    let keyed = || ChatRequest::new("m", vec![ChatMessage::user("hi")]).with_cache_key("wren");
    for (hint, present, absent) in [
        (
            CacheHint::Off,
            vec![],
            vec!["prompt_cache_key", "cache_prompt", "id_slot"],
        ),
        (
            CacheHint::PromptCacheKey,
            vec!["prompt_cache_key"],
            vec!["cache_prompt", "id_slot"],
        ),
        (
            CacheHint::LlamaCpp,
            vec!["cache_prompt", "id_slot"],
            vec!["prompt_cache_key"],
        ),
    ] {
        client(&server, StructuredOutput::Auto, hint)
            .chat(keyed())
            .await
            .unwrap();
        let body = server.last_request().unwrap().body;
        for field in present {
            assert!(body.get(field).is_some(), "{hint:?}: no {field} in {body}");
        }
        for field in absent {
            assert!(body.get(field).is_none(), "{hint:?}: {field} in {body}");
        }
    }
    let body = server.last_request().unwrap().body;
    assert_eq!(body["cache_prompt"], true);
    assert!(body["id_slot"].as_u64().unwrap() < 4);
}

#[tokio::test]
async fn cached_prompt_tokens_are_read_when_reported() {
    let server = StubLlmServer::start();
    let c = client(&server, StructuredOutput::Auto, CacheHint::Off);
    let hi = || ChatRequest::new("m", vec![ChatMessage::user("a long enough prompt")]);
    let usage = c.chat(hi()).await.unwrap().usage.unwrap();
    assert_eq!(usage.cached_tokens, None);
    server.set_cache_report(CacheReport::CommonPrefix);
    c.chat(hi()).await.unwrap();
    let usage = c.chat(hi()).await.unwrap().usage.unwrap();
    assert_eq!(usage.cached_tokens, Some(usage.prompt_tokens));
    assert!(usage.prompt_tokens > 0);
}
