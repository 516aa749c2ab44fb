//! Statistics shared by every agent actor: how many ticks ran and how late they fired
//! ([`TickStats`]), and how long each turn's work took ([`TurnStats`]). Lock-free (atomic
//! counters, a fine log-scale histogram for the percentiles and, for ticks, a coarse one with
//! fixed bounds for Prometheus), so recording costs a few nanoseconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two: lateness is recorded within 12.5% of its value.
const SUB: usize = 8;
/// Histogram buckets: powers of two of microseconds, each split into `SUB` linear sub-buckets.
const BUCKETS: usize = 40 * SUB;

/// Upper bounds of the exported lateness histogram's buckets, in microseconds (`+Inf` is
/// implied): 100 µs … 10 s.
pub const LATENESS_BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Counters of the tick loop.
#[derive(Debug)]
pub struct TickStats {
    ticks: AtomicU64,
    lateness: [AtomicU64; BUCKETS],
    max_lateness_us: AtomicU64,
    /// Ticks per bucket of [`LATENESS_BUCKETS_US`] (not cumulative; the last one is `+Inf`), for
    /// a histogram whose rates and quantiles work over any time window.
    coarse: [AtomicU64; LATENESS_BUCKETS_US.len() + 1],
    /// The sum of every tick's lateness, in microseconds.
    sum_us: AtomicU64,
}

impl Default for TickStats {
    fn default() -> Self {
        TickStats {
            ticks: AtomicU64::new(0),
            lateness: std::array::from_fn(|_| AtomicU64::new(0)),
            max_lateness_us: AtomicU64::new(0),
            coarse: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
        }
    }
}

/// The lateness of every tick so far in the buckets of [`LATENESS_BUCKETS_US`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatenessHistogram {
    /// Ticks per bucket (not cumulative), in the order of [`LATENESS_BUCKETS_US`], then `+Inf`.
    pub buckets: [u64; LATENESS_BUCKETS_US.len() + 1],
    /// The sum of their lateness.
    pub sum: Duration,
}

impl LatenessHistogram {
    /// Ticks counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// A snapshot of [`TickStats`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TickSummary {
    pub ticks: u64,
    /// Median lateness (upper bound of its histogram bucket).
    pub p50: Duration,
    /// 99th-percentile lateness (upper bound of its histogram bucket).
    pub p99: Duration,
    pub max: Duration,
}

impl TickStats {
    /// Records one tick that fired `late` after it was due.
    pub fn record(&self, late: Duration) {
        let mut batch = LatenessBatch::default();
        batch.record(late);
        self.flush(&mut batch);
    }

    /// Adds the ticks of `batch` and empties it: one atomic add per counter it touched, however
    /// many ticks it holds (the tick driver records a whole millisecond's ticks so).
    pub(crate) fn flush(&self, batch: &mut LatenessBatch) {
        if batch.ticks == 0 {
            return;
        }
        self.ticks.fetch_add(batch.ticks, Ordering::Relaxed);
        self.sum_us.fetch_add(batch.sum_us, Ordering::Relaxed);
        self.max_lateness_us
            .fetch_max(batch.max_us, Ordering::Relaxed);
        for &bucket in &batch.touched {
            let n = std::mem::take(&mut batch.fine[usize::from(bucket)]);
            self.lateness[usize::from(bucket)].fetch_add(n, Ordering::Relaxed);
        }
        for (counter, n) in self.coarse.iter().zip(&mut batch.coarse) {
            if *n > 0 {
                counter.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
        batch.touched.clear();
        batch.ticks = 0;
        batch.sum_us = 0;
        batch.max_us = 0;
    }

    /// Ticks recorded so far.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Clears every counter.
    pub fn reset(&self) {
        self.ticks.store(0, Ordering::Relaxed);
        for b in self.lateness.iter().chain(&self.coarse) {
            b.store(0, Ordering::Relaxed);
        }
        self.max_lateness_us.store(0, Ordering::Relaxed);
        self.sum_us.store(0, Ordering::Relaxed);
    }

    /// The lateness so far in the exported histogram's buckets.
    pub fn histogram(&self) -> LatenessHistogram {
        LatenessHistogram {
            buckets: std::array::from_fn(|i| self.coarse[i].load(Ordering::Relaxed)),
            sum: Duration::from_micros(self.sum_us.load(Ordering::Relaxed)),
        }
    }

    /// Percentiles of the lateness so far.
    pub fn summary(&self) -> TickSummary {
        let counts = load_all(&self.lateness);
        TickSummary {
            ticks: self.ticks(),
            p50: percentile(&counts, 0.50),
            p99: percentile(&counts, 0.99),
            max: Duration::from_micros(self.max_lateness_us.load(Ordering::Relaxed)),
        }
    }
}

/// What each turn cost the runtime: the time its work took on every thread it ran on — the
/// inputs it answers appended (on the agent's Arbiter), the tick that started it, the step's
/// polls on the job pool (prompt assembly, retrieval, the reply's append, events; the model
/// client's call included, which for a remote model is sending and parsing) and the Arbiter's
/// handling of its outcome. Each span is timed by the monotonic clock (`work.rs`): its CPU time
/// plus any time its thread was preempted inside it, an upper bound of the turn's CPU. What
/// turns share is not in it: wake-ups, the group commit's flush, the storage engine's background
/// IO (the load bench reports those per input beside it). Turns that started with an emergency
/// compaction are not counted (a compaction's cost is the compaction bench's).
#[derive(Debug)]
pub struct TurnStats {
    turns: AtomicU64,
    work: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
    max_us: AtomicU64,
}

impl Default for TurnStats {
    fn default() -> Self {
        TurnStats {
            turns: AtomicU64::new(0),
            work: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

/// A snapshot of [`TurnStats`].
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct TurnSummary {
    pub turns: u64,
    /// The work time of every turn so far, summed.
    pub sum: Duration,
    /// A turn's median work time (upper bound of its histogram bucket, within 12.5%).
    pub p50: Duration,
    /// A turn's 99th-percentile work time (upper bound of its histogram bucket).
    pub p99: Duration,
    pub max: Duration,
}

impl TurnSummary {
    /// A turn's mean work time (zero before the first).
    pub fn mean(&self) -> Duration {
        u32::try_from(self.turns)
            .ok()
            .filter(|&n| n > 0)
            .map_or(Duration::ZERO, |n| self.sum / n)
    }
}

impl TurnStats {
    /// Records one turn whose work took `work`.
    pub fn record(&self, work: Duration) {
        let us = u64::try_from(work.as_micros()).unwrap_or(u64::MAX);
        let ns = u64::try_from(work.as_nanos()).unwrap_or(u64::MAX);
        self.turns.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.work[bucket_of(us).min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// Clears every counter.
    pub fn reset(&self) {
        self.turns.store(0, Ordering::Relaxed);
        self.sum_ns.store(0, Ordering::Relaxed);
        self.max_us.store(0, Ordering::Relaxed);
        for b in &self.work {
            b.store(0, Ordering::Relaxed);
        }
    }

    /// The turns so far: count, sum and percentiles.
    pub fn summary(&self) -> TurnSummary {
        let counts = load_all(&self.work);
        // A bucket's bound can lie above the largest value in it.
        let max = Duration::from_micros(self.max_us.load(Ordering::Relaxed));
        TurnSummary {
            turns: self.turns.load(Ordering::Relaxed),
            sum: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
            p50: percentile(&counts, 0.50).min(max),
            p99: percentile(&counts, 0.99).min(max),
            max,
        }
    }
}

fn load_all(buckets: &[AtomicU64; BUCKETS]) -> [u64; BUCKETS] {
    std::array::from_fn(|i| buckets[i].load(Ordering::Relaxed))
}

/// The `p` percentile of the values counted in the fine `counts` (the upper bound of its bucket).
fn percentile(counts: &[u64; BUCKETS], p: f64) -> Duration {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return Duration::ZERO;
    }
    let rank = ((total as f64) * p).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Duration::from_micros(upper_bound(i));
        }
    }
    Duration::from_micros(upper_bound(BUCKETS - 1))
}

/// Ticks recorded on one thread without atomics, added to a [`TickStats`] at once with
/// [`TickStats::flush`].
#[derive(Debug)]
pub(crate) struct LatenessBatch {
    ticks: u64,
    sum_us: u64,
    max_us: u64,
    fine: [u64; BUCKETS],
    /// The fine buckets that are not zero, each once.
    touched: Vec<u16>,
    coarse: [u64; LATENESS_BUCKETS_US.len() + 1],
}

impl Default for LatenessBatch {
    fn default() -> Self {
        LatenessBatch {
            ticks: 0,
            sum_us: 0,
            max_us: 0,
            fine: [0; BUCKETS],
            touched: Vec::new(),
            coarse: [0; LATENESS_BUCKETS_US.len() + 1],
        }
    }
}

impl LatenessBatch {
    /// One tick that fired `late` after it was due.
    pub fn record(&mut self, late: Duration) {
        let us = late.as_micros().min(u128::from(u64::MAX)) as u64;
        self.ticks += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
        let bucket = bucket_of(us).min(BUCKETS - 1);
        if self.fine[bucket] == 0 {
            self.touched.push(bucket as u16);
        }
        self.fine[bucket] += 1;
        let coarse = LATENESS_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(LATENESS_BUCKETS_US.len());
        self.coarse[coarse] += 1;
    }
}

/// The bucket of a value: values below `SUB` have a bucket each; above, the octave and the next
/// three bits below the leading one pick the bucket.
fn bucket_of(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // ≥ 3
    let mantissa = ((us >> (octave - 3)) & (SUB as u64 - 1)) as usize;
    (octave - 2) * SUB + mantissa
}

/// The smallest value above every value of bucket `i` (the percentile reported for it).
fn upper_bound(i: usize) -> u64 {
    if i < SUB {
        return i as u64 + 1;
    }
    let octave = i / SUB + 2;
    let mantissa = (i % SUB) as u64;
    ((SUB as u64 + mantissa + 1) << (octave - 3)).min(u64::MAX >> 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 7, 8, 9, 15, 16, 100, 1_000, 12_345, 1 << 30] {
            let b = bucket_of(us);
            assert!(b >= last, "bucket order at {us}");
            last = b;
            let upper = upper_bound(b);
            assert!(upper > us, "{us} below its bound {upper}");
            assert!(
                upper as f64 <= (us as f64 * 1.125).max(us as f64 + 1.0),
                "{us}: {upper}"
            );
        }
    }

    #[test]
    fn percentiles_bound_the_samples() {
        let s = TickStats::default();
        for _ in 0..98 {
            s.record(Duration::from_micros(100));
        }
        s.record(Duration::from_millis(5));
        s.record(Duration::from_millis(30));
        let sum = s.summary();
        assert_eq!(sum.ticks, 100);
        assert!(sum.p50 >= Duration::from_micros(100) && sum.p50 <= Duration::from_micros(113));
        assert!(sum.p99 >= Duration::from_millis(5) && sum.p99 <= Duration::from_micros(5_630));
        assert_eq!(sum.max, Duration::from_millis(30));
    }

    #[test]
    fn the_exported_histogram_counts_each_tick_once_at_or_below_its_bound() {
        let s = TickStats::default();
        for us in [0, 100, 101, 999, 1_000, 30_000, 20_000_000] {
            s.record(Duration::from_micros(us));
        }
        let h = s.histogram();
        assert_eq!(h.count(), 7);
        assert_eq!(h.count(), s.summary().ticks);
        // ≤ 100 µs: 0 and 100; ≤ 250 µs: 101; ≤ 1 ms: 999 and 1000; ≤ 50 ms: 30 ms; +Inf: 20 s.
        let mut expected = [0u64; LATENESS_BUCKETS_US.len() + 1];
        expected[0] = 2;
        expected[1] = 1;
        expected[3] = 2;
        expected[8] = 1;
        expected[LATENESS_BUCKETS_US.len()] = 1;
        assert_eq!(h.buckets, expected);
        assert_eq!(h.sum, Duration::from_micros(20_032_200));
        s.reset();
        assert_eq!(s.histogram(), LatenessHistogram::default());
    }

    #[test]
    fn turn_percentiles_bound_the_turns_and_the_mean_is_exact() {
        let s = TurnStats::default();
        assert_eq!(s.summary().mean(), Duration::ZERO);
        for _ in 0..99 {
            s.record(Duration::from_micros(120));
        }
        s.record(Duration::from_millis(2));
        let sum = s.summary();
        assert_eq!(sum.turns, 100);
        assert!(sum.p50 > Duration::from_micros(120) && sum.p50 <= Duration::from_micros(135));
        assert!(sum.p99 > Duration::from_micros(120) && sum.p99 <= Duration::from_micros(135));
        assert_eq!(sum.max, Duration::from_millis(2));
        assert_eq!(sum.sum, Duration::from_micros(99 * 120 + 2_000));
        assert_eq!(sum.mean(), Duration::from_nanos(138_800));
        s.reset();
        assert_eq!(s.summary().turns, 0);
        assert_eq!(s.summary().p99, Duration::ZERO);
    }
}
