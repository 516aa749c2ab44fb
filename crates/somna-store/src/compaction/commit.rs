//! [`Store::commit_compaction`]: a summary and its cover, the journal entries, the record, the
//! log line and the undo record in one transaction, after checking the commit is well formed and
//! that live history still holds exactly what it covers.

use crate::backend::Bytes;
use somna_core::compaction::next_generation;
use somna_core::{
    AgentId, Cover, EntryId, EventRecord, Message, MessageKind, Seq, SourceType, Timestamp,
};

use super::{CommitOutcome, CompactionCommit, InPlace, UndoRecord};
use crate::codec;
use crate::error::{Result, StoreError};
use crate::events::push_event;
use crate::journal::push_entries;
use crate::keys::{self, MessageKey};
use crate::live::HistoryChange;
use crate::store::{Store, TreeId, WriteSet, tree_names};
use crate::view;

impl Store {
    /// Commits a compaction atomically (see [`CompactionCommit`]). Returns
    /// [`CommitOutcome::Conflict`], having changed nothing, when history no longer holds exactly
    /// the covered messages. Messages after the covered run are never touched, and the covered ones
    /// are not moved: the summary's cover hides them from live history (they read as archived), so
    /// the commit writes the same few keys whatever it covers.
    pub fn commit_compaction(
        &self,
        id: &AgentId,
        commit: &CompactionCommit<'_>,
    ) -> Result<CommitOutcome> {
        validate_compaction(commit)?;
        let (Some(first), Some(last)) = (commit.covered.first(), commit.covered.last()) else {
            return Err(invalid_commit("it covers no messages".to_string()));
        };
        let state = self.state(id)?;
        let mut guard = state.lock();

        // The covered run of live history must be exactly the covered messages. The cached live
        // history is what a read of the trees under this lock gives (see `live`), so a run found
        // there needs no read: usually the very messages the compactor planned over (its read
        // cached them, `Store::live_history_to_compact`). Anything else is read and compared, and
        // a conflict is named from the trees.
        let cached = state
            .cacheable()
            .then(|| self.inner.history_cache.peek_live(id))
            .flatten();
        if !cached.is_some_and(|live| holds_run(&live, &commit.covered)) {
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
        let event_seq = push_event(
            id,
            &mut next,
            &EventRecord::Compaction(record),
            self.writer(id),
            &mut writes,
        )?;
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
        if let Some(g) = commit.record.grounding {
            next.grounding.add(g);
        }
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
        self.publish(id, &state, &mut guard, next, HistoryChange::of(&writes));
        Ok(CommitOutcome::Committed {
            summary_seq: summary.seq,
            journal_ids,
            event_seq,
        })
    }
}

fn invalid_commit(reason: String) -> StoreError {
    StoreError::Invalid {
        what: "compaction commit",
        reason,
    }
}

/// The last original seq a history message stands for.
pub(super) fn covers_through(message: &Message) -> Seq {
    message
        .summary()
        .map_or(message.seq, |meta| meta.covers_through_seq)
}

/// Checks that the commit is well formed (independently of what is stored).
fn validate_compaction(commit: &CompactionCommit<'_>) -> Result<()> {
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
    let folded = next_generation(commit.covered.iter()) - 1;
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

/// `live` (an agent's whole live history, in seq order) holds `covered` as one run: the live
/// messages from the first covered seq on are the covered ones, equal and in order, so no live
/// message lies inside the covered run uncovered. The same memory (the compactor's read of the
/// cached history) is equal without comparing.
fn holds_run(live: &[Message], covered: &[Message]) -> bool {
    let Some(first) = covered.first() else {
        return false;
    };
    let Ok(at) = live.binary_search_by_key(&first.seq, |m| m.seq) else {
        return false;
    };
    let Some(run) = live.get(at..at.saturating_add(covered.len())) else {
        return false;
    };
    std::ptr::eq(run.as_ptr(), covered.as_ptr()) || run == covered
}

/// Compares the covered messages with the history run read from the store. Returns the first
/// difference as `(seq, reason)`.
fn compare_covered(
    id: &AgentId,
    covered: &[Message],
    stored: &[(Bytes, Bytes)],
) -> Result<Option<(Seq, String)>> {
    let prefix_len = keys::prefix(id).len();
    let mut stored_iter = stored.iter();
    // The encoding is deterministic: a stored value byte-equal to the covered message's encoding
    // is that message, without decoding it (about half the cost of the commit at 2,000 messages).
    // Any other value is decoded and compared, so an older encoding of an equal message still
    // matches.
    let mut encoded = Vec::with_capacity(256);
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
        codec::encode_into(tree_names::HISTORY, message, &mut encoded)?;
        if encoded.as_slice() == value.as_ref() {
            continue;
        }
        let current: Message = codec::decode_message(tree_names::HISTORY, key, value)?;
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
