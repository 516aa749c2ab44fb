//! `Runtime`: hosts the agents. Loads them from the config and the store, spreads them over one
//! Arbiter per core, routes requests by id, owns the scheduler, and shuts down gracefully.
//!
//! Must be started inside an actix `System` (`actix::System::new().block_on(...)` or
//! `#[actix::main]`); [`run`] is the whole main job with shutdown injected as a future.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix::prelude::*;
use somna_core::AgentId;
use somna_core::config::{AgentConfig, AgentOverrides, ResolvedConfig};
use somna_llm::LlmClient;
use somna_store::Store;
use tokio::sync::{broadcast, oneshot};

use crate::actor::{self, AgentActor};
use crate::agent::{Agent, AgentDeps, ConfigureError};
use crate::clock::Clock;
use crate::compactor::Compactor;
use crate::events::EventBus;
use crate::gauges::{AgentGauge, AgentGauges, AgentGaugesSnapshot};
use crate::ops;
use crate::protocol::{AgentStatus, Inbound, InboundError};
use crate::protocol::{CompactionOutcome, SleepResult, Stamped, UncompactError};
use crate::scheduler::{self, Scheduler};
use crate::stats::{TickStats, TurnStats};

/// How long shutdown waits for in-flight jobs before abandoning them (a commit is atomic, so an
/// abandoned job loses nothing).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How often the store's live-history cache is swept: an agent's cached history goes once it has
/// not been read for one to two sweeps (see `somna_store::live`).
pub const HISTORY_CACHE_SWEEP: Duration = Duration::from_secs(5);

/// The threads that load a node's agents at start on Postgres (`Runtime::start`). 100,000 agents:
/// one thread 145 s, four 50 s (RSS +21 MB: each thread allocates in its own jemalloc arena),
/// eight 45 s (+77 MB).
const LOAD_THREADS: usize = 4;

/// Knobs of the runtime that are not in runtime.toml.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// The clock (accelerated for demos and tests).
    pub clock: Clock,
    /// Arbiters (threads) hosting agents; 0 = `[runtime] arbiters`, whose 0 means one per core.
    pub arbiters: usize,
    /// Events buffered per subscriber.
    pub event_capacity: usize,
    /// Whether the scheduler sends sleeps (tests may drive sleeps by hand).
    pub schedule_sleeps: bool,
    /// Semantic retrieval's embedder, if any. The runtime does not build it from `[embedder]`:
    /// pass `Semantic::from_config(&config.embedder)?` for what the config asks (the builtin
    /// embedder by default), as `somna run` does; `None` (the default here) retrieves by BM25
    /// alone.
    pub semantic: Option<crate::semantic::Semantic>,
    /// The bus to publish on: subscribe to it before [`Runtime::start`] to see the agents' very
    /// first events (their first tick may come before `start` returns). `None`: a new bus of
    /// `event_capacity`.
    pub events: Option<EventBus>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            clock: Clock::real(),
            arbiters: 0,
            event_capacity: 4096,
            schedule_sleeps: true,
            semantic: None,
            events: None,
        }
    }
}

/// A handle to the running runtime. Cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ResolvedConfig,
    store: Store,
    llm: Arc<dyn LlmClient>,
    compactor: Compactor,
    events: EventBus,
    clock: Clock,
    agents: RwLock<HashMap<AgentId, Hosted>>,
    arbiters: Vec<Arbiter>,
    next_arbiter: AtomicUsize,
    scheduler: Option<Addr<Scheduler>>,
    stats: Arc<TickStats>,
    /// How long each turn's work took.
    turns: Arc<TurnStats>,
    /// Agents by state and usage, counted by the agents themselves.
    gauges: AgentGauges,
    jobs: JobPool,
    /// A cluster node's own worker for its membership and inbox tasks, apart from the jobs: on
    /// the job pool, a node under load renewed its leases late (the tasks waited behind agents'
    /// jobs) and lost them, fencing its own agents (cluster mode only).
    cluster_tasks: Option<JobPool>,
    /// Turned true at shutdown: stops the cluster's membership and inbox tasks (cluster mode
    /// only).
    cluster_stop: tokio::sync::watch::Sender<bool>,
    /// The NATS client of a cluster node, once connected (inbox wake-ups).
    nats: std::sync::OnceLock<async_nats::Client>,
    /// Semantic retrieval's embedder, handed to every agent.
    semantic: Option<crate::semantic::Semantic>,
}

/// An agent the runtime hosts.
#[derive(Debug)]
struct Hosted {
    addr: Addr<AgentActor>,
    /// The agent's place in the gauges, released when the runtime stops hosting it (the actor may
    /// live on a while, finishing its job).
    gauge: Arc<AgentGauge>,
}

mod cluster;
mod error;

pub use error::{Result, RuntimeError};

/// The worker pool agents' jobs run on (LLM calls, compactions, store reads for prompts).
#[derive(Debug)]
struct JobPool {
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
}

impl JobPool {
    fn new(threads: usize) -> std::io::Result<Self> {
        Self::named(threads, "somna-job")
    }

    /// A pool of `threads` workers whose threads are called `name`.
    fn named(threads: usize, name: &str) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(name)
            .enable_all()
            .build()?;
        Ok(JobPool {
            handle: rt.handle().clone(),
            rt: Some(rt),
        })
    }
}

impl Drop for JobPool {
    fn drop(&mut self) {
        // Dropping a runtime inside an async context panics; this never blocks.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Runtime {
    /// Starts the runtime and every agent of `config` plus every agent already in the store (an
    /// agent created through the API earlier). Call inside an actix System.
    pub fn start(
        config: ResolvedConfig,
        store: Store,
        llm: Arc<dyn LlmClient>,
        options: RuntimeOptions,
    ) -> Result<Runtime> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = match (options.arbiters, config.runtime.arbiters as usize) {
            (0, 0) => cores,
            (0, from_config) => from_config,
            (explicit, _) => explicit,
        };
        let arbiters: Vec<Arbiter> = (0..n.max(1)).map(|_| Arbiter::new()).collect();
        let scheduler = options.schedule_sleeps.then(|| {
            Scheduler::new(config.runtime.max_concurrent_sleeps as usize, options.clock).start()
        });
        let compactor = Compactor::new(store.clone(), Arc::clone(&llm));
        let jobs = JobPool::new(cores).map_err(RuntimeError::JobPool)?;
        let cluster_tasks = store
            .cluster()
            .map(|_| JobPool::named(1, "somna-cluster"))
            .transpose()
            .map_err(RuntimeError::JobPool)?;
        let runtime = Runtime {
            inner: Arc::new(Inner {
                store: store.clone(),
                compactor,
                events: options
                    .events
                    .clone()
                    .unwrap_or_else(|| EventBus::new(options.event_capacity)),
                clock: options.clock,
                agents: RwLock::new(HashMap::new()),
                arbiters,
                next_arbiter: AtomicUsize::new(0),
                scheduler,
                stats: Arc::new(TickStats::default()),
                turns: Arc::new(TurnStats::default()),
                gauges: AgentGauges::new(),
                jobs,
                cluster_tasks,
                llm,
                config,
                cluster_stop: tokio::sync::watch::Sender::new(false),
                nats: std::sync::OnceLock::new(),
                semantic: options.semantic,
            }),
        };
        // The sweeper holds the runtime weakly: it ends with the runtime, or with its Arbiter.
        let weak = Arc::downgrade(&runtime.inner);
        runtime.inner.arbiters[0].spawn(async move {
            loop {
                tokio::time::sleep(HISTORY_CACHE_SWEEP).await;
                let Some(inner) = weak.upgrade() else { break };
                inner.store.sweep_history_cache();
            }
        });
        if store.cluster().is_some() {
            // A cluster node hosts the agents of the shards it acquires (see `cluster`).
            cluster::start(
                &runtime,
                &runtime.inner.config.cluster,
                runtime.inner.cluster_stop.subscribe(),
            );
            return Ok(runtime);
        }
        let mut configs: Vec<AgentConfig> = runtime.inner.config.agents.clone();
        let listed: HashSet<AgentId> = configs.iter().map(|c| c.id.clone()).collect();
        for record in store.agents()? {
            if record.retired || listed.contains(&record.id) {
                continue;
            }
            configs.push(ops::base_config(&runtime.inner.config, &record.id));
        }
        if store.backend_name() == "postgres" {
            for agent in runtime.load_all(&configs)? {
                runtime.start_agent(agent);
            }
        } else {
            // sled's reads are local: loading on one thread, each agent started as soon as it is
            // loaded, keeps every agent's memory in one allocator arena (loading 100,000 on eight
            // threads measured 113 MB more RSS and saved 0.2 s).
            for c in configs {
                runtime.spawn(c)?;
            }
        }
        Ok(runtime)
    }

    /// Loads the agents of `configs` (their records, the tail of their history, their pending
    /// tool calls), in order, on up to [`LOAD_THREADS`] threads: on Postgres a node's start is
    /// these reads, a round trip each.
    fn load_all(&self, configs: &[AgentConfig]) -> Result<Vec<Agent>> {
        let chunk = configs.len().div_ceil(LOAD_THREADS).max(1);
        std::thread::scope(|scope| {
            let loaders: Vec<_> = configs
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|config| {
                                Agent::load(config.clone(), self.deps())
                                    .map_err(|e| RuntimeError::Load(config.id.clone(), e))
                            })
                            .collect::<Result<Vec<Agent>>>()
                    })
                })
                .collect();
            let mut agents = Vec::with_capacity(configs.len());
            for loader in loaders {
                let part = loader
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                agents.extend(part);
            }
            Ok(agents)
        })
    }

    fn deps(&self) -> AgentDeps {
        AgentDeps {
            store: self.inner.store.clone(),
            llm: Arc::clone(&self.inner.llm),
            compactor: self.inner.compactor.clone(),
            events: self.inner.events.clone(),
            clock: self.inner.clock,
            gauges: self.inner.gauges.clone(),
            semantic: self.inner.semantic.clone(),
        }
    }

    /// Starts an actor for `config` on the next Arbiter.
    fn spawn(&self, config: AgentConfig) -> Result<()> {
        let id = config.id.clone();
        let agent = Agent::load(config, self.deps()).map_err(|e| RuntimeError::Load(id, e))?;
        self.start_agent(agent);
        Ok(())
    }

    /// Starts an actor for the loaded `agent` on the next Arbiter.
    fn start_agent(&self, agent: Agent) {
        let id = agent.id().clone();
        let tick = self.inner.clock.to_real(agent.config().tick_every);
        let timing = sleep_timing(&self.inner.clock, agent.config());
        // The durable schedule: the first sleep when the record says (at once when overdue).
        let now = self.inner.clock.now();
        let first_in = agent.next_sleep_at().map(|at| {
            let due = Duration::from_millis(at.0.saturating_sub(now.0));
            self.inner.clock.to_real(due)
        });
        // Spread first ticks over one period so thousands of agents don't tick in lockstep.
        let n = self.inner.next_arbiter.fetch_add(1, Ordering::Relaxed);
        let offset = tick.mul_f64(((n as u64).wrapping_mul(2_654_435_761) % 1000) as f64 / 1000.0);
        let arbiter = &self.inner.arbiters[n % self.inner.arbiters.len()];
        let stats = Arc::clone(&self.inner.stats);
        let turns = Arc::clone(&self.inner.turns);
        let jobs = self.inner.jobs.handle.clone();
        let gauge = Arc::clone(agent.gauge());
        let scheduler = self
            .inner
            .scheduler
            .clone()
            .filter(|_| self.inner.config.runtime.sleep_when_tired)
            .map(Addr::recipient);
        let addr = AgentActor::start_in_arbiter(&arbiter.handle(), move |_| {
            AgentActor::new(agent, tick, offset, stats, turns, jobs, scheduler)
        });
        self.register_sleeps(&id, &addr, timing, first_in);
        if let Some(replaced) = self.write_agents().insert(id, Hosted { addr, gauge }) {
            replaced.gauge.release();
        }
    }

    /// Stops hosting `id`: forgets its actor and takes it out of the gauges.
    fn forget(&self, id: &AgentId) {
        if let Some(hosted) = self.write_agents().remove(id) {
            hosted.gauge.release();
        }
    }

    /// Puts the agent in the scheduler's plan (again, after a change of its sleep settings: its
    /// next sleep is one new period from now), its first sleep `first_in` from now when given.
    fn register_sleeps(
        &self,
        id: &AgentId,
        addr: &Addr<AgentActor>,
        (every, jitter): (Duration, Duration),
        first_in: Option<Duration>,
    ) {
        if let Some(s) = &self.inner.scheduler {
            s.do_send(scheduler::Register {
                id: id.clone(),
                sleeper: addr.clone().recipient(),
                every,
                jitter,
                first_in,
            });
        }
    }

    fn write_agents(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<AgentId, Hosted>> {
        self.inner
            .agents
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn addr(&self, id: &AgentId) -> Result<Addr<AgentActor>> {
        self.inner
            .agents
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .map(|h| h.addr.clone())
            .ok_or_else(|| RuntimeError::UnknownAgent(id.clone()))
    }

    /// Creates and starts a new agent with `overrides` (persisted) over its runtime.toml entry or
    /// the defaults. The policy is [`ops::create`], the one the offline CLI uses too.
    pub fn create_agent(&self, id: AgentId, overrides: AgentOverrides) -> Result<AgentConfig> {
        if self.addr(&id).is_ok() {
            return Err(RuntimeError::AgentExists(id));
        }
        let resolved = ops::create(
            &self.inner.config,
            &self.inner.store,
            &id,
            overrides,
            &self.inner.clock,
        )
        .map_err(|e| match e {
            ops::OpsError::Exists(id) | ops::OpsError::Retired(id) => RuntimeError::AgentExists(id),
            ops::OpsError::Invalid(id, errors) => {
                RuntimeError::Configure(id, ConfigureError::Invalid(errors))
            }
            ops::OpsError::Store(e) => RuntimeError::Store(e),
            e => RuntimeError::Ops(e),
        })?;
        self.spawn(ops::base_config(&self.inner.config, &id))?;
        Ok(resolved)
    }

    /// Stops hosting an agent and marks it retired in the store. Its history, archive and journal
    /// stay (nothing is deleted).
    pub async fn retire_agent(&self, id: &AgentId) -> Result<()> {
        let addr = self.addr(id)?;
        let (tx, rx) = oneshot::channel();
        addr.send(actor::Drain(tx))
            .await
            .map_err(|_| RuntimeError::Mailbox(id.clone()))?;
        let _ = tokio::time::timeout(DEFAULT_GRACE, rx).await;
        if let Some(s) = &self.inner.scheduler {
            s.do_send(scheduler::Unregister(id.clone()));
        }
        self.forget(id);
        self.inner.store.retire(id)?;
        self.durable_ack().await
    }

    /// Puts input for an agent hosted by another node of the cluster into the inbox.
    fn enqueue(&self, id: &AgentId, input: &Inbound) -> Result<()> {
        if input.is_blank() {
            return Err(RuntimeError::Input(id.clone(), InboundError::Empty));
        }
        let payload = serde_json::to_vec(input).map_err(|e| {
            RuntimeError::Input(
                id.clone(),
                InboundError::Store(somna_store::StoreError::Invalid {
                    what: "inbox input",
                    reason: e.to_string(),
                }),
            )
        })?;
        match self
            .inner
            .store
            .enqueue(id, payload, self.inner.clock.now())
        {
            Ok(_) => {}
            Err(somna_store::StoreError::UnknownAgent(id)) => {
                return Err(RuntimeError::UnknownAgent(id));
            }
            Err(e) => return Err(RuntimeError::Store(e)),
        }
        cluster::wake(self);
        Ok(())
    }

    /// Stops hosting an agent (drains its job, leaves the scheduler) without retiring it: a
    /// cluster node giving up the agent's shard.
    async fn unload(&self, id: &AgentId) {
        let Ok(addr) = self.addr(id) else { return };
        let (tx, rx) = oneshot::channel();
        if addr.send(actor::Drain(tx)).await.is_ok() {
            let _ = tokio::time::timeout(DEFAULT_GRACE, rx).await;
        }
        if let Some(s) = &self.inner.scheduler {
            s.do_send(scheduler::Unregister(id.clone()));
        }
        self.forget(id);
    }

    /// How many agents the runtime hosts (no list is built).
    pub fn agent_count(&self) -> usize {
        self.inner
            .agents
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// The ids of the hosted agents, sorted.
    pub fn agent_ids(&self) -> Vec<AgentId> {
        let mut ids: Vec<AgentId> = self
            .inner
            .agents
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// Sends input to an agent. Returns once the agent has appended it to its history and, with
    /// `[store] durable_acks` (the default), once it is flushed: an `Ok` input survives a process
    /// kill and power loss. The wait is a group commit in the store ([`Store::durable`]): the
    /// actor is not held during it, and one flush serves every input waiting at that moment.
    ///
    /// On a cluster node, input for an agent another node hosts goes to the store's inbox (one
    /// durable write) and the owner delivers it, exactly once, on its next inbox read (at once
    /// with a NATS wake-up, else within `[cluster] poll_every`).
    pub async fn send(&self, id: &AgentId, input: Inbound) -> Result<()> {
        if self.inner.store.cluster().is_some() && self.addr(id).is_err() {
            return self.enqueue(id, &input);
        }
        self.ask(id, actor::Input(input))
            .await?
            .map_err(|e| RuntimeError::Input(id.clone(), e))?;
        self.durable_ack().await
    }

    /// Runs one tick of an agent now.
    pub async fn tick(&self, id: &AgentId) -> Result<()> {
        self.ask(id, actor::Tick).await
    }

    /// An agent's status. On a cluster node, an agent another node runs is answered from its
    /// stored state (its `host` says which node runs it; its `state` is the one its stored
    /// history implies, not the other node's in-memory one).
    pub async fn status(&self, id: &AgentId) -> Result<AgentStatus> {
        if let Some(cluster) = self.inner.store.cluster()
            && self.addr(id).is_err()
        {
            return self.stored_status(id, &cluster);
        }
        self.ask(id, actor::Status)
            .await?
            .map_err(|e| RuntimeError::Status(id.clone(), e))
    }

    fn stored_status(
        &self,
        id: &AgentId,
        cluster: &somna_store::cluster::ClusterView<'_>,
    ) -> Result<AgentStatus> {
        let unknown = || RuntimeError::UnknownAgent(id.clone());
        if self.inner.store.agent(id)?.is_none_or(|r| r.retired) {
            return Err(unknown());
        }
        let base = ops::base_config(&self.inner.config, id);
        let agent = Agent::peek(base, self.deps())
            .map_err(|e| RuntimeError::Load(id.clone(), e))?
            .ok_or_else(unknown)?;
        let mut status = agent
            .status()
            .map_err(|e| RuntimeError::Status(id.clone(), e))?;
        status.host = lease_holder(cluster, id)?;
        Ok(status)
    }

    /// Compacts an agent now (`force`: ignore thresholds). With `[store] durable_acks`, answers
    /// once what the compaction wrote is flushed, as an input is acknowledged: an outcome the
    /// caller saw (its summary seq, its event in the log) survives a kill.
    pub async fn compact(&self, id: &AgentId, force: bool) -> Result<CompactionOutcome> {
        let outcome = self.ask(id, actor::Compact { force }).await?;
        self.durable_ack().await?;
        Ok(outcome)
    }

    /// Puts an agent to sleep now (consolidation, then compaction at the sleep threshold);
    /// answered once flushed, as [`Runtime::compact`].
    pub async fn sleep(&self, id: &AgentId) -> Result<SleepResult> {
        let result = self.ask(id, actor::Sleep { tired: false }).await?;
        self.durable_ack().await?;
        Ok(result)
    }

    /// With `[store] durable_acks`, waits until every write done so far is flushed (the store's
    /// group commit), so that what a command answered survives a kill. The runtime's commands
    /// wait for it themselves; a host that answers after [`Runtime::create_agent`] (synchronous)
    /// awaits it too.
    pub async fn durable_ack(&self) -> Result<()> {
        if self.inner.config.store.durable_acks {
            self.inner.store.durable().await?;
        }
        Ok(())
    }

    /// Sends `msg` to the agent's actor and waits for its answer (`Mailbox` when the actor is
    /// gone).
    async fn ask<M>(&self, id: &AgentId, msg: M) -> Result<M::Result>
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        AgentActor: Handler<M>,
    {
        self.hosted(id)?
            .send(msg)
            .await
            .map_err(|_| RuntimeError::Mailbox(id.clone()))
    }

    /// The actor of a hosted agent; on a cluster node, `NotHosted` (naming the node that runs
    /// it) for a live agent another node runs.
    fn hosted(&self, id: &AgentId) -> Result<Addr<AgentActor>> {
        let unknown = match self.addr(id) {
            Ok(addr) => return Ok(addr),
            Err(e) => e,
        };
        let Some(cluster) = self.inner.store.cluster() else {
            return Err(unknown);
        };
        if self.inner.store.agent(id)?.is_none_or(|r| r.retired) {
            return Err(unknown);
        }
        Err(RuntimeError::NotHosted {
            agent: id.clone(),
            host: lease_holder(&cluster, id)?,
        })
    }

    /// Undoes the compaction whose summary is at `summary_seq`. Where it runs is decided here: a
    /// hosted agent runs it between its jobs (never during a compaction) and emits an
    /// `uncompacted` event; an agent the runtime does not host (retired) is undone in one store
    /// transaction, since nothing else writes to it. `Busy` when the agent is stopping or has too
    /// many requests queued.
    pub async fn uncompact(
        &self,
        id: &AgentId,
        summary_seq: u64,
    ) -> Result<somna_store::UncompactOutcome> {
        let addr = match self.hosted(id) {
            Ok(addr) => addr,
            // Not hosted, not another node's: retired, or unknown to the store too.
            Err(RuntimeError::UnknownAgent(_)) => {
                if self.inner.store.agent(id)?.is_none() {
                    return Err(RuntimeError::UnknownAgent(id.clone()));
                }
                let now = self.inner.clock.now();
                let outcome = self.inner.store.uncompact(id, summary_seq, now)?;
                self.durable_ack().await?;
                return Ok(outcome);
            }
            Err(e) => return Err(e),
        };
        let outcome = match addr
            .send(actor::Uncompact(summary_seq))
            .await
            .map_err(|_| RuntimeError::Mailbox(id.clone()))?
        {
            Ok(outcome) => outcome,
            Err(UncompactError::Busy) => return Err(RuntimeError::Busy(id.clone())),
            Err(UncompactError::Store(e)) => return Err(RuntimeError::Store(e)),
        };
        self.durable_ack().await?;
        Ok(outcome)
    }

    /// Changes an agent's config at run time; persisted, so it survives a restart. Applied at
    /// once: a change of `sleep_every` or `sleep_jitter` re-registers the agent with the
    /// scheduler, so its next sleep is one new period from now.
    pub async fn configure(&self, id: &AgentId, changes: AgentOverrides) -> Result<AgentConfig> {
        let addr = self.hosted(id)?;
        let retimed = changes.sleep_every.is_some() || changes.sleep_jitter.is_some();
        let config = addr
            .send(actor::Configure(changes))
            .await
            .map_err(|_| RuntimeError::Mailbox(id.clone()))?
            .map_err(|e| RuntimeError::Configure(id.clone(), e))?;
        if retimed {
            self.register_sleeps(id, &addr, sleep_timing(&self.inner.clock, &config), None);
        }
        self.durable_ack().await?;
        Ok(config)
    }

    /// The prompt `id`'s next LLM call would receive if `input` arrived now, under `config` (its
    /// status's): retrieval as a turn does it — `input` embedded when semantic retrieval is on —,
    /// nothing written. The console's and the API's view of what an agent sees.
    pub async fn preview(
        &self,
        id: &AgentId,
        config: &AgentConfig,
        input: &str,
    ) -> Result<(crate::prompt::Prompt, crate::prompt::WorkingContext)> {
        let mut vector = None;
        if let Some(semantic) = &self.inner.semantic {
            let embedder = semantic.embedder.as_ref();
            if let Some(v) = crate::semantic::embed_query(embedder, id, input).await {
                vector = Some((embedder.model().to_string(), v));
            }
        }
        let semantic = vector.as_ref().map(|(m, v)| (m.as_str(), v.as_slice()));
        let now = self.inner.clock.now();
        Ok(crate::prompt::preview_with(
            &self.inner.store,
            id,
            config,
            input,
            semantic,
            now,
        )?)
    }

    /// A subscriber to every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Stamped> {
        self.inner.events.subscribe()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The resolved config the runtime started with.
    pub fn config(&self) -> &ResolvedConfig {
        &self.inner.config
    }

    /// The runtime's clock.
    pub fn clock(&self) -> Clock {
        self.inner.clock
    }

    /// The LLM client.
    pub fn llm(&self) -> &Arc<dyn LlmClient> {
        &self.inner.llm
    }

    /// Tick statistics.
    pub fn tick_stats(&self) -> &Arc<TickStats> {
        &self.inner.stats
    }

    /// How long each turn's work took on the runtime's threads (see [`TurnStats`] for what a
    /// turn's time holds).
    pub fn turn_stats(&self) -> &Arc<TurnStats> {
        &self.inner.turns
    }

    /// The hosted agents by state and by context usage (a read of shared counters: no agent is
    /// asked).
    pub fn agent_gauges(&self) -> AgentGaugesSnapshot {
        self.inner.gauges.snapshot()
    }

    /// Graceful shutdown: stop the scheduler and every agent's timer, let in-flight jobs finish
    /// (up to `grace`; an abandoned job loses nothing since commits are atomic), stop the
    /// Arbiters, and flush sled to disk.
    pub async fn shutdown(&self, grace: Duration) -> Result<()> {
        self.inner.cluster_stop.send_replace(true);
        if let Some(s) = &self.inner.scheduler {
            let _ = s.send(scheduler::StopScheduling).await;
        }
        let hosted: Vec<(AgentId, Hosted)> = self.write_agents().drain().collect();
        let mut waits = Vec::with_capacity(hosted.len());
        for (_, h) in &hosted {
            h.gauge.release();
            let (tx, rx) = oneshot::channel();
            h.addr.do_send(actor::Drain(tx));
            waits.push(rx);
        }
        let drained = tokio::time::timeout(grace, futures::future::join_all(waits)).await;
        if drained.is_err() {
            tracing::warn!(
                "shutdown: some in-flight jobs did not finish within {grace:?}; abandoning them"
            );
        }
        for a in &self.inner.arbiters {
            a.stop();
        }
        if let Some(view) = self.inner.store.cluster() {
            // Hand the shards over at once instead of letting their leases run out.
            for (shard, _) in view.held() {
                if let Err(e) = view.release(shard) {
                    tracing::warn!(shard, error = %e, "shutdown: cannot release a shard lease");
                }
            }
            if let Err(e) = view.leave() {
                tracing::warn!(error = %e, "shutdown: cannot leave the cluster's node list");
            }
        }
        let flushed = self.inner.store.flush()?;
        tracing::info!(bytes = flushed, "shutdown: store flushed");
        Ok(())
    }
}

/// Real time between an agent's sleeps and the real jitter bound, from its config.
fn sleep_timing(clock: &Clock, config: &AgentConfig) -> (Duration, Duration) {
    let jitter = if config.sleep_jitter.is_zero() {
        Duration::ZERO
    } else {
        clock.to_real(config.sleep_jitter)
    };
    (clock.to_real(config.sleep_every), jitter)
}

/// The node whose live lease holds `id`'s shard (`None`: none right now).
fn lease_holder(
    cluster: &somna_store::cluster::ClusterView<'_>,
    id: &AgentId,
) -> Result<Option<String>> {
    let shard = cluster.shard_of(id);
    Ok(cluster
        .leases()?
        .into_iter()
        .find(|l| l.shard == shard && l.remaining_ms > 0)
        .and_then(|l| l.owner))
}

/// The main job: start the runtime, run until `shutdown` resolves, then shut down gracefully.
/// `on_start` gets the handle (to feed input, subscribe to events, serve an API).
pub async fn run<F, S>(
    config: ResolvedConfig,
    store: Store,
    llm: Arc<dyn LlmClient>,
    options: RuntimeOptions,
    on_start: S,
    shutdown: F,
) -> Result<Runtime>
where
    F: Future<Output = ()>,
    S: FnOnce(&Runtime),
{
    let runtime = Runtime::start(config, store, llm, options)?;
    on_start(&runtime);
    shutdown.await;
    tracing::info!("shutting down");
    runtime.shutdown(DEFAULT_GRACE).await?;
    Ok(runtime)
}

#[cfg(test)]
mod hosting_tests {
    use super::*;

    /// A runtime of `agents` over a temporary store and the builtin (offline) LLM.
    fn start(agents: &[&str]) -> Runtime {
        let mut text = String::from("[defaults]\ntick_every = \"20ms\"\nsleep_every = \"1h\"\n");
        for a in agents {
            text.push_str(&format!("[[agents]]\nid = \"{a}\"\n"));
        }
        let config = ResolvedConfig::load(&text, "t.toml", &[]).unwrap();
        let options = RuntimeOptions {
            arbiters: 1,
            schedule_sleeps: false,
            ..RuntimeOptions::default()
        };
        let llm = Arc::new(somna_llm::BuiltinClient::new());
        Runtime::start(config, Store::temporary().unwrap(), llm, options).unwrap()
    }

    /// A cluster node gives up agents by unloading them (not retiring): the gauges stop counting
    /// them at once and keep adding up to the agents hosted.
    #[actix::test]
    async fn unloaded_agents_leave_the_gauges() {
        let runtime = start(&["ada", "bob", "cy"]);
        assert_eq!(runtime.agent_gauges().agents(), 3);
        runtime.unload(&AgentId::new("bob").unwrap()).await;
        let g = runtime.agent_gauges();
        assert_eq!(runtime.agent_ids().len(), 2);
        assert_eq!(g.agents(), 2);
        assert_eq!(g.by_usage.iter().sum::<u64>(), 2);
        // Unloading an agent that is not hosted changes nothing.
        runtime.unload(&AgentId::new("bob").unwrap()).await;
        assert_eq!(runtime.agent_gauges().agents(), 2);
        runtime.shutdown(Duration::from_secs(5)).await.unwrap();
        assert_eq!(runtime.agent_gauges().agents(), 0);
    }
}
