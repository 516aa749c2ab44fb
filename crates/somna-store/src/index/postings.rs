//! The `terms` tree's keys and values: postings, term heads and sealed blocks, collections, and
//! the watermarks with the layout version.

use somna_core::AgentId;

use super::{DocKind, INDEX_VERSION, POSTINGS_FORMAT};
use crate::error::Result;
use crate::keys;
use crate::store::tree_names;
use crate::varint::{Reader, put_varint};

/// One posting: a document that contains a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub(super) id: u64,
    pub(super) tf: u32,
    pub(super) len: u32,
}

/// A key and its value, to write.
pub(super) type KeyValue = (Vec<u8>, Vec<u8>);

/// What the index holds: documents below these ids, per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Watermarks {
    pub(super) messages: u64,
    pub(super) entries: u64,
    pub(super) facts: u64,
}

pub(super) fn meta_key(id: &AgentId) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(0);
    k
}

pub(super) fn encode_meta(marks: Watermarks) -> Vec<u8> {
    let mut out = vec![POSTINGS_FORMAT];
    for n in [INDEX_VERSION, marks.messages, marks.entries, marks.facts] {
        put_varint(&mut out, n);
    }
    out
}

/// The watermarks, or `None` for an index of another layout version.
pub(super) fn decode_meta(key: &[u8], value: &[u8]) -> Result<Option<Watermarks>> {
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
pub(super) fn render_key(key: &[u8]) -> String {
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

pub(super) fn collection_key(id: &AgentId, kind: DocKind) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(kind.byte());
    k.push(keys::SEP);
    k
}

pub(super) fn head_key(id: &AgentId, kind: DocKind, term: &str) -> Vec<u8> {
    let mut k = keys::prefix(id);
    k.push(kind.byte());
    k.extend_from_slice(term.as_bytes());
    k.push(keys::SEP);
    k
}

pub(super) fn read_collection(tree: &crate::backend::Tree, key: &[u8]) -> Result<(u64, u64)> {
    match tree.get(key)? {
        Some(v) => decode_collection(key, &v),
        None => Ok((0, 0)),
    }
}

pub(super) fn decode_collection(key: &[u8], value: &[u8]) -> Result<(u64, u64)> {
    let mut r = reader(key, value)?;
    Ok((r.varint()?, r.varint()?))
}

pub(super) fn encode_collection(docs: u64, len: u64) -> Vec<u8> {
    let mut out = vec![POSTINGS_FORMAT];
    put_varint(&mut out, docs);
    put_varint(&mut out, len);
    out
}

/// A head (`df` set) or a sealed block (`df` none): the format byte, [df,] the count, then the
/// postings (the first id whole, the rest as deltas).
pub(super) fn encode_postings(df: Option<u64>, postings: &[Posting]) -> Vec<u8> {
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

pub(super) fn decode_head(key: &[u8], value: &[u8]) -> Result<(u64, Vec<Posting>)> {
    let mut r = reader(key, value)?;
    let df = r.varint()?;
    let mut postings = Vec::new();
    read_postings(&mut r, &mut postings)?;
    Ok((df, postings))
}

pub(super) fn decode_postings_into(key: &[u8], value: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    read_postings(&mut reader(key, value)?, out)
}

/// A reader of a value of the `terms` tree.
pub(super) fn reader<'a>(key: &'a [u8], value: &'a [u8]) -> Result<Reader<'a>> {
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
pub(super) fn read_postings(r: &mut Reader<'_>, out: &mut Vec<Posting>) -> Result<()> {
    let count = r.varint()?;
    // Room for them at once (a posting takes at least three bytes, so a corrupt count reserves
    // no more than the value could hold).
    out.reserve(
        usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(r.remaining() / 3),
    );
    let mut id = 0u64;
    for _ in 0..count {
        id = r.next_after(id, "an id")?;
        let tf = u32::try_from(r.varint()?).unwrap_or(u32::MAX);
        let len = u32::try_from(r.varint()?).unwrap_or(u32::MAX);
        out.push(Posting { id, tf, len });
    }
    r.finish("postings")
}
