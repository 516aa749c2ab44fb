//! The store's error type.

use somna_core::{AgentId, EntryId};

use crate::codec::FORMAT_VERSION;

/// Everything that can go wrong in the store. Expected outcomes (a conflicting compaction, an
/// unknown summary to undo) are values of the operation's result type, not errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage engine failed (an IO error, corruption it detected).
    #[error(transparent)]
    Storage(StorageError),
    /// `create_agent` for an id that already has a record.
    #[error("agent {0} already exists")]
    AlreadyExists(AgentId),
    /// `create_token` for a name that a token already has.
    #[error("a token named {0:?} exists (revoke it first, or pick another name)")]
    TokenExists(String),
    /// A write or a counter read for an agent without a record.
    #[error("unknown agent {0}")]
    UnknownAgent(AgentId),
    /// `consolidate` named a journal entry that does not exist.
    #[error("agent {agent} has no journal entry {entry}")]
    UnknownEntry {
        /// The agent whose journal was searched.
        agent: AgentId,
        /// The missing entry id.
        entry: EntryId,
    },
    /// The caller passed something malformed (a summary whose metadata does not match what it
    /// covers, a non-normal message to append, ...).
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was invalid, e.g. `compaction commit`.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A value could not be serialized. The encoder's error is in the message and is not also a
    /// `source` (`{e:#}` would print it twice).
    #[error("cannot encode a value for tree {tree}: {cause}")]
    Encode {
        /// The tree the value was meant for.
        tree: &'static str,
        /// The encoder's error.
        cause: rmp_serde::encode::Error,
    },
    /// A stored value has no format-version byte.
    #[error("value of {tree} key {key} is empty")]
    EmptyValue {
        /// The tree holding the value.
        tree: &'static str,
        /// The key, rendered readably (`agent/seq`).
        key: String,
    },
    /// A stored value was written by a format version this build cannot read.
    #[error(
        "value of {tree} key {key} has format version {version}, this build reads version {FORMAT_VERSION}"
    )]
    UnsupportedVersion {
        /// The tree holding the value.
        tree: &'static str,
        /// The key, rendered readably (`agent/seq`).
        key: String,
        /// The version byte found.
        version: u8,
    },
    /// A stored value's MessagePack body did not decode into the expected type. The decoder's
    /// error is in the message and is not also a `source`.
    #[error("cannot decode the value of {tree} key {key}: {cause}")]
    Decode {
        /// The tree holding the value.
        tree: &'static str,
        /// The key, rendered readably (`agent/seq`).
        key: String,
        /// The decoder's error.
        cause: rmp_serde::decode::Error,
    },
    /// A stored value that is not MessagePack (a search index value) does not parse.
    #[error("the value of {tree} key {key} is malformed: {reason}")]
    Malformed {
        /// The tree holding the value.
        tree: &'static str,
        /// The key, rendered readably.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The stored data contradicts itself (an archived original that a summary's undo record names
    /// is missing, a history key that should be free is taken). `check_invariants` says more.
    #[error("store is inconsistent for agent {agent}: {reason}")]
    Inconsistent {
        /// The agent whose data is inconsistent.
        agent: AgentId,
        /// What was found.
        reason: String,
    },
    /// A cluster node wrote an agent whose shard it does not hold: it never acquired it, gave it
    /// back, could not renew it in time, or another node took it over with a newer epoch. Nothing
    /// was written; the agent's new owner has it.
    #[error(
        "write for agent {agent} refused: this node does not hold shard {shard}{} (lease lost, expired, released or taken over)",
        .epoch.map_or_else(String::new, |e| format!(" at epoch {e}"))
    )]
    Fenced {
        /// The agent written (its id).
        agent: String,
        /// Its shard.
        shard: u32,
        /// The epoch this node held, if it held one.
        epoch: Option<u64>,
    },
    /// A [`Store::durable`](crate::Store::durable) wait outlived the store (its last handle was
    /// dropped before the flush), so nothing vouches that the writes reached the disk.
    #[error("the store was closed before the writes were flushed")]
    Closed,
}

/// An error of the storage backend (sled's IO or corruption, a Postgres connection or statement).
/// Opaque so that no backend type leaks out of this crate; cheap to clone (a flush failure is
/// reported to every waiter it served).
#[derive(Debug, Clone)]
pub struct StorageError {
    kind: StorageErrorKind,
    source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
}

/// What kind of backend failure a [`StorageError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StorageErrorKind {
    /// The engine found corrupted data.
    Corruption,
    /// Another process holds the database (sled allows one process per database).
    Locked,
    /// Anything else: IO, a lost connection, a failed statement.
    Other,
}

impl StorageError {
    pub(crate) fn new(
        kind: StorageErrorKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StorageError {
            kind,
            source: std::sync::Arc::new(source),
        }
    }

    /// True when the engine found corrupted data on disk.
    pub fn is_corruption(&self) -> bool {
        self.kind == StorageErrorKind::Corruption
    }

    /// True when another process holds the database open (sled allows one process per database).
    pub fn is_locked(&self) -> bool {
        self.kind == StorageErrorKind::Locked
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl From<StorageError> for StoreError {
    fn from(e: StorageError) -> Self {
        StoreError::Storage(e)
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
