//! What `/metrics` says of the runtime, through a real server: agents by state add up to the agents
//! hosted, an agent that compacts moves to a lower usage bucket, completion tokens are the stub
//! server's, and the tick lateness histogram counts the ticks.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use somna_runtime::AgentState;
use somna_runtime::gauges::{USAGE_BUCKETS, usage_bucket};
use somna_testkit::StubLlmServer;

use crate::support::{PATIENCE, TestServer, stub_llm, summarizing_stub};

const REPLY: &str = "Good day to you, Tobias.";

/// Two agents, `wren` and `ash`, over `stub`, in a 2048-token window.
fn config(stub: &StubLlmServer) -> String {
    format!(
        r#"{}
[defaults]
persona = "You are Wren, the steward of Millbrook."
tick_every = "20ms"
sleep_every = "1h"

[defaults.compaction]
max_context_tokens = 2048
preserve_messages = 4
preserve_ratio = 0.0
min_compact_batch = 2

[[agents]]
id = "wren"

[[agents]]
id = "ash"
"#,
        stub_llm(stub)
    )
}

/// The samples of `/metrics`, by their line's name and labels (`name{a="x"}`).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap();
            (name.to_string(), value.parse().unwrap())
        })
        .collect()
}

fn get(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("no sample {name} in {samples:#?}"))
}

/// The agents in the usage bucket of `usage`, from the cumulative `somna_agent_usage_bucket`s.
fn agents_in_bucket_of(samples: &BTreeMap<String, f64>, usage: f64) -> f64 {
    let le = |i: usize| match USAGE_BUCKETS.get(i) {
        Some(b) => get(samples, &format!("somna_agent_usage_bucket{{le=\"{b}\"}}")),
        None => get(samples, "somna_agent_usage_bucket{le=\"+Inf\"}"),
    };
    let i = usage_bucket(usage);
    le(i) - if i == 0 { 0.0 } else { le(i - 1) }
}

/// Agents by state, and checks that they add up to `somna_agents` and the usage count.
fn by_state(samples: &BTreeMap<String, f64>) -> BTreeMap<&'static str, f64> {
    let states: BTreeMap<&'static str, f64> = AgentState::ALL
        .iter()
        .map(|s| {
            let name = format!("somna_agents_by_state{{state=\"{s}\"}}");
            (s.as_str(), get(samples, &name))
        })
        .collect();
    let agents = get(samples, "somna_agents");
    assert_eq!(states.values().sum::<f64>(), agents, "{states:?}");
    assert_eq!(get(samples, "somna_agent_usage_count"), agents);
    assert_eq!(
        get(samples, "somna_agent_usage_bucket{le=\"+Inf\"}"),
        agents
    );
    states
}

/// `/metrics` once `check` holds for its samples (LLM calls are counted as they end, ticks as
/// they fire).
async fn metrics_when(
    s: &TestServer,
    check: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    let answer = somna_testkit::poll_until(
        PATIENCE,
        Duration::from_millis(20),
        move || async move {
            let answer = s.get("/metrics").await;
            assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
            answer
        },
        |answer| check(&samples(&answer.text)),
        |answer| format!("/metrics never matched:\n{}", answer.text),
    )
    .await;
    samples(&answer.text)
}

#[actix_rt::test]
async fn runtime_gauges_and_completion_tokens_reach_metrics() {
    let stub = summarizing_stub(REPLY);
    let s = TestServer::start_served(&config(&stub), |_| {}).await;

    let m = metrics_when(&s, |m| get(m, "somna_agents") == 2.0).await;
    assert_eq!(by_state(&m)["idle"], 2.0);

    let mut replies = s.sse("/v1/events?agent=wren&types=agent_replied").await;
    for line in 0..8 {
        s.input(
            "wren",
            json!({"type": "user", "name": "Tobias", "content": format!("Line {line}: the rye at the north field looks thin this year, and the miller wants his pay in silver before the frost.")}),
        )
        .await;
        replies.next_event().await.expect("the stream ended");
    }
    let before = s.wait_status("wren", |st| st["state"] == "idle").await["usage"]
        .as_f64()
        .unwrap();

    // Completion tokens are what the stub reported: the same reply eight times.
    let expected = 8.0 * f64::from(stub.tokens_of(REPLY));
    let m = metrics_when(&s, |m| {
        get(
            m,
            "somna_llm_requests_total{purpose=\"chat\",outcome=\"ok\"}",
        ) == 8.0
    })
    .await;
    assert_eq!(
        get(&m, "somna_llm_completion_tokens_total{purpose=\"chat\"}"),
        expected
    );
    assert_eq!(agents_in_bucket_of(&m, before), 1.0, "wren at {before}");
    by_state(&m);

    // A compaction moves wren to a lower bucket.
    let outcome = s.compact("wren").await;
    assert_eq!(outcome["outcome"], "done", "{outcome}");
    let after = s.wait_status("wren", |st| st["state"] == "idle").await["usage"]
        .as_f64()
        .unwrap();
    assert!(
        usage_bucket(after) < usage_bucket(before),
        "{before} → {after}"
    );
    let m = metrics_when(&s, |m| agents_in_bucket_of(m, before) == 0.0).await;
    let states = by_state(&m);
    assert_eq!(states["idle"], 2.0, "{states:?}");
    assert!(agents_in_bucket_of(&m, after) >= 1.0);
    assert!(
        get(
            &m,
            "somna_llm_completion_tokens_total{purpose=\"summarize\"}"
        ) > 0.0
    );

    // Retiring an agent takes it out of the gauges.
    s.delete("/v1/agents/ash").await.expect(200, None);
    let m = metrics_when(&s, |m| get(m, "somna_agents") == 1.0).await;
    by_state(&m);

    // Every tick is in the lateness histogram (both are counted as ticks fire: a scrape may
    // catch one between the two).
    let ticks = get(&m, "somna_ticks_total");
    let counted = get(&m, "somna_tick_lateness_histogram_seconds_count");
    assert!(
        ticks > 0.0 && (ticks - counted).abs() <= 3.0,
        "{ticks} vs {counted}"
    );
    assert_eq!(
        get(
            &m,
            "somna_tick_lateness_histogram_seconds_bucket{le=\"+Inf\"}"
        ),
        counted
    );
    s.stop().await;
}
