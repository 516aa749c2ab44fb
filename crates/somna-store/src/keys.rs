//! Key layout. Every key starts with the agent id; keys inside an agent's range continue with the
//! 0x00 separator (an `AgentId` never contains 0x00) and big-endian numbers, so they sort in order.
//!
//! | tree | key |
//! |---|---|
//! | `agents` | `agent` |
//! | `history`, `archive` | `agent ‖ 0x00 ‖ seq_be64`, summaries `agent ‖ 0x00 ‖ seq_be64 ‖ generation_be32` |
//! | `journal` | `agent ‖ 0x00 ‖ entry_id_be64` |
//! | `journal_by_source` | `agent ‖ 0x00 ‖ source_type ‖ 0x00 ‖ entry_id_be64` |
//! | `memory` | `agent ‖ 0x00 ‖ fact_id_be64` |
//! | `events` | `agent ‖ 0x00 ‖ event_seq_be64` |
//! | `undo` | the summary's history key |

use std::fmt::Write as _;

use somna_core::{AgentId, EntryId, Message, MessageKind, Seq, SourceType};

/// The byte between the agent id and the rest of a key.
pub(crate) const SEP: u8 = 0x00;

/// The `agents` tree key of `id`.
pub(crate) fn agent(id: &AgentId) -> Vec<u8> {
    id.as_str().as_bytes().to_vec()
}

/// `agent ‖ 0x00`: the prefix of every key of `id` in the per-agent trees.
pub(crate) fn prefix(id: &AgentId) -> Vec<u8> {
    let mut k = Vec::with_capacity(id.as_str().len() + 13);
    k.extend_from_slice(id.as_str().as_bytes());
    k.push(SEP);
    k
}

/// The first key after every key that starts with `prefix` (whose last byte is the 0x00 separator).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = last.saturating_add(1);
    }
    end
}

/// `agent ‖ 0x00 ‖ n_be64`: history/archive keys of normal and masked messages, journal, memory and
/// events keys.
pub(crate) fn seq(id: &AgentId, n: u64) -> Vec<u8> {
    let mut k = prefix(id);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// `agent ‖ 0x00 ‖ seq_be64 ‖ generation_be32`: the history/archive key of a summary.
pub(crate) fn summary(id: &AgentId, seq: Seq, generation: u32) -> Vec<u8> {
    let mut k = seq_key_with_capacity(id, seq, 4);
    k.extend_from_slice(&generation.to_be_bytes());
    k
}

fn seq_key_with_capacity(id: &AgentId, n: u64, extra: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(id.as_str().len() + 9 + extra);
    k.extend_from_slice(id.as_str().as_bytes());
    k.push(SEP);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// The history/archive key of `message`: a summary's key carries its generation.
pub(crate) fn message(id: &AgentId, message: &Message) -> Vec<u8> {
    match &message.kind {
        MessageKind::Summary(meta) => summary(id, message.seq, meta.generation),
        MessageKind::Normal | MessageKind::Masked { .. } => seq(id, message.seq),
    }
}

/// `agent ‖ 0x00 ‖ source_type ‖ 0x00`: the prefix of one source type's index keys.
pub(crate) fn by_source_prefix(id: &AgentId, source: SourceType) -> Vec<u8> {
    let mut k = prefix(id);
    k.extend_from_slice(source.as_str().as_bytes());
    k.push(SEP);
    k
}

/// `agent ‖ 0x00 ‖ source_type ‖ 0x00 ‖ entry_id_be64`: a `journal_by_source` key.
pub(crate) fn by_source(id: &AgentId, source: SourceType, entry: EntryId) -> Vec<u8> {
    let mut k = by_source_prefix(id, source);
    k.extend_from_slice(&entry.to_be_bytes());
    k
}

/// What follows the agent prefix in a history or archive key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKey {
    /// A normal message or a masked placeholder.
    Seq(Seq),
    /// A summary: its seq and generation.
    Summary(Seq, u32),
}

impl MessageKey {
    /// The seq part of the key.
    pub(crate) fn seq(self) -> Seq {
        match self {
            MessageKey::Seq(s) | MessageKey::Summary(s, _) => s,
        }
    }
}

/// Parses the part of a history/archive `key` after a prefix of `prefix_len` bytes.
pub(crate) fn parse_message(prefix_len: usize, key: &[u8]) -> Option<MessageKey> {
    let rest = key.get(prefix_len..)?;
    match rest.len() {
        8 => Some(MessageKey::Seq(be64(rest)?)),
        12 => Some(MessageKey::Summary(be64(&rest[..8])?, be32(&rest[8..])?)),
        _ => None,
    }
}

/// The trailing big-endian u64 of a key (a journal, memory, events or index key's number).
pub(crate) fn trailing_u64(key: &[u8]) -> Option<u64> {
    let start = key.len().checked_sub(8)?;
    be64(&key[start..])
}

fn be64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

fn be32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// A readable form of a key for errors and reports: `agent/seq`, `agent/seq.generation`,
/// or `agent/` followed by the escaped remaining bytes.
pub(crate) fn render(key: &[u8]) -> String {
    let Some(sep) = key.iter().position(|&b| b == SEP) else {
        return key.escape_ascii().to_string();
    };
    let (agent, rest) = (&key[..sep], &key[sep + 1..]);
    let mut out = agent.escape_ascii().to_string();
    out.push('/');
    match parse_message(0, rest) {
        Some(MessageKey::Seq(s)) => {
            let _ = write!(out, "{s}");
        }
        Some(MessageKey::Summary(s, g)) => {
            let _ = write!(out, "{s}.{g}");
        }
        None => {
            // An index key: `source ‖ 0x00 ‖ id_be64`.
            match (rest.iter().position(|&b| b == SEP), trailing_u64(rest)) {
                (Some(p), Some(n)) if p + 9 == rest.len() => {
                    let _ = write!(out, "{}/{n}", rest[..p].escape_ascii());
                }
                _ => {
                    let _ = write!(out, "{}", rest.escape_ascii());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_and_render() {
        let id = AgentId::new("npc").unwrap();
        let a = seq(&id, 5);
        let s = summary(&id, 5, 2);
        let b = seq(&id, 6);
        assert!(
            a < s && s < b,
            "the shorter key sorts first, then the next seq"
        );
        assert!(prefix_end(&prefix(&id)) > b);
        let other = AgentId::new("npc2").unwrap();
        assert!(seq(&other, 0) > prefix_end(&prefix(&id)));
        assert_eq!(render(&a), "npc/5");
        assert_eq!(render(&s), "npc/5.2");
        assert_eq!(
            render(&by_source(&id, SourceType::Compaction, 7)),
            "npc/compaction/7"
        );
        assert_eq!(render(&agent(&id)), "npc");
        assert_eq!(
            parse_message(prefix(&id).len(), &s),
            Some(MessageKey::Summary(5, 2))
        );
        assert_eq!(trailing_u64(&b), Some(6));
    }
}
