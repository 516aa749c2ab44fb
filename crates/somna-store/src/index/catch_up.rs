//! Indexing: the documents between the watermarks and the content, collected ([`PendingDocs`])
//! and written in one batch by `Store::catch_up_index`, and the check that the stored index is
//! what indexing would write.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use somna_core::retrieval::Analyzer;
use somna_core::{AgentId, AgentRecord, Fact, JournalEntry, Message, MessageKind};

use super::postings::{
    KeyValue, Posting, Watermarks, collection_key, decode_collection, decode_head, decode_meta,
    encode_collection, encode_meta, encode_postings, head_key, meta_key, render_key,
};
use super::{BLOCK, DocKind};
use crate::backend::{Bytes, Tree};
use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, tree_names};

/// Documents to add to the index, collected by kind and term.
#[derive(Debug, Default)]
pub(crate) struct PendingDocs {
    /// Postings per (kind, term), in id order.
    postings: BTreeMap<(DocKind, String), Vec<Posting>>,
    /// Documents and total length added per kind.
    added: BTreeMap<DocKind, (u64, u64)>,
    /// The batch's analyzer (it remembers the words it stemmed).
    analyzer: Analyzer,
}

impl PendingDocs {
    /// Adds a document of `kind` with id `id`.
    pub(crate) fn add(&mut self, kind: DocKind, id: u64, text: &str, speaker: Option<&str>) {
        let (counts, len) = self.analyzer.document_terms(text, speaker);
        if len == 0 {
            return;
        }
        let added = self.added.entry(kind).or_default();
        added.0 += 1;
        added.1 += u64::from(len);
        for (term, tf) in counts {
            self.postings
                .entry((kind, term))
                .or_default()
                .push(Posting { id, tf, len });
        }
    }

    /// Adds a message if it is a normal message with text (summaries and placeholders are not
    /// searched: the originals they stand for are).
    pub(crate) fn add_message(&mut self, message: &Message) {
        if matches!(message.kind, MessageKind::Normal) && !message.content.trim().is_empty() {
            self.add(
                DocKind::Message,
                message.seq,
                &message.content,
                message.name.as_deref(),
            );
        }
    }
}

/// The index writes (key, value) that add `docs` to an index whose current values `read` returns;
/// `None` when a term's postings already reach these documents: another writer added them since
/// the watermarks were read (see `catch_up_index`), and these writes would add them twice.
fn writes_over(
    read: impl Fn(&[u8]) -> Result<Option<Bytes>>,
    id: &AgentId,
    docs: &PendingDocs,
) -> Result<Option<Vec<KeyValue>>> {
    let mut out = Vec::new();
    for (&kind, &(n, len)) in &docs.added {
        let key = collection_key(id, kind);
        let (docs_now, len_now) = match read(&key)? {
            Some(v) => decode_collection(&key, &v)?,
            None => (0, 0),
        };
        out.push((key, encode_collection(docs_now + n, len_now + len)));
    }
    for ((kind, term), new) in &docs.postings {
        let head_key = head_key(id, *kind, term);
        let (mut df, mut tail) = match read(&head_key)? {
            Some(v) => decode_head(&head_key, &v)?,
            None => (0, Vec::new()),
        };
        if let (Some(last), Some(first)) = (tail.last(), new.first())
            && last.id >= first.id
        {
            return Ok(None);
        }
        df += new.len() as u64;
        tail.extend_from_slice(new);
        // Seal the oldest BLOCK postings while more than BLOCK remain; the head keeps the rest.
        let mut start = 0;
        while tail.len() - start > BLOCK {
            let block = &tail[start..start + BLOCK];
            let mut key = head_key.clone();
            key.extend_from_slice(&block[0].id.to_be_bytes());
            out.push((key, encode_postings(None, block)));
            start += BLOCK;
        }
        out.push((head_key, encode_postings(Some(df), &tail[start..])));
    }
    Ok(Some(out))
}

/// Hands each value of `tree` (named `name`) at agent `id`'s seqs `seqs`, decoded, to `each`, in
/// key order.
pub(crate) fn each_decoded<T: DeserializeOwned>(
    tree: &Tree,
    name: &'static str,
    id: &AgentId,
    seqs: std::ops::Range<u64>,
    mut each: impl FnMut(T),
) -> Result<()> {
    for item in tree.range(keys::seq(id, seqs.start)..keys::seq(id, seqs.end)) {
        let (key, value) = item?;
        each(codec::decode(name, &key, &value)?);
    }
    Ok(())
}

impl Store {
    /// Brings the agent's index of `kinds` up to its content: messages up to the archive's
    /// frontier (the end of the last cover, or the last original in the archive tree), every
    /// journal entry, every fact. One atomic batch on the `terms` tree; nothing to do costs one
    /// read. The caller holds the agent's lock (`record` is what it guards).
    pub(crate) fn catch_up_index(
        &self,
        id: &AgentId,
        record: &AgentRecord,
        kinds: &[DocKind],
    ) -> Result<()> {
        let tree = &self.inner.trees.terms;
        let meta = meta_key(id);
        let mut batch = crate::backend::Batch::default();
        // An index with no watermarks, or of another layout, is (re)built from nothing.
        let stored = tree.get(&meta)?;
        let (from, fresh) = match &stored {
            Some(v) => match decode_meta(&meta, v)? {
                Some(marks) => (marks, false),
                None => {
                    for item in tree.scan_prefix(keys::prefix(id)) {
                        let key = item?.0;
                        // The watermarks are swapped for new ones, not removed.
                        if key[..] != meta[..] {
                            batch.remove(key);
                        }
                    }
                    (Watermarks::default(), true)
                }
            },
            None => (Watermarks::default(), true),
        };
        let mut to = from;
        if kinds.contains(&DocKind::Message) {
            to.messages = self.message_frontier(id, record)?.max(from.messages);
        }
        if kinds.contains(&DocKind::Journal) {
            to.entries = record.next_entry_id.max(from.entries);
        }
        if kinds.contains(&DocKind::Fact) {
            to.facts = record.next_fact_id.max(from.facts);
        }
        if to == from {
            return Ok(());
        }
        let docs = self.documents_between(id, from, to)?;
        let writes = if fresh {
            writes_over(|_| Ok(None), id, &docs)?
        } else {
            writes_over(|key| tree.get(key), id, &docs)?
        };
        let Some(writes) = writes else {
            tracing::debug!(agent = %id, "search index caught up by another writer first");
            return Ok(());
        };
        for (key, value) in writes {
            batch.insert(key, value);
        }
        // Only if the watermarks are still the ones read: on a cluster any node may catch an
        // agent's index up, and two that read the same watermarks (and term heads) must not
        // both add the same documents. The one that loses leaves the index to the winner.
        let swapped =
            tree.apply_batch_swapping(&meta, stored.as_deref(), &encode_meta(to), batch)?;
        if swapped {
            tracing::debug!(agent = %id, from = ?from, to = ?to, "search index caught up");
        } else {
            tracing::debug!(agent = %id, "search index caught up by another writer first");
        }
        Ok(())
    }

    /// Brings the agent's search index up to its archive: what compactions and maskings archived
    /// since the last search or catch-up. Commits do not index (a compaction of 2,000 messages
    /// would take ~40 ms longer under the agent's lock); the runtime calls this in the background
    /// after a commit, and every search catches up first anyway. Nothing to do costs one read; an
    /// unknown agent is nothing to do.
    pub fn index_archive(&self, id: &AgentId) -> Result<()> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        self.catch_up_index(id, &guard, &[DocKind::Message])
    }

    /// The seq below which every message is archived or was once: past the last cover and past
    /// every original in the archive tree (masked originals, layout-1 compactions).
    pub(crate) fn message_frontier(&self, id: &AgentId, record: &AgentRecord) -> Result<u64> {
        let covered = record
            .covers
            .last()
            .map_or(0, |c| c.through.saturating_add(1));
        let prefix = keys::prefix(id);
        let archived = match self
            .inner
            .trees
            .archive
            .range(prefix.clone()..keys::prefix_end(&prefix))
            .next_back()
        {
            Some(item) => {
                let (key, _) = item?;
                keys::parse_message(prefix.len(), &key).map_or(0, |k| k.seq().saturating_add(1))
            }
            None => 0,
        };
        Ok(covered.max(archived).min(record.next_seq))
    }

    /// The documents with ids in `from..to` per kind, as the index holds them.
    fn documents_between(
        &self,
        id: &AgentId,
        from: Watermarks,
        to: Watermarks,
    ) -> Result<PendingDocs> {
        let trees = &self.inner.trees;
        let mut docs = PendingDocs::default();
        if from.messages < to.messages {
            // Each seq once: the original in history, else in the archive tree (masked, layout 1).
            let mut found: BTreeMap<u64, Message> = BTreeMap::new();
            for (tree, name) in [
                (&trees.archive, tree_names::ARCHIVE),
                (&trees.history, tree_names::HISTORY),
            ] {
                each_decoded(tree, name, id, from.messages..to.messages, |m: Message| {
                    if matches!(m.kind, MessageKind::Normal) {
                        found.insert(m.seq, m);
                    }
                })?;
            }
            for m in found.values() {
                docs.add_message(m);
            }
        }
        if from.entries < to.entries {
            let seqs = from.entries..to.entries;
            each_decoded(
                &trees.journal,
                tree_names::JOURNAL,
                id,
                seqs,
                |e: JournalEntry| {
                    docs.add(DocKind::Journal, e.id, &e.content, None);
                },
            )?;
        }
        if from.facts < to.facts {
            let seqs = from.facts..to.facts;
            each_decoded(&trees.memory, tree_names::MEMORY, id, seqs, |f: Fact| {
                docs.add(DocKind::Fact, f.id, &f.text, None);
            })?;
        }
        Ok(docs)
    }

    /// How the agent's stored index differs from what indexing its content up to the stored
    /// watermarks would write (for `check_invariants`): `None` when it does not, else one line
    /// naming the first difference and how many keys differ.
    pub(crate) fn index_difference(&self, id: &AgentId) -> Result<Option<String>> {
        // Under the agent's lock, as every catch-up runs: the watermarks and the keys read here
        // are one state (the runtime indexes in the background after a commit).
        let state = self.state(id)?;
        let _guard = state.lock();
        let tree = &self.inner.trees.terms;
        let meta = meta_key(id);
        let marks = match tree.get(&meta)? {
            Some(v) => match decode_meta(&meta, &v)? {
                Some(marks) => marks,
                None => return Ok(Some("the search index has another layout".to_string())),
            },
            None => Watermarks::default(),
        };
        let docs = self.documents_between(id, Watermarks::default(), marks)?;
        let mut expected: BTreeMap<Vec<u8>, Vec<u8>> = writes_over(|_| Ok(None), id, &docs)?
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut differences: Vec<String> = Vec::new();
        for item in tree.scan_prefix(keys::prefix(id)) {
            let (key, value) = item?;
            if key.as_ref() == meta.as_slice() {
                continue;
            }
            match expected.remove(key.as_ref()) {
                Some(v) if v == value.as_ref() => {}
                Some(_) => differences.push(format!("{} does not match", render_key(&key))),
                None => differences.push(format!("{} indexes nothing", render_key(&key))),
            }
        }
        differences.extend(
            expected
                .keys()
                .map(|key| format!("{} is missing", render_key(key))),
        );
        Ok(differences.first().map(|first| {
            format!(
                "the search index does not match the content: {} key(s) differ, e.g. {first}",
                differences.len()
            )
        }))
    }
}
