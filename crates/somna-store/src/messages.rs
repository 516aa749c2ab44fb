//! Appending messages to an agent's history, and reading history and the archive.

use std::sync::Arc;

use somna_core::{AgentId, AgentRecord, Cover, JournalEntry, Message, Seq, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::live::HistoryChange;
use crate::live::{Admission, HistoryCacheStats};
use crate::store::{AgentState, Store, TreeId, WriteSet, tree_names};
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
        writes.appends();
        self.apply_expecting_no_conflict(id, &writes)?;
        self.publish(
            id,
            &state,
            &mut guard,
            next,
            HistoryChange::Appended(&stored),
        );
        Ok(stored)
    }

    /// Adds to each agent's record the appends a crash left behind it. On sled an append writes
    /// its messages (or journal entries with their by-source keys), then the record, without a
    /// transaction (see [`WriteSet::appends`]), and sled recovers a prefix of its writes, so what
    /// a crash can leave is history messages at and above the record's `next_seq`, or journal
    /// entries at and above its `next_entry_id` (their by-source keys possibly missing), that the
    /// record does not count. They are the agent's latest appends and are kept: the record counts
    /// them and the by-source keys are written. Runs when a sled store opens after a crash, before
    /// any state is loaded: two seeks per agent. Returns how many appends were adopted.
    pub(crate) fn recover_appends(&self) -> Result<u64> {
        let trees = &self.inner.trees;
        let mut adopted = 0;
        for item in trees.agents.iter() {
            let (key, value) = item?;
            let mut record: AgentRecord = codec::decode(tree_names::AGENTS, &key, &value)?;
            let id = record.id.clone();
            let (next_seq, next_entry_id) = (record.next_seq, record.next_entry_id);
            let end = keys::prefix_end(&keys::prefix(&id));
            let mut writes = WriteSet::with_capacity(1);
            for entry in trees.history.range(keys::seq(&id, next_seq)..end.clone()) {
                let (key, value) = entry?;
                let message = codec::decode_message(tree_names::HISTORY, &key, &value)?;
                if !message.is_normal() || message.seq < record.next_seq {
                    return Err(StoreError::Inconsistent {
                        agent: id,
                        reason: format!(
                            "history key {} is at or above next_seq {} but holds no appended message",
                            keys::render(&key),
                            record.next_seq
                        ),
                    });
                }
                record.next_seq = message.seq + 1;
                record.history_len += 1;
                record.history_tokens += u64::from(message.tokens);
                adopted += 1;
            }
            for entry in trees.journal.range(keys::seq(&id, next_entry_id)..end) {
                let (key, value) = entry?;
                let entry: JournalEntry = codec::decode(tree_names::JOURNAL, &key, &value)?;
                if entry.id < record.next_entry_id {
                    return Err(StoreError::Inconsistent {
                        agent: id,
                        reason: format!(
                            "journal key {} is at or above next_entry_id {} but holds entry {}",
                            keys::render(&key),
                            record.next_entry_id,
                            entry.id
                        ),
                    });
                }
                writes.put(
                    TreeId::JournalBySource,
                    keys::by_source(&id, entry.source_type, entry.id),
                    Vec::new(),
                );
                record.next_entry_id = entry.id + 1;
                adopted += 1;
            }
            if (record.next_seq, record.next_entry_id) != (next_seq, next_entry_id) {
                tracing::warn!(
                    agent = %id,
                    messages = record.next_seq - next_seq,
                    journal_entries = record.next_entry_id - next_entry_id,
                    "the agent's record missed its last appends (the process stopped between \
                     writing them and its record); counted them"
                );
                writes.put_record(&record)?;
                self.apply_expecting_no_conflict(&id, &writes)?;
            }
        }
        Ok(adopted)
    }

    /// The agent's whole live history, in seq order (empty for an unknown agent). A copy of
    /// [`Store::live_history`]'s.
    pub fn history(&self, id: &AgentId) -> Result<Vec<Message>> {
        Ok(self.live_history(id)?.as_ref().clone())
    }

    /// The agent's whole live history, in seq order (empty for an unknown agent), shared: from
    /// the live-history cache when it holds the agent's (see `live`), else read from the trees
    /// (and cached when this is the agent's second such read within a sweep period or two). A
    /// reader that holds the snapshot across the agent's next append makes that append copy the
    /// cached history, so a turn drops it before appending its reply.
    pub fn live_history(&self, id: &AgentId) -> Result<Arc<Vec<Message>>> {
        self.read_live_history(id, Admission::Counted)
    }

    /// [`Store::live_history`] for a compaction: read from the trees, it is cached whatever the
    /// agent's reads before (within the cache's budget), so that [`Store::commit_compaction`] of
    /// a run of it finds the run in memory and need not read and compare it from the trees again.
    /// The commit drops the cached copy (it rewrites history); a compaction that does not commit
    /// leaves it to the cache's sweep.
    pub fn live_history_to_compact(&self, id: &AgentId) -> Result<Arc<Vec<Message>>> {
        self.read_live_history(id, Admission::Always)
    }

    /// [`Store::live_history`] for a second read within one task (a turn's tool round): served
    /// from the cache when the agent's history is there, else read from the trees without
    /// counting as a read towards the agent's admission to the cache (see `live`).
    pub fn live_history_again(&self, id: &AgentId) -> Result<Arc<Vec<Message>>> {
        self.read_live_history(id, Admission::Never)
    }

    fn read_live_history(&self, id: &AgentId, admission: Admission) -> Result<Arc<Vec<Message>>> {
        let Some(state) = self.known_state(id)? else {
            return Ok(Arc::default());
        };
        let cache = &self.inner.history_cache;
        let guard = state.lock();
        // Another node's agent (a state made for this read) is never cached.
        let cacheable = state.cacheable();
        if cacheable && let Some(messages) = cache.live(id) {
            return Ok(messages);
        }
        let entries = view::live_entries(
            &self.inner.trees.history,
            id,
            &guard.covers,
            0,
            None,
            usize::MAX,
        )?;
        let messages = Arc::new(view::decode_all(&entries)?);
        let admission = if cacheable {
            admission
        } else {
            Admission::Never
        };
        cache.read_from_trees(id, &messages, admission);
        Ok(messages)
    }

    /// The agent's live history if the live-history cache holds it, else `None` (nothing is
    /// read): for a check that can do without it.
    pub fn cached_live_history(&self, id: &AgentId) -> Option<Arc<Vec<Message>>> {
        let state = self.loaded_state(id)?;
        let _guard = state.lock();
        self.inner.history_cache.live(id)
    }

    /// Up to `limit` history messages with seq ≥ `from_seq`, in seq order.
    pub fn history_range(&self, id: &AgentId, from_seq: Seq, limit: usize) -> Result<Vec<Message>> {
        self.with_covers_or_cached(
            id,
            |covers| {
                let entries = view::live_entries(
                    &self.inner.trees.history,
                    id,
                    covers,
                    from_seq,
                    None,
                    limit,
                )?;
                view::decode_all(&entries)
            },
            |cached| {
                let start = cached.partition_point(|m| m.seq < from_seq);
                cached[start..].iter().take(limit).cloned().collect()
            },
        )
    }

    /// The last `n` history messages, in seq order.
    pub fn history_tail(&self, id: &AgentId, n: usize) -> Result<Vec<Message>> {
        self.with_covers_or_cached(
            id,
            |covers| {
                let entries = view::live_tail(&self.inner.trees.history, id, covers, n)?;
                view::decode_all(&entries)
            },
            |cached| cached[cached.len().saturating_sub(n)..].to_vec(),
        )
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

    /// The agent's in-memory state, or `None` for an unknown agent (which reads as empty).
    fn known_state(&self, id: &AgentId) -> Result<Option<Arc<AgentState>>> {
        match self.state(id) {
            Ok(state) => Ok(Some(state)),
            Err(StoreError::UnknownAgent(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `read` with the agent's live covers while holding its lock, so that no commit changes
    /// the covers or the trees in between. An unknown agent reads as empty.
    fn with_covers<T: Default>(
        &self,
        id: &AgentId,
        read: impl FnOnce(&[Cover]) -> Result<T>,
    ) -> Result<T> {
        let Some(state) = self.known_state(id)? else {
            return Ok(T::default());
        };
        let guard = state.lock();
        read(&guard.covers)
    }

    /// [`Store::with_covers`], or `cached` on the cached live history when there is one (a
    /// partial read does not fill the cache).
    fn with_covers_or_cached<T: Default>(
        &self,
        id: &AgentId,
        read: impl FnOnce(&[Cover]) -> Result<T>,
        cached: impl FnOnce(&[Message]) -> T,
    ) -> Result<T> {
        let Some(state) = self.known_state(id)? else {
            return Ok(T::default());
        };
        let guard = state.lock();
        if state.cacheable()
            && let Some(messages) = self.inner.history_cache.live(id)
        {
            return Ok(cached(&messages));
        }
        read(&guard.covers)
    }

    /// Sets the live-history cache's budget, in bytes (`[store] history_cache_mb`); 0 turns the
    /// cache off (what is cached goes at the next trim).
    pub fn set_history_cache_bytes(&self, bytes: u64) {
        self.inner.history_cache.set_budget(bytes);
    }

    /// Drops the cached histories of agents not read since the previous sweep (see `live`); the
    /// runtime calls it every few seconds.
    pub fn sweep_history_cache(&self) {
        self.inner.history_cache.sweep();
    }

    /// What the live-history cache holds and did.
    pub fn history_cache_stats(&self) -> HistoryCacheStats {
        self.inner.history_cache.stats()
    }
}
