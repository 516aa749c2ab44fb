//! Reads: point reads, multi-key reads in one statement, and lazy paged range scans.

use super::*;

/// The first page of a scan; each further page doubles, up to [`MAX_PAGE`].
pub(super) const FIRST_PAGE: i64 = 32;

/// The largest page of a scan.
pub(super) const MAX_PAGE: i64 = 256;

/// One table.
#[derive(Clone)]
pub(crate) struct PgTree {
    pub(super) shared: Arc<Shared>,
    /// Index into [`TABLES`].
    pub(super) table: usize,
}

impl PgTree {
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let sql = format!(
            "SELECT value FROM {} WHERE key = $1",
            self.shared.tables[self.table]
        );
        let rows = self.select(sql, vec![Box::new(key.to_vec())])?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
    }

    /// The values of `keys`, in their order, from one `key = ANY($1)` statement.
    pub(crate) fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT key, value FROM {} WHERE key = ANY($1)",
            self.shared.tables[self.table]
        );
        let rows: HashMap<Vec<u8>, Bytes> = self
            .select(sql, vec![Box::new(keys.to_vec())])?
            .iter()
            .map(|r| (r.get::<_, Vec<u8>>(0), Bytes::from(r.get::<_, &[u8]>(1))))
            .collect();
        Ok(keys.iter().map(|k| rows.get(k).cloned()).collect())
    }

    /// The rows of the statement `sql` (a `SELECT` on this table) with `params` as its `$1…`,
    /// on a pooled connection.
    fn select(&self, sql: String, params: Vec<Box<dyn ToSql + Send + Sync>>) -> Result<Vec<Row>> {
        let (pool, target) = (self.shared.pool.clone(), self.shared.target.clone());
        self.shared.run(async move {
            let client = connect(&pool, &target).await?;
            let statement = client.prepare_cached(&sql).await.map_err(db_err(&target))?;
            let args: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            client
                .query(&statement, &args)
                .await
                .map_err(db_err(&target))
        })
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
        let mut params: Vec<Box<dyn ToSql + Send + Sync>> = Vec::new();
        for (bound, included, excluded) in [(lo, ">=", ">"), (hi, "<=", "<")] {
            let (op, key) = match bound {
                Bound::Included(k) => (included, k),
                Bound::Excluded(k) => (excluded, k),
                Bound::Unbounded => continue,
            };
            params.push(Box::new(key.clone()));
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
        params.push(Box::new(limit));
        Ok(self
            .select(sql, params)?
            .iter()
            .map(|r| {
                (
                    Bytes::from(r.get::<_, &[u8]>(0)),
                    Bytes::from(r.get::<_, &[u8]>(1)),
                )
            })
            .collect())
    }
}

/// The smallest key above every key starting with `prefix`; `None` when there is none (the prefix
/// is empty or all 0xff).
pub(super) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
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
