//! The Postgres backend: one table per store tree, `(key bytea PRIMARY KEY, value bytea NOT NULL)`,
//! in one Postgres schema; [`PgDb::apply`] as one Postgres transaction (the only code naming the
//! Postgres client, tokio-postgres with a deadpool connection pool).
//!
//! The store's API is synchronous and is called from inside tokio and actix runtimes, so the
//! backend owns a small multi-thread tokio runtime: every call spawns its future there and waits
//! for the answer on a std channel ([`Shared::run`]). It never calls `block_on` on the caller's
//! thread (which panics inside a runtime).
//!
//! `bytea` compares bytewise (memcmp, then length), exactly like sled's keys, so the key layout,
//! prefix scans and the archive/live views carry over unchanged.
//!
//! A write set is applied in ONE transaction, pipelined: `BEGIN`, then one statement per group of
//! writes with the same (tree, operation) whose keys are all distinct (`unnest` of two `bytea`
//! arrays), then `COMMIT` (or `ROLLBACK` on a conflict): two round trips whatever its size. Writes
//! are grouped by *layer*: a write's layer is one more than the layer of the previous write of the
//! same (tree, key), so the writes of each key keep their order and writes to different keys (which
//! commute) share statements. Each write's outcome is therefore the one it has when the writes run
//! one by one, and the conflict reported is the first failing write in order, as with sled.
//!
//! Here: the tables, the tokio bridge ([`Shared::run`]) and the error type. By concept:
//! [`open`] (connection settings, the schema's lock, migrations), [`reads`] (point, multi-key
//! and paged range reads), [`writes`] (the pipelined transaction, batches), [`cluster`] (shard
//! leases and fencing) and [`tls`] (`sslmode`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{Result, StorageError, StorageErrorKind, StoreError};
use crate::keys;
use crate::store::{Conflict, Op, WriteSet, tree_names};

use super::{Bytes, KeyBounds};

mod cluster;
mod open;
mod reads;
mod tls;
mod writes;

pub(crate) use cluster::Fence;
pub(crate) use open::temporary_schema;
pub(crate) use reads::{PgIter, PgTree};
pub(crate) use writes::Refusal;

/// The store's tables, in [`crate::store::TreeId`] order (then `terms`, `vectors` and `tokens`,
/// which no write set touches).
const TABLES: [&str; 12] = [
    tree_names::AGENTS,
    tree_names::HISTORY,
    tree_names::ARCHIVE,
    tree_names::JOURNAL,
    tree_names::JOURNAL_BY_SOURCE,
    tree_names::MEMORY,
    tree_names::EVENTS,
    tree_names::UNDO,
    tree_names::INBOX,
    tree_names::TERMS,
    tree_names::VECTORS,
    tree_names::TOKENS,
];

/// How long dropping a temporary store waits for its schema to be dropped.
const DROP_WAIT: Duration = Duration::from_secs(10);

/// One Postgres schema holding a store.
pub(crate) struct PgDb {
    shared: Arc<Shared>,
}

/// What the database handle, its trees and their scans share. Futures spawned on the runtime
/// never hold it (they hold pool clones), so it is always dropped on a caller's thread.
struct Shared {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    /// The session (outside the pool) holding the schema's advisory lock while the store is open
    /// (shared by the nodes of a cluster, whose write sets are fenced besides; see `cluster`).
    holder: Option<tokio_postgres::Client>,
    /// The time limit of a cluster statement, in ms (see `cluster`).
    cluster_timeout_ms: AtomicU64,
    /// Whether a fenced write set checks its lease in the database (always, but for the
    /// negative control that shows the fencing tests fail without it; see `cluster`).
    lease_check: std::sync::atomic::AtomicBool,
    /// How long a write set may take before the store gives up on it (the sessions'
    /// `statement_timeout` and a grace; `None`: no limit, `statement_timeout=0`).
    write_limit: Option<Duration>,
    /// A cluster node: its writes are fenced by shard leases, so losing the shared lock's session
    /// (a cut connection) does not stop it writing (see `run_writes`).
    fenced: bool,
    /// The schema, unquoted (validated: lowercase letters, digits, `_`).
    schema: String,
    /// `host:port/database` for messages (never the password).
    target: String,
    /// The quoted `schema.table` of each of [`TABLES`].
    tables: Vec<String>,
    recovered: bool,
    /// Drop the schema with the last handle (temporary stores of tests).
    drop_schema: bool,
}

/// A backend failure: what was being done (naming host, port and database, never the password)
/// and the client's error with its causes — all in the message, once: the client's own message
/// is often just `db error`, the server's reason (`canceling statement due to statement timeout`)
/// is its cause. It has no `source`, so that `{e:#}` does not print the causes twice.
#[derive(Debug)]
struct PgError {
    context: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.context)?;
        let mut cause = self
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static));
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

fn pg_error(
    context: impl Into<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
) -> StoreError {
    StoreError::Storage(StorageError::new(
        StorageErrorKind::Other,
        PgError {
            context: context.into(),
            source,
        },
    ))
}

/// Maps a client error, naming where it happened.
fn db_err(target: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |e| pg_error(format!("Postgres at {target}"), Some(Box::new(e)))
}

/// A pooled connection.
async fn connect(pool: &Pool, target: &str) -> Result<Object> {
    pool.get().await.map_err(|e| {
        pg_error(
            format!("cannot connect to Postgres at {target}"),
            Some(Box::new(e)),
        )
    })
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

impl Shared {
    /// Runs `fut` on the backend's runtime and waits for its answer on this thread.
    fn run<T, F>(&self, fut: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(pg_error("the Postgres backend is closed", None));
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            // The caller waits for this answer; it is gone only if it panicked.
            let _ = tx.send(fut.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(pg_error(
                "the Postgres backend's task ended without an answer (it panicked)",
                None,
            ))
        })
    }

    fn table(&self, name: &str) -> Result<usize> {
        TABLES.iter().position(|t| *t == name).ok_or_else(|| {
            pg_error(
                format!("the Postgres backend has no table for tree {name}"),
                None,
            )
        })
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if self.drop_schema {
            let (pool, target) = (self.pool.clone(), self.target.clone());
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", quote(&self.schema));
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            runtime.spawn(async move {
                let result = async {
                    let client = connect(&pool, &target).await?;
                    client.batch_execute(&sql).await.map_err(db_err(&target))
                }
                .await;
                let _ = tx.send(result);
            });
            match rx.recv_timeout(DROP_WAIT) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(schema = %self.schema, error = %e, "cannot drop a temporary store's schema")
                }
                Err(_) => {
                    tracing::warn!(schema = %self.schema, "dropping a temporary store's schema timed out")
                }
            }
        }
        self.pool.close();
        // Ends the session, which releases the schema's lock.
        self.holder = None;
        // Allowed inside an async context (a plain drop of a runtime is not).
        runtime.shutdown_background();
    }
}

impl PgDb {
    pub(crate) fn tree(&self, name: &'static str) -> Result<PgTree> {
        let table = self.shared.table(name)?;
        Ok(PgTree {
            shared: Arc::clone(&self.shared),
            table,
        })
    }

    pub(crate) fn was_recovered(&self) -> bool {
        self.shared.recovered
    }

    pub(crate) fn size_on_disk(&self) -> Result<u64> {
        let (pool, target, schema) = (
            self.shared.pool.clone(),
            self.shared.target.clone(),
            self.shared.schema.clone(),
        );
        self.shared.run(async move {
            let client = connect(&pool, &target).await?;
            let row = client
                .query_one(
                    "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint \
                     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relkind = 'r'",
                    &[&schema],
                )
                .await
                .map_err(db_err(&target))?;
            let size: i64 = row.get(0);
            Ok(u64::try_from(size).unwrap_or(0))
        })
    }
}

/// The backend against sled as the oracle: the same write sets (conflicts included) and the same
/// scans must give the same answers. Skipped (with a line saying so) without `SOMNA_TEST_PG_URL`.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::print_stdout)]
mod tests {
    use std::ops::Bound;

    use crate::backend::{Batch, Tree};
    use crate::store::{Store, TreeId, WriteSet};

    #[test]
    fn statement_timeout_is_read_as_the_server_reads_it() {
        use std::time::Duration;
        let read = |options: &str| super::open::statement_timeout(options).unwrap();
        assert_eq!(read("-c search_path=x"), None);
        assert_eq!(
            read("-c statement_timeout=1500"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            read("-c statement_timeout=10s -c x=y"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            read("--statement_timeout=2min"),
            Some(Duration::from_secs(120))
        );
        assert_eq!(read("-c statement_timeout=0"), Some(Duration::ZERO));
        let e = super::open::statement_timeout("-c statement_timeout=soon").unwrap_err();
        assert!(e.to_string().contains("\"soon\""), "{e}");
    }

    fn stores() -> Option<(Store, Store)> {
        let url = somna_testkit::pg_url_or_skip()?;
        Some((
            Store::temporary().unwrap(),
            Store::temporary_postgres(&url).unwrap(),
        ))
    }

    /// xorshift64*: reproducible without a dependency.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    fn contents(tree: &Tree) -> Vec<(Vec<u8>, Vec<u8>)> {
        tree.iter()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn write_sets_match_sled_including_conflicts() {
        let Some((sled, pg)) = stores() else { return };
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let trees = [TreeId::History, TreeId::Archive];
        let tree_of = |s: &Store, t: TreeId| match t {
            TreeId::History => s.inner.trees.history.clone(),
            _ => s.inner.trees.archive.clone(),
        };
        let (mut committed, mut conflicts) = (0, 0);
        for round in 0..300 {
            let mut writes = WriteSet::default();
            for seq in 0..1 + rng.below(12) {
                let tree = trees[rng.below(2) as usize];
                let key = b"a\0k"
                    .iter()
                    .copied()
                    .chain([rng.below(6) as u8])
                    .collect();
                let value = vec![b'v', rng.below(3) as u8];
                match rng.below(5) {
                    0 => writes.put(tree, key, value),
                    1 | 2 => writes.create(tree, key, value, seq),
                    3 => {
                        // Mostly the value that is there now (so that long write sets can succeed).
                        let now = tree_of(&sled, tree).get(&key).unwrap();
                        let expect = match now {
                            Some(v) if rng.below(4) > 0 => v,
                            _ => value.into(),
                        };
                        writes.take(tree, key, expect, seq)
                    }
                    _ => writes.delete(tree, key),
                }
            }
            let a = sled.apply(&writes).unwrap();
            let b = pg.apply(&writes).unwrap();
            assert_eq!(a, b, "round {round}");
            if a.is_ok() {
                committed += 1;
            } else {
                conflicts += 1;
            }
            for t in trees {
                assert_eq!(
                    contents(&tree_of(&sled, t)),
                    contents(&tree_of(&pg, t)),
                    "round {round}, {t:?}"
                );
            }
        }
        println!("{committed} write sets committed, {conflicts} conflicts");
        assert!(committed > 30 && conflicts > 30, "{committed} {conflicts}");
    }

    /// A store whose lock session ended (killed here with `pg_terminate_backend`) no longer
    /// writes, and another store can open the schema.
    #[test]
    fn a_store_that_lost_its_lock_stops_writing() {
        let Some(url) = somna_testkit::pg_url_or_skip() else {
            return;
        };
        let store = Store::temporary_postgres(&url).unwrap();
        let crate::backend::Db::Postgres(db) = &store.inner.db else {
            panic!("not postgres")
        };
        let shared = &db.shared;
        let (pool, target, key) = (
            shared.pool.clone(),
            shared.target.clone(),
            format!("somna-store:{}", shared.schema),
        );
        let terminated: i64 = shared
            .run(async move {
                let client = super::connect(&pool, &target).await?;
                let row = client
                    .query_one(
                        "SELECT count(pg_terminate_backend(l.pid)) \
                         FROM pg_locks l, (SELECT hashtextextended($1, 0) AS k) h \
                         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
                         AND l.classid = ((h.k >> 32) & 4294967295)::oid \
                         AND l.objid = (h.k & 4294967295)::oid",
                        &[&key],
                    )
                    .await
                    .map_err(super::db_err(&target))?;
                Ok(row.get(0))
            })
            .unwrap();
        assert_eq!(terminated, 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !shared.holder.as_ref().unwrap().is_closed() {
            assert!(
                std::time::Instant::now() < deadline,
                "the session did not end"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut writes = WriteSet::default();
        writes.put(TreeId::History, b"k".to_vec(), b"v".to_vec());
        let err = store.apply(&writes).unwrap_err();
        match &err {
            crate::error::StoreError::Storage(e) => assert!(e.is_locked(), "{err}"),
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("ended"), "{err}");
        let other = Store::open_postgres(
            &url,
            crate::store::PostgresOptions {
                schema: shared.schema.clone(),
                pool_size: 1,
            },
        )
        .unwrap();
        other.apply(&writes).unwrap().unwrap();
    }

    #[test]
    fn scans_match_sled_in_both_directions_across_pages() {
        let Some((sled, pg)) = stores() else { return };
        let key = |i: u32| [b"p".as_slice(), &(i * 3).to_be_bytes()].concat();
        for store in [&sled, &pg] {
            let mut batch = Batch::default();
            for i in 0..700u32 {
                batch.insert(key(i), i.to_le_bytes());
            }
            batch.insert(b"q\xff\xff", b"after");
            batch.insert(b"p", b"prefix itself");
            store.inner.trees.terms.apply_batch(batch).unwrap();
        }
        let (s, p) = (&sled.inner.trees.terms, &pg.inner.trees.terms);
        let bounds = |lo: u32, hi: u32| {
            [
                (Bound::Unbounded, Bound::Unbounded),
                (Bound::Included(key(lo)), Bound::Excluded(key(hi))),
                (Bound::Excluded(key(lo)), Bound::Included(key(hi))),
                (Bound::Included(key(lo)), Bound::Unbounded),
                (Bound::Unbounded, Bound::Excluded(key(hi))),
                // Between stored keys.
                (
                    Bound::Included([key(lo), vec![0]].concat()),
                    Bound::Included([key(hi), vec![0]].concat()),
                ),
                (Bound::Included(key(hi)), Bound::Excluded(key(lo))),
            ]
        };
        // `take` turns a scan that never ends into a failure instead of a hang.
        let collect = |it: super::super::Iter| -> Vec<Vec<u8>> {
            it.take(5_000).map(|r| r.unwrap().0.to_vec()).collect()
        };
        for (lo, hi) in [(0, 699), (10, 20), (5, 600), (300, 301), (0, 0)] {
            for range in bounds(lo, hi) {
                let forward = collect(s.range(range.clone()));
                assert_eq!(forward, collect(p.range(range.clone())), "{range:?}");
                let backward = |tree: &super::super::Tree| -> Vec<Vec<u8>> {
                    let keys = tree.range(range.clone()).rev().take(5_000);
                    keys.map(|r| r.unwrap().0.to_vec()).collect()
                };
                assert_eq!(backward(s), backward(p), "{range:?}");
                // Alternating ends (in runs of 1..=70) meet without losing or repeating a key.
                for run in [1, 7, 33, 70] {
                    let mut it = p.range(range.clone());
                    let (mut front, mut back) = (Vec::new(), Vec::new());
                    'outer: for _ in 0..5_000 {
                        for _ in 0..run {
                            match it.next() {
                                Some(r) => front.push(r.unwrap().0.to_vec()),
                                None => break 'outer,
                            }
                        }
                        for _ in 0..run {
                            match it.next_back() {
                                Some(r) => back.push(r.unwrap().0.to_vec()),
                                None => break 'outer,
                            }
                        }
                    }
                    assert!(it.next().is_none() && it.next_back().is_none());
                    back.reverse();
                    front.extend(back);
                    assert_eq!(front, forward, "{range:?}, runs of {run}");
                }
            }
        }
        for prefix in [b"p".as_slice(), b"p\0\0\x01", b"q\xff", b"", b"\xff"] {
            assert_eq!(
                collect(s.scan_prefix(prefix)),
                collect(p.scan_prefix(prefix)),
                "{prefix:?}"
            );
        }
        assert_eq!(s.get(&key(5)).unwrap(), p.get(&key(5)).unwrap());
        assert_eq!(p.get(b"nope").unwrap(), None);
    }
}
