//! The answers to requests an agent runs between jobs: a sleep ([`SleepResult`]), a compaction
//! ([`CompactionOutcome`], with the [`CompactionReport`] of a committed one) and an undo
//! ([`UncompactResult`]). The actor sends them, the API serializes them, the CLI reads them back
//! (from the API's JSON or from a job it ran itself) as the same types.

use serde::{Deserialize, Serialize};
use somna_core::compaction::SkipReason;
use somna_core::record::{CompactionMethod, Trigger, reduction_pct};
use somna_core::{GroundingCounts, Timestamp};
use somna_store::{StoreError, UncompactOutcome};

/// What a `Sleep` request came to. A sleep asked for while the agent is busy waits for the job in
/// flight (up to [`MAX_DEFERRED`](crate::actor::MAX_DEFERRED) requests), then runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SleepResult {
    /// The sleep ran; its compaction outcome (if it got that far).
    Slept {
        compaction: Option<CompactionOutcome>,
        error: Option<String>,
        /// Whether the sleep wrote a reflection (docs/memory.md).
        #[serde(default)]
        reflected: bool,
        /// The durable schedule's next due time the sleep recorded, for the scheduler (which
        /// follows the record, so that it never sends a sleep before it is due); not on the wire.
        #[serde(skip)]
        #[cfg_attr(feature = "openapi", schema(ignore))]
        next_sleep_at: Option<Timestamp>,
    },
    /// The agent could not sleep: it is waiting on host tools, shutting down, or has too many
    /// requests queued. Nothing ran.
    Busy,
}

/// What an `Uncompact` request came to.
pub type UncompactResult = Result<UncompactOutcome, UncompactError>;

/// Why an uncompact did not run.
#[derive(Debug, thiserror::Error)]
pub enum UncompactError {
    #[error("the agent is busy (stopping, or too many requests queued)")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The result of one compaction attempt. Expected outcomes are values, not errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// Nothing to do.
    Skipped {
        reason: SkipReason,
        usage: f64,
        /// An emergency compaction skipped while the prompt is at or above the emergency
        /// threshold (the persona, working context and kept messages alone take the room): why,
        /// in numbers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stuck: Option<String>,
    },
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
    /// An emergency compaction that left the prompt at or above the emergency threshold: why, in
    /// numbers (what takes the room no compaction can free). `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<String>,
}

impl CompactionReport {
    /// The one constructor: what `method` compacted for `trigger`, the prompt's tokens before and
    /// after (the reduction is computed from them) and the usage after. The rest starts empty
    /// (no summary, generation 0, no fallback reason, no warning) for the caller to fill in.
    pub(crate) fn new(
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
            stuck: None,
        }
    }

    /// The same report with its totals measured from `tokens_before` (the last report of a
    /// fallback sequence, measured from the very start).
    pub(crate) fn measured_from(mut self, tokens_before: u64) -> Self {
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
