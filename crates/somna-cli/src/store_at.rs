//! Where the CLI's store is — a sled directory or a Postgres database — opened with one clear
//! message per failure, and `somna migrate-store`, which copies one into the other.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;
use somna_core::config::{ClusterSection, DbUrl, StoreBackend, StoreConfig};
use somna_store::cluster::ClusterOptions;
use somna_store::{PostgresOptions, Store, StoreError, StoreOptions};

/// A store's location.
#[derive(Debug, Clone)]
pub enum StoreAt {
    /// A sled database directory.
    Dir(PathBuf),
    /// A Postgres database (the URL never printed with its password).
    Postgres {
        url: DbUrl,
        schema: String,
        pool_size: u32,
    },
}

impl StoreAt {
    /// The store a config names: `--db DIR` when given (always sled), else `[store]`. Relative
    /// sled paths are relative to the config file's directory.
    pub fn from_config(config_file: &Path, db: Option<&Path>, store: &StoreConfig) -> StoreAt {
        if let Some(dir) = db {
            return StoreAt::Dir(dir.to_path_buf());
        }
        match store.backend {
            StoreBackend::Sled => StoreAt::Dir(store_path(config_file, &store.path)),
            StoreBackend::Postgres => StoreAt::Postgres {
                url: store.url.clone(),
                schema: store.schema.clone(),
                pool_size: store.pool_size,
            },
        }
    }

    /// A `migrate-store --to` target: a `postgres://` URL (in `schema`) or a directory.
    pub fn target(to: &str, schema: &str, pool_size: u32) -> StoreAt {
        if to.starts_with("postgres://") || to.starts_with("postgresql://") {
            StoreAt::Postgres {
                url: DbUrl::new(to),
                schema: schema.to_string(),
                pool_size,
            }
        } else {
            StoreAt::Dir(PathBuf::from(to))
        }
    }

    /// How the store is named in messages: the directory, or the URL without its password and
    /// the schema.
    pub fn label(&self) -> String {
        match self {
            StoreAt::Dir(dir) => dir.display().to_string(),
            StoreAt::Postgres { url, schema, .. } => format!("{url} (schema {schema})"),
        }
    }

    /// Opens the store; `create` creates a missing sled directory (Postgres creates its schema
    /// and tables on open in any case).
    pub fn open(&self, options: &StoreConfig, create: bool) -> Result<Store> {
        let store = self.open_backend(options, create)?;
        store.set_history_cache_bytes(options.history_cache_mb.saturating_mul(1 << 20));
        Ok(store)
    }

    fn open_backend(&self, options: &StoreConfig, create: bool) -> Result<Store> {
        match self {
            StoreAt::Dir(dir) => {
                if create {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        anyhow::anyhow!(
                            "cannot create the database directory {}: {e}",
                            dir.display()
                        )
                    })?;
                } else if !dir.exists() {
                    bail!(
                        "no database at {} (run `somna run` first, or pass --db PATH)",
                        dir.display()
                    );
                }
                Store::open(dir, StoreOptions::from(options)).map_err(|e| self.open_error(e))
            }
            StoreAt::Postgres {
                url,
                schema,
                pool_size,
            } => Store::open_postgres(
                url.expose(),
                PostgresOptions {
                    schema: schema.clone(),
                    pool_size: *pool_size as usize,
                },
            )
            .map_err(|e| self.open_error(e)),
        }
    }

    /// Opens the store as one node of a cluster (`somna run --cluster`): Postgres only.
    pub fn open_cluster(&self, section: &ClusterSection, options: &StoreConfig) -> Result<Store> {
        let store = self.open_as_node(section, node_name(section))?;
        store.set_history_cache_bytes(options.history_cache_mb.saturating_mul(1 << 20));
        Ok(store)
    }

    fn open_as_node(&self, section: &ClusterSection, node: String) -> Result<Store> {
        let StoreAt::Postgres {
            url,
            schema,
            pool_size,
        } = self
        else {
            bail!(
                "a cluster needs the Postgres backend (set [store] backend = \"postgres\" and url; \
the sled database at {} is one process's)",
                self.label()
            );
        };
        Store::open_postgres_cluster(
            url.expose(),
            PostgresOptions {
                schema: schema.clone(),
                pool_size: *pool_size as usize,
            },
            ClusterOptions {
                node,
                shards: section.shards,
                statement_timeout: section.lease_ttl / 3,
            },
        )
        .map_err(|e| self.open_error(e))
    }

    fn open_error(&self, e: StoreError) -> anyhow::Error {
        match (&e, self) {
            (StoreError::Storage(s), StoreAt::Dir(dir)) if s.is_locked() => anyhow::anyhow!(
                "the database at {} is in use by another process (a running `somna run`?); send \
the command to its API with --server URL (`somna run --serve`), or stop it first",
                dir.display()
            ),
            // The error's own text only: its source repeats it.
            _ => anyhow::anyhow!("cannot open the database at {}: {e}", self.label()),
        }
    }
}

/// The store path: relative paths are relative to the config file's directory.
pub fn store_path(config: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match config.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// Copies `source` into the empty store at `to`, then verifies the copy: every agent's full
/// export (records, history, archive, journal, facts, events) must be identical on both sides.
pub fn migrate(source: &Store, from: &StoreAt, to: &StoreAt, options: &StoreConfig) -> Result<()> {
    if let StoreAt::Dir(dir) = to
        && dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} already exists and is not empty; migrate into a new directory",
            dir.display()
        );
    }
    let dest = to.open(options, true)?;
    let started = std::time::Instant::now();
    let report = source
        .copy_into(&dest)
        .map_err(|e| anyhow::anyhow!("cannot copy into {}: {e}", to.label()))?;
    let agents = source.agents()?;
    let mut mismatched = Vec::new();
    for record in &agents {
        if dump(source, &record.id)? != dump(&dest, &record.id)? {
            mismatched.push(record.id.to_string());
        }
        let check = dest.check_invariants(&record.id)?;
        if !check.is_ok() {
            bail!("the copy of {} breaks an invariant: {check}", record.id);
        }
    }
    if !mismatched.is_empty() {
        bail!(
            "the copy differs from the source for {} agent(s): {}",
            mismatched.len(),
            mismatched.join(", ")
        );
    }
    dest.flush()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "copied {} → {}: {} agent(s), {} entries in {:.1?}; every agent's export is identical",
        from.label(),
        to.label(),
        agents.len(),
        report.entries(),
        started.elapsed()
    )?;
    for (tree, n) in &report.trees {
        writeln!(out, "  {tree:<18} {n:>10}")?;
    }
    Ok(())
}

/// Everything of one agent, as JSON lines: what the verification compares.
fn dump(store: &Store, id: &somna_core::AgentId) -> Result<Vec<String>> {
    let mut lines = vec![serde_json::to_string(&store.agent(id)?)?];
    for m in store
        .history(id)?
        .iter()
        .chain(&store.archive_range(id, 0, usize::MAX)?)
    {
        lines.push(serde_json::to_string(m)?);
    }
    for e in store.query_journal(id, &somna_core::JournalQuery::default())? {
        lines.push(serde_json::to_string(&e)?);
    }
    for f in store.facts(id)? {
        lines.push(serde_json::to_string(&f)?);
    }
    for e in store.events(id, usize::MAX)? {
        lines.push(serde_json::to_string(&e)?);
    }
    Ok(lines)
}

/// This node's name: `[cluster] node`, else `<hostname>-<pid>`.
pub fn node_name(section: &ClusterSection) -> String {
    if !section.node.is_empty() {
        return section.node.clone();
    }
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "node".to_string());
    format!("{host}-{}", std::process::id())
}

/// `somna cluster status`: what the database says of the nodes and the shards.
#[derive(Debug, Serialize)]
pub struct ClusterStatus {
    /// Where (the URL without its password, and the schema).
    pub store: String,
    pub shards: u32,
    pub lease_ttl_ms: u64,
    pub nodes: Vec<NodeStatus>,
    /// Shards with no unexpired lease (never taken, released, or their owner died).
    pub unowned_shards: u32,
    /// The highest epoch of any shard (how many takeovers the busiest shard has seen, plus one).
    pub max_epoch: u64,
    /// Inputs accepted by one node and not yet delivered by their agent's owner.
    pub inbox_depth: usize,
}

/// One node in `somna cluster status`.
#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub node: String,
    pub heartbeat_age_ms: u64,
    /// Whether its heartbeat is within the lease TTL.
    pub live: bool,
    /// Shards it holds with an unexpired lease.
    pub shards: u32,
    /// The least time left on any of its leases (ms; none without shards).
    pub min_lease_left_ms: Option<i64>,
}

/// Reads the cluster tables through a read-only node handle (it takes no lease, sends no
/// heartbeat).
pub fn cluster_status(at: &StoreAt, section: &ClusterSection) -> Result<ClusterStatus> {
    let store = at.open_as_node(section, format!("status-{}", std::process::id()))?;
    let Some(view) = store.cluster() else {
        bail!("the store at {} is not a cluster store", at.label());
    };
    let leases = view.leases()?;
    let live = |remaining: i64| remaining > 0;
    let ttl = section.lease_ttl;
    let nodes = view
        .nodes()?
        .into_iter()
        .map(|n| {
            let mine: Vec<i64> = leases
                .iter()
                .filter(|l| l.owner.as_deref() == Some(n.node.as_str()) && live(l.remaining_ms))
                .map(|l| l.remaining_ms)
                .collect();
            NodeStatus {
                heartbeat_age_ms: u64::try_from(n.heartbeat_age.as_millis()).unwrap_or(u64::MAX),
                live: n.heartbeat_age < ttl,
                shards: u32::try_from(mine.len()).unwrap_or(u32::MAX),
                min_lease_left_ms: mine.iter().min().copied(),
                node: n.node,
            }
        })
        .collect();
    let owned = leases
        .iter()
        .filter(|l| l.owner.is_some() && live(l.remaining_ms))
        .count();
    Ok(ClusterStatus {
        store: at.label(),
        shards: section.shards,
        lease_ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        nodes,
        unowned_shards: section
            .shards
            .saturating_sub(u32::try_from(owned).unwrap_or(u32::MAX)),
        max_epoch: leases.iter().map(|l| l.epoch).max().unwrap_or(0),
        inbox_depth: store.inbox_len()?,
    })
}
