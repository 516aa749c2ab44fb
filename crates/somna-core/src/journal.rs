//! The journal (what an agent noted, observed, reflected on, or compacted) and memory facts.

use serde::{Deserialize, Serialize};

use crate::message::Seq;
use crate::time::Timestamp;

/// A journal entry's sequence number, unique per agent.
pub type EntryId = u64;

/// A memory fact's sequence number, unique per agent.
pub type FactId = u64;

crate::str_enum! {
    /// Where a journal entry came from. Its name (`as_str`) is the one used in config, the CLI,
    /// the API and the `journal_by_source` index.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum SourceType as "source type" {
        /// Something the agent saw or was told (host events, user input worth keeping).
        Observation = "observation",
        /// Something the agent chose to write down (the `journal_add` tool).
        Note = "note",
        /// A higher-level insight written during sleep.
        Reflection = "reflection",
        /// The synthesis entry a compaction writes: its summary.
        Compaction = "compaction",
        /// A notable fact pulled out of a compaction's body before the verbatim turns were archived.
        Extraction = "extraction",
    }
}

/// The lowest and highest importance an entry can have.
pub const IMPORTANCE_RANGE: std::ops::RangeInclusive<u8> = 1..=10;

/// The importance of every synthesis entry.
pub const SYNTHESIS_IMPORTANCE: u8 = 7;

/// The tags of every synthesis entry.
pub const SYNTHESIS_TAGS: [&str; 2] = ["compaction", "synthesis"];

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JournalEntry {
    /// Assigned by the store at append time.
    pub id: EntryId,
    pub at: Timestamp,
    pub content: String,
    pub source_type: SourceType,
    /// 1 (trivial) to 10 (life-changing); consolidation keeps entries at or above `min_importance`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10))]
    pub importance: u8,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Set once consolidation has distilled this entry into memory.
    #[serde(default)]
    pub consolidated: bool,
    /// For compaction and extraction entries: the seq range (inclusive) of the history it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers: Option<(Seq, Seq)>,
    /// The history turns it rests on (an extracted fact's cited turns). A synthesis entry cites
    /// per item instead, with `[#seq]` markers in its content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_seqs: Vec<Seq>,
    /// The journal entries it rests on (a reflection's cited entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_entries: Vec<EntryId>,
}

impl JournalEntry {
    /// A new entry; the store assigns `id` when it is appended. Importance is clamped to 1–10.
    pub fn new(
        at: Timestamp,
        source_type: SourceType,
        importance: u8,
        content: impl Into<String>,
    ) -> Self {
        JournalEntry {
            id: 0,
            at,
            content: content.into(),
            source_type,
            importance: importance.clamp(*IMPORTANCE_RANGE.start(), *IMPORTANCE_RANGE.end()),
            tags: Vec::new(),
            consolidated: false,
            covers: None,
            source_seqs: Vec::new(),
            source_entries: Vec::new(),
        }
    }

    /// Adds tags.
    pub fn with_tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }

    /// Sets the history turns it rests on.
    pub fn citing_turns(mut self, seqs: Vec<Seq>) -> Self {
        self.source_seqs = seqs;
        self
    }

    /// Sets the journal entries it rests on.
    pub fn citing_entries(mut self, ids: Vec<EntryId>) -> Self {
        self.source_entries = ids;
        self
    }

    /// Sets the covered seq range.
    pub fn covering(mut self, from: Seq, through: Seq) -> Self {
        self.covers = Some((from, through));
        self
    }

    /// The synthesis entry of a compaction: source `compaction`, tags `compaction`,`synthesis`, importance 7.
    pub fn synthesis(at: Timestamp, summary: impl Into<String>, from: Seq, through: Seq) -> Self {
        JournalEntry::new(at, SourceType::Compaction, SYNTHESIS_IMPORTANCE, summary)
            .with_tags(SYNTHESIS_TAGS)
            .covering(from, through)
    }
}

/// A journal query: every filter is optional; results are newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JournalQuery {
    #[serde(default)]
    pub source_type: Option<SourceType>,
    /// An entry matches when it has every one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub min_importance: Option<u8>,
    /// Inclusive lower bound on `at`.
    #[serde(default)]
    pub since: Option<Timestamp>,
    /// Exclusive upper bound on `at`.
    #[serde(default)]
    pub until: Option<Timestamp>,
    /// Only entries with an id below this one (the cursor of the previous page).
    #[serde(default)]
    pub before_id: Option<EntryId>,
    /// At most this many entries; `None` means all.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl JournalQuery {
    /// Does `entry` pass every filter except the cursor and the limit?
    pub fn matches(&self, entry: &JournalEntry) -> bool {
        self.source_type.is_none_or(|s| s == entry.source_type)
            && self.min_importance.is_none_or(|m| entry.importance >= m)
            && self.since.is_none_or(|t| entry.at >= t)
            && self.until.is_none_or(|t| entry.at < t)
            && self.before_id.is_none_or(|id| entry.id < id)
            && self.tags.iter().all(|t| entry.tags.iter().any(|e| e == t))
    }
}

/// A durable fact distilled from journal entries during sleep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fact {
    /// Assigned by the store.
    pub id: FactId,
    pub text: String,
    /// Provenance: the journal entries this fact was distilled from.
    pub source_entry_ids: Vec<EntryId>,
    /// The history turns behind it: the `[#seq]` citations of the lines of its entries that hold
    /// its values (empty when its entries cite no turn, e.g. notes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_seqs: Vec<Seq>,
    pub at: Timestamp,
}

impl Fact {
    /// A new fact; the store assigns `id`.
    pub fn new(at: Timestamp, text: impl Into<String>, sources: Vec<EntryId>) -> Self {
        Fact {
            id: 0,
            text: text.into(),
            source_entry_ids: sources,
            source_seqs: Vec::new(),
            at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_matches() {
        let e = JournalEntry::synthesis(Timestamp(1_000), "s", 1, 9);
        assert!(JournalQuery::default().matches(&e));
        let q = JournalQuery {
            source_type: Some(SourceType::Compaction),
            tags: vec!["synthesis".into()],
            min_importance: Some(7),
            since: Some(Timestamp(1_000)),
            until: Some(Timestamp(1_001)),
            ..Default::default()
        };
        assert!(q.matches(&e));
        assert!(
            !JournalQuery {
                min_importance: Some(8),
                ..Default::default()
            }
            .matches(&e)
        );
        assert!(
            !JournalQuery {
                until: Some(Timestamp(1_000)),
                ..Default::default()
            }
            .matches(&e)
        );
        assert!(
            !JournalQuery {
                tags: vec!["other".into()],
                ..Default::default()
            }
            .matches(&e)
        );
        assert_eq!(
            JournalEntry::new(Timestamp(0), SourceType::Note, 0, "x").importance,
            1
        );
        assert_eq!(
            JournalEntry::new(Timestamp(0), SourceType::Note, 42, "x").importance,
            10
        );
    }
}
