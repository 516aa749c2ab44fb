//! The atomic history rewrites: [`Store::commit_compaction`], [`Store::commit_masking`] and their
//! inverse, [`Store::uncompact`].
//!
//! Each runs under the agent's lock and applies ONE transaction across history, archive, journal,
//! journal_by_source, agents, events and undo.
//!
//! A compaction (store layout 2, see `view`) writes the summary next to the messages it covers and
//! a [`Cover`] in the agent's record that hides them from live history; nothing is moved, so the
//! commit costs the same for 20 messages as for 100,000, and an uncompact (delete the summary, drop
//! the cover) restores history byte-for-byte. Summaries written by a layout-1 build (which moved
//! the covered originals into the `archive` tree) are undone the layout-1 way.

//!
//! - this file: what a commit carries and how it ends ([`CompactionCommit`], [`CommitOutcome`]).
//! - `commit.rs`: [`Store::commit_compaction`] and the checks of a commit against itself and
//!   against stored history.
//! - `masking.rs`: [`Store::commit_masking`].
//! - `undo.rs`: [`Store::uncompact`] ([`UncompactOutcome`]) and the undo records a commit leaves.

mod commit;
mod masking;
mod undo;

pub use undo::UncompactOutcome;
pub(crate) use undo::{InPlace, UndoRecord};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use somna_core::{CompactionRecord, EntryId, JournalEntry, Message, Seq};

#[cfg(doc)]
use crate::store::Store;

/// Everything one compaction commits.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionCommit<'a> {
    /// The history messages being replaced, exactly as read when planning, in seq order. They must
    /// be a contiguous run of history. Usually borrowed from the history the plan was made on
    /// (copying a body of ~1,500 messages was a tenth of the compaction path, LLM excluded).
    pub covered: Cow<'a, [Message]>,
    /// The summary: kind `Summary(meta)`, `seq = covered[0].seq`, `meta.covers_from_seq` its seq,
    /// `meta.covers_through_seq` the last original covered, and a generation above every covered
    /// summary's. A zero `created_at` becomes `record.at`.
    pub summary: Message,
    /// Journal entries written with the compaction: the synthesis entry (source type `compaction`)
    /// first, maybe more. May be empty (a marker without a summary text).
    pub journal: Vec<JournalEntry>,
    /// The log line. The store sets `summary_seq` and `synthesis_entry`.
    pub record: CompactionRecord,
}

/// How a compaction or masking commit ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CommitOutcome {
    /// Everything was written.
    Committed {
        /// The summary's seq. For a masking commit (which writes no summary), the lowest masked seq.
        summary_seq: Seq,
        /// The ids of the journal entries written, in order (the synthesis entry first).
        journal_ids: Vec<EntryId>,
        /// The seq of the logged event.
        event_seq: u64,
    },
    /// History changed since the plan was made (a covered message changed or is gone, or an
    /// uncovered message sits inside the covered run); nothing was written.
    Conflict {
        /// The seq where the difference was found.
        seq: Seq,
        /// What was found.
        reason: String,
    },
}
