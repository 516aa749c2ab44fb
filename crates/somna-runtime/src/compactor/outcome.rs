//! What goes into a compaction and what comes out: the request, the outcome (expected results are
//! values), the report of a committed compaction, and the one error the engine cannot turn into
//! an outcome.

use serde::{Deserialize, Serialize};
use somna_core::compaction::SkipReason;
use somna_core::config::AgentConfig;
use somna_core::record::{CompactionMethod, Trigger, reduction_pct};
use somna_core::{AgentId, GroundingCounts, Timestamp};
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

/// The result of one compaction attempt. Expected outcomes are values, not errors.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// Nothing to do.
    Skipped { reason: SkipReason, usage: f64 },
    /// A summary (or fallback) was committed.
    Done(CompactionReport),
    /// The attempt failed and changed nothing; a later trigger retries.
    Failed { reason: String, usage: f64 },
    /// The summary would save under 5%: not committed, no retry loop.
    Stalled { reduction_pct: f64, usage: f64 },
    /// Another compaction of this agent is in flight.
    Busy,
}

/// What a committed compaction did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionReport {
    pub trigger: Trigger,
    pub method: CompactionMethod,
    /// History messages replaced by the summary (or masked).
    pub compacted: u32,
    /// Messages kept verbatim after the summary.
    pub preserved: u32,
    /// Prompt tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub reduction_pct: f64,
    /// Usage after, 0–1.
    pub usage_after: f64,
    /// Seq of the summary message (None for masking only).
    pub summary_seq: Option<u64>,
    pub generation: u32,
    /// Set when the LLM failed and a fallback did the work.
    pub fallback_reason: Option<String>,
    /// Set past `warn_after_compactions`.
    pub warning: Option<String>,
    /// What the grounding check did with the summary's items and the extracted facts (`None`
    /// for masking and the archive marker, which no model wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<GroundingCounts>,
}

impl CompactionReport {
    /// The one constructor: what `method` compacted for `trigger`, the prompt's tokens before and
    /// after (the reduction is computed from them) and the usage after. The rest starts empty
    /// (no summary, generation 0, no fallback reason, no warning) for the caller to fill in.
    pub(super) fn new(
        trigger: Trigger,
        method: CompactionMethod,
        compacted: u32,
        (tokens_before, tokens_after): (u64, u64),
        usage_after: f64,
    ) -> Self {
        CompactionReport {
            trigger,
            method,
            compacted,
            preserved: 0,
            tokens_before,
            tokens_after,
            reduction_pct: reduction_pct(tokens_before, tokens_after),
            usage_after,
            summary_seq: None,
            generation: 0,
            fallback_reason: None,
            warning: None,
            grounding: None,
        }
    }

    /// The same report with its totals measured from `tokens_before` (the last report of a
    /// fallback sequence, measured from the very start).
    pub(super) fn measured_from(mut self, tokens_before: u64) -> Self {
        self.tokens_before = tokens_before;
        self.reduction_pct = reduction_pct(tokens_before, self.tokens_after);
        self
    }
}

impl CompactionOutcome {
    /// The report of a committed compaction.
    pub fn report(&self) -> Option<&CompactionReport> {
        match self {
            CompactionOutcome::Done(r) => Some(r),
            _ => None,
        }
    }
}

/// Errors the engine cannot turn into an outcome: the store failed.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Store(#[from] StoreError),
}
