//! Copying a whole store into another one, whatever their backends: every tree, key for key,
//! value for value (`somna migrate-store`). The bytes are the same on every backend (keys and
//! the codec are shared), so a copy is exact and needs no decoding.

use crate::backend::Batch;
use crate::error::{Result, StoreError};
use crate::store::{Store, tree_names};

/// Entries written per batch.
const BATCH: usize = 1_000;

/// What [`Store::copy_into`] copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Per tree, in copy order: its name and the entries copied.
    pub trees: Vec<(&'static str, u64)>,
}

impl CopyReport {
    /// Entries copied in all.
    pub fn entries(&self) -> u64 {
        self.trees.iter().map(|(_, n)| n).sum()
    }
}

impl Store {
    /// Copies every tree of this store into `dest`, which must hold no agent yet (a copy never
    /// merges two stores). Stop whatever writes to this store first: the copy reads each tree
    /// once, in batches, and does not freeze the store as a whole. Agents' in-memory state in
    /// `dest` is loaded from the copied records on first use.
    pub fn copy_into(&self, dest: &Store) -> Result<CopyReport> {
        if dest.inner.trees.agents.iter().next().is_some() {
            return Err(StoreError::Invalid {
                what: "copy destination",
                reason: format!(
                    "the {} store already holds agents; copy into an empty one",
                    dest.backend_name()
                ),
            });
        }
        use tree_names::*;
        let mut report = CopyReport::default();
        // The agent records last: a destination interrupted mid-copy holds no agent, so the
        // copy can simply be run again.
        for name in [
            HISTORY,
            ARCHIVE,
            JOURNAL,
            JOURNAL_BY_SOURCE,
            MEMORY,
            EVENTS,
            UNDO,
            TERMS,
            VECTORS,
            TOKENS,
            INBOX,
            AGENTS,
        ] {
            let (from, to) = (self.inner.db.tree(name)?, dest.inner.db.tree(name)?);
            let mut batch = Batch::default();
            let mut pending = 0;
            let mut copied = 0u64;
            for item in from.iter() {
                let (key, value) = item?;
                batch.insert(key, value);
                pending += 1;
                copied += 1;
                if pending == BATCH {
                    to.apply_batch(std::mem::take(&mut batch))?;
                    pending = 0;
                }
            }
            if pending > 0 {
                to.apply_batch(batch)?;
            }
            report.trees.push((name, copied));
        }
        dest.flush()?;
        tracing::info!(
            entries = report.entries(),
            from = self.backend_name(),
            to = dest.backend_name(),
            "store copied"
        );
        Ok(report)
    }
}
