//! [`Metrics::render`]: every metric family in the Prometheus text format, one function per group
//! of families.

use std::sync::atomic::Ordering;

use somna_core::record::Trigger;
use somna_llm::{LlmError, Purpose};
use somna_runtime::gauges::USAGE_BUCKETS;
use somna_runtime::stats::LATENESS_BUCKETS_US;
use somna_runtime::{AgentState, Event};

use super::text::{header, histogram, labeled, sample, single};
use super::{
    GROUNDED_OUTCOMES, GROUNDED_SOURCES, Inner, LLM_LATENCY_BUCKETS, Metrics, OUTCOMES,
    RuntimeGauges, load,
};
use crate::error::ErrorCode;

impl Metrics {
    /// Renders every metric in the Prometheus text format.
    pub fn render(&self, gauges: &RuntimeGauges) -> String {
        let m = &self.inner;
        let mut out = String::with_capacity(16 * 1024);
        let w = &mut out;
        render_agents(w, gauges);
        render_ticks(w, gauges);
        render_turns(w, gauges);
        render_memory(w, m);
        render_events(w, m);
        let llm_errors = render_llm(w, m);
        render_errors(w, m, llm_errors);
        render_streams(w, m);
        out
    }
}

/// The agents' gauges: how many, by state, by usage.
fn render_agents(w: &mut String, gauges: &RuntimeGauges) {
    single(
        w,
        "somna_agents",
        "gauge",
        "Agents hosted by the runtime.",
        gauges.agents as f64,
    );

    let agents = &gauges.agent_gauges;
    labeled(
        w,
        "somna_agents_by_state",
        "gauge",
        "Agents hosted, by what they are doing now.",
        "state",
        AgentState::ALL
            .iter()
            .zip(agents.by_state)
            .map(|(state, n)| (state.as_str(), n as f64)),
    );

    header(
        w,
        "somna_agent_usage",
        "histogram",
        "Agents hosted, by context usage now (prompt tokens over the context window, as in an \
         agent's status): a gauge histogram, each bucket the agents at or below its bound, \
         _count the agents, _sum their usage summed. Chart it as is; do not rate() it.",
    );
    histogram(
        w,
        "somna_agent_usage",
        &[],
        &USAGE_BUCKETS,
        &agents.by_usage,
        agents.usage_sum,
    );
}

/// The ticks: how many, how late.
fn render_ticks(w: &mut String, gauges: &RuntimeGauges) {
    single(
        w,
        "somna_ticks_total",
        "counter",
        "Agent ticks run.",
        gauges.ticks as f64,
    );

    labeled(
        w,
        "somna_tick_lateness_seconds",
        "gauge",
        "How late ticks fired since the node started: median, 99th percentile and maximum (quantile 1).",
        "quantile",
        [
            ("0.5", gauges.tick_p50),
            ("0.99", gauges.tick_p99),
            ("1", gauges.tick_max),
        ]
        .map(|(q, d)| (q, d.as_secs_f64())),
    );

    header(
        w,
        "somna_tick_lateness_histogram_seconds",
        "histogram",
        "How late ticks fired, as a histogram: its rates give the lateness over any time window.",
    );
    let lateness_bounds = LATENESS_BUCKETS_US.map(|us| us as f64 / 1e6);
    histogram(
        w,
        "somna_tick_lateness_histogram_seconds",
        &[],
        &lateness_bounds,
        &gauges.tick_lateness.buckets,
        gauges.tick_lateness.sum.as_secs_f64(),
    );
}

/// The turns: how many, and how long their work took on the runtime's threads.
fn render_turns(w: &mut String, gauges: &RuntimeGauges) {
    single(
        w,
        "somna_turns_total",
        "counter",
        "Turns that ended in a reply (turns that began with an emergency compaction are not counted).",
        gauges.turns.turns as f64,
    );
    single(
        w,
        "somna_turn_work_seconds_total",
        "counter",
        "How long those turns' work took on the runtime's threads: appending their input, the tick, the step (prompt, retrieval, the reply's append, the model client's call), its outcome.",
        gauges.turns.sum.as_secs_f64(),
    );
    labeled(
        w,
        "somna_turn_work_seconds",
        "gauge",
        "How long a turn's work took on the runtime's threads since the node started: median, 99th percentile and maximum (quantile 1).",
        "quantile",
        [
            ("0.5", gauges.turns.p50),
            ("0.99", gauges.turns.p99),
            ("1", gauges.turns.max),
        ]
        .map(|(q, d)| (q, d.as_secs_f64())),
    );
}

/// What compactions did and what the grounding check kept of what models wrote.
fn render_memory(w: &mut String, m: &Inner) {
    header(
        w,
        "somna_compactions_total",
        "counter",
        "Compactions by trigger and outcome.",
    );
    for (ti, t) in Trigger::ALL.iter().enumerate() {
        for (oi, o) in OUTCOMES.iter().enumerate() {
            sample(
                w,
                "somna_compactions_total",
                &[("trigger", t.as_str()), ("outcome", o)],
                load(&m.compactions[ti][oi]),
            );
        }
    }

    single(
        w,
        "somna_compaction_tokens_saved_total",
        "counter",
        "Prompt tokens saved by completed compactions.",
        load(&m.tokens_saved),
    );

    header(
        w,
        "somna_grounded_items_total",
        "counter",
        "Items models wrote into memory, by what wrote them and what the grounding check did.",
    );
    for (si, source) in GROUNDED_SOURCES.iter().enumerate() {
        for (oi, outcome) in GROUNDED_OUTCOMES.iter().enumerate() {
            sample(
                w,
                "somna_grounded_items_total",
                &[("source", source), ("outcome", outcome)],
                load(&m.grounded[si][oi]),
            );
        }
    }
}

/// Runtime events by type.
fn render_events(w: &mut String, m: &Inner) {
    labeled(
        w,
        "somna_events_total",
        "counter",
        "Runtime events by type.",
        "type",
        Event::KINDS
            .iter()
            .zip(&m.events)
            .map(|(kind, n)| (*kind, load(n))),
    );
}

/// LLM requests: latency, outcomes, tokens, fallbacks, errors by kind. Returns the failed
/// requests (for `somna_errors_total`).
fn render_llm(w: &mut String, m: &Inner) -> u64 {
    header(
        w,
        "somna_llm_request_duration_seconds",
        "histogram",
        "Latency of LLM requests (waiting for a slot, retries and backoff included), by purpose.",
    );
    for (pi, purpose) in Purpose::ALL.iter().enumerate() {
        let h = &m.llm[pi];
        let counts = h.buckets.each_ref().map(|b| b.load(Ordering::Relaxed));
        histogram(
            w,
            "somna_llm_request_duration_seconds",
            &[("purpose", purpose.as_str())],
            &LLM_LATENCY_BUCKETS,
            &counts,
            h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        );
    }

    header(
        w,
        "somna_llm_requests_total",
        "counter",
        "LLM requests by purpose and outcome.",
    );
    for (pi, purpose) in Purpose::ALL.iter().enumerate() {
        let total = m.llm[pi].count.load(Ordering::Relaxed);
        let errors = m.llm_errors_by_purpose[pi].load(Ordering::Relaxed);
        for (outcome, n) in [("ok", total.saturating_sub(errors)), ("error", errors)] {
            sample(
                w,
                "somna_llm_requests_total",
                &[("purpose", purpose.as_str()), ("outcome", outcome)],
                n as f64,
            );
        }
    }

    for (name, help, counters) in [
        (
            "somna_llm_prompt_tokens_total",
            "Prompt tokens of LLM requests, as the server reported them, by purpose.",
            &m.prompt_tokens,
        ),
        (
            "somna_llm_cached_prompt_tokens_total",
            "Prompt tokens the server served from its prompt cache (usage.prompt_tokens_details.cached_tokens), by purpose.",
            &m.cached_prompt_tokens,
        ),
        (
            "somna_llm_completion_tokens_total",
            "Completion tokens of LLM requests, as the server reported them, by purpose.",
            &m.completion_tokens,
        ),
    ] {
        labeled(
            w,
            name,
            "counter",
            help,
            "purpose",
            Purpose::ALL
                .iter()
                .zip(counters)
                .map(|(purpose, n)| (purpose.as_str(), load(n))),
        );
    }

    single(
        w,
        "somna_llm_structured_output_fallbacks_total",
        "counter",
        "Structured forms (json_schema, json_object) an LLM server rejected; the client steps down and remembers.",
        load(&m.structured_fallbacks),
    );

    header(
        w,
        "somna_llm_errors_total",
        "counter",
        "Failed LLM requests by error kind.",
    );
    let mut llm_errors = 0;
    for (i, kind) in LlmError::KINDS.iter().enumerate() {
        let n = m.llm_errors[i].load(Ordering::Relaxed);
        llm_errors += n;
        sample(w, "somna_llm_errors_total", &[("kind", kind)], n as f64);
    }
    llm_errors
}

/// Errors by source, API errors by code, responses by status class.
fn render_errors(w: &mut String, m: &Inner, llm_errors: u64) {
    labeled(
        w,
        "somna_errors_total",
        "counter",
        "Errors: agent steps that failed, failed LLM requests, API requests that failed inside the server.",
        "source",
        [
            ("agent", load(&m.agent_errors)),
            ("llm", llm_errors as f64),
            ("api", load(&m.internal_errors)),
        ],
    );
    labeled(
        w,
        "somna_api_errors_total",
        "counter",
        "API error responses by error code.",
        "code",
        ErrorCode::ALL
            .iter()
            .zip(&m.api_errors)
            .map(|(code, n)| (code.as_str(), load(n))),
    );
    labeled(
        w,
        "somna_http_responses_total",
        "counter",
        "API responses by status class.",
        "class",
        ["1xx", "2xx", "3xx", "4xx", "5xx"]
            .into_iter()
            .zip(&m.responses)
            .map(|(class, n)| (class, load(n))),
    );
}

/// The event stream's clients and the events lagging subscribers missed.
fn render_streams(w: &mut String, m: &Inner) {
    single(
        w,
        "somna_sse_clients",
        "gauge",
        "Clients connected to the event stream.",
        m.sse_clients.load(Ordering::Relaxed) as f64,
    );
    labeled(
        w,
        "somna_events_missed_total",
        "counter",
        "Runtime events a lagging subscriber missed.",
        "consumer",
        [
            ("metrics", load(&m.missed_by_metrics)),
            ("sse", load(&m.missed_by_sse)),
        ],
    );
}
