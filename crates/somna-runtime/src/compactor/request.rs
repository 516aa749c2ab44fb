//! What goes into a compaction (the request) and the one error the engine cannot turn into an
//! outcome. What comes out, [`CompactionOutcome`](crate::protocol::CompactionOutcome) (expected
//! results are values), crosses the runtime's boundary and lives in [`crate::protocol`].

use somna_core::config::AgentConfig;
use somna_core::record::Trigger;
use somna_core::{AgentId, Timestamp};
use somna_store::StoreError;

/// What the engine needs to compact one agent.
#[derive(Debug, Clone, Copy)]
pub struct CompactRequest<'a> {
    pub agent: &'a AgentId,
    pub config: &'a AgentConfig,
    pub trigger: Trigger,
    /// Tokens of the prompt outside history: persona and working context.
    pub fixed_tokens: u64,
    pub now: Timestamp,
}

/// Errors the engine cannot turn into an outcome: the store failed.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Store(#[from] StoreError),
}
