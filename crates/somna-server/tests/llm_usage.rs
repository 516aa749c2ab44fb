//! What a real OpenAI-compatible server reports and refuses, seen through the API: cached prompt
//! tokens in the agent's status, on `agent_replied` and in `/metrics`; the per-agent cache hint on
//! the wire; and a server that refuses `response_format`, whose summaries go out as plain text
//! from then on.

use std::time::Duration;

use serde_json::{Value, json};
use somna_testkit::{CacheReport, Reply, ResponseFormats, StubLlmServer};

use crate::support::{PATIENCE, TestServer, stub_llm};

/// One agent served by `stub`, compacting down to 4 kept messages.
fn config(stub: &StubLlmServer, cache_hint: &str) -> String {
    format!(
        r#"{}cache_hint = "{cache_hint}"

[defaults]
persona = "You are Wren, the steward of Millbrook."
tick_every = "20ms"

[defaults.compaction]
preserve_messages = 4
preserve_ratio = 0.0
min_compact_batch = 2

[[agents]]
id = "wren"
"#,
        stub_llm(stub)
    )
}

/// The value of the sample line that starts with `name` (labels included).
fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name} in\n{metrics}"))
}

/// `/metrics` once `check` holds for it (metrics of LLM calls are counted as the calls end).
async fn metrics_when(s: &TestServer, check: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let text = s.get("/metrics").await.text;
        if check(&text) || tokio::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn say(s: &TestServer, text: &str) {
    s.input(
        "wren",
        json!({"type": "user", "content": text, "name": "Tobias"}),
    )
    .await;
}

#[actix_rt::test]
async fn cached_tokens_reach_status_events_and_metrics() {
    let stub = StubLlmServer::start();
    stub.set_cache_report(CacheReport::CommonPrefix);
    stub.set_default(Reply::text("Good day to you, Tobias."));
    let config = config(&stub, "prompt_cache_key");
    let s = TestServer::start_served(&config, |_| {}).await;
    let mut replies = s.sse("/v1/events?agent=wren&types=agent_replied").await;

    say(&s, "Good morning! I bake bread by the mill.").await;
    let first = replies.next_event().await.unwrap();
    say(&s, "Do you need rye loaves for the festival?").await;
    let second = replies.next_event().await.unwrap();

    // Each reply carries its turn's usage; the second prompt extends the first, so the stub's
    // prefix cache served part of it.
    assert_eq!(first["usage"]["calls"], 1);
    assert_eq!(first["usage"]["cached_prompt_tokens"], 0);
    let (prompt, cached) = (
        second["usage"]["prompt_tokens"].as_u64().unwrap(),
        second["usage"]["cached_prompt_tokens"].as_u64().unwrap(),
    );
    assert!(cached > 0 && cached < prompt, "{second}");

    let status = s
        .wait_status("wren", |st| st["chat_usage"]["calls"] == 2)
        .await;
    let usage = &status["chat_usage"];
    assert_eq!(
        usage["prompt_tokens"].as_u64().unwrap(),
        first["usage"]["prompt_tokens"].as_u64().unwrap() + prompt
    );
    assert_eq!(usage["cached_prompt_tokens"].as_u64().unwrap(), cached);

    let metrics = metrics_when(&s, |m| {
        m.contains("somna_llm_requests_total{purpose=\"chat\",outcome=\"ok\"} 2\n")
    })
    .await;
    assert_eq!(
        sample(&metrics, "somna_llm_prompt_tokens_total{purpose=\"chat\"}"),
        usage["prompt_tokens"].as_f64().unwrap(),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "somna_llm_cached_prompt_tokens_total{purpose=\"chat\"}"
        ),
        cached as f64
    );
    // Completion tokens are the stub's count of the two replies.
    assert_eq!(
        sample(
            &metrics,
            "somna_llm_completion_tokens_total{purpose=\"chat\"}"
        ),
        f64::from(2 * stub.tokens_of("Good day to you, Tobias.")),
        "{metrics}"
    );

    // The chat turns carried the agent's stable cache key (the same both times, not its id).
    let keys: Vec<Value> = stub
        .requests()
        .iter()
        .filter(|r| r.is_chat())
        .map(|r| r.body["prompt_cache_key"].clone())
        .collect();
    assert_eq!(keys.len(), 2);
    assert!(keys[0].as_str().unwrap().starts_with("somna-"), "{keys:?}");
    assert_eq!(keys[0], keys[1]);
    s.stop().await;
}

#[actix_rt::test]
async fn no_cache_hint_unless_configured() {
    let stub = StubLlmServer::start();
    let config = config(&stub, "off");
    let s = TestServer::start_served(&config, |_| {}).await;
    let mut replies = s.sse("/v1/events?agent=wren&types=agent_replied").await;
    say(&s, "Good morning!").await;
    let reply = replies.next_event().await.unwrap();
    // The stub reports no cached tokens here: the count says so (null), it does not claim 0.
    assert_eq!(reply["usage"]["cached_prompt_tokens"], Value::Null);
    let body = stub.last_request().unwrap().body;
    for field in ["prompt_cache_key", "cache_prompt", "id_slot"] {
        assert!(body.get(field).is_none(), "{field} in {body}");
    }
    s.stop().await;
}

#[actix_rt::test]
async fn summaries_fall_back_to_plain_text_once_a_server_refuses_response_format() {
    let stub = StubLlmServer::start();
    stub.set_response_formats(ResponseFormats::Rejected);
    stub.set_default_fn(|req| {
        let system = req
            .messages()
            .first()
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        if system.contains("You keep the memory of a long conversation") {
            Reply::text("## Topic arc\n- Tobias and Wren talked about the rye harvest.\n## Decisions\n(none)")
        } else {
            Reply::text("Indeed, Tobias.")
        }
    });
    let config = config(&stub, "off");
    let s = TestServer::start_served(&config, |_| {}).await;
    let mut replies = s.sse("/v1/events?agent=wren&types=agent_replied").await;
    for round in 0..2 {
        for i in 0..4 {
            say(&s, &format!("Round {round}, line {i}: the rye harvest at the north field looks thin this year, and the miller wants his pay in silver.")).await;
            replies.next_event().await.unwrap();
        }
        let outcome = s.compact("wren").await;
        assert_eq!(outcome["outcome"], "done", "{outcome}");
        assert_eq!(outcome["method"], "llm", "{outcome}");
    }
    let summaries: Vec<Option<String>> = stub
        .requests()
        .iter()
        .filter(|r| {
            r.messages()
                .first()
                .is_some_and(|m| m["content"].to_string().contains("You keep the memory"))
        })
        .map(|r| r.response_format().map(str::to_string))
        .collect();
    // The first summary: refused as json_schema, then as json_object, then sent as plain text;
    // the second compaction's summary goes out plain at once.
    assert_eq!(
        summaries,
        [
            Some("json_schema".into()),
            Some("json_object".into()),
            None,
            None
        ]
    );
    let metrics = metrics_when(&s, |m| {
        m.contains("somna_llm_structured_output_fallbacks_total 2\n")
    })
    .await;
    assert!(
        metrics.contains("somna_llm_structured_output_fallbacks_total 2\n"),
        "{metrics}"
    );
    s.stop().await;
}
