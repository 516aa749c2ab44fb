//! The `Agent` component: one hosted agent's state and step logic, as a plain struct.
//!
//! The actor (`actor.rs`) is a thin shell: it hands messages to these methods and runs the [`Job`]s
//! they return as spawned futures, so the agent keeps accepting input while an LLM call or a
//! compaction is in flight. Synchronous work (appending input, the O(1) usage check) happens here;
//! anything that waits on the LLM is a `Job` with its own clones of the handles it needs.
//!
//! - this file: the state machine ([`Agent`]), its shared handles ([`AgentDeps`]), the tick,
//!   jobs' start and finish, and run-time configuration.
//! - `load.rs`: loading an agent from its record (what it owes and has earned).
//! - `input.rs`: taking input (appended at once, checked against the input limit).
//! - `job.rs`: the job runner ([`Job`], [`JobKind`], [`JobOutcome`], [`JobError`]): compaction,
//!   observation scoring, the step.
//! - `sleep.rs`: sleep's steps (consolidation, reflection), run as a job.
//! - `queue.rs`: the `JobQueue` (one job at a time; sleep, compaction and uncompact requests
//!   queued behind it, bounded; the drain) and `cadence.rs`: the `TickCadence` (when the next tick
//!   is due). The actor asks them and does what they say; plain values, tested without actix.

pub(crate) mod cadence;
mod input;
mod job;
mod load;
pub(crate) mod queue;
mod sleep;

pub use job::{Job, JobError, JobKind, JobOutcome, SleepFailure};

use std::sync::Arc;
use std::time::Duration;

use somna_core::config::{AgentConfig, AgentOverrides, ConfigErrors};
use somna_core::message::Message;
use somna_core::tokens::{Calibration, TokenCounter};
use somna_core::usage::{self, Usage, calibration_factor};
use somna_core::{AgentId, Timestamp};
use somna_llm::LlmClient;
use somna_store::{Store, StoreError, UncompactOutcome};

use crate::clock::Clock;
use crate::compactor::Compactor;
use crate::events::EventBus;
use crate::gauges::{AgentGauge, AgentGauges};
use crate::protocol::{
    AgentState, AgentStatus, CalibrationStatus, ChatUsage, CompactionOutcome, CompactionReport,
    Event, PendingTool,
};
use crate::tools;
use job::JobContext;

/// Most LLM rounds in one step (each round may run built-in tools and call the LLM again). A step
/// that uses them all without a final reply ends with `Event::ToolRoundsExhausted`, reply owed.
pub const MAX_TOOL_ROUNDS: u32 = 4;
/// Most attempts at one chat turn: after this many failed steps in a row the turn fails
/// (`Event::TurnFailed`) and the reply stays owed until new input arrives. A permanent LLM error
/// (a 4xx such as 400, 401, 403, 404) fails the turn at the first attempt.
pub const MAX_TURN_ATTEMPTS: u32 = 3;
/// Longest wait after repeated LLM failures before the agent tries again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The caps of a reflection and the "nothing worth remembering" answer of a consolidation live with
/// their prompts.
pub use somna_llm::prompts::{MAX_REFLECTION_CHARS, MAX_REFLECTION_LINES, NO_FACTS};

/// Shared handles every agent uses.
#[derive(Debug, Clone)]
pub struct AgentDeps {
    pub store: Store,
    pub llm: Arc<dyn LlmClient>,
    pub compactor: Compactor,
    pub events: EventBus,
    pub clock: Clock,
    /// The runtime's agent gauges: each agent keeps its state and usage counted there.
    pub gauges: AgentGauges,
    /// The embedder of semantic retrieval, when `[embedder]` sets one (BM25 alone otherwise).
    pub semantic: Option<crate::semantic::Semantic>,
}

/// One hosted agent.
#[derive(Debug)]
pub struct Agent {
    id: AgentId,
    /// The config from runtime.toml (or creation), before run-time overrides. Shared with
    /// `config` when the agent has none, as most have: an agent's own memory is what a node of
    /// 100,000 of them multiplies (docs/benchmarks.md).
    base: Arc<AgentConfig>,
    /// `base` with the run-time overrides applied (the record keeps the overrides themselves):
    /// what the agent runs with.
    config: Arc<AgentConfig>,
    counter: TokenCounter,
    deps: AgentDeps,
    /// Tokens of the persona (part of every prompt).
    persona_tokens: u64,
    calibration: Calibration,
    state: AgentState,
    /// The agent's place in the runtime's gauges (its state and usage), moved with them.
    gauge: Arc<AgentGauge>,
    needs_reply: bool,
    /// A turn ended without the reply it owed (see [`AgentStatus::reply_owed`]).
    reply_owed: bool,
    /// The job in flight carries the reply owed (`needs_reply` was handed to it).
    reply_in_job: bool,
    pending_tools: Vec<PendingTool>,
    observations: Vec<String>,
    failures: u32,
    retry_at: Option<Timestamp>,
    importance_since_reflection: u64,
    /// History tokens when an emergency compaction last failed to get below the threshold: no
    /// new emergency until the history changes (no loop of futile compactions).
    stuck_at: Option<u64>,
    /// The server's usage reports of this agent's chat calls since it was loaded.
    chat_usage: ChatUsage,
    /// Ticks handled (for stats).
    pub ticks: u64,
    /// When the next sleep was due as of loading (the record's durable schedule).
    next_sleep_at: Option<Timestamp>,
}

impl Agent {
    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// When the agent's next sleep was due when it was loaded (`None`: never scheduled; the
    /// scheduler then starts a period from now).
    pub fn next_sleep_at(&self) -> Option<Timestamp> {
        self.next_sleep_at
    }

    /// The config it runs with.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Real time between ticks (the config's `tick_every` through the clock).
    pub fn tick_period(&self) -> Duration {
        self.deps.clock.to_real(self.config.tick_every)
    }

    /// What it is doing.
    pub fn state(&self) -> AgentState {
        self.state
    }

    /// Its place in the runtime's agent gauges (the runtime releases it when it stops hosting the
    /// agent).
    pub fn gauge(&self) -> &Arc<AgentGauge> {
        &self.gauge
    }

    /// Changes what it is doing, in its field and in the gauges.
    fn set_state(&mut self, state: AgentState) {
        self.state = state;
        self.gauge.set_state(state);
    }

    /// Moves the agent to its usage bucket after something changed its usage (input, a job, an
    /// uncompact, a config change). An unreadable usage leaves the gauge where it was.
    fn note_usage(&self) {
        if let Ok(usage) = self.usage() {
            self.gauge.set_usage(usage);
        }
    }

    /// What usage counts besides the live history: the persona and the working context's budget
    /// ([`somna_core::usage::fixed_tokens`]).
    fn fixed_tokens(&self) -> u64 {
        usage::fixed_tokens(&self.config.compaction, self.persona_tokens)
    }

    /// Prompt tokens now as usage counts them: persona + working budget + live history (O(1)).
    pub fn prompt_tokens(&self) -> Result<u64, StoreError> {
        Ok(self.fixed_tokens() + self.deps.store.usage_tokens(&self.id)?)
    }

    /// Usage now, 0–1, calibrated for inexact tokenizers ([`Usage`]). O(1): no history is read.
    pub fn usage(&self) -> Result<f64, StoreError> {
        Ok(Usage::new(
            self.fixed_tokens(),
            self.deps.store.usage_tokens(&self.id)?,
            calibration_factor(&self.counter, &self.calibration),
            self.config.compaction.max_context_tokens,
        )
        .fraction())
    }

    /// Whether a tick now could start anything: the agent is idle or waits on host tools, and
    /// input waits, host tools are pending (their deadlines), a retry is due, or usage is at the
    /// emergency threshold (the check [`Agent::tick`] makes). Nothing else a tick does changes
    /// with time alone, so while this is false the tick driver skips the agent's ticks without
    /// waking its actor (`crate::ticker`); the actor asks again after every input, job, config
    /// change and tick. Updates the usage gauge on the way. A store error says yes: the tick then
    /// meets and logs it.
    pub fn wants_tick(&self) -> bool {
        if !matches!(self.state, AgentState::Idle | AgentState::WaitingForTools) {
            return false;
        }
        if self.needs_reply
            || !self.observations.is_empty()
            || !self.pending_tools.is_empty()
            || self.retry_at.is_some()
        {
            return true;
        }
        let cfg = &self.config.compaction;
        if !cfg.enabled {
            return false;
        }
        match (self.usage(), self.deps.store.usage_tokens(&self.id)) {
            (Ok(usage), Ok(history_tokens)) => {
                self.gauge.set_usage(usage);
                usage::over_emergency(usage, cfg) && self.stuck_at != Some(history_tokens)
            }
            _ => true,
        }
    }

    /// The start of a tick: the emergency check first, then the step. Returns the job to spawn, if
    /// any. A tick while a job is in flight does nothing.
    pub fn tick(&mut self) -> Result<Option<Job>, StoreError> {
        self.ticks += 1;
        if !matches!(self.state, AgentState::Idle | AgentState::WaitingForTools) {
            return Ok(None);
        }
        let now = self.deps.clock.now();
        self.expire_tools(now)?;
        let usage = self.usage()?;
        self.gauge.set_usage(usage);
        let cfg = &self.config.compaction;
        let history_tokens = self.deps.store.usage_tokens(&self.id)?;
        let emergency = cfg.enabled
            && usage::over_emergency(usage, cfg)
            && self.stuck_at != Some(history_tokens);
        let wants_step = self.pending_tools.is_empty()
            && (self.needs_reply || !self.observations.is_empty())
            && self.retry_at.is_none_or(|t| now >= t);
        if emergency {
            self.deps.events.emit(
                now,
                Event::EmergencyTriggered {
                    agent: self.id.clone(),
                    usage,
                },
            );
            return Ok(Some(self.start(JobKind::Emergency {
                then_step: wants_step,
            })));
        }
        if wants_step {
            return Ok(Some(self.start(JobKind::Step)));
        }
        Ok(None)
    }

    /// Starts a sleep (`tired`: brought forward, see [`JobKind::Sleep`]), unless the agent is
    /// busy (then `None`).
    pub fn sleep(&mut self, tired: bool) -> Option<Job> {
        (self.state == AgentState::Idle).then(|| self.start(JobKind::Sleep { tired }))
    }

    /// Starts a compaction asked for through the API, unless the agent is busy (then `None`).
    pub fn compact(&mut self, force: bool) -> Option<Job> {
        matches!(self.state, AgentState::Idle | AgentState::WaitingForTools)
            .then(|| self.start(JobKind::Compact { force }))
    }

    fn start(&mut self, kind: JobKind) -> Job {
        self.set_state(match kind {
            JobKind::Step => AgentState::Stepping,
            JobKind::Sleep { .. } => AgentState::Sleeping,
            JobKind::Emergency { .. } | JobKind::Compact { .. } => AgentState::Compacting,
        });
        let observations = if matches!(kind, JobKind::Step | JobKind::Emergency { .. }) {
            std::mem::take(&mut self.observations)
        } else {
            Vec::new()
        };
        let needs_reply = matches!(kind, JobKind::Step | JobKind::Emergency { then_step: true })
            && self.needs_reply;
        if needs_reply {
            self.needs_reply = false;
        }
        self.reply_in_job = needs_reply;
        Job {
            kind,
            ctx: JobContext {
                id: self.id.clone(),
                config: self.config.clone(),
                counter: self.counter,
                deps: self.deps.clone(),
                calibration: self.calibration,
                importance_since_reflection: self.importance_since_reflection,
                observations,
                needs_reply,
                fixed_tokens: self.fixed_tokens(),
            },
        }
    }

    /// Takes a finished job's outcome back into the agent's state.
    pub fn finish(&mut self, kind: JobKind, out: &JobOutcome) {
        let now = self.deps.clock.now();
        if let Some(c) = out.calibration {
            self.calibration = c;
        }
        self.chat_usage.merge(&out.chat_usage);
        self.importance_since_reflection += out.importance_added;
        if out.reflected {
            self.importance_since_reflection = 0;
        }
        if let JobKind::Emergency { .. } = kind {
            self.note_emergency_result(now, out.compaction.as_ref());
        }
        let stepped = matches!(kind, JobKind::Step | JobKind::Emergency { then_step: true });
        if let Some(err) = &out.error {
            self.deps.events.emit(
                now,
                Event::Error {
                    agent: self.id.clone(),
                    message: err.clone(),
                },
            );
            if stepped && std::mem::take(&mut self.reply_in_job) {
                self.note_failed_turn(now, err, out.permanent);
            }
        } else if stepped {
            self.reply_in_job = false;
            self.failures = 0;
            self.retry_at = None;
            if out.replied {
                self.reply_owed = false;
            }
            if out.tool_rounds_exhausted {
                self.reply_owed = true;
            }
        }
        let deadline = now.saturating_add(self.config.tool_timeout);
        for (call_id, name, arguments) in &out.pending_tools {
            self.pending_tools.push(PendingTool {
                call_id: call_id.clone(),
                name: name.clone(),
                deadline,
            });
            self.deps.events.emit(
                now,
                Event::ToolCallRequested {
                    agent: self.id.clone(),
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                },
            );
        }
        self.set_state(if self.pending_tools.is_empty() {
            AgentState::Idle
        } else {
            AgentState::WaitingForTools
        });
        self.note_usage();
    }

    /// A step that owed a reply failed: try again later, backing off, unless the error is permanent
    /// or [`MAX_TURN_ATTEMPTS`] attempts in a row failed; then the turn fails and the reply stays
    /// owed until new input arrives (no LLM call is retried forever).
    fn note_failed_turn(&mut self, now: Timestamp, err: &str, permanent: bool) {
        self.failures += 1;
        if permanent || self.failures >= MAX_TURN_ATTEMPTS {
            let attempts = self.failures;
            self.failures = 0;
            self.retry_at = None;
            self.reply_owed = true;
            self.deps.events.emit(
                now,
                Event::TurnFailed {
                    agent: self.id.clone(),
                    attempts,
                    reason: err.to_string(),
                },
            );
            return;
        }
        self.needs_reply = true;
        let backoff = Duration::from_secs(1u64 << self.failures.min(6)).min(MAX_BACKOFF);
        self.retry_at = Some(now.saturating_add(self.deps.clock.to_sim(backoff)));
    }

    /// After an emergency compaction: still over the threshold means the rest of the prompt (the
    /// preserve window, the persona, the working context) is too large to fix by compacting; say
    /// so once, with the reason the compaction gave, and wait for the history to change before
    /// trying again.
    fn note_emergency_result(&mut self, now: Timestamp, outcome: Option<&CompactionOutcome>) {
        let (Ok(usage), Ok(tokens)) = (self.usage(), self.deps.store.usage_tokens(&self.id)) else {
            return;
        };
        if !usage::over_emergency(usage, &self.config.compaction) {
            self.stuck_at = None;
            return;
        }
        if self.stuck_at.is_none() {
            let reason = match outcome {
                Some(
                    CompactionOutcome::Done(CompactionReport { stuck, .. })
                    | CompactionOutcome::Skipped { stuck, .. },
                ) => stuck.clone(),
                Some(CompactionOutcome::Failed { reason, .. }) => Some(reason.clone()),
                _ => None,
            }
            .unwrap_or_else(|| {
                format!(
                    "usage is still {:.0}% after an emergency compaction",
                    usage * 100.0
                )
            });
            self.deps.events.emit(
                now,
                Event::EmergencyStuck {
                    agent: self.id.clone(),
                    usage,
                    threshold: self.config.compaction.emergency_threshold,
                    reason,
                },
            );
        }
        self.stuck_at = Some(tokens);
    }

    /// Answers overdue host tool calls with an error result so the model is not left hanging.
    fn expire_tools(&mut self, now: Timestamp) -> Result<(), StoreError> {
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_tools)
            .into_iter()
            .partition(|p| p.deadline <= now);
        self.pending_tools = kept;
        for p in &expired {
            let timeout = humantime::format_duration(self.config.tool_timeout);
            self.append(
                Message::tool_result(
                    p.call_id.clone(),
                    tools::error_result(&format!(
                        "the host did not answer `{}` within {timeout}",
                        p.name
                    )),
                )
                .at(now),
            )?;
            self.deps.events.emit(
                now,
                Event::ToolCallTimedOut {
                    agent: self.id.clone(),
                    call_id: p.call_id.clone(),
                    name: p.name.clone(),
                },
            );
        }
        if !expired.is_empty() && self.pending_tools.is_empty() {
            self.needs_reply = true;
            if self.state == AgentState::WaitingForTools {
                self.set_state(AgentState::Idle);
            }
        }
        Ok(())
    }

    /// Changes the agent's config at run time: merged over earlier run-time changes, validated,
    /// persisted in its record, applied at once.
    pub fn configure(&mut self, changes: AgentOverrides) -> Result<AgentConfig, ConfigureError> {
        let mut merged = self
            .deps
            .store
            .agent(&self.id)?
            .map(|record| record.overrides)
            .unwrap_or_default();
        merged.merge(changes);
        let config = self
            .base
            .with_overrides(&merged)
            .map_err(ConfigureError::Invalid)?;
        self.deps.store.set_overrides(&self.id, merged)?;
        self.counter = TokenCounter::for_model(&config.model);
        self.persona_tokens = u64::from(self.counter.count_text(&config.persona));
        self.config = Arc::new(config.clone());
        self.note_usage();
        Ok(config)
    }

    /// Undoes the compaction whose summary is at `summary_seq` (see `Compactor::uncompact`).
    pub fn uncompact(&mut self, summary_seq: u64) -> Result<UncompactOutcome, StoreError> {
        let now = self.deps.clock.now();
        let outcome = self
            .deps
            .compactor
            .uncompact(&self.id, summary_seq, now)
            .map_err(|crate::compactor::CompactError::Store(e)| e)?;
        if let UncompactOutcome::Restored { restored } = outcome {
            self.stuck_at = None;
            self.note_usage();
            self.deps.events.emit(
                now,
                Event::Uncompacted {
                    agent: self.id.clone(),
                    summary_seq,
                    restored,
                },
            );
        }
        Ok(outcome)
    }

    /// The agent's status.
    pub fn status(&self) -> Result<AgentStatus, StoreError> {
        let record = self.deps.store.agent(&self.id)?;
        Ok(AgentStatus {
            id: self.id.clone(),
            host: self.deps.store.cluster().map(|c| c.node().to_string()),
            state: self.state,
            usage: self.usage()?,
            prompt_tokens: self.prompt_tokens()?,
            max_context_tokens: self.config.compaction.max_context_tokens,
            history_len: record.as_ref().map_or(0, |r| r.history_len),
            archive_len: record.as_ref().map_or(0, |r| r.archive_len),
            compaction_count: record.as_ref().map_or(0, |r| r.compaction_count),
            last_compaction: record.as_ref().and_then(|r| r.last_compaction),
            needs_reply: self.needs_reply,
            pending_tools: self.pending_tools.clone(),
            config: AgentConfig::clone(&self.config),
            reply_owed: self.reply_owed,
            chat_usage: self.chat_usage,
            grounding: record
                .as_ref()
                .map_or_else(Default::default, |r| r.grounding),
            calibration: CalibrationStatus {
                learned: self.calibration.factor,
                applied: calibration_factor(&self.counter, &self.calibration),
                samples: self.calibration.samples,
                held_back: !self.counter.is_exact() && self.calibration.held_back(),
            },
        })
    }
}

/// Why an agent could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AgentLoadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid persisted config overrides:\n{0}")]
    Config(ConfigErrors),
}

/// Why a run-time config change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    #[error("{0}")]
    Invalid(ConfigErrors),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::error_chain as chain;
    use crate::protocol::InboundError;

    fn unknown() -> StoreError {
        crate::unknown_agent("ada")
    }

    #[test]
    fn store_errors_of_the_agent_name_their_cause_once() {
        assert_eq!(chain(&InboundError::from(unknown())), "unknown agent ada");
        assert_eq!(chain(&AgentLoadError::from(unknown())), "unknown agent ada");
        assert_eq!(chain(&ConfigureError::from(unknown())), "unknown agent ada");
    }
}
