//! The runtime as one node of a cluster (`somna run --cluster`): a membership task that, every
//! `[cluster] renew_every`, heartbeats, renews this node's shard leases in one statement, works out
//! by rendezvous hashing over the live nodes which shards it should own ([`RoundPlan`], decided
//! without the database), gives back (after draining their agents) those it no longer wins, and
//! acquires — at most `acquire_per_round` a round — those it wins, starting their agents on a
//! loader task (so renewals keep their cadence while a takeover loads thousands of agents); and an
//! inbox task that delivers the inputs other nodes enqueued. The store fences every write by the
//! lease (somna-store's `cluster`), so a node that lost a lease cannot write even before the
//! membership task notices.
//!
//! The tasks run on the runtime's job pool; what they do with the store (blocking calls) runs on
//! its blocking threads. They hold the runtime weakly and end when it is dropped or when
//! `Runtime::shutdown` says stop (the watch channel handed to [`start`]).
//!
//! Self-fencing: a node that could not renew for `lease_ttl − renew_every` (its leases may be about
//! to expire, or a survivor may already hold them) stops all its agents and forgets its leases.
//! On losing a shard by a renewal (it expired, e.g. after the process was stopped) its agents stop
//! at once.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc, watch};

use somna_core::AgentId;
use somna_core::config::{AgentConfig, ClusterSection};
use somna_store::cluster::{shard_of, wanted_shards};

use super::{Inner, Runtime};
use crate::ops;

/// Starts the membership and inbox tasks of a runtime whose store is a cluster node, on the
/// node's own cluster worker (never behind agents' jobs: a renewal that waits loses the leases).
/// They hold the runtime weakly and end when it is dropped or `stop` turns true.
pub(super) fn start(runtime: &Runtime, section: &ClusterSection, stop: watch::Receiver<bool>) {
    let handle = &cluster_handle(runtime);
    let weak = Arc::downgrade(&runtime.inner);
    handle.spawn(membership(weak.clone(), section.clone(), stop.clone()));
    handle.spawn(inbox(weak, section.clone(), stop));
}

/// The node's own cluster worker (the job pool when it has none).
fn cluster_handle(runtime: &Runtime) -> tokio::runtime::Handle {
    runtime
        .inner
        .cluster_tasks
        .as_ref()
        .unwrap_or(&runtime.inner.jobs)
        .handle
        .clone()
}

/// Resolves once `stop` turns true, or at once when its sender is gone (the runtime dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// What the membership task keeps between rounds.
struct Membership {
    section: ClusterSection,
    loader: Loader,
    /// When the last successful renewal started (the leases run from no earlier than that).
    last_renewed: Instant,
}

/// The membership task: a [`round`] every `renew_every` (sooner while it catches up), until the
/// runtime is dropped or stopped.
async fn membership(weak: Weak<Inner>, section: ClusterSection, mut stop: watch::Receiver<bool>) {
    let loader = Loader::start(&weak, section.shards);
    let mut state = Membership {
        section,
        loader: loader.clone(),
        last_renewed: Instant::now(),
    };
    loop {
        if *stop.borrow() {
            return;
        }
        let Some(inner) = weak.upgrade() else { return };
        let started = Instant::now();
        // The round's store calls block: they run on a blocking thread of the pool.
        let ran = tokio::task::spawn_blocking(move || {
            let runtime = Runtime { inner };
            let more = round(
                &runtime,
                &state.section,
                &state.loader,
                &mut state.last_renewed,
            )
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cluster round failed");
                false
            });
            (state, more)
        })
        .await;
        let more;
        (state, more) = match ran {
            Ok(ran) => ran,
            Err(e) => {
                tracing::error!(error = %e, "a cluster round panicked: this node stops taking part");
                return;
            }
        };
        // A round that took its quota of shards and wins more is followed sooner (at the latest
        // after a quarter period; at once when the loader is done): the agents of a shard nobody
        // holds are not running (a dead node's, or ones another node gave back).
        let period = if more {
            state.section.renew_every / CATCH_UP
        } else {
            state.section.renew_every
        };
        let left = period.saturating_sub(started.elapsed());
        tokio::select! {
            () = tokio::time::sleep(left) => {}
            () = loader.idle(), if more => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// How much more often rounds come while a node wins more shards than its per-round quota let it
/// take.
const CATCH_UP: u32 = 4;

/// One round: heartbeat and renew, rebalance. `last_renewed` is when the last successful renewal
/// started (the leases run from no earlier than that). True when the node wins more shards than
/// it now holds and could not take them yet (its quota was taken, or `loader` still loads the
/// agents of earlier ones).
fn round(
    runtime: &Runtime,
    section: &ClusterSection,
    loader: &Loader,
    last_renewed: &mut Instant,
) -> Result<bool, somna_store::StoreError> {
    let store = runtime.inner.store.clone();
    let Some(view) = store.cluster() else {
        return Ok(false);
    };
    let (mut acquired, mut released) = (0usize, 0usize);
    let before: BTreeSet<u32> = view.held().into_iter().map(|(s, _)| s).collect();
    let attempt = Instant::now();
    let renewed = view
        .heartbeat()
        .and_then(|()| view.renew(section.lease_ttl));
    let held: BTreeSet<u32> = match renewed {
        Ok(held) => {
            *last_renewed = attempt;
            held.into_iter().map(|(s, _)| s).collect()
        }
        Err(e) => {
            let margin = section.lease_ttl.saturating_sub(section.renew_every);
            if last_renewed.elapsed() >= margin {
                tracing::error!(
                    error = %e,
                    "cannot renew shard leases for {:?}: stopping every agent of this node",
                    last_renewed.elapsed()
                );
                for shard in &before {
                    view.abandon(*shard);
                }
                unload_shards(runtime, &before, section.shards);
            }
            return Err(e);
        }
    };
    let lost: BTreeSet<u32> = before.difference(&held).copied().collect();
    if !lost.is_empty() {
        tracing::warn!(shards = ?lost, "shard leases lost (expired before renewal): stopping their agents");
        unload_shards(runtime, &lost, section.shards);
    }

    let live = live_nodes(
        view.node(),
        view.nodes()?.into_iter().map(|n| (n.node, n.heartbeat_age)),
        section.lease_ttl,
    );
    let plan = RoundPlan::decide(
        view.node(),
        &live,
        &held,
        section.shards,
        loader.is_idle(),
        section.acquire_per_round,
    );

    // Give back what another node wins now, after its agents have drained (one pass over the
    // hosted agents for all of them).
    unload_shards(runtime, &plan.release, section.shards);
    for &shard in &plan.release {
        if view.release(shard)? {
            released += 1;
        }
    }

    // Take what this node wins and nobody holds, a bounded number per round.
    let mut candidates: Option<HashMap<u32, Vec<AgentConfig>>> = None;
    let mut starting = Vec::new();
    for &shard in &plan.missing {
        if acquired >= plan.quota {
            break;
        }
        if view.acquire(shard, section.lease_ttl)?.is_none() {
            continue;
        }
        acquired += 1;
        let by_shard = match &mut candidates {
            Some(c) => c,
            None => candidates.insert(agents_by_shard(runtime, section.shards)?),
        };
        starting.extend(by_shard.remove(&shard).unwrap_or_default());
    }
    loader.load(starting);
    tracing::debug!(
        held = view.held().len(),
        acquired,
        released,
        lost = lost.len(),
        nodes = live.len(),
        "cluster round"
    );
    Ok(plan.more_after(acquired))
}

/// The nodes a round counts as alive: those whose heartbeat is younger than a lease (`nodes`:
/// name and heartbeat age), and always `me`.
fn live_nodes(
    me: &str,
    nodes: impl IntoIterator<Item = (String, Duration)>,
    lease_ttl: Duration,
) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .into_iter()
        .filter(|(_, age)| *age < lease_ttl)
        .map(|(name, _)| name)
        .collect();
    if !names.iter().any(|n| n == me) {
        names.push(me.to_string());
    }
    names
}

/// What one membership round does with the shards, decided from what it read (no database):
/// which held shards to give back (another live node wins them now), which missing ones to try to
/// take, and how many it may take this round.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RoundPlan {
    /// Held shards another live node wins: unloaded, then released.
    release: BTreeSet<u32>,
    /// Shards this node wins and does not hold, in order: tried until `quota` are acquired.
    missing: Vec<u32>,
    /// How many shards it may acquire this round: `acquire_per_round`, or none while the loader
    /// still starts the agents of earlier ones (the quota bounds what a node loads at once).
    quota: usize,
}

impl RoundPlan {
    /// The plan of `node` among the `live` nodes holding `held` of `shards` shards.
    fn decide(
        node: &str,
        live: &[String],
        held: &BTreeSet<u32>,
        shards: u32,
        loader_idle: bool,
        acquire_per_round: u32,
    ) -> RoundPlan {
        let wanted: BTreeSet<u32> = wanted_shards(node, live, shards).into_iter().collect();
        RoundPlan {
            release: held.difference(&wanted).copied().collect(),
            missing: wanted.difference(held).copied().collect(),
            quota: if loader_idle {
                acquire_per_round as usize
            } else {
                0
            },
        }
    }

    /// Whether another round should follow soon after this one acquired `acquired`: its quota
    /// was used up and shards it wins are still missing.
    fn more_after(&self, acquired: usize) -> bool {
        acquired >= self.quota && self.missing.len() > acquired
    }
}

/// Starts the agents of acquired shards on a task of its own, so the membership task keeps
/// renewing (and, cut off from the database, fences itself) on time however long a takeover's
/// loading takes, or hangs on a dead connection. Cheap to clone; the task ends when every handle
/// is dropped.
#[derive(Clone)]
struct Loader {
    queue: mpsc::UnboundedSender<Vec<AgentConfig>>,
    /// Agents handed over and not yet started (or given up).
    pending: Arc<AtomicUsize>,
    /// Told when `pending` comes back to zero.
    done: Arc<Notify>,
}

impl Loader {
    /// The loader task of the runtime `weak` holds, on the current runtime (the job pool).
    fn start(weak: &Weak<Inner>, shards: u32) -> Loader {
        let (queue, mut batches) = mpsc::unbounded_channel::<Vec<AgentConfig>>();
        let loader = Loader {
            queue,
            pending: Arc::new(AtomicUsize::new(0)),
            done: Arc::new(Notify::new()),
        };
        let (weak, pending, done) = (
            weak.clone(),
            Arc::clone(&loader.pending),
            Arc::clone(&loader.done),
        );
        tokio::spawn(async move {
            while let Some(batch) = batches.recv().await {
                let n = batch.len();
                if let Some(inner) = weak.upgrade() {
                    let started = tokio::task::spawn_blocking(move || {
                        start_agents(&Runtime { inner }, batch, shards);
                    })
                    .await;
                    if let Err(e) = started {
                        tracing::error!(error = %e, "starting the agents of acquired shards panicked");
                    }
                }
                if pending.fetch_sub(n, Ordering::SeqCst) == n {
                    done.notify_waiters();
                }
            }
        });
        loader
    }

    fn is_idle(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// Resolves once every agent handed over is started (or given up).
    async fn idle(&self) {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            // Registered before the check, so a batch that ends in between is not missed.
            done.as_mut().enable();
            if self.is_idle() {
                return;
            }
            done.await;
        }
    }

    fn load(&self, configs: Vec<AgentConfig>) {
        if configs.is_empty() {
            return;
        }
        self.pending.fetch_add(configs.len(), Ordering::SeqCst);
        let n = configs.len();
        if self.queue.send(configs).is_err() {
            self.pending.fetch_sub(n, Ordering::SeqCst);
        }
    }
}

/// Starts the agents of shards just acquired, several at once: a load is a handful of store round
/// trips (record, journal, history tail, open tool calls). Half the store's connections load; the
/// rest serve the ticks of the agents already hosted. An agent whose shard this node no longer
/// holds (lost or given back meanwhile) is not started, or stopped again if the shard went while
/// it loaded: the membership thread's unloading either saw it hosted or this check sees the shard
/// gone.
fn start_agents(runtime: &Runtime, configs: Vec<AgentConfig>, shards: u32) {
    let Some(view) = runtime.inner.store.cluster() else {
        return;
    };
    let holds = |id: &AgentId| {
        let shard = shard_of(id, shards);
        view.held().iter().any(|&(s, _)| s == shard)
    };
    let workers =
        (runtime.inner.config.store.pool_size as usize / 2).clamp(1, configs.len().max(1));
    let queue = Mutex::new(configs.into_iter());
    let next = || queue.lock().unwrap_or_else(PoisonError::into_inner).next();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(config) = next() {
                    let id = config.id.clone();
                    if !holds(&id) {
                        continue;
                    }
                    if let Err(e) = runtime.spawn(config) {
                        tracing::warn!(agent = %id, error = %e, "cannot start an agent of an acquired shard");
                    } else if !holds(&id) {
                        runtime.inner.jobs.handle.block_on(runtime.unload(&id));
                    }
                }
            });
        }
    });
}

/// Every agent this node could host (runtime.toml's and the store's, not retired), by shard.
fn agents_by_shard(
    runtime: &Runtime,
    shards: u32,
) -> Result<HashMap<u32, Vec<AgentConfig>>, somna_store::StoreError> {
    let config = &runtime.inner.config;
    let mut by_shard: HashMap<u32, Vec<AgentConfig>> = HashMap::new();
    let mut seen: BTreeSet<AgentId> = BTreeSet::new();
    for c in &config.agents {
        seen.insert(c.id.clone());
        by_shard
            .entry(shard_of(&c.id, shards))
            .or_default()
            .push(c.clone());
    }
    for record in runtime.inner.store.agents()? {
        if record.retired || seen.contains(&record.id) {
            continue;
        }
        by_shard
            .entry(shard_of(&record.id, shards))
            .or_default()
            .push(ops::base_config(config, &record.id));
    }
    Ok(by_shard)
}

/// Stops (drains, then forgets) every hosted agent of `shards`.
fn unload_shards(runtime: &Runtime, shards: &BTreeSet<u32>, count: u32) {
    let ids: Vec<AgentId> = runtime
        .agent_ids()
        .into_iter()
        .filter(|id| shards.contains(&shard_of(id, count)))
        .collect();
    if ids.is_empty() {
        return;
    }
    let handle = runtime.inner.jobs.handle.clone();
    handle.block_on(async {
        for id in &ids {
            runtime.unload(id).await;
        }
    });
}

/// The NATS subject of this cluster's inbox wake-ups: `somna.<cluster id>.inbox`, the cluster id
/// being the random one its store made (`ClusterView::id`), so that clusters sharing a NATS
/// server never wake each other's pollers.
fn wake_subject(runtime: &Runtime) -> Option<String> {
    let cluster = runtime.inner.store.cluster()?;
    Some(format!("somna.{}.inbox", cluster.id()))
}

/// The NATS subject of this cluster's live events, `somna.<cluster id>.events` (each node
/// publishes its own and relays the others' to its subscribers: an SSE client on any node sees
/// every agent's events, and never another cluster's).
fn events_subject(runtime: &Runtime) -> Option<String> {
    let cluster = runtime.inner.store.cluster()?;
    Some(format!("somna.{}.events", cluster.id()))
}

/// An event on the events subject ([`events_subject`]): which node emitted it, and the event.
#[derive(serde::Serialize, serde::Deserialize)]
struct NodeEvent {
    node: String,
    #[serde(flatten)]
    stamped: crate::protocol::Stamped,
}

/// The inbox task: every `poll_every`, or at once on a NATS wake-up, it delivers the inputs
/// other nodes enqueued for the agents this node hosts.
async fn inbox(weak: Weak<Inner>, section: ClusterSection, mut stop: watch::Receiver<bool>) {
    // A wake-up that comes while a pass runs is kept (one permit): bursts coalesce into one pass.
    let wake = Arc::new(Notify::new());
    let mut subscribed = false;
    let mut rounds: u64 = 0;
    loop {
        if *stop.borrow() {
            return;
        }
        let Some(inner) = weak.upgrade() else { return };
        let runtime = Runtime { inner };
        // (Re)connect to NATS now and then until it works; a subscription survives outages
        // (the client reconnects by itself).
        if !section.nats_url.is_empty() && !subscribed && rounds % 10 == 0 {
            subscribed = subscribe(&runtime, &section, Arc::clone(&wake)).await;
        }
        rounds += 1;
        match tokio::task::spawn_blocking(move || deliver(&runtime)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot read the cluster inbox"),
            Err(e) => tracing::error!(error = %e, "delivering the cluster inbox panicked"),
        }
        tokio::select! {
            () = tokio::time::sleep(section.poll_every) => {}
            () = wake.notified() => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// Connects to NATS (once) and forwards every wake-up on the store's subject to `wake`.
async fn subscribe(runtime: &Runtime, section: &ClusterSection, wake: Arc<Notify>) -> bool {
    // On the cluster worker too: on the job pool, the task publishing this node's events fell
    // behind under load (`events not published to the cluster (lagging)`).
    let handle = cluster_handle(runtime);
    // Credentials go to the client apart from the URL: async-nats logs the URL it connects to
    // (at debug level), password included.
    let url = section.nats_url.expose();
    let credentials = somna_core::config::url_credentials(url)
        .map(|c| (c.bare_url(), c.user.to_string(), c.password.to_string()));
    let (url, credentials) = match credentials {
        Some((bare, user, password)) => (bare, Some((user, password))),
        None => (url.to_string(), None),
    };
    let connected = async move {
        let options = match credentials {
            Some((user, password)) => async_nats::ConnectOptions::with_user_and_password(user, password),
            None => async_nats::ConnectOptions::new(),
        };
        let client = tokio::time::timeout(Duration::from_secs(5), options.connect(url)).await;
        match client {
            Ok(Ok(client)) => Some(client),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot connect to NATS: inputs arrive by polling the inbox");
                None
            }
            Err(_) => {
                tracing::warn!("connecting to NATS timed out: inputs arrive by polling the inbox");
                None
            }
        }
    }
    .await;
    let Some(client) = connected else {
        return false;
    };
    let (Some(wake_subject), Some(events_subject)) =
        (wake_subject(runtime), events_subject(runtime))
    else {
        return false;
    };
    let subscription = client.subscribe(wake_subject).await;
    let mut subscription = match subscription {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot subscribe to NATS inbox wake-ups");
            return false;
        }
    };
    let events = match client.subscribe(events_subject.clone()).await {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot subscribe to the cluster's events on NATS");
            None
        }
    };
    let _ = runtime.inner.nats.set(client.clone());
    handle.spawn(async move {
        use futures::StreamExt as _;
        while subscription.next().await.is_some() {
            wake.notify_one();
        }
    });
    fan_out_events(runtime, &handle, &client, events_subject, events);
    true
}

/// Publishes this node's events to the others and relays theirs to this node's subscribers.
fn fan_out_events(
    runtime: &Runtime,
    handle: &tokio::runtime::Handle,
    client: &async_nats::Client,
    subject: String,
    incoming: Option<async_nats::Subscriber>,
) {
    let Some(node) = runtime.inner.store.cluster().map(|v| v.node().to_string()) else {
        return;
    };
    let mut local = runtime.inner.events.subscribe_local();
    let (publisher, me) = (client.clone(), node.clone());
    handle.spawn(async move {
        loop {
            let stamped = match local.recv().await {
                Ok(stamped) => stamped,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "events not published to the cluster (lagging)");
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            let event = NodeEvent {
                node: me.clone(),
                stamped,
            };
            let Ok(payload) = serde_json::to_vec(&event) else {
                continue;
            };
            if let Err(e) = publisher.publish(subject.clone(), payload.into()).await {
                tracing::debug!(error = %e, "an event was not published to the cluster");
            }
        }
    });
    let Some(mut incoming) = incoming else {
        return;
    };
    let bus = runtime.inner.events.clone();
    handle.spawn(async move {
        use futures::StreamExt as _;
        while let Some(message) = incoming.next().await {
            match serde_json::from_slice::<NodeEvent>(&message.payload) {
                Ok(event) if event.node != node => bus.relay(event.stamped),
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "an event from NATS does not parse"),
            }
        }
    });
}

/// Publishes a wake-up for the inbox (best effort: the owner's poll covers a lost one).
pub(super) fn wake(runtime: &Runtime) {
    let (Some(client), Some(subject)) = (runtime.inner.nats.get().cloned(), wake_subject(runtime))
    else {
        return;
    };
    runtime.inner.jobs.handle.spawn(async move {
        if let Err(e) = client.publish(subject, Vec::<u8>::new().into()).await {
            tracing::debug!(error = %e, "NATS wake-up not sent");
        }
    });
}

/// Delivers every waiting input whose agent this node hosts, in order, each exactly once.
fn deliver(runtime: &Runtime) -> Result<usize, somna_store::StoreError> {
    let items = runtime.inner.store.inbox(10_000)?;
    let mut delivered = 0;
    let handle = runtime.inner.jobs.handle.clone();
    for item in items {
        let Ok(addr) = runtime.addr(&item.agent) else {
            continue;
        };
        let input: crate::Inbound = match serde_json::from_slice(&item.payload) {
            Ok(input) => input,
            Err(e) => {
                tracing::error!(agent = %item.agent, error = %e, "an inbox entry does not parse: dropped");
                runtime
                    .inner
                    .store
                    .discard_from_inbox(&item.agent, &item.key)?;
                continue;
            }
        };
        let sent = handle.block_on(addr.send(super::actor::InboxInput {
            key: item.key.clone(),
            input,
        }));
        match sent {
            Ok(Ok(())) => delivered += 1,
            Ok(Err(crate::protocol::InboundError::Store(e))) => {
                // Fenced (the shard moved) or a storage failure: the entry stays for the owner.
                tracing::debug!(agent = %item.agent, error = %e, "inbox delivery failed; will retry");
            }
            Ok(Err(refused)) => {
                tracing::warn!(agent = %item.agent, error = %refused, "an inbox input was refused by its agent: dropped");
                runtime
                    .inner
                    .store
                    .discard_from_inbox(&item.agent, &item.key)?;
            }
            Err(_) => {}
        }
    }
    Ok(delivered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose job pool is busy for several lease periods (every worker held by synchronous
    /// work, as agents' jobs under load hold them with store calls) keeps its leases: the
    /// membership task runs on the node's own worker. On the job pool it could not renew, lost
    /// every lease, and fenced its own agents (the cluster bench: 51 of 500 sleeps answered).
    #[actix_rt::test]
    async fn a_node_whose_job_pool_is_busy_keeps_its_leases() {
        let Some(url) = somna_testkit::pg_url_or_skip() else {
            return;
        };
        let schema = format!("rt_busy_pool_{}", std::process::id());
        let store = somna_store::Store::open_postgres_cluster(
            &url,
            somna_store::PostgresOptions {
                schema: schema.clone(),
                pool_size: 4,
            },
            somna_store::ClusterOptions {
                node: "busy-node".into(),
                shards: 4,
                statement_timeout: Duration::from_secs(2),
            },
        )
        .unwrap();
        let toml = "[cluster]\nshards = 4\nrenew_every = \"100ms\"\nlease_ttl = \"1s\"\n\
                    [[agents]]\nid = \"ada\"\n[[agents]]\nid = \"bob\"\n";
        let cfg = somna_core::config::ResolvedConfig::load(toml, "test.toml", &[]).unwrap();
        let runtime = Runtime::start(
            cfg,
            store.clone(),
            Arc::new(somna_llm::BuiltinClient::new()),
            crate::RuntimeOptions {
                schedule_sleeps: false,
                ..Default::default()
            },
        )
        .unwrap();
        let view = store.cluster().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while view.held().len() < 4 {
            assert!(Instant::now() < deadline, "the node never took its shards");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let epochs = |leases: Vec<somna_store::ShardLease>| -> Vec<(u32, u64)> {
            leases.into_iter().map(|l| (l.shard, l.epoch)).collect()
        };
        let before = epochs(view.leases().unwrap());

        // Every worker of the job pool (and as many again queued) held for three lease periods.
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let busy: Vec<_> = (0..workers * 2)
            .map(|_| {
                runtime
                    .inner
                    .jobs
                    .handle
                    .spawn(async { std::thread::sleep(Duration::from_secs(3)) })
            })
            .collect();
        for task in busy {
            task.await.unwrap();
        }

        let after = view.leases().unwrap();
        assert!(
            after
                .iter()
                .all(|l| l.remaining_ms > 0 && l.owner.as_deref() == Some("busy-node")),
            "the node lost leases while its job pool was busy: {after:?}"
        );
        assert_eq!(epochs(after), before, "leases were lost and taken again");
        runtime.shutdown(Duration::from_secs(5)).await.unwrap();
        drop((runtime, store));
        let _ = somna_store::Store::temporary_postgres_in(&url, &schema);
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_lone_node_takes_every_shard_a_quota_at_a_time() {
        let plan = RoundPlan::decide("a", &names(&["a"]), &BTreeSet::new(), 8, true, 3);
        assert!(plan.release.is_empty());
        assert_eq!(plan.missing, (0..8).collect::<Vec<_>>());
        assert_eq!(plan.quota, 3);
        assert!(plan.more_after(3), "five still missing: another round soon");
        assert!(!plan.more_after(8));
        // While the loader still starts earlier agents, nothing is taken, and more is wanted.
        let busy = RoundPlan::decide("a", &names(&["a"]), &BTreeSet::new(), 8, false, 3);
        assert_eq!(busy.quota, 0);
        assert!(busy.more_after(0));
    }

    #[test]
    fn a_node_gives_back_what_a_newcomer_wins_and_keeps_the_rest() {
        let all: BTreeSet<u32> = (0..64).collect();
        let plan = RoundPlan::decide("a", &names(&["a", "b"]), &all, 64, true, 8);
        let b_wins: BTreeSet<u32> = wanted_shards("b", &names(&["a", "b"]), 64)
            .into_iter()
            .collect();
        assert_eq!(plan.release, b_wins);
        assert!(plan.missing.is_empty());
        assert!(!plan.release.is_empty() && plan.release.len() < 64);
        // And b, holding nothing, wants exactly those.
        let b = RoundPlan::decide("b", &names(&["a", "b"]), &BTreeSet::new(), 64, true, 64);
        assert_eq!(b.missing.iter().copied().collect::<BTreeSet<_>>(), b_wins);
    }

    #[test]
    fn the_shards_of_a_node_whose_heartbeat_is_older_than_a_lease_go_to_the_survivors() {
        let ttl = Duration::from_secs(6);
        let live = live_nodes(
            "a",
            [
                ("a".to_string(), Duration::from_secs(1)),
                ("b".to_string(), Duration::from_secs(7)),
            ],
            ttl,
        );
        assert_eq!(live, names(&["a"]));
        // A node that has not written its first heartbeat yet counts itself.
        assert_eq!(live_nodes("c", [], ttl), names(&["c"]));
        let mine: BTreeSet<u32> = wanted_shards("a", &names(&["a", "b"]), 16)
            .into_iter()
            .collect();
        let plan = RoundPlan::decide("a", &live, &mine, 16, true, 16);
        assert!(plan.release.is_empty());
        assert_eq!(plan.missing.len(), 16 - mine.len(), "b's shards too");
    }
}
