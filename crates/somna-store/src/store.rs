//! The [`Store`] handle: opening the database, agents and their records, the per-agent in-memory
//! state, and the write path every operation shares.
//!
//! Every write follows one pattern: take the agent's mutex (writers of one agent are serialized, so
//! seq assignment and counters stay consistent), read what is needed, build a `WriteSet` with the
//! new `AgentRecord`, apply it in ONE transaction across the trees (`Db::apply` of the backend),
//! and only then update the
//! in-memory copy of the record. The transaction re-checks every value it removes against the bytes
//! read under the mutex, so a write set built from a stale read aborts instead of doing damage.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use somna_core::config::{AgentOverrides, StoreConfig};
use somna_core::tokens::Calibration;
use somna_core::{AgentId, AgentRecord, Seq, Timestamp};

use crate::backend::postgres::{self, PgDb};
use crate::backend::sled::SledDb;
use crate::backend::{Bytes, Db, Refusal, Tree};
use crate::codec;
use crate::durable::{FlushFailure, GroupCommit};
use crate::error::{Result, StoreError};
use crate::keys;
use crate::live::{HistoryCache, HistoryChange};

/// How to open a [`Store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How often sled's background thread flushes (fsyncs) written data; must be above zero. A
    /// write survives a kill after the next flush: this one, [`Store::flush`], a
    /// [`Store::durable`] wait, or dropping the last handle, whichever comes first.
    pub flush_every: Duration,
    /// The most bytes of pages sled keeps cached in memory (its `cache_capacity`); must be above
    /// zero. Reads of pages outside the cache go to the file (and the OS page cache).
    pub cache_bytes: u64,
}

impl Default for StoreOptions {
    /// A flush every 500 ms (sled's default) and a 64 MiB page cache (sled's own default is
    /// 1 GiB, which a runtime of many small agents fills with pages it rarely reads again).
    fn default() -> Self {
        StoreOptions {
            flush_every: Duration::from_millis(500),
            cache_bytes: DEFAULT_CACHE_MB * 1024 * 1024,
        }
    }
}

/// The default page cache of a sled store, in MiB (`[store] cache_mb`).
pub const DEFAULT_CACHE_MB: u64 = somna_core::config::DEFAULT_STORE_CACHE_MB;

impl From<&StoreConfig> for StoreOptions {
    fn from(config: &StoreConfig) -> Self {
        StoreOptions {
            flush_every: config.flush_every,
            cache_bytes: config.cache_mb.saturating_mul(1024 * 1024),
        }
    }
}

/// How to open a [`Store`] on Postgres ([`Store::open_postgres`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The Postgres schema holding the store's tables (created if missing): 1 to 63 lowercase
    /// letters, digits or `_`, not starting with a digit or `pg_`.
    pub schema: String,
    /// The most connections the store opens at once; above zero.
    pub pool_size: usize,
}

impl Default for PostgresOptions {
    /// Schema `somna`, 8 connections.
    fn default() -> Self {
        PostgresOptions {
            schema: "somna".to_string(),
            pool_size: 8,
        }
    }
}

/// A handle on the database. Cheap to clone; every clone shares the trees and the per-agent state.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) trees: Trees,
    /// The group commit behind [`Store::durable`].
    pub(crate) group: GroupCommit,
    /// Per-agent state, loaded from the agent's record on first use and never evicted (one small
    /// struct per agent).
    states: RwLock<HashMap<AgentId, Arc<AgentState>>>,
    /// This node's leases when the store is one node of a cluster (see `cluster`).
    pub(crate) cluster: Option<crate::cluster::Membership>,
    /// Agents' vectors as searched last, checked against their meta on every search (see
    /// `vectors`).
    pub(crate) vector_cache: crate::vectors::VectorCache,
    /// The live-history cache's budget and clock hand (see `live`).
    pub(crate) history_cache: HistoryCache,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // sled's own `Debug` for trees dumps their contents, so only name the database here.
        f.debug_struct("Store")
            .field("backend", &self.db.kind())
            .field("was_recovered", &self.db.was_recovered())
            .finish_non_exhaustive()
    }
}

/// The names of the trees, as they appear in the backend (sled trees, Postgres tables) and in errors.
pub mod tree_names {
    /// Agent records.
    pub const AGENTS: &str = "agents";
    /// Every message, summary and masked placeholder; live history is what no cover hides.
    pub const HISTORY: &str = "history";
    /// The originals of masked messages (and what a layout-1 build moved out of history).
    pub const ARCHIVE: &str = "archive";
    /// Journal entries.
    pub const JOURNAL: &str = "journal";
    /// The by-source index of journal entries.
    pub const JOURNAL_BY_SOURCE: &str = "journal_by_source";
    /// Memory facts.
    pub const MEMORY: &str = "memory";
    /// The event log.
    pub const EVENTS: &str = "events";
    /// Undo records of summaries.
    pub const UNDO: &str = "undo";
    /// The inverted index of messages, journal entries and facts (see the `index` module).
    pub const TERMS: &str = "terms";
    /// Inputs waiting for the node that owns their agent (a cluster's routing, see `inbox`).
    pub const INBOX: &str = "inbox";
    /// Embedding vectors of archived messages, quantized (see the `vectors` module).
    pub const VECTORS: &str = "vectors";
    /// The API's scoped tokens, by name, hashed (see the `tokens` module).
    pub const TOKENS: &str = "tokens";
}

/// Every value of `tree` (named `name` in errors), decoded, in key order.
pub(crate) fn decode_all<T: serde::de::DeserializeOwned>(
    tree: &Tree,
    name: &'static str,
) -> Result<Vec<T>> {
    tree.iter()
        .map(|item| {
            let (key, value) = item?;
            codec::decode(name, &key, &value)
        })
        .collect()
}

pub(crate) struct Trees {
    pub(crate) agents: Tree,
    pub(crate) history: Tree,
    pub(crate) archive: Tree,
    pub(crate) journal: Tree,
    pub(crate) journal_by_source: Tree,
    pub(crate) memory: Tree,
    pub(crate) events: Tree,
    pub(crate) undo: Tree,
    pub(crate) terms: Tree,
    pub(crate) inbox: Tree,
    pub(crate) vectors: Tree,
    pub(crate) tokens: Tree,
}

impl Trees {
    /// The tree a write to `id` goes to.
    pub(crate) fn get(&self, id: TreeId) -> &Tree {
        match id {
            TreeId::Agents => &self.agents,
            TreeId::History => &self.history,
            TreeId::Archive => &self.archive,
            TreeId::Journal => &self.journal,
            TreeId::JournalBySource => &self.journal_by_source,
            TreeId::Memory => &self.memory,
            TreeId::Events => &self.events,
            TreeId::Undo => &self.undo,
            TreeId::Inbox => &self.inbox,
        }
    }
}

/// Which tree a write goes to (the index into the transaction's views).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TreeId {
    Agents = 0,
    History = 1,
    Archive = 2,
    Journal = 3,
    JournalBySource = 4,
    Memory = 5,
    Events = 6,
    Undo = 7,
    Inbox = 8,
}

impl TreeId {
    pub(crate) fn name(self) -> &'static str {
        use tree_names::*;
        match self {
            TreeId::Agents => AGENTS,
            TreeId::History => HISTORY,
            TreeId::Archive => ARCHIVE,
            TreeId::Journal => JOURNAL,
            TreeId::JournalBySource => JOURNAL_BY_SOURCE,
            TreeId::Memory => MEMORY,
            TreeId::Events => EVENTS,
            TreeId::Undo => UNDO,
            TreeId::Inbox => INBOX,
        }
    }
}

/// The in-memory state of one agent.
pub(crate) struct AgentState {
    /// The agent's record as last committed. Holding this mutex is what serializes the agent's
    /// writers.
    record: Mutex<AgentRecord>,
    /// A copy of `record.history_tokens`, readable without the mutex (the O(1) usage read).
    history_tokens: AtomicU64,
    /// False for a state made for one read (another node's agent): its history is never cached.
    cacheable: bool,
}

impl HistoryChange<'_> {
    /// What `writes` do to the history: `Rewritten` when any of them writes the history tree.
    pub(crate) fn of(writes: &WriteSet) -> Self {
        if writes.writes().iter().any(|w| w.tree == TreeId::History) {
            HistoryChange::Rewritten
        } else {
            HistoryChange::None
        }
    }
}

impl AgentState {
    fn new(record: AgentRecord, cacheable: bool) -> Self {
        AgentState {
            history_tokens: AtomicU64::new(record.history_tokens),
            record: Mutex::new(record),
            cacheable,
        }
    }

    /// Locks the agent for writing. A panic while the lock was held cannot have left a half-updated
    /// record (it is replaced whole after a commit), so a poisoned lock is simply taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, AgentRecord> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a committed record: the caller holds the lock through `guard` (see
    /// `Store::publish`).
    fn set_record(&self, guard: &mut MutexGuard<'_, AgentRecord>, next: AgentRecord) {
        self.history_tokens
            .store(next.history_tokens, Ordering::Release);
        **guard = next;
    }

    /// False for a state made for one read (another node's agent): never cached.
    pub(crate) fn cacheable(&self) -> bool {
        self.cacheable
    }

    pub(crate) fn history_tokens(&self) -> u64 {
        self.history_tokens.load(Ordering::Acquire)
    }
}

/// Why a transaction was aborted: a value it meant to remove changed or is gone, or a key it meant
/// to create is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub(crate) seq: Seq,
    pub(crate) reason: String,
}

pub(crate) enum Op {
    /// Insert or overwrite.
    Put(Bytes),
    /// Insert; abort if the key exists.
    Create(Bytes),
    /// Remove; abort unless the current value is exactly this.
    Take(Bytes),
    /// Remove whatever is there.
    Delete,
}

pub(crate) struct Write {
    pub(crate) tree: TreeId,
    pub(crate) key: Bytes,
    pub(crate) op: Op,
    /// The seq named in a conflict caused by this write.
    pub(crate) seq: Seq,
}

/// The writes of one operation, applied in order in one transaction.
#[derive(Default)]
pub(crate) struct WriteSet {
    writes: Vec<Write>,
    /// Applied without a cluster lease (an inbox enqueue by a node that does not own the agent).
    unfenced: bool,
    /// Appends: applied in order without a transaction where the backend gains by it (sled; see
    /// its module), what a crash can separate being recovered at open.
    appends: bool,
}

impl WriteSet {
    /// The agent id (as key bytes) of the first write: every key starts with its agent's id,
    /// followed by 0x00 except in the `agents` tree. Every write set writes one agent.
    pub(crate) fn agent_key(&self) -> &[u8] {
        let key = self.writes.first().map_or(&[][..], |w| &w.key[..]);
        let end = key
            .iter()
            .position(|&b| b == keys::SEP)
            .unwrap_or(key.len());
        &key[..end]
    }

    /// Marks the set as needing no lease: it only creates inbox entries, which any node may.
    pub(crate) fn unfenced(&mut self) {
        debug_assert!(self.writes.iter().all(|w| w.tree == TreeId::Inbox));
        self.unfenced = true;
    }

    /// Marks the set as an append: new history messages or new journal entries (each with its
    /// by-source key), then the agent's record. sled applies it in order without a transaction
    /// (its process-wide transaction lock is what appends queued on); `Store::recover_appends`
    /// repairs a record whose update a crash lost.
    pub(crate) fn appends(&mut self) {
        debug_assert!(self.writes.iter().all(|w| matches!(
            (&w.op, w.tree),
            (Op::Create(_), TreeId::History | TreeId::Journal)
                | (Op::Put(_), TreeId::JournalBySource | TreeId::Agents)
        )));
        debug_assert!(self.writes.last().is_some_and(|w| w.tree == TreeId::Agents));
        self.appends = true;
    }

    /// Whether the set was marked as an append ([`WriteSet::appends`]).
    pub(crate) fn is_appends(&self) -> bool {
        self.appends
    }

    /// The writes, in the order they apply.
    pub(crate) fn writes(&self) -> &[Write] {
        &self.writes
    }

    pub(crate) fn with_capacity(n: usize) -> Self {
        WriteSet {
            writes: Vec::with_capacity(n),
            unfenced: false,
            appends: false,
        }
    }

    pub(crate) fn put(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>) {
        self.push(tree, key, Op::Put(value.into()), 0);
    }

    pub(crate) fn create(&mut self, tree: TreeId, key: Vec<u8>, value: impl Into<Bytes>, seq: Seq) {
        self.push(tree, key, Op::Create(value.into()), seq);
    }

    pub(crate) fn take(&mut self, tree: TreeId, key: Vec<u8>, expect: Bytes, seq: Seq) {
        self.push(tree, key, Op::Take(expect), seq);
    }

    pub(crate) fn delete(&mut self, tree: TreeId, key: Vec<u8>) {
        self.push(tree, key, Op::Delete, 0);
    }

    pub(crate) fn put_record(&mut self, record: &AgentRecord) -> Result<()> {
        let value = codec::encode_record(tree_names::AGENTS, record)?;
        self.put(TreeId::Agents, keys::agent(&record.id), value);
        Ok(())
    }

    fn push(&mut self, tree: TreeId, key: Vec<u8>, op: Op, seq: Seq) {
        self.writes.push(Write {
            tree,
            key: key.into(),
            op,
            seq,
        });
    }
}

impl Store {
    /// Opens (or creates) the sled database in the directory `path` (see the sled backend for
    /// how a snapshot half-written by a killed process is recovered from), and, unless the last
    /// process closed it cleanly, counts in their records the appends a crash left uncounted (one
    /// seek per agent; see the sled backend).
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        if options.flush_every.is_zero() {
            return Err(StoreError::Invalid {
                what: "store options",
                reason: "flush_every must be above zero".to_string(),
            });
        }
        if options.cache_bytes == 0 {
            return Err(StoreError::Invalid {
                what: "store options",
                reason: "cache_bytes must be above zero".to_string(),
            });
        }
        let db = SledDb::open(path.as_ref(), options.flush_every, options.cache_bytes)?;
        let closed_cleanly = db.take_close_mark()?;
        let store = Self::from_db(Db::Sled(db))?;
        if !closed_cleanly {
            let adopted = store.recover_appends()?;
            tracing::debug!(
                adopted,
                "sled store was not closed cleanly: records checked"
            );
        }
        if let Db::Sled(db) = &store.inner.db {
            db.mark_on_close();
        }
        Ok(store)
    }

    /// A database that lives in memory-backed temporary files and is deleted when the last handle
    /// drops (tests, examples).
    pub fn temporary() -> Result<Store> {
        Self::from_db(Db::Sled(SledDb::temporary()?))
    }

    /// Opens (or creates) a store in a Postgres database: `url` is a
    /// `postgres://user:password@host:port/database` URL (or a libpq `key=value` string); the
    /// store's tables live in `options.schema`, created and migrated at open (migrations are safe
    /// when several processes open at once). Like a sled directory, a schema is open in one process
    /// at a time: the store holds an advisory lock on it in a session of its own, and an open waits
    /// up to 5 s for another holder, then fails with a [`StorageError`](crate::StorageError) that
    /// `is_locked`. Errors name the host, port and database, never the password.
    pub fn open_postgres(url: &str, options: PostgresOptions) -> Result<Store> {
        let db = PgDb::open(url, &options.schema, options.pool_size, false, None)?;
        Self::from_db(Db::Postgres(db))
    }

    /// A store in a fresh, uniquely named schema of the Postgres database at `url`, dropped (best
    /// effort) when the last handle drops (tests).
    pub fn temporary_postgres(url: &str) -> Result<Store> {
        Self::temporary_postgres_in(url, &postgres::temporary_schema())
    }

    /// [`Store::open_postgres`] of `schema` (with 4 connections), dropping the schema (best effort)
    /// when the last handle drops: tests that reopen a schema by name, then discard it.
    pub fn temporary_postgres_in(url: &str, schema: &str) -> Result<Store> {
        let db = PgDb::open(url, schema, 4, true, None)?;
        Self::from_db(Db::Postgres(db))
    }

    /// The backend holding the data: `sled` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        self.inner.db.kind()
    }

    pub(crate) fn from_db(db: Db) -> Result<Store> {
        Self::from_db_in_cluster(db, None)
    }

    pub(crate) fn from_db_in_cluster(
        db: Db,
        cluster: Option<crate::cluster::Membership>,
    ) -> Result<Store> {
        use tree_names::*;
        let trees = Trees {
            agents: db.tree(AGENTS)?,
            history: db.tree(HISTORY)?,
            archive: db.tree(ARCHIVE)?,
            journal: db.tree(JOURNAL)?,
            journal_by_source: db.tree(JOURNAL_BY_SOURCE)?,
            memory: db.tree(MEMORY)?,
            events: db.tree(EVENTS)?,
            undo: db.tree(UNDO)?,
            terms: db.tree(TERMS)?,
            inbox: db.tree(INBOX)?,
            vectors: db.tree(VECTORS)?,
            tokens: db.tree(TOKENS)?,
        };
        Ok(Store {
            inner: Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
                // The flusher holds no strong handle, so dropping the last `Store` still closes
                // (and flushes) the database at once.
                let weak = weak.clone();
                Inner {
                    db,
                    trees,
                    group: GroupCommit::new(move || match weak.upgrade() {
                        Some(inner) => inner.db.flush().map(drop).map_err(|e| match e {
                            StoreError::Storage(e) => FlushFailure::Engine(e),
                            other => FlushFailure::Engine(crate::error::StorageError::new(
                                crate::error::StorageErrorKind::Other,
                                other,
                            )),
                        }),
                        None => Err(FlushFailure::Closed),
                    }),
                    states: RwLock::new(HashMap::new()),
                    cluster,
                    vector_cache: crate::vectors::VectorCache::default(),
                    history_cache: HistoryCache::default(),
                }
            }),
        })
    }

    /// Writes everything to disk and fsyncs; returns the number of bytes flushed. Call on shutdown
    /// (dropping the last handle flushes too, but cannot report an error).
    pub fn flush(&self) -> Result<usize> {
        self.inner.db.flush()
    }

    /// The database's size on disk, in bytes.
    pub fn size_on_disk(&self) -> Result<u64> {
        self.inner.db.size_on_disk()
    }

    /// True when the database was opened from existing files (rather than created).
    pub fn was_recovered(&self) -> bool {
        self.inner.db.was_recovered()
    }

    // --- agents -------------------------------------------------------------------------------

    /// Creates the record of a new agent. Fails with [`StoreError::AlreadyExists`] if it exists.
    pub fn create_agent(&self, id: &AgentId, now: Timestamp) -> Result<AgentRecord> {
        let record = AgentRecord::new(id.clone(), now);
        let value = codec::encode_record(tree_names::AGENTS, &record)?;
        let mut writes = WriteSet::with_capacity(1);
        writes.create(TreeId::Agents, keys::agent(id), value, 0);
        match self.apply(&writes)? {
            Ok(()) => {
                tracing::debug!(agent = %id, "agent created");
                Ok(record)
            }
            Err(_) => Err(StoreError::AlreadyExists(id.clone())),
        }
    }

    /// Loads the agent's record, creating it first if it does not exist.
    pub fn ensure_agent(&self, id: &AgentId, now: Timestamp) -> Result<AgentRecord> {
        if let Some(record) = self.agent(id)? {
            return Ok(record);
        }
        match self.create_agent(id, now) {
            Err(StoreError::AlreadyExists(_)) => self
                .agent(id)?
                .ok_or_else(|| StoreError::UnknownAgent(id.clone())),
            other => other,
        }
    }

    /// The agent's record as stored, or `None` for an unknown agent.
    pub fn agent(&self, id: &AgentId) -> Result<Option<AgentRecord>> {
        let key = keys::agent(id);
        match self.inner.trees.agents.get(&key)? {
            Some(v) => Ok(Some(codec::decode(tree_names::AGENTS, &key, &v)?)),
            None => Ok(None),
        }
    }

    /// Every agent's record (retired ones included), in id order.
    pub fn agents(&self) -> Result<Vec<AgentRecord>> {
        decode_all(&self.inner.trees.agents, tree_names::AGENTS)
    }

    /// Replaces the agent's run-time config overrides.
    pub fn set_overrides(&self, id: &AgentId, overrides: AgentOverrides) -> Result<AgentRecord> {
        self.update_record(id, |r| r.overrides = overrides)
    }

    /// Replaces the agent's token calibration.
    pub fn update_calibration(
        &self,
        id: &AgentId,
        calibration: Calibration,
    ) -> Result<AgentRecord> {
        self.update_record(id, |r| r.calibration = calibration)
    }

    /// Marks the agent retired: it is no longer hosted, and nothing of its data is deleted.
    pub fn retire(&self, id: &AgentId) -> Result<AgentRecord> {
        self.update_record(id, |r| r.retired = true)
    }

    /// Records when the agent's next sleep is due (its durable sleep schedule).
    pub fn set_next_sleep(&self, id: &AgentId, at: Timestamp) -> Result<AgentRecord> {
        self.update_record(id, |r| r.next_sleep_at = Some(at))
    }

    /// The tokens of the agent's live history: an O(1) read of the in-memory counter (the first call
    /// for an agent loads its record).
    pub fn usage_tokens(&self, id: &AgentId) -> Result<u64> {
        Ok(self.state(id)?.history_tokens())
    }

    fn update_record(
        &self,
        id: &AgentId,
        change: impl FnOnce(&mut AgentRecord),
    ) -> Result<AgentRecord> {
        self.update_record_with(id, |record, _| {
            change(record);
            Ok(())
        })
        .map(|(record, ())| record)
    }

    /// Changes the agent's record with `change`, which may add writes of its own, and commits
    /// them with the record in one transaction; the new record and what `change` returned.
    pub(crate) fn update_record_with<T>(
        &self,
        id: &AgentId,
        change: impl FnOnce(&mut AgentRecord, &mut WriteSet) -> Result<T>,
    ) -> Result<(AgentRecord, T)> {
        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(2);
        let out = change(&mut next, &mut writes)?;
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        self.publish(
            id,
            &state,
            &mut guard,
            next.clone(),
            HistoryChange::of(&writes),
        );
        Ok((next, out))
    }

    // --- shared machinery ---------------------------------------------------------------------

    /// Publishes `id`'s committed record (the caller holds its lock through `guard`) and tells
    /// the live-history cache what the commit did to the history, under that lock (see `live`).
    pub(crate) fn publish(
        &self,
        id: &AgentId,
        state: &AgentState,
        guard: &mut MutexGuard<'_, AgentRecord>,
        next: AgentRecord,
        change: HistoryChange<'_>,
    ) {
        state.set_record(guard, next);
        self.inner.history_cache.committed(id, change);
    }

    /// The agent's in-memory state, loading it from its record on first use.
    pub(crate) fn state(&self, id: &AgentId) -> Result<Arc<AgentState>> {
        // A cluster node caches only the agents of the shards it holds: another node writes the
        // others, so a read of theirs starts from the stored record.
        if let Some(membership) = &self.inner.cluster
            && !membership.holds(id.as_str().as_bytes())
        {
            let record = self
                .agent(id)?
                .ok_or_else(|| StoreError::UnknownAgent(id.clone()))?;
            return Ok(Arc::new(AgentState::new(record, false)));
        }
        {
            let states = self
                .inner
                .states
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(state) = states.get(id) {
                return Ok(Arc::clone(state));
            }
        }
        // No write of this agent can commit before its state exists, so the stored record is the
        // latest; if another thread inserted the state meanwhile, theirs wins.
        let record = self
            .agent(id)?
            .ok_or_else(|| StoreError::UnknownAgent(id.clone()))?;
        let mut states = self
            .inner
            .states
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(Arc::clone(states.entry(id.clone()).or_insert_with(|| {
            Arc::new(AgentState::new(record, true))
        })))
    }

    /// The agent's in-memory state if it has been loaded.
    pub(crate) fn loaded_state(&self, id: &AgentId) -> Option<Arc<AgentState>> {
        self.inner
            .states
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Forgets the cached state of every agent `which` selects (their next use reloads it).
    pub(crate) fn forget_states(&self, which: impl Fn(&AgentId) -> bool) {
        self.inner
            .states
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id, _| !which(id));
        self.inner.history_cache.forget(which);
    }

    /// Applies `writes` in one transaction across every tree. `Ok(Err(conflict))` means the
    /// transaction aborted and nothing changed. On a cluster node the set is fenced by the lease
    /// of its agent's shard: [`StoreError::Fenced`] when this node does not hold it (any more).
    pub(crate) fn apply(&self, writes: &WriteSet) -> Result<std::result::Result<(), Conflict>> {
        let membership = self.inner.cluster.as_ref().filter(|_| !writes.unfenced);
        let Some(membership) = membership else {
            return Ok(self
                .inner
                .db
                .apply(&self.inner.trees, writes, None)?
                .map_err(|refusal| match refusal {
                    Refusal::Conflict(c) => c,
                    // Only a fenced write set can be refused as fenced.
                    Refusal::Fenced => Conflict {
                        seq: 0,
                        reason: "fenced without a fence".to_string(),
                    },
                }));
        };
        let agent_key = writes.agent_key();
        let (shard, fence) = membership.fence(agent_key);
        let fenced = |epoch| {
            // What this node cached of the agent may be stale from now on.
            self.forget_states(|id| id.as_str().as_bytes() == agent_key);
            StoreError::Fenced {
                agent: String::from_utf8_lossy(agent_key).into_owned(),
                shard,
                epoch,
            }
        };
        let Some(fence) = fence else {
            return Err(fenced(None));
        };
        let epoch = fence.epoch;
        match self
            .inner
            .db
            .apply(&self.inner.trees, writes, Some(fence))?
        {
            Ok(()) => Ok(Ok(())),
            Err(Refusal::Conflict(c)) => Ok(Err(c)),
            Err(Refusal::Fenced) => Err(fenced(Some(epoch))),
        }
    }

    /// [`Store::apply`] for write sets built entirely under the agent's lock from fresh counters,
    /// where a conflict means the stored data contradicts the record.
    pub(crate) fn apply_expecting_no_conflict(
        &self,
        id: &AgentId,
        writes: &WriteSet,
    ) -> Result<()> {
        self.apply(writes)?.map_err(|c| StoreError::Inconsistent {
            agent: id.clone(),
            reason: c.reason,
        })
    }
}
