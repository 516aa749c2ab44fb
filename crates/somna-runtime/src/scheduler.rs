//! The `Scheduler` actor: sends `Sleep` to each agent every `sleep_every`, with jitter so thousands of
//! agents don't sleep at once, and never more than `max_concurrent_sleeps` at a time. An agent
//! whose usage passed its sleep threshold after a turn says it is [`Tired`]: its sleep is brought
//! forward to now (sent at once when a place is free, else as soon as one frees), so that the
//! compaction runs at the sleep threshold, with consolidation before it, instead of as an
//! emergency in the middle of the conversation. The timing logic is the plain [`SleepPlan`]; the
//! actor only drives it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use somna_core::AgentId;

use crate::actor::Sleep;
use crate::clock::Clock;
use crate::protocol::SleepResult;

/// One agent's place in the sleep schedule.
#[derive(Debug, Clone)]
struct Slot {
    /// Real time between sleeps.
    every: Duration,
    /// Real jitter bound: each sleep is due `every` plus an offset in `[0, jitter)` after the last.
    jitter: Duration,
    next_at: Instant,
    /// How many sleeps were scheduled (varies the jitter).
    cycle: u64,
    sleeping: bool,
    /// Due because it is tired ([`SleepPlan::tired`]), not by the schedule (until it is sent).
    tired: bool,
}

/// The schedule, without actix: which agents are due, and when each is due next.
#[derive(Debug, Default)]
pub struct SleepPlan {
    slots: HashMap<AgentId, Slot>,
    /// How many slots have each period, so that the shortest is known without a scan: a scan
    /// on every registration made starting 100,000 agents quadratic (seconds of the
    /// scheduler's time, long after `Runtime::start` returned).
    periods: std::collections::BTreeMap<Duration, usize>,
    max_concurrent: usize,
    in_flight: usize,
}

impl SleepPlan {
    /// An empty plan that allows `max_concurrent` sleeps at once.
    pub fn new(max_concurrent: usize) -> Self {
        SleepPlan {
            slots: HashMap::new(),
            periods: std::collections::BTreeMap::new(),
            max_concurrent: max_concurrent.max(1),
            in_flight: 0,
        }
    }

    /// Adds (or re-times) an agent; its first sleep is one period (with jitter) from `now`. A
    /// re-timed agent whose sleep is in flight keeps it counted until it ends ([`SleepPlan::finished`]).
    pub fn register(&mut self, id: AgentId, every: Duration, jitter: Duration, now: Instant) {
        let every = every.max(Duration::from_millis(1));
        let first = now + every + jitter_for(&id, 0, jitter);
        let sleeping = self.slots.get(&id).is_some_and(|s| s.sleeping);
        *self.periods.entry(every).or_default() += 1;
        let replaced = self.slots.insert(
            id,
            Slot {
                every,
                jitter,
                next_at: first,
                cycle: 0,
                sleeping,
                tired: false,
            },
        );
        if let Some(old) = replaced {
            self.forget_period(old.every);
        }
    }

    fn forget_period(&mut self, every: Duration) {
        if let Some(n) = self.periods.get_mut(&every) {
            *n -= 1;
            if *n == 0 {
                self.periods.remove(&every);
            }
        }
    }

    /// Moves a registered agent's next sleep to `at` (its durable schedule; a past `at` is due at
    /// the next look, once).
    pub fn due_at(&mut self, id: &AgentId, at: Instant) {
        if let Some(s) = self.slots.get_mut(id) {
            s.next_at = at;
        }
    }

    /// Brings `id`'s next sleep forward to `now` (it is tired: usage passed its sleep threshold).
    /// True when that changed anything: not when it is asleep or already due.
    pub fn tired(&mut self, id: &AgentId, now: Instant) -> bool {
        match self.slots.get_mut(id) {
            Some(s) if !s.sleeping && s.next_at > now => {
                s.next_at = now;
                s.tired = true;
                true
            }
            _ => false,
        }
    }

    /// Removes an agent.
    pub fn unregister(&mut self, id: &AgentId) {
        if let Some(slot) = self.slots.remove(id) {
            self.forget_period(slot.every);
            if slot.sleeping {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
        }
    }

    /// The agents due at `now`, up to the concurrency cap, marked as sleeping (oldest due first).
    pub fn due(&mut self, now: Instant) -> Vec<AgentId> {
        let mut due: Vec<(Instant, AgentId)> = self
            .slots
            .iter()
            .filter(|(_, s)| !s.sleeping && s.next_at <= now)
            .map(|(id, s)| (s.next_at, id.clone()))
            .collect();
        due.sort();
        let room = self.max_concurrent.saturating_sub(self.in_flight);
        due.truncate(room);
        for (_, id) in &due {
            if let Some(s) = self.slots.get_mut(id) {
                s.sleeping = true;
                self.in_flight += 1;
            }
        }
        due.into_iter().map(|(_, id)| id).collect()
    }

    /// Whether `id`'s sleep (due now) was brought forward because it is tired; asked once, as
    /// the sleep is sent.
    pub fn take_tired(&mut self, id: &AgentId) -> bool {
        self.slots
            .get_mut(id)
            .is_some_and(|s| std::mem::take(&mut s.tired))
    }

    /// Marks `id`'s sleep finished and schedules its next one (plus its jitter): `next_in` from
    /// `now` when the sleep recorded when its next is due (the durable schedule, which a tired
    /// sleep leaves as it was unless it ran once that time had come; the plan follows it so that
    /// it never sends a sleep before the record has it due), else a period on (no sleep ran: the
    /// agent was busy).
    pub fn finished(&mut self, id: &AgentId, now: Instant, next_in: Option<Duration>) {
        if let Some(s) = self.slots.get_mut(id) {
            if s.sleeping {
                s.sleeping = false;
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            s.tired = false;
            s.cycle += 1;
            // Jitter on top, never before the record's time.
            let jitter = jitter_for(id, s.cycle, s.jitter);
            s.next_at = now + next_in.unwrap_or(s.every) + jitter;
        }
    }

    /// Sleeps in flight.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// How often the actor should look: a tenth of the shortest period, between 5 ms and 1 s.
    pub fn poll_every(&self) -> Duration {
        self.periods
            .keys()
            .next()
            .map_or(Duration::from_secs(1), |every| *every / 10)
            .clamp(Duration::from_millis(5), Duration::from_secs(1))
    }
}

/// A deterministic offset in `[0, jitter)` for an agent's n-th sleep (FNV-1a of id and cycle).
fn jitter_for(id: &AgentId, cycle: u64, jitter: Duration) -> Duration {
    if jitter.is_zero() {
        return Duration::ZERO;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_str().bytes().chain(cycle.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let nanos = jitter.as_nanos().min(u128::from(u64::MAX)) as u64;
    Duration::from_nanos(h % nanos.max(1))
}

/// Register an agent with the scheduler.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Register {
    pub id: AgentId,
    pub sleeper: Recipient<Sleep>,
    /// Real time between sleeps.
    pub every: Duration,
    /// Real jitter bound.
    pub jitter: Duration,
    /// Real time until the first sleep (the agent's durable schedule; zero when overdue);
    /// `None`: one period (with jitter) from now.
    pub first_in: Option<Duration>,
}

/// Remove an agent from the schedule.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Unregister(pub AgentId);

/// An agent's usage passed its sleep threshold after a turn: bring its sleep forward to now.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Tired(pub AgentId);

/// Stop scheduling sleeps.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct StopScheduling;

/// The actor that drives a [`SleepPlan`].
#[derive(Debug)]
pub struct Scheduler {
    plan: SleepPlan,
    /// The runtime's clock: the durable schedule's times are in it.
    clock: Clock,
    sleepers: HashMap<AgentId, Recipient<Sleep>>,
    poll: Option<SpawnHandle>,
    poll_every: Duration,
    stopped: bool,
}

impl Scheduler {
    /// A scheduler allowing `max_concurrent` sleeps at once, on the runtime's `clock`.
    pub fn new(max_concurrent: usize, clock: Clock) -> Self {
        Scheduler {
            plan: SleepPlan::new(max_concurrent),
            clock,
            sleepers: HashMap::new(),
            poll: None,
            poll_every: Duration::from_secs(1),
            stopped: false,
        }
    }

    fn repoll(&mut self, ctx: &mut Context<Self>) {
        let every = self.plan.poll_every();
        if self.poll.is_some() && every == self.poll_every {
            return;
        }
        if let Some(h) = self.poll.take() {
            ctx.cancel_future(h);
        }
        self.poll_every = every;
        self.poll = Some(ctx.run_interval(every, |act, ctx| act.dispatch(ctx)));
    }

    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        if self.stopped {
            return;
        }
        for id in self.plan.due(Instant::now()) {
            let Some(sleeper) = self.sleepers.get(&id).cloned() else {
                self.plan.unregister(&id);
                continue;
            };
            let tired = self.plan.take_tired(&id);
            let request = sleeper.send(Sleep { tired });
            ctx.spawn(request.into_actor(self).map(move |res, act, ctx| {
                let next_in = match res {
                    Ok(SleepResult::Busy) => {
                        tracing::debug!(agent = %id, "agent busy; sleep skipped until its next turn");
                        None
                    }
                    Ok(SleepResult::Slept {
                        next_sleep_at: Some(at),
                        ..
                    }) => {
                        let wait = Duration::from_millis(at.0.saturating_sub(act.clock.now().0));
                        Some(act.clock.to_real(wait))
                    }
                    _ => None,
                };
                act.plan.finished(&id, Instant::now(), next_in);
                // A freed place goes at once to whoever waits for one (a tired agent).
                act.dispatch(ctx);
            }));
        }
    }
}

impl Actor for Scheduler {
    type Context = Context<Self>;
}

impl Handler<Register> for Scheduler {
    type Result = ();
    fn handle(&mut self, msg: Register, ctx: &mut Context<Self>) {
        let now = Instant::now();
        self.plan
            .register(msg.id.clone(), msg.every, msg.jitter, now);
        if let Some(first_in) = msg.first_in {
            self.plan.due_at(&msg.id, now + first_in);
        }
        self.sleepers.insert(msg.id, msg.sleeper);
        self.repoll(ctx);
    }
}

impl Handler<Unregister> for Scheduler {
    type Result = ();
    fn handle(&mut self, msg: Unregister, _: &mut Context<Self>) {
        self.plan.unregister(&msg.0);
        self.sleepers.remove(&msg.0);
    }
}

impl Handler<Tired> for Scheduler {
    type Result = ();
    fn handle(&mut self, msg: Tired, ctx: &mut Context<Self>) {
        if !self.stopped && self.plan.tired(&msg.0, Instant::now()) {
            tracing::debug!(agent = %msg.0, "tired: sleep brought forward");
            self.dispatch(ctx);
        }
    }
}

impl Handler<StopScheduling> for Scheduler {
    type Result = ();
    fn handle(&mut self, _: StopScheduling, ctx: &mut Context<Self>) {
        self.stopped = true;
        if let Some(h) = self.poll.take() {
            ctx.cancel_future(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> AgentId {
        AgentId::new(s).unwrap()
    }

    #[test]
    fn the_poll_follows_the_shortest_period_through_re_timing_and_removal() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut plan = SleepPlan::new(2);
        assert_eq!(plan.poll_every(), s(1), "nothing registered");
        plan.register(id("a"), s(60), Duration::ZERO, t0);
        plan.register(id("b"), s(5), Duration::ZERO, t0);
        assert_eq!(plan.poll_every(), Duration::from_millis(500));
        // b re-timed to a longer period: its old one no longer counts.
        plan.register(id("b"), s(30), Duration::ZERO, t0);
        assert_eq!(plan.poll_every(), s(1), "a tenth of 30 s, at most 1 s");
        plan.register(id("c"), Duration::from_millis(200), Duration::ZERO, t0);
        assert_eq!(plan.poll_every(), Duration::from_millis(20));
        plan.unregister(&id("c"));
        plan.unregister(&id("c"));
        assert_eq!(plan.poll_every(), s(1));
        plan.unregister(&id("a"));
        plan.unregister(&id("b"));
        assert!(plan.periods.is_empty());
    }

    #[test]
    fn caps_concurrency_and_reschedules() {
        let t0 = Instant::now();
        let mut plan = SleepPlan::new(2);
        for n in ["a", "b", "c"] {
            plan.register(id(n), Duration::from_secs(10), Duration::ZERO, t0);
        }
        assert!(plan.due(t0 + Duration::from_secs(9)).is_empty());
        let first = plan.due(t0 + Duration::from_secs(10));
        assert_eq!(first.len(), 2, "the cap holds");
        assert_eq!(plan.in_flight(), 2);
        assert!(plan.due(t0 + Duration::from_secs(11)).is_empty(), "no room");
        plan.finished(&first[0], t0 + Duration::from_secs(12), None);
        let next = plan.due(t0 + Duration::from_secs(12));
        assert_eq!(next.len(), 1, "the third agent gets the freed place");
        assert!(!first.contains(&next[0]));
        // The finished agent is due again one period after it finished.
        assert!(!plan.due(t0 + Duration::from_secs(21)).contains(&first[0]));
        plan.finished(&next[0], t0 + Duration::from_secs(12), None);
        assert!(plan.due(t0 + Duration::from_secs(22)).contains(&first[0]));
    }

    #[test]
    fn a_tired_agent_is_due_at_once_within_the_cap() {
        let t0 = Instant::now();
        let mut plan = SleepPlan::new(1);
        for n in ["a", "b"] {
            plan.register(id(n), Duration::from_secs(100), Duration::ZERO, t0);
        }
        let t1 = t0 + Duration::from_secs(5);
        assert!(plan.tired(&id("a"), t1));
        assert!(!plan.tired(&id("a"), t1), "already due: nothing changes");
        assert!(!plan.tired(&id("nobody"), t1));
        assert_eq!(plan.due(t1), [id("a")]);
        assert!(!plan.tired(&id("a"), t1), "asleep: nothing changes");
        // At the cap, a tired agent waits for the place to free.
        assert!(plan.tired(&id("b"), t1));
        assert!(plan.due(t1).is_empty());
        // The tired sleep left the record's schedule as it was (due at t0 + 100): the plan
        // follows what the sleep reports.
        let t2 = t1 + Duration::from_secs(1);
        plan.finished(&id("a"), t2, Some(t0 + Duration::from_secs(100) - t2));
        assert_eq!(plan.due(t2), [id("b")]);
        assert!(plan.due(t0 + Duration::from_secs(99)).is_empty());
        // b's sleep came back busy (nothing ran, nothing reported): a period on.
        plan.finished(&id("b"), t2, None);
        assert_eq!(plan.due(t0 + Duration::from_secs(100)), [id("a")]);
        assert!(plan.due(t2 + Duration::from_secs(99)).is_empty());
        plan.finished(&id("a"), t0 + Duration::from_secs(100), None);
        assert_eq!(plan.due(t2 + Duration::from_secs(100)), [id("b")]);
    }

    #[test]
    fn re_timing_an_agent_asleep_keeps_its_place_counted() {
        let t0 = Instant::now();
        let mut plan = SleepPlan::new(1);
        plan.register(id("a"), Duration::from_secs(10), Duration::ZERO, t0);
        plan.register(id("b"), Duration::from_secs(10), Duration::ZERO, t0);
        let t1 = t0 + Duration::from_secs(10);
        let first = plan.due(t1);
        assert_eq!(first.len(), 1);
        // Re-timed (a configure of sleep_every) while asleep: still one in flight, not sent again.
        plan.register(first[0].clone(), Duration::from_secs(1), Duration::ZERO, t1);
        assert!(plan.due(t1 + Duration::from_secs(2)).is_empty());
        assert_eq!(plan.in_flight(), 1);
        plan.finished(&first[0], t1 + Duration::from_secs(2), None);
        assert_eq!(plan.in_flight(), 0);
        assert_eq!(
            plan.due(t1 + Duration::from_secs(2)).len(),
            1,
            "the place is free again"
        );
    }

    #[test]
    fn jitter_spreads_agents_within_bounds() {
        let jitter = Duration::from_secs(60);
        let offsets: Vec<Duration> = (0..100)
            .map(|i| jitter_for(&id(&format!("npc{i}")), 0, jitter))
            .collect();
        assert!(offsets.iter().all(|o| *o < jitter));
        let distinct: std::collections::HashSet<_> = offsets.iter().collect();
        assert!(distinct.len() > 90, "offsets are spread, not equal");
    }
}
