//! Simulated time: the runtime's "now", optionally accelerated (the village demo runs days in a
//! minute). Config durations (`tick_every`, `sleep_every`) are in simulated time; timers use the
//! real durations this clock converts them to.
//!
//! Real time is read through tokio's clock (`tokio::time::Instant`), which is the system's
//! monotonic clock unless a test pauses it: under `tokio::time::pause()` the clock stands still
//! and `tokio::time::advance()` moves it, so a test of the `Agent` drives time by hand (its
//! backoffs, tool deadlines) instead of sleeping.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use somna_core::Timestamp;

/// A clock that runs `speed` times faster than the wall clock, from a starting time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Simulated time at `start`.
    origin: Timestamp,
    /// The real instant the clock started.
    start: Instant,
    /// Simulated seconds per real second (1.0 = real time).
    speed: f64,
}

impl Clock {
    /// Real time.
    pub fn real() -> Self {
        Clock::accelerated(1.0)
    }

    /// Time running `speed` times faster than real time, starting now.
    pub fn accelerated(speed: f64) -> Self {
        Clock::starting_at(Timestamp::from_system_time(SystemTime::now()), speed)
    }

    /// Time running `speed` times faster than real time, starting at `origin`.
    pub fn starting_at(origin: Timestamp, speed: f64) -> Self {
        let speed = if speed.is_finite() && speed > 0.0 {
            speed
        } else {
            1.0
        };
        Clock {
            origin,
            start: Instant::now(),
            speed,
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> Timestamp {
        self.origin
            .saturating_add(self.to_sim(self.start.elapsed()))
    }

    /// Simulated seconds per real second.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// The real duration that `sim` simulated time takes (never below 1 ms).
    pub fn to_real(&self, sim: Duration) -> Duration {
        Duration::from_secs_f64(sim.as_secs_f64() / self.speed).max(Duration::from_millis(1))
    }

    /// The simulated duration that `real` time stands for.
    pub fn to_sim(&self, real: Duration) -> Duration {
        Duration::from_secs_f64(real.as_secs_f64() * self.speed)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::real()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_both_ways() {
        let c = Clock::starting_at(Timestamp(0), 3600.0);
        assert_eq!(c.to_real(Duration::from_secs(3600)), Duration::from_secs(1));
        assert_eq!(c.to_sim(Duration::from_secs(2)), Duration::from_secs(7200));
        assert_eq!(c.to_real(Duration::ZERO), Duration::from_millis(1));
        assert_eq!(Clock::starting_at(Timestamp(0), -1.0).speed(), 1.0);
    }
}
