//! Appending messages to an agent's history, and reading history and the archive.

use somna_core::{AgentId, Message, Seq, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, TreeId, WriteSet, now, tree_names};

impl Store {
    /// Appends one normal message: assigns its seq (the record's `next_seq`) and, when it is zero,
    /// its `created_at`. The caller sets `tokens` (somna-core's `TokenCounter`); the store adds them
    /// to the agent's running total in the same transaction. Returns the message as stored.
    pub fn append(&self, id: &AgentId, message: Message) -> Result<Message> {
        self.append_batch(id, vec![message])?
            .pop()
            .ok_or_else(|| StoreError::Inconsistent {
                agent: id.clone(),
                reason: "an append of one message stored none".to_string(),
            })
    }

    /// Appends several normal messages in one transaction, in order (see [`Store::append`]).
    pub fn append_batch(&self, id: &AgentId, messages: Vec<Message>) -> Result<Vec<Message>> {
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
        let stamp = now();
        let mut writes = WriteSet::with_capacity(messages.len() + 1);
        let mut stored = Vec::with_capacity(messages.len());
        for mut message in messages {
            message.seq = next.next_seq;
            if message.created_at == Timestamp::ZERO {
                message.created_at = stamp;
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
        read_range(
            &self.inner.trees.history,
            tree_names::HISTORY,
            id,
            from_seq,
            None,
            limit,
        )
    }

    /// The last `n` history messages, in seq order.
    pub fn history_tail(&self, id: &AgentId, n: usize) -> Result<Vec<Message>> {
        let prefix = keys::prefix(id);
        let end = keys::prefix_end(&prefix);
        let mut tail = self
            .inner
            .trees
            .history
            .range(prefix..end)
            .rev()
            .take(n)
            .map(|item| {
                let (k, v) = item?;
                codec::decode(tree_names::HISTORY, &k, &v)
            })
            .collect::<Result<Vec<Message>>>()?;
        tail.reverse();
        Ok(tail)
    }

    /// Up to `limit` archived messages with seq ≥ `from_seq`, in key order (an original, then any
    /// folded summaries that start at the same seq, by generation).
    pub fn archive_range(&self, id: &AgentId, from_seq: Seq, limit: usize) -> Result<Vec<Message>> {
        read_range(
            &self.inner.trees.archive,
            tree_names::ARCHIVE,
            id,
            from_seq,
            None,
            limit,
        )
    }

    /// Every archived message with `seq_from ≤ seq ≤ seq_through`, in key order.
    pub fn archived(&self, id: &AgentId, seq_from: Seq, seq_through: Seq) -> Result<Vec<Message>> {
        read_range(
            &self.inner.trees.archive,
            tree_names::ARCHIVE,
            id,
            seq_from,
            Some(seq_through),
            usize::MAX,
        )
    }
}

/// Messages of `id` in `tree` with `from ≤ seq ≤ through` (no upper bound for `None`), at most
/// `limit`, in key order.
fn read_range(
    tree: &sled::Tree,
    name: &'static str,
    id: &AgentId,
    from: Seq,
    through: Option<Seq>,
    limit: usize,
) -> Result<Vec<Message>> {
    let start = keys::seq(id, from);
    let end = match through.and_then(|t| t.checked_add(1)) {
        Some(after) => keys::seq(id, after),
        None => keys::prefix_end(&keys::prefix(id)),
    };
    if start >= end {
        return Ok(Vec::new());
    }
    tree.range(start..end)
        .take(limit)
        .map(|item| {
            let (k, v) = item?;
            codec::decode(name, &k, &v)
        })
        .collect()
}
