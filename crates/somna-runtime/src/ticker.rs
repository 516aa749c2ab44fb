//! The tick driver: one per Arbiter thread, it keeps the due times of every agent actor started
//! on that thread in a heap and wakes once for all the ticks due together.
//!
//! Each agent is still an actor with its own tick loop and its own emergency check: the driver
//! only decides whether waking the actor is worth it. The actor keeps one flag up to date,
//! [`TickShared::set_attention`]: whether a tick now could do anything (input waits, host tools
//! are pending, a retry is due, usage is at the emergency threshold; `Agent::wants_tick`). It
//! recomputes the flag after everything that can change the answer (an input, a job's end, a
//! run-time config change, a tick), none of which is an idle tick; and every
//! [`FULL_CHECK_EVERY`] ticks the actor is woken anyway. So an idle tick costs the driver a heap
//! pop and push, an atomic load and a lateness record, and the actor is not woken;
//! before (a timer per actor, `run_later`), each idle tick cost a timer registration, a boxed
//! closure, a context poll and two store reads (issue 26, item 3; docs/benchmarks.md).
//!
//! Per-agent `tick_every` and its run-time changes ([`TickShared::set_every`]), the first tick's
//! offset (the spread over the period) and the skipping of ticks missed during a stall are the
//! [`TickCadence`]'s, as before.

use std::cell::RefCell;
use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use actix::Recipient;
use tokio::sync::Notify;

use crate::actor::Tick;
use crate::agent::cadence::TickCadence;
use crate::stats::TickStats;

/// Every this many ticks the driver wakes an agent's actor even when it said it has nothing to
/// do: history written behind the agent's back (an offline `somna import` into a Postgres store
/// it is hosted from) is then still met by the emergency check, at most this many ticks late.
/// Amortized, a full tick (about 5 µs) adds 0.08 µs to each idle one.
pub(crate) const FULL_CHECK_EVERY: u32 = 64;

/// What an agent actor and its thread's driver share.
#[derive(Debug, Default)]
pub(crate) struct TickShared {
    /// A tick now could do something: the driver sends the actor a `Tick`.
    attention: AtomicBool,
    /// The actor is draining or stopped: the driver forgets it.
    stopped: AtomicBool,
    /// The period, in nanoseconds (0: unchanged since registration).
    every_ns: AtomicU64,
}

impl TickShared {
    /// Whether the next tick should wake the actor.
    pub fn set_attention(&self, on: bool) {
        self.attention.store(on, Ordering::Release);
    }

    /// No more ticks.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// A new period; it applies from the next tick.
    pub fn set_every(&self, every: Duration) {
        let ns = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.every_ns.store(ns, Ordering::Relaxed);
    }
}

/// One agent in a driver's heap.
struct Entry {
    due: Instant,
    /// Registration order, so entries due at the same instant keep a stable order.
    order: u64,
    cadence: TickCadence,
    /// The period the cadence has, in nanoseconds (0: the registered one).
    every_ns: u64,
    /// Ticks skipped in a row (see [`FULL_CHECK_EVERY`]).
    skipped: u32,
    shared: Arc<TickShared>,
    tick: Recipient<Tick>,
    stats: Arc<TickStats>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

/// The agents of one thread, earliest due first.
#[derive(Default)]
struct Driver {
    heap: BinaryHeap<Reverse<Entry>>,
    next_order: u64,
    /// Wakes the driver's loop when an agent due earlier than its sleep registers.
    wake: Rc<Notify>,
    /// When the loop sleeps until (`None`: it waits for a registration).
    sleeping_until: Option<Instant>,
}

impl Driver {
    fn push(&mut self, mut entry: Entry) {
        entry.order = self.next_order;
        self.next_order = self.next_order.wrapping_add(1);
        self.heap.push(Reverse(entry));
    }

    /// Ticks every agent due at `now`: wakes those that have something to do, counts the rest,
    /// and schedules each one's next tick.
    fn run_due(&mut self, now: Instant) {
        while self.heap.peek().is_some_and(|Reverse(e)| e.due <= now) {
            let Some(Reverse(mut e)) = self.heap.pop() else {
                break;
            };
            if e.shared.stopped.load(Ordering::Acquire) {
                continue;
            }
            e.stats.record(now.saturating_duration_since(e.due));
            let every = e.shared.every_ns.load(Ordering::Relaxed);
            if every != 0 && every != e.every_ns {
                e.every_ns = every;
                e.cadence.set_every(Duration::from_nanos(every));
            }
            e.skipped += 1;
            if e.shared.attention.load(Ordering::Acquire) || e.skipped >= FULL_CHECK_EVERY {
                e.skipped = 0;
                e.tick.do_send(Tick);
            }
            e.due = e.cadence.next_due(now);
            self.push(e);
        }
    }
}

thread_local! {
    /// This thread's driver, once an agent actor started here (`None` again when its loop ends
    /// with the thread's runtime).
    static DRIVER: RefCell<Option<Rc<RefCell<Driver>>>> = const { RefCell::new(None) };
}

/// Registers an agent actor with its thread's driver (started on first use). Call from the
/// actor's `started`, on its Arbiter.
pub(crate) fn register(
    mut cadence: TickCadence,
    shared: Arc<TickShared>,
    tick: Recipient<Tick>,
    stats: Arc<TickStats>,
) {
    let driver = DRIVER.with(|d| {
        d.borrow_mut()
            .get_or_insert_with(|| {
                let driver = Rc::new(RefCell::new(Driver::default()));
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
    driver.push(Entry {
        due,
        order: 0,
        cadence,
        every_ns: 0,
        skipped: 0,
        shared,
        tick,
        stats,
    });
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
        let next = driver.borrow().heap.peek().map(|Reverse(e)| e.due);
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
        shared: Arc<TickShared>,
        stats: Arc<TickStats>,
        every: Duration,
        woken: Arc<AtomicU64>,
    }

    impl Actor for Counter {
        type Context = Context<Self>;
        fn started(&mut self, ctx: &mut Context<Self>) {
            register(
                TickCadence::new(self.every, Duration::ZERO),
                Arc::clone(&self.shared),
                ctx.address().recipient(),
                Arc::clone(&self.stats),
            );
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

    fn counter(attention: bool) -> (Counter, Arc<AtomicU64>, Arc<TickStats>, Arc<TickShared>) {
        let shared = Arc::new(TickShared::default());
        shared.set_attention(attention);
        let stats = Arc::new(TickStats::default());
        let woken = Arc::new(AtomicU64::new(0));
        let actor = Counter {
            shared: Arc::clone(&shared),
            stats: Arc::clone(&stats),
            every: Duration::from_millis(1),
            woken: Arc::clone(&woken),
        };
        (actor, woken, stats, shared)
    }

    #[actix::test]
    async fn an_idle_agent_is_woken_only_for_the_periodic_full_check() {
        let (actor, woken, stats, _shared) = counter(false);
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
        let (actor, woken, stats, shared) = counter(true);
        let _addr = actor.start();
        until("ten ticks", || woken.load(Ordering::Relaxed) >= 10).await;
        assert!(stats.ticks() >= 10);
        assert!(woken.load(Ordering::Relaxed) <= stats.ticks());
        // A quiet agent: its ticks go on without waking it.
        shared.set_attention(false);
        let (w, t) = (woken.load(Ordering::Relaxed), stats.ticks());
        until("ten more ticks", || stats.ticks() >= t + 10).await;
        assert!(woken.load(Ordering::Relaxed) <= w + 1, "woken while quiet");
        // Stopped: the driver forgets it.
        shared.stop();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t = stats.ticks();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(stats.ticks(), t, "ticked after stopping");
    }
}
