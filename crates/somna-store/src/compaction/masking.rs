//! [`Store::commit_masking`]: old tool outputs replaced by placeholders in one transaction, the
//! originals moved to the archive.

use somna_core::{AgentId, EventRecord, Message, MessageKind, Timestamp};

use super::CommitOutcome;
use crate::codec;
use crate::error::{Result, StoreError};
use crate::events::push_event;
use crate::keys;
use crate::live::HistoryChange;
use crate::store::{Store, TreeId, WriteSet, tree_names};

impl Store {
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
        // Every original in one multi-key read (one statement on Postgres), checked in order.
        let keys: Vec<Vec<u8>> = masked.iter().map(|m| keys::seq(id, m.seq)).collect();
        let values = self.inner.trees.history.get_many(&keys)?;
        for ((mut placeholder, key), value) in masked.into_iter().zip(keys).zip(values) {
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
            let Some(value) = value else {
                return Ok(CommitOutcome::Conflict {
                    seq,
                    reason: format!("history message {seq} is gone"),
                });
            };
            let original: Message = codec::decode_message(tree_names::HISTORY, &key, &value)?;
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
        let event_seq = push_event(id, &mut next, &event, self.writer(id), &mut writes)?;
        writes.put_record(&next)?;
        if let Err(conflict) = self.apply(&writes)? {
            return Ok(CommitOutcome::Conflict {
                seq: conflict.seq,
                reason: conflict.reason,
            });
        }
        tracing::debug!(agent = %id, masked = count, "masking committed");
        self.publish(id, &state, &mut guard, next, HistoryChange::of(&writes));
        Ok(CommitOutcome::Committed {
            summary_seq: first_seq,
            journal_ids: Vec::new(),
            event_seq,
        })
    }
}
