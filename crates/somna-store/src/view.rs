//! The live history and the archive as views over the trees (store layout 2).
//!
//! The `history` tree holds every message ever appended, every summary and every masked
//! placeholder. A live summary's [`Cover`] (in the agent's record) hides the run of keys it covers,
//! except its own key: what is hidden is archived, what is not is live history. The `archive` tree
//! holds the originals of masked messages, and every original that a layout-1 build moved there.
//!
//! So a compaction writes a summary key and a cover instead of moving the covered messages (O(1)
//! in their number), and the views are read as key ranges between the covers:
//!
//! ```text
//! history tree:  0  1  2 [3 (3.1) 4 5 6 7] 8  9 [10 (10.2) 11 12] 13
//! live:          0  1  2     3.1            8  9      10.2           13
//! archived:                3     4 5 6 7                10    11 12
//! ```
//!
//! Callers hold the agent's lock while reading, so the covers and the trees agree.

use crate::backend::Bytes;
use somna_core::{AgentId, Cover, Message, MessageKind, Seq};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::keys::{self, MessageKey};
use crate::store::tree_names;

/// A piece of the live view, in key order.
enum Piece {
    /// Every key in `start..end`.
    Range(Vec<u8>, Vec<u8>),
    /// A live summary's key.
    Summary(Vec<u8>),
}

/// True when a cover hides `seq` (its original is archived), in O(log covers).
pub(crate) fn covered(covers: &[Cover], seq: Seq) -> bool {
    // Covers are sorted and disjoint: the only candidate is the last one starting at or before seq.
    let i = covers.partition_point(|c| c.seq <= seq);
    i.checked_sub(1)
        .and_then(|i| covers.get(i))
        .is_some_and(|c| c.contains(seq))
}

/// The cover hiding `key` (a history key of `id`, parsed as `parsed`), if any: a cover hides its
/// whole run of seqs except its own summary key.
pub(crate) fn hiding(covers: &[Cover], parsed: MessageKey) -> Option<&Cover> {
    let seq = parsed.seq();
    // Covers are sorted and disjoint: the only candidate is the last one starting at or before seq.
    let i = covers.partition_point(|c| c.seq <= seq);
    let cover = covers.get(i.checked_sub(1)?)?;
    let own = parsed == MessageKey::Summary(cover.seq, cover.generation);
    (cover.contains(seq) && !own).then_some(cover)
}

/// The pieces of the live view of `id`'s history from seq `from` on.
fn live_pieces(id: &AgentId, covers: &[Cover], from: Seq) -> Vec<Piece> {
    let mut pieces = Vec::with_capacity(2 * covers.len() + 1);
    let mut pos = keys::seq(id, from);
    for cover in covers.iter().filter(|c| c.through >= from) {
        if cover.seq >= from {
            let start = keys::seq(id, cover.seq);
            if pos < start {
                pieces.push(Piece::Range(pos, start));
            }
            pieces.push(Piece::Summary(keys::summary(
                id,
                cover.seq,
                cover.generation,
            )));
        }
        pos = match cover.through.checked_add(1) {
            Some(after) => keys::seq(id, after),
            None => return pieces,
        };
    }
    pieces.push(Piece::Range(pos, keys::prefix_end(&keys::prefix(id))));
    pieces
}

fn missing_summary(id: &AgentId, key: &[u8]) -> StoreError {
    StoreError::Inconsistent {
        agent: id.clone(),
        reason: format!("live summary {} is missing from history", keys::render(key)),
    }
}

/// Up to `limit` raw live entries of `id` with seq ≥ `from` and key ≤ `until` (no bound for
/// `None`), in key order.
pub(crate) fn live_entries(
    history: &crate::backend::Tree,
    id: &AgentId,
    covers: &[Cover],
    from: Seq,
    until: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<(Bytes, Bytes)>> {
    let mut out = Vec::new();
    for piece in live_pieces(id, covers, from) {
        match piece {
            Piece::Range(start, end) => {
                let end = match until {
                    Some(until) if until < end.as_slice() => {
                        let mut after = until.to_vec();
                        after.push(0);
                        after
                    }
                    _ => end,
                };
                if start >= end {
                    return Ok(out);
                }
                for item in history.range(start..end) {
                    if out.len() == limit {
                        return Ok(out);
                    }
                    out.push(item?);
                }
            }
            Piece::Summary(key) => {
                if until.is_some_and(|u| u < key.as_slice()) {
                    return Ok(out);
                }
                if out.len() == limit {
                    return Ok(out);
                }
                let value = history
                    .get(&key)?
                    .ok_or_else(|| missing_summary(id, &key))?;
                out.push((key.into(), value));
            }
        }
    }
    Ok(out)
}

/// The last `n` raw live entries of `id`, in key order.
pub(crate) fn live_tail(
    history: &crate::backend::Tree,
    id: &AgentId,
    covers: &[Cover],
    n: usize,
) -> Result<Vec<(Bytes, Bytes)>> {
    let mut out = Vec::with_capacity(n.min(1024));
    'pieces: for piece in live_pieces(id, covers, 0).into_iter().rev() {
        match piece {
            Piece::Range(start, end) => {
                for item in history.range(start..end).rev() {
                    if out.len() == n {
                        break 'pieces;
                    }
                    out.push(item?);
                }
            }
            Piece::Summary(key) => {
                if out.len() == n {
                    break;
                }
                let value = history
                    .get(&key)?
                    .ok_or_else(|| missing_summary(id, &key))?;
                out.push((key.into(), value));
            }
        }
    }
    out.reverse();
    Ok(out)
}

/// Decodes raw history entries.
pub(crate) fn decode_all(entries: &[(Bytes, Bytes)]) -> Result<Vec<Message>> {
    entries
        .iter()
        .map(|(k, v)| codec::decode_message(tree_names::HISTORY, k, v))
        .collect()
}

/// Up to `limit` archived messages of `id` with `from ≤ seq ≤ through` (no bound for `None`), in
/// key order: the `archive` tree merged with the hidden part of the `history` tree (masked
/// placeholders left out: their originals are in the `archive` tree).
pub(crate) fn archived(
    history: &crate::backend::Tree,
    archive: &crate::backend::Tree,
    id: &AgentId,
    covers: &[Cover],
    from: Seq,
    through: Option<Seq>,
    limit: usize,
) -> Result<Vec<Message>> {
    let start = keys::seq(id, from);
    let end = match through.and_then(|t| t.checked_add(1)) {
        Some(after) => keys::seq(id, after),
        None => keys::prefix_end(&keys::prefix(id)),
    };
    if start >= end || limit == 0 {
        return Ok(Vec::new());
    }
    let prefix_len = keys::prefix(id).len();
    let last = through.unwrap_or(Seq::MAX);
    let hidden_ranges: Vec<(Vec<u8>, Vec<u8>)> = covers
        .iter()
        .filter(|c| c.through >= from && c.seq <= last)
        .map(|c| {
            let lo = keys::seq(id, c.seq.max(from));
            let hi = match c.through.min(last).checked_add(1) {
                Some(after) => keys::seq(id, after),
                None => keys::prefix_end(&keys::prefix(id)),
            };
            (lo, hi)
        })
        .collect();
    let mut hidden = hidden_ranges
        .into_iter()
        .flat_map(|(lo, hi)| history.range(lo..hi))
        .filter_map(|item| match item {
            Ok((key, value)) => {
                let parsed = keys::parse_message(prefix_len, &key)?;
                hiding(covers, parsed)?;
                Some(codec::decode_message(tree_names::HISTORY, &key, &value).map(|m| (key, m)))
            }
            Err(e) => Some(Err(e)),
        })
        .filter(|item| !matches!(item, Ok((_, m)) if matches!(m.kind, MessageKind::Masked { .. })))
        .peekable();
    let mut moved = archive
        .range(start..end)
        .map(|item| {
            let (key, value) = item?;
            let message: Message = codec::decode_message(tree_names::ARCHIVE, &key, &value)?;
            Ok((key, message))
        })
        .peekable();

    let mut out = Vec::new();
    while out.len() < limit {
        let take_hidden = match (moved.peek(), hidden.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(Err(_)), _) => false,
            (_, Some(Err(_))) => true,
            (Some(Ok((a, _))), Some(Ok((h, _)))) => h < a,
        };
        let next = if take_hidden {
            hidden.next()
        } else {
            moved.next()
        };
        if let Some(item) = next {
            out.push(item?.1);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cover_hides_its_run_but_not_its_summary() {
        let covers = [
            Cover {
                seq: 3,
                generation: 1,
                through: 7,
            },
            Cover {
                seq: 10,
                generation: 2,
                through: 12,
            },
        ];
        let hidden = |k| hiding(&covers, k).map(|c| c.seq);
        assert_eq!(hidden(MessageKey::Seq(2)), None);
        assert_eq!(hidden(MessageKey::Seq(3)), Some(3));
        assert_eq!(hidden(MessageKey::Summary(3, 1)), None);
        assert_eq!(hidden(MessageKey::Summary(3, 0)), Some(3));
        assert_eq!(hidden(MessageKey::Summary(5, 1)), Some(3));
        assert_eq!(hidden(MessageKey::Seq(7)), Some(3));
        assert_eq!(hidden(MessageKey::Seq(8)), None);
        assert_eq!(hidden(MessageKey::Seq(11)), Some(10));
        assert_eq!(hidden(MessageKey::Summary(10, 2)), None);
        assert_eq!(hidden(MessageKey::Seq(13)), None);
    }
}
