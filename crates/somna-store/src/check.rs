//! [`Store::check_invariants`]: a full recount of one agent's data against its record.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use somna_core::{AgentId, Cover, JournalEntry, Message, MessageKind, Seq};

use crate::codec;
use crate::compaction::UndoRecord;
use crate::error::{Result, StoreError};
use crate::keys::{self, MessageKey};
use crate::store::{Store, tree_names};
use crate::view;

/// The result of [`Store::check_invariants`]: what was counted and every violation found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantReport {
    /// The agent checked.
    pub agent: AgentId,
    /// Messages in live history (recounted).
    pub history_len: u64,
    /// Tokens of live history (recounted).
    pub history_tokens: u64,
    /// Entries in the archive (recounted).
    pub archive_len: u64,
    /// Journal entries (recounted).
    pub journal_len: u64,
    /// One sentence per violation; empty when every invariant holds.
    pub violations: Vec<String>,
}

impl InvariantReport {
    /// True when no invariant is violated.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for InvariantReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "agent {}: {} history messages ({} tokens), {} archived, {} journal entries",
            self.agent, self.history_len, self.history_tokens, self.archive_len, self.journal_len
        )?;
        if self.violations.is_empty() {
            write!(f, "; ok")
        } else {
            for v in &self.violations {
                write!(f, "\n- {v}")?;
            }
            Ok(())
        }
    }
}

impl Store {
    /// Recounts the agent's data and checks it against its record:
    /// - every seq below `next_seq` is present exactly once as an original: a normal message in
    ///   live history, or archived (hidden under a cover in the history tree, or in the archive
    ///   tree; a masked placeholder has its original in the archive tree);
    /// - the covers are sorted and disjoint and each has its live summary; live history is in seq
    ///   order, no live message lies inside a summary's range, and every live summary has an undo
    ///   record of its layout (and every undo record a summary);
    /// - the counters (`history_tokens`, `history_len`, `archive_len`, and the in-memory usage
    ///   counter when loaded) equal the recount; journal, memory and event ids are below their
    ///   next ids; every journal entry has exactly its index key.
    ///
    /// Undecodable values are reported as violations rather than errors.
    pub fn check_invariants(&self, id: &AgentId) -> Result<InvariantReport> {
        let record = self
            .agent(id)?
            .ok_or_else(|| StoreError::UnknownAgent(id.clone()))?;
        let trees = &self.inner.trees;
        let prefix = keys::prefix(id);
        let prefix_len = prefix.len();
        let mut v = Vec::new();

        // Covers: sorted, disjoint, each with its live summary (checked below).
        let covers = &record.covers;
        for pair in covers.windows(2) {
            if pair[1].seq <= pair[0].through {
                v.push(format!(
                    "the covers of summaries {} and {} overlap or are out of order",
                    pair[0].seq, pair[1].seq
                ));
            }
        }
        let mut covers_seen = vec![false; covers.len()];

        // The history tree: live history, and what covers hide (archived in place).
        let mut history_normal = BTreeSet::new();
        let mut history_masked = Vec::new();
        let mut summaries: Vec<(Seq, Seq)> = Vec::new();
        let mut summary_keys = BTreeSet::new();
        let mut archived = BTreeSet::new();
        let mut archive_len = 0u64;
        let (mut history_len, mut history_tokens) = (0u64, 0u64);
        let mut last_seq: Option<Seq> = None;
        for item in trees.history.scan_prefix(&prefix) {
            let (key, value) = item?;
            let Some(parsed) = keys::parse_message(prefix_len, &key) else {
                v.push(format!("history key {} is malformed", keys::render(&key)));
                continue;
            };
            let hidden = view::hiding(covers, parsed).is_some();
            if !hidden {
                history_len += 1;
            }
            let Some(message) = decoded::<Message>(tree_names::HISTORY, &key, &value, &mut v)
            else {
                continue;
            };
            let seq = parsed.seq();
            if message.seq != seq {
                v.push(format!(
                    "history key {} holds a message with seq {}",
                    keys::render(&key),
                    message.seq
                ));
            }
            match (&message.kind, parsed) {
                (MessageKind::Normal, MessageKey::Seq(_)) => {
                    if hidden {
                        archived.insert(seq);
                        archive_len += 1;
                    } else {
                        history_normal.insert(seq);
                    }
                }
                (MessageKind::Masked { .. }, MessageKey::Seq(_)) => history_masked.push(seq),
                (MessageKind::Summary(meta), MessageKey::Summary(_, generation))
                    if meta.generation == generation =>
                {
                    summary_keys.insert(key.to_vec());
                    if hidden {
                        archive_len += 1;
                    } else {
                        summaries.push((meta.covers_from_seq, meta.covers_through_seq));
                        let cover = covers
                            .iter()
                            .position(|c| (c.seq, c.generation) == (seq, generation));
                        if let Some(i) = cover {
                            covers_seen[i] = true;
                        }
                        match trees.undo.get(&key)? {
                            None => v.push(format!("summary {seq} has no undo record")),
                            Some(undo) => check_summary_layout(
                                &key,
                                &undo,
                                cover.map(|i| &covers[i]),
                                meta.covers_through_seq,
                                &mut v,
                            ),
                        }
                    }
                }
                (kind, _) => v.push(format!(
                    "history key {} does not fit its {kind:?} message",
                    keys::render(&key)
                )),
            }
            if hidden {
                continue;
            }
            history_tokens += u64::from(message.tokens);
            if let Some(prev) = last_seq
                && seq <= prev
            {
                v.push(format!(
                    "history seq {seq} follows seq {prev}: out of order or twice"
                ));
            }
            last_seq = Some(seq);
        }
        for (cover, seen) in covers.iter().zip(&covers_seen) {
            if !seen {
                v.push(format!(
                    "the cover of summary {}.{} has no live summary in history",
                    cover.seq, cover.generation
                ));
            }
        }

        // The archive tree: originals of masked messages, and what layout 1 moved there.
        for item in trees.archive.scan_prefix(&prefix) {
            let (key, value) = item?;
            archive_len += 1;
            let Some(message) = decoded::<Message>(tree_names::ARCHIVE, &key, &value, &mut v)
            else {
                continue;
            };
            match (keys::parse_message(prefix_len, &key), &message.kind) {
                (Some(MessageKey::Seq(seq)), MessageKind::Normal) if seq == message.seq => {
                    if !archived.insert(seq) {
                        v.push(format!("seq {seq} is archived twice"));
                    }
                }
                (Some(MessageKey::Summary(seq, generation)), MessageKind::Summary(meta))
                    if seq == message.seq && meta.generation == generation =>
                {
                    summary_keys.insert(key.to_vec());
                }
                _ => v.push(format!(
                    "archive key {} does not fit its message (seq {}, {:?})",
                    keys::render(&key),
                    message.seq,
                    message.kind
                )),
            }
        }

        // Every original exactly once.
        let mut lost = Vec::new();
        for seq in 0..record.next_seq {
            match (history_normal.contains(&seq), archived.contains(&seq)) {
                (true, true) => v.push(format!("seq {seq} is both in history and in the archive")),
                (false, false) => lost.push(seq),
                _ => {}
            }
        }
        for (from, through) in ranges(&lost) {
            if from == through {
                v.push(format!(
                    "seq {from} is lost: neither in history nor in the archive"
                ));
            } else {
                v.push(format!(
                    "seqs {from}–{through} are lost: neither in history nor in the archive"
                ));
            }
        }
        if let Some(&beyond) = history_normal
            .iter()
            .chain(archived.iter())
            .find(|&&s| s >= record.next_seq)
        {
            v.push(format!(
                "seq {beyond} is stored but next_seq is {}",
                record.next_seq
            ));
        }
        for &seq in &history_masked {
            if !archived.contains(&seq) {
                v.push(format!(
                    "masked message {seq} has no original in the archive"
                ));
            }
        }
        for (from, through) in &summaries {
            let inside = history_normal
                .range(from..=through)
                .chain(history_masked.iter().filter(|s| {
                    (from..=through).contains(s)
                        && view::hiding(covers, MessageKey::Seq(**s)).is_none()
                }))
                .next();
            if let Some(seq) = inside {
                v.push(format!(
                    "history message {seq} lies inside the range {from}–{through} of a summary"
                ));
            }
        }

        // Undo records belong to a summary in history or in the archive.
        for item in trees.undo.scan_prefix(&prefix) {
            let (key, value) = item?;
            if !summary_keys.contains(key.as_ref()) {
                v.push(format!(
                    "undo record {} has no summary in history or the archive",
                    keys::render(&key)
                ));
            }
            decoded::<UndoRecord>(tree_names::UNDO, &key, &value, &mut v);
        }

        // Counters.
        let mut counter = |name: &str, stored: u64, recounted: u64| {
            if stored != recounted {
                v.push(format!(
                    "counter {name} is {stored} but the recount is {recounted}"
                ));
            }
        };
        counter("history_len", record.history_len, history_len);
        counter("history_tokens", record.history_tokens, history_tokens);
        counter("archive_len", record.archive_len, archive_len);
        if let Some(state) = self.loaded_state(id) {
            counter(
                "usage_tokens (in memory)",
                state.history_tokens(),
                history_tokens,
            );
        }

        // Journal, its index, memory and events.
        let mut journal_len = 0u64;
        let mut index_expected = BTreeSet::new();
        for item in trees.journal.scan_prefix(&prefix) {
            let (key, value) = item?;
            journal_len += 1;
            if let Some(entry) = decoded::<JournalEntry>(tree_names::JOURNAL, &key, &value, &mut v)
            {
                if keys::trailing_u64(&key) != Some(entry.id) {
                    v.push(format!(
                        "journal key {} holds entry {}",
                        keys::render(&key),
                        entry.id
                    ));
                }
                if entry.id >= record.next_entry_id {
                    v.push(format!(
                        "journal entry {} is not below next_entry_id {}",
                        entry.id, record.next_entry_id
                    ));
                }
                index_expected.insert(keys::by_source(id, entry.source_type, entry.id));
            }
        }
        let mut index_found = BTreeSet::new();
        for item in trees.journal_by_source.scan_prefix(&prefix) {
            let (key, _) = item?;
            index_found.insert(key.to_vec());
        }
        for missing in index_expected.difference(&index_found) {
            v.push(format!(
                "journal index key {} is missing",
                keys::render(missing)
            ));
        }
        for extra in index_found.difference(&index_expected) {
            v.push(format!(
                "journal index key {} names no entry",
                keys::render(extra)
            ));
        }
        check_below(
            &trees.memory,
            &prefix,
            record.next_fact_id,
            "memory fact",
            "next_fact_id",
            &mut v,
        )?;
        check_below(
            &trees.events,
            &prefix,
            record.next_event_seq,
            "event",
            "next_event_seq",
            &mut v,
        )?;

        // The search index holds exactly what indexing the content below its watermarks writes.
        match self.index_difference(id) {
            Ok(difference) => v.extend(difference),
            Err(e) => v.push(e.to_string()),
        }

        // The live-history cache, when it holds the agent's history, holds what the trees do;
        // the archived originals it keeps are the trees' originals of their seqs.
        if let Some(state) = self.loaded_state(id) {
            let guard = state.lock();
            let cached = self.inner.history_cache.with_entry(id, |e| {
                (e.live().cloned(), e.originals().cloned().collect())
            });
            let (live, originals): (_, Vec<Message>) = cached.unwrap_or_default();
            for original in originals {
                let key = keys::seq(id, original.seq);
                let in_history = match trees.history.get(&key)? {
                    Some(v) => Some(codec::decode_message(tree_names::HISTORY, &key, &v)?),
                    None => None,
                };
                let stored = match in_history {
                    Some(m) if m.is_normal() => Some(m),
                    _ => match trees.archive.get(&key)? {
                        Some(v) => Some(codec::decode_message(tree_names::ARCHIVE, &key, &v)?),
                        None => None,
                    },
                };
                if stored.as_ref() != Some(&original) {
                    v.push(format!(
                        "the cached original of seq {} is not the stored one",
                        original.seq
                    ));
                }
            }
            if let Some(cached) = live {
                let entries =
                    view::live_entries(&trees.history, id, &guard.covers, 0, None, usize::MAX)?;
                let stored = view::decode_all(&entries)?;
                if *cached != stored {
                    let seqs = |h: &[Message]| h.iter().map(|m| m.seq).collect::<Vec<_>>();
                    v.push(format!(
                        "the cached live history (seqs {:?}) is not the stored one (seqs {:?})",
                        seqs(&cached),
                        seqs(&stored)
                    ));
                }
            }
        }

        Ok(InvariantReport {
            agent: id.clone(),
            history_len,
            history_tokens,
            archive_len,
            journal_len,
            violations: v,
        })
    }
}

/// Checks that a live summary and its undo record agree on the layout: a layout-2 summary has a
/// cover ending where the summary's range ends; a layout-1 summary has none.
fn check_summary_layout(
    key: &[u8],
    undo: &[u8],
    cover: Option<&Cover>,
    covers_through: Seq,
    violations: &mut Vec<String>,
) {
    let undo: UndoRecord = match codec::decode(tree_names::UNDO, key, undo) {
        Ok(undo) => undo,
        // Reported with the other undo records.
        Err(_) => return,
    };
    let name = keys::render(key);
    match (undo.in_place.is_some(), cover) {
        (true, None) => violations.push(format!(
            "summary {name} hides what it covers but has no cover in the agent's record"
        )),
        (false, Some(_)) => violations.push(format!(
            "summary {name} has a cover but its undo record is of layout 1"
        )),
        (true, Some(cover)) if cover.through != covers_through => violations.push(format!(
            "the cover of summary {name} ends at {} but the summary covers through {covers_through}",
            cover.through
        )),
        _ => {}
    }
}

/// Reports keys of `tree` under `prefix` whose number is not below `next`.
fn check_below(
    tree: &crate::backend::Tree,
    prefix: &[u8],
    next: u64,
    what: &str,
    counter: &str,
    violations: &mut Vec<String>,
) -> Result<()> {
    let end = keys::prefix_end(prefix);
    if let Some(item) = tree.range(prefix.to_vec()..end).next_back() {
        let (key, _) = item?;
        if let Some(n) = keys::trailing_u64(&key)
            && n >= next
        {
            violations.push(format!("{what} {n} is not below {counter} {next}"));
        }
    }
    Ok(())
}

/// Groups sorted numbers into inclusive runs of consecutive values.
fn ranges(sorted: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &n in sorted {
        match out.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => out.push((n, n)),
        }
    }
    out
}

/// The value at `key` of `tree`, decoded; `None` when it does not decode, the reason added to
/// `violations`.
fn decoded<T: DeserializeOwned>(
    tree: &'static str,
    key: &[u8],
    value: &[u8],
    violations: &mut Vec<String>,
) -> Option<T> {
    codec::decode(tree, key, value)
        .map_err(|e| violations.push(e.to_string()))
        .ok()
}
