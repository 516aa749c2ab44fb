//! Appending messages to an agent's history, and reading history and the archive.

use somna_core::{AgentId, Cover, Message, Seq, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, TreeId, WriteSet, tree_names};
use crate::view;

impl Store {
    /// Appends one normal message: assigns its seq (the record's `next_seq`) and, when it is zero,
    /// its `created_at` (set to `now`, the caller's clock: the store never reads the wall clock).
    /// The caller sets `tokens` (somna-core's `TokenCounter`); the store adds them to the agent's
    /// running total in the same transaction. Returns the message as stored.
    pub fn append(&self, id: &AgentId, message: Message, now: Timestamp) -> Result<Message> {
        self.append_batch(id, vec![message], now)?
            .pop()
            .ok_or_else(|| StoreError::Inconsistent {
                agent: id.clone(),
                reason: "an append of one message stored none".to_string(),
            })
    }

    /// Appends several normal messages in one transaction, in order (see [`Store::append`]); those
    /// whose `created_at` is zero are stamped `now`.
    pub fn append_batch(
        &self,
        id: &AgentId,
        messages: Vec<Message>,
        now: Timestamp,
    ) -> Result<Vec<Message>> {
        if messages.is_empty() {
            return Ok(messages);
        }
        if let Some(bad) = messages.iter().find(|m| !m.is_normal()) {
            return Err(StoreError::Invalid {
                what: "append",
                reason: format!(
                    "only normal messages can be appended, got a {:?} message",
                    bad.kind
                ),
            });
        }
        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(messages.len() + 1);
        let mut stored = Vec::with_capacity(messages.len());
        for mut message in messages {
            message.seq = next.next_seq;
            if message.created_at == Timestamp::ZERO {
                message.created_at = now;
            }
            let value = codec::encode(tree_names::HISTORY, &message)?;
            writes.create(
                TreeId::History,
                keys::seq(id, message.seq),
                value,
                message.seq,
            );
            next.next_seq += 1;
            next.history_len += 1;
            next.history_tokens += u64::from(message.tokens);
            stored.push(message);
        }
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        state.publish(&mut guard, next);
        Ok(stored)
    }

    /// The agent's whole live history, in seq order (empty for an unknown agent).
    pub fn history(&self, id: &AgentId) -> Result<Vec<Message>> {
        self.history_range(id, 0, usize::MAX)
    }

    /// Up to `limit` history messages with seq ≥ `from_seq`, in seq order.
    pub fn history_range(&self, id: &AgentId, from_seq: Seq, limit: usize) -> Result<Vec<Message>> {
        self.with_covers(id, |covers| {
            let entries =
                view::live_entries(&self.inner.trees.history, id, covers, from_seq, None, limit)?;
            view::decode_all(&entries)
        })
    }

    /// The last `n` history messages, in seq order.
    pub fn history_tail(&self, id: &AgentId, n: usize) -> Result<Vec<Message>> {
        self.with_covers(id, |covers| {
            let entries = view::live_tail(&self.inner.trees.history, id, covers, n)?;
            view::decode_all(&entries)
        })
    }

    /// Up to `limit` archived messages with seq ≥ `from_seq`, in key order (an original, then any
    /// folded summaries that start at the same seq, by generation).
    pub fn archive_range(&self, id: &AgentId, from_seq: Seq, limit: usize) -> Result<Vec<Message>> {
        self.archive_view(id, from_seq, None, limit)
    }

    /// Every archived message with `seq_from ≤ seq ≤ seq_through`, in key order.
    pub fn archived(&self, id: &AgentId, seq_from: Seq, seq_through: Seq) -> Result<Vec<Message>> {
        self.archive_view(id, seq_from, Some(seq_through), usize::MAX)
    }

    fn archive_view(
        &self,
        id: &AgentId,
        from: Seq,
        through: Option<Seq>,
        limit: usize,
    ) -> Result<Vec<Message>> {
        self.with_covers(id, |covers| {
            let trees = &self.inner.trees;
            view::archived(
                &trees.history,
                &trees.archive,
                id,
                covers,
                from,
                through,
                limit,
            )
        })
    }

    /// Runs `read` with the agent's live covers while holding its lock, so that no commit changes
    /// the covers or the trees in between. An unknown agent reads as empty.
    fn with_covers<T: Default>(
        &self,
        id: &AgentId,
        read: impl FnOnce(&[Cover]) -> Result<T>,
    ) -> Result<T> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(T::default()),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        read(&guard.covers)
    }
}
