//! Searching: BM25 scores from the postings of a query's terms, the archive's search and ranking
//! (alone or fused with vectors), and the archived messages the hits point at.

use std::sync::Arc;

use somna_core::retrieval::{Collection, SPEAKER_MARK, speaker_term, terms};
use somna_core::{AgentId, AgentRecord, Cover, Message, MessageKind};

use super::fusion::fuse;
use super::postings::{
    Posting, collection_key, decode_head, decode_postings_into, head_key, read_collection,
};
use super::{ArchiveHit, DocKind, RankedDoc, Ranking, ScoredDoc};
use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys;
use crate::live::Entry;
use crate::store::{Store, tree_names};
use crate::view;

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
        then: impl FnOnce(&AgentRecord, Scored) -> Result<T>,
    ) -> Result<T>
    where
        T: Default,
    {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(T::default()),
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
    /// gives `None` for those).
    pub fn rank_archive(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        limit: usize,
    ) -> Result<Vec<RankedDoc>> {
        Ok(self.ranking(id, query, semantic, limit)?.into_sorted())
    }

    /// [`Store::rank_archive`] for a caller that reads hits a few at a time and stops when it
    /// has enough (the working context): the ranking is sorted only as far as it is read.
    pub fn ranking(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        limit: usize,
    ) -> Result<Ranking> {
        let depth = limit.saturating_add(64);
        self.with_fused_scores(id, query, semantic, depth, |_, docs| {
            Ok(Ranking::new(docs, limit))
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
        self.with_fused_scores(id, query, semantic, depth, |record, mut scored| {
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
                            message: Arc::unwrap_or_clone(message),
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
    ) -> Result<Vec<Option<Arc<Message>>>> {
        let mut out: Vec<Option<Arc<Message>>> = vec![None; seqs.len()];
        // What the agent's cache answers (see `live`): an original read before, and a live
        // message by the cached live history; the rest (`todo`) is read from the trees. Only an
        // agent whose state is loaded (of a shard this node holds) has a cache.
        let cache = &self.inner.history_cache;
        let cached = self.loaded_state(id).is_some();
        let from_cache = cached.then(|| {
            cache.with_entry(id, |entry| {
                let mut todo = Vec::new();
                for (i, &seq) in seqs.iter().enumerate() {
                    match cached_original(entry, covers, seq) {
                        Known::Archived(m) => out[i] = Some(Arc::clone(m)),
                        Known::Live => {}
                        Known::Unknown => todo.push(i),
                    }
                }
                todo
            })
        });
        let todo: Vec<usize> = from_cache
            .flatten()
            .unwrap_or_else(|| (0..seqs.len()).collect());
        if todo.is_empty() {
            return Ok(out);
        }
        let trees = &self.inner.trees;
        let keys: Vec<Vec<u8>> = todo.iter().map(|&i| keys::seq(id, seqs[i])).collect();
        let in_history = trees.history.get_many(&keys)?;
        let mut elsewhere: Vec<usize> = Vec::new();
        for (k, value) in in_history.into_iter().enumerate() {
            let i = todo[k];
            let message: Option<Message> = match value {
                Some(v) => Some(codec::decode_message(tree_names::HISTORY, &keys[k], &v)?),
                None => None,
            };
            match message {
                Some(m) if matches!(m.kind, MessageKind::Normal) => {
                    let hidden = view::covered(covers, seqs[i]);
                    out[i] = hidden.then(|| Arc::new(m));
                }
                // Masked in place (its original is in the archive tree), or moved there by a
                // layout-1 compaction.
                _ => elsewhere.push(k),
            }
        }
        if !elsewhere.is_empty() {
            let archive_keys: Vec<Vec<u8>> = elsewhere.iter().map(|&k| keys[k].clone()).collect();
            let values = trees.archive.get_many(&archive_keys)?;
            for (&k, value) in elsewhere.iter().zip(values) {
                if let Some(v) = value {
                    let original: Message =
                        codec::decode_message(tree_names::ARCHIVE, &keys[k], &v)?;
                    out[todo[k]] =
                        matches!(original.kind, MessageKind::Normal).then(|| Arc::new(original));
                }
            }
        }
        // Kept for an agent whose history is cached (one in conversation).
        if cached {
            cache.keep_originals(id, todo.iter().filter_map(|&i| out[i].as_ref()));
        }
        Ok(out)
    }

    /// The scored messages for `query` (BM25, fused with the best `depth` vectors of
    /// `semantic`'s model when given), in no order, each with the share its words gave of its
    /// score, at least `depth` of them when there are that many (see `Store::score`), handed to
    /// `then` with the agent's record.
    fn with_fused_scores<T: Default>(
        &self,
        id: &AgentId,
        query: &str,
        semantic: Option<(&str, &[f32])>,
        depth: usize,
        then: impl FnOnce(&AgentRecord, Vec<RankedDoc>) -> Result<T>,
    ) -> Result<T> {
        let by_vector = match semantic {
            Some((model, vector)) => self.search_vectors(id, model, vector, depth)?,
            None => Vec::new(),
        };
        self.with_scores(id, DocKind::Message, query, depth, |record, scored| {
            if by_vector.is_empty() {
                let docs = scored
                    .docs
                    .iter()
                    .map(|d| RankedDoc {
                        id: d.id,
                        score: d.score,
                        words: 1.0,
                    })
                    .collect();
                return then(record, docs);
            }
            then(record, fuse(&scored.docs, &by_vector, scored.confidence))
        })
    }

    /// [`Store::archived_message`] of several seqs at once (two multi-key reads), in their order,
    /// shared: an original the agent's cache holds is handed out without a copy.
    pub fn archived_messages(
        &self,
        id: &AgentId,
        seqs: &[u64],
    ) -> Result<Vec<Option<Arc<Message>>>> {
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
        let hidden = view::covered(covers, seq);
        let in_history: Option<Message> = match trees.history.get(&key)? {
            Some(v) => Some(codec::decode_message(tree_names::HISTORY, &key, &v)?),
            None => None,
        };
        let original = match in_history {
            Some(m) if matches!(m.kind, MessageKind::Normal) => {
                return Ok(hidden.then_some(m));
            }
            // Masked in place (its original is in the archive tree), or moved there by a layout-1
            // compaction.
            _ => match trees.archive.get(&key)? {
                Some(v) => codec::decode_message(tree_names::ARCHIVE, &key, &v)?,
                None => return Ok(None),
            },
        };
        Ok(matches!(original.kind, MessageKind::Normal).then_some(original))
    }

    /// BM25 scores of the documents of `kind` that hold a term of `query`, from a merge of the
    /// terms' id-ordered postings (no hashing). A document that only terms found in more than a
    /// tenth of the documents (a speaker's name, a word of every day) found ranks after every
    /// document a rarer term found, unless every query term is that common — so common words
    /// refine the ranking and fill what room is left without flooding it.
    /// Called under the agent's lock.
    fn score(&self, id: &AgentId, kind: DocKind, query: &str, want: usize) -> Result<Scored> {
        let tree = &self.inner.trees.terms;
        // An empty collection (an agent with nothing archived yet) finds nothing: the question
        // is not analyzed.
        let (docs, total_len) = read_collection(tree, &collection_key(id, kind))?;
        if docs == 0 {
            return Ok(Scored::default());
        }
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
        let collection = Collection::new(docs, total_len);
        // Each term's postings in id order (the sealed blocks, oldest first, then the head) and
        // its df (the head's first number), read in one range scan a term; then the terms
        // rarest first. And what the question's words weigh, for the confidence: each word (one
        // the archive never saw as the rarest there is) and each speaker the archive knows.
        let mut by_df: Vec<(u64, Vec<u8>, Vec<Posting>)> = Vec::with_capacity(query_terms.len());
        let mut total_idf = 0.0;
        for term in &query_terms {
            let head_key = head_key(id, kind, term);
            let mut list = Vec::new();
            let mut head = None;
            for item in tree.range(head_key.clone()..keys::prefix_end(&head_key)) {
                let (key, value) = item?;
                if key.len() == head_key.len() {
                    head = Some(decode_head(&key, &value)?);
                } else {
                    decode_postings_into(&key, &value, &mut list)?;
                }
            }
            match head {
                Some((df, mut postings)) => {
                    total_idf += collection.idf(df);
                    list.append(&mut postings);
                    by_df.push((df, head_key, list));
                }
                None if !term.starts_with(SPEAKER_MARK) => total_idf += collection.idf(0),
                None => {}
            }
        }
        by_df.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        // The best document's score and the idf of the terms it matched.
        let mut best = (0.0f64, 0.0f64);
        let idf: Vec<f64> = by_df.iter().map(|(df, _, _)| collection.idf(*df)).collect();
        let common = (docs / 10).max(COMMON_FLOOR);
        // Common terms only add to documents a rare term found, unless every term is common.
        let rare = by_df.iter().filter(|(df, _, _)| *df <= common).count();
        let lists: Vec<Vec<Posting>> = by_df.into_iter().map(|(_, _, list)| list).collect();
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
}

/// Below this many documents no term counts as common (see `Store::score`).
const COMMON_FLOOR: u64 = 256;
/// A document only common terms found has its score divided by this, which ranks it after every
/// document a rare term found (see `Store::score`).
const COMMON_ONLY_DAMPING: f64 = 1_000.0;

/// A scored document a ranking orders: by score, best first; equal scores, the newer first.
pub(crate) trait Ranked {
    fn rank_key(&self) -> (f64, u64);
}

impl Ranked for ScoredDoc {
    fn rank_key(&self) -> (f64, u64) {
        (self.score, self.id)
    }
}

impl Ranked for RankedDoc {
    fn rank_key(&self) -> (f64, u64) {
        (self.score, self.id)
    }
}

/// The order of a ranking: best first; equal scores, the newer document first. A total order
/// (ids are unique), so an unstable sort gives the one order a stable sort would.
fn rank_order<D: Ranked>(a: &D, b: &D) -> std::cmp::Ordering {
    let ((sa, ia), (sb, ib)) = (a.rank_key(), b.rank_key());
    sb.total_cmp(&sa).then(ib.cmp(&ia))
}

/// Puts the best `n` of `scored` first, in order (best first; equal scores: the newer document
/// first), without sorting the rest; returns how many are in order.
pub(crate) fn best_first<D: Ranked>(scored: &mut [D], n: usize) -> usize {
    let n = n.min(scored.len());
    if n == 0 {
        return 0;
    }
    if n < scored.len() {
        scored.select_nth_unstable_by(n - 1, rank_order);
    }
    scored[..n].sort_unstable_by(rank_order);
    n
}

impl Ranking {
    /// The best `limit` of `docs` (in no order yet).
    pub(crate) fn new(docs: Vec<RankedDoc>, limit: usize) -> Self {
        Ranking {
            len: limit.min(docs.len()),
            docs,
            sorted: 0,
            read: 0,
        }
    }

    /// The next `n` documents of the ranking (fewer at its end), best first.
    pub fn next_batch(&mut self, n: usize) -> &[RankedDoc] {
        let (start, end) = (self.read, self.read.saturating_add(n).min(self.len));
        if end > self.sorted {
            // The rest's best come next, in order: at least 64 and twice as many as are sorted,
            // so that a reader of a few at a time partitions the rest a few times, not each time.
            let want = (end - self.sorted)
                .max(self.sorted)
                .max(64)
                .min(self.len - self.sorted);
            self.sorted += best_first(&mut self.docs[self.sorted..], want);
        }
        self.read = end;
        &self.docs[start..end]
    }

    /// Whether every document of the ranking has been read.
    pub fn is_done(&self) -> bool {
        self.read >= self.len
    }

    /// How many documents the ranking holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the ranking holds no document.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole ranking, best first.
    pub fn into_sorted(mut self) -> Vec<RankedDoc> {
        self.next_batch(usize::MAX);
        self.docs.truncate(self.len);
        self.docs
    }
}

/// What an agent's cache knows of message `seq` (see `Store::archived_originals`).
enum Known<'a> {
    /// Archived (hidden under a cover, or masked in the live history), with its original.
    Archived(&'a Arc<Message>),
    /// A normal message of the live history: not archived.
    Live,
    /// Not enough: read the trees.
    Unknown,
}

fn cached_original<'a>(entry: &'a Entry, covers: &[Cover], seq: u64) -> Known<'a> {
    if view::covered(covers, seq) {
        return entry.original(seq).map_or(Known::Unknown, Known::Archived);
    }
    let Some(live) = entry.live() else {
        return Known::Unknown;
    };
    match live.binary_search_by_key(&seq, |m| m.seq) {
        Ok(j) => match live[j].kind {
            MessageKind::Normal => Known::Live,
            // The placeholder of a masked message: its original, if read before.
            MessageKind::Masked { .. } => {
                entry.original(seq).map_or(Known::Unknown, Known::Archived)
            }
            MessageKind::Summary(_) => Known::Unknown,
        },
        Err(_) => Known::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Read a few at a time, a ranking gives exactly what sorting it whole gives: its best
        /// `limit`, best first, equal scores the newer first.
        #[test]
        fn a_ranking_read_in_batches_is_the_whole_sort(
            scores in proptest::collection::vec(0u8..40, 0..300),
            limit in 0usize..320,
            batches in proptest::collection::vec(0usize..70, 1..12),
        ) {
            let docs: Vec<RankedDoc> = scores
                .iter()
                .enumerate()
                .map(|(i, &s)| RankedDoc { id: (i as u64 * 7919) % 1009, score: f64::from(s), words: 1.0 })
                .collect();
            let mut whole = docs.clone();
            whole.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.id.cmp(&a.id)));
            whole.truncate(limit);
            let mut ranking = Ranking::new(docs, limit);
            prop_assert_eq!(ranking.len(), whole.len());
            let mut read = Vec::new();
            for n in batches.iter().cycle().take(400) {
                if ranking.is_done() {
                    break;
                }
                read.extend_from_slice(ranking.next_batch(*n));
            }
            read.extend_from_slice(ranking.next_batch(usize::MAX));
            prop_assert!(ranking.is_done());
            prop_assert_eq!(read, whole);
        }
    }
}
