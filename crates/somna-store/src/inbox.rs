//! The inbox: inputs waiting for the node that owns their agent (a cluster's routing).
//!
//! Any node accepts input for any agent: when the agent is hosted elsewhere, the input is written
//! to the `inbox` tree ([`Store::enqueue`]) — one durable write that no lease fences, since the
//! enqueuing node does not own the agent — and the owner moves it into history exactly once
//! ([`Store::append_from_inbox`]: the inbox entry is taken and the message appended in one
//! transaction, which its lease fences). Keys are `agent ‖ 0x00 ‖ enqueued_ms_be64 ‖ nonce_be64`,
//! so an agent's inputs are delivered in the order they were enqueued (within a millisecond, in
//! nonce order).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use somna_core::{AgentId, Message, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::live::HistoryChange;
use crate::store::{Store, TreeId, WriteSet, tree_names};

/// An input waiting in the inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    /// Its key (pass it back to [`Store::append_from_inbox`]).
    pub key: Vec<u8>,
    /// The agent it is for.
    pub agent: AgentId,
    /// When it was enqueued (the enqueuing node's clock).
    pub enqueued_at: Timestamp,
    /// The input, as the runtime serialized it.
    pub payload: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    enqueued_at: Timestamp,
    #[serde(with = "serde_bytes_compat")]
    payload: Vec<u8>,
}

/// `Vec<u8>` as MessagePack binary (not an array of integers).
mod serde_bytes_compat {
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        Deserializer::deserialize_bytes(d, Visitor)
    }
}

/// A nonce unique in this process and unlikely to repeat across processes.
fn nonce() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = u64::from(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    (pid << 40) ^ (nanos << 8) ^ COUNTER.fetch_add(1, Ordering::Relaxed)
}

impl Store {
    /// Enqueues `payload` (a serialized input) for `id`'s owner; returns the entry's key. Durable
    /// when it returns on Postgres (and after the next flush on sled). Any node may enqueue: the
    /// write is not fenced. Fails with [`StoreError::UnknownAgent`] for an agent without a record.
    pub fn enqueue(&self, id: &AgentId, payload: Vec<u8>, now: Timestamp) -> Result<Vec<u8>> {
        if self.agent(id)?.is_none() {
            return Err(StoreError::UnknownAgent(id.clone()));
        }
        let mut key = keys::prefix(id);
        key.extend_from_slice(&now.0.to_be_bytes());
        key.extend_from_slice(&nonce().to_be_bytes());
        let value = codec::encode(
            tree_names::INBOX,
            &Stored {
                enqueued_at: now,
                payload,
            },
        )?;
        let mut writes = WriteSet::with_capacity(1);
        writes.create(TreeId::Inbox, key.clone(), value, 0);
        writes.unfenced();
        self.apply_expecting_no_conflict(id, &writes)?;
        Ok(key)
    }

    /// Up to `limit` waiting inputs, by agent then enqueue order.
    pub fn inbox(&self, limit: usize) -> Result<Vec<InboxItem>> {
        let mut items = Vec::new();
        for entry in self.inner.trees.inbox.iter().take(limit) {
            let (key, value) = entry?;
            let stored: Stored = codec::decode(tree_names::INBOX, &key, &value)?;
            let end = key
                .iter()
                .position(|&b| b == keys::SEP)
                .unwrap_or(key.len());
            let agent =
                AgentId::new(String::from_utf8_lossy(&key[..end]).into_owned()).map_err(|e| {
                    StoreError::Malformed {
                        tree: tree_names::INBOX,
                        key: keys::render(&key),
                        reason: e.to_string(),
                    }
                })?;
            items.push(InboxItem {
                key: key.to_vec(),
                agent,
                enqueued_at: stored.enqueued_at,
                payload: stored.payload,
            });
        }
        Ok(items)
    }

    /// How many inputs wait in the inbox (a full scan: for status and tests).
    pub fn inbox_len(&self) -> Result<usize> {
        let mut n = 0;
        for entry in self.inner.trees.inbox.iter() {
            entry?;
            n += 1;
        }
        Ok(n)
    }

    /// Removes the inbox entry `key` of `id` without delivering it (an input its agent refused);
    /// fenced like any write of the agent.
    pub fn discard_from_inbox(&self, id: &AgentId, key: &[u8]) -> Result<()> {
        if !key.starts_with(&keys::prefix(id)) {
            return Err(StoreError::Invalid {
                what: "inbox discard",
                reason: format!("key {} is not agent {id}'s", keys::render(key)),
            });
        }
        let mut writes = WriteSet::with_capacity(1);
        writes.delete(TreeId::Inbox, key.to_vec());
        self.apply_expecting_no_conflict(id, &writes)
    }

    /// Takes the inbox entry `key` of `id` and appends `message` (built from it; `tokens` set) in
    /// one transaction: `None` when the entry is gone (delivered already), so an input reaches
    /// history exactly once. On a cluster node the transaction is fenced by the agent's lease.
    pub fn append_from_inbox(
        &self,
        id: &AgentId,
        key: &[u8],
        mut message: Message,
        now: Timestamp,
    ) -> Result<Option<Message>> {
        if !key.starts_with(&keys::prefix(id)) {
            return Err(StoreError::Invalid {
                what: "inbox delivery",
                reason: format!("key {} is not agent {id}'s", keys::render(key)),
            });
        }
        let state = self.state(id)?;
        let mut guard = state.lock();
        // Under the agent's lock (and the lease): nobody else takes this agent's entries.
        let Some(value) = self.inner.trees.inbox.get(key)? else {
            return Ok(None);
        };
        let mut next = guard.clone();
        message.seq = next.next_seq;
        if message.created_at == Timestamp::ZERO {
            message.created_at = now;
        }
        let mut writes = WriteSet::with_capacity(3);
        writes.take(TreeId::Inbox, key.to_vec(), value, message.seq);
        writes.create(
            TreeId::History,
            keys::seq(id, message.seq),
            codec::encode(tree_names::HISTORY, &message)?,
            message.seq,
        );
        next.next_seq += 1;
        next.history_len += 1;
        next.history_tokens += u64::from(message.tokens);
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        self.publish(
            id,
            &state,
            &mut guard,
            next,
            HistoryChange::Appended(std::slice::from_ref(&message)),
        );
        Ok(Some(message))
    }
}
