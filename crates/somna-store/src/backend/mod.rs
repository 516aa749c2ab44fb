//! The backend boundary: where the store's bytes live. Everything above it — keys, the codec,
//! covers and the archive/live views, write sets, the index, the invariant checks — is shared;
//! only the IO below it is per backend.
//!
//! A backend offers ordered byte-keyed trees ([`Tree`]: point reads, forward and backward range
//! scans, unconditional batches on one tree) and ONE atomic operation across trees,
//! [`Db::apply`] of a [`WriteSet`](crate::store::WriteSet) whose removals are checked against the
//! bytes the writer read (so a write set built from a stale read aborts with a `Conflict` instead
//! of doing damage).
//!
//! - `sled.rs`: the embedded default, one sled database (the only code naming sled's API).
//! - `postgres.rs`: one table per tree in a Postgres schema (the only code naming the Postgres
//!   client).
//!
//! Values cross the boundary as [`Bytes`], a cheap reference-counted buffer.

pub(crate) mod postgres;
pub(crate) mod sled;

use std::ops::{Bound, RangeBounds};

use crate::error::Result;
use crate::store::WriteSet;

pub(crate) use self::postgres::{Fence, Refusal};
pub(crate) use self::sled::Bytes;

/// A database: the trees of a store and the atomic write across them.
pub(crate) enum Db {
    /// One sled database.
    Sled(self::sled::SledDb),
    /// One Postgres schema.
    Postgres(self::postgres::PgDb),
}

impl Db {
    /// The tree named `name` (one of [`crate::store::tree_names`]).
    pub(crate) fn tree(&self, name: &'static str) -> Result<Tree> {
        match self {
            Db::Sled(db) => Ok(Tree::Sled(db.tree(name)?)),
            Db::Postgres(db) => Ok(Tree::Postgres(db.tree(name)?)),
        }
    }

    /// Applies `writes` in order, in one transaction across the trees, if `fence` holds (a
    /// cluster node's lease; only a Postgres store opened as a cluster node passes one). On sled
    /// an append set ([`WriteSet::appends`]) and a set of one write apply without a transaction.
    /// `Ok(Err(refusal))`: the transaction aborted and nothing changed.
    pub(crate) fn apply(
        &self,
        trees: &crate::store::Trees,
        writes: &WriteSet,
        fence: Option<Fence>,
    ) -> Result<std::result::Result<(), Refusal>> {
        match self {
            Db::Sled(db) if writes.is_appends() || writes.writes().len() == 1 => {
                Ok(db.apply_in_order(trees, writes)?.map_err(Refusal::Conflict))
            }
            Db::Sled(db) => Ok(db.apply(trees, writes)?.map_err(Refusal::Conflict)),
            Db::Postgres(db) => db.apply(writes, fence),
        }
    }

    /// The Postgres backend, for what only it offers (the cluster tables).
    pub(crate) fn postgres(&self) -> Option<&self::postgres::PgDb> {
        match self {
            Db::Postgres(db) => Some(db),
            Db::Sled(_) => None,
        }
    }

    /// Makes every write so far durable; returns the bytes written when the backend knows.
    pub(crate) fn flush(&self) -> Result<usize> {
        match self {
            Db::Sled(db) => db.flush(),
            // A Postgres commit is durable when it returns.
            Db::Postgres(_) => Ok(0),
        }
    }

    /// The database's size on disk, in bytes.
    pub(crate) fn size_on_disk(&self) -> Result<u64> {
        match self {
            Db::Sled(db) => db.size_on_disk(),
            Db::Postgres(db) => db.size_on_disk(),
        }
    }

    /// True when the database held data when it was opened.
    pub(crate) fn was_recovered(&self) -> bool {
        match self {
            Db::Sled(db) => db.was_recovered(),
            Db::Postgres(db) => db.was_recovered(),
        }
    }

    /// The backend's name, as configured (`sled`, `postgres`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Db::Sled(_) => "sled",
            Db::Postgres(_) => "postgres",
        }
    }
}

/// One ordered tree of byte keys and values.
#[derive(Clone)]
pub(crate) enum Tree {
    /// A sled tree.
    Sled(::sled::Tree),
    /// A Postgres table.
    Postgres(self::postgres::PgTree),
}

/// Key bounds of a scan, owned.
pub(crate) type KeyBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

fn owned_bounds(range: impl RangeBounds<Vec<u8>>) -> KeyBounds {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

impl Tree {
    /// The value of `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self {
            Tree::Sled(t) => Ok(t.get(key)?),
            Tree::Postgres(t) => t.get(key),
        }
    }

    /// The entries with keys in `range`, in key order (and backwards with `.rev()`), read lazily.
    pub(crate) fn range(&self, range: impl RangeBounds<Vec<u8>>) -> Iter {
        let bounds = owned_bounds(range);
        match self {
            Tree::Sled(t) => Iter::Sled(t.range(bounds)),
            Tree::Postgres(t) => Iter::Postgres(t.range(bounds)),
        }
    }

    /// The entries whose keys start with `prefix`, in key order.
    pub(crate) fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        match self {
            Tree::Sled(t) => Iter::Sled(t.scan_prefix(prefix)),
            Tree::Postgres(t) => Iter::Postgres(t.scan_prefix(prefix.as_ref())),
        }
    }

    /// The values of `keys`, in their order: on Postgres one statement for all of them (a point
    /// read each would be a round trip each), on sled a point read each.
    pub(crate) fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        match self {
            Tree::Sled(t) => keys.iter().map(|k| Ok(t.get(k)?)).collect(),
            Tree::Postgres(t) => t.get_many(keys),
        }
    }

    /// True when `key` has a value.
    pub(crate) fn contains_key(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Every entry, in key order.
    pub(crate) fn iter(&self) -> Iter {
        self.range(..)
    }

    /// Applies `batch` atomically to this tree alone (no checks: the caller holds whatever lock
    /// makes its content current).
    pub(crate) fn apply_batch(&self, batch: Batch) -> Result<()> {
        match self {
            Tree::Sled(t) => {
                let mut b = ::sled::Batch::default();
                for (key, value) in batch.ops {
                    match value {
                        Some(v) => b.insert(key, v),
                        None => b.remove(key),
                    }
                }
                Ok(t.apply_batch(b)?)
            }
            Tree::Postgres(t) => t.apply_batch(batch),
        }
    }
}

impl Tree {
    /// Applies `batch` and sets `key` from `old` (`None`: absent) to `new`, atomically, if `key`
    /// still holds `old`; `Ok(false)`, with nothing written, when another writer changed it first.
    /// Derived data that any node may bring up to date (the search index) is written this way:
    /// two writers racing from the same watermark cannot both commit.
    pub(crate) fn apply_batch_swapping(
        &self,
        key: &[u8],
        old: Option<&[u8]>,
        new: &[u8],
        batch: Batch,
    ) -> Result<bool> {
        match self {
            Tree::Sled(t) => {
                use ::sled::transaction::{ConflictableTransactionError, TransactionError};
                let outcome = t.transaction(|tx| {
                    if tx.get(key)?.as_deref() != old {
                        return Err(ConflictableTransactionError::Abort(()));
                    }
                    for (k, v) in &batch.ops {
                        match v {
                            Some(v) => tx.insert(k.as_slice(), v.as_slice())?,
                            None => tx.remove(k.as_slice())?,
                        };
                    }
                    tx.insert(key, new)?;
                    Ok(())
                });
                match outcome {
                    Ok(()) => Ok(true),
                    Err(TransactionError::Abort(())) => Ok(false),
                    Err(TransactionError::Storage(e)) => Err(e.into()),
                }
            }
            Tree::Postgres(t) => t.apply_batch_swapping(key, old, new, batch),
        }
    }
}

/// Unconditional writes to one tree, applied together by [`Tree::apply_batch`].
#[derive(Default)]
pub(crate) struct Batch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.ops
            .push((key.as_ref().to_vec(), Some(value.as_ref().to_vec())));
    }

    /// Removes `key`.
    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        self.ops.push((key.as_ref().to_vec(), None));
    }
}

/// A lazy scan of a tree.
pub(crate) enum Iter {
    /// A sled scan.
    Sled(::sled::Iter),
    /// A paged Postgres scan.
    Postgres(self::postgres::PgIter),
}

impl Iterator for Iter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(it) => it.next().map(|r| r.map_err(Into::into)),
            Iter::Postgres(it) => it.next(),
        }
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(it) => it.next_back().map(|r| r.map_err(Into::into)),
            Iter::Postgres(it) => it.next_back(),
        }
    }
}
