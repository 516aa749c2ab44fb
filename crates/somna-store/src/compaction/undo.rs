//! [`Store::uncompact`]: a compaction undone exactly, from the undo record its commit left (a
//! layout-2 summary drops its cover; a layout-1 one moves what it replaced back out of the
//! archive).

use crate::backend::Bytes;
use serde::{Deserialize, Serialize};
use somna_core::{AgentId, Cover, EventRecord, Message, Seq, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::events::push_event;
use crate::keys::{self, MessageKey};
use crate::live::HistoryChange;
use crate::store::{Store, TreeId, WriteSet, tree_names};
use crate::view;

/// How an uncompaction ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UncompactOutcome {
    /// The summary was removed and what it replaced is back in history.
    Restored {
        /// How many messages went back into history.
        restored: u32,
    },
    /// No summary with that seq is in history (or it has no undo record).
    NotFound,
}

/// What a summary replaced, kept in the `undo` tree under the summary's history key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UndoRecord {
    pub(crate) summary_seq: Seq,
    pub(crate) generation: u32,
    /// Layout 1: what the summary replaced, moved to the archive (empty in layout 2).
    #[serde(default)]
    pub(crate) replaced: Vec<Replaced>,
    /// Layout 2: the summary hides what it covers in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) in_place: Option<InPlace>,
}

/// How to undo a layout-2 summary: what its cover hides, counted at the commit (nothing can change
/// under a cover, so the counts still hold when it is undone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InPlace {
    /// The covers of the live summaries it folded, live again once it is undone.
    pub(crate) folded: Vec<Cover>,
    /// How many live messages it replaced.
    pub(crate) replaced: u64,
    /// Their tokens.
    pub(crate) replaced_tokens: u64,
    /// How many of them count as archived while covered (normal messages and summaries).
    pub(crate) archived: u64,
}

/// One message a summary replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Replaced {
    /// A normal message, now in the archive under its seq.
    Original { seq: Seq },
    /// An earlier summary, now in the archive under its summary key.
    Summary { seq: Seq, generation: u32 },
    /// A masked placeholder (its original was already archived); kept whole here.
    Masked { message: Message },
}

impl Store {
    /// Undoes the compaction whose summary has seq `summary_seq`, atomically: removes the summary,
    /// puts back exactly what it replaced (drops its cover and restores the covers it folded; for a
    /// layout-1 summary, moves the originals and an earlier summary out of the archive tree and
    /// re-inserts masked placeholders), deletes the undo record and logs an
    /// `EventRecord::Uncompaction` carrying the summary text. The journal keeps the synthesis entry.
    /// A summary that was itself folded into a later one is not in history: undo the later first.
    pub fn uncompact(
        &self,
        id: &AgentId,
        summary_seq: Seq,
        now: Timestamp,
    ) -> Result<UncompactOutcome> {
        let state = self.state(id)?;
        let mut guard = state.lock();
        let trees = &self.inner.trees;
        let prefix_len = keys::prefix(id).len();

        // A layout-2 summary is found through its cover; a layout-1 one by its seq (the live key
        // among the summaries that start there).
        let found = match guard.covers.iter().find(|c| c.seq == summary_seq) {
            Some(cover) => {
                let key = keys::summary(id, cover.seq, cover.generation);
                let value = trees
                    .history
                    .get(&key)?
                    .ok_or_else(|| StoreError::Inconsistent {
                        agent: id.clone(),
                        reason: format!(
                            "live summary {} is missing from history",
                            keys::render(&key)
                        ),
                    })?;
                Some((Bytes::from(key), value))
            }
            None => {
                let mut found = None;
                for item in trees.history.scan_prefix(keys::seq(id, summary_seq)) {
                    let (key, value) = item?;
                    if let Some(parsed @ MessageKey::Summary(seq, _)) =
                        keys::parse_message(prefix_len, &key)
                        && seq == summary_seq
                        && view::hiding(&guard.covers, parsed).is_none()
                    {
                        found = Some((key, value));
                        break;
                    }
                }
                found
            }
        };
        let Some((summary_key, summary_value)) = found else {
            return Ok(UncompactOutcome::NotFound);
        };
        let Some(undo_value) = trees.undo.get(&summary_key)? else {
            tracing::warn!(agent = %id, summary_seq, "summary has no undo record");
            return Ok(UncompactOutcome::NotFound);
        };
        let undo: UndoRecord = codec::decode(tree_names::UNDO, &summary_key, &undo_value)?;
        let summary: Message =
            codec::decode_message(tree_names::HISTORY, &summary_key, &summary_value)?;

        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(2 * undo.replaced.len() + 4);
        writes.take(
            TreeId::History,
            summary_key.to_vec(),
            summary_value,
            summary_seq,
        );
        let (replaced, replaced_tokens, unarchived) = match &undo.in_place {
            Some(in_place) => {
                next.covers
                    .retain(|c| (c.seq, c.generation) != (summary_seq, undo.generation));
                for cover in &in_place.folded {
                    let at = next.covers.partition_point(|c| c.seq < cover.seq);
                    next.covers.insert(at, *cover);
                }
                (
                    in_place.replaced,
                    in_place.replaced_tokens,
                    in_place.archived,
                )
            }
            None => self.restore_layout_1(id, summary_seq, &undo, &mut writes)?,
        };
        writes.delete(TreeId::Undo, summary_key.to_vec());
        let restored = u32::try_from(replaced).unwrap_or(u32::MAX);
        next.history_len = next.history_len.saturating_sub(1) + replaced;
        next.history_tokens = next
            .history_tokens
            .saturating_sub(u64::from(summary.tokens))
            + replaced_tokens;
        next.archive_len = next.archive_len.saturating_sub(unarchived);
        let event = EventRecord::Uncompaction {
            at: now,
            summary_seq,
            summary: summary.content,
            restored,
        };
        push_event(id, &mut next, &event, self.writer(id), &mut writes)?;
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        tracing::debug!(agent = %id, summary_seq, restored, "compaction undone");
        self.publish(id, &state, &mut guard, next, HistoryChange::of(&writes));
        Ok(UncompactOutcome::Restored { restored })
    }

    /// Adds to `writes` what puts back everything a layout-1 summary replaced (originals and an
    /// earlier summary out of the archive, masked placeholders as they were); returns how many
    /// messages go back, their tokens and how many leave the archive.
    fn restore_layout_1(
        &self,
        id: &AgentId,
        summary_seq: Seq,
        undo: &UndoRecord,
        writes: &mut WriteSet,
    ) -> Result<(u64, u64, u64)> {
        let trees = &self.inner.trees;
        let inconsistent = |reason: String| StoreError::Inconsistent {
            agent: id.clone(),
            reason,
        };
        let mut restored_tokens = 0u64;
        let mut unarchived = 0u64;
        for item in &undo.replaced {
            match item {
                Replaced::Original { seq } | Replaced::Summary { seq, .. } => {
                    let key = match item {
                        Replaced::Summary { generation, .. } => {
                            keys::summary(id, *seq, *generation)
                        }
                        _ => keys::seq(id, *seq),
                    };
                    let Some(value) = trees.archive.get(&key)? else {
                        return Err(inconsistent(format!(
                            "archive key {} that summary {summary_seq} replaced is missing",
                            keys::render(&key)
                        )));
                    };
                    let message: Message =
                        codec::decode_message(tree_names::ARCHIVE, &key, &value)?;
                    restored_tokens += u64::from(message.tokens);
                    unarchived += 1;
                    writes.take(TreeId::Archive, key.clone(), value.clone(), *seq);
                    writes.create(TreeId::History, key, value, *seq);
                }
                Replaced::Masked { message } => {
                    let key = keys::seq(id, message.seq);
                    if !trees.archive.contains_key(&key)? {
                        return Err(inconsistent(format!(
                            "the original of masked message {} is not in the archive",
                            message.seq
                        )));
                    }
                    restored_tokens += u64::from(message.tokens);
                    writes.create(
                        TreeId::History,
                        key,
                        codec::encode(tree_names::HISTORY, message)?,
                        message.seq,
                    );
                }
            }
        }
        Ok((undo.replaced.len() as u64, restored_tokens, unarchived))
    }
}

#[cfg(test)]
mod tests {
    use somna_core::{
        CompactionMethod, CompactionRecord, JournalEntry, MessageKind, SummaryMeta, Trigger,
    };

    use super::*;
    use crate::compaction::CompactionCommit;
    use crate::compaction::commit::covers_through;

    type Raw = Vec<(Vec<u8>, Vec<u8>)>;

    fn raw(tree: &crate::backend::Tree, id: &AgentId) -> Raw {
        tree.scan_prefix(keys::prefix(id))
            .map(|item| {
                let (k, v) = item.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    fn commit_of(covered: &[Message], at: Timestamp) -> CompactionCommit<'_> {
        let generation = somna_core::compaction::next_generation(covered);
        let summary = Message {
            seq: covered[0].seq,
            tokens: 9,
            kind: MessageKind::Summary(SummaryMeta {
                covers_from_seq: covered[0].seq,
                covers_through_seq: covers_through(&covered[covered.len() - 1]),
                compacted_count: covered.len() as u32,
                original_tokens: covered.iter().map(|m| m.tokens).sum(),
                summary_tokens: 9,
                generation,
                compacted_at: at,
            }),
            ..Message::new(
                somna_core::Role::System,
                format!("{} gen {generation}", Message::SUMMARY_PREFIX),
            )
        };
        CompactionCommit {
            covered: covered.into(),
            journal: vec![JournalEntry::synthesis(at, summary.content.clone(), 0, 0)],
            record: CompactionRecord::new(
                at,
                Trigger::Sleep,
                CompactionMethod::Llm,
                (0, 0),
                covered.len() as u32,
                generation,
            ),
            summary,
        }
    }

    /// Commit followed by uncompact leaves history and the archive byte-identical, through masked
    /// placeholders and a folded summary.
    #[test]
    fn uncompact_restores_history_byte_for_byte() {
        let store = Store::temporary().unwrap();
        let id = AgentId::new("npc").unwrap();
        store.create_agent(&id, Timestamp(1)).unwrap();
        let messages = (0..30)
            .map(|i| {
                let mut m = Message::user(format!("turn {i}")).at(Timestamp(100 + i));
                m.tokens = 5 + (i as u32 % 3);
                m
            })
            .collect();
        let all = store.append_batch(&id, messages, Timestamp(100)).unwrap();
        let masked = Message {
            content: "[masked]".into(),
            tokens: 2,
            kind: MessageKind::Masked {
                original_tokens: all[3].tokens,
            },
            ..all[3].clone()
        };
        store
            .commit_masking(&id, vec![masked], Timestamp(200))
            .unwrap();
        let trees = &store.inner.trees;
        let first = store.history(&id).unwrap();
        store
            .commit_compaction(&id, &commit_of(&first[..10], Timestamp(500)))
            .unwrap();
        let (history_1, archive_1) = (raw(&trees.history, &id), raw(&trees.archive, &id));

        let second = store.history(&id).unwrap();
        store
            .commit_compaction(&id, &commit_of(&second[..6], Timestamp(600)))
            .unwrap();
        assert_ne!(raw(&trees.history, &id), history_1);
        store.uncompact(&id, 0, Timestamp(700)).unwrap();
        assert_eq!(raw(&trees.history, &id), history_1);
        assert_eq!(raw(&trees.archive, &id), archive_1);

        let (history_0, archive_0) = {
            store.uncompact(&id, 0, Timestamp(800)).unwrap();
            (raw(&trees.history, &id), raw(&trees.archive, &id))
        };
        store
            .commit_compaction(&id, &commit_of(&first[..10], Timestamp(500)))
            .unwrap();
        store.uncompact(&id, 0, Timestamp(900)).unwrap();
        assert_eq!(raw(&trees.history, &id), history_0);
        assert_eq!(raw(&trees.archive, &id), archive_0);
        assert_eq!(
            archive_0.len(),
            1,
            "only the masked original stays archived"
        );
        assert!(raw(&trees.undo, &id).is_empty());
        assert!(store.check_invariants(&id).unwrap().is_ok());
    }
}
