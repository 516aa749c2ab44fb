//! Agent gauges shared by every agent of a runtime: how many agents are in each [`AgentState`] and
//! how many have their context usage in each bucket of [`USAGE_BUCKETS`].
//!
//! Each hosted agent holds an [`AgentGauge`], its one place in the counts, and moves it as its
//! state and usage change (two atomic adds). Reading the gauges ([`AgentGauges::snapshot`], a
//! `/metrics` scrape) reads a few counters: it costs the same for ten agents as for ten thousand
//! and asks none of them. The runtime releases an agent's gauge when it stops hosting the agent
//! (retire, a cluster node's unload, shutdown), so the counts always add up to the agents hosted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::protocol::AgentState;

/// Upper bounds of the usage buckets, as fractions of the context window (`+Inf` is implied: an
/// agent over its window). 0.7 and 0.8 are the default sleep and emergency thresholds.
pub const USAGE_BUCKETS: [f64; 10] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// The counters every agent's gauge moves. Cheap to clone; clones share the counters.
#[derive(Debug, Clone, Default)]
pub struct AgentGauges {
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Agents in each state (index in `AgentState::ALL`).
    states: [AtomicU64; AgentState::ALL.len()],
    /// Agents in each usage bucket (index in `USAGE_BUCKETS`; the last one is `+Inf`).
    usage: [AtomicU64; USAGE_BUCKETS.len() + 1],
    /// The sum of the agents' usage, in millionths.
    usage_sum_micros: AtomicU64,
}

/// A read of [`AgentGauges`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AgentGaugesSnapshot {
    /// Agents in each state, in the order of `AgentState::ALL`.
    pub by_state: [u64; AgentState::ALL.len()],
    /// Agents whose usage falls in each bucket (not cumulative), in the order of
    /// [`USAGE_BUCKETS`], then `+Inf`.
    pub by_usage: [u64; USAGE_BUCKETS.len() + 1],
    /// The sum of the agents' usage (its mean is `usage_sum / agents()`).
    pub usage_sum: f64,
}

impl AgentGaugesSnapshot {
    /// Agents counted (by state).
    pub fn agents(&self) -> u64 {
        self.by_state.iter().sum()
    }

    /// Agents in `state`.
    pub fn in_state(&self, state: AgentState) -> u64 {
        self.by_state[state_index(state)]
    }
}

impl AgentGauges {
    /// Fresh counters.
    pub fn new() -> Self {
        AgentGauges::default()
    }

    /// Counts one more agent, in `state` at `usage`, until its gauge is released or dropped.
    pub fn register(&self, state: AgentState, usage: f64) -> AgentGauge {
        let place = Place::of(state, usage);
        self.counts.add(place);
        AgentGauge {
            counts: Arc::clone(&self.counts),
            place: Mutex::new(Some(place)),
        }
    }

    /// The counts now. Each agent's move is two atomic adds, so a read during a move may count
    /// that agent twice (never zero times); a quiet runtime reads exactly.
    pub fn snapshot(&self) -> AgentGaugesSnapshot {
        let c = &self.counts;
        AgentGaugesSnapshot {
            by_state: std::array::from_fn(|i| c.states[i].load(Ordering::Relaxed)),
            by_usage: std::array::from_fn(|i| c.usage[i].load(Ordering::Relaxed)),
            usage_sum: c.usage_sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// One agent's place in [`AgentGauges`]. Released (counted nowhere) by [`AgentGauge::release`]
/// or when dropped.
#[derive(Debug)]
pub struct AgentGauge {
    counts: Arc<Counts>,
    /// Where the agent is counted; `None` once released. A lock (never contended: the agent
    /// moves it, the runtime releases it once) keeps a move and the release from crossing.
    place: Mutex<Option<Place>>,
}

impl AgentGauge {
    /// Moves the agent to `state`.
    pub fn set_state(&self, state: AgentState) {
        self.update(|p| Place {
            state: state_index(state),
            ..p
        });
    }

    /// Moves the agent to the bucket of `usage` (a fraction of its context window).
    pub fn set_usage(&self, usage: f64) {
        self.update(|p| Place {
            bucket: usage_bucket(usage),
            usage_micros: micros(usage),
            ..p
        });
    }

    /// Stops counting the agent (the runtime no longer hosts it); later moves change nothing.
    pub fn release(&self) {
        let mut place = self.place.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = place.take() {
            self.counts.remove(p);
        }
    }

    fn update(&self, change: impl FnOnce(Place) -> Place) {
        let mut place = self.place.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(old) = *place else { return };
        let new = change(old);
        if new != old {
            // Add before removing: a concurrent read may count the agent twice, never not at all,
            // and no counter ever goes below zero.
            self.counts.add(new);
            self.counts.remove(old);
            *place = Some(new);
        }
    }
}

impl Drop for AgentGauge {
    fn drop(&mut self) {
        self.release();
    }
}

/// Where one agent is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    state: usize,
    bucket: usize,
    usage_micros: u64,
}

impl Place {
    fn of(state: AgentState, usage: f64) -> Place {
        Place {
            state: state_index(state),
            bucket: usage_bucket(usage),
            usage_micros: micros(usage),
        }
    }
}

impl Counts {
    fn add(&self, p: Place) {
        self.states[p.state].fetch_add(1, Ordering::Relaxed);
        self.usage[p.bucket].fetch_add(1, Ordering::Relaxed);
        self.usage_sum_micros
            .fetch_add(p.usage_micros, Ordering::Relaxed);
    }

    fn remove(&self, p: Place) {
        self.states[p.state].fetch_sub(1, Ordering::Relaxed);
        self.usage[p.bucket].fetch_sub(1, Ordering::Relaxed);
        self.usage_sum_micros
            .fetch_sub(p.usage_micros, Ordering::Relaxed);
    }
}

fn state_index(state: AgentState) -> usize {
    AgentState::ALL
        .iter()
        .position(|s| *s == state)
        .unwrap_or_default()
}

/// The bucket of `usage`: the first bound at or above it (`le`), else `+Inf` (NaN included).
pub fn usage_bucket(usage: f64) -> usize {
    USAGE_BUCKETS
        .iter()
        .position(|b| usage <= *b)
        .unwrap_or(USAGE_BUCKETS.len())
}

fn micros(usage: f64) -> u64 {
    // `as` saturates: NaN and negatives count 0.
    (usage * 1e6).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_keep_one_count_per_agent() {
        let gauges = AgentGauges::new();
        let a = gauges.register(AgentState::Idle, 0.05);
        let b = gauges.register(AgentState::WaitingForTools, 0.75);
        a.set_state(AgentState::Stepping);
        a.set_usage(0.85);
        b.set_usage(0.3);
        let s = gauges.snapshot();
        assert_eq!(s.agents(), 2);
        assert_eq!(s.in_state(AgentState::Stepping), 1);
        assert_eq!(s.in_state(AgentState::WaitingForTools), 1);
        assert_eq!(s.in_state(AgentState::Idle), 0);
        assert_eq!(s.by_usage[usage_bucket(0.85)], 1);
        assert_eq!(s.by_usage[usage_bucket(0.3)], 1);
        assert_eq!(s.by_usage.iter().sum::<u64>(), 2);
        assert!((s.usage_sum - 1.15).abs() < 1e-9, "{}", s.usage_sum);

        a.release();
        a.set_state(AgentState::Idle);
        a.release();
        assert_eq!(gauges.snapshot().agents(), 1);
        drop(b);
        drop(a);
        assert_eq!(gauges.snapshot(), AgentGaugesSnapshot::default());
    }

    #[test]
    fn buckets_are_le_and_include_the_default_thresholds() {
        let defaults = somna_core::config::CompactionConfig::default();
        for threshold in [defaults.sleep_threshold, defaults.emergency_threshold] {
            assert!(USAGE_BUCKETS.contains(&threshold), "{threshold}");
        }
        assert!(USAGE_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        for (usage, bucket) in [
            (0.0, 0),
            (0.1, 0),
            (0.100_001, 1),
            (0.7, 6),
            (0.79, 7),
            (1.0, 9),
            (1.2, 10),
            (f64::NAN, 10),
        ] {
            assert_eq!(usage_bucket(usage), bucket, "{usage}");
        }
    }

    #[test]
    fn concurrent_moves_and_releases_add_up() {
        let gauges = AgentGauges::new();
        let agents: Vec<Arc<AgentGauge>> = (0..64)
            .map(|_| Arc::new(gauges.register(AgentState::Idle, 0.0)))
            .collect();
        std::thread::scope(|scope| {
            for (i, g) in agents.iter().enumerate() {
                scope.spawn(move || {
                    for step in 0..200usize {
                        g.set_state(AgentState::ALL[(i + step) % AgentState::ALL.len()]);
                        g.set_usage(((i * step) % 13) as f64 / 10.0);
                    }
                });
            }
            for g in agents.iter().step_by(4) {
                scope.spawn(move || g.release());
            }
        });
        let s = gauges.snapshot();
        assert_eq!(s.agents(), 48);
        assert_eq!(s.by_usage.iter().sum::<u64>(), 48);
    }
}
