//! Several nodes, one Postgres store: shard leases with fencing epochs.
//!
//! Agents hash to a fixed number of shards ([`shard_of`]). A node writes an agent only while it
//! holds the lease of the agent's shard: a row `shard_leases(shard, owner, epoch, lease_until)`
//! that it takes when the shard is free or expired (bumping the epoch), renews for all its shards
//! in one statement, and gives back when it no longer wants the shard. Every write set of a store
//! opened as a cluster node ([`Store::open_postgres_cluster`]) checks, inside its transaction, that
//! this node still holds the agent's shard at the epoch it acquired and that the lease has not
//! expired (the database's clock), locking the lease row until it commits: a takeover waits for
//! that commit, or the commit sees the new epoch and fails with [`StoreError::Fenced`] — a stale
//! owner cannot write, whatever its own clock says.
//!
//! Which node should own a shard is rendezvous hashing over the live nodes ([`rendezvous`],
//! [`wanted_shards`]); the nodes' liveness is their heartbeat rows ([`ClusterView::heartbeat`]).
//! Acquiring a shard forgets the store's cached state of its agents, so the new owner reads what
//! the previous one committed.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use somna_core::AgentId;

use crate::backend::{Fence, postgres::PgDb};
use crate::error::{Result, StoreError};
use crate::store::{PostgresOptions, Store};

/// How a store joins a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// This node's name, unique in the cluster (1 to 200 characters).
    pub node: String,
    /// The number of shards agents hash to; fixed for the life of the cluster (every node must
    /// use the same number).
    pub shards: u32,
    /// How long a cluster statement (heartbeat, renewal, acquisition, …) may wait for the
    /// database before it fails; keep it well under the lease TTL (the runtime uses a third), so
    /// a node cut off from the database notices in time that it cannot renew.
    pub statement_timeout: Duration,
}

/// This node's part of a cluster: its name, the shard count and the leases it holds.
#[derive(Debug)]
pub(crate) struct Membership {
    node: String,
    shards: u32,
    /// The store's identity, the same on every node of the cluster.
    cluster_id: String,
    /// shard → epoch of every lease this node holds (as far as it knows: the database decides).
    held: RwLock<HashMap<u32, u64>>,
}

impl Membership {
    /// The fence a write set of `agent` carries, or `None` when this node does not hold its shard.
    pub(crate) fn fence(&self, agent: &[u8]) -> (u32, Option<Fence>) {
        let shard = shard_of_bytes(agent, self.shards);
        let epoch = self
            .held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&shard)
            .copied();
        let fence = epoch.map(|epoch| Fence {
            shard,
            node: self.node.clone(),
            epoch,
        });
        (shard, fence)
    }

    /// Whether this node holds the shard of `agent` (as far as it knows).
    pub(crate) fn holds(&self, agent: &[u8]) -> bool {
        let shard = shard_of_bytes(agent, self.shards);
        self.held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&shard)
    }

    /// Forgets the lease of `shard` at `epoch` (lost or given back).
    fn drop_lease(&self, shard: u32, epoch: u64) {
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        if held.get(&shard) == Some(&epoch) {
            held.remove(&shard);
        }
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms (the shard of an agent must never change).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// A 64-bit finalizer (splitmix64's), so close inputs give unrelated rendezvous scores.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn shard_of_bytes(agent: &[u8], shards: u32) -> u32 {
    let n = u64::from(shards.max(1));
    u32::try_from(mix(fnv1a(&[agent])) % n).unwrap_or(0)
}

/// The shard of `agent` among `shards` (0-based).
pub fn shard_of(agent: &AgentId, shards: u32) -> u32 {
    shard_of_bytes(agent.as_str().as_bytes(), shards)
}

/// The node among `nodes` that should own `shard`: the highest score of (node, shard). When a node
/// joins or leaves, only the shards it wins or held move (about 1/n of them).
pub fn rendezvous(shard: u32, nodes: &[String]) -> Option<&str> {
    nodes
        .iter()
        .max_by_key(|node| {
            (
                mix(fnv1a(&[node.as_bytes(), &[0], &shard.to_be_bytes()])),
                node.as_str(),
            )
        })
        .map(String::as_str)
}

/// The shards `node` wins among `nodes` (which should include it), ascending.
pub fn wanted_shards(node: &str, nodes: &[String], shards: u32) -> Vec<u32> {
    (0..shards)
        .filter(|&s| rendezvous(s, nodes) == Some(node))
        .collect()
}

/// A node of the cluster as the database sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Its name.
    pub node: String,
    /// Time since its last heartbeat.
    pub heartbeat_age: Duration,
    /// Time since it first joined.
    pub joined_ago: Duration,
}

/// A shard's lease as the database holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardLease {
    /// The shard.
    pub shard: u32,
    /// The node holding it; `None` once released.
    pub owner: Option<String>,
    /// Bumped at every acquisition.
    pub epoch: u64,
    /// Time left before it expires (negative: expired that many milliseconds ago).
    pub remaining_ms: i64,
}

fn ms(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The cluster operations of a store opened as a cluster node ([`Store::cluster`]).
#[derive(Clone, Copy)]
pub struct ClusterView<'a> {
    store: &'a Store,
    membership: &'a Membership,
    db: &'a PgDb,
}

impl std::fmt::Debug for ClusterView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("node", &self.membership.node)
            .field("shards", &self.membership.shards)
            .finish_non_exhaustive()
    }
}

impl ClusterView<'_> {
    /// This node's name.
    pub fn node(&self) -> &str {
        &self.membership.node
    }

    /// The cluster's identity: a random id its store made once, the same on every node, unlike
    /// any other store's (two clusters that share a NATS server name their subjects by it).
    pub fn id(&self) -> &str {
        &self.membership.cluster_id
    }

    /// The number of shards.
    pub fn shards(&self) -> u32 {
        self.membership.shards
    }

    /// The shard of `agent`.
    pub fn shard_of(&self, agent: &AgentId) -> u32 {
        shard_of(agent, self.membership.shards)
    }

    /// Records that this node is alive (joins the node list on the first call).
    pub fn heartbeat(&self) -> Result<()> {
        self.db.heartbeat(&self.membership.node)
    }

    /// Leaves the node list (after giving back its shards).
    pub fn leave(&self) -> Result<()> {
        self.db.remove_node(&self.membership.node)
    }

    /// Every node in the list, with its heartbeat's age.
    pub fn nodes(&self) -> Result<Vec<NodeInfo>> {
        Ok(self
            .db
            .nodes()?
            .into_iter()
            .map(|n| NodeInfo {
                node: n.node,
                heartbeat_age: ms(n.heartbeat_age_ms),
                joined_ago: ms(n.joined_ms_ago),
            })
            .collect())
    }

    /// Every lease ever taken, by shard.
    pub fn leases(&self) -> Result<Vec<ShardLease>> {
        Ok(self
            .db
            .leases()?
            .into_iter()
            .map(|l| ShardLease {
                shard: l.shard,
                owner: l.owner,
                epoch: l.epoch,
                remaining_ms: l.remaining_ms,
            })
            .collect())
    }

    /// The shards this node holds (as of its last acquisition or renewal), with their epochs.
    pub fn held(&self) -> Vec<(u32, u64)> {
        let mut held: Vec<(u32, u64)> = self
            .membership
            .held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&s, &e)| (s, e))
            .collect();
        held.sort_unstable();
        held
    }

    /// Takes `shard` for `ttl` if it is free, released or expired; returns the new epoch, or `None`
    /// when a lease holds. The store forgets its cached state of the shard's agents, so their
    /// next write reads what the previous owner committed.
    pub fn acquire(&self, shard: u32, ttl: Duration) -> Result<Option<u64>> {
        self.check_shard(shard)?;
        let Some(epoch) = self.db.acquire(&self.membership.node, shard, ttl)? else {
            return Ok(None);
        };
        self.store
            .forget_states(|id| shard_of(id, self.membership.shards) == shard);
        self.membership
            .held
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(shard, epoch);
        Ok(Some(epoch))
    }

    /// Renews every lease this node holds for `ttl`, in one statement; returns those it still
    /// holds. A lease that expired first is lost: it is forgotten here, and writes of its agents
    /// fail as fenced from now on.
    pub fn renew(&self, ttl: Duration) -> Result<Vec<(u32, u64)>> {
        let renewed = self.db.renew(&self.membership.node, ttl)?;
        let mut held = self
            .membership
            .held
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        held.retain(|s, e| renewed.contains(&(*s, *e)));
        Ok(renewed)
    }

    /// Gives `shard` back (call after its agents' jobs have drained); returns whether this node
    /// held it.
    pub fn release(&self, shard: u32) -> Result<bool> {
        let epoch = self
            .membership
            .held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&shard)
            .copied();
        let Some(epoch) = epoch else {
            return Ok(false);
        };
        self.membership.drop_lease(shard, epoch);
        self.store
            .forget_states(|id| shard_of(id, self.membership.shards) == shard);
        self.db.release(&self.membership.node, shard, epoch)
    }

    /// Stops writing `shard` without telling the database (a node that could not renew in time
    /// fences itself; the lease then expires on its own).
    pub fn abandon(&self, shard: u32) {
        if let Some((_, epoch)) = self.held().into_iter().find(|(s, _)| *s == shard) {
            self.membership.drop_lease(shard, epoch);
        }
    }

    /// **Breaks fencing; for tests only.** From now on this node's write sets skip the
    /// database's lease check (owner, epoch, expiry), keeping only its own idea of what it holds:
    /// the negative control that shows the fencing tests fail without the check
    /// (`tests/all/postgres/cluster.rs`). Nothing else calls it.
    #[doc(hidden)]
    pub fn skip_lease_checks_for_negative_control(&self) {
        self.db.set_lease_check(false);
    }

    fn check_shard(&self, shard: u32) -> Result<()> {
        if shard >= self.membership.shards {
            return Err(StoreError::Invalid {
                what: "shard",
                reason: format!(
                    "shard {shard} is out of range: the cluster has {} shards",
                    self.membership.shards
                ),
            });
        }
        Ok(())
    }
}

impl Store {
    /// Opens a Postgres store as one node of a cluster: unlike [`Store::open_postgres`] the schema
    /// is not locked (several nodes share it), and every write is fenced by the lease of the
    /// agent's shard (see the [module](crate::cluster)); a write of an agent whose shard this node
    /// does not hold fails with [`StoreError::Fenced`].
    pub fn open_postgres_cluster(
        url: &str,
        options: PostgresOptions,
        cluster: ClusterOptions,
    ) -> Result<Store> {
        let node_ok = !cluster.node.is_empty()
            && cluster.node.len() <= 200
            && !cluster.node.chars().any(char::is_control);
        if !node_ok {
            return Err(StoreError::Invalid {
                what: "cluster options",
                reason: format!(
                    "node name {:?} must be 1 to 200 characters without control characters",
                    cluster.node
                ),
            });
        }
        if cluster.shards == 0 || cluster.shards > 1 << 20 {
            return Err(StoreError::Invalid {
                what: "cluster options",
                reason: format!("shards must be 1 to 1048576, not {}", cluster.shards),
            });
        }
        if cluster.statement_timeout.is_zero() {
            return Err(StoreError::Invalid {
                what: "cluster options",
                reason: "statement_timeout must be above zero".to_string(),
            });
        }
        let db = PgDb::open(
            url,
            &options.schema,
            options.pool_size,
            false,
            Some(cluster.statement_timeout),
        )?;
        db.set_cluster_timeout(cluster.statement_timeout);
        let cluster_id = db.store_id()?;
        let membership = Membership {
            node: cluster.node,
            shards: cluster.shards,
            cluster_id,
            held: RwLock::new(HashMap::new()),
        };
        Self::from_db_in_cluster(crate::backend::Db::Postgres(db), Some(membership))
    }

    /// The cluster operations, when this store was opened as a cluster node.
    pub fn cluster(&self) -> Option<ClusterView<'_>> {
        let membership = self.inner.cluster.as_ref()?;
        let db = self.inner.db.postgres()?;
        Some(ClusterView {
            store: self,
            membership,
            db,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    #[test]
    fn an_agents_shard_never_changes() {
        // Fixed values: a change here would move every agent of a running cluster.
        let id = AgentId::new("innkeeper").unwrap();
        assert_eq!(shard_of(&id, 4096), shard_of(&id, 4096));
        let shards: Vec<u32> = ["innkeeper", "smith", "npc00001"]
            .iter()
            .map(|n| shard_of(&AgentId::new(*n).unwrap(), 4096))
            .collect();
        assert_eq!(shards, PINNED);
    }

    const PINNED: [u32; 3] = [3488, 1832, 2364];

    #[test]
    fn agents_spread_evenly_over_shards() {
        let mut counts = vec![0u32; 64];
        for i in 0..64_000 {
            let id = AgentId::new(format!("npc{i:05}")).unwrap();
            counts[shard_of(&id, 64) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 850 && *max < 1150, "min {min} max {max}");
    }

    #[test]
    fn rendezvous_moves_only_the_shards_of_a_node_that_leaves() {
        let three = nodes(&["a", "b", "c"]);
        let two = nodes(&["a", "b"]);
        let (mut moved, mut owned_by_c) = (0, 0);
        for shard in 0..4096 {
            let before = rendezvous(shard, &three).unwrap();
            let after = rendezvous(shard, &two).unwrap();
            if before == "c" {
                owned_by_c += 1;
            } else {
                assert_eq!(before, after, "shard {shard} moved though its owner stayed");
            }
            moved += usize::from(before != after);
        }
        assert_eq!(moved, owned_by_c);
        assert!((1200..1550).contains(&owned_by_c), "c owned {owned_by_c}");
        // Every shard has exactly one wanted owner.
        let total: usize = three
            .iter()
            .map(|n| wanted_shards(n, &three, 4096).len())
            .sum();
        assert_eq!(total, 4096);
        assert_eq!(rendezvous(0, &[]), None);
    }
}
