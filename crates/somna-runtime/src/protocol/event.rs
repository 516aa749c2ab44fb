//! What happened in the runtime ([`Event`], with its time: [`Stamped`]): what the SSE stream,
//! the CLI's progress lines, a cluster's relay and tests see. The bus that carries them is
//! [`crate::events::EventBus`].

use serde::{Deserialize, Serialize};
use somna_core::record::Trigger;
use somna_core::{AgentId, GroundingCounts, Timestamp};

use super::{ChatUsage, CompactionReport};

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
        /// Brought forward because a turn left the agent near its emergency threshold (see
        /// `scheduler::Tired`); absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tired: bool,
    },
    ConsolidationCompleted {
        agent: AgentId,
        entries: usize,
        facts: usize,
        reflections: usize,
        /// What the grounding check did with the facts and reflections the model wrote.
        #[serde(default)]
        grounding: GroundingCounts,
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
    /// Every event `type` ([`Event::kind`]), in declaration order: the closed set of names a
    /// consumer (the metrics' `type` label) can expect.
    pub const KINDS: [&'static str; 18] = [
        "compaction_started",
        "compaction_completed",
        "compaction_skipped",
        "compaction_failed",
        "emergency_triggered",
        "uncompacted",
        "sleep_started",
        "consolidation_completed",
        "sleep_completed",
        "agent_replied",
        "tool_call_requested",
        "tool_call_timed_out",
        "warning",
        "error",
        "emergency_stuck",
        "reply_truncated",
        "turn_failed",
        "tool_rounds_exhausted",
    ];

    /// The agent it concerns.
    pub fn agent(&self) -> &AgentId {
        match self {
            Event::CompactionStarted { agent, .. }
            | Event::CompactionCompleted { agent, .. }
            | Event::CompactionSkipped { agent, .. }
            | Event::CompactionFailed { agent, .. }
            | Event::EmergencyTriggered { agent, .. }
            | Event::Uncompacted { agent, .. }
            | Event::SleepStarted { agent, .. }
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

#[cfg(test)]
mod tests {
    use somna_core::record::CompactionMethod;

    use super::*;

    /// One event of each variant, in declaration order. `variant` below fails to compile when a
    /// variant is added, as a reminder to add it here and to [`Event::KINDS`].
    fn one_of_each() -> Vec<Event> {
        let agent = AgentId::new("ada").unwrap();
        let text = String::from("x");
        let report = CompactionReport {
            trigger: Trigger::Manual,
            method: CompactionMethod::Llm,
            compacted: 1,
            preserved: 1,
            tokens_before: 2,
            tokens_after: 1,
            reduction_pct: 50.0,
            usage_after: 0.1,
            summary_seq: None,
            generation: 1,
            fallback_reason: None,
            warning: None,
            grounding: None,
            stuck: None,
        };
        let (a, t, trigger) = (agent, text, Trigger::Sleep);
        vec![
            Event::CompactionStarted {
                agent: a.clone(),
                trigger,
                usage: 0.5,
            },
            Event::CompactionCompleted {
                agent: a.clone(),
                report,
            },
            Event::CompactionSkipped {
                agent: a.clone(),
                trigger,
                reason: t.clone(),
                usage: 0.1,
            },
            Event::CompactionFailed {
                agent: a.clone(),
                trigger,
                reason: t.clone(),
            },
            Event::EmergencyTriggered {
                agent: a.clone(),
                usage: 0.9,
            },
            Event::Uncompacted {
                agent: a.clone(),
                summary_seq: 1,
                restored: 2,
            },
            Event::SleepStarted {
                agent: a.clone(),
                tired: false,
            },
            Event::ConsolidationCompleted {
                agent: a.clone(),
                entries: 1,
                facts: 1,
                reflections: 0,
                grounding: GroundingCounts::default(),
            },
            Event::SleepCompleted { agent: a.clone() },
            Event::AgentReplied {
                agent: a.clone(),
                seq: 1,
                text: t.clone(),
                usage: ChatUsage::default(),
            },
            Event::ToolCallRequested {
                agent: a.clone(),
                call_id: t.clone(),
                name: t.clone(),
                arguments: t.clone(),
            },
            Event::ToolCallTimedOut {
                agent: a.clone(),
                call_id: t.clone(),
                name: t.clone(),
            },
            Event::Warning {
                agent: a.clone(),
                message: t.clone(),
            },
            Event::Error {
                agent: a.clone(),
                message: t.clone(),
            },
            Event::EmergencyStuck {
                agent: a.clone(),
                usage: 0.9,
                threshold: 0.8,
                reason: t.clone(),
            },
            Event::ReplyTruncated {
                agent: a.clone(),
                seq: 1,
                tokens: 9,
                kept: 5,
            },
            Event::TurnFailed {
                agent: a.clone(),
                attempts: 3,
                reason: t,
            },
            Event::ToolRoundsExhausted {
                agent: a,
                rounds: 4,
            },
        ]
    }

    /// The variant's position in the declaration.
    fn variant(e: &Event) -> usize {
        match e {
            Event::CompactionStarted { .. } => 0,
            Event::CompactionCompleted { .. } => 1,
            Event::CompactionSkipped { .. } => 2,
            Event::CompactionFailed { .. } => 3,
            Event::EmergencyTriggered { .. } => 4,
            Event::Uncompacted { .. } => 5,
            Event::SleepStarted { .. } => 6,
            Event::ConsolidationCompleted { .. } => 7,
            Event::SleepCompleted { .. } => 8,
            Event::AgentReplied { .. } => 9,
            Event::ToolCallRequested { .. } => 10,
            Event::ToolCallTimedOut { .. } => 11,
            Event::Warning { .. } => 12,
            Event::Error { .. } => 13,
            Event::EmergencyStuck { .. } => 14,
            Event::ReplyTruncated { .. } => 15,
            Event::TurnFailed { .. } => 16,
            Event::ToolRoundsExhausted { .. } => 17,
        }
    }

    #[test]
    fn kinds_lists_every_type_as_serialized() {
        let events = one_of_each();
        assert_eq!(events.len(), Event::KINDS.len());
        for (i, e) in events.iter().enumerate() {
            assert_eq!(variant(e), i);
            assert_eq!(e.kind(), Event::KINDS[i]);
            let json = serde_json::to_value(e).unwrap();
            assert_eq!(json["type"], e.kind());
        }
        let mut names = Event::KINDS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Event::KINDS.len(), "a name twice");
    }
}
