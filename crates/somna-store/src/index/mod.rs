//! The inverted index: every message, journal entry and memory fact of an agent, by term, so that
//! searching an archive of 100,000 messages reads only the postings of the query's terms.
//!
//! Terms come from somna-core's analyzer (`retrieval::analyze`: stop words dropped, Snowball
//! stems, a message's speaker indexed with it); scores are BM25 (`retrieval::Collection`).
//!
//! The index is derived data, kept beside the content rather than inside its transactions: three
//! watermarks say what it holds (messages below seq `m`, journal entries below id `j`, facts below
//! id `f`), and [`Store::catch_up_index`] adds whatever lies between the watermarks and the content
//! in one atomic batch on the `terms` tree (index writes and new watermarks together). Content
//! never changes once written (masking and compaction hide it, uncompaction shows it again), so
//! nothing is ever removed from the index. The catch-up runs, under the agent's lock, after every
//! compaction commit and masking (which move the message frontier: messages are indexed once they
//! are archived, so the live path's appends cost nothing) and before every search of a kind
//! (journal entries and facts are indexed by the first search that needs them) — so a crash
//! between a commit and its catch-up loses nothing, and a database written before the index
//! existed is indexed by its first search.
//!
//! Keys in the `terms` tree (`kind` is `m` message, `j` journal entry, `f` fact):
//!
//! | key | value |
//! |---|---|
//! | `agent ‖ 0x00 ‖ 0x00` | the watermarks and the layout version (an index of another version is rebuilt) |
//! | `agent ‖ 0x00 ‖ kind ‖ 0x00` | the collection: documents and their total length in terms |
//! | `agent ‖ 0x00 ‖ kind ‖ term ‖ 0x00` | the term's head: its document frequency and its newest postings (up to [`BLOCK`]) |
//! | `agent ‖ 0x00 ‖ kind ‖ term ‖ 0x00 ‖ first_id_be64` | a sealed block of [`BLOCK`] older postings |
//!
//! A posting is `(id, tf, len)`: the document's id (seq, entry id or fact id), how often the term
//! occurs in it, and the document's length in terms. Postings are varint-encoded, ids as deltas,
//! behind a format byte ([`POSTINGS_FORMAT`]). Adding to a term rewrites only its head (at most
//! [`BLOCK`] postings); a search reads each query term's head and blocks with one range scan.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use crate::backend::{Bytes, Tree};
use somna_core::retrieval::{Collection, SPEAKER_MARK, document_terms, speaker_term, terms};
use somna_core::{AgentId, AgentRecord, Cover, Fact, JournalEntry, Message, MessageKind};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, tree_names};
use crate::varint::{Reader, put_varint};

/// The index layout this build writes and reads; an agent whose index has another version is
/// re-indexed from scratch by its next catch-up.
pub const INDEX_VERSION: u64 = 2;
/// Postings per sealed block (and at most in a head).
pub const BLOCK: usize = 128;
/// The first byte of every postings value.
pub const POSTINGS_FORMAT: u8 = 1;

/// What kind of document an index entry points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocKind {
    /// A message (its id is its seq).
    Message,
    /// A journal entry (its entry id).
    Journal,
    /// A memory fact (its fact id).
    Fact,
}

impl DocKind {
    fn byte(self) -> u8 {
        match self {
            DocKind::Message => b'm',
            DocKind::Journal => b'j',
            DocKind::Fact => b'f',
        }
    }
}

/// A document found by a search, with its score (BM25's, a vector's similarity, or both fused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoredDoc {
    /// The document's id: a message's seq, a journal entry's id, a fact's id.
    pub id: u64,
    pub score: f64,
}

/// A message of [`Store::rank_archive`]'s ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedDoc {
    /// The message's seq.
    pub id: u64,
    pub score: f64,
    /// The share of `score` the question's words gave: 1 for BM25 alone, 0 for a vector's
    /// similarity alone, between for a fused score (see [`fuse`]). A hit found by meaning
    /// rather than by words is likely the answer itself, not the turn next to it.
    pub words: f32,
}

/// What [`Store::score`] found for a query.
#[derive(Debug, Default)]
struct Scored {
    /// Every document a query term found, in no order, with its BM25 score.
    docs: Vec<ScoredDoc>,
    /// How much of the query's weight the best document matched, 0 to 1 (see
    /// [`Store::score`]): near 1 when one message holds the question's words, near 0 when none
    /// does (a paraphrase, or a question in other words than its answer).
    confidence: f64,
}

/// An archived message found by [`Store::search_archive`].
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveHit {
    /// The original message (never a summary or a masked placeholder).
    pub message: Message,
    pub score: f64,
}

/// One posting: a document that contains a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    id: u64,
    tf: u32,
    len: u32,
}

/// Documents to add to the index, collected by kind and term.
#[derive(Debug, Default)]
pub(crate) struct PendingDocs {
    /// Postings per (kind, term), in id order.
    postings: BTreeMap<(DocKind, String), Vec<Posting>>,
    /// Documents and total length added per kind.
    added: BTreeMap<DocKind, (u64, u64)>,
}

impl PendingDocs {
    /// Adds a document of `kind` with id `id`.
    pub(crate) fn add(&mut self, kind: DocKind, id: u64, text: &str, speaker: Option<&str>) {
        let (counts, len) = document_terms(text, speaker);
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

/// A key and its value, to write.
type KeyValue = (Vec<u8>, Vec<u8>);

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

/// What the index holds: documents below these ids, per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Watermarks {
    messages: u64,
    entries: u64,
    facts: u64,
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
    /// The best `limit` documents of `kind` for `query`, best first (ties: the newer first),
    /// among what is indexed: journal entries and facts as soon as they are written, messages
    /// once archived (compacted away). Reads only the postings of the query's terms.
    pub fn search(
        &self,
        id: &AgentId,
        kind: DocKind,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ScoredDoc>> {
        self.with_scores(id, kind, query, limit, |_, scored| {
            let mut docs = scored.docs;
            best_first(&mut docs, limit);
            docs.truncate(limit);
            Ok(docs)
        })
    }

    /// Every indexed document of `kind` that matches `query`, scored (in no order), handed to
    /// `then` with the agent's record once the index has caught up; nothing for an unknown agent.
    fn with_scores<T>(
        &self,
        id: &AgentId,
        kind: DocKind,
        query: &str,
        want: usize,
        then: impl FnOnce(&AgentRecord, Scored) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        self.catch_up_index(id, &guard, &[kind])?;
        let scored = self.score(id, kind, query, want)?;
        then(&guard, scored)
    }

    /// The best `limit` archived messages for `query` (compacted away or masked: what the live
    /// history no longer shows), best first, as their originals.
    pub fn search_archive(
        &self,
        id: &AgentId,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ArchiveHit>> {
        self.search_archive_with(id, query, None, limit)
    }

    /// The ranking [`Store::search_archive_with`] reads its hits from: the best `limit` indexed
    /// messages for `query` (fused with the vectors when `semantic` is given), best first, as
    /// seqs and scores, live ones included (read them with [`Store::archived_messages`], which
    /// gives `None` for those). For a caller that reads hits a few at a time and stops when it
    /// has enough (the working context).
    pub fn rank_archive(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        limit: usize,
    ) -> Result<Vec<RankedDoc>> {
        let depth = limit.saturating_add(64);
        self.with_fused_scores(id, query, semantic, depth, |_, mut scored, words| {
            let n = best_first(&mut scored, limit);
            scored.truncate(n);
            Ok(words.of(&scored))
        })
    }

    /// [`Store::search_archive`], fused with semantic search when `semantic` gives the query's
    /// vector and the embedder model that made it: BM25's scores and the stored vectors'
    /// similarity (cosine) are combined by [`fuse`], the words weighing more the more of the
    /// question BM25's best message matched, so a message both rank high comes first. Without
    /// stored vectors of that model, BM25 alone.
    pub fn search_archive_with(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        limit: usize,
    ) -> Result<Vec<ArchiveHit>> {
        // Enough candidates for the fusion, and for the live messages the hits skip.
        let depth = limit.saturating_mul(4).saturating_add(64);
        self.with_fused_scores(id, query, semantic, depth, |record, mut scored, _| {
            // Indexed messages that are live again (uncompacted) are skipped, so rank a few more than
            // asked for, and all of them if that was not enough.
            let mut ranked = best_first(&mut scored, limit.saturating_mul(2).saturating_add(16));
            let mut hits = Vec::new();
            let mut i = 0;
            while hits.len() < limit && i < scored.len() {
                if i == ranked {
                    ranked = best_first(&mut scored, usize::MAX);
                }
                // The next candidates in rank order, as many as hits are still missing, read together.
                let end = i
                    .saturating_add(limit - hits.len())
                    .min(ranked)
                    .min(scored.len());
                let docs = &scored[i..end];
                i = end;
                let seqs: Vec<u64> = docs.iter().map(|d| d.id).collect();
                let originals = self.archived_originals(id, &record.covers, &seqs)?;
                for (doc, original) in docs.iter().zip(originals) {
                    if let Some(message) = original {
                        hits.push(ArchiveHit {
                            message,
                            score: doc.score,
                        });
                    }
                }
            }
            Ok(hits)
        })
    }

    /// [`Store::archived_original`] of several seqs: two multi-key reads (history, then the
    /// archive tree for those not found there as normal messages) instead of one or two point
    /// reads each.
    fn archived_originals(
        &self,
        id: &AgentId,
        covers: &[Cover],
        seqs: &[u64],
    ) -> Result<Vec<Option<Message>>> {
        let trees = &self.inner.trees;
        let keys: Vec<Vec<u8>> = seqs.iter().map(|&s| keys::seq(id, s)).collect();
        let in_history = trees.history.get_many(&keys)?;
        let mut out: Vec<Option<Message>> = vec![None; seqs.len()];
        let mut elsewhere: Vec<usize> = Vec::new();
        for (i, value) in in_history.into_iter().enumerate() {
            let message: Option<Message> = match value {
                Some(v) => Some(codec::decode(tree_names::HISTORY, &keys[i], &v)?),
                None => None,
            };
            match message {
                Some(m) if matches!(m.kind, MessageKind::Normal) => {
                    let hidden = covers.iter().any(|c| c.contains(seqs[i]));
                    out[i] = hidden.then_some(m);
                }
                // Masked in place (its original is in the archive tree), or moved there by a
                // layout-1 compaction.
                _ => elsewhere.push(i),
            }
        }
        if !elsewhere.is_empty() {
            let archive_keys: Vec<Vec<u8>> = elsewhere.iter().map(|&i| keys[i].clone()).collect();
            let values = trees.archive.get_many(&archive_keys)?;
            for (&i, value) in elsewhere.iter().zip(values) {
                if let Some(v) = value {
                    let original: Message = codec::decode(tree_names::ARCHIVE, &keys[i], &v)?;
                    out[i] = matches!(original.kind, MessageKind::Normal).then_some(original);
                }
            }
        }
        Ok(out)
    }

    /// The scored messages for `query` (BM25, fused with the best `depth` vectors of
    /// `semantic`'s model when given), in no order, at least `depth` of them when there are that
    /// many (see `Store::score`), handed to `then` with the agent's record.
    fn with_fused_scores<T>(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        depth: usize,
        then: impl FnOnce(&AgentRecord, Vec<ScoredDoc>, Words<'_>) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let by_vector = match semantic {
            Some((model, vector)) => self.search_vectors(id, model, vector, depth)?,
            None => Vec::new(),
        };
        self.with_scores(id, DocKind::Message, query, depth, |record, scored| {
            if by_vector.is_empty() {
                return then(record, scored.docs, Words::All);
            }
            let (docs, fusion) = fuse(&scored.docs, &by_vector, scored.confidence);
            then(record, docs, Words::Fused(&scored.docs, fusion))
        })
    }

    /// [`Store::archived_message`] of several seqs at once (two multi-key reads), in their order.
    pub fn archived_messages(&self, id: &AgentId, seqs: &[u64]) -> Result<Vec<Option<Message>>> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(vec![None; seqs.len()]),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        self.archived_originals(id, &guard.covers, seqs)
    }

    /// The original of message `seq` if it is archived (hidden under a cover, or masked in live
    /// history), else `None` (live, or never appended).
    pub fn archived_message(&self, id: &AgentId, seq: u64) -> Result<Option<Message>> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        self.archived_original(id, &guard.covers, seq)
    }

    fn archived_original(
        &self,
        id: &AgentId,
        covers: &[Cover],
        seq: u64,
    ) -> Result<Option<Message>> {
        let trees = &self.inner.trees;
        let key = keys::seq(id, seq);
        let hidden = covers.iter().any(|c| c.contains(seq));
        let in_history: Option<Message> = match trees.history.get(&key)? {
            Some(v) => Some(codec::decode(tree_names::HISTORY, &key, &v)?),
            None => None,
        };
        let original = match in_history {
            Some(m) if matches!(m.kind, MessageKind::Normal) => {
                return Ok(hidden.then_some(m));
            }
            // Masked in place (its original is in the archive tree), or moved there by a layout-1
            // compaction.
            _ => match trees.archive.get(&key)? {
                Some(v) => codec::decode::<Message>(tree_names::ARCHIVE, &key, &v)?,
                None => return Ok(None),
            },
        };
        Ok(matches!(original.kind, MessageKind::Normal).then_some(original))
    }

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

    /// BM25 scores of the documents of `kind` that hold a term of `query`, from a merge of the
    /// terms' id-ordered postings (no hashing). A document that only terms found in more than a
    /// tenth of the documents (a speaker's name, a word of every day) found ranks after every
    /// document a rarer term found, unless every query term is that common — so common words
    /// refine the ranking and fill what room is left without flooding it.
    /// Called under the agent's lock.
    fn score(&self, id: &AgentId, kind: DocKind, query: &str, want: usize) -> Result<Scored> {
        let tree = &self.inner.trees.terms;
        let mut query_terms = terms(query);
        // Each term also as a speaker (a name in the question finds what its owner said).
        if kind == DocKind::Message {
            let said: Vec<String> = query_terms.iter().map(|t| speaker_term(t)).collect();
            query_terms.extend(said);
        }
        query_terms.sort_unstable();
        query_terms.dedup();
        if query_terms.is_empty() {
            return Ok(Scored::default());
        }
        let (docs, total_len) = read_collection(tree, &collection_key(id, kind))?;
        if docs == 0 {
            return Ok(Scored::default());
        }
        let collection = Collection::new(docs, total_len);
        // Each term's head: its df (the term's postings are read below, rarest term first). And
        // what the question's words weigh, for the confidence: each word (one the archive never
        // saw as the rarest there is) and each speaker the archive knows.
        let mut by_df: Vec<(u64, Vec<u8>)> = Vec::with_capacity(query_terms.len());
        let mut total_idf = 0.0;
        for term in &query_terms {
            let key = head_key(id, kind, term);
            match tree.get(&key)? {
                Some(v) => {
                    let df = reader(&key, &v)?.varint()?;
                    total_idf += collection.idf(df);
                    by_df.push((df, key));
                }
                None if !term.starts_with(SPEAKER_MARK) => total_idf += collection.idf(0),
                None => {}
            }
        }
        by_df.sort();
        // The best document's score and the idf of the terms it matched.
        let mut best = (0.0f64, 0.0f64);
        // Every term's postings in id order: the sealed blocks (oldest first), then the head.
        let mut lists: Vec<Vec<Posting>> = Vec::with_capacity(by_df.len());
        for (_, head_key) in &by_df {
            let mut list = Vec::new();
            let mut head = Vec::new();
            for item in tree.range(head_key.clone()..keys::prefix_end(head_key)) {
                let (key, value) = item?;
                if key.len() == head_key.len() {
                    head = decode_head(&key, &value)?.1;
                } else {
                    decode_postings_into(&key, &value, &mut list)?;
                }
            }
            list.append(&mut head);
            lists.push(list);
        }
        let common = (docs / 10).max(COMMON_FLOOR);
        let idf: Vec<f64> = by_df.iter().map(|(df, _)| collection.idf(*df)).collect();
        // Common terms only add to documents a rare term found, unless every term is common.
        let rare = by_df.iter().filter(|(df, _)| *df <= common).count();
        let rare = if rare == 0 { lists.len() } else { rare };
        // Merge the sorted lists: at each step the smallest id among the cursors.
        let mut cursor = vec![0usize; lists.len()];
        let mut scored = Vec::new();
        // Documents only common terms found: used only when the others are fewer than `want`.
        let mut common_only = Vec::new();
        loop {
            let next = lists
                .iter()
                .zip(&cursor)
                .filter_map(|(list, &at)| list.get(at).map(|p| p.id))
                .min();
            let Some(doc) = next else { break };
            let mut score = 0.0;
            let mut found_by_rare = false;
            let mut matched = 0.0;
            for (i, list) in lists.iter().enumerate() {
                if let Some(p) = list.get(cursor[i]).filter(|p| p.id == doc) {
                    score += collection.term_score(idf[i], p.tf, p.len);
                    matched += idf[i];
                    found_by_rare |= i < rare;
                    cursor[i] += 1;
                }
            }
            if score > best.0 {
                best = (score, matched);
            }
            // Found by common terms alone: ranked after every document a rare term found (a
            // BM25 score here stays far below 1,000), so they only fill what room is left.
            if found_by_rare {
                scored.push(ScoredDoc { id: doc, score });
            } else {
                common_only.push(ScoredDoc {
                    id: doc,
                    score: score / COMMON_ONLY_DAMPING,
                });
            }
        }
        if scored.len() < want {
            scored.append(&mut common_only);
        }
        Ok(Scored {
            docs: scored,
            confidence: if total_idf > 0.0 {
                (best.1 / total_idf).min(1.0)
            } else {
                0.0
            },
        })
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

/// BM25's weight in the fusion when BM25 is least sure (no message holds the question's words):
/// the vectors alone decide. See [`fuse`].
const ALPHA_UNSURE: f64 = 0.0;
/// BM25's weight when one message holds every word of the question: the words decide, the
/// vectors break ties. See [`fuse`].
const ALPHA_SURE: f64 = 0.9;

/// A convex combination of BM25's `scored` documents (in no order) and the vector search's
/// `by_vector` (best first, the deepest the search returned): a document scores
/// `α · bm25 / best_bm25 + (1 − α) · (cos − lowest_cos) / (best_cos − lowest_cos)`, a part it is
/// missing counting 0, with `α` between [`ALPHA_UNSURE`] and [`ALPHA_SURE`] by `confidence` (how
/// much of the question's weight BM25's best document matched).
///
/// Why not reciprocal-rank fusion (what Somna fused with first, the vectors weighing twice BM25):
/// ranks forget how strong a match is, so each of the vectors' best 60 outranked BM25's best
/// alone, and a small note was filled by the vectors. Measured with all-MiniLM-L6-v2 at 2k / 4k /
/// 8k windows (some %): on the tuning split RRF 80.6 / 89.7 / 96.1, this fusion 83.0 / 89.5 /
/// 95.9; on the long-turn assistant split at 2k RRF 79.4 where BM25 alone holds 93.1, this
/// fusion 94.1. A fixed α could not serve both (0.15: 82.1 / 90.5 / 96.3 and 78.4; 0.5: 81.4 /
/// 87.0 / 94.2 and 93.1): whether meaning or words should decide depends on the question, and
/// BM25's own confidence says which.
///
/// Why `α` starts at 0 (it started at 0.15): when BM25 matched little of the question its best
/// hits share a common word or two with it, and any weight they keep pushes the vectors' hits
/// out of a small note. On the tuning split at 2k / 4k / 8k (some %, paraphrase in brackets):
/// all-mpnet-base-v2 90.6 (52.3) / 94.7 (70.7) / 98.5 (92.0) → 91.8 (58.0) / 95.6 (75.9) /
/// 98.8 (93.7); all-MiniLM-L6-v2 83.0 (14.9) / 89.5 (45.4) / 95.9 (77.0) → 83.7 (21.3) / 90.3
/// (48.9) / 96.2 (78.7); the long-turn assistant split at 2k 92.2 → 92.2 (MPNet) and 94.1 → 93.1
/// (MiniLM).
fn fuse(
    scored: &[ScoredDoc],
    by_vector: &[ScoredDoc],
    confidence: f64,
) -> (Vec<ScoredDoc>, Fusion) {
    let alpha = ALPHA_UNSURE + (ALPHA_SURE - ALPHA_UNSURE) * confidence.clamp(0.0, 1.0);
    let best = scored
        .iter()
        .map(|d| d.score)
        .fold(f64::MIN_POSITIVE, f64::max);
    let fusion = Fusion { alpha, best };
    let mut fused: std::collections::HashMap<u64, f64> = scored
        .iter()
        .map(|d| (d.id, fusion.words(d.score)))
        .collect();
    if let (Some(top), Some(low)) = (by_vector.first(), by_vector.last()) {
        let span = (top.score - low.score).max(f64::EPSILON);
        for d in by_vector {
            *fused.entry(d.id).or_default() += (1.0 - alpha) * (d.score - low.score) / span;
        }
    }
    let docs = fused
        .into_iter()
        .map(|(id, score)| ScoredDoc { id, score })
        .collect();
    (docs, fusion)
}

/// How [`fuse`] weighed BM25 for one question: a document's BM25 score `s` adds
/// `α · s / best` to its fused score.
#[derive(Debug, Clone, Copy)]
struct Fusion {
    alpha: f64,
    best: f64,
}

impl Fusion {
    /// The part of a fused score that a BM25 score of `bm25` gave.
    fn words(self, bm25: f64) -> f64 {
        self.alpha * bm25 / self.best
    }
}

/// What the words gave of a ranking's scores: all of them (BM25 alone), or BM25's part of each
/// fused score (its documents and how [`fuse`] weighed them).
enum Words<'a> {
    All,
    Fused(&'a [ScoredDoc], Fusion),
}

impl Words<'_> {
    /// `docs` (a few: the ranking's best) with their words' share. One pass over BM25's
    /// documents, so that the fusion itself keeps one number a document.
    fn of(&self, docs: &[ScoredDoc]) -> Vec<RankedDoc> {
        let mut ranked: Vec<RankedDoc> = docs
            .iter()
            .map(|d| RankedDoc {
                id: d.id,
                score: d.score,
                words: match self {
                    Words::All => 1.0,
                    Words::Fused(..) => 0.0,
                },
            })
            .collect();
        if let Words::Fused(bm25, fusion) = self {
            let at: std::collections::HashMap<u64, usize> =
                docs.iter().enumerate().map(|(i, d)| (d.id, i)).collect();
            for d in bm25.iter() {
                if let Some(&i) = at.get(&d.id) {
                    let r = &mut ranked[i];
                    if r.score > 0.0 {
                        r.words = (fusion.words(d.score) / r.score).min(1.0) as f32;
                    }
                }
            }
        }
        ranked
    }
}

/// Below this many documents no term counts as common (see `Store::score`).
const COMMON_FLOOR: u64 = 256;
/// A document only common terms found has its score divided by this, which ranks it after every
/// document a rare term found (see `Store::score`).
const COMMON_ONLY_DAMPING: f64 = 1_000.0;

fn meta_key(id: &AgentId) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(0);
    k
}

fn encode_meta(marks: Watermarks) -> Vec<u8> {
    let mut out = vec![POSTINGS_FORMAT];
    for n in [INDEX_VERSION, marks.messages, marks.entries, marks.facts] {
        put_varint(&mut out, n);
    }
    out
}

/// The watermarks, or `None` for an index of another layout version.
fn decode_meta(key: &[u8], value: &[u8]) -> Result<Option<Watermarks>> {
    let mut r = reader(key, value)?;
    if r.varint()? != INDEX_VERSION {
        return Ok(None);
    }
    Ok(Some(Watermarks {
        messages: r.varint()?,
        entries: r.varint()?,
        facts: r.varint()?,
    }))
}

/// An index key rendered readably: `agent/terms/m/shelter` for a head, `…/shelter@128` for a
/// sealed block, `agent/terms/m` for a collection, `agent/terms` for the version.
fn render_key(key: &[u8]) -> String {
    let Some(sep) = key.iter().position(|&b| b == keys::SEP) else {
        return key.escape_ascii().to_string();
    };
    let mut out = format!("{}/terms", key[..sep].escape_ascii());
    let rest = &key[sep + 1..];
    let Some((&kind, rest)) = rest.split_first() else {
        return out;
    };
    if kind == 0 {
        return out;
    }
    out.push('/');
    out.push(char::from(kind));
    let Some(end) = rest.iter().position(|&b| b == keys::SEP) else {
        return out;
    };
    if end > 0 {
        out.push('/');
        out.push_str(&rest[..end].escape_ascii().to_string());
    }
    if let Ok(first) = <[u8; 8]>::try_from(&rest[end + 1..]) {
        out.push_str(&format!("@{}", u64::from_be_bytes(first)));
    }
    out
}

/// Puts the best `n` of `scored` first, in order (best first; equal scores: the newer document
/// first), without sorting the rest; returns how many are in order.
pub(crate) fn best_first(scored: &mut [ScoredDoc], n: usize) -> usize {
    let order = |a: &ScoredDoc, b: &ScoredDoc| b.score.total_cmp(&a.score).then(b.id.cmp(&a.id));
    let n = n.min(scored.len());
    if n == 0 {
        return 0;
    }
    if n < scored.len() {
        scored.select_nth_unstable_by(n - 1, order);
    }
    scored[..n].sort_by(order);
    n
}

fn collection_key(id: &AgentId, kind: DocKind) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(kind.byte());
    k.push(keys::SEP);
    k
}

fn head_key(id: &AgentId, kind: DocKind, term: &str) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(kind.byte());
    k.extend_from_slice(term.as_bytes());
    k.push(keys::SEP);
    k
}

fn read_collection(tree: &crate::backend::Tree, key: &[u8]) -> Result<(u64, u64)> {
    match tree.get(key)? {
        Some(v) => decode_collection(key, &v),
        None => Ok((0, 0)),
    }
}

fn decode_collection(key: &[u8], value: &[u8]) -> Result<(u64, u64)> {
    let mut r = reader(key, value)?;
    Ok((r.varint()?, r.varint()?))
}

fn encode_collection(docs: u64, len: u64) -> Vec<u8> {
    let mut out = vec![POSTINGS_FORMAT];
    put_varint(&mut out, docs);
    put_varint(&mut out, len);
    out
}

/// A head (`df` set) or a sealed block (`df` none): the format byte, [df,] the count, then the
/// postings (the first id whole, the rest as deltas).
fn encode_postings(df: Option<u64>, postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + postings.len() * 4);
    out.push(POSTINGS_FORMAT);
    if let Some(df) = df {
        put_varint(&mut out, df);
    }
    put_varint(&mut out, postings.len() as u64);
    let mut prev = 0;
    for p in postings {
        put_varint(&mut out, p.id - prev);
        prev = p.id;
        put_varint(&mut out, u64::from(p.tf));
        put_varint(&mut out, u64::from(p.len));
    }
    out
}

fn decode_head(key: &[u8], value: &[u8]) -> Result<(u64, Vec<Posting>)> {
    let mut r = reader(key, value)?;
    let df = r.varint()?;
    let mut postings = Vec::new();
    read_postings(&mut r, &mut postings)?;
    Ok((df, postings))
}

fn decode_postings_into(key: &[u8], value: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    read_postings(&mut reader(key, value)?, out)
}

/// A reader of a value of the `terms` tree.
fn reader<'a>(key: &'a [u8], value: &'a [u8]) -> Result<Reader<'a>> {
    Reader::new(
        tree_names::TERMS,
        "postings",
        POSTINGS_FORMAT,
        render_key,
        key,
        value,
    )
}

/// Reads a postings list (its count, then the postings) to the end of the value.
fn read_postings(r: &mut Reader<'_>, out: &mut Vec<Posting>) -> Result<()> {
    let count = r.varint()?;
    let mut id = 0u64;
    for _ in 0..count {
        id = id
            .checked_add(r.varint()?)
            .ok_or_else(|| r.malformed("has an id past u64"))?;
        let tf = u32::try_from(r.varint()?).unwrap_or(u32::MAX);
        let len = u32::try_from(r.varint()?).unwrap_or(u32::MAX);
        out.push(Posting { id, tf, len });
    }
    r.finish("postings")
}
