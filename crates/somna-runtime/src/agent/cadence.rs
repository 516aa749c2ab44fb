//! [`TickCadence`]: when an agent's next tick is due, given the time now.
//!
//! Ticks keep a fixed cadence (one period after the previous due time, not after the tick ran),
//! and ticks missed during a stall are skipped rather than fired back to back (actix's
//! `run_interval` catches up in bursts; this does not). Plain values in, plain values out: the
//! actor passes `Instant::now()`, tests pass the instants they want.

use std::time::{Duration, Instant};

/// The shortest period between ticks.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The tick schedule of one agent.
#[derive(Debug)]
pub(crate) struct TickCadence {
    /// Real time between ticks.
    every: Duration,
    /// Delay before the first tick (spreads thousands of agents over the period).
    first_after: Duration,
    /// When the last scheduled tick was due (`None` before the first).
    last_due: Option<Instant>,
}

impl TickCadence {
    /// Ticks every `every` (at least 1 ms), the first `first_after` after the first
    /// [`TickCadence::next_due`].
    pub fn new(every: Duration, first_after: Duration) -> Self {
        TickCadence {
            every: every.max(MIN_PERIOD),
            first_after,
            last_due: None,
        }
    }

    /// Changes the period (a run-time `tick_every` change); it applies from the next tick.
    pub fn set_every(&mut self, every: Duration) {
        self.every = every.max(MIN_PERIOD);
    }

    /// Schedules the next tick and says when it is due: one period after the previous due time,
    /// or `now` if that is already past (the missed ticks are skipped).
    pub fn next_due(&mut self, now: Instant) -> Instant {
        let due = match self.last_due {
            None => now + self.first_after,
            Some(prev) => (prev + self.every).max(now),
        };
        self.last_due = Some(due);
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_tick_waits_its_offset_then_the_period_holds() {
        let t0 = Instant::now();
        let mut c = TickCadence::new(100 * MS, 30 * MS);
        assert_eq!(c.next_due(t0), t0 + 30 * MS);
        // The tick ran a little late: the next is still one period after the due time.
        assert_eq!(c.next_due(t0 + 37 * MS), t0 + 130 * MS);
        assert_eq!(c.next_due(t0 + 131 * MS), t0 + 230 * MS);
    }

    #[test]
    fn ticks_missed_during_a_stall_are_skipped_not_fired_back_to_back() {
        let t0 = Instant::now();
        let mut c = TickCadence::new(100 * MS, Duration::ZERO);
        assert_eq!(c.next_due(t0), t0);
        // A 1 s stall: one tick at once, then the cadence resumes from there.
        let late = t0 + 1_000 * MS;
        assert_eq!(c.next_due(late), late);
        assert_eq!(c.next_due(late + 2 * MS), late + 100 * MS);
    }

    #[test]
    fn a_new_period_applies_from_the_next_tick_and_is_at_least_a_millisecond() {
        let t0 = Instant::now();
        let mut c = TickCadence::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(c.next_due(t0), t0);
        assert_eq!(c.next_due(t0), t0 + MS);
        c.set_every(50 * MS);
        assert_eq!(c.next_due(t0), t0 + 51 * MS);
    }
}
