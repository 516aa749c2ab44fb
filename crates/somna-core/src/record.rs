//! Per-agent bookkeeping (`AgentRecord`) and the durable log (`CompactionRecord`, `EventRecord`,
//! `LoggedEvent`).

use serde::{Deserialize, Serialize};

use crate::config::AgentOverrides;
use crate::id::AgentId;
use crate::journal::{EntryId, FactId};
use crate::message::Seq;
use crate::time::Timestamp;
use crate::tokens::Calibration;

/// What the store keeps per agent in the `agents` tree.
///
/// The counters are updated in the same sled transaction as the data they count, so they are always
/// consistent with the trees after a crash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub id: AgentId,
    pub created_at: Timestamp,
    /// Config changes made at run time (API `configure`); applied over runtime.toml's values.
    #[serde(default)]
    pub overrides: AgentOverrides,
    #[serde(default)]
    pub last_compaction: Option<Timestamp>,
    #[serde(default)]
    pub compaction_count: u32,
    /// Correction factor for models whose tokenizer Somna does not know exactly.
    #[serde(default)]
    pub calibration: Calibration,
    /// The seq the next appended message gets.
    pub next_seq: Seq,
    /// The id the next journal entry gets.
    pub next_entry_id: EntryId,
    /// The id the next memory fact gets.
    pub next_fact_id: FactId,
    /// The seq the next event gets.
    pub next_event_seq: u64,
    /// Sum of the `tokens` of every message in live history (the O(1) usage read).
    pub history_tokens: u64,
    /// Number of messages in live history.
    pub history_len: u64,
    /// Number of messages in the archive.
    pub archive_len: u64,
    /// Set when the agent is deleted through the API: its data stays, it is no longer hosted.
    #[serde(default)]
    pub retired: bool,
    /// The live summaries written in store layout 2, in seq order: each hides the run of the
    /// `history` tree it covers (its originals stay there, read as the archive). Maintained by
    /// somna-store; empty for an agent whose compactions all predate layout 2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covers: Vec<Cover>,
    /// What the grounding check did with every item models wrote for this agent (compactions'
    /// summaries and extracted facts, sleeps' facts and reflections), counted in the transaction
    /// that logs each compaction and each sleep.
    #[serde(default)]
    pub grounding: GroundingCounts,
    /// The durable sleep schedule: when the next sleep is due (runtime clock), advanced by each
    /// sleep and read when the agent is loaded; `None` until one is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_sleep_at: Option<Timestamp>,
}

/// A live summary and the run of seqs it covers (see [`AgentRecord::covers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cover {
    /// The summary's seq: the first seq it covers.
    pub seq: Seq,
    /// The summary's generation (part of its key).
    pub generation: u32,
    /// The last seq it covers.
    pub through: Seq,
}

impl Cover {
    /// True when `seq` lies in the covered run.
    pub fn contains(&self, seq: Seq) -> bool {
        (self.seq..=self.through).contains(&seq)
    }
}

impl AgentRecord {
    /// A fresh record with empty counters.
    pub fn new(id: AgentId, created_at: Timestamp) -> Self {
        AgentRecord {
            id,
            created_at,
            overrides: AgentOverrides::default(),
            last_compaction: None,
            compaction_count: 0,
            calibration: Calibration::default(),
            next_seq: 0,
            next_entry_id: 0,
            next_fact_id: 0,
            next_event_seq: 0,
            history_tokens: 0,
            history_len: 0,
            archive_len: 0,
            retired: false,
            covers: Vec::new(),
            grounding: GroundingCounts::default(),
            next_sleep_at: None,
        }
    }
}

crate::str_enum! {
    /// What started a compaction; its name is the one used in logs, metrics and the API.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum Trigger as "trigger" {
        /// During a Sleep, after consolidation, at the sleep threshold.
        Sleep = "sleep",
        /// At the start of a tick, at the emergency threshold.
        Emergency = "emergency",
        /// Asked for through the API or the CLI; always runs.
        Manual = "manual",
    }
}

/// How a compaction produced its summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CompactionMethod {
    /// The configured LLM summarized the body.
    Llm,
    /// The builtin extractive summarizer (the offline provider, or a fallback after an LLM failure).
    Extractive,
    /// Emergency fallback: the oldest body turns archived behind a marker, no summary.
    ArchiveMarker,
    /// Only old tool outputs were masked.
    MaskOnly,
}

/// What the grounding check did with the items a model wrote (summary items, extracted facts,
/// consolidated facts, reflections): each item's checkable values (numbers, dates, times, IDs,
/// names) were looked up in the turns or entries it cites before anything was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroundingCounts {
    /// Items committed as written: every value found in what they cite.
    pub kept: u32,
    /// Items committed after repair: re-cited to the turn that holds every value, or replaced by
    /// the cited turn's own words.
    pub repaired: u32,
    /// Items not committed: a value found nowhere they could cite, and nothing to repair from.
    pub dropped: u32,
}

impl GroundingCounts {
    /// Every item checked.
    pub fn total(&self) -> u32 {
        self.kept + self.repaired + self.dropped
    }

    /// Items committed (kept or repaired).
    pub fn committed(&self) -> u32 {
        self.kept + self.repaired
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: GroundingCounts) {
        self.kept += other.kept;
        self.repaired += other.repaired;
        self.dropped += other.dropped;
    }
}

impl std::fmt::Display for GroundingCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} kept, {} repaired, {} dropped",
            self.kept, self.repaired, self.dropped
        )
    }
}

/// The log line of one committed compaction, stored in the `events` tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionRecord {
    pub at: Timestamp,
    pub trigger: Trigger,
    pub method: CompactionMethod,
    /// Seq of the summary (or marker) message in history.
    pub summary_seq: Seq,
    /// The seq range (inclusive) the summary covers.
    pub covers: (Seq, Seq),
    /// History messages replaced.
    pub compacted: u32,
    /// Messages kept verbatim after the summary.
    pub preserved: u32,
    /// The prompt before and after, in tokens as Somna counts them (uncalibrated).
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Usage before and after (0–1 of `max_context_tokens`), calibrated by the factor applied
    /// at the time, as the thresholds compare it (`None` in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_after: Option<f64>,
    /// The synthesis journal entry written with it.
    pub synthesis_entry: Option<EntryId>,
    /// The summary's generation.
    pub generation: u32,
    /// What the grounding check did with the summary's items (`None` for a compaction without a
    /// summary, or one committed before the check existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<GroundingCounts>,
}

impl CompactionRecord {
    /// A record of a compaction at `at` covering `covers` (its summary at the first seq),
    /// replacing `compacted` messages; no preserved tail, token counts or synthesis entry (set
    /// them with struct update syntax).
    pub fn new(
        at: Timestamp,
        trigger: Trigger,
        method: CompactionMethod,
        covers: (Seq, Seq),
        compacted: u32,
        generation: u32,
    ) -> Self {
        CompactionRecord {
            at,
            trigger,
            method,
            summary_seq: covers.0,
            covers,
            compacted,
            preserved: 0,
            tokens_before: 0,
            tokens_after: 0,
            usage_before: None,
            usage_after: None,
            synthesis_entry: None,
            generation,
            grounding: None,
        }
    }

    /// Percentage of tokens saved, 0–100.
    pub fn reduction_pct(&self) -> f64 {
        reduction_pct(self.tokens_before, self.tokens_after)
    }
}

/// Percentage of tokens saved going from `before` to `after`, 0–100.
pub fn reduction_pct(before: u64, after: u64) -> f64 {
    if before == 0 {
        0.0
    } else {
        100.0 * (before.saturating_sub(after)) as f64 / before as f64
    }
}

/// One entry of the `events` tree: the agent's durable log.
///
/// Not to be confused with somna-runtime's `Event`, which has another meaning: a live notification
/// to subscribers (the SSE stream, progress lines), never stored, that also covers what is not
/// worth keeping (replies, tool calls, sleep phases). What is kept is an `EventRecord`; where it
/// sits in the log is a [`LoggedEvent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventRecord {
    /// A compaction committed.
    Compaction(CompactionRecord),
    /// A compaction was undone; the summary text is kept here since its message is gone.
    Uncompaction {
        at: Timestamp,
        summary_seq: Seq,
        summary: String,
        restored: u32,
    },
    /// Old tool outputs were masked (originals archived).
    Masking {
        at: Timestamp,
        masked: u32,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// A compaction attempt failed and changed nothing.
    CompactionFailed {
        at: Timestamp,
        trigger: Trigger,
        reason: String,
    },
    /// Anything else worth keeping (warnings, consolidation summaries).
    Note { at: Timestamp, text: String },
    /// A sleep ended (consolidation, reflection, compaction at the sleep threshold, each logged
    /// on its own as well). Logged in the same transaction that advances the durable schedule
    /// (`AgentRecord::next_sleep_at`), so each due time is served by exactly one logged sleep.
    Sleep {
        at: Timestamp,
        /// The due time this sleep served: the schedule's `next_sleep_at` when it began; `None`
        /// for a sleep brought forward because the agent was tired, which serves none and
        /// leaves the schedule as it was (`next` is that due time).
        #[serde(default)]
        due: Option<Timestamp>,
        /// The next due time it recorded.
        next: Timestamp,
        /// Journal entries consolidated, facts written, reflections written.
        entries: u32,
        facts: u32,
        reflections: u32,
        /// What the grounding check did with the consolidated facts and reflections.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grounding: Option<GroundingCounts>,
        /// What failed (left for the next sleep), one line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failures: Vec<String>,
    },
    /// An emergency compaction could not use the LLM's summary and fell back to deterministic
    /// reduction (masking, the builtin extractive summary, the archive marker). Each committed
    /// step is also logged on its own (`Masking`, `Compaction`); this says why and where it ended.
    EmergencyFallback {
        at: Timestamp,
        /// Why the LLM summary could not be used (the summarizer's error, or the rejected summary).
        reason: String,
        /// The steps that committed, in order.
        #[serde(default)]
        steps: Vec<CompactionMethod>,
        /// Prompt tokens before the emergency and after the last step.
        tokens_before: u64,
        tokens_after: u64,
        /// Set when the prompt is still at or above the emergency threshold: exactly why.
        #[serde(default)]
        stuck: Option<String>,
    },
}

/// An [`EventRecord`] as read back from the log, with its per-agent sequence number (its key in the
/// `events` tree, not part of the stored value). The HTTP API's `events` listing carries these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoggedEvent {
    /// The event's seq (the order events were logged in).
    pub seq: u64,
    /// The event itself.
    pub event: EventRecord,
    /// The cluster node that wrote it, under which lease of the agent's shard; `None` outside a
    /// cluster. Along an agent's log the epoch never decreases and one epoch is one node: the
    /// record that no two nodes ever ran the agent at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Writer>,
}

/// Who wrote a logged event: a cluster node and the fencing epoch of the shard lease it held.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Writer {
    /// The node's name (`[cluster] node`).
    pub node: String,
    /// The epoch of its lease on the agent's shard.
    pub epoch: u64,
}

/// How an event is stored: the record and, on a cluster node, its writer. `by` is an extra field
/// of the same map, so values written before it existed read back with `by: None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    #[serde(flatten)]
    pub event: EventRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Writer>,
}

impl EventRecord {
    /// When it happened.
    pub fn at(&self) -> Timestamp {
        match self {
            EventRecord::Compaction(r) => r.at,
            EventRecord::Uncompaction { at, .. }
            | EventRecord::Masking { at, .. }
            | EventRecord::CompactionFailed { at, .. }
            | EventRecord::Note { at, .. }
            | EventRecord::Sleep { at, .. }
            | EventRecord::EmergencyFallback { at, .. } => *at,
        }
    }
}
