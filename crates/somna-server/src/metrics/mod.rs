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
//! | `somna_turns_total` | counter | |
//! | `somna_turn_work_seconds_total` | counter | |
//! | `somna_turn_work_seconds` | gauge | `quantile` = `0.5`, `0.99`, `1` (max) |
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
//!
//! - this module: [`Metrics`] and what feeds it, and [`RuntimeGauges`].
//! - `render`: [`Metrics::render`], every family written out.
//! - `text`: the text format's samples, histograms and escaping.
//! - `metered`: [`MeteredLlm`], the LLM client decorator.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use somna_core::record::Trigger;
use somna_llm::{ChatResponse, LlmError, Purpose};
use somna_runtime::gauges::AgentGaugesSnapshot;
use somna_runtime::stats::{LatenessHistogram, TurnSummary};
use somna_runtime::{Event, Runtime};

use crate::error::ErrorCode;

mod metered;
mod render;
#[cfg(test)]
mod tests;
mod text;

pub use metered::MeteredLlm;

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
    /// Every tick's lateness so far, in the buckets of
    /// [`LATENESS_BUCKETS_US`](somna_runtime::stats::LATENESS_BUCKETS_US).
    pub tick_lateness: LatenessHistogram,
    /// The hosted agents by state and by context usage.
    pub agent_gauges: AgentGaugesSnapshot,
    /// How long the turns' work took so far.
    pub turns: TurnSummary,
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
            turns: runtime.turn_stats().summary(),
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
}

/// Keeps the SSE client gauge up while a stream is open.
#[derive(Debug)]
pub(crate) struct SseClientGuard {
    metrics: Metrics,
}

impl Drop for SseClientGuard {
    fn drop(&mut self) {
        self.metrics
            .inner
            .sse_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}
