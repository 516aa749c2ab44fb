//! The live-history cache: each agent's live history, decoded, kept in memory between turns so
//! that a turn, a usage check or a compaction does not read and decode it from the trees again.
//!
//! **Coherence.** The cached history sits in the agent's in-memory state (`AgentState`), beside
//! its record, and changes only while the record's lock is held: every commit that writes the
//! history tree publishes its record through `AgentState::publish`, which either extends the
//! cache with the messages an append stored (`publish_appended`) or drops it (any other write to
//! the history tree: a compaction, a masking, an undo). A write set that leaves the history tree
//! alone (the journal, events, the record's own fields) keeps it. So the cache is exactly what a
//! read of the trees under the same lock would give, on both backends. A cluster node caches only
//! the agents of the shards it holds, like their records: a state made for one read of another
//! node's agent is never cached, and losing a shard forgets its agents' states with their caches.
//!
//! **Admission.** An agent's history is cached when it is read from the trees a second time
//! within a sweep period or two (a turn after a turn: an agent in conversation); a single read —
//! an agent that speaks every minute, a status query — caches nothing. The archived originals a
//! retrieval reads are kept only for an agent whose history is cached.
//!
//! **Memory.** All agents' caches together stay within a byte budget (`[store] history_cache_mb`,
//! [`DEFAULT_HISTORY_CACHE_MB`]): past it, the clock hand (a queue of the agents that hold a
//! cache, each with a "read since the hand last passed" bit) drops the caches of agents not read
//! lately. The runtime also sweeps every few seconds (`Store::sweep_history_cache`): a cache not
//! read since the sweep before goes, so the memory is held by agents in conversation, not by
//! every agent that spoke once. An agent whose history is dropped reads it from the trees on its
//! next turn, as every turn did before this cache. Budget 0 turns caching off.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use somna_core::Message;

use crate::store::AgentState;

/// The default budget of the live-history cache, in MiB (`[store] history_cache_mb`).
pub const DEFAULT_HISTORY_CACHE_MB: u64 = somna_core::config::DEFAULT_HISTORY_CACHE_MB;

/// What the live-history cache holds and did, since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HistoryCacheStats {
    /// Bytes held now (an estimate: the messages' structs and their text).
    pub bytes: u64,
    /// The budget, in bytes.
    pub budget: u64,
    /// Reads served from memory.
    pub hits: u64,
    /// Reads that went to the trees (and cached what they read).
    pub misses: u64,
    /// Caches dropped: to stay within the budget, or by a sweep (not read since the one before).
    pub evictions: u64,
}

/// The budget and the clock hand shared by every agent's cache.
pub(crate) struct HistoryCache {
    budget: AtomicU64,
    used: Arc<AtomicU64>,
    /// Agents holding a cache, oldest first (each at most once: `AgentState::in_ring`).
    ring: Mutex<VecDeque<Weak<AgentState>>>,
    /// Counts sweeps: an agent read from the trees in this period or the one before is admitted
    /// (see `AgentState::cache_history`).
    epoch: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl Default for HistoryCache {
    fn default() -> Self {
        HistoryCache {
            budget: AtomicU64::new(DEFAULT_HISTORY_CACHE_MB * 1024 * 1024),
            used: Arc::new(AtomicU64::new(0)),
            ring: Mutex::new(VecDeque::new()),
            epoch: AtomicU64::new(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }
}

/// One agent's cache: its live history (dropped by a commit that rewrites it) and the originals
/// of archived messages read before (kept: an archived original never changes, whatever becomes
/// of the message later; whether it is still archived is decided per read from the covers and the
/// live history).
pub(crate) struct Cached {
    live: Option<Arc<Vec<Message>>>,
    live_bytes: u64,
    originals: HashMap<u64, Message>,
    bytes: u64,
    used: Arc<AtomicU64>,
}

impl Drop for Cached {
    fn drop(&mut self) {
        self.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Cached {
    fn new(used: &Arc<AtomicU64>) -> Self {
        Cached {
            live: None,
            live_bytes: 0,
            originals: HashMap::new(),
            bytes: 0,
            used: Arc::clone(used),
        }
    }

    fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&mut self, bytes: u64) {
        self.bytes -= bytes;
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(crate) fn live(&self) -> Option<&Arc<Vec<Message>>> {
        self.live.as_ref()
    }

    /// Caches `messages` as the live history.
    pub(crate) fn set_live(&mut self, messages: Arc<Vec<Message>>) {
        self.drop_live();
        let bytes: u64 = messages.iter().map(message_bytes).sum();
        self.live = Some(messages);
        self.live_bytes = bytes;
        self.add(bytes);
    }

    /// Forgets the live history (a commit rewrote it); the originals stay.
    pub(crate) fn drop_live(&mut self) {
        if self.live.take().is_some() {
            let bytes = std::mem::take(&mut self.live_bytes);
            self.sub(bytes);
        }
    }

    /// Appends `stored` (an append's messages, in seq order after the cached ones) to the live
    /// history, if cached. Copies the history first only when a reader still holds the previous
    /// snapshot.
    pub(crate) fn extend(&mut self, stored: &[Message]) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let added: u64 = stored.iter().map(message_bytes).sum();
        Arc::make_mut(live).extend_from_slice(stored);
        self.live_bytes += added;
        self.add(added);
    }

    /// The original of archived message `seq`, if read before.
    pub(crate) fn original(&self, seq: u64) -> Option<&Message> {
        self.originals.get(&seq)
    }

    /// Every original kept.
    pub(crate) fn originals(&self) -> impl Iterator<Item = &Message> {
        self.originals.values()
    }

    /// Keeps `original` (a normal message read from the archive or hidden in the history).
    pub(crate) fn keep_original(&mut self, original: &Message) {
        if !self.originals.contains_key(&original.seq) {
            self.add(message_bytes(original) + ORIGINAL_ENTRY_BYTES);
            self.originals.insert(original.seq, original.clone());
        }
    }
}

/// What a map entry of an original costs beyond the message (its key and the table's slack).
const ORIGINAL_ENTRY_BYTES: u64 = 16;

/// The bytes `m` takes in memory, near enough for a budget: its struct and its strings.
pub(crate) fn message_bytes(m: &Message) -> u64 {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| std::mem::size_of_val(c) + c.id.len() + c.name.len() + c.arguments.len())
        .sum();
    (std::mem::size_of::<Message>()
        + m.content.len()
        + m.name.as_ref().map_or(0, String::len)
        + m.tool_call_id.as_ref().map_or(0, String::len)
        + calls) as u64
}

impl HistoryCache {
    pub(crate) fn set_budget(&self, bytes: u64) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.budget.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn stats(&self) -> HistoryCacheStats {
        HistoryCacheStats {
            bytes: self.used.load(Ordering::Relaxed),
            budget: self.budget.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// An empty cache entry, counted in the budget as it grows.
    pub(crate) fn entry(&self) -> Cached {
        Cached::new(&self.used)
    }

    /// Puts `state` on the clock hand's queue unless it is there already.
    pub(crate) fn enlist(&self, state: &Arc<AgentState>) {
        if !state.in_ring.swap(true, Ordering::AcqRel) {
            self.ring
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(Arc::downgrade(state));
        }
    }

    /// Drops the caches of agents not read lately until the cache is within its budget. Called
    /// with no agent's cache locked (a record's lock may be held: the hand only tries locks).
    pub(crate) fn trim(&self) {
        if !self.over_budget() {
            return;
        }
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        // Every agent gets its second chance once per pass; two passes are enough to evict any
        // of them.
        let steps = ring.len().saturating_mul(2);
        self.hand(&mut ring, steps, Self::over_budget);
    }

    /// One pass of the clock hand over every cached agent: drops the caches not read since the
    /// pass before. The runtime sweeps every few seconds, so that the memory goes to the agents
    /// in conversation rather than to every agent that spoke once.
    pub(crate) fn sweep(&self) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let steps = ring.len();
        self.hand(&mut ring, steps, |_| true);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The current sweep period.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn over_budget(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.budget.load(Ordering::Relaxed)
    }

    /// Moves the clock hand up to `steps` agents while `go` holds: an agent read since the hand
    /// last passed loses its mark and stays; any other loses its cache.
    fn hand(
        &self,
        ring: &mut VecDeque<Weak<AgentState>>,
        mut steps: usize,
        go: impl Fn(&Self) -> bool,
    ) {
        while steps > 0 && go(self) {
            steps -= 1;
            let Some(weak) = ring.pop_front() else { break };
            let Some(state) = weak.upgrade() else {
                continue;
            };
            if state.live_referenced.swap(false, Ordering::AcqRel) {
                ring.push_back(weak);
                continue;
            }
            match state.try_take_live() {
                Some(Some(dropped)) => {
                    state.in_ring.store(false, Ordering::Release);
                    drop(dropped);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                // Nothing cached any more: off the queue.
                Some(None) => state.in_ring.store(false, Ordering::Release),
                // In use: try it again later.
                None => ring.push_back(weak),
            }
        }
    }
}
