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

use serde::{Deserialize, Serialize};
use sled::IVec;
use somna_core::{
    AgentId, CompactionRecord, Cover, EntryId, EventRecord, JournalEntry, Message, MessageKind,
    Seq, SourceType, Timestamp,
};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::events::push_event;
use crate::journal::push_entries;
use crate::keys::{self, MessageKey};
use crate::store::{Store, TreeId, WriteSet, tree_names};
use crate::view;

/// Everything one compaction commits.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionCommit {
    /// The history messages being replaced, exactly as read when planning, in seq order. They must
    /// be a contiguous run of history.
    pub covered: Vec<Message>,
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
    /// Commits a compaction atomically (see [`CompactionCommit`]). Returns
    /// [`CommitOutcome::Conflict`], having changed nothing, when history no longer holds exactly
    /// the covered messages. Messages after the covered run are never touched, and the covered ones
    /// are not moved: the summary's cover hides them from live history (they read as archived), so
    /// the commit writes the same few keys whatever it covers.
    pub fn commit_compaction(
        &self,
        id: &AgentId,
        commit: &CompactionCommit,
    ) -> Result<CommitOutcome> {
        validate_compaction(commit)?;
        let (Some(first), Some(last)) = (commit.covered.first(), commit.covered.last()) else {
            return Err(invalid_commit("it covers no messages".to_string()));
        };
        let state = self.state(id)?;
        let mut guard = state.lock();

        // Read the covered run of live history; it must be exactly the covered messages.
        let stored = view::live_entries(
            &self.inner.trees.history,
            id,
            &guard.covers,
            first.seq,
            Some(&keys::message(id, last)),
            commit.covered.len().saturating_add(1),
        )?;
        if let Some((seq, reason)) = compare_covered(id, &commit.covered, &stored)? {
            tracing::debug!(agent = %id, seq, %reason, "compaction conflict");
            return Ok(CommitOutcome::Conflict { seq, reason });
        }

        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(commit.journal.len() * 2 + 4);
        let removed_tokens: u64 = commit.covered.iter().map(|m| u64::from(m.tokens)).sum();
        let archived = commit
            .covered
            .iter()
            .filter(|m| !matches!(m.kind, MessageKind::Masked { .. }))
            .count() as u64;
        let through = covers_through(last);
        let folds = |c: &Cover| c.seq >= first.seq && c.through <= through;
        let folded: Vec<Cover> = next.covers.iter().copied().filter(folds).collect();
        next.covers.retain(|c| !folds(c));

        let mut summary = commit.summary.clone();
        if summary.created_at == Timestamp::ZERO {
            summary.created_at = commit.record.at;
        }
        let generation = summary.summary().map_or(1, |m| m.generation);
        let summary_key = keys::message(id, &summary);
        let at = next.covers.partition_point(|c| c.seq < summary.seq);
        next.covers.insert(
            at,
            Cover {
                seq: summary.seq,
                generation,
                through,
            },
        );
        writes.create(
            TreeId::History,
            summary_key.clone(),
            codec::encode(tree_names::HISTORY, &summary)?,
            summary.seq,
        );
        let entries = push_entries(id, &mut next, commit.journal.clone(), &mut writes)?;
        let journal_ids: Vec<EntryId> = entries.iter().map(|e| e.id).collect();
        let mut record = commit.record.clone();
        record.summary_seq = summary.seq;
        record.synthesis_entry = journal_ids.first().copied();
        let event_seq = push_event(id, &mut next, &EventRecord::Compaction(record), &mut writes)?;
        let covered_len = commit.covered.len() as u64;
        let undo = UndoRecord {
            summary_seq: summary.seq,
            generation,
            replaced: Vec::new(),
            in_place: Some(InPlace {
                folded,
                replaced: covered_len,
                replaced_tokens: removed_tokens,
                archived,
            }),
        };
        writes.create(
            TreeId::Undo,
            summary_key,
            codec::encode(tree_names::UNDO, &undo)?,
            summary.seq,
        );

        next.history_len = next.history_len.saturating_sub(covered_len) + 1;
        next.history_tokens =
            next.history_tokens.saturating_sub(removed_tokens) + u64::from(summary.tokens);
        next.archive_len += archived;
        next.last_compaction = Some(commit.record.at);
        next.compaction_count += 1;
        writes.put_record(&next)?;

        if let Err(conflict) = self.apply(&writes)? {
            tracing::debug!(agent = %id, seq = conflict.seq, reason = %conflict.reason, "compaction conflict in transaction");
            return Ok(CommitOutcome::Conflict {
                seq: conflict.seq,
                reason: conflict.reason,
            });
        }
        tracing::debug!(
            agent = %id,
            summary_seq = summary.seq,
            covered = covered_len,
            tokens_before = guard.history_tokens,
            tokens_after = next.history_tokens,
            "compaction committed"
        );
        state.publish(&mut guard, next);
        self.index_after_commit(id, &guard);
        Ok(CommitOutcome::Committed {
            summary_seq: summary.seq,
            journal_ids,
            event_seq,
        })
    }

    /// Replaces normal history messages by masked placeholders atomically: each placeholder (kind
    /// `Masked`) takes the place of the normal message of the same seq, whose original moves to the
    /// archive. Returns [`CommitOutcome::Conflict`], having changed nothing, when an original is
    /// gone or is not a normal message. Logs an `EventRecord::Masking`; `summary_seq` in the outcome
    /// is the lowest masked seq and `journal_ids` is empty. The event is stamped `now` (the
    /// caller's clock).
    pub fn commit_masking(
        &self,
        id: &AgentId,
        masked: Vec<Message>,
        now: Timestamp,
    ) -> Result<CommitOutcome> {
        let invalid = |reason: String| StoreError::Invalid {
            what: "masking commit",
            reason,
        };
        let mut masked = masked;
        masked.sort_by_key(|m| m.seq);
        if masked.is_empty() {
            return Err(invalid("it masks no messages".to_string()));
        }
        if let Some(bad) = masked
            .iter()
            .find(|m| !matches!(m.kind, MessageKind::Masked { .. }))
        {
            return Err(invalid(format!(
                "message {} is not a masked placeholder",
                bad.seq
            )));
        }
        if let Some(pair) = masked.windows(2).find(|w| w[0].seq == w[1].seq) {
            return Err(invalid(format!("seq {} is masked twice", pair[0].seq)));
        }

        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(3 * masked.len() + 2);
        let first_seq = masked.first().map_or(0, |m| m.seq);
        let count = masked.len();
        for mut placeholder in masked {
            let seq = placeholder.seq;
            if let Some(cover) = guard.covers.iter().find(|c| c.contains(seq)) {
                return Ok(CommitOutcome::Conflict {
                    seq,
                    reason: format!(
                        "history message {seq} is covered by the summary at seq {}",
                        cover.seq
                    ),
                });
            }
            let key = keys::seq(id, seq);
            let Some(value) = self.inner.trees.history.get(&key)? else {
                return Ok(CommitOutcome::Conflict {
                    seq,
                    reason: format!("history message {seq} is gone"),
                });
            };
            let original: Message = codec::decode(tree_names::HISTORY, &key, &value)?;
            if !original.is_normal() {
                return Ok(CommitOutcome::Conflict {
                    seq,
                    reason: format!("history message {seq} is not a normal message"),
                });
            }
            if placeholder.created_at == Timestamp::ZERO {
                placeholder.created_at = original.created_at;
            }
            next.history_tokens = next
                .history_tokens
                .saturating_sub(u64::from(original.tokens))
                + u64::from(placeholder.tokens);
            next.archive_len += 1;
            let encoded = codec::encode(tree_names::HISTORY, &placeholder)?;
            writes.take(TreeId::History, key.clone(), value.clone(), seq);
            writes.create(TreeId::Archive, key.clone(), value, seq);
            writes.create(TreeId::History, key, encoded, seq);
        }
        let event = EventRecord::Masking {
            at: now,
            masked: u32::try_from(count).unwrap_or(u32::MAX),
            tokens_before: guard.history_tokens,
            tokens_after: next.history_tokens,
        };
        let event_seq = push_event(id, &mut next, &event, &mut writes)?;
        writes.put_record(&next)?;
        if let Err(conflict) = self.apply(&writes)? {
            return Ok(CommitOutcome::Conflict {
                seq: conflict.seq,
                reason: conflict.reason,
            });
        }
        tracing::debug!(agent = %id, masked = count, "masking committed");
        state.publish(&mut guard, next);
        self.index_after_commit(id, &guard);
        Ok(CommitOutcome::Committed {
            summary_seq: first_seq,
            journal_ids: Vec::new(),
            event_seq,
        })
    }

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
                Some((IVec::from(key), value))
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
        let summary: Message = codec::decode(tree_names::HISTORY, &summary_key, &summary_value)?;

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
        push_event(id, &mut next, &event, &mut writes)?;
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        tracing::debug!(agent = %id, summary_seq, restored, "compaction undone");
        state.publish(&mut guard, next);
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
                    let message: Message = codec::decode(tree_names::ARCHIVE, &key, &value)?;
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

fn invalid_commit(reason: String) -> StoreError {
    StoreError::Invalid {
        what: "compaction commit",
        reason,
    }
}

/// The last original seq a history message stands for.
fn covers_through(message: &Message) -> Seq {
    message
        .summary()
        .map_or(message.seq, |meta| meta.covers_through_seq)
}

/// Checks that the commit is well formed (independently of what is stored).
fn validate_compaction(commit: &CompactionCommit) -> Result<()> {
    let (Some(first), Some(last)) = (commit.covered.first(), commit.covered.last()) else {
        return Err(invalid_commit("it covers no messages".to_string()));
    };
    if let Some(pair) = commit.covered.windows(2).find(|w| w[0].seq >= w[1].seq) {
        return Err(invalid_commit(format!(
            "covered messages are not in increasing seq order ({} then {})",
            pair[0].seq, pair[1].seq
        )));
    }
    let summary = &commit.summary;
    let Some(meta) = summary.summary() else {
        return Err(invalid_commit(
            "the summary message is not of kind summary".to_string(),
        ));
    };
    if summary.seq != first.seq || meta.covers_from_seq != first.seq {
        return Err(invalid_commit(format!(
            "the summary has seq {} and covers from {}, but the first covered message is {}",
            summary.seq, meta.covers_from_seq, first.seq
        )));
    }
    if meta.covers_through_seq != covers_through(last) {
        return Err(invalid_commit(format!(
            "the summary covers through {}, but the covered messages end at {}",
            meta.covers_through_seq,
            covers_through(last)
        )));
    }
    let folded = commit
        .covered
        .iter()
        .filter_map(|m| m.summary().map(|s| s.generation))
        .max()
        .unwrap_or(0);
    if meta.generation <= folded {
        return Err(invalid_commit(format!(
            "the summary's generation {} is not above the folded summary's generation {folded}",
            meta.generation
        )));
    }
    if let Some(entry) = commit.journal.first()
        && entry.source_type != SourceType::Compaction
    {
        return Err(invalid_commit(format!(
            "the first journal entry must be the synthesis entry (source type compaction), got {}",
            entry.source_type
        )));
    }
    Ok(())
}

/// Compares the covered messages with the history run read from the store. Returns the first
/// difference as `(seq, reason)`.
fn compare_covered(
    id: &AgentId,
    covered: &[Message],
    stored: &[(IVec, IVec)],
) -> Result<Option<(Seq, String)>> {
    let prefix_len = keys::prefix(id).len();
    let mut stored_iter = stored.iter();
    for message in covered {
        let expected = keys::message(id, message);
        let Some((key, value)) = stored_iter.next() else {
            return Ok(Some((
                message.seq,
                format!("covered message {} is no longer in history", message.seq),
            )));
        };
        if key.as_ref() != expected.as_slice() {
            let found = keys::parse_message(prefix_len, key).map_or(message.seq, MessageKey::seq);
            return Ok(Some(if key.as_ref() < expected.as_slice() {
                (
                    found,
                    format!(
                        "history message {found} lies inside the covered run but was not covered"
                    ),
                )
            } else {
                (
                    message.seq,
                    format!("covered message {} is no longer in history", message.seq),
                )
            }));
        }
        let current: Message = codec::decode(tree_names::HISTORY, key, value)?;
        if current != *message {
            return Ok(Some((
                message.seq,
                format!("covered message {} changed since the plan", message.seq),
            )));
        }
    }
    if let Some((key, _)) = stored_iter.next() {
        let found = keys::parse_message(prefix_len, key).map_or(0, MessageKey::seq);
        return Ok(Some((
            found,
            format!("history message {found} lies inside the covered run but was not covered"),
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use somna_core::{CompactionMethod, SummaryMeta, Trigger};

    use super::*;

    type Raw = Vec<(Vec<u8>, Vec<u8>)>;

    fn raw(tree: &sled::Tree, id: &AgentId) -> Raw {
        tree.scan_prefix(keys::prefix(id))
            .map(|item| {
                let (k, v) = item.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    fn commit_of(covered: &[Message], at: Timestamp) -> CompactionCommit {
        let generation = covered
            .iter()
            .filter_map(|m| m.summary().map(|s| s.generation))
            .max()
            .unwrap_or(0)
            + 1;
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
            covered: covered.to_vec(),
            journal: vec![JournalEntry::synthesis(at, summary.content.clone(), 0, 0)],
            record: CompactionRecord {
                at,
                trigger: Trigger::Sleep,
                method: CompactionMethod::Llm,
                summary_seq: 0,
                covers: (0, 0),
                compacted: covered.len() as u32,
                preserved: 0,
                tokens_before: 0,
                tokens_after: 0,
                synthesis_entry: None,
                generation,
            },
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
