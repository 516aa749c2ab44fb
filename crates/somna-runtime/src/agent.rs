//! The `Agent` component: one hosted agent's state and step logic, as a plain struct.
//!
//! The actor (`actor.rs`) is a thin shell: it hands messages to these methods and runs the [`Job`]s
//! they return as spawned futures, so the agent keeps accepting input while an LLM call or a
//! compaction is in flight. Synchronous work (appending input, the O(1) usage check) happens here;
//! anything that waits on the LLM is a `Job` with its own clones of the handles it needs.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use somna_core::config::{AgentConfig, AgentOverrides, ConfigErrors};
use somna_core::message::{Message, Role};
use somna_core::record::Trigger;
use somna_core::tokens::{Calibration, Observation, TokenCounter};
use somna_core::usage::{Usage, calibration_factor};
use somna_core::{AgentId, Fact, JournalEntry, JournalQuery, SourceType, Timestamp, ToolCall};
use somna_llm::prompts::{self, Consolidation};
use somna_llm::{ChatRequest, LlmClient, Purpose, builtin};
use somna_store::{Store, StoreError, UncompactOutcome};

use crate::clock::Clock;
use crate::compactor::{CompactRequest, CompactionOutcome, Compactor};
use crate::events::{Event, EventBus};
use crate::prompt::{self, WorkingContext};
use crate::tools;

/// Most LLM rounds in one step (each round may run built-in tools and call the LLM again). A step
/// that uses them all without a final reply ends with `Event::ToolRoundsExhausted`, reply owed.
pub const MAX_TOOL_ROUNDS: u32 = 4;
/// Most attempts at one chat turn: after this many failed steps in a row the turn fails
/// (`Event::TurnFailed`) and the reply stays owed until new input arrives. A permanent LLM error
/// (a 4xx such as 400, 401, 403, 404) fails the turn at the first attempt.
pub const MAX_TURN_ATTEMPTS: u32 = 3;
/// Longest wait after repeated LLM failures before the agent tries again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Most journal entries one consolidation handles (the rest wait for the next sleep).
const CONSOLIDATION_BATCH: usize = 50;
/// Longest reply the agent asks the model for, in tokens.
pub const REPLY_MAX_TOKENS: u32 = 512;
/// Importance of reflection entries.
const REFLECTION_IMPORTANCE: u8 = 8;
/// The caps of a reflection and the "nothing worth remembering" answer of a consolidation live with
/// their prompts.
pub use somna_llm::prompts::{MAX_REFLECTION_CHARS, MAX_REFLECTION_LINES, NO_FACTS};

/// Input for an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Inbound {
    /// Someone speaks to the agent; it owes a reply.
    User {
        content: String,
        #[serde(default)]
        name: Option<String>,
    },
    /// Something happens in the agent's world: journaled and added to its context, no reply owed.
    Observation { content: String },
    /// The host's answer to a host-defined tool call.
    ToolResult { call_id: String, content: String },
}

/// Why input was refused.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    #[error("no pending tool call with id {0:?}")]
    UnknownToolCall(String),
    #[error("content is empty")]
    Empty,
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The input is larger than the agent's `compaction.max_input_tokens`; nothing was written.
    #[error(
        "input is {tokens} tokens, above this agent's limit of {limit} \
         (compaction.max_input_tokens)"
    )]
    TooLarge {
        /// The input's size, in tokens as the agent counts them (calibrated).
        tokens: u64,
        /// The limit in force ([`CompactionConfig::input_limit`](somna_core::config::CompactionConfig::input_limit)).
        limit: u32,
    },
}

/// What an agent is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    Idle,
    Stepping,
    Compacting,
    Sleeping,
    /// Waiting for the host to answer tool calls.
    WaitingForTools,
}

/// A host tool call the agent is waiting on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingTool {
    pub call_id: String,
    pub name: String,
    /// When the model gets an error result instead.
    pub deadline: Timestamp,
}

/// An agent's status, for the API and the CLI (which also reads it back from the API's answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    pub id: AgentId,
    pub state: AgentState,
    /// Prompt usage, 0–1 (calibrated).
    pub usage: f64,
    pub prompt_tokens: u64,
    pub max_context_tokens: u32,
    pub history_len: u64,
    pub archive_len: u64,
    pub compaction_count: u32,
    pub last_compaction: Option<Timestamp>,
    pub needs_reply: bool,
    pub pending_tools: Vec<PendingTool>,
    pub config: AgentConfig,
    /// A chat turn ended without the reply it owed (the LLM failed permanently or too often, or
    /// the tool rounds ran out); cleared by the next reply. See docs/llm.md.
    #[serde(default)]
    pub reply_owed: bool,
}

/// Shared handles every agent uses.
#[derive(Debug, Clone)]
pub struct AgentDeps {
    pub store: Store,
    pub llm: Arc<dyn LlmClient>,
    pub compactor: Compactor,
    pub events: EventBus,
    pub clock: Clock,
}

/// Work that waits on the LLM; runs as a spawned future.
#[derive(Debug)]
pub struct Job {
    pub kind: JobKind,
    ctx: JobContext,
}

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// The tick's emergency compaction, then the step if a reply is owed.
    Emergency { then_step: bool },
    /// Score observations, then reply if a reply is owed.
    Step,
    /// Consolidation, reflection, then compaction at the sleep threshold.
    Sleep,
    /// A compaction asked for through the API (`force` = manual, ignoring thresholds).
    Compact { force: bool },
}

/// A job's own copies of what it needs, so it runs without borrowing the agent.
#[derive(Debug, Clone)]
struct JobContext {
    id: AgentId,
    config: AgentConfig,
    counter: TokenCounter,
    deps: AgentDeps,
    calibration: Calibration,
    importance_since_reflection: u64,
    observations: Vec<String>,
    needs_reply: bool,
    /// Prompt tokens outside history (persona + working context), as the usage check counts them.
    fixed_tokens: u64,
}

/// What a job did, handed back to the agent.
#[derive(Debug, Default)]
pub struct JobOutcome {
    pub compaction: Option<CompactionOutcome>,
    pub replied: bool,
    /// Host tool calls to hand over: (call id, name, arguments). The agent registers them, then
    /// emits the events, so a host that answers at once finds the call pending.
    pub pending_tools: Vec<(String, String, String)>,
    pub error: Option<String>,
    pub calibration: Option<Calibration>,
    pub working_tokens: Option<u64>,
    pub importance_added: u64,
    pub reflected: bool,
    /// `error` is one that retrying cannot fix (a permanent LLM error): the turn fails at once.
    pub permanent: bool,
    /// The step used all of [`MAX_TOOL_ROUNDS`] without a final reply.
    pub tool_rounds_exhausted: bool,
}

/// One hosted agent.
#[derive(Debug)]
pub struct Agent {
    id: AgentId,
    /// The config from runtime.toml (or creation), before run-time overrides.
    base: AgentConfig,
    /// `base` with the run-time overrides applied: what the agent runs with.
    config: AgentConfig,
    overrides: AgentOverrides,
    counter: TokenCounter,
    deps: AgentDeps,
    /// Tokens of the persona (part of every prompt).
    persona_tokens: u64,
    /// Tokens of the last working context (an estimate for the O(1) usage check).
    working_tokens: u64,
    calibration: Calibration,
    state: AgentState,
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
    /// Ticks handled (for stats).
    pub ticks: u64,
}

impl Agent {
    /// Loads (or creates) the agent's record and applies its persisted run-time overrides.
    pub fn load(base: AgentConfig, deps: AgentDeps) -> Result<Self, AgentLoadError> {
        let now = deps.clock.now();
        let record = deps.store.ensure_agent(&base.id, now)?;
        let config = base
            .with_overrides(&record.overrides)
            .map_err(AgentLoadError::Config)?;
        let counter = TokenCounter::for_model(&config.model);
        let importance_since_reflection = importance_since_last_reflection(&deps.store, &base.id)?;
        let tail = deps.store.history_tail(&base.id, 1)?;
        let pending_tools = unanswered_host_calls(&deps.store, &base.id, &config, now)?;
        // Input, or a tool result the model has not seen yet, owes a reply (once no call waits).
        let needs_reply = tail
            .last()
            .is_some_and(|m| matches!(m.role, Role::User | Role::Tool));
        let state = if pending_tools.is_empty() {
            AgentState::Idle
        } else {
            AgentState::WaitingForTools
        };
        Ok(Agent {
            id: base.id.clone(),
            persona_tokens: u64::from(counter.count_text(&config.persona)),
            base,
            overrides: record.overrides,
            config,
            counter,
            deps,
            working_tokens: 0,
            calibration: record.calibration,
            state,
            needs_reply,
            reply_owed: false,
            reply_in_job: false,
            pending_tools,
            observations: Vec::new(),
            failures: 0,
            retry_at: None,
            importance_since_reflection,
            stuck_at: None,
            ticks: 0,
        })
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
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

    /// Prompt tokens now: persona + last working context + live history (O(1)).
    pub fn prompt_tokens(&self) -> Result<u64, StoreError> {
        Ok(self.persona_tokens + self.working_tokens + self.deps.store.usage_tokens(&self.id)?)
    }

    /// Usage now, 0–1, calibrated for inexact tokenizers ([`Usage`]). O(1): no history is read.
    pub fn usage(&self) -> Result<f64, StoreError> {
        Ok(Usage::new(
            self.persona_tokens + self.working_tokens,
            self.deps.store.usage_tokens(&self.id)?,
            calibration_factor(&self.counter, &self.calibration),
            self.config.compaction.max_context_tokens,
        )
        .fraction())
    }

    /// Takes input: appends it to history (or resolves a tool call) at once, so nothing is lost.
    ///
    /// Input larger than the agent's input limit
    /// ([`CompactionConfig::input_limit`](somna_core::config::CompactionConfig::input_limit)) is
    /// refused with [`InboundError::TooLarge`] before anything is written, so one input can never
    /// put the agent beyond what compaction can repair.
    pub fn inbound(&mut self, input: Inbound) -> Result<(), InboundError> {
        let now = self.deps.clock.now();
        match input {
            Inbound::User { content, name } => {
                if content.trim().is_empty() {
                    return Err(InboundError::Empty);
                }
                let mut m = Message::user(content).at(now);
                m.name = name;
                let m = self.admit(m)?;
                self.append_counted(m)?;
                self.needs_reply = true;
            }
            Inbound::Observation { content } => {
                if content.trim().is_empty() {
                    return Err(InboundError::Empty);
                }
                let m = self.admit(
                    Message::user(format!("[observation] {content}"))
                        .with_name("world")
                        .at(now),
                )?;
                self.append_counted(m)?;
                self.observations.push(content);
            }
            Inbound::ToolResult { call_id, content } => {
                let Some(i) = self.pending_tools.iter().position(|p| p.call_id == call_id) else {
                    return Err(InboundError::UnknownToolCall(call_id));
                };
                let m = self.admit(Message::tool_result(call_id, content).at(now))?;
                self.pending_tools.remove(i);
                self.append_counted(m)?;
                if self.pending_tools.is_empty() {
                    self.needs_reply = true;
                    if self.state == AgentState::WaitingForTools {
                        self.state = AgentState::Idle;
                    }
                }
            }
        }
        Ok(())
    }

    fn append(&self, mut m: Message) -> Result<Message, StoreError> {
        m.tokens = self.counter.count_message(&m);
        self.deps.store.append(&self.id, m, self.deps.clock.now())
    }

    /// Counts an input message and checks it against the input limit; the counted message (its
    /// `tokens` set) when it fits.
    fn admit(&self, mut m: Message) -> Result<Message, InboundError> {
        m.tokens = self.counter.count_message(&m);
        let tokens = self
            .counter
            .calibrated(u64::from(m.tokens), &self.calibration);
        let limit = self.config.compaction.input_limit();
        if tokens > u64::from(limit) {
            return Err(InboundError::TooLarge { tokens, limit });
        }
        Ok(m)
    }

    /// Appends a message [`Agent::admit`] counted.
    fn append_counted(&self, m: Message) -> Result<Message, StoreError> {
        self.deps.store.append(&self.id, m, self.deps.clock.now())
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
        let cfg = &self.config.compaction;
        let history_tokens = self.deps.store.usage_tokens(&self.id)?;
        let emergency = cfg.enabled
            && usage >= cfg.emergency_threshold
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

    /// Starts a sleep, unless the agent is busy (then `None`).
    pub fn sleep(&mut self) -> Option<Job> {
        (self.state == AgentState::Idle).then(|| self.start(JobKind::Sleep))
    }

    /// Starts a compaction asked for through the API, unless the agent is busy (then `None`).
    pub fn compact(&mut self, force: bool) -> Option<Job> {
        matches!(self.state, AgentState::Idle | AgentState::WaitingForTools)
            .then(|| self.start(JobKind::Compact { force }))
    }

    fn start(&mut self, kind: JobKind) -> Job {
        self.state = match kind {
            JobKind::Step => AgentState::Stepping,
            JobKind::Sleep => AgentState::Sleeping,
            JobKind::Emergency { .. } | JobKind::Compact { .. } => AgentState::Compacting,
        };
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
                fixed_tokens: self.persona_tokens + self.working_tokens,
            },
        }
    }

    /// Takes a finished job's outcome back into the agent's state.
    pub fn finish(&mut self, kind: JobKind, out: &JobOutcome) {
        let now = self.deps.clock.now();
        if let Some(c) = out.calibration {
            self.calibration = c;
        }
        if let Some(w) = out.working_tokens {
            self.working_tokens = w;
        }
        self.importance_since_reflection += out.importance_added;
        if out.reflected {
            self.importance_since_reflection = 0;
        }
        if let JobKind::Emergency { .. } = kind {
            self.note_emergency_result(now);
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
        self.state = if self.pending_tools.is_empty() {
            AgentState::Idle
        } else {
            AgentState::WaitingForTools
        };
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
    /// so once and wait for the history to change before trying again.
    fn note_emergency_result(&mut self, now: Timestamp) {
        let (Ok(usage), Ok(tokens)) = (self.usage(), self.deps.store.usage_tokens(&self.id)) else {
            return;
        };
        if usage < self.config.compaction.emergency_threshold {
            self.stuck_at = None;
            return;
        }
        if self.stuck_at.is_none() {
            let fixed = self.persona_tokens + self.working_tokens;
            let reason = match self
                .deps
                .compactor
                .over_threshold(&self.id, &self.config, fixed)
            {
                Ok(Some(why)) => why,
                Ok(None) | Err(_) => format!(
                    "usage is still {:.0}% after an emergency compaction",
                    usage * 100.0
                ),
            };
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
                self.state = AgentState::Idle;
            }
        }
        Ok(())
    }

    /// Changes the agent's config at run time: merged over earlier run-time changes, validated,
    /// persisted in its record, applied at once.
    pub fn configure(&mut self, changes: AgentOverrides) -> Result<AgentConfig, ConfigureError> {
        let mut merged = self.overrides.clone();
        merged.merge(changes);
        let config = self
            .base
            .with_overrides(&merged)
            .map_err(ConfigureError::Invalid)?;
        self.deps.store.set_overrides(&self.id, merged.clone())?;
        self.overrides = merged;
        self.counter = TokenCounter::for_model(&config.model);
        self.persona_tokens = u64::from(self.counter.count_text(&config.persona));
        self.config = config.clone();
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
            config: self.config.clone(),
            reply_owed: self.reply_owed,
        })
    }
}

/// Why an agent could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AgentLoadError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("invalid persisted config overrides:\n{0}")]
    Config(ConfigErrors),
}

/// Why a run-time config change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    #[error("{0}")]
    Invalid(ConfigErrors),
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

impl Job {
    /// Runs the job to completion. Store errors are reported in the outcome, never panics.
    pub async fn run(self) -> JobOutcome {
        let mut out = JobOutcome::default();
        let ctx = self.ctx;
        let result = match self.kind {
            JobKind::Emergency { then_step } => {
                let r = ctx.compact(Trigger::Emergency, &mut out).await;
                if r.is_ok() && then_step {
                    ctx.step(&mut out).await
                } else {
                    r
                }
            }
            JobKind::Step => ctx.step(&mut out).await,
            JobKind::Sleep => ctx.sleep(&mut out).await,
            JobKind::Compact { force } => {
                let trigger = if force {
                    Trigger::Manual
                } else {
                    Trigger::Sleep
                };
                ctx.compact(trigger, &mut out).await
            }
        };
        if let Err(e) = result {
            out.error = Some(e);
        }
        out
    }
}

impl JobContext {
    fn now(&self) -> Timestamp {
        self.deps.clock.now()
    }

    fn emit(&self, event: Event) {
        self.deps.events.emit(self.now(), event);
    }

    fn append(&self, mut m: Message) -> Result<Message, String> {
        m.tokens = self.counter.count_message(&m);
        self.deps
            .store
            .append(&self.id, m, self.now())
            .map_err(|e| format!("store: {e}"))
    }

    /// Runs one compaction and reports it as events.
    async fn compact(&self, trigger: Trigger, out: &mut JobOutcome) -> Result<(), String> {
        let fixed = self.fixed_tokens;
        let usage_before = self
            .deps
            .store
            .usage_tokens(&self.id)
            .map(|t| {
                Usage::new(
                    fixed,
                    t,
                    calibration_factor(&self.counter, &self.calibration),
                    self.config.compaction.max_context_tokens,
                )
                .fraction()
            })
            .unwrap_or(0.0);
        self.emit(Event::CompactionStarted {
            agent: self.id.clone(),
            trigger,
            usage: usage_before,
        });
        let outcome = self
            .deps
            .compactor
            .compact(CompactRequest {
                agent: &self.id,
                config: &self.config,
                trigger,
                fixed_tokens: fixed,
                now: self.now(),
            })
            .await
            .map_err(|e| e.to_string())?;
        match &outcome {
            CompactionOutcome::Done(report) => self.emit(Event::CompactionCompleted {
                agent: self.id.clone(),
                report: report.clone(),
            }),
            CompactionOutcome::Skipped { reason, usage } => self.emit(Event::CompactionSkipped {
                agent: self.id.clone(),
                trigger,
                reason: reason.to_string(),
                usage: *usage,
            }),
            CompactionOutcome::Failed { reason, .. } => self.emit(Event::CompactionFailed {
                agent: self.id.clone(),
                trigger,
                reason: reason.clone(),
            }),
            CompactionOutcome::Stalled { reduction_pct, .. } => {
                self.emit(Event::CompactionFailed {
                    agent: self.id.clone(),
                    trigger,
                    reason: format!("stalled: the summary would save only {reduction_pct:.1}%"),
                })
            }
            CompactionOutcome::Busy => self.emit(Event::CompactionSkipped {
                agent: self.id.clone(),
                trigger,
                reason: "another compaction is in flight".into(),
                usage: usage_before,
            }),
        }
        if let Some(w) = outcome.report().and_then(|r| r.warning.clone()) {
            self.emit(Event::Warning {
                agent: self.id.clone(),
                message: w,
            });
        }
        out.compaction = Some(outcome);
        Ok(())
    }

    /// Journals pending observations with their importance.
    async fn score_observations(&self, out: &mut JobOutcome) -> Result<(), String> {
        for text in &self.observations {
            let importance = match self.config.memory.importance {
                somna_core::config::Scorer::Llm => self.llm_importance(text).await,
                somna_core::config::Scorer::Heuristic => builtin::score_importance(text),
            };
            self.deps
                .store
                .append_journal(
                    &self.id,
                    JournalEntry::new(
                        self.now(),
                        SourceType::Observation,
                        importance,
                        text.clone(),
                    ),
                )
                .map_err(|e| format!("store: {e}"))?;
            out.importance_added += u64::from(importance);
        }
        Ok(())
    }

    async fn llm_importance(&self, text: &str) -> u8 {
        let request = prompts::score_request(&self.config.model, text);
        match self.deps.llm.chat(request).await {
            Ok(r) => {
                prompts::parse_score(&r.text).unwrap_or_else(|| builtin::score_importance(text))
            }
            Err(e) => {
                tracing::warn!(agent = %self.id, error = %e, "LLM importance scoring failed; using the heuristic");
                builtin::score_importance(text)
            }
        }
    }

    /// Scores observations, then (if a reply is owed) calls the LLM, runs built-in tools, hands
    /// host tool calls to the host, and appends the reply.
    async fn step(&self, out: &mut JobOutcome) -> Result<(), String> {
        self.score_observations(out).await?;
        if !self.needs_reply {
            return Ok(());
        }
        let store = &self.deps.store;
        let specs = tools::all_specs(&self.config);
        let mut calibration = self.calibration;
        for _round in 0..MAX_TOOL_ROUNDS {
            let history = store.history(&self.id).map_err(|e| format!("store: {e}"))?;
            let working = WorkingContext::gather(
                store,
                &self.id,
                prompt::latest_input(&history),
                &self.config.memory,
            )
            .map_err(|e| format!("store: {e}"))?;
            let built = prompt::build(&self.config, &working, &history, &self.counter);
            out.working_tokens = Some(built.working_tokens);
            let estimate = built.total_tokens();
            let request = ChatRequest::new(self.config.model.clone(), built.messages)
                .with_purpose(Purpose::Chat)
                .with_max_tokens(REPLY_MAX_TOKENS)
                .with_tools(specs.clone());
            let response = match self.deps.llm.chat(request).await {
                Ok(r) => r,
                Err(e) => {
                    out.permanent = e.is_permanent();
                    return Err(format!("LLM: {e}"));
                }
            };
            if let Some(u) = &response.usage {
                if !self.counter.is_exact() {
                    match calibration.observe(estimate, u64::from(u.prompt_tokens)) {
                        Observation::Accepted { .. } => {
                            out.calibration = Some(calibration);
                            let _ = store.update_calibration(&self.id, calibration);
                        }
                        Observation::Rejected(why) => {
                            tracing::warn!(agent = %self.id, %why, "ignored the server's usage report");
                        }
                    }
                }
            }
            if response.text.trim().is_empty() && response.tool_calls.is_empty() {
                return Err("LLM: the reply was empty".into());
            }
            let limit = reply_limit(&self.counter, REPLY_MAX_TOKENS);
            let arguments: u64 = response
                .tool_calls
                .iter()
                .map(|c| u64::from(self.counter.count_text(&c.arguments)))
                .sum();
            if arguments > limit {
                return Err(format!(
                    "LLM: the tool calls' arguments take {arguments} tokens, over the reply cap of \
{REPLY_MAX_TOKENS} (max_tokens)"
                ));
            }
            let capped = cap_reply(&self.counter, response.text.trim(), limit);
            let reply = self.append(
                Message::assistant_calls(capped.text.as_str(), response.tool_calls.clone())
                    .at(self.now()),
            )?;
            if let Some(tokens) = capped.cut_from {
                self.emit(Event::ReplyTruncated {
                    agent: self.id.clone(),
                    seq: reply.seq,
                    tokens,
                    kept: u64::from(self.counter.count_text(&reply.content)),
                });
            }
            if response.tool_calls.is_empty() {
                out.replied = true;
                self.emit(Event::AgentReplied {
                    agent: self.id.clone(),
                    seq: reply.seq,
                    text: reply.content,
                });
                return Ok(());
            }
            let mut waiting = Vec::new();
            for call in &response.tool_calls {
                if tools::is_builtin(&call.name) {
                    let result = tools::run_builtin(store, &self.id, call, self.now(), |t| {
                        builtin::score_importance(t)
                    })
                    .map_err(|e| format!("store: {e}"))?;
                    if call.name == tools::JOURNAL_ADD {
                        out.importance_added += journal_importance(call);
                    }
                    self.append(Message::tool_result(call.id.clone(), result).at(self.now()))?;
                } else if self.config.tools.iter().any(|t| t.name == call.name) {
                    waiting.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                } else {
                    self.append(
                        Message::tool_result(
                            call.id.clone(),
                            tools::error_result(&format!("there is no tool named {}", call.name)),
                        )
                        .at(self.now()),
                    )?;
                }
            }
            if !waiting.is_empty() {
                out.pending_tools = waiting;
                return Ok(());
            }
        }
        // Never silently: the host hears that the turn ended without a reply, and the status shows
        // the reply as owed.
        out.tool_rounds_exhausted = true;
        self.emit(Event::ToolRoundsExhausted {
            agent: self.id.clone(),
            rounds: MAX_TOOL_ROUNDS,
        });
        Ok(())
    }

    /// Sleep: consolidation, reflection, then compaction at the sleep threshold. A failed step
    /// does not stop the next one; every failure is reported in the job's error (the sleep's
    /// result), joined with "; ", and what failed is left for the next sleep to retry.
    async fn sleep(&self, out: &mut JobOutcome) -> Result<(), String> {
        self.emit(Event::SleepStarted {
            agent: self.id.clone(),
        });
        let mut failures = Vec::new();
        let (entries, facts) = self.consolidate().await.unwrap_or_else(|e| {
            failures.push(format!("consolidation failed: {e}"));
            (0, 0)
        });
        let reflections = self.reflect(out).await.unwrap_or_else(|e| {
            failures.push(format!("reflection failed: {e}"));
            0
        });
        self.emit(Event::ConsolidationCompleted {
            agent: self.id.clone(),
            entries,
            facts,
            reflections,
        });
        if let Err(e) = self.compact(Trigger::Sleep, out).await {
            failures.push(format!("compaction failed: {e}"));
        }
        if let Some(CompactionOutcome::Failed { reason, .. }) = &out.compaction {
            failures.push(format!("compaction failed: {reason}"));
        }
        self.emit(Event::SleepCompleted {
            agent: self.id.clone(),
        });
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    /// Distills unconsolidated journal entries into memory facts with provenance. Entries are
    /// marked consolidated only when the reply lists facts or says [`NO_FACTS`] outright; an LLM
    /// error or a reply with neither leaves them for the next sleep and is an error.
    async fn consolidate(&self) -> Result<(usize, usize), String> {
        let store = &self.deps.store;
        let mut entries = store
            .unconsolidated(&self.id, self.config.memory.min_importance)
            .map_err(|e| format!("store: {e}"))?;
        entries.truncate(CONSOLIDATION_BATCH);
        if entries.is_empty() {
            return Ok((0, 0));
        }
        let request = prompts::consolidate_request(&self.config.model, &entries);
        let all_ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
        let reply = self
            .deps
            .llm
            .chat(request)
            .await
            .map_err(|e| format!("LLM: {e}; the entries stay for the next sleep"))?;
        let now = self.now();
        let facts: Vec<Fact> = match prompts::parse_consolidation(&reply.text, &all_ids) {
            Consolidation::Facts(facts) => facts
                .into_iter()
                .map(|f| Fact::new(now, f.text, f.sources))
                .collect(),
            Consolidation::Nothing => Vec::new(),
            Consolidation::Unreadable => {
                return Err(format!(
                    "the reply has no `- fact` lines and is not {NO_FACTS}; {} entries stay for the \
next sleep (reply: {:?})",
                    entries.len(),
                    prompts::clip(reply.text.trim(), 120)
                ));
            }
        };
        let n = facts.len();
        store
            .consolidate(&self.id, facts, &all_ids)
            .map_err(|e| format!("store: {e}"))?;
        Ok((entries.len(), n))
    }

    /// Writes a reflection when enough importance has accumulated since the last one: at most
    /// [`MAX_REFLECTION_LINES`] entries of at most [`MAX_REFLECTION_CHARS`] characters each.
    async fn reflect(&self, out: &mut JobOutcome) -> Result<usize, String> {
        let accumulated = self.importance_since_reflection + out.importance_added;
        if accumulated < u64::from(self.config.memory.reflection_threshold) {
            return Ok(0);
        }
        let store = &self.deps.store;
        let recent = store
            .query_journal(
                &self.id,
                &JournalQuery {
                    limit: Some(30),
                    ..Default::default()
                },
            )
            .map_err(|e| format!("store: {e}"))?;
        let oldest_first: Vec<JournalEntry> = recent.into_iter().rev().collect();
        let request =
            prompts::reflect_request(&self.config.model, &self.config.persona, &oldest_first);
        let text = self
            .deps
            .llm
            .chat(request)
            .await
            .map_err(|e| format!("LLM: {e}"))?
            .text;
        let lines = prompts::parse_reflection(&text);
        for line in &lines {
            store
                .append_journal(
                    &self.id,
                    JournalEntry::new(
                        self.now(),
                        SourceType::Reflection,
                        REFLECTION_IMPORTANCE,
                        line.as_str(),
                    )
                    .with_tags(["reflection"]),
                )
                .map_err(|e| format!("store: {e}"))?;
        }
        out.reflected = !lines.is_empty();
        Ok(lines.len())
    }
}

/// The most tokens, by the local count, a reply may take when `cap` was asked for as `max_tokens`.
/// Exact tokenizers count what the server counts; the heuristic overestimates by up to about a
/// quarter, so it gets that much slack before a reply the model kept within `cap` is cut.
fn reply_limit(counter: &TokenCounter, cap: u32) -> u64 {
    let cap = u64::from(cap);
    if counter.is_exact() {
        cap
    } else {
        cap + cap / 4
    }
}

/// A reply after [`cap_reply`].
#[derive(Debug, Clone, PartialEq)]
struct CappedReply {
    /// The text to append: whole, or cut and ended with `…`.
    text: String,
    /// The local count of the whole text, when it was cut.
    cut_from: Option<u64>,
}

/// `text` when it fits in `limit` tokens; otherwise its longest prefix that fits together with a
/// closing `…`, ended at a word boundary when one lies in the last quarter of that prefix.
fn cap_reply(counter: &TokenCounter, text: &str, limit: u64) -> CappedReply {
    let total = u64::from(counter.count_text(text));
    if total <= limit {
        return CappedReply {
            text: text.to_string(),
            cut_from: None,
        };
    }
    const ELLIPSIS: &str = "…";
    let budget = limit.saturating_sub(u64::from(counter.count_text(ELLIPSIS)));
    let fits = |end: usize| u64::from(counter.count_text(&text[..end])) <= budget;
    // Binary search over char boundaries for the longest prefix within the budget (a prefix never
    // counts fewer tokens than a shorter one, closely enough for a cut).
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let fitting = bounds.partition_point(|&end| fits(end));
    let lo = bounds[fitting.saturating_sub(1)];
    let mut end = lo;
    if let Some(space) = text[..end].rfind(char::is_whitespace) {
        if space >= end - end / 4 {
            end = space;
        }
    }
    CappedReply {
        text: format!("{}{ELLIPSIS}", text[..end].trim_end()),
        cut_from: Some(total),
    }
}

/// The importance a `journal_add` call asked for (for the reflection counter).
fn journal_importance(call: &ToolCall) -> u64 {
    serde_json::from_str::<serde_json::Value>(&call.arguments)
        .ok()
        .and_then(|v| v.get("importance").and_then(serde_json::Value::as_u64))
        .unwrap_or(5)
        .clamp(1, 10)
}

/// Sum of importance of the journal entries written since the last reflection.
/// The host tool calls of the live history that no tool result answers yet, so that a restart
/// keeps waiting for them. Only the last assistant message with tool calls can have any (a step
/// waits for every call before the next), and only calls to the agent's host tools (built-in
/// calls are answered within the step). A restart gives the host a fresh `tool_timeout`.
fn unanswered_host_calls(
    store: &Store,
    id: &AgentId,
    config: &AgentConfig,
    now: Timestamp,
) -> Result<Vec<PendingTool>, StoreError> {
    if config.tools.is_empty() {
        return Ok(Vec::new());
    }
    // Read the tail in growing pieces until it holds an assistant message with tool calls (or it
    // is the whole history): the calls are normally among the last few messages.
    let mut n = 16;
    let tail = loop {
        let tail = store.history_tail(id, n)?;
        if tail.len() < n || tail.iter().any(|m| !m.tool_calls.is_empty()) {
            break tail;
        }
        n *= 4;
    };
    let Some(at) = tail.iter().rposition(|m| !m.tool_calls.is_empty()) else {
        return Ok(Vec::new());
    };
    let answered: Vec<&str> = tail[at + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let deadline = now.saturating_add(config.tool_timeout);
    Ok(tail[at]
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .filter(|c| config.tools.iter().any(|t| t.name == c.name))
        .map(|c| PendingTool {
            call_id: c.id.clone(),
            name: c.name.clone(),
            deadline,
        })
        .collect())
}

fn importance_since_last_reflection(store: &Store, id: &AgentId) -> Result<u64, StoreError> {
    let last = store
        .query_journal(
            id,
            &JournalQuery {
                source_type: Some(SourceType::Reflection),
                limit: Some(1),
                ..Default::default()
            },
        )?
        .first()
        .map(|e| e.id);
    let entries = store.query_journal(id, &JournalQuery::default())?;
    Ok(entries
        .iter()
        .filter(|e| last.is_none_or(|l| e.id > l))
        .filter(|e| e.source_type != SourceType::Compaction)
        .map(|e| u64::from(e.importance))
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_within_the_limit_is_kept_whole() {
        let counter = TokenCounter::heuristic();
        let capped = cap_reply(&counter, "Here is your sword.", 640);
        assert_eq!(capped.text, "Here is your sword.");
        assert_eq!(capped.cut_from, None);
    }

    #[test]
    fn an_oversize_reply_is_cut_within_the_limit_at_a_word() {
        for counter in [TokenCounter::heuristic(), TokenCounter::for_model("gpt-4o")] {
            let limit = reply_limit(&counter, REPLY_MAX_TOKENS);
            let text = "the mill wheel turns and the river runs ".repeat(5000);
            let capped = cap_reply(&counter, &text, limit);
            let kept = u64::from(counter.count_text(&capped.text));
            assert!(kept <= limit, "{kept} > {limit}");
            // Not cut far short: at most a word and the ellipsis below the limit.
            assert!(kept + 4 >= limit, "{kept} ≪ {limit}");
            assert!(capped.text.ends_with("…"));
            assert!(text.starts_with(capped.text.trim_end_matches('…')));
            assert_eq!(capped.cut_from, Some(u64::from(counter.count_text(&text))));
        }
        // Multi-byte text without spaces is cut on a char boundary.
        let counter = TokenCounter::heuristic();
        let capped = cap_reply(&counter, &"日本語".repeat(1000), 10);
        assert_eq!(capped.text, format!("{}…", "日本語".repeat(3)));
    }
}
