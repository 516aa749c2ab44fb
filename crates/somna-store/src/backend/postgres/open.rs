//! Opening a Postgres store: the connection settings (TLS, the statement timeout), the schema's
//! advisory lock held by a session of its own, and the migrations.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::sync::atomic::AtomicU64;

use super::*;

/// The schema migrations, applied in order at open; `{schema}` is replaced by the quoted schema.
/// Never edit one that shipped: add the next version.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
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
    (
        6,
        "CREATE TABLE {schema}.tokens (key bytea PRIMARY KEY, value bytea NOT NULL);",
    ),
];

/// The `statement_timeout` of the pool's sessions when the URL's `options` set none: a statement
/// (a write set's, a read's) that waits longer — on a lock, a stalled server — is cancelled by
/// the server instead of holding an agent's job.
pub(super) const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How much longer than `statement_timeout` a write set may go unanswered before the store gives
/// up on it (the server cancels its own statements; this is for a server that cannot answer).
pub(super) const WRITE_GRACE: Duration = Duration::from_secs(5);

/// The `statement_timeout` a connection's `options` set (`-c statement_timeout=10s`), as the
/// server reads it: a number of milliseconds, or one with a unit (`ms`, `s`, `min`, `h`, `d`);
/// `None` when they set none.
pub(super) fn statement_timeout(options: &str) -> Result<Option<Duration>> {
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
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// A schema name the store accepts: what Postgres takes unquoted, lowercase (so that `psql` users
/// can name it without quotes too).
pub(super) fn valid_schema(schema: &str) -> bool {
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
}

/// `host:port/database (user u)` of a connection config, for messages.
pub(super) fn target_of(config: &tokio_postgres::Config) -> String {
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
pub(super) async fn hold_schema(
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
pub(super) fn session_name(prefix: &str, schema: &str) -> String {
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
pub(super) async fn end_leftover_sessions(
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
pub(super) async fn migrate(
    pool: &Pool,
    target: &str,
    schema: &str,
    tables: &[String],
) -> Result<bool> {
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
