//! The cluster tables of a Postgres store (migration 2): node heartbeats (`cluster_nodes`) and
//! shard leases with fencing epochs (`shard_leases`). Every function is one statement; the lease
//! check that fences a write set runs inside its transaction (see `transaction`).
//!
//! Times are the database server's (`now()`), never a node's clock: a lease is expired when the
//! server says so, whichever node asks.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{PgDb, Result, db_err, quote};
use crate::StoreError;

/// What a fenced write set proves inside its transaction: `node` holds `shard`'s lease at `epoch`,
/// and the lease has not expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    pub(crate) shard: u32,
    pub(crate) node: String,
    pub(crate) epoch: u64,
}

impl Fence {
    /// The check's parameters: shard, node, epoch.
    pub(crate) fn params(&self) -> (i32, String, i64) {
        (
            i32::try_from(self.shard).unwrap_or(i32::MAX),
            self.node.clone(),
            i64::try_from(self.epoch).unwrap_or(i64::MAX),
        )
    }
}

/// The lease check of a write set: one row while the lease holds; locks that row until the
/// transaction ends, so a takeover's update waits for this commit.
pub(crate) fn fence_sql(schema: &str) -> String {
    format!(
        "SELECT 1 FROM {}.shard_leases \
         WHERE shard = $1 AND owner = $2 AND epoch = $3 AND lease_until > now() FOR SHARE",
        quote(schema)
    )
}

/// One row of `cluster_nodes`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeRow {
    pub(crate) node: String,
    /// Milliseconds since its last heartbeat (the server's clock).
    pub(crate) heartbeat_age_ms: i64,
    /// Milliseconds since it first joined.
    pub(crate) joined_ms_ago: i64,
}

/// One row of `shard_leases`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeaseRow {
    pub(crate) shard: u32,
    pub(crate) owner: Option<String>,
    pub(crate) epoch: u64,
    /// Milliseconds until the lease expires (negative: expired that long ago).
    pub(crate) remaining_ms: i64,
}

fn shard_param(shard: u32) -> i32 {
    i32::try_from(shard).unwrap_or(i32::MAX)
}

fn secs(ttl: std::time::Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PgDb {
    /// How long a cluster statement (heartbeat, renewal, acquisition…) may take before it fails.
    /// Turns the database's lease check of fenced write sets off (`false`): only for the
    /// negative control of the fencing tests.
    pub(crate) fn set_lease_check(&self, on: bool) {
        self.shared.lease_check.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_cluster_timeout(&self, limit: Duration) {
        let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
        self.shared.cluster_timeout_ms.store(ms, Ordering::Relaxed);
    }

    fn table_name(&self, table: &str) -> String {
        format!("{}.{}", quote(&self.shared.schema), table)
    }

    /// Runs one statement with owned parameters on the backend's runtime; returns its rows.
    fn query_owned(
        &self,
        sql: String,
        params: Vec<Box<dyn tokio_postgres::types::ToSql + Send + Sync>>,
    ) -> Result<Vec<tokio_postgres::Row>> {
        let (pool, target) = (self.shared.pool.clone(), self.shared.target.clone());
        let limit = Duration::from_millis(self.shared.cluster_timeout_ms.load(Ordering::Relaxed));
        self.shared.run(async move {
            // A database that stops answering (a partition) must not hold the membership round:
            // the node has to notice in time that it can no longer renew.
            let work = async {
                let client = super::connect(&pool, &target).await?;
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                let statement = client.prepare_cached(&sql).await.map_err(db_err(&target))?;
                client
                    .query(&statement, &refs)
                    .await
                    .map_err(db_err(&target))
            };
            tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                Err(super::pg_error(
                    format!(
                        "Postgres at {target} did not answer a cluster statement within {limit:?}"
                    ),
                    None,
                ))
            })
        })
    }

    /// Every row of a parameterless `sql`, mapped.
    fn select_all<T>(
        &self,
        sql: String,
        map: impl Fn(&tokio_postgres::Row) -> T,
    ) -> Result<Vec<T>> {
        Ok(self.query_owned(sql, Vec::new())?.iter().map(map).collect())
    }

    /// The store's random identity (made once with the schema, see the migrations).
    pub(crate) fn store_id(&self) -> Result<String> {
        let sql = format!("SELECT id FROM {}", self.table_name("store_identity"));
        let ids = self.select_all(sql, |r| r.get::<_, String>(0))?;
        ids.into_iter().next().ok_or_else(|| StoreError::Invalid {
            what: "Postgres store",
            reason: "its store_identity table is empty".to_string(),
        })
    }

    /// Records that `node` is alive now (joining the cluster on its first call).
    pub(crate) fn heartbeat(&self, node: &str) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} AS n (node, started_at, heartbeat_at) VALUES ($1, now(), now()) \
             ON CONFLICT (node) DO UPDATE SET heartbeat_at = now()",
            self.table_name("cluster_nodes")
        );
        self.query_owned(sql, vec![Box::new(node.to_string())])
            .map(drop)
    }

    /// Removes `node` from the node list (a clean leave).
    pub(crate) fn remove_node(&self, node: &str) -> Result<()> {
        let sql = format!(
            "DELETE FROM {} WHERE node = $1",
            self.table_name("cluster_nodes")
        );
        self.query_owned(sql, vec![Box::new(node.to_string())])
            .map(drop)
    }

    /// Every node that ever sent a heartbeat and has not left, by name.
    pub(crate) fn nodes(&self) -> Result<Vec<NodeRow>> {
        let sql = format!(
            "SELECT node, \
                    (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint, \
                    (extract(epoch FROM now() - started_at) * 1000)::bigint \
             FROM {} ORDER BY node",
            self.table_name("cluster_nodes")
        );
        self.select_all(sql, |r| NodeRow {
            node: r.get(0),
            heartbeat_age_ms: r.get(1),
            joined_ms_ago: r.get(2),
        })
    }

    /// Takes `shard`'s lease for `node` for `ttl` if it is free, released or expired, bumping its
    /// epoch (1 for a shard never leased); `None` if another lease holds (this node's own
    /// included: renew that one).
    pub(crate) fn acquire(
        &self,
        node: &str,
        shard: u32,
        ttl: std::time::Duration,
    ) -> Result<Option<u64>> {
        let sql = format!(
            "INSERT INTO {} AS l (shard, owner, epoch, lease_until) \
             VALUES ($1, $2, 1, now() + make_interval(secs => $3)) \
             ON CONFLICT (shard) DO UPDATE \
                 SET owner = EXCLUDED.owner, epoch = l.epoch + 1, lease_until = EXCLUDED.lease_until \
                 WHERE l.owner IS NULL OR l.lease_until <= now() \
             RETURNING epoch",
            self.table_name("shard_leases")
        );
        let rows = self.query_owned(
            sql,
            vec![
                Box::new(shard_param(shard)),
                Box::new(node.to_string()),
                Box::new(secs(ttl)),
            ],
        )?;
        Ok(rows
            .first()
            .map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }

    /// Extends every unexpired lease of `node` by `ttl` in one statement; returns the shards (and
    /// epochs) it still holds. A lease that expired before this ran is not renewed (another node
    /// may have it already): the caller must stop writing its agents.
    pub(crate) fn renew(&self, node: &str, ttl: std::time::Duration) -> Result<Vec<(u32, u64)>> {
        let sql = format!(
            "UPDATE {} SET lease_until = now() + make_interval(secs => $2) \
             WHERE owner = $1 AND lease_until > now() RETURNING shard, epoch",
            self.table_name("shard_leases")
        );
        let rows = self.query_owned(sql, vec![Box::new(node.to_string()), Box::new(secs(ttl))])?;
        let mut held: Vec<(u32, u64)> = rows
            .iter()
            .map(|r| {
                (
                    u32::try_from(r.get::<_, i32>(0)).unwrap_or(0),
                    u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                )
            })
            .collect();
        held.sort_unstable();
        Ok(held)
    }

    /// Gives up `shard` if `node` holds it at `epoch`; returns whether it did.
    pub(crate) fn release(&self, node: &str, shard: u32, epoch: u64) -> Result<bool> {
        let sql = format!(
            "UPDATE {} SET owner = NULL, lease_until = now() \
             WHERE shard = $1 AND owner = $2 AND epoch = $3",
            self.table_name("shard_leases")
        );
        let rows = self.query_owned(
            format!("{sql} RETURNING shard"),
            vec![
                Box::new(shard_param(shard)),
                Box::new(node.to_string()),
                Box::new(i64::try_from(epoch).unwrap_or(i64::MAX)),
            ],
        )?;
        Ok(!rows.is_empty())
    }

    /// Every shard that was ever leased, by number.
    pub(crate) fn leases(&self) -> Result<Vec<LeaseRow>> {
        let sql = format!(
            "SELECT shard, owner, epoch, (extract(epoch FROM lease_until - now()) * 1000)::bigint \
             FROM {} ORDER BY shard",
            self.table_name("shard_leases")
        );
        self.select_all(sql, |r| LeaseRow {
            shard: u32::try_from(r.get::<_, i32>(0)).unwrap_or(0),
            owner: r.get(1),
            epoch: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            remaining_ms: r.get(3),
        })
    }
}
