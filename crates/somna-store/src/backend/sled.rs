//! The sled backend: one sled database, one sled tree per store tree, [`SledDb::apply`] as one
//! sled transaction across them, and [`SledDb::apply_in_order`] for appends and single writes.
//!
//! Every sled 0.34 transaction (and `apply_batch`) takes one process-wide write lock, and once any
//! transaction has run, every read and write of every tree takes it shared: under load the
//! appends of a turn (the input, the reply), each a transaction, queued on that lock and held the
//! Arbiters and the readers behind them. Appends therefore skip the transaction: their writes
//! (the messages, then the agent's record) are applied one by one, in order, taking the lock only
//! shared. sled recovers a prefix of its log after a crash (it never recovers a write whose
//! predecessor was lost), so a record that was recovered has its messages; the one thing a crash
//! can leave is messages whose record update was lost, which `Store::recover_appends` adds back
//! to the record when the database opens — unless the last close left its clean-close mark
//! (one seek per agent saved: 0.5 s at 100,000 agents). A write set of one write (a record's
//! update, an inbox entry) needs no transaction either: sled applies each write atomically.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use crate::error::{Result, StorageError, StorageErrorKind, StoreError};
use crate::keys;
use crate::store::{Conflict, Op, Trees, WriteSet};

use super::Tree;

/// The byte buffer values cross the boundary in: sled's own, so the sled backend copies nothing.
pub(crate) type Bytes = sled::IVec;

/// How long [`SledDb::open`] waits for sled's file lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The key, in sled's default tree, of the mark a clean close leaves: every append's record was
/// written, so the next open need not look for appends a crash left uncounted.
const APPENDS_RECORDED: &[u8] = b"somna/appends-recorded";

/// One sled database.
pub(crate) struct SledDb {
    db: sled::Db,
    /// Whether dropping the database leaves the clean-close mark ([`SledDb::mark_on_close`]).
    mark_on_close: AtomicBool,
}

impl SledDb {
    /// Opens (or creates) the database in the directory `path`, flushing every `flush_every` and
    /// caching at most `cache_bytes` of pages.
    ///
    /// A process killed while sled 0.34 writes its recovery snapshot leaves a half-written
    /// `snap.*.generating` file that sled then reads as corruption and refuses to open (sled lists
    /// snapshot files by prefix and skips only an older temporary suffix). Such a file is never the
    /// valid snapshot: sled renames it only after writing and syncing it whole. So when opening
    /// fails with corruption and such files exist, they are removed (with a warning) and the open
    /// is retried once. A database that is open elsewhere fails earlier, on sled's file lock.
    pub(crate) fn open(path: &Path, flush_every: Duration, cache_bytes: u64) -> Result<SledDb> {
        let flush_ms = u64::try_from(flush_every.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(cache_bytes)
            .flush_every_ms(Some(flush_ms));
        let db = match open_waiting_for_lock(&config) {
            Ok(db) => db,
            Err(e @ sled::Error::Corruption { .. }) => {
                let removed = remove_abandoned_snapshots(path)?;
                if removed.is_empty() {
                    return Err(e.into());
                }
                tracing::warn!(
                    path = %path.display(),
                    files = ?removed,
                    "removed half-written sled snapshot files left by a killed process; retrying the open"
                );
                open_waiting_for_lock(&config)?
            }
            Err(e) => return Err(e.into()),
        };
        tracing::debug!(path = %path.display(), recovered = db.was_recovered(), "sled store opened");
        Ok(SledDb {
            db,
            mark_on_close: AtomicBool::new(false),
        })
    }

    /// A database in memory-backed temporary files, deleted when dropped.
    pub(crate) fn temporary() -> Result<SledDb> {
        Ok(SledDb {
            db: sled::Config::new().temporary(true).open()?,
            mark_on_close: AtomicBool::new(false),
        })
    }

    /// Takes the clean-close mark: `true` when the last process to open the database closed it
    /// after its last append, so every agent's record counts its messages. Removing it before
    /// any append is what makes it safe: sled recovers a prefix of its writes, so after a crash
    /// the mark is either gone or was recovered with nothing after it.
    pub(crate) fn take_close_mark(&self) -> Result<bool> {
        Ok(self.db.remove(APPENDS_RECORDED)?.is_some())
    }

    /// Makes dropping the database leave the clean-close mark (after the records were checked).
    pub(crate) fn mark_on_close(&self) {
        self.mark_on_close.store(true, Ordering::Release);
    }

    pub(crate) fn tree(&self, name: &'static str) -> Result<sled::Tree> {
        Ok(self.db.open_tree(name)?)
    }

    pub(crate) fn flush(&self) -> Result<usize> {
        Ok(self.db.flush()?)
    }

    pub(crate) fn size_on_disk(&self) -> Result<u64> {
        Ok(self.db.size_on_disk()?)
    }

    pub(crate) fn was_recovered(&self) -> bool {
        self.db.was_recovered()
    }

    /// `writes` one by one, in order, without a transaction (see the module's doc): for an append
    /// set, and for a set of one write, which sled applies atomically alone. A create is a
    /// compare-and-swap from absent, a take one from the value read to absent; one that fails
    /// stops there with a conflict, the writes before it applied.
    pub(crate) fn apply_in_order(
        &self,
        trees: &Trees,
        writes: &WriteSet,
    ) -> Result<std::result::Result<(), Conflict>> {
        for w in writes.writes() {
            let tree = sled_tree(trees.get(w.tree))?;
            let conflict = |what: &str| {
                Ok(Err(Conflict {
                    seq: w.seq,
                    reason: format!("{} key {} {what}", w.tree.name(), keys::render(&w.key)),
                }))
            };
            match &w.op {
                Op::Put(value) => {
                    tree.insert(w.key.clone(), value.clone())?;
                }
                Op::Create(value) => {
                    let swapped =
                        tree.compare_and_swap(&w.key, None::<&[u8]>, Some(value.clone()))?;
                    if swapped.is_err() {
                        return conflict("is already taken");
                    }
                }
                Op::Take(expect) => {
                    if let Err(e) = tree.compare_and_swap(&w.key, Some(expect), None::<&[u8]>)? {
                        return conflict(if e.current.is_some() {
                            "changed since it was read"
                        } else {
                            "is gone"
                        });
                    }
                }
                Op::Delete => {
                    tree.remove(&w.key)?;
                }
            }
        }
        Ok(Ok(()))
    }

    /// `writes` in one sled transaction across the nine transactional trees.
    pub(crate) fn apply(
        &self,
        trees: &Trees,
        writes: &WriteSet,
    ) -> Result<std::result::Result<(), Conflict>> {
        let result = (
            sled_tree(&trees.agents)?,
            sled_tree(&trees.history)?,
            sled_tree(&trees.archive)?,
            sled_tree(&trees.journal)?,
            sled_tree(&trees.journal_by_source)?,
            sled_tree(&trees.memory)?,
            sled_tree(&trees.events)?,
            sled_tree(&trees.undo)?,
            sled_tree(&trees.inbox)?,
        )
            .transaction(
                |(agents, history, archive, journal, by_source, memory, events, undo, inbox)| {
                    let views = [
                        agents, history, archive, journal, by_source, memory, events, undo, inbox,
                    ];
                    for w in writes.writes() {
                        let tree = views[w.tree as usize];
                        let abort = |reason: String| {
                            Err(ConflictableTransactionError::Abort(Conflict {
                                seq: w.seq,
                                reason,
                            }))
                        };
                        match &w.op {
                            Op::Put(value) => {
                                tree.insert(w.key.clone(), value.clone())?;
                            }
                            Op::Create(value) => {
                                if tree.insert(w.key.clone(), value.clone())?.is_some() {
                                    return abort(format!(
                                        "{} key {} is already taken",
                                        w.tree.name(),
                                        keys::render(&w.key)
                                    ));
                                }
                            }
                            Op::Take(expect) => match tree.remove(w.key.clone())? {
                                Some(old) if old == *expect => {}
                                found => {
                                    let what = if found.is_some() {
                                        "changed since it was read"
                                    } else {
                                        "is gone"
                                    };
                                    return abort(format!(
                                        "{} key {} {what}",
                                        w.tree.name(),
                                        keys::render(&w.key)
                                    ));
                                }
                            },
                            Op::Delete => {
                                tree.remove(w.key.clone())?;
                            }
                        }
                    }
                    Ok(())
                },
            );
        match result {
            Ok(()) => Ok(Ok(())),
            Err(TransactionError::Abort(conflict)) => Ok(Err(conflict)),
            Err(TransactionError::Storage(e)) => Err(e.into()),
        }
    }
}

impl Drop for SledDb {
    /// Leaves the clean-close mark when asked to, and flushes it: this is the last handle, so no
    /// append can follow it.
    fn drop(&mut self) {
        if self.mark_on_close.load(Ordering::Acquire) {
            let marked = self
                .db
                .insert(APPENDS_RECORDED, &[])
                .and_then(|_| self.db.flush());
            if let Err(e) = marked {
                tracing::warn!(error = %e, "could not mark the sled store closed cleanly; the next open checks every agent's record");
            }
        }
    }
}

/// The sled tree behind `t`.
fn sled_tree(t: &Tree) -> Result<&sled::Tree> {
    match t {
        Tree::Sled(t) => Ok(t),
        Tree::Postgres(_) => Err(StoreError::Storage(StorageError::new(
            StorageErrorKind::Other,
            std::io::Error::other("a sled database was given trees of another backend"),
        ))),
    }
}

/// Opens the database, retrying while sled's file lock is still held. sled releases the lock only
/// when its last background IO task of a dropped handle ends, which can be a moment after the drop
/// returned, so an immediate reopen in the same process may find it held. A database held by
/// another process still fails, after [`LOCK_WAIT`].
fn open_waiting_for_lock(config: &sled::Config) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match config.open() {
            // sled reports a held lock only as an `Io` error with this message.
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Removes `snap.*.generating` files from the database directory; returns their names.
fn remove_abandoned_snapshots(dir: &Path) -> Result<Vec<String>> {
    let io = |e: std::io::Error| StoreError::from(sled::Error::Io(e));
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(io(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path()).map_err(io)?;
            removed.push(name);
        }
    }
    Ok(removed)
}

impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> Self {
        let kind = match &e {
            sled::Error::Corruption { .. } => StorageErrorKind::Corruption,
            sled::Error::Io(io) if io.to_string().starts_with("could not acquire lock") => {
                StorageErrorKind::Locked
            }
            _ => StorageErrorKind::Other,
        };
        StoreError::Storage(StorageError::new(kind, e))
    }
}
