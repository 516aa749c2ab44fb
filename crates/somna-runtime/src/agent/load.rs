//! Loading an agent: its record, its persisted run-time overrides, and what the stored history
//! says it owes (a reply, host tool calls still open) and has earned (importance since its last
//! reflection).

use std::sync::Arc;

use somna_core::config::AgentConfig;
use somna_core::message::Role;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, JournalQuery, SourceType, Timestamp};
use somna_store::{Store, StoreError};

use super::{Agent, AgentDeps, AgentLoadError};
use crate::protocol::{AgentState, ChatUsage, PendingTool};

impl Agent {
    /// Loads (or creates) the agent's record and applies its persisted run-time overrides.
    pub fn load(base: AgentConfig, deps: AgentDeps) -> Result<Self, AgentLoadError> {
        let now = deps.clock.now();
        let record = deps.store.ensure_agent(&base.id, now)?;
        Self::from_record(base, deps, record, true)
    }

    /// The agent as its stored state has it, to answer for it where it is not hosted (another
    /// node of a cluster runs it): writes nothing. `None` when the store does not know it.
    pub fn peek(base: AgentConfig, deps: AgentDeps) -> Result<Option<Self>, AgentLoadError> {
        let Some(record) = deps.store.agent(&base.id)? else {
            return Ok(None);
        };
        Self::from_record(base, deps, record, false).map(Some)
    }

    fn from_record(
        base: AgentConfig,
        deps: AgentDeps,
        record: somna_core::AgentRecord,
        hosting: bool,
    ) -> Result<Self, AgentLoadError> {
        let now = deps.clock.now();
        let base = Arc::new(base);
        let config = if record.overrides.is_empty() {
            Arc::clone(&base)
        } else {
            Arc::new(
                base.with_overrides(&record.overrides)
                    .map_err(AgentLoadError::Config)?,
            )
        };
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
        // The durable sleep schedule: a cluster node records the first due time at once, so the
        // node that takes over the agent's shard keeps it.
        let next_sleep_at = match record.next_sleep_at {
            Some(at) => Some(at),
            None if hosting && deps.store.cluster().is_some() => {
                let at = now.saturating_add(config.sleep_every);
                deps.store.set_next_sleep(&base.id, at)?;
                Some(at)
            }
            None => None,
        };
        let gauge = Arc::new(deps.gauges.register(state, 0.0));
        let agent = Agent {
            next_sleep_at,
            id: base.id.clone(),
            persona_tokens: u64::from(counter.count_text(&config.persona)),
            base,
            config,
            counter,
            deps,
            calibration: record.calibration,
            state,
            gauge,
            needs_reply,
            reply_owed: false,
            reply_in_job: false,
            pending_tools,
            observations: Vec::new(),
            failures: 0,
            retry_at: None,
            importance_since_reflection,
            stuck_at: None,
            chat_usage: ChatUsage::default(),
            ticks: 0,
        };
        agent.note_usage();
        Ok(agent)
    }
}

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

/// Sum of importance of the journal entries written since the last reflection.
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
