//! Prometheus metrics: [`Metrics`] (lock-free counters fed by the runtime's events, the API and
//! [`MeteredLlm`]) and its rendering in the Prometheus text exposition format (version 0.0.4),
//! written by hand: the format is a few lines per metric and a crate would add more than it saves.
//!
//! Every label set is closed and every value of it is exposed from the start (at 0), so a query
//! never finds a series missing because nothing happened yet.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `somna_agents` | gauge | |
//! | `somna_agents_by_state` | gauge | `state` (`AgentState::ALL`) |
//! | `somna_agent_usage` | histogram (of agents now: a gauge histogram) | `le` = `USAGE_BUCKETS` |
//! | `somna_ticks_total` | counter | |
//! | `somna_tick_lateness_seconds` | gauge | `quantile` = `0.5`, `0.99`, `1` (max) |
//! | `somna_tick_lateness_histogram_seconds` | histogram | `le` = `LATENESS_BUCKETS_US` |
//! | `somna_compactions_total` | counter | `trigger`, `outcome` = `completed`, `skipped`, `failed` |
//! | `somna_compaction_tokens_saved_total` | counter | |
//! | `somna_grounded_items_total` | counter | `source` = `compaction`, `sleep`; `outcome` = `kept`, `repaired`, `dropped` |
//! | `somna_events_total` | counter | `type` (`Event::KINDS`) |
//! | `somna_llm_request_duration_seconds` | histogram | `purpose` |
//! | `somna_llm_requests_total` | counter | `purpose`, `outcome` = `ok`, `error` |
//! | `somna_llm_errors_total` | counter | `kind` (`LlmError::KINDS`) |
//! | `somna_llm_prompt_tokens_total` | counter | `purpose` |
//! | `somna_llm_cached_prompt_tokens_total` | counter | `purpose` |
//! | `somna_llm_completion_tokens_total` | counter | `purpose` |
//! | `somna_llm_structured_output_fallbacks_total` | counter | |
//! | `somna_errors_total` | counter | `source` = `agent`, `llm`, `api` |
//! | `somna_api_errors_total` | counter | `code` (`ErrorCode::ALL`) |
//! | `somna_http_responses_total` | counter | `class` = `2xx` … `5xx` |
//! | `somna_sse_clients` | gauge | |
//! | `somna_events_missed_total` | counter | `consumer` = `metrics`, `sse` |

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use somna_core::record::Trigger;
use somna_llm::{ChatRequest, ChatResponse, LlmClient, LlmError, Purpose};
use somna_runtime::gauges::{AgentGaugesSnapshot, USAGE_BUCKETS};
use somna_runtime::stats::{LATENESS_BUCKETS_US, LatenessHistogram};
use somna_runtime::{AgentState, Event, Runtime};

use crate::error::ErrorCode;

/// Upper bounds of the LLM latency histogram's buckets, in seconds (`+Inf` is implied).
pub const LLM_LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// What wrote the items the grounding check saw, the `source` label of
/// `somna_grounded_items_total`: a compaction (summary items, extracted facts) or a sleep
/// (consolidated facts, reflections).
const GROUNDED_SOURCES: [&str; 2] = ["compaction", "sleep"];
/// What the check did, its `outcome` label.
const GROUNDED_OUTCOMES: [&str; 3] = ["kept", "repaired", "dropped"];

/// Compaction outcomes, the `outcome` label of `somna_compactions_total`.
const OUTCOMES: [&str; 3] = ["completed", "skipped", "failed"];
const PURPOSES: usize = Purpose::ALL.len();

/// The server's metrics. Cheap to clone; clones share the counters.
///
/// Create one before the runtime, wrap the LLM client with [`MeteredLlm::wrap`], and hand it to the
/// server in [`ServerOptions::metrics`](crate::ServerOptions::metrics).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Compactions by trigger (index in `Trigger::ALL`) and outcome (index in `OUTCOMES`).
    compactions: [[AtomicU64; OUTCOMES.len()]; Trigger::ALL.len()],
    tokens_saved: AtomicU64,
    /// Items the grounding check saw, by source and outcome.
    grounded: [[AtomicU64; GROUNDED_OUTCOMES.len()]; GROUNDED_SOURCES.len()],
    /// Runtime events by type (index in `Event::KINDS`).
    events: [AtomicU64; Event::KINDS.len()],
    /// LLM latency by purpose (index in `Purpose::ALL`).
    llm: [Histogram; PURPOSES],
    llm_errors_by_purpose: [AtomicU64; PURPOSES],
    /// Prompt tokens the server reported, by purpose.
    prompt_tokens: [AtomicU64; PURPOSES],
    /// Of those, the tokens it served from its prompt cache, by purpose.
    cached_prompt_tokens: [AtomicU64; PURPOSES],
    /// Completion tokens the server reported, by purpose.
    completion_tokens: [AtomicU64; PURPOSES],
    /// Structured forms a server rejected (the client stepped down to the next one).
    structured_fallbacks: AtomicU64,
    /// Failed LLM requests by error kind (index in `LlmError::KINDS`).
    llm_errors: [AtomicU64; LlmError::KINDS.len()],
    agent_errors: AtomicU64,
    /// API error answers by code (index in `ErrorCode::ALL`).
    api_errors: [AtomicU64; ErrorCode::ALL.len()],
    internal_errors: AtomicU64,
    /// Responses by status class (index 0 = 1xx … 4 = 5xx).
    responses: [AtomicU64; 5],
    sse_clients: AtomicI64,
    missed_by_metrics: AtomicU64,
    missed_by_sse: AtomicU64,
}

/// A latency histogram with the fixed [`LLM_LATENCY_BUCKETS`].
#[derive(Debug, Default)]
struct Histogram {
    /// Non-cumulative counts per bucket; the last one is `+Inf`.
    buckets: [AtomicU64; LLM_LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = LLM_LATENCY_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LLM_LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the runtime itself reports, read when `/metrics` is rendered: a few shared counters, so a
/// scrape costs the same however many agents the node hosts and asks none of them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RuntimeGauges {
    /// Agents hosted now.
    pub agents: usize,
    /// Ticks run so far.
    pub ticks: u64,
    /// Median tick lateness.
    pub tick_p50: Duration,
    /// 99th-percentile tick lateness.
    pub tick_p99: Duration,
    /// Largest tick lateness.
    pub tick_max: Duration,
    /// Every tick's lateness so far, in the buckets of [`LATENESS_BUCKETS_US`].
    pub tick_lateness: LatenessHistogram,
    /// The hosted agents by state and by context usage.
    pub agent_gauges: AgentGaugesSnapshot,
}

impl RuntimeGauges {
    /// Reads the gauges of `runtime`.
    pub fn of(runtime: &Runtime) -> Self {
        let ticks = runtime.tick_stats().summary();
        RuntimeGauges {
            agents: runtime.agent_count(),
            ticks: ticks.ticks,
            tick_p50: ticks.p50,
            tick_p99: ticks.p99,
            tick_max: ticks.max,
            tick_lateness: runtime.tick_stats().histogram(),
            agent_gauges: runtime.agent_gauges(),
        }
    }
}

/// The position of `x` in `all`, a label set's every value (`T::ALL`, `Event::KINDS`); `None` for
/// a value the set lacks, which the tests of those lists rule out.
fn index_in<T: PartialEq>(all: &[T], x: &T) -> Option<usize> {
    all.iter().position(|v| v == x)
}

/// Adds one to the counter of `x` in `counters`, whose order is `all`'s.
fn bump_in<T: PartialEq + std::fmt::Debug>(counters: &[AtomicU64], all: &[T], x: &T) {
    match index_in(all, x) {
        Some(i) => {
            counters[i].fetch_add(1, Ordering::Relaxed);
        }
        None => debug_assert!(false, "{x:?} is missing from its label set {all:?}"),
    }
}

fn trigger_index(t: Trigger) -> usize {
    index_in(&Trigger::ALL, &t).unwrap_or_default()
}

fn purpose_index(p: Purpose) -> usize {
    index_in(&Purpose::ALL, &p).unwrap_or_default()
}

fn load(counter: &AtomicU64) -> f64 {
    counter.load(Ordering::Relaxed) as f64
}

impl Metrics {
    /// Fresh counters.
    pub fn new() -> Self {
        Metrics::default()
    }

    /// Counts one runtime event (compactions by trigger and outcome, tokens saved, agent errors,
    /// events by type).
    pub fn observe_event(&self, event: &Event) {
        let m = &self.inner;
        bump_in(&m.events, &Event::KINDS, &event.kind());
        match event {
            Event::CompactionCompleted { report, .. } => {
                m.compactions[trigger_index(report.trigger)][0].fetch_add(1, Ordering::Relaxed);
                m.tokens_saved.fetch_add(
                    report.tokens_before.saturating_sub(report.tokens_after),
                    Ordering::Relaxed,
                );
                if let Some(g) = report.grounding {
                    self.grounded(0, g);
                }
            }
            Event::ConsolidationCompleted { grounding, .. } => self.grounded(1, *grounding),
            Event::CompactionSkipped { trigger, .. } => {
                m.compactions[trigger_index(*trigger)][1].fetch_add(1, Ordering::Relaxed);
            }
            Event::CompactionFailed { trigger, .. } => {
                m.compactions[trigger_index(*trigger)][2].fetch_add(1, Ordering::Relaxed);
            }
            Event::Error { .. } => {
                m.agent_errors.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Counts what the grounding check did with one source's items.
    fn grounded(&self, source: usize, g: somna_core::GroundingCounts) {
        let row = &self.inner.grounded[source];
        for (i, n) in [g.kept, g.repaired, g.dropped].into_iter().enumerate() {
            row[i].fetch_add(u64::from(n), Ordering::Relaxed);
        }
    }

    /// Counts events a subscriber missed because it lagged behind.
    pub(crate) fn missed_events(&self, sse: bool, n: u64) {
        let counter = if sse {
            &self.inner.missed_by_sse
        } else {
            &self.inner.missed_by_metrics
        };
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Records one LLM call: its latency and, when it failed, the error's kind.
    pub fn observe_llm(&self, purpose: Purpose, latency: Duration, error: Option<&LlmError>) {
        let i = purpose_index(purpose);
        self.inner.llm[i].observe(latency);
        if let Some(e) = error {
            self.inner.llm_errors_by_purpose[i].fetch_add(1, Ordering::Relaxed);
            bump_in(&self.inner.llm_errors, &LlmError::KINDS, &e.kind());
        }
    }

    /// Records what the server reported of one successful LLM call: prompt, cached prompt and
    /// completion tokens by purpose, and structured forms it rejected on the way.
    pub fn observe_llm_response(&self, purpose: Purpose, response: &ChatResponse) {
        let i = purpose_index(purpose);
        if let Some(u) = &response.usage {
            self.inner.prompt_tokens[i].fetch_add(u64::from(u.prompt_tokens), Ordering::Relaxed);
            let cached = u.cached_tokens.unwrap_or(0).min(u.prompt_tokens);
            self.inner.cached_prompt_tokens[i].fetch_add(u64::from(cached), Ordering::Relaxed);
            self.inner.completion_tokens[i]
                .fetch_add(u64::from(u.completion_tokens), Ordering::Relaxed);
        }
        self.inner
            .structured_fallbacks
            .fetch_add(u64::from(response.structured_fallbacks), Ordering::Relaxed);
    }

    /// Records one API response: its status class and, for errors, the code.
    pub fn observe_response(&self, status: u16, code: Option<ErrorCode>) {
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.inner.responses[class].fetch_add(1, Ordering::Relaxed);
        if let Some(code) = code {
            bump_in(&self.inner.api_errors, &ErrorCode::ALL, &code);
            if code == ErrorCode::Internal {
                self.inner.internal_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Marks an SSE client connected; the guard marks it gone when dropped.
    pub(crate) fn sse_client(&self) -> SseClientGuard {
        self.inner.sse_clients.fetch_add(1, Ordering::Relaxed);
        SseClientGuard {
            metrics: self.clone(),
        }
    }

    /// Completed compactions of `trigger` so far.
    pub fn compactions_completed(&self, trigger: Trigger) -> u64 {
        self.inner.compactions[trigger_index(trigger)][0].load(Ordering::Relaxed)
    }

    /// LLM calls recorded so far (all purposes).
    pub fn llm_requests(&self) -> u64 {
        self.inner
            .llm
            .iter()
            .map(|h| h.count.load(Ordering::Relaxed))
            .sum()
    }

    /// Renders every metric in the Prometheus text format.
    pub fn render(&self, gauges: &RuntimeGauges) -> String {
        let m = &self.inner;
        let mut out = String::with_capacity(16 * 1024);
        let w = &mut out;
        render_agents(w, gauges);
        render_ticks(w, gauges);
        render_memory(w, m);
        render_events(w, m);
        let llm_errors = render_llm(w, m);
        render_errors(w, m, llm_errors);
        render_streams(w, m);
        out
    }
}

/// Keeps the SSE client gauge up while a stream is open.
#[derive(Debug)]
pub(crate) struct SseClientGuard {
    metrics: Metrics,
}

/// The agents' gauges: how many, by state, by usage.
fn render_agents(w: &mut String, gauges: &RuntimeGauges) {
    header(w, "somna_agents", "gauge", "Agents hosted by the runtime.");
    sample(w, "somna_agents", &[], gauges.agents as f64);

    let agents = &gauges.agent_gauges;
    header(
        w,
        "somna_agents_by_state",
        "gauge",
        "Agents hosted, by what they are doing now.",
    );
    for (i, state) in AgentState::ALL.iter().enumerate() {
        sample(
            w,
            "somna_agents_by_state",
            &[("state", state.as_str())],
            agents.by_state[i] as f64,
        );
    }

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
    header(w, "somna_ticks_total", "counter", "Agent ticks run.");
    sample(w, "somna_ticks_total", &[], gauges.ticks as f64);

    header(
        w,
        "somna_tick_lateness_seconds",
        "gauge",
        "How late ticks fired since the node started: median, 99th percentile and maximum (quantile 1).",
    );
    for (q, d) in [
        ("0.5", gauges.tick_p50),
        ("0.99", gauges.tick_p99),
        ("1", gauges.tick_max),
    ] {
        sample(
            w,
            "somna_tick_lateness_seconds",
            &[("quantile", q)],
            d.as_secs_f64(),
        );
    }

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

    header(
        w,
        "somna_compaction_tokens_saved_total",
        "counter",
        "Prompt tokens saved by completed compactions.",
    );
    sample(
        w,
        "somna_compaction_tokens_saved_total",
        &[],
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
    header(
        w,
        "somna_events_total",
        "counter",
        "Runtime events by type.",
    );
    for (i, kind) in Event::KINDS.iter().enumerate() {
        sample(
            w,
            "somna_events_total",
            &[("type", kind)],
            load(&m.events[i]),
        );
    }
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
        header(w, name, "counter", help);
        for (pi, purpose) in Purpose::ALL.iter().enumerate() {
            sample(
                w,
                name,
                &[("purpose", purpose.as_str())],
                load(&counters[pi]),
            );
        }
    }

    header(
        w,
        "somna_llm_structured_output_fallbacks_total",
        "counter",
        "Structured forms (json_schema, json_object) an LLM server rejected; the client steps down and remembers.",
    );
    sample(
        w,
        "somna_llm_structured_output_fallbacks_total",
        &[],
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
    header(
        w,
        "somna_errors_total",
        "counter",
        "Errors: agent steps that failed, failed LLM requests, API requests that failed inside the server.",
    );
    sample(
        w,
        "somna_errors_total",
        &[("source", "agent")],
        load(&m.agent_errors),
    );
    sample(
        w,
        "somna_errors_total",
        &[("source", "llm")],
        llm_errors as f64,
    );
    sample(
        w,
        "somna_errors_total",
        &[("source", "api")],
        load(&m.internal_errors),
    );

    header(
        w,
        "somna_api_errors_total",
        "counter",
        "API error responses by error code.",
    );
    for (i, code) in ErrorCode::ALL.iter().enumerate() {
        sample(
            w,
            "somna_api_errors_total",
            &[("code", code.as_str())],
            load(&m.api_errors[i]),
        );
    }

    header(
        w,
        "somna_http_responses_total",
        "counter",
        "API responses by status class.",
    );
    for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
        sample(
            w,
            "somna_http_responses_total",
            &[("class", class)],
            load(&m.responses[i]),
        );
    }
}

/// The event stream's clients and the events lagging subscribers missed.
fn render_streams(w: &mut String, m: &Inner) {
    header(
        w,
        "somna_sse_clients",
        "gauge",
        "Clients connected to the event stream.",
    );
    sample(
        w,
        "somna_sse_clients",
        &[],
        m.sse_clients.load(Ordering::Relaxed) as f64,
    );

    header(
        w,
        "somna_events_missed_total",
        "counter",
        "Runtime events a lagging subscriber missed.",
    );
    sample(
        w,
        "somna_events_missed_total",
        &[("consumer", "metrics")],
        load(&m.missed_by_metrics),
    );
    sample(
        w,
        "somna_events_missed_total",
        &[("consumer", "sse")],
        load(&m.missed_by_sse),
    );
}

impl Drop for SseClientGuard {
    fn drop(&mut self) {
        self.metrics
            .inner
            .sse_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The `_bucket` (cumulative, `le` last among the labels), `_sum` and `_count` samples of the
/// histogram `name` whose buckets' upper `bounds` hold `counts` (not cumulative; one more than the
/// bounds, for `+Inf`).
fn histogram(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    bounds: &[f64],
    counts: &[u64],
    sum: f64,
) {
    debug_assert_eq!(counts.len(), bounds.len() + 1);
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0u64;
    for (i, n) in counts.iter().enumerate() {
        cumulative += n;
        let le = bounds
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| format_float(*b));
        let mut with_le = labels.to_vec();
        with_le.push(("le", &le));
        sample(out, &bucket, &with_le, cumulative as f64);
    }
    sample(out, &format!("{name}_sum"), labels, sum);
    sample(out, &format!("{name}_count"), labels, cumulative as f64);
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_float(value));
    out.push('\n');
}

/// A sample value: integers without a fraction, others in the shortest form that round-trips.
fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// An [`LlmClient`] decorator that records every call's latency and errors in [`Metrics`].
#[derive(Debug)]
pub struct MeteredLlm {
    inner: Arc<dyn LlmClient>,
    metrics: Metrics,
}

impl MeteredLlm {
    /// Wraps `llm` so that its calls show up in `metrics`. Install it before `Runtime::start`:
    /// `Runtime::start(config, store, MeteredLlm::wrap(llm, &options.metrics), runtime_options)`.
    pub fn wrap(llm: Arc<dyn LlmClient>, metrics: &Metrics) -> Arc<dyn LlmClient> {
        Arc::new(MeteredLlm {
            inner: llm,
            metrics: metrics.clone(),
        })
    }
}

impl LlmClient for MeteredLlm {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, somna_llm::Result<ChatResponse>> {
        let purpose = request.purpose;
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.chat(request).await;
            self.metrics
                .observe_llm(purpose, started.elapsed(), result.as_ref().err());
            if let Ok(response) = &result {
                self.metrics.observe_llm_response(purpose, response);
            }
            result
        })
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }
}

#[cfg(test)]
mod tests {
    use somna_core::AgentId;
    use somna_core::record::CompactionMethod;
    use somna_runtime::CompactionReport;

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
}
