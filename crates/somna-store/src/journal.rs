//! Journal entries (with their `journal_by_source` index), journal queries, and consolidation of
//! entries into memory facts.

use somna_core::{AgentId, EntryId, Fact, JournalEntry, JournalQuery};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::live::HistoryChange;
use crate::store::{Store, TreeId, WriteSet, tree_names};

impl Store {
    /// Appends a journal entry: assigns its id and writes the entry, its by-source index key and
    /// the record (in one transaction, or on sled in that order: see docs/storage.md).
    /// Returns the entry as stored.
    pub fn append_journal(&self, id: &AgentId, entry: JournalEntry) -> Result<JournalEntry> {
        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(3);
        let stored = push_entries(id, &mut next, vec![entry], &mut writes)?;
        writes.put_record(&next)?;
        writes.appends();
        self.apply_expecting_no_conflict(id, &writes)?;
        self.publish(id, &state, &mut guard, next, HistoryChange::of(&writes));
        stored
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Inconsistent {
                agent: id.clone(),
                reason: "a journal append stored no entry".to_string(),
            })
    }

    /// The entries matching `query`, newest first, at most `query.limit`, below `query.before_id`
    /// when set. A query with a source type walks that source's index backwards and stops at the
    /// limit; other queries walk the journal backwards.
    pub fn query_journal(&self, id: &AgentId, query: &JournalQuery) -> Result<Vec<JournalEntry>> {
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut found = Vec::new();
        if limit == 0 {
            return Ok(found);
        }
        let trees = &self.inner.trees;
        match query.source_type {
            Some(source) => {
                let start = keys::by_source_prefix(id, source);
                let end = match query.before_id {
                    Some(before) => keys::by_source(id, source, before),
                    None => keys::prefix_end(&start),
                };
                // Entry ids from the index, newest first, read in batches (one statement per
                // batch on Postgres): the first batch the size of the limit, then larger ones.
                let mut index = trees.journal_by_source.range(start..end).rev();
                let mut batch = limit.clamp(1, 64);
                'batches: loop {
                    let mut ids = Vec::with_capacity(batch);
                    for item in index.by_ref().take(batch) {
                        let (index_key, _) = item?;
                        match keys::trailing_u64(&index_key) {
                            Some(entry_id) => ids.push(entry_id),
                            None => tracing::warn!(
                                key = %keys::render(&index_key),
                                "malformed journal index key"
                            ),
                        }
                    }
                    if ids.is_empty() {
                        break;
                    }
                    let entry_keys: Vec<Vec<u8>> = ids.iter().map(|&e| keys::seq(id, e)).collect();
                    let values = trees.journal.get_many(&entry_keys)?;
                    for (key, value) in entry_keys.iter().zip(values) {
                        let Some(value) = value else {
                            tracing::warn!(key = %keys::render(key), "journal index names a missing entry");
                            continue;
                        };
                        let entry: JournalEntry = codec::decode(tree_names::JOURNAL, key, &value)?;
                        if query.matches(&entry) {
                            found.push(entry);
                            if found.len() >= limit {
                                break 'batches;
                            }
                        }
                    }
                    batch = 256;
                }
            }
            None => {
                let start = keys::prefix(id);
                let end = match query.before_id {
                    Some(before) => keys::seq(id, before),
                    None => keys::prefix_end(&start),
                };
                for item in trees.journal.range(start..end).rev() {
                    let (key, value) = item?;
                    let entry: JournalEntry = codec::decode(tree_names::JOURNAL, &key, &value)?;
                    if query.matches(&entry) {
                        found.push(entry);
                        if found.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        Ok(found)
    }

    /// Entries not yet consolidated with importance ≥ `min_importance`, oldest first.
    pub fn unconsolidated(&self, id: &AgentId, min_importance: u8) -> Result<Vec<JournalEntry>> {
        let mut found = Vec::new();
        for item in self.inner.trees.journal.scan_prefix(keys::prefix(id)) {
            let (key, value) = item?;
            let entry: JournalEntry = codec::decode(tree_names::JOURNAL, &key, &value)?;
            if !entry.consolidated && entry.importance >= min_importance {
                found.push(entry);
            }
        }
        Ok(found)
    }

    /// Writes `facts` to memory (assigning their ids; a fact without provenance gets `entry_ids`)
    /// and marks the entries `entry_ids` consolidated, in one transaction. Fails with
    /// [`StoreError::UnknownEntry`] (changing nothing) if an entry does not exist. Returns the facts
    /// as stored.
    pub fn consolidate(
        &self,
        id: &AgentId,
        facts: Vec<Fact>,
        entry_ids: &[EntryId],
    ) -> Result<Vec<Fact>> {
        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(facts.len() + 2 * entry_ids.len() + 1);
        let mut unique = entry_ids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        for &entry_id in &unique {
            let key = keys::seq(id, entry_id);
            let Some(value) = self.inner.trees.journal.get(&key)? else {
                return Err(StoreError::UnknownEntry {
                    agent: id.clone(),
                    entry: entry_id,
                });
            };
            let mut entry: JournalEntry = codec::decode(tree_names::JOURNAL, &key, &value)?;
            if !entry.consolidated {
                entry.consolidated = true;
                let updated = codec::encode(tree_names::JOURNAL, &entry)?;
                // Taking the value read under the lock and putting the new one back keeps the
                // check-then-write in the transaction.
                writes.take(TreeId::Journal, key.clone(), value, entry_id);
                writes.create(TreeId::Journal, key, updated, entry_id);
            }
        }
        let mut stored = Vec::with_capacity(facts.len());
        for mut fact in facts {
            fact.id = next.next_fact_id;
            next.next_fact_id += 1;
            if fact.source_entry_ids.is_empty() {
                fact.source_entry_ids = entry_ids.to_vec();
            }
            let value = codec::encode(tree_names::MEMORY, &fact)?;
            writes.create(TreeId::Memory, keys::seq(id, fact.id), value, fact.id);
            stored.push(fact);
        }
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        self.publish(id, &state, &mut guard, next, HistoryChange::of(&writes));
        tracing::debug!(agent = %id, facts = stored.len(), entries = entry_ids.len(), "consolidated");
        Ok(stored)
    }

    /// The journal entry `entry`, or `None` if it does not exist.
    pub fn journal_entry(&self, id: &AgentId, entry: EntryId) -> Result<Option<JournalEntry>> {
        let key = keys::seq(id, entry);
        match self.inner.trees.journal.get(&key)? {
            Some(value) => Ok(Some(codec::decode(tree_names::JOURNAL, &key, &value)?)),
            None => Ok(None),
        }
    }

    /// Every memory fact of the agent, oldest first.
    pub fn facts(&self, id: &AgentId) -> Result<Vec<Fact>> {
        self.inner
            .trees
            .memory
            .scan_prefix(keys::prefix(id))
            .map(|item| {
                let (key, value) = item?;
                codec::decode(tree_names::MEMORY, &key, &value)
            })
            .collect()
    }
}

/// Assigns ids to `entries` from `record.next_entry_id` and adds the entry and index writes.
pub(crate) fn push_entries(
    id: &AgentId,
    record: &mut somna_core::AgentRecord,
    entries: Vec<JournalEntry>,
    writes: &mut WriteSet,
) -> Result<Vec<JournalEntry>> {
    let mut stored = Vec::with_capacity(entries.len());
    for mut entry in entries {
        entry.id = record.next_entry_id;
        record.next_entry_id += 1;
        let value = codec::encode(tree_names::JOURNAL, &entry)?;
        writes.create(TreeId::Journal, keys::seq(id, entry.id), value, entry.id);
        writes.put(
            TreeId::JournalBySource,
            keys::by_source(id, entry.source_type, entry.id),
            Vec::new(),
        );
        stored.push(entry);
    }
    Ok(stored)
}
