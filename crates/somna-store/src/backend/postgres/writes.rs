//! Writes: a write set as ONE pipelined transaction (see the module docs of `postgres`), batches,
//! and the swap of a guard key with a batch.

use super::*;

impl PgTree {
    /// `batch` in one transaction on this table.
    pub(crate) fn apply_batch(&self, batch: crate::backend::Batch) -> Result<()> {
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
        batch: crate::backend::Batch,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Put,
    Create,
    Take,
    Delete,
}

/// One write, owned (it crosses into the runtime).
pub(super) struct PgWrite {
    /// Index into [`TABLES`].
    table: usize,
    key: Bytes,
    kind: Kind,
    value: Option<Bytes>,
    seq: somna_core::Seq,
}

/// The writes of one statement: same layer, table and kind; distinct keys.
pub(super) struct Group {
    table: usize,
    kind: Kind,
    /// Indexes into the writes, in order.
    writes: Vec<usize>,
}

/// Groups writes into statements (see the module's documentation), in execution order.
pub(super) fn plan(writes: &[PgWrite]) -> Vec<Group> {
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
pub(super) fn statement_sql(kind: Kind, table: &str) -> String {
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
pub(super) type KeyParams<'a> = Vec<&'a [u8]>;

pub(super) type RowsFuture<'a> =
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

pub(super) async fn transaction(
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
pub(super) async fn run_pipeline(
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
pub(super) async fn collect_in_order(
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
pub(super) async fn rollback_or_discard(client: Object, target: &str) {
    if let Err(e) = client.batch_execute("ROLLBACK").await {
        tracing::warn!(target, error = %e, "ROLLBACK failed; the connection is discarded");
        let _ = Object::take(client);
    }
}

impl PgDb {
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
