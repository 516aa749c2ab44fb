//! The fusion of BM25's scores with a vector search's, weighed by BM25's confidence ([`fuse`]),
//! each fused score with the share the words gave of it.

use super::{RankedDoc, ScoredDoc};

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
pub(super) fn fuse(
    scored: &[ScoredDoc],
    by_vector: &[ScoredDoc],
    confidence: f64,
) -> Vec<RankedDoc> {
    let alpha = ALPHA_UNSURE + (ALPHA_SURE - ALPHA_UNSURE) * confidence.clamp(0.0, 1.0);
    let best = scored
        .iter()
        .map(|d| d.score)
        .fold(f64::MIN_POSITIVE, f64::max);
    // Each document's fused score and the part of it its words gave.
    let mut fused: std::collections::HashMap<u64, (f64, f64)> = scored
        .iter()
        .map(|d| {
            let words = alpha * d.score / best;
            (d.id, (words, words))
        })
        .collect();
    if let (Some(top), Some(low)) = (by_vector.first(), by_vector.last()) {
        let span = (top.score - low.score).max(f64::EPSILON);
        for d in by_vector {
            fused.entry(d.id).or_default().0 += (1.0 - alpha) * (d.score - low.score) / span;
        }
    }
    fused
        .into_iter()
        .map(|(id, (score, words))| RankedDoc {
            id,
            score,
            words: if score > 0.0 {
                (words / score).min(1.0) as f32
            } else {
                0.0
            },
        })
        .collect()
}
