//! Embedding vectors of archived messages, for semantic retrieval: computed while the agent sleeps
//! (never on a turn's hot path), stored quantized, searched by a flat scan.
//!
//! Like the inverted index (`index`), the vectors are derived data kept beside the content: a
//! watermark says which messages were considered (every archived message below seq `through`),
//! and the model that made them is stored with them, so a change of embedder model starts over.
//! Content never changes once written, so a vector never goes stale: an uncompacted message
//! keeps its vector (search only returns archived originals), and one compacted again needs no
//! new one.
//!
//! Keys in the `vectors` tree:
//!
//! | key | value |
//! |---|---|
//! | `agent ‖ 0x00 ‖ 0x00` | the meta: the model's name, its dimensions, the watermark, the vectors stored |
//! | `agent ‖ 0x00 ‖ first_seq_be64` | a block of up to [`BLOCK`] vectors, seqs ascending |
//!
//! A vector is stored as one scale (f32) and one signed byte per dimension (the largest
//! magnitude maps to 127): 388 bytes for a 384-dimension model, a quarter of f32, with a cosine
//! error below 1% (a test checks it). A search quantizes the query the same way and takes
//! integer dot products over every vector of the agent. The vectors are read (one range scan)
//! into a per-store cache the first time an agent is searched and kept while its meta (model,
//! watermark, count) stays the same, which every search checks with one point read: a sleep, or
//! another node that hosted the agent meanwhile, makes the next search read them again. The
//! cache holds at most [`CACHE_BYTES`]; past that it is emptied and refilled by the next searches.

use std::collections::BTreeMap;

use somna_core::{AgentId, Message, MessageKind};

use crate::backend::Batch;
use crate::error::{Result, StoreError};
use crate::index::{ScoredDoc, best_first, each_decoded};
use crate::keys;
use crate::store::{Store, tree_names};
use crate::varint::{Reader, put_varint};

/// Vectors per block value.
pub const BLOCK: usize = 256;
/// The most bytes of vectors a store keeps in memory for searches (see the module docs).
pub const CACHE_BYTES: usize = 256 * 1024 * 1024;

/// Agents' vectors in memory, each valid for the meta it was read under.
#[derive(Debug, Default)]
pub(crate) struct VectorCache {
    entries: std::sync::Mutex<std::collections::HashMap<AgentId, std::sync::Arc<Matrix>>>,
}

/// One agent's vectors as one contiguous matrix.
#[derive(Debug)]
struct Matrix {
    meta: VectorsMeta,
    seqs: Vec<u64>,
    scales: Vec<f32>,
    /// `seqs.len() × meta.dims` bytes, row by row.
    data: Vec<i8>,
}

impl Matrix {
    fn bytes(&self) -> usize {
        self.data.len() + self.seqs.len() * 12
    }
}

impl VectorCache {
    fn get(&self, id: &AgentId, meta: &VectorsMeta) -> Option<std::sync::Arc<Matrix>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.get(id).filter(|m| m.meta == *meta).cloned()
    }

    fn put(&self, id: &AgentId, matrix: std::sync::Arc<Matrix>) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.remove(id);
        let held: usize = entries.values().map(|m| m.bytes()).sum();
        if held + matrix.bytes() > CACHE_BYTES {
            entries.clear();
        }
        if matrix.bytes() <= CACHE_BYTES {
            entries.insert(id.clone(), matrix);
        }
    }
}
/// The first byte of every value of the `vectors` tree.
pub const VECTORS_FORMAT: u8 = 1;

/// What an agent's stored vectors are.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VectorsMeta {
    /// The embedder model that made them ("" when there are none).
    pub model: String,
    /// Their dimensions.
    pub dims: usize,
    /// Every archived message below this seq was embedded (or had nothing to embed).
    pub through: u64,
    /// Vectors stored.
    pub count: u64,
}

/// Archived messages that have no vector yet ([`Store::messages_to_embed`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToEmbed {
    /// The originals, in seq order.
    pub messages: Vec<Message>,
    /// The watermark to store with their vectors: every archived message below it is then
    /// embedded.
    pub through: u64,
    /// Messages left for a later call (beyond the limit).
    pub remaining: usize,
}

impl Store {
    /// The agent's vectors: model, dimensions, watermark, count (all empty for none).
    pub fn vectors_meta(&self, id: &AgentId) -> Result<VectorsMeta> {
        let key = meta_key(id);
        match self.inner.trees.vectors.get(&key)? {
            Some(v) => decode_meta(&key, &v),
            None => Ok(VectorsMeta::default()),
        }
    }

    /// Up to `limit` archived messages (the oldest first) that `model` has not embedded yet:
    /// normal messages with text, masked ones as their originals. Everything archived since the
    /// watermark, or since the start when the stored vectors are another model's.
    pub fn messages_to_embed(&self, id: &AgentId, model: &str, limit: usize) -> Result<ToEmbed> {
        let state = match self.state(id) {
            Ok(state) => state,
            Err(StoreError::UnknownAgent(_)) => return Ok(ToEmbed::default()),
            Err(e) => return Err(e),
        };
        let guard = state.lock();
        let meta = self.vectors_meta(id)?;
        let from = if meta.model == model { meta.through } else { 0 };
        let frontier = self.message_frontier(id, &guard)?;
        if from >= frontier {
            return Ok(ToEmbed {
                messages: Vec::new(),
                through: from,
                remaining: 0,
            });
        }
        // Each seq once: the original in history, else in the archive tree (masked, layout 1).
        let trees = &self.inner.trees;
        let mut found: BTreeMap<u64, Message> = BTreeMap::new();
        for (tree, name) in [
            (&trees.archive, tree_names::ARCHIVE),
            (&trees.history, tree_names::HISTORY),
        ] {
            each_decoded(tree, name, id, from..frontier, |m: Message| {
                if matches!(m.kind, MessageKind::Normal) && !m.content.trim().is_empty() {
                    found.insert(m.seq, m);
                }
            })?;
        }
        let total = found.len();
        let messages: Vec<Message> = found.into_values().take(limit).collect();
        let through = if messages.len() < total {
            messages.last().map_or(from, |m| m.seq + 1)
        } else {
            frontier
        };
        Ok(ToEmbed {
            remaining: total - messages.len(),
            messages,
            through,
        })
    }

    /// Stores `vectors` (seq and vector, seqs ascending, all of one length) made by `model`, and
    /// moves the watermark to `through`, in one batch. Vectors of another model are removed in
    /// the same batch. Vectors are quantized; they need not be normalized.
    pub fn put_vectors(
        &self,
        id: &AgentId,
        model: &str,
        through: u64,
        vectors: &[(u64, Vec<f32>)],
    ) -> Result<()> {
        let state = self.state(id)?;
        let _guard = state.lock();
        let tree = &self.inner.trees.vectors;
        let meta = self.vectors_meta(id)?;
        let dims = vectors.first().map_or(meta.dims, |(_, v)| v.len());
        if let Some((seq, v)) = vectors.iter().find(|(_, v)| v.len() != dims) {
            return Err(StoreError::Invalid {
                what: "vector",
                reason: format!(
                    "message {seq}'s vector has {} dimensions, the others {dims}",
                    v.len()
                ),
            });
        }
        let mut batch = Batch::default();
        let mut count = meta.count;
        let same_model = meta.model == model && (meta.dims == dims || meta.count == 0);
        if !same_model {
            for item in tree.scan_prefix(keys::prefix(id)) {
                let (key, _) = item?;
                batch.remove(key);
            }
            count = 0;
        }
        for block in vectors.chunks(BLOCK) {
            let Some((first, _)) = block.first() else {
                continue;
            };
            batch.insert(keys::seq(id, *first), encode_block(dims, block));
            count += block.len() as u64;
        }
        let meta = VectorsMeta {
            model: model.to_string(),
            dims,
            through: if same_model {
                through.max(meta.through)
            } else {
                through
            },
            count,
        };
        batch.insert(meta_key(id), encode_meta(&meta));
        tree.apply_batch(batch)
    }

    /// The stored vectors of `model` most similar to `query` (cosine, from quantized vectors),
    /// best first, at most `limit`; none when the stored vectors are another model's or of
    /// another length. Scans every block of the agent.
    pub fn search_vectors(
        &self,
        id: &AgentId,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<ScoredDoc>> {
        let meta = self.vectors_meta(id)?;
        if meta.model != model || meta.dims != query.len() || meta.count == 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let (q, q_scale) = quantize(query);
        let matrix = match self.inner.vector_cache.get(id, &meta) {
            Some(m) => m,
            None => {
                let m = std::sync::Arc::new(self.read_matrix(id, meta)?);
                self.inner.vector_cache.put(id, std::sync::Arc::clone(&m));
                m
            }
        };
        let dims = matrix.meta.dims;
        let mut scored: Vec<ScoredDoc> = matrix
            .data
            .chunks_exact(dims)
            .zip(matrix.seqs.iter().zip(&matrix.scales))
            .map(|(row, (&seq, &scale))| ScoredDoc {
                id: seq,
                score: f64::from(dot(&q, row) as f32 * q_scale * scale),
            })
            .collect();
        let n = best_first(&mut scored, limit);
        scored.truncate(n);
        Ok(scored)
    }
}

impl Store {
    /// Every stored vector of the agent (of `meta`'s model and length) as one matrix: one range
    /// scan.
    fn read_matrix(&self, id: &AgentId, meta: VectorsMeta) -> Result<Matrix> {
        let capacity = usize::try_from(meta.count).unwrap_or(0);
        let mut matrix = Matrix {
            seqs: Vec::with_capacity(capacity),
            scales: Vec::with_capacity(capacity),
            data: Vec::with_capacity(capacity.saturating_mul(meta.dims)),
            meta,
        };
        let meta_key = meta_key(id);
        for item in self.inner.trees.vectors.scan_prefix(keys::prefix(id)) {
            let (key, value) = item?;
            if key.as_ref() == meta_key.as_slice() {
                continue;
            }
            read_block(&key, &value, &mut matrix)?;
        }
        Ok(matrix)
    }
}

/// `v` as signed bytes and the scale that maps them back (`v[i] ≈ q[i] × scale`).
pub fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    let q = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, scale)
}

/// The integer dot product of two quantized vectors of one length. (A hand-chunked version with
/// 16-bit products measured twice as slow: the compiler vectorizes this one better.)
fn dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

fn meta_key(id: &AgentId) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(0);
    k
}

fn encode_meta(meta: &VectorsMeta) -> Vec<u8> {
    let mut out = vec![VECTORS_FORMAT];
    put_varint(&mut out, meta.model.len() as u64);
    out.extend_from_slice(meta.model.as_bytes());
    for n in [meta.dims as u64, meta.through, meta.count] {
        put_varint(&mut out, n);
    }
    out
}

fn decode_meta(key: &[u8], value: &[u8]) -> Result<VectorsMeta> {
    let mut r = reader(key, value)?;
    let len = usize::try_from(r.varint()?).unwrap_or(usize::MAX);
    let model = String::from_utf8(r.bytes(len)?.to_vec())
        .map_err(|_| r.malformed("has a model name that is not UTF-8"))?;
    let dims = usize::try_from(r.varint()?).unwrap_or(usize::MAX);
    Ok(VectorsMeta {
        model,
        dims,
        through: r.varint()?,
        count: r.varint()?,
    })
}

/// A block: the format byte, the dimensions, the count, then per vector its seq (as a delta from
/// the previous one, the first whole), its scale and its bytes.
fn encode_block(dims: usize, block: &[(u64, Vec<f32>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + block.len() * (dims + 7));
    out.push(VECTORS_FORMAT);
    put_varint(&mut out, dims as u64);
    put_varint(&mut out, block.len() as u64);
    let mut prev = 0;
    for (seq, v) in block {
        put_varint(&mut out, seq - prev);
        prev = *seq;
        let (q, scale) = quantize(v);
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend(q.iter().map(|&b| b as u8));
    }
    out
}

/// Appends a block's vectors to `matrix` (whose meta gives their length).
fn read_block(key: &[u8], value: &[u8], matrix: &mut Matrix) -> Result<()> {
    let mut r = reader(key, value)?;
    let dims = usize::try_from(r.varint()?).unwrap_or(usize::MAX);
    if dims != matrix.meta.dims {
        return Err(r.malformed(&format!(
            "holds {dims}-dimension vectors, the meta says {}",
            matrix.meta.dims
        )));
    }
    let count = r.varint()?;
    let mut seq = 0u64;
    for _ in 0..count {
        seq = r.next_after(seq, "a seq")?;
        let scale_bytes: [u8; 4] = r
            .bytes(4)?
            .try_into()
            .map_err(|_| r.malformed("ends inside a scale"))?;
        let bytes = r.bytes(dims)?;
        matrix.seqs.push(seq);
        matrix.scales.push(f32::from_le_bytes(scale_bytes));
        // The bytes as signed: the same bits.
        matrix.data.extend(bytes.iter().map(|&b| b as i8));
    }
    r.finish("vectors")
}

/// A reader of a value of the `vectors` tree.
fn reader<'a>(key: &'a [u8], value: &'a [u8]) -> Result<Reader<'a>> {
    Reader::new(
        tree_names::VECTORS,
        "vectors",
        VECTORS_FORMAT,
        keys::render,
        key,
        value,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_cosine_is_within_a_percent() {
        // Deterministic pseudo-random unit vectors.
        let mut x: u64 = 42;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2_000) as f32 / 1_000.0 - 1.0
        };
        for _ in 0..50 {
            let a: Vec<f32> = (0..384).map(|_| next()).collect();
            let b: Vec<f32> = a.iter().map(|v| v * 0.6 + next() * 0.4).collect();
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let exact = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>() / (norm(&a) * norm(&b));
            let (qa, sa) = quantize(&a);
            let (qb, sb) = quantize(&b);
            let approx = dot(&qa, &qb) as f32 * sa * sb / (norm(&a) * norm(&b));
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        assert_eq!(quantize(&[0.0, 0.0]), (vec![0, 0], 0.0));
    }

    #[test]
    fn blocks_and_meta_round_trip() {
        let meta = VectorsMeta {
            model: "m".into(),
            dims: 3,
            through: 9,
            count: 2,
        };
        assert_eq!(decode_meta(b"k", &encode_meta(&meta)).unwrap(), meta);
        let block = encode_block(3, &[(5, vec![1.0, 0.0, 0.0]), (7, vec![0.0, 1.0, 0.0])]);
        let empty = || Matrix {
            meta: VectorsMeta {
                dims: 3,
                ..VectorsMeta::default()
            },
            seqs: Vec::new(),
            scales: Vec::new(),
            data: Vec::new(),
        };
        let mut m = empty();
        read_block(b"k", &block, &mut m).unwrap();
        assert_eq!(m.seqs, [5, 7]);
        let (q, s) = quantize(&[0.0, 1.0, 0.0]);
        let score = |row: usize| dot(&q, &m.data[row * 3..row * 3 + 3]) as f32 * s * m.scales[row];
        assert!(score(1) > 0.99 && score(0).abs() < 0.01);
        let e = read_block(b"k", &block[..block.len() - 1], &mut empty()).unwrap_err();
        assert!(e.to_string().contains("ends early"), "{e}");
    }
}
