//! The live-history cache: each agent's live history, decoded, kept in memory between turns so
//! that a turn, a usage check or a compaction does not read and decode it from the trees again,
//! with the archived originals its retrievals read.
//!
//! **Coherence.** An agent's cached history changes only while its record's lock is held: every
//! commit publishes its record through `Store::publish`, which tells the cache what the commit did
//! to the history tree ([`HistoryChange`]): an append extends the cached history with what it
//! stored; any other write to the history tree (a compaction, a masking, an undo) drops it; a
//! write set that leaves the history tree alone (the journal, events, the record's own fields)
//! keeps it. Reads fill it under the same lock. So the cache is exactly what a read of the trees
//! under that lock would give, on both backends. An archived original never changes, so those
//! stay; whether a message is still archived is decided on every read from the covers and the
//! cached history. A cluster node caches only the agents of the shards it holds, like their
//! records: a state made for one read of another node's agent is never cached, and losing a shard
//! forgets its agents' caches with their states.
//!
//! **Admission.** An agent's history is cached when it is read from the trees a second time
//! within a sweep period or two (a turn after a turn: an agent in conversation); a single read —
//! an agent that speaks every minute, a status query — caches nothing. The archived originals a
//! retrieval reads are kept only for an agent whose history is cached.
//!
//! **Memory.** The cache is a table beside the agents' states (which stay as small as they were:
//! a runtime may hold a million), within a byte budget for all agents (`[store]
//! history_cache_mb`, [`DEFAULT_HISTORY_CACHE_MB`]): past it, the clock hand (the cached agents in
//! order, each with a "read since the hand last passed" bit) drops the caches of agents not read
//! lately. The runtime also sweeps every few seconds (`Store::sweep_history_cache`): a cache not
//! read since the sweep before goes, so the memory is held by agents in conversation, not by
//! every agent that spoke once. An agent whose history is dropped reads it from the trees on its
//! next turn, as every turn did before this cache. Budget 0 turns caching off.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustc_hash::FxHashMap;
use somna_core::{AgentId, Message};

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
    /// Reads that went to the trees.
    pub misses: u64,
    /// Caches dropped: to stay within the budget, or by a sweep (not read since the one before).
    pub evictions: u64,
}

/// Whether a read of an agent's live history from the trees caches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Not at all (another node's agent, or a second read within one task).
    Never,
    /// When the agent has a cache already or was read from the trees in this sweep period or
    /// the one before (a turn after a turn).
    Counted,
    /// Always (within the budget): a compaction's read, whose commit checks the covered run
    /// against the cached copy instead of reading it from the trees again.
    Always,
}

/// What a commit did to an agent's history, for its cached copy.
pub(crate) enum HistoryChange<'a> {
    /// The history tree was not written.
    None,
    /// These messages were appended (in seq order, after every live message).
    Appended(&'a [Message]),
    /// Anything else (a compaction, a masking, an undo): the cached copy is dropped.
    Rewritten,
}

/// The cache of every agent: one table under one lock (held for lookups and small updates only).
#[derive(Default)]
pub(crate) struct HistoryCache {
    table: Mutex<Table>,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Table {
    entries: HashMap<AgentId, Entry>,
    /// The cached agents, in the clock hand's order (each once).
    hand: VecDeque<AgentId>,
    /// Agents read from the trees lately, with the sweep period of that read (admission).
    seen: HashMap<AgentId, u64>,
    /// Counts sweeps.
    epoch: u64,
    used: u64,
    budget: u64,
    evictions: u64,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            entries: HashMap::new(),
            hand: VecDeque::new(),
            seen: HashMap::new(),
            epoch: 0,
            used: 0,
            budget: DEFAULT_HISTORY_CACHE_MB * 1024 * 1024,
            evictions: 0,
        }
    }
}

/// One agent's cache: its live history (dropped by a commit that rewrites it) and the originals
/// of archived messages read before.
#[derive(Default)]
pub(crate) struct Entry {
    live: Option<Arc<Vec<Message>>>,
    live_bytes: u64,
    /// By seq, hashed with Fx: a turn's retrieval looks up a hundred or more.
    originals: FxHashMap<u64, Arc<Message>>,
    bytes: u64,
    /// Read since the clock hand last passed.
    referenced: bool,
}

impl Entry {
    pub(crate) fn live(&self) -> Option<&Arc<Vec<Message>>> {
        self.live.as_ref()
    }

    /// The original of archived message `seq`, if read before.
    pub(crate) fn original(&self, seq: u64) -> Option<&Arc<Message>> {
        self.originals.get(&seq)
    }

    /// Every original kept.
    pub(crate) fn originals(&self) -> impl Iterator<Item = &Message> {
        self.originals.values().map(|m| &**m)
    }
}

/// What a map entry of an original costs beyond the message (its key and the table's slack).
const ORIGINAL_ENTRY_BYTES: u64 = 16;

/// The bytes `m` takes in memory, near enough for a budget: its struct and its strings.
fn message_bytes(m: &Message) -> u64 {
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

impl Table {
    fn add(&mut self, id: &AgentId, bytes: u64) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.bytes += bytes;
            self.used += bytes;
        }
    }

    fn evict(&mut self, id: &AgentId) {
        if let Some(entry) = self.entries.remove(id) {
            self.used -= entry.bytes;
            self.evictions += 1;
        }
    }

    /// Moves the clock hand up to `steps` agents while `go` holds: an agent read since the hand
    /// last passed loses its mark and stays; any other loses its cache.
    fn turn_hand(&mut self, mut steps: usize, go: impl Fn(&Table) -> bool) {
        while steps > 0 && go(self) {
            steps -= 1;
            let Some(id) = self.hand.pop_front() else {
                break;
            };
            match self.entries.get_mut(&id) {
                Some(entry) if entry.referenced => {
                    entry.referenced = false;
                    self.hand.push_back(id);
                }
                Some(_) => self.evict(&id),
                None => {}
            }
        }
    }

    fn over_budget(&self) -> bool {
        self.used > self.budget
    }

    /// Drops the caches of agents not read lately until the cache is within its budget. Every
    /// agent gets its second chance once per pass; two passes are enough to evict any of them.
    fn trim(&mut self) {
        if self.over_budget() {
            let steps = self.hand.len().saturating_mul(2);
            self.turn_hand(steps, Table::over_budget);
        }
    }
}

impl HistoryCache {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_budget(&self, bytes: u64) {
        let mut table = self.table();
        table.budget = bytes;
        table.trim();
    }

    pub(crate) fn stats(&self) -> HistoryCacheStats {
        let table = self.table();
        HistoryCacheStats {
            bytes: table.used,
            budget: table.budget,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: table.evictions,
        }
    }

    /// The cached live history of `id`, if any (the caller holds the agent's record lock). A hit
    /// marks the agent read.
    pub(crate) fn live(&self, id: &AgentId) -> Option<Arc<Vec<Message>>> {
        let mut table = self.table();
        let entry = table.entries.get_mut(id)?;
        let live = Arc::clone(entry.live.as_ref()?);
        entry.referenced = true;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(live)
    }

    /// The cached live history of `id`, if any, without marking the agent read or counting a
    /// hit (the caller holds the agent's record lock): for a commit that checks what it covers.
    pub(crate) fn peek_live(&self, id: &AgentId) -> Option<Arc<Vec<Message>>> {
        let table = self.table();
        table.entries.get(id)?.live.as_ref().map(Arc::clone)
    }

    /// After a read of `id`'s live history from the trees (under its record lock): caches it if
    /// the agent is admitted (see [`Admission`]).
    pub(crate) fn read_from_trees(
        &self,
        id: &AgentId,
        messages: &Arc<Vec<Message>>,
        admission: Admission,
    ) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        let mut table = self.table();
        if admission == Admission::Never || table.budget == 0 {
            return;
        }
        if !table.entries.contains_key(id) {
            let epoch = table.epoch;
            let seen = table.seen.insert(id.clone(), epoch);
            if admission == Admission::Counted && seen.is_none_or(|e| e + 1 < epoch) {
                return;
            }
            table.entries.insert(id.clone(), Entry::default());
            table.hand.push_back(id.clone());
        }
        let bytes: u64 = messages.iter().map(message_bytes).sum();
        let Some(entry) = table.entries.get_mut(id) else {
            return;
        };
        let old = std::mem::replace(&mut entry.live_bytes, bytes);
        entry.live = Some(Arc::clone(messages));
        entry.bytes = entry.bytes - old + bytes;
        entry.referenced = true;
        table.used = table.used - old + bytes;
        table.trim();
    }

    /// What a commit of `id` did to its history (the caller holds the agent's record lock).
    pub(crate) fn committed(&self, id: &AgentId, change: HistoryChange<'_>) {
        if matches!(change, HistoryChange::None) {
            return;
        }
        let mut table = self.table();
        let Some(entry) = table.entries.get_mut(id) else {
            return;
        };
        let Some(live) = entry.live.as_mut() else {
            return;
        };
        let added = match change {
            HistoryChange::None => 0,
            HistoryChange::Appended(stored) => {
                // Copies the history first only when a reader still holds the previous snapshot.
                Arc::make_mut(live).extend_from_slice(stored);
                let added: u64 = stored.iter().map(message_bytes).sum();
                entry.live_bytes += added;
                entry.bytes += added;
                added
            }
            HistoryChange::Rewritten => {
                entry.live = None;
                let bytes = std::mem::take(&mut entry.live_bytes);
                entry.bytes -= bytes;
                table.used -= bytes;
                0
            }
        };
        if added > 0 {
            table.used += added;
            table.trim();
        }
    }

    /// Runs `read` on `id`'s entry, if it has one.
    pub(crate) fn with_entry<T>(&self, id: &AgentId, read: impl FnOnce(&Entry) -> T) -> Option<T> {
        let mut table = self.table();
        let entry = table.entries.get_mut(id)?;
        entry.referenced = true;
        Some(read(entry))
    }

    /// Keeps `originals` (normal messages read from the archive or hidden in the history) for
    /// `id`, if its history is cached.
    pub(crate) fn keep_originals<'m>(
        &self,
        id: &AgentId,
        originals: impl Iterator<Item = &'m Arc<Message>>,
    ) {
        let mut table = self.table();
        let Some(entry) = table.entries.get_mut(id) else {
            return;
        };
        let mut added = 0;
        for original in originals {
            if let std::collections::hash_map::Entry::Vacant(slot) =
                entry.originals.entry(original.seq)
            {
                added += message_bytes(original) + ORIGINAL_ENTRY_BYTES;
                slot.insert(Arc::clone(original));
            }
        }
        if added > 0 {
            table.add(id, added);
            table.trim();
        }
    }

    /// One pass of the clock hand over every cached agent: drops the caches not read since the
    /// pass before, and forgets the reads that can no longer admit anyone.
    pub(crate) fn sweep(&self) {
        let mut table = self.table();
        let steps = table.hand.len();
        table.turn_hand(steps, |_| true);
        table.epoch += 1;
        let epoch = table.epoch;
        table.seen.retain(|_, e| *e + 1 >= epoch);
    }

    /// Forgets the caches of every agent `which` selects (a shard this node no longer holds).
    pub(crate) fn forget(&self, which: impl Fn(&AgentId) -> bool) {
        let mut table = self.table();
        let gone: Vec<AgentId> = table
            .entries
            .keys()
            .filter(|id| which(id))
            .cloned()
            .collect();
        for id in &gone {
            if let Some(entry) = table.entries.remove(id) {
                table.used -= entry.bytes;
            }
        }
        table.hand.retain(|id| !which(id));
        table.seen.retain(|id, _| !which(id));
    }
}
