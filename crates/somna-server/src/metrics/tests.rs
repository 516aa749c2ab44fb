use futures::future::BoxFuture;
use somna_core::AgentId;
use somna_core::record::CompactionMethod;
use somna_llm::{ChatRequest, LlmClient};
use somna_runtime::{AgentState, CompactionReport};

use super::text::sample;
use super::*;

fn agent() -> AgentId {
    AgentId::new("smith").unwrap()
}

fn report(trigger: Trigger, before: u64, after: u64) -> CompactionReport {
    CompactionReport {
        trigger,
        method: CompactionMethod::Extractive,
        compacted: 10,
        preserved: 4,
        tokens_before: before,
        tokens_after: after,
        reduction_pct: 0.0,
        usage_after: 0.1,
        summary_seq: Some(0),
        generation: 1,
        fallback_reason: None,
        warning: None,
        grounding: Some(somna_core::GroundingCounts {
            kept: 5,
            repaired: 1,
            dropped: 2,
        }),
        stuck: None,
    }
}

#[test]
fn renders_the_text_format() {
    let metrics = Metrics::new();
    metrics.observe_event(&Event::CompactionCompleted {
        agent: agent(),
        report: report(Trigger::Manual, 1000, 200),
    });
    metrics.observe_event(&Event::CompactionCompleted {
        agent: agent(),
        report: report(Trigger::Emergency, 500, 100),
    });
    metrics.observe_event(&Event::CompactionFailed {
        agent: agent(),
        trigger: Trigger::Sleep,
        reason: "x".into(),
    });
    metrics.observe_event(&Event::ConsolidationCompleted {
        agent: agent(),
        entries: 4,
        facts: 2,
        reflections: 1,
        grounding: somna_core::GroundingCounts {
            kept: 2,
            repaired: 1,
            dropped: 3,
        },
    });
    metrics.observe_event(&Event::Error {
        agent: agent(),
        message: "LLM: timeout".into(),
    });
    metrics.observe_llm(Purpose::Chat, Duration::from_millis(3), None);
    metrics.observe_llm(Purpose::Chat, Duration::from_millis(300), None);
    metrics.observe_llm(
        Purpose::Summarize,
        Duration::from_secs(200),
        Some(&LlmError::EmptyResponse),
    );
    metrics.observe_response(200, None);
    metrics.observe_response(404, Some(ErrorCode::UnknownAgent));
    metrics.observe_response(500, Some(ErrorCode::Internal));
    metrics.missed_events(true, 7);
    let _client = metrics.sse_client();
    let ticks = somna_runtime::stats::TickStats::default();
    for us in [90, 128, 700, 4096, 30_000] {
        ticks.record(Duration::from_micros(us));
    }
    let turns = somna_runtime::stats::TurnStats::default();
    for us in [90, 110, 130, 2_500] {
        turns.record(Duration::from_micros(us));
    }
    let agents = somna_runtime::gauges::AgentGauges::new();
    let _a = agents.register(AgentState::Idle, 0.05);
    let _b = agents.register(AgentState::Stepping, 0.72);
    let _c = agents.register(AgentState::WaitingForTools, 0.81);
    let text = metrics.render(&RuntimeGauges {
        agents: 3,
        ticks: 1234,
        tick_p50: Duration::from_micros(128),
        tick_p99: Duration::from_micros(4096),
        tick_max: Duration::from_millis(30),
        tick_lateness: ticks.histogram(),
        agent_gauges: agents.snapshot(),
        turns: turns.summary(),
    });
    insta::assert_snapshot!(text);
    assert_eq!(metrics.compactions_completed(Trigger::Manual), 1);
    assert_eq!(metrics.llm_requests(), 3);
}

/// A client that fails every other call with a timeout.
#[derive(Debug, Default)]
struct Flaky {
    calls: std::sync::atomic::AtomicU32,
}

impl LlmClient for Flaky {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, somna_llm::Result<ChatResponse>> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            if n % 2 == 1 {
                return Err(LlmError::Timeout {
                    after: Duration::from_secs(1),
                    attempts: 2,
                });
            }
            Ok(ChatResponse {
                text: "ok".into(),
                tool_calls: Vec::new(),
                usage: Some(somna_llm::Usage {
                    prompt_tokens: 100,
                    completion_tokens: 5,
                    cached_tokens: Some(60),
                }),
                latency: Duration::ZERO,
                attempts: 1,
                model: request.model,
                structured_fallbacks: 0,
            })
        })
    }

    fn provider(&self) -> &str {
        "flaky"
    }
}

#[tokio::test]
async fn metered_llm_counts_calls_and_errors() {
    let metrics = Metrics::new();
    let llm = MeteredLlm::wrap(Arc::new(Flaky::default()), &metrics);
    assert_eq!(llm.provider(), "flaky");
    for purpose in [
        Purpose::Chat,
        Purpose::Chat,
        Purpose::Summarize,
        Purpose::Score,
    ] {
        let request = ChatRequest::new("m", Vec::new()).with_purpose(purpose);
        let _ = llm.chat(request).await;
    }
    assert_eq!(metrics.llm_requests(), 4);
    let text = metrics.render(&RuntimeGauges::default());
    for line in [
        "somna_llm_requests_total{purpose=\"chat\",outcome=\"ok\"} 1\n",
        "somna_llm_requests_total{purpose=\"chat\",outcome=\"error\"} 1\n",
        "somna_llm_requests_total{purpose=\"summarize\",outcome=\"ok\"} 1\n",
        "somna_llm_requests_total{purpose=\"score\",outcome=\"error\"} 1\n",
        "somna_llm_errors_total{kind=\"timeout\"} 2\n",
        "somna_errors_total{source=\"llm\"} 2\n",
        "somna_llm_request_duration_seconds_count{purpose=\"chat\"} 2\n",
        "somna_llm_prompt_tokens_total{purpose=\"chat\"} 100\n",
        "somna_llm_cached_prompt_tokens_total{purpose=\"chat\"} 60\n",
        "somna_llm_prompt_tokens_total{purpose=\"summarize\"} 100\n",
        "somna_llm_cached_prompt_tokens_total{purpose=\"score\"} 0\n",
        "somna_llm_completion_tokens_total{purpose=\"chat\"} 5\n",
        "somna_llm_completion_tokens_total{purpose=\"summarize\"} 5\n",
        "somna_llm_completion_tokens_total{purpose=\"score\"} 0\n",
        "somna_llm_errors_total{kind=\"config\"} 0\n",
        "somna_llm_structured_output_fallbacks_total 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

/// Every label value of a closed set is there from the start, at 0, so a query never misses a
/// series because nothing happened yet.
#[test]
fn closed_label_sets_start_at_zero() {
    let text = Metrics::new().render(&RuntimeGauges::default());
    let mut expected: Vec<String> = Vec::new();
    for kind in Event::KINDS {
        expected.push(format!("somna_events_total{{type=\"{kind}\"}} 0\n"));
    }
    for kind in LlmError::KINDS {
        expected.push(format!("somna_llm_errors_total{{kind=\"{kind}\"}} 0\n"));
    }
    for code in ErrorCode::ALL {
        expected.push(format!("somna_api_errors_total{{code=\"{code}\"}} 0\n"));
    }
    for state in AgentState::ALL {
        expected.push(format!("somna_agents_by_state{{state=\"{state}\"}} 0\n"));
    }
    for trigger in Trigger::ALL {
        for outcome in OUTCOMES {
            expected.push(format!(
                "somna_compactions_total{{trigger=\"{trigger}\",outcome=\"{outcome}\"}} 0\n"
            ));
        }
    }
    for purpose in Purpose::ALL {
        expected.push(format!(
            "somna_llm_completion_tokens_total{{purpose=\"{purpose}\"}} 0\n"
        ));
    }
    expected.push("somna_agent_usage_bucket{le=\"0.7\"} 0\n".into());
    expected.push("somna_agent_usage_bucket{le=\"0.8\"} 0\n".into());
    expected.push("somna_agent_usage_count 0\n".into());
    expected.push("somna_tick_lateness_histogram_seconds_bucket{le=\"0.0001\"} 0\n".into());
    expected.push("somna_tick_lateness_histogram_seconds_count 0\n".into());
    expected.push("somna_turns_total 0\n".into());
    expected.push("somna_turn_work_seconds{quantile=\"0.99\"} 0\n".into());
    for line in &expected {
        assert!(text.contains(line.as_str()), "missing {line:?} in\n{text}");
    }
}

#[test]
fn labels_are_escaped() {
    let mut out = String::new();
    sample(&mut out, "m", &[("l", "a\"b\\c\nd")], 0.25);
    assert_eq!(out, "m{l=\"a\\\"b\\\\c\\nd\"} 0.25\n");
}
