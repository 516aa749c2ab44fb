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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{Result, StorageError, StorageErrorKind, StoreError};
use crate::keys;
use crate::store::{Conflict, Op, WriteSet, tree_names};

use super::{Bytes, KeyBounds};

mod cluster;
mod tls;

pub(crate) use cluster::Fence;

/// The store's tables, in [`crate::store::TreeId`] order (then `terms` and `vectors`, which no
/// write set touches).
const TABLES: [&str; 11] = [
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
];

/// The schema migrations, applied in order at open; `{schema}` is replaced by the quoted schema.
/// Never edit one that shipped: add the next version.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE {schema}.agents (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.history (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.archive (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.journal (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.journal_by_source (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.memory (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.events (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.undo (key bytea PRIMARY KEY, value bytea NOT NULL);
     CREATE TABLE {schema}.terms (key bytea PRIMARY KEY, value bytea NOT NULL);",
    ),
    (
        2,
        "CREATE TABLE {schema}.cluster_nodes (
             node text PRIMARY KEY,
             started_at timestamptz NOT NULL,
             heartbeat_at timestamptz NOT NULL);
         CREATE TABLE {schema}.shard_leases (
             shard integer PRIMARY KEY,
             owner text,
             epoch bigint NOT NULL,
             lease_until timestamptz NOT NULL);",
    ),
    (
        3,
        "CREATE TABLE {schema}.inbox (key bytea PRIMARY KEY, value bytea NOT NULL);",
    ),
    (
        4,
        "CREATE TABLE {schema}.vectors (key bytea PRIMARY KEY, value bytea NOT NULL);",
    ),
    (
        5,
        // The store's identity: one random id, made once with the schema, that every node of a
        // cluster on this store reads (its NATS subjects are named by it).
        "CREATE TABLE {schema}.store_identity (
             one boolean PRIMARY KEY DEFAULT true CHECK (one),
             id text NOT NULL);
         INSERT INTO {schema}.store_identity (id) VALUES (gen_random_uuid()::text);",
    ),
];

/// The first page of a scan; each further page doubles, up to [`MAX_PAGE`].
const FIRST_PAGE: i64 = 32;
/// The largest page of a scan.
const MAX_PAGE: i64 = 256;

/// The `statement_timeout` of the pool's sessions when the URL's `options` set none: a statement
/// (a write set's, a read's) that waits longer — on a lock, a stalled server — is cancelled by
/// the server instead of holding an agent's job.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How much longer than `statement_timeout` a write set may go unanswered before the store gives
/// up on it (the server cancels its own statements; this is for a server that cannot answer).
const WRITE_GRACE: Duration = Duration::from_secs(5);

/// The `statement_timeout` a connection's `options` set (`-c statement_timeout=10s`), as the
/// server reads it: a number of milliseconds, or one with a unit (`ms`, `s`, `min`, `h`, `d`);
/// `None` when they set none.
fn statement_timeout(options: &str) -> Result<Option<Duration>> {
    let Some(at) = options.rfind("statement_timeout=") else {
        return Ok(None);
    };
    let value = options[at + "statement_timeout=".len()..]
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches('\'');
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &value[digits.len()..];
    let bad = || StoreError::Invalid {
        what: "postgres URL",
        reason: format!(
            "options: statement_timeout {value:?} is not a number of ms or one with a unit (ms, s, min, h, d)"
        ),
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    let ms = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    Ok(Some(Duration::from_millis(n.saturating_mul(ms))))
}

/// How long [`PgDb::open`] waits for another session's hold on the schema to end (a killed
/// process's session ends once the server has finished its last statement).
const LOCK_WAIT: Duration = Duration::from_secs(5);

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

/// A schema name the store accepts: what Postgres takes unquoted, lowercase (so that `psql` users
/// can name it without quotes too).
fn valid_schema(schema: &str) -> bool {
    !schema.is_empty()
        && schema.len() <= 63
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit()
        && !schema.starts_with("pg_")
}

/// A unique schema name for a temporary store.
pub(crate) fn temporary_schema() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "somna_test_{}_{:x}_{}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
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
    /// Connects to `url`, creates `schema` and its tables if needed (migrations run inside a
    /// transaction holding an advisory lock, so concurrent opens are safe), and checks whether the
    /// tables hold data.
    ///
    /// With `cluster` (a cluster node, its statement timeout) the schema's lock is taken shared:
    /// several processes write it, each only the agents of the shards it leases, and every write
    /// set checks its lease. Its sessions are also ended by the server when they sit idle inside
    /// a transaction for longer than that timeout: a node paused mid-transaction (SIGSTOP, a
    /// stalled VM) would otherwise keep its lease rows locked (`FOR SHARE`), and no other node
    /// could take its shards over until it resumed.
    pub(crate) fn open(
        url: &str,
        schema: &str,
        pool_size: usize,
        drop_schema: bool,
        cluster: Option<Duration>,
    ) -> Result<PgDb> {
        let shared_schema = cluster.is_some();
        let invalid = |reason: String| StoreError::Invalid {
            what: "postgres options",
            reason,
        };
        if !valid_schema(schema) {
            return Err(invalid(format!(
                "schema {schema:?} must be 1 to 63 lowercase letters, digits or '_', not start with a digit or pg_"
            )));
        }
        if pool_size == 0 {
            return Err(invalid("pool_size must be above zero".to_string()));
        }
        let tls = tls::Settings::take(url)?;
        let mut config: tokio_postgres::Config = tls
            .rest
            .parse()
            .map_err(|e| pg_error("invalid Postgres URL", Some(Box::new(e))))?;
        let connector = tls.apply(&mut config)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        // Every connection of the pool says which schema it writes (see `hold_schema`: a
        // successor ends the leftover sessions of a killed writer); the lock session says it
        // holds the lock.
        config.application_name(session_name(
            if shared_schema { "somna-node" } else { "somna" },
            schema,
        ));
        let target = target_of(&config);
        let mut holder_config = config.clone();
        holder_config.application_name(session_name("somna-lock", schema));
        // Every statement of the pool's sessions ends within `statement_timeout` (the URL's
        // `options=-c statement_timeout=…`, else STATEMENT_TIMEOUT), and a write set the server
        // does not answer in time (a partition, a dead connection) fails after a grace.
        let mut extra = Vec::new();
        let statement_timeout = match config.get_options().map(statement_timeout).transpose()? {
            Some(Some(given)) => given,
            _ => {
                extra.push(format!(
                    "-c statement_timeout={}",
                    STATEMENT_TIMEOUT.as_millis()
                ));
                STATEMENT_TIMEOUT
            }
        };
        if let Some(limit) = cluster {
            let ms = limit.as_millis().max(1);
            extra.push(format!("-c idle_in_transaction_session_timeout={ms}"));
        }
        if !extra.is_empty() {
            let options = match config.get_options() {
                Some(given) => format!("{given} {}", extra.join(" ")),
                None => extra.join(" "),
            };
            config.options(&options);
        }
        let manager = Manager::from_config(
            config,
            connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| pg_error("cannot build the Postgres pool", Some(Box::new(e))))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("somna-postgres")
            .enable_all()
            .build()
            .map_err(|e| {
                pg_error(
                    "cannot start the Postgres backend's runtime",
                    Some(Box::new(e)),
                )
            })?;
        let quoted = quote(schema);
        let mut shared = Shared {
            runtime: Some(runtime),
            pool,
            holder: None,
            fenced: shared_schema,
            cluster_timeout_ms: AtomicU64::new(5_000),
            write_limit: (!statement_timeout.is_zero()).then(|| statement_timeout + WRITE_GRACE),
            lease_check: std::sync::atomic::AtomicBool::new(true),
            schema: schema.to_string(),
            target,
            tables: TABLES
                .iter()
                .map(|t| format!("{quoted}.{}", quote(t)))
                .collect(),
            recovered: false,
            drop_schema: false,
        };
        let (lock_target, lock_schema) = (shared.target.clone(), shared.schema.clone());
        shared.holder = Some(shared.run(async move {
            hold_schema(
                holder_config,
                connector,
                &lock_target,
                &lock_schema,
                shared_schema,
            )
            .await
        })?);
        let (pool, target, schema_name, tables) = (
            shared.pool.clone(),
            shared.target.clone(),
            shared.schema.clone(),
            shared.tables.clone(),
        );
        let recovered =
            shared.run(async move { migrate(&pool, &target, &schema_name, &tables).await })?;
        shared.recovered = recovered;
        shared.drop_schema = drop_schema;
        tracing::debug!(target = %shared.target, schema, recovered, "postgres store opened");
        Ok(PgDb {
            shared: Arc::new(shared),
        })
    }

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

    /// `writes` in one transaction (see the module's documentation).
    pub(crate) fn apply(
        &self,
        writes: &WriteSet,
        fence: Option<Fence>,
    ) -> Result<std::result::Result<(), Refusal>> {
        let owned: Vec<PgWrite> = writes
            .writes()
            .iter()
            .map(|w| {
                let (kind, value) = match &w.op {
                    Op::Put(v) => (Kind::Put, Some(v.clone())),
                    Op::Create(v) => (Kind::Create, Some(v.clone())),
                    Op::Take(v) => (Kind::Take, Some(v.clone())),
                    Op::Delete => (Kind::Delete, None),
                };
                PgWrite {
                    table: w.tree as usize,
                    key: w.key.clone(),
                    kind,
                    value,
                    seq: w.seq,
                }
            })
            .collect();
        self.shared.run_writes(owned, fence)
    }
}

/// `host:port/database (user u)` of a connection config, for messages.
fn target_of(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                tokio_postgres::config::Host::Tcp(h) => format!("{h}:{port}"),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(p) => format!("{}:{port}", p.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_string()
    } else {
        hosts.join(",")
    };
    format!(
        "{hosts}/{} (user {})",
        config.get_dbname().unwrap_or("(default)"),
        config.get_user().unwrap_or("(default)")
    )
}

/// Opens a session outside the pool and takes the schema's advisory lock in it (waiting up to
/// [`LOCK_WAIT`] for another holder): one process at a time writes a schema, as with sled's file
/// lock. Without it a killed writer's last COMMIT, still being processed by the server, could land
/// after its successor read the agent's record, and the successor's next write would overwrite it
/// with a stale one.
///
/// Cluster nodes (`shared`) take the same lock in shared mode: any number of nodes, but never
/// beside a store that is not a cluster node (its writes are not fenced). They do not end
/// leftover sessions: a dead node's late commit is refused by its lease's epoch instead.
async fn hold_schema(
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    target: &str,
    schema: &str,
    shared: bool,
) -> Result<tokio_postgres::Client> {
    let (client, connection) = config.connect(tls).await.map_err(|e| {
        pg_error(
            format!("cannot connect to Postgres at {target}"),
            Some(Box::new(e)),
        )
    })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the session holding a Postgres store's lock ended");
        }
    });
    let key = format!("somna-store:{schema}");
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        let sql = if shared {
            "SELECT pg_try_advisory_lock_shared(hashtextextended($1, 0))"
        } else {
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))"
        };
        let held: bool = client
            .query_one(sql, &[&key])
            .await
            .map_err(db_err(target))?
            .get(0);
        if held {
            if !shared {
                end_leftover_sessions(&client, target, schema).await?;
            }
            return Ok(client);
        }
        if tokio::time::Instant::now() >= deadline {
            let holder = if shared {
                "a process that is not a cluster node"
            } else {
                "another process (or cluster nodes)"
            };
            return Err(StoreError::Storage(StorageError::new(
                StorageErrorKind::Locked,
                PgError {
                    context: format!(
                        "Postgres schema {schema} at {target} is open in {holder} (waited {LOCK_WAIT:?} for its lock)"
                    ),
                    source: None,
                },
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `prefix:schema`, cut to Postgres's 63 bytes for `application_name`.
fn session_name(prefix: &str, schema: &str) -> String {
    let mut name = format!("{prefix}:{schema}");
    name.truncate(63);
    name
}

/// Ends the pool sessions of an earlier writer of `schema` and waits until they are gone. Called
/// with the schema's lock held, so such sessions belong to a process that died (or lost its lock
/// and stopped writing): a killed writer's last transaction may still be running on the server
/// after its lock session ended, and would otherwise commit after this store read the agents'
/// records, to be overwritten by the next write built from the stale read. Once the sessions are
/// gone their transactions are over, committed or rolled back.
async fn end_leftover_sessions(
    client: &tokio_postgres::Client,
    target: &str,
    schema: &str,
) -> Result<()> {
    let name = session_name("somna", schema);
    // Find them first, then end exactly those: a side effect in a WHERE clause could run on
    // rows the other conditions would have filtered out.
    let ended: Vec<i32> = client
        .query(
            "SELECT pid FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid() \
               AND datname = current_database()",
            &[&name],
        )
        .await
        .map_err(db_err(target))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if ended.is_empty() {
        return Ok(());
    }
    client
        .query(
            "SELECT pg_terminate_backend(pid) FROM unnest($1::int4[]) AS pid",
            &[&ended],
        )
        .await
        .map_err(db_err(target))?;
    tracing::warn!(
        schema,
        sessions = ended.len(),
        "ended the sessions an earlier writer of this schema left behind"
    );
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        let left: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&ended],
            )
            .await
            .map_err(db_err(target))?
            .get(0);
        if left == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StoreError::Storage(StorageError::new(
                StorageErrorKind::Locked,
                PgError {
                    context: format!(
                        "Postgres schema {schema} at {target}: {left} session(s) of an earlier writer did not end within {LOCK_WAIT:?}"
                    ),
                    source: None,
                },
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Creates the schema and applies the missing migrations, in one transaction holding the schema's
/// advisory lock; returns whether the tables held rows.
async fn migrate(pool: &Pool, target: &str, schema: &str, tables: &[String]) -> Result<bool> {
    let err = db_err(target);
    let mut client = connect(pool, target).await?;
    let tx = client.transaction().await.map_err(&err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&format!("somna-store-migrations:{schema}")],
    )
    .await
    .map_err(&err)?;
    let quoted = quote(schema);
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted};
         CREATE TABLE IF NOT EXISTS {quoted}.somna_migrations
             (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());"
    ))
    .await
    .map_err(&err)?;
    let applied: Vec<i32> = tx
        .query(
            &format!("SELECT version FROM {quoted}.somna_migrations ORDER BY version"),
            &[],
        )
        .await
        .map_err(&err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let latest = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(&newest) = applied.last()
        && newest > latest
    {
        return Err(pg_error(
            format!(
                "Postgres schema {schema} at {target} has migration {newest}; this build knows migrations up to {latest}"
            ),
            None,
        ));
    }
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(&sql.replace("{schema}", &quoted))
            .await
            .map_err(&err)?;
        tx.execute(
            &format!(
                "INSERT INTO {quoted}.somna_migrations (version, applied_at) VALUES ($1, now())"
            ),
            &[version],
        )
        .await
        .map_err(&err)?;
        tracing::info!(schema, version, "postgres store migration applied");
    }
    let any_rows = tables
        .iter()
        .map(|t| format!("EXISTS (SELECT 1 FROM {t})"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let recovered: bool = tx
        .query_one(&format!("SELECT {any_rows}"), &[])
        .await
        .map_err(&err)?
        .get(0);
    tx.commit().await.map_err(&err)?;
    Ok(recovered)
}

// --- trees ------------------------------------------------------------------------------------

/// One table.
#[derive(Clone)]
pub(crate) struct PgTree {
    shared: Arc<Shared>,
    /// Index into [`TABLES`].
    table: usize,
}

impl PgTree {
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let (pool, target) = (self.shared.pool.clone(), self.shared.target.clone());
        let sql = format!(
            "SELECT value FROM {} WHERE key = $1",
            self.shared.tables[self.table]
        );
        let key = key.to_vec();
        self.shared.run(async move {
            let client = connect(&pool, &target).await?;
            let statement = client.prepare_cached(&sql).await.map_err(db_err(&target))?;
            let row = client
                .query_opt(&statement, &[&key])
                .await
                .map_err(db_err(&target))?;
            Ok(row.map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
        })
    }

    /// The values of `keys`, in their order, from one `key = ANY($1)` statement.
    pub(crate) fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (pool, target) = (self.shared.pool.clone(), self.shared.target.clone());
        let sql = format!(
            "SELECT key, value FROM {} WHERE key = ANY($1)",
            self.shared.tables[self.table]
        );
        let wanted = keys.to_vec();
        let rows = self.shared.run(async move {
            let client = connect(&pool, &target).await?;
            let statement = client.prepare_cached(&sql).await.map_err(db_err(&target))?;
            let rows = client
                .query(&statement, &[&wanted])
                .await
                .map_err(db_err(&target))?;
            Ok(rows
                .iter()
                .map(|r| (r.get::<_, Vec<u8>>(0), Bytes::from(r.get::<_, &[u8]>(1))))
                .collect::<std::collections::HashMap<Vec<u8>, Bytes>>())
        })?;
        Ok(keys.iter().map(|k| rows.get(k).cloned()).collect())
    }

    pub(crate) fn range(&self, (lo, hi): KeyBounds) -> PgIter {
        PgIter {
            tree: self.clone(),
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            exhausted: false,
            page: FIRST_PAGE,
        }
    }

    pub(crate) fn scan_prefix(&self, prefix: &[u8]) -> PgIter {
        let hi = match prefix_end(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        self.range((Bound::Included(prefix.to_vec()), hi))
    }

    /// One page of keys within `lo..hi`, from the low end (`forward`) or the high end.
    fn page(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        forward: bool,
        limit: i64,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let mut conditions = Vec::new();
        let mut params: Vec<Vec<u8>> = Vec::new();
        for (bound, included, excluded) in [(lo, ">=", ">"), (hi, "<=", "<")] {
            let (op, key) = match bound {
                Bound::Included(k) => (included, k),
                Bound::Excluded(k) => (excluded, k),
                Bound::Unbounded => continue,
            };
            params.push(key.clone());
            conditions.push(format!("key {op} ${}", params.len()));
        }
        let sql = format!(
            "SELECT key, value FROM {} {} ORDER BY key {} LIMIT ${}",
            self.shared.tables[self.table],
            if conditions.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", conditions.join(" AND "))
            },
            if forward { "ASC" } else { "DESC" },
            params.len() + 1
        );
        let (pool, target) = (self.shared.pool.clone(), self.shared.target.clone());
        self.shared.run(async move {
            let client = connect(&pool, &target).await?;
            let statement = client.prepare_cached(&sql).await.map_err(db_err(&target))?;
            let mut args: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            args.push(&limit);
            let rows = client
                .query(&statement, &args)
                .await
                .map_err(db_err(&target))?;
            Ok(rows
                .iter()
                .map(|r| {
                    (
                        Bytes::from(r.get::<_, &[u8]>(0)),
                        Bytes::from(r.get::<_, &[u8]>(1)),
                    )
                })
                .collect())
        })
    }

    /// `batch` in one transaction on this table.
    pub(crate) fn apply_batch(&self, batch: super::Batch) -> Result<()> {
        let writes = batch
            .ops
            .into_iter()
            .map(|(key, value)| PgWrite {
                table: self.table,
                key: key.into(),
                kind: if value.is_some() {
                    Kind::Put
                } else {
                    Kind::Delete
                },
                value: value.map(Bytes::from),
                seq: 0,
            })
            .collect();
        match self.shared.run_writes(writes, None)? {
            Ok(()) => Ok(()),
            // Puts and deletes cannot conflict, and a batch carries no fence.
            Err(refusal) => Err(pg_error(
                format!("unexpected refusal of a batch: {refusal:?}"),
                None,
            )),
        }
    }
}

impl PgTree {
    /// `batch` and `key` set from `old` to `new` in one transaction, if `key` still holds `old`
    /// (see `Tree::apply_batch_swapping`): a `Take` of the old value (or nothing), a `Create` of
    /// the new one, then the batch; a conflict rolls it all back.
    pub(crate) fn apply_batch_swapping(
        &self,
        key: &[u8],
        old: Option<&[u8]>,
        new: &[u8],
        batch: super::Batch,
    ) -> Result<bool> {
        let write = |kind, value: Option<&[u8]>, key: &[u8]| PgWrite {
            table: self.table,
            key: Bytes::from(key.to_vec()),
            kind,
            value: value.map(|v| Bytes::from(v.to_vec())),
            seq: 0,
        };
        let mut writes = Vec::with_capacity(batch.ops.len() + 2);
        if let Some(old) = old {
            writes.push(write(Kind::Take, Some(old), key));
        }
        writes.push(write(Kind::Create, Some(new), key));
        for (k, v) in &batch.ops {
            let kind = if v.is_some() { Kind::Put } else { Kind::Delete };
            writes.push(write(kind, v.as_deref(), k));
        }
        match self.shared.run_writes(writes, None)? {
            Ok(()) => Ok(true),
            Err(Refusal::Conflict(_)) => Ok(false),
            Err(Refusal::Fenced) => Err(pg_error("a batch without a fence was fenced", None)),
        }
    }
}

/// The smallest key above every key starting with `prefix`; `None` when there is none (the prefix
/// is empty or all 0xff).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A lazy, paged scan of a table within bounds. The entries not yet read are `front`, then the
/// keys still in `lo..hi` in the table, then `back`; forward pages move `lo` up, backward pages
/// move `hi` down, so the two ends never yield an entry twice and stop where they meet.
pub(crate) struct PgIter {
    tree: PgTree,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Read from the low end, ascending.
    front: VecDeque<(Bytes, Bytes)>,
    /// Read from the high end, ascending.
    back: VecDeque<(Bytes, Bytes)>,
    /// No key is left in `lo..hi` (or a page failed).
    exhausted: bool,
    page: i64,
}

impl PgIter {
    /// Reads the next page from one end; `Err` ends the scan.
    fn fetch(&mut self, forward: bool) -> Result<()> {
        let limit = self.page;
        self.page = (self.page * 2).min(MAX_PAGE);
        let rows = match self.tree.page(&self.lo, &self.hi, forward, limit) {
            Ok(rows) => rows,
            Err(e) => {
                self.exhausted = true;
                self.front.clear();
                self.back.clear();
                return Err(e);
            }
        };
        if (rows.len() as i64) < limit {
            self.exhausted = true;
        }
        if let Some((last, _)) = rows.last() {
            let bound = Bound::Excluded(last.to_vec());
            if forward {
                self.lo = bound;
            } else {
                self.hi = bound;
            }
        }
        if forward {
            self.front.extend(rows);
        } else {
            for row in rows {
                self.back.push_front(row);
            }
        }
        Ok(())
    }

    /// The next entry from the front (`forward`) or the back: from that end's buffer, else from a
    /// fetch at that end; once the range is exhausted, what the other end fetched, from its far
    /// side.
    fn take(&mut self, forward: bool) -> Option<Result<(Bytes, Bytes)>> {
        let near = |it: &mut PgIter| {
            if forward {
                it.front.pop_front()
            } else {
                it.back.pop_back()
            }
        };
        if let Some(entry) = near(self) {
            return Some(Ok(entry));
        }
        if !self.exhausted {
            if let Err(e) = self.fetch(forward) {
                return Some(Err(e));
            }
            if let Some(entry) = near(self) {
                return Some(Ok(entry));
            }
        }
        let far = if forward {
            self.back.pop_front()
        } else {
            self.front.pop_back()
        };
        far.map(Ok)
    }
}

impl Iterator for PgIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.take(true)
    }
}

impl DoubleEndedIterator for PgIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take(false)
    }
}

// --- writes -----------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Put,
    Create,
    Take,
    Delete,
}

/// One write, owned (it crosses into the runtime).
struct PgWrite {
    /// Index into [`TABLES`].
    table: usize,
    key: Bytes,
    kind: Kind,
    value: Option<Bytes>,
    seq: somna_core::Seq,
}

/// The writes of one statement: same layer, table and kind; distinct keys.
struct Group {
    table: usize,
    kind: Kind,
    /// Indexes into the writes, in order.
    writes: Vec<usize>,
}

/// Groups writes into statements (see the module's documentation), in execution order.
fn plan(writes: &[PgWrite]) -> Vec<Group> {
    let mut last_layer: HashMap<(usize, &[u8]), usize> = HashMap::new();
    let mut groups: BTreeMap<(usize, usize, Kind), Vec<usize>> = BTreeMap::new();
    for (i, w) in writes.iter().enumerate() {
        let layer = match last_layer.get(&(w.table, &w.key[..])) {
            Some(previous) => previous + 1,
            None => 0,
        };
        last_layer.insert((w.table, &w.key[..]), layer);
        groups.entry((layer, w.table, w.kind)).or_default().push(i);
    }
    groups
        .into_iter()
        .map(|((_, table, kind), writes)| Group {
            table,
            kind,
            writes,
        })
        .collect()
}

/// The statement of a group on `table` (quoted). `$1` are the keys, `$2` the values; Create and
/// Take return the keys that failed (Take with whether the key existed).
fn statement_sql(kind: Kind, table: &str) -> String {
    match kind {
        Kind::Put => format!(
            "INSERT INTO {table} (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ),
        Kind::Create => format!(
            "WITH w (k, v) AS (SELECT * FROM unnest($1::bytea[], $2::bytea[])), \
             i AS (INSERT INTO {table} (key, value) SELECT k, v FROM w \
                   ON CONFLICT (key) DO NOTHING RETURNING key) \
             SELECT w.k FROM w LEFT JOIN i ON i.key = w.k WHERE i.key IS NULL"
        ),
        // The outer query sees the table as it was before the DELETE: a key whose value did not
        // match is reported with whether it existed ("changed") or not ("gone").
        Kind::Take => format!(
            "WITH w (k, v) AS (SELECT * FROM unnest($1::bytea[], $2::bytea[])), \
             d AS (DELETE FROM {table} t USING w WHERE t.key = w.k AND t.value = w.v \
                   RETURNING t.key) \
             SELECT w.k, t.key IS NOT NULL FROM w LEFT JOIN d ON d.key = w.k \
             LEFT JOIN {table} t ON t.key = w.k WHERE d.key IS NULL"
        ),
        Kind::Delete => format!("DELETE FROM {table} WHERE key = ANY($1::bytea[])"),
    }
}

/// The keys (or values) of a group, bound as one `bytea[]` parameter.
type KeyParams<'a> = Vec<&'a [u8]>;

type RowsFuture<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Vec<Row>, tokio_postgres::Error>> + Send + 'a>>;

impl Shared {
    /// Runs `writes` in one transaction; rolls back on a conflict.
    fn run_writes(
        &self,
        writes: Vec<PgWrite>,
        fence: Option<Fence>,
    ) -> Result<std::result::Result<(), Refusal>> {
        if writes.is_empty() {
            return Ok(Ok(()));
        }
        // The schema's lock lives as long as its session: a store whose session is gone may no
        // longer be the only writer, so it stops writing. A cluster node holds it shared, only to
        // keep unfenced stores out; its own writes are each fenced by their shard's lease, so a
        // cut session does not stop it (its pool reconnects).
        if !self.fenced && self.holder.as_ref().is_none_or(|h| h.is_closed()) {
            return Err(StoreError::Storage(StorageError::new(
                StorageErrorKind::Locked,
                PgError {
                    context: format!(
                        "the session holding the lock on Postgres schema {} at {} ended (lost connection); reopen the store",
                        self.schema, self.target
                    ),
                    source: None,
                },
            )));
        }
        let (pool, target, tables) = (self.pool.clone(), self.target.clone(), self.tables.clone());
        let fence_sql = fence
            .filter(|_| self.lease_check.load(Ordering::Relaxed))
            .map(|f| (f, cluster::fence_sql(&self.schema)));
        let limit = self.write_limit;
        self.run(async move {
            let work = transaction(&pool, &target, &tables, &writes, fence_sql.as_ref());
            let Some(limit) = limit else {
                return work.await;
            };
            tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                Err(pg_error(
                    format!(
                        "Postgres at {target} did not answer a write within {limit:?} (the \
                         sessions' statement_timeout and a grace); whether it committed is \
                         unknown until the store is read again"
                    ),
                    None,
                ))
            })
        })
    }
}

/// Why a write set did not commit (nothing of it did).
#[derive(Debug)]
pub(crate) enum Refusal {
    /// A write's expectation failed.
    Conflict(Conflict),
    /// The set's [`Fence`] did not hold: the lease is another node's, a newer epoch's or expired.
    Fenced,
}

async fn transaction(
    pool: &Pool,
    target: &str,
    tables: &[String],
    writes: &[PgWrite],
    fence: Option<&(Fence, String)>,
) -> Result<std::result::Result<(), Refusal>> {
    let err = db_err(target);
    let client = connect(pool, target).await?;
    let groups = plan(writes);
    // Prepared once per connection (the pool's statement cache).
    let begin = client.prepare_cached("BEGIN").await.map_err(&err)?;
    let check = match fence {
        Some((_, sql)) => Some(client.prepare_cached(sql).await.map_err(&err)?),
        None => None,
    };
    let fence_params = fence.map(|(f, _)| f.params());
    let mut statements = Vec::with_capacity(groups.len());
    for g in &groups {
        let sql = statement_sql(g.kind, &tables[g.table]);
        statements.push(client.prepare_cached(&sql).await.map_err(&err)?);
    }
    let params: Vec<(KeyParams<'_>, KeyParams<'_>)> = groups
        .iter()
        .map(|g| {
            let keys = g.writes.iter().map(|&i| &writes[i].key[..]).collect();
            let values = g
                .writes
                .iter()
                .filter_map(|&i| writes[i].value.as_deref())
                .collect();
            (keys, values)
        })
        .collect();
    let mut futures: Vec<RowsFuture<'_>> = Vec::with_capacity(groups.len() + 1);
    let client_ref: &tokio_postgres::Client = &client;
    futures.push(Box::pin(client_ref.query(&begin, &[])));
    // The lease check runs first and locks the lease row (FOR SHARE) until the transaction ends:
    // a takeover (which updates the row) waits for this commit, or this check sees its epoch.
    if let (Some(check), Some((shard, node, epoch))) = (&check, &fence_params) {
        futures.push(Box::pin(async move {
            client_ref
                .query(check, &[shard as &(dyn ToSql + Sync), node, epoch])
                .await
        }));
    }
    for ((g, statement), (keys, values)) in groups.iter().zip(&statements).zip(&params) {
        futures.push(Box::pin(async move {
            if g.kind == Kind::Delete {
                client_ref.query(statement, &[keys]).await
            } else {
                client_ref.query(statement, &[keys, values]).await
            }
        }));
    }
    let outcome = run_pipeline(futures, fence.is_some(), &groups, writes).await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            rollback_or_discard(client, target).await;
            return Err(err(e));
        }
    };
    match outcome {
        Ok(()) => {
            if let Err(e) = client.batch_execute("COMMIT").await {
                // Whether it committed is unknown: the connection is not reused.
                let _ = Object::take(client);
                return Err(pg_error(
                    format!(
                        "Postgres at {target}: COMMIT failed (the transaction may or may not have committed)"
                    ),
                    Some(Box::new(e)),
                ));
            }
            Ok(Ok(()))
        }
        Err(refusal) => {
            rollback_or_discard(client, target).await;
            Ok(Err(refusal))
        }
    }
}

/// Sends the pipeline and reads the failures: `Ok(Err(conflict))` for the first failing write in
/// order.
async fn run_pipeline(
    futures: Vec<RowsFuture<'_>>,
    fenced: bool,
    groups: &[Group],
    writes: &[PgWrite],
) -> std::result::Result<std::result::Result<(), Refusal>, tokio_postgres::Error> {
    let results = collect_in_order(futures).await;
    let mut results = results.into_iter();
    // BEGIN.
    if let Some(r) = results.next() {
        r?;
    }
    // The lease check: one row if the lease holds.
    let mut lease_lost = false;
    if fenced && let Some(r) = results.next() {
        lease_lost = r?.is_empty();
    }
    let mut first: Option<(usize, &'static str)> = None;
    for (g, rows) in groups.iter().zip(results) {
        let rows = rows?;
        if !matches!(g.kind, Kind::Create | Kind::Take) || rows.is_empty() {
            continue;
        }
        let index: HashMap<&[u8], usize> =
            g.writes.iter().map(|&i| (&writes[i].key[..], i)).collect();
        for row in &rows {
            let key: &[u8] = row.get(0);
            let Some(&i) = index.get(key) else { continue };
            let what = match g.kind {
                Kind::Create => "is already taken",
                _ if row.get::<_, bool>(1) => "changed since it was read",
                _ => "is gone",
            };
            if first.is_none_or(|(f, _)| i < f) {
                first = Some((i, what));
            }
        }
    }
    if lease_lost {
        return Ok(Err(Refusal::Fenced));
    }
    Ok(match first {
        None => Ok(()),
        Some((i, what)) => {
            let w = &writes[i];
            Err(Refusal::Conflict(Conflict {
                seq: w.seq,
                reason: format!("{} key {} {what}", TABLES[w.table], keys::render(&w.key)),
            }))
        }
    })
}

/// Polls every future, always in index order, until all are done. tokio-postgres sends a query
/// when it is first polled, so the statements reach the server (and run) in this order: one
/// pipelined round trip.
async fn collect_in_order(
    mut futures: Vec<RowsFuture<'_>>,
) -> Vec<std::result::Result<Vec<Row>, tokio_postgres::Error>> {
    let mut results: Vec<Option<std::result::Result<Vec<Row>, tokio_postgres::Error>>> =
        futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, result) in futures.iter_mut().zip(results.iter_mut()) {
            if result.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(r) => *result = Some(r),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// Ends a failed or conflicting transaction; a connection that cannot roll back is not reused.
async fn rollback_or_discard(client: Object, target: &str) {
    if let Err(e) = client.batch_execute("ROLLBACK").await {
        tracing::warn!(target, error = %e, "ROLLBACK failed; the connection is discarded");
        let _ = Object::take(client);
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
        let read = |options: &str| super::statement_timeout(options).unwrap();
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
        let e = super::statement_timeout("-c statement_timeout=soon").unwrap_err();
        assert!(e.to_string().contains("\"soon\""), "{e}");
    }

    fn stores() -> Option<(Store, Store)> {
        let Some(url) = std::env::var("SOMNA_TEST_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            somna_testkit::skip("SOMNA_TEST_PG_URL is unset (a PostgreSQL URL)");
            return None;
        };
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
        let Some(url) = std::env::var("SOMNA_TEST_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            somna_testkit::skip("SOMNA_TEST_PG_URL is unset (a PostgreSQL URL)");
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
                let backward: Vec<_> = s
                    .range(range.clone())
                    .rev()
                    .take(5_000)
                    .map(|r| r.unwrap().0.to_vec())
                    .collect();
                let pg_backward: Vec<_> = p
                    .range(range.clone())
                    .rev()
                    .take(5_000)
                    .map(|r| r.unwrap().0.to_vec())
                    .collect();
                assert_eq!(backward, pg_backward, "{range:?}");
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
