//! `AgentActor`: the thin actix shell around an [`Agent`]. Handlers are a line or two; jobs run as
//! spawned futures (`ResponseActFuture`, not `AtomicResponse`), so the actor keeps taking input
//! while the LLM works, and a slow agent never blocks the others on its Arbiter. Which job runs
//! when is the agent's [`JobQueue`] and [`TickCadence`] (plain components in `agent/`); the actor
//! only does what they decide.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use somna_core::config::{AgentConfig, AgentOverrides};
use tokio::sync::oneshot;

use crate::agent::cadence::TickCadence;
use crate::agent::queue::{Admission, AfterJob, JobQueue};
use crate::agent::{Agent, ConfigureError, Job, JobKind, JobOutcome};
use crate::protocol::{AgentStatus, Inbound, InboundError};
use crate::protocol::{CompactionOutcome, SleepResult, UncompactError, UncompactResult};
use crate::scheduler::Tired;
use crate::stats::{TickStats, TurnStats};
use crate::ticker::{self, TickShared};
use crate::work;
use somna_store::StoreError;

/// Input for the agent.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), InboundError>")]
pub(crate) struct Input(pub Inbound);

/// Input another node enqueued in the cluster's inbox, under its inbox key.
#[derive(Message)]
#[rtype(result = "Result<(), InboundError>")]
pub(crate) struct InboxInput {
    pub key: Vec<u8>,
    pub input: Inbound,
}

/// Run one tick now (tests and tools; the actor also ticks on its own timer).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Tick;

/// Sleep now: consolidation, reflection, compaction at the sleep threshold. A `tired` sleep (one
/// the scheduler brought forward because a turn left the agent near its emergency threshold,
/// `scheduler::Tired`) compacts, and consolidates only when a full batch of journal entries
/// waits: the scheduled sleep consolidates the rest, so that sleeping early costs no more LLM
/// calls than the emergency it replaces.
#[derive(Debug, Message)]
#[rtype(result = "SleepResult")]
pub(crate) struct Sleep {
    pub tired: bool,
}

/// Compact now (`force`: manual, ignoring thresholds; else at the sleep threshold).
#[derive(Debug, Message)]
#[rtype(result = "CompactionOutcome")]
pub(crate) struct Compact {
    pub force: bool,
}

/// The agent's status.
#[derive(Debug, Message)]
#[rtype(result = "Result<AgentStatus, StoreError>")]
pub(crate) struct Status;

/// Change the agent's config at run time (persisted).
#[derive(Debug, Message)]
#[rtype(result = "Result<AgentConfig, ConfigureError>")]
pub(crate) struct Configure(pub AgentOverrides);

/// Stop ticking and answer once no job is in flight (or at once if none is).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Drain(pub oneshot::Sender<()>);

pub use crate::agent::queue::MAX_DEFERRED;

/// A request that needs the agent free; it waits in the [`JobQueue`] while a job is in flight.
#[derive(Debug)]
enum Deferred {
    /// A sleep (tired or not) and where its answer goes.
    Sleep(bool, oneshot::Sender<SleepResult>),
    Compact(bool, oneshot::Sender<CompactionOutcome>),
    Uncompact(u64, oneshot::Sender<UncompactResult>),
}

/// Undo the compaction whose summary is at this seq. Runs between jobs, never during one.
#[derive(Debug, Message)]
#[rtype(result = "UncompactResult")]
pub(crate) struct Uncompact(pub u64);

/// The actor: an [`Agent`], its [`JobQueue`] and its [`TickCadence`], and where jobs run.
#[derive(Debug)]
pub(crate) struct AgentActor {
    agent: Agent,
    /// Which job runs when: the one in flight, the requests behind it, the drain.
    queue: JobQueue<Deferred>,
    /// When the first tick is due (handed to the thread's tick driver when the actor starts).
    cadence: Option<TickCadence>,
    /// What the actor and its thread's tick driver share ([`crate::ticker`]).
    ticker: TickShared,
    stats: Arc<TickStats>,
    /// Where jobs run: a worker pool apart from the Arbiters, so a slow step (a blocking store
    /// read, the builtin provider's CPU work) never delays another agent's tick.
    jobs: tokio::runtime::Handle,
    /// The scheduler, told when a turn leaves the agent tired (`None`: no scheduled sleeps).
    scheduler: Option<Recipient<Tired>>,
    /// Told the scheduler since the last sleep or compaction: not told again every turn.
    told_tired: bool,
    /// Where each turn's work time is recorded.
    turns: Arc<TurnStats>,
    /// The time spent appending the inputs the next step answers.
    input_work: Duration,
}

impl AgentActor {
    /// Wraps `agent`; it ticks every `tick_every` (real time), first after `first_tick_after`.
    pub fn new(
        agent: Agent,
        tick_every: Duration,
        first_tick_after: Duration,
        stats: Arc<TickStats>,
        turns: Arc<TurnStats>,
        jobs: tokio::runtime::Handle,
        scheduler: Option<Recipient<Tired>>,
    ) -> Self {
        AgentActor {
            agent,
            queue: JobQueue::new(),
            cadence: Some(TickCadence::new(tick_every, first_tick_after)),
            ticker: TickShared::default(),
            stats,
            jobs,
            scheduler,
            told_tired: false,
            turns,
            input_work: Duration::ZERO,
        }
    }

    /// Runs `job` on the worker pool; the future resolves on the actor's Arbiter with the job's
    /// outcome and the time its polls took.
    fn run_job(
        &self,
        job: Job,
    ) -> impl std::future::Future<Output = (JobOutcome, Duration)> + 'static {
        let handle = self.jobs.spawn(work::timed_polls(job.run()));
        async move {
            handle.await.unwrap_or_else(|e| {
                let out = JobOutcome {
                    error: Some(format!("the job stopped: {e}")),
                    ..JobOutcome::default()
                };
                (out, Duration::ZERO)
            })
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.queue.is_free() {
            let started = std::time::Instant::now();
            match self.agent.tick() {
                Ok(Some(job)) => {
                    // A step is a turn: its work so far is the inputs' and this tick's.
                    let turn = (job.kind == JobKind::Step)
                        .then(|| std::mem::take(&mut self.input_work) + started.elapsed());
                    self.spawn_turn(job, ctx, turn, |_| {});
                }
                Ok(None) => {}
                Err(e) => tracing::error!(agent = %self.agent.id(), error = %e, "tick failed"),
            }
        }
        self.settle();
    }

    /// Tells the tick driver whether the next tick could do anything (`Agent::wants_tick`).
    /// Called after everything that can change the answer; an idle tick cannot.
    fn settle(&self) {
        self.ticker
            .set_attention(self.queue.is_free() && self.agent.wants_tick());
    }

    /// Runs `job` on the worker pool; when it ends, the agent takes its outcome, `reply` gets it,
    /// and what the queue says comes next starts.
    fn spawn(
        &mut self,
        job: Job,
        ctx: &mut Context<Self>,
        reply: impl FnOnce(JobOutcome) + 'static,
    ) {
        self.spawn_turn(job, ctx, None, reply);
    }

    /// [`AgentActor::spawn`] of a job that may be a turn: `turn` is the time the turn's work
    /// took before the job (its inputs, its tick); the job's polls and the handling of its outcome
    /// are added to it, and a step that replied is recorded in the [`TurnStats`].
    fn spawn_turn(
        &mut self,
        job: Job,
        ctx: &mut Context<Self>,
        turn: Option<Duration>,
        reply: impl FnOnce(JobOutcome) + 'static,
    ) {
        self.queue.started();
        let kind = job.kind;
        ctx.spawn(
            self.run_job(job)
                .into_actor(self)
                .map(move |(out, job_work), act, ctx| {
                    let started = turn.map(|_| std::time::Instant::now());
                    act.agent.finish(kind, &out);
                    let (tired, replied) = (out.tired, out.replied);
                    reply(out);
                    act.after(kind, tired);
                    // Recorded before what the queue starts next, which is not this turn's work.
                    if let (Some(turn), Some(started), true) = (turn, started, replied) {
                        act.turns.record(turn + job_work + started.elapsed());
                    }
                    act.job_done(ctx);
                    act.settle();
                }),
        );
    }

    /// Takes input (the handlers of `Input` and `InboxInput`); the append's time goes to the
    /// step that answers it.
    fn take_input(
        &mut self,
        take: impl FnOnce(&mut Agent) -> Result<(), InboundError>,
    ) -> Result<(), InboundError> {
        let started = std::time::Instant::now();
        let result = take(&mut self.agent);
        self.settle();
        self.input_work += started.elapsed();
        result
    }

    /// After a job of `kind`: a turn that left the agent `tired` (a sleep now would compact,
    /// [`JobOutcome::tired`]) tells the scheduler once, which brings its sleep forward; a sleep or
    /// a compaction lets it tell again.
    fn after(&mut self, kind: JobKind, tired: bool) {
        match kind {
            JobKind::Step | JobKind::Emergency { .. } => {
                if tired && !self.told_tired {
                    if let Some(scheduler) = &self.scheduler {
                        scheduler.do_send(Tired(self.agent.id().clone()));
                        self.told_tired = true;
                    }
                }
            }
            JobKind::Sleep { .. } | JobKind::Compact { .. } => self.told_tired = false,
        }
    }

    /// Runs `op` now if the agent is free, else queues it behind the job in flight, else refuses it.
    fn run_or_defer(&mut self, op: Deferred, ctx: &mut Context<Self>) {
        match self.queue.admit(op) {
            Admission::RunNow(op) => self.start(op, ctx),
            Admission::Queued => {}
            Admission::Refused(op) => refuse(op),
        }
    }

    /// Starts `op` (a request the agent is free for). A sleep or compaction the agent cannot run
    /// now (it waits on host tools) is answered `Busy`.
    fn start(&mut self, op: Deferred, ctx: &mut Context<Self>) {
        match op {
            Deferred::Sleep(tired, tx) => match self.agent.sleep(tired) {
                Some(job) => {
                    self.spawn(job, ctx, move |out| drop(tx.send(out.into_sleep_result())))
                }
                None => drop(tx.send(SleepResult::Busy)),
            },
            Deferred::Compact(force, tx) => match self.agent.compact(force) {
                Some(job) => self.spawn(job, ctx, move |out| {
                    drop(tx.send(out.into_compaction_outcome()))
                }),
                None => drop(tx.send(CompactionOutcome::Busy)),
            },
            Deferred::Uncompact(seq, tx) => {
                // A quick store transaction: runs in place, then the queue moves on.
                let result = self.agent.uncompact(seq).map_err(UncompactError::Store);
                let _ = tx.send(result);
                self.job_done(ctx);
                self.settle();
            }
        }
    }

    fn job_done(&mut self, ctx: &mut Context<Self>) {
        match self.queue.finished() {
            AfterJob::Run(op) => self.start(op, ctx),
            AfterJob::Idle => {}
            AfterJob::Stopped(refused) => refused.into_iter().for_each(refuse),
        }
    }
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(256);
        self.settle();
        if let Some(cadence) = self.cadence.take() {
            ticker::register(
                cadence,
                &mut self.ticker,
                ctx.address().recipient(),
                Arc::clone(&self.stats),
            );
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.ticker.stop();
    }
}

impl Handler<Input> for AgentActor {
    type Result = Result<(), InboundError>;
    fn handle(&mut self, msg: Input, _: &mut Context<Self>) -> Self::Result {
        self.take_input(|agent| agent.inbound(msg.0))
    }
}

impl Handler<InboxInput> for AgentActor {
    type Result = Result<(), InboundError>;
    fn handle(&mut self, msg: InboxInput, _: &mut Context<Self>) -> Self::Result {
        self.take_input(|agent| agent.inbound_from_inbox(&msg.key, msg.input))
    }
}

impl Handler<Tick> for AgentActor {
    type Result = ();
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        self.tick(ctx);
    }
}

impl Handler<Sleep> for AgentActor {
    type Result = ResponseFuture<SleepResult>;
    fn handle(&mut self, msg: Sleep, ctx: &mut Context<Self>) -> Self::Result {
        self.ask(ctx, |tx| Deferred::Sleep(msg.tired, tx), SleepResult::Busy)
    }
}

impl Handler<Compact> for AgentActor {
    type Result = ResponseFuture<CompactionOutcome>;
    fn handle(&mut self, msg: Compact, ctx: &mut Context<Self>) -> Self::Result {
        self.ask(
            ctx,
            |tx| Deferred::Compact(msg.force, tx),
            CompactionOutcome::Busy,
        )
    }
}

impl Handler<Uncompact> for AgentActor {
    type Result = ResponseFuture<UncompactResult>;
    fn handle(&mut self, msg: Uncompact, ctx: &mut Context<Self>) -> Self::Result {
        self.ask(
            ctx,
            |tx| Deferred::Uncompact(msg.0, tx),
            Err(UncompactError::Busy),
        )
    }
}

impl AgentActor {
    /// Runs or queues the request `op` makes around its answer's sender; the answer, or `busy`
    /// when the request was dropped unanswered.
    fn ask<T: Send + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        op: impl FnOnce(oneshot::Sender<T>) -> Deferred,
        busy: T,
    ) -> ResponseFuture<T> {
        let (tx, rx) = oneshot::channel();
        self.run_or_defer(op(tx), ctx);
        Box::pin(async move { rx.await.unwrap_or(busy) })
    }
}

/// Answers a request that cannot run.
fn refuse(op: Deferred) {
    match op {
        Deferred::Sleep(_, tx) => drop(tx.send(SleepResult::Busy)),
        Deferred::Compact(_, tx) => drop(tx.send(CompactionOutcome::Busy)),
        Deferred::Uncompact(_, tx) => drop(tx.send(Err(UncompactError::Busy))),
    }
}

impl Handler<Status> for AgentActor {
    type Result = Result<AgentStatus, StoreError>;
    fn handle(&mut self, _: Status, _: &mut Context<Self>) -> Self::Result {
        self.agent.status()
    }
}

impl Handler<Configure> for AgentActor {
    type Result = Result<AgentConfig, ConfigureError>;
    fn handle(&mut self, msg: Configure, _: &mut Context<Self>) -> Self::Result {
        let config = self.agent.configure(msg.0)?;
        self.ticker.set_every(self.agent.tick_period());
        self.settle();
        Ok(config)
    }
}

impl Handler<Drain> for AgentActor {
    type Result = ();
    fn handle(&mut self, msg: Drain, _: &mut Context<Self>) {
        self.ticker.stop();
        self.queue.drain(msg.0);
    }
}
