//! What an agent takes and what it reports: the input ([`Inbound`]), why input is refused
//! ([`InboundError`]), its status ([`AgentState`], [`PendingTool`], [`AgentStatus`],
//! [`CalibrationStatus`], [`ChatUsage`]).

use serde::{Deserialize, Serialize};
use somna_core::config::AgentConfig;
use somna_core::{AgentId, Timestamp};
use somna_store::StoreError;

/// Input for an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Inbound {
    /// Someone speaks to the agent; it owes a reply.
    User {
        /// Not blank.
        #[cfg_attr(feature = "openapi", schema(pattern = "\\S"))]
        content: String,
        #[serde(default)]
        name: Option<String>,
    },
    /// Something happens in the agent's world: journaled and added to its context, no reply owed.
    Observation {
        /// Not blank.
        #[cfg_attr(feature = "openapi", schema(pattern = "\\S"))]
        content: String,
    },
    /// The host's answer to a host-defined tool call.
    ToolResult { call_id: String, content: String },
}

impl Inbound {
    /// Spoken or observed text that is empty (refused with [`InboundError::Empty`]); a tool
    /// result may be empty.
    pub fn is_blank(&self) -> bool {
        match self {
            Inbound::User { content, .. } | Inbound::Observation { content } => {
                content.trim().is_empty()
            }
            Inbound::ToolResult { .. } => false,
        }
    }
}

/// Why input was refused.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    #[error("no pending tool call with id {0:?}")]
    UnknownToolCall(String),
    #[error("content is empty")]
    Empty,
    #[error(transparent)]
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

somna_core::str_enum! {
    /// What an agent is doing right now; its name is the one used in the API and metrics labels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum AgentState as "agent state" {
        /// Nothing in flight: waiting for input, a tick's step or a sleep.
        Idle = "idle",
        /// A step (an LLM turn, its tool rounds) is in flight.
        Stepping = "stepping",
        /// A compaction (emergency or asked for) is in flight.
        Compacting = "compacting",
        /// A sleep (consolidation, reflection, compaction) is in flight.
        Sleeping = "sleeping",
        /// Waiting for the host to answer tool calls.
        WaitingForTools = "waiting_for_tools",
    }
}

/// A host tool call the agent is waiting on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PendingTool {
    pub call_id: String,
    pub name: String,
    /// When the model gets an error result instead.
    pub deadline: Timestamp,
}

/// An agent's status, for the API and the CLI (which also reads it back from the API's answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentStatus {
    pub id: AgentId,
    /// On a cluster, the node that runs the agent (`None`: no node holds its shard right now);
    /// outside a cluster, always `None`. Any node answers; the others read the stored state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
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
    /// What the server reported for this agent's chat calls since it was loaded: how much of the
    /// prompts its cache served (the cache-stable layout and `llm.cache_hint` are for this).
    #[serde(default)]
    pub chat_usage: ChatUsage,
    /// What the grounding check did with every item models wrote into this agent's memory
    /// (summary items, extracted and consolidated facts, reflections), since it was created.
    #[serde(default)]
    pub grounding: somna_core::GroundingCounts,
    /// How usage is calibrated against the LLM server's token counts (tokenizers Somna only
    /// estimates; docs/llm.md).
    #[serde(default)]
    pub calibration: CalibrationStatus,
}

/// The calibration of an agent's usage, as its status shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CalibrationStatus {
    /// The ratio of the server's prompt-token counts to Somna's estimate, learned from its reports.
    pub learned: f64,
    /// The factor usage is multiplied by: the learned one, at least 1.0, and at most 1.3 until
    /// enough reports agree (`held_back`); 1.0 for a model Somna counts exactly.
    pub applied: f64,
    /// The server's reports that fed `learned`.
    pub samples: u32,
    /// `learned` is above what is applied for want of corroboration.
    pub held_back: bool,
}

/// Prompt tokens a server reported for chat calls, and how many of them it served from its
/// prompt cache. Counted only from calls whose usage the server reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatUsage {
    /// Chat calls whose usage the server reported.
    pub calls: u64,
    /// Their prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// Of those, the tokens served from the server's prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`); `None` while the server never said.
    pub cached_prompt_tokens: Option<u64>,
}

impl ChatUsage {
    /// Counts one call's usage report (none: nothing to count).
    pub fn add(&mut self, usage: Option<&somna_llm::Usage>) {
        let Some(u) = usage else { return };
        self.calls += 1;
        self.prompt_tokens += u64::from(u.prompt_tokens);
        if let Some(cached) = u.cached_tokens {
            // Evidence, not truth: never more cached than the prompt held.
            let cached = u64::from(cached.min(u.prompt_tokens));
            *self.cached_prompt_tokens.get_or_insert(0) += cached;
        }
    }

    /// Adds another count to this one.
    pub fn merge(&mut self, other: &ChatUsage) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        if let Some(cached) = other.cached_prompt_tokens {
            *self.cached_prompt_tokens.get_or_insert(0) += cached;
        }
    }

    /// True when no call was counted.
    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }
}
