//! The tick driver: one per Arbiter thread, it keeps every agent actor started on that thread on a
//! timer wheel (a bucket per millisecond) and wakes once for all the ticks due together.
//!
//! Each agent is still an actor with its own tick loop and its own emergency check: the driver
//! only decides whether waking the actor is worth it. The actor keeps one flag up to date,
//! [`TickShared::set_attention`]: whether a tick now could do anything (input waits, host tools
//! are pending, a retry is due, usage is at the emergency threshold; `Agent::wants_tick`). It
//! recomputes the flag after everything that can change the answer (an input, a job's end, a
//! run-time config change, a tick), none of which is an idle tick; and every
//! [`FULL_CHECK_EVERY`] ticks the actor is woken anyway. So an idle tick costs the driver a
//! bucket push, two atomic loads and a lateness count on the thread (added to the shared
//! [`TickStats`] once per run of the driver), and the actor is not woken;
//! before (a timer per actor, `run_later`), each idle tick cost a timer registration, a boxed
//! closure, a context poll and two store reads (issue 26, item 3; docs/benchmarks.md).
//!
//! Per-agent `tick_every` and its run-time changes ([`TickShared::set_every`]), the first tick's
//! offset (the spread over the period) and the skipping of ticks missed during a stall are the
//! [`TickCadence`]'s, as before.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use actix::Recipient;
use tokio::sync::Notify;

use crate::actor::Tick;
use crate::agent::cadence::TickCadence;
use crate::stats::{LatenessBatch, TickStats};

/// Every this many ticks the driver wakes an agent's actor even when it said it has nothing to
/// do: history written behind the agent's back (an offline `somna import` into a Postgres store
/// it is hosted from) is then still met by the emergency check, at most this many ticks late.
/// Amortized, a full tick (about 5 µs) adds 0.08 µs to each idle one.
pub(crate) const FULL_CHECK_EVERY: u32 = 64;

/// An agent's flag bits, in its driver's [`FlagPage`]s: a tick now could do something (the
/// driver sends the actor a `Tick`).
const ATTENTION: u8 = 1;
/// The actor is draining or stopped: the driver forgets it.
const STOPPED: u8 = 2;
/// A new period waits in [`TickShared`]'s `every_ns`.
const NEW_PERIOD: u8 = 4;
/// Flag bytes per page.
const PAGE: usize = 1024;

/// The flag bytes of 1,024 agents of one driver, side by side: the driver reads an agent's flags
/// on every tick, and in a dense page they stay in the cache (in each agent's own allocation,
/// that read was a cache miss per tick: most of an idle tick's cost).
struct FlagPage([AtomicU8; PAGE]);

/// An agent actor's side of the tick driver: it says through its flag byte whether a tick could
/// do anything, that it stopped, and that its period changed. Before the actor registers, what it
/// says waits here and is handed over at registration.
#[derive(Default)]
pub(crate) struct TickShared {
    /// Its page and index, once registered.
    flags: Option<(Arc<FlagPage>, usize)>,
    /// Flags said before registration.
    early: Cell<u8>,
    /// The period, in nanoseconds (read by the driver when [`NEW_PERIOD`] is set).
    every_ns: Arc<AtomicU64>,
    /// Stopped: nothing more is said (the driver may give its flag byte to another agent).
    stopped: Cell<bool>,
}

impl fmt::Debug for TickShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TickShared")
            .field("registered", &self.flags.is_some())
            .field("stopped", &self.stopped.get())
            .finish_non_exhaustive()
    }
}

impl TickShared {
    fn set(&self, bits: u8, on: bool) {
        match &self.flags {
            Some((page, i)) if on => {
                page.0[*i].fetch_or(bits, Ordering::Release);
            }
            Some((page, i)) => {
                page.0[*i].fetch_and(!bits, Ordering::Release);
            }
            None if on => self.early.set(self.early.get() | bits),
            None => self.early.set(self.early.get() & !bits),
        }
    }

    /// Whether the next tick should wake the actor.
    pub fn set_attention(&self, on: bool) {
        if !self.stopped.get() {
            self.set(ATTENTION, on);
        }
    }

    /// No more ticks.
    pub fn stop(&self) {
        if !self.stopped.replace(true) {
            self.set(STOPPED, true);
        }
    }

    /// A new period; it applies from the next tick.
    pub fn set_every(&self, every: Duration) {
        if self.stopped.get() {
            return;
        }
        let ns = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.every_ns.store(ns, Ordering::Relaxed);
        self.set(NEW_PERIOD, true);
    }
}

/// How far ahead of its due time a tick may run: each run of the driver also takes the ticks due
/// within the next millisecond, so that one wake serves two milliseconds of ticks. The loop's
/// timer fires on millisecond boundaries (tokio's resolution), so without it the driver woke about
/// once a millisecond on each thread whenever every millisecond had a tick due (from ~2,000 agents
/// at 1 Hz), and at 100,000 idle agents those wakes — a timer, a park and a context switch each —
/// were most of an idle tick's cost. A tick that runs early is counted on time; the cadence keeps
/// its phase (the next tick is one period after the due time, not after the run).
const AHEAD: Duration = Duration::from_millis(1);

/// Buckets of the wheel, one per millisecond: a tick due within the next 1,024 ms waits in its
/// own bucket; one due later waits in its bucket through whole turns of the wheel.
const WHEEL: usize = 1024;
/// Words of the bitmap of non-empty buckets.
const WORDS: usize = WHEEL / 64;

/// One agent on a driver's wheel.
struct Entry {
    due: Instant,
    /// The millisecond of the wheel it waits for: the one its due time falls in, or the first
    /// not yet over if that one is past.
    at_ms: u64,
    /// The driver's run in which it last ticked: an agent ticks at most once per run.
    ran: u64,
    cadence: TickCadence,
    /// Ticks skipped in a row (see [`FULL_CHECK_EVERY`]).
    skipped: u32,
    /// Its [`TickStats`], an index into [`Driver::stats`].
    stats: usize,
    /// The period its actor set last ([`TickShared::set_every`]).
    every_ns: Arc<AtomicU64>,
    tick: Recipient<Tick>,
}

/// The agents of one thread on a hashed timer wheel: each waits in the bucket of the millisecond
/// it is due in, so scheduling a tick and finding the due ones cost
/// O(1) per tick whatever the number of agents (a heap cost O(log n), most of it cache misses).
struct Driver {
    /// Millisecond 0 of the wheel.
    origin: Instant,
    /// The first millisecond (counted from `origin`) not yet over when the driver last ran: every
    /// tick due in an earlier one has run; this one's bucket may hold ticks due later in it.
    next_ms: u64,
    /// Runs so far (see [`Entry::ran`]).
    runs: u64,
    /// The agents, by slot; a stopped agent's slot is reused.
    entries: Vec<Option<Entry>>,
    /// The agents' flags, by slot: page `slot / PAGE`, byte `slot % PAGE`.
    pages: Vec<Arc<FlagPage>>,
    free: Vec<u32>,
    buckets: Vec<Vec<u32>>,
    /// The earliest due time in each bucket, in nanoseconds from `origin` (`u64::MAX`: none): the
    /// loop sleeps until that of the next bucket rather than until its millisecond starts, which
    /// would add up to a millisecond to every tick's lateness.
    earliest_ns: Vec<u64>,
    /// Which buckets are not empty.
    occupied: [u64; WORDS],
    len: usize,
    /// Each [`TickStats`] the agents record into, with this thread's ticks not yet added to it.
    stats: Vec<(Arc<TickStats>, LatenessBatch)>,
    /// Wakes the driver's loop when an agent due earlier than its sleep registers.
    wake: Rc<Notify>,
    /// When the loop sleeps until (`None`: it waits for a registration).
    sleeping_until: Option<Instant>,
}

impl Driver {
    fn new(now: Instant) -> Self {
        Driver {
            origin: now,
            next_ms: 0,
            runs: 0,
            entries: Vec::new(),
            pages: Vec::new(),
            free: Vec::new(),
            buckets: (0..WHEEL).map(|_| Vec::new()).collect(),
            earliest_ns: vec![u64::MAX; WHEEL],
            occupied: [0; WORDS],
            len: 0,
            stats: Vec::new(),
            wake: Rc::new(Notify::new()),
            sleeping_until: None,
        }
    }

    /// Puts the agent in `slot` in the bucket of its due time, never in one already run.
    fn schedule(&mut self, slot: u32) {
        let next = self.next_ms;
        let origin = self.origin;
        let Some(e) = self.entries[slot as usize].as_mut() else {
            return;
        };
        e.at_ms = ms_since(origin, e.due).max(next);
        let (at, due) = (e.at_ms, e.due);
        self.enqueue(slot, at, due);
    }

    fn enqueue(&mut self, slot: u32, at_ms: u64, due: Instant) {
        let bucket = (at_ms % WHEEL as u64) as usize;
        self.buckets[bucket].push(slot);
        self.occupied[bucket / 64] |= 1 << (bucket % 64);
        let ns = u64::try_from(due.saturating_duration_since(self.origin).as_nanos());
        let earliest = &mut self.earliest_ns[bucket];
        *earliest = (*earliest).min(ns.unwrap_or(u64::MAX));
    }

    /// Puts `entry` on the wheel with `flags`; says where its flag byte is.
    fn insert(&mut self, entry: Entry, flags: u8) -> (Arc<FlagPage>, usize) {
        if self.len == 0 {
            // Nothing waits: the wheel may start at the current millisecond.
            self.next_ms = ms_since(self.origin, Instant::now());
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = Some(entry);
                slot
            }
            None => {
                self.entries.push(Some(entry));
                u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.len += 1;
        let (page, index) = (slot as usize / PAGE, slot as usize % PAGE);
        while self.pages.len() <= page {
            self.pages.push(Arc::new(FlagPage(std::array::from_fn(|_| {
                AtomicU8::new(0)
            }))));
        }
        self.pages[page].0[index].store(flags, Ordering::Release);
        self.schedule(slot);
        (Arc::clone(&self.pages[page]), index)
    }

    /// The index in [`Driver::stats`] of `stats`.
    fn stats_index(&mut self, stats: Arc<TickStats>) -> usize {
        if let Some(i) = self.stats.iter().position(|(s, _)| Arc::ptr_eq(s, &stats)) {
            return i;
        }
        self.stats.push((stats, LatenessBatch::default()));
        self.stats.len() - 1
    }

    /// When the first non-empty bucket from the first millisecond not yet over is due: its earliest
    /// due time, but within its millisecond (`None`: no agent waits).
    fn next_wake(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let from = self.next_ms;
        let start = (from % WHEEL as u64) as usize;
        for step in 0..=WORDS {
            let word = (start / 64 + step) % WORDS;
            let mut bits = self.occupied[word];
            if step == 0 {
                bits &= u64::MAX << (start % 64);
            }
            if bits != 0 {
                let bucket = word * 64 + bits.trailing_zeros() as usize;
                let ahead = (bucket + WHEEL - start) % WHEEL;
                let begins = Duration::from_millis(from + ahead as u64);
                let earliest = Duration::from_nanos(self.earliest_ns[bucket]);
                let wake = earliest.clamp(begins, begins + Duration::from_millis(1));
                return Some(self.origin + wake);
            }
        }
        None
    }

    /// Ticks every agent due by `now` + [`AHEAD`]: wakes those that have something to do, counts
    /// the rest, and schedules each one's next tick.
    fn run_due(&mut self, now: Instant) {
        let horizon = now + AHEAD;
        let now_ms = ms_since(self.origin, horizon);
        if now_ms < self.next_ms {
            return;
        }
        self.runs += 1;
        // After a stall longer than a turn of the wheel, every bucket is visited once.
        let first = self.next_ms.max(now_ms.saturating_sub(WHEEL as u64 - 1));
        // Every tick scheduled from here on goes in `now_ms` or later (see `schedule`).
        self.next_ms = now_ms;
        for ms in first..=now_ms {
            let bucket = (ms % WHEEL as u64) as usize;
            let bit = 1 << (bucket % 64);
            if self.occupied[bucket / 64] & bit == 0 {
                continue;
            }
            self.occupied[bucket / 64] &= !bit;
            self.earliest_ns[bucket] = u64::MAX;
            let mut slots = std::mem::take(&mut self.buckets[bucket]);
            for &slot in &slots {
                self.run_slot(slot, now, horizon, now_ms);
            }
            // Keep the allocation for the bucket's next turn, unless ticks not yet due were put
            // back into it meanwhile.
            slots.clear();
            if self.buckets[bucket].is_empty() {
                self.buckets[bucket] = slots;
            }
        }
        for (stats, batch) in &mut self.stats {
            stats.flush(batch);
        }
    }

    /// The tick of the agent in `slot`, if it is due by `horizon` (in millisecond `now_ms`); its
    /// lateness is counted against `now`.
    fn run_slot(&mut self, slot: u32, now: Instant, horizon: Instant, now_ms: u64) {
        let flag = &self.pages[slot as usize / PAGE].0[slot as usize % PAGE];
        let flags = flag.load(Ordering::Acquire);
        if flags & STOPPED != 0 {
            self.entries[slot as usize] = None;
            self.free.push(slot);
            self.len -= 1;
            return;
        }
        let Some(e) = self.entries[slot as usize].as_mut() else {
            return;
        };
        if e.at_ms > now_ms || e.due > horizon || e.ran == self.runs {
            // Due in a later turn of the wheel or later in this millisecond, or it ticked in this
            // run already (after a stall, its next tick is due at once): back into the bucket of
            // its due time, or the first not yet run.
            self.schedule(slot);
            return;
        }
        e.ran = self.runs;
        self.stats[e.stats]
            .1
            .record(now.saturating_duration_since(e.due));
        if flags & NEW_PERIOD != 0 {
            flag.fetch_and(!NEW_PERIOD, Ordering::AcqRel);
            let every = e.every_ns.load(Ordering::Relaxed);
            e.cadence.set_every(Duration::from_nanos(every));
        }
        e.skipped += 1;
        if flags & ATTENTION != 0 || e.skipped >= FULL_CHECK_EVERY {
            e.skipped = 0;
            e.tick.do_send(Tick);
        }
        e.due = e.cadence.next_due(now);
        self.schedule(slot);
    }
}

/// The millisecond `t` falls in, counted from `origin`.
fn ms_since(origin: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

thread_local! {
    /// This thread's driver, once an agent actor started here (`None` again when its loop ends
    /// with the thread's runtime).
    static DRIVER: RefCell<Option<Rc<RefCell<Driver>>>> = const { RefCell::new(None) };
}

/// Registers an agent actor with its thread's driver (started on first use); `shared` is the
/// actor's side from then on. Call from the actor's `started`, on its Arbiter.
pub(crate) fn register(
    mut cadence: TickCadence,
    shared: &mut TickShared,
    tick: Recipient<Tick>,
    stats: Arc<TickStats>,
) {
    let driver = DRIVER.with(|d| {
        d.borrow_mut()
            .get_or_insert_with(|| {
                let driver = Rc::new(RefCell::new(Driver::new(Instant::now())));
                actix::spawn(drive(Rc::clone(&driver)));
                driver
            })
            .clone()
    });
    let mut driver = driver.borrow_mut();
    let due = cadence.next_due(Instant::now());
    if driver.sleeping_until.is_none_or(|t| due < t) {
        driver.wake.notify_one();
    }
    let stats = driver.stats_index(stats);
    let flags = driver.insert(
        Entry {
            due,
            at_ms: 0,
            ran: 0,
            cadence,
            skipped: 0,
            stats,
            every_ns: Arc::clone(&shared.every_ns),
            tick,
        },
        shared.early.take(),
    );
    shared.flags = Some(flags);
}

/// Forgets this thread's driver when its loop ends (the thread's runtime stopped), so that actors
/// started by a later runtime on the same thread get a live one.
struct Unregister;

impl Drop for Unregister {
    fn drop(&mut self) {
        let _ = DRIVER.try_with(|d| d.borrow_mut().take());
    }
}

/// The driver's loop: sleep until the earliest due tick (or a registration due earlier), then run
/// every tick due.
async fn drive(driver: Rc<RefCell<Driver>>) {
    let _unregister = Unregister;
    let wake = Rc::clone(&driver.borrow().wake);
    loop {
        let next = driver.borrow().next_wake();
        driver.borrow_mut().sleeping_until = next;
        match next {
            None => wake.notified().await,
            Some(due) => {
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {}
                    () = wake.notified() => {}
                }
            }
        }
        driver.borrow_mut().run_due(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix::prelude::*;

    /// Counts the ticks it is woken for.
    struct Counter {
        shared: TickShared,
        stats: Arc<TickStats>,
        every: Duration,
        woken: Arc<AtomicU64>,
    }

    impl Actor for Counter {
        type Context = Context<Self>;
        fn started(&mut self, ctx: &mut Context<Self>) {
            register(
                TickCadence::new(self.every, Duration::ZERO),
                &mut self.shared,
                ctx.address().recipient(),
                Arc::clone(&self.stats),
            );
        }
    }

    /// What the test tells a [`Counter`] to tell its driver.
    #[derive(Message)]
    #[rtype(result = "()")]
    enum Say {
        Attention(bool),
        Stop,
    }

    impl Handler<Say> for Counter {
        type Result = ();
        fn handle(&mut self, say: Say, _: &mut Context<Self>) {
            match say {
                Say::Attention(on) => self.shared.set_attention(on),
                Say::Stop => self.shared.stop(),
            }
        }
    }

    impl Handler<Tick> for Counter {
        type Result = ();
        fn handle(&mut self, _: Tick, _: &mut Context<Self>) {
            self.woken.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn counter(attention: bool) -> (Counter, Arc<AtomicU64>, Arc<TickStats>) {
        let shared = TickShared::default();
        shared.set_attention(attention);
        let stats = Arc::new(TickStats::default());
        let woken = Arc::new(AtomicU64::new(0));
        let actor = Counter {
            shared,
            stats: Arc::clone(&stats),
            every: Duration::from_millis(1),
            woken: Arc::clone(&woken),
        };
        (actor, woken, stats)
    }

    /// Takes ticks and does nothing (it registers with no driver).
    struct Sink;

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<Tick> for Sink {
        type Result = ();
        fn handle(&mut self, _: Tick, _: &mut Context<Self>) {}
    }

    /// Puts an agent on `driver` that ticks every `every` from `due`, with its own stats.
    fn entry(
        driver: &mut Driver,
        every: Duration,
        due: Instant,
        attention: bool,
    ) -> (TickShared, Arc<TickStats>) {
        let mut shared = TickShared::default();
        shared.set_attention(attention);
        let stats = Arc::new(TickStats::default());
        let mut cadence = TickCadence::new(every, Duration::ZERO);
        assert_eq!(cadence.next_due(due), due);
        let entry = Entry {
            due,
            at_ms: 0,
            ran: 0,
            cadence,
            skipped: 0,
            stats: driver.stats_index(Arc::clone(&stats)),
            every_ns: Arc::clone(&shared.every_ns),
            tick: Sink.start().recipient(),
        };
        shared.flags = Some(driver.insert(entry, shared.early.take()));
        (shared, stats)
    }

    #[actix::test]
    async fn the_wheel_keeps_each_cadence_beyond_a_turn_through_stalls_and_stops() {
        let t0 = Instant::now() + Duration::from_secs(3_600);
        let mut driver = Driver::new(t0);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // Registered by hand (not through `register`, which starts the real loop): one agent
        // every 10 ms, one every 3 s (three turns of the wheel), one every 1 ms.
        let (_fast, fast_stats) = entry(&mut driver, ms(10) - t0, ms(5), false);
        let (_slow, slow_stats) = entry(&mut driver, ms(3_000) - t0, ms(2_500), false);
        let (every, every_stats) = entry(&mut driver, ms(1) - t0, ms(1), true);
        assert_eq!(driver.next_wake(), Some(ms(1)));
        // Nine seconds, a millisecond at a time, as the loop runs them.
        let mut now = 0;
        while now < 9_000 {
            let Some(wake) = driver.next_wake() else {
                panic!("no wake with agents on the wheel");
            };
            now = u64::try_from((wake - t0).as_millis()).unwrap_or(u64::MAX);
            driver.run_due(ms(now));
        }
        let ticks = |s: &TickStats| s.ticks();
        assert_eq!(ticks(&fast_stats), 900, "5, 15, … 8995");
        assert_eq!(ticks(&slow_stats), 3, "2500, 5500, 8500");
        assert_eq!(ticks(&every_stats), 9_000);
        // None was late: each ran in the millisecond it was due.
        assert_eq!(fast_stats.summary().max, Duration::ZERO);
        assert_eq!(slow_stats.summary().max, Duration::ZERO);

        // A stall of 5 s: every agent ticks once, late, and its cadence resumes from there.
        driver.run_due(ms(14_000));
        assert_eq!(ticks(&fast_stats), 901);
        assert_eq!(ticks(&slow_stats), 4);
        assert_eq!(ticks(&every_stats), 9_001);
        // The tick each is due at the stall's end (one period after the stale due time is past)
        // runs in the next millisecond the driver runs, once.
        driver.run_due(ms(14_010));
        assert_eq!(ticks(&fast_stats), 902);
        assert_eq!(ticks(&every_stats), 9_002);
        assert_eq!(ticks(&slow_stats), 4);

        // A stopped agent is forgotten and its slot reused.
        every.stop();
        driver.run_due(ms(14_011));
        assert_eq!(driver.len, 2);
        assert_eq!(driver.free.len(), 1);
        let (_again, again_stats) = entry(&mut driver, ms(1) - t0, ms(14_012), false);
        assert!(driver.free.is_empty());
        // The stopped agent's side says nothing more: the reused flag byte is the new agent's.
        every.set_attention(true);
        assert_eq!(driver.pages[0].0[2].load(Ordering::Relaxed), 0);
        driver.run_due(ms(14_012));
        assert_eq!(ticks(&again_stats), 1);
        assert_eq!(ticks(&every_stats), 9_002, "no tick after the stop");
    }

    /// 1,000 agents at 1 Hz spread over the second, run as the loop runs them (woken at the next
    /// non-empty bucket's earliest due time, rounded up to the millisecond as tokio's timer fires):
    /// every tick runs, none more than a millisecond late, in one run per two milliseconds.
    #[actix::test]
    async fn one_run_takes_two_milliseconds_of_ticks() {
        let t0 = Instant::now() + Duration::from_secs(3_600);
        let mut driver = Driver::new(t0);
        let agents: Vec<_> = (0..1_000u64)
            .map(|i| {
                // 1.000 ms, 1.997 ms, 2.994 ms, …: spread over the second, most of them inside a
                // millisecond rather than at its start.
                let due = t0 + Duration::from_micros(1_000 + i * 997);
                entry(&mut driver, Duration::from_secs(1), due, false)
            })
            .collect();
        let mut runs = 0;
        loop {
            let Some(wake) = driver.next_wake() else {
                panic!("no wake with agents on the wheel");
            };
            let ms = u64::try_from((wake - t0).as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
            if ms > 10_000 {
                break;
            }
            driver.run_due(t0 + Duration::from_millis(ms));
            runs += 1;
        }
        for (_, stats) in &agents {
            assert_eq!(stats.ticks(), 10, "one tick a second for ten seconds");
            assert!(stats.summary().max <= Duration::from_millis(1));
        }
        // Without running ahead (each run only what is due by then): one run per millisecond.
        assert!(
            (4_900..=5_100).contains(&runs),
            "{runs} runs for 10,000 ms of ticks"
        );
    }

    #[actix::test]
    async fn an_idle_agent_is_woken_only_for_the_periodic_full_check() {
        let (actor, woken, stats) = counter(false);
        let _addr = actor.start();
        until("two full checks", || woken.load(Ordering::Relaxed) >= 2).await;
        // Each wake came after FULL_CHECK_EVERY ticks the driver counted without waking.
        assert!(
            stats.ticks() >= 2 * u64::from(FULL_CHECK_EVERY),
            "{} ticks for 2 wakes",
            stats.ticks()
        );
    }

    #[actix::test]
    async fn an_agent_with_something_to_do_is_woken_every_tick_until_it_stops() {
        let (actor, woken, stats) = counter(true);
        let addr = actor.start();
        until("ten ticks", || woken.load(Ordering::Relaxed) >= 10).await;
        assert!(stats.ticks() >= 10);
        assert!(woken.load(Ordering::Relaxed) <= stats.ticks());
        // A quiet agent: its ticks go on without waking it.
        addr.send(Say::Attention(false))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (w, t) = (woken.load(Ordering::Relaxed), stats.ticks());
        until("ten more ticks", || stats.ticks() >= t + 10).await;
        assert!(woken.load(Ordering::Relaxed) <= w + 1, "woken while quiet");
        // Stopped: the driver forgets it.
        addr.send(Say::Stop).await.unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t = stats.ticks();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(stats.ticks(), t, "ticked after stopping");
    }
}
