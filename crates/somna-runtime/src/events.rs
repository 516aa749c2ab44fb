//! Runtime events: what subscribers (the HTTP API's SSE stream, the CLI's progress lines, tests) see.
//!
//! Every event goes to `tracing` and to a broadcast channel; compaction records also go to the
//! store's `events` tree (written by the store in the commit transaction).

use serde::{Deserialize, Serialize};
use somna_core::record::Trigger;
use somna_core::{AgentId, Timestamp};
use tokio::sync::broadcast;

use crate::agent::ChatUsage;
use crate::compactor::CompactionReport;

/// One thing that happened in the runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    CompactionStarted {
        agent: AgentId,
        trigger: Trigger,
        usage: f64,
    },
    CompactionCompleted {
        agent: AgentId,
        report: CompactionReport,
    },
    CompactionSkipped {
        agent: AgentId,
        trigger: Trigger,
        reason: String,
        usage: f64,
    },
    CompactionFailed {
        agent: AgentId,
        trigger: Trigger,
        reason: String,
    },
    EmergencyTriggered {
        agent: AgentId,
        usage: f64,
    },
    /// A compaction was undone: the originals are back in place of the summary.
    Uncompacted {
        agent: AgentId,
        summary_seq: u64,
        restored: u32,
    },
    SleepStarted {
        agent: AgentId,
    },
    ConsolidationCompleted {
        agent: AgentId,
        entries: usize,
        facts: usize,
        reflections: usize,
    },
    SleepCompleted {
        agent: AgentId,
    },
    /// The agent appended a reply. `usage` is what the server reported for the turn's chat calls
    /// (tool rounds included): prompt tokens and, when the server says, how many it served from
    /// its cache; left out when it reported nothing.
    AgentReplied {
        agent: AgentId,
        seq: u64,
        text: String,
        #[serde(skip_serializing_if = "ChatUsage::is_empty")]
        usage: ChatUsage,
    },
    /// The agent called a host-defined tool; the host answers with a tool result.
    ToolCallRequested {
        agent: AgentId,
        call_id: String,
        name: String,
        arguments: String,
    },
    /// A host tool did not answer in time; the model was told so.
    ToolCallTimedOut {
        agent: AgentId,
        call_id: String,
        name: String,
    },
    Warning {
        agent: AgentId,
        message: String,
    },
    /// An LLM call or store operation failed during a step.
    Error {
        agent: AgentId,
        message: String,
    },
    /// An emergency compaction ended with usage still at or above the emergency threshold.
    /// Emitted once; no emergency runs again until the history changes.
    EmergencyStuck {
        agent: AgentId,
        /// Usage after the emergency, 0–1.
        usage: f64,
        threshold: f64,
        /// Exactly why, with the numbers (see `Compactor::over_threshold`).
        reason: String,
    },
    /// The model's reply ran past the cap the agent asked for (`max_tokens`); it was cut there.
    /// `tokens` is the local count of what the model sent, `kept` of what was appended.
    ReplyTruncated {
        agent: AgentId,
        seq: u64,
        tokens: u64,
        kept: u64,
    },
    /// A chat turn gave up without a reply: the LLM failed permanently (a 4xx such as 401 or 404)
    /// or `attempts` attempts in a row failed. The reply stays owed (`reply_owed` in the status);
    /// the agent tries again when new input arrives.
    TurnFailed {
        agent: AgentId,
        attempts: u32,
        reason: String,
    },
    /// The step used all its tool rounds without a final reply; the reply stays owed.
    ToolRoundsExhausted {
        agent: AgentId,
        rounds: u32,
    },
}

impl Event {
    /// The agent it concerns.
    pub fn agent(&self) -> &AgentId {
        match self {
            Event::CompactionStarted { agent, .. }
            | Event::CompactionCompleted { agent, .. }
            | Event::CompactionSkipped { agent, .. }
            | Event::CompactionFailed { agent, .. }
            | Event::EmergencyTriggered { agent, .. }
            | Event::Uncompacted { agent, .. }
            | Event::SleepStarted { agent }
            | Event::ConsolidationCompleted { agent, .. }
            | Event::SleepCompleted { agent }
            | Event::AgentReplied { agent, .. }
            | Event::ToolCallRequested { agent, .. }
            | Event::ToolCallTimedOut { agent, .. }
            | Event::Warning { agent, .. }
            | Event::Error { agent, .. }
            | Event::EmergencyStuck { agent, .. }
            | Event::ReplyTruncated { agent, .. }
            | Event::TurnFailed { agent, .. }
            | Event::ToolRoundsExhausted { agent, .. } => agent,
        }
    }

    /// The event's `type` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::CompactionStarted { .. } => "compaction_started",
            Event::CompactionCompleted { .. } => "compaction_completed",
            Event::CompactionSkipped { .. } => "compaction_skipped",
            Event::CompactionFailed { .. } => "compaction_failed",
            Event::EmergencyTriggered { .. } => "emergency_triggered",
            Event::Uncompacted { .. } => "uncompacted",
            Event::SleepStarted { .. } => "sleep_started",
            Event::ConsolidationCompleted { .. } => "consolidation_completed",
            Event::SleepCompleted { .. } => "sleep_completed",
            Event::AgentReplied { .. } => "agent_replied",
            Event::ToolCallRequested { .. } => "tool_call_requested",
            Event::ToolCallTimedOut { .. } => "tool_call_timed_out",
            Event::Warning { .. } => "warning",
            Event::Error { .. } => "error",
            Event::EmergencyStuck { .. } => "emergency_stuck",
            Event::ReplyTruncated { .. } => "reply_truncated",
            Event::TurnFailed { .. } => "turn_failed",
            Event::ToolRoundsExhausted { .. } => "tool_rounds_exhausted",
        }
    }
}

/// An event with the time it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    pub at: Timestamp,
    #[serde(flatten)]
    pub event: Event,
}

/// Publishes events to tracing and to every subscriber. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    /// Every event a subscriber sees: this runtime's and, in a cluster, the other nodes'.
    tx: broadcast::Sender<Stamped>,
    /// This runtime's own events only (what a cluster node publishes to the others).
    local: broadcast::Sender<Stamped>,
}

impl EventBus {
    /// A bus whose subscribers may lag by up to `capacity` events before they miss some.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        let (local, _) = broadcast::channel(capacity.max(16));
        EventBus { tx, local }
    }

    /// A subscriber to this runtime's own events (not those relayed from other nodes).
    pub fn subscribe_local(&self) -> broadcast::Receiver<Stamped> {
        self.local.subscribe()
    }

    /// Delivers an event another node of the cluster emitted to this runtime's subscribers.
    pub fn relay(&self, stamped: Stamped) {
        let _ = self.tx.send(stamped);
    }

    /// A new subscriber that sees every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Stamped> {
        self.tx.subscribe()
    }

    /// Logs `event` and sends it to subscribers (none listening is fine).
    pub fn emit(&self, at: Timestamp, event: Event) {
        match &event {
            Event::CompactionFailed { .. }
            | Event::Warning { .. }
            | Event::Error { .. }
            | Event::EmergencyStuck { .. }
            | Event::ReplyTruncated { .. }
            | Event::TurnFailed { .. }
            | Event::ToolRoundsExhausted { .. } => {
                tracing::warn!(agent = %event.agent(), kind = event.kind(), ?event, "event");
            }
            Event::AgentReplied { .. } => {
                tracing::debug!(agent = %event.agent(), kind = event.kind(), "event");
            }
            _ => tracing::info!(agent = %event.agent(), kind = event.kind(), "event"),
        }
        let stamped = Stamped { at, event };
        // Only a cluster node publishing to NATS listens to its own events apart.
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(stamped.clone());
        }
        let _ = self.tx.send(stamped);
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(4096)
    }
}
