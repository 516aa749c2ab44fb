//! Bounded retries: which failures are retried, and how long to wait before the next attempt.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How [`OpenAiClient`](crate::OpenAiClient) retries: at most `max_retries` more attempts after the
/// first, for 429 (honouring `Retry-After`, capped), 5xx, 408 and connection failures. Malformed and empty
/// responses and other 4xx are never retried; timeouts only when `retry_timeouts` is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; `max_retries + 1` attempts at most.
    pub max_retries: u32,
    /// The wait before the first retry; doubled for each later one.
    pub base_delay: Duration,
    /// No exponential wait is longer than this.
    pub max_delay: Duration,
    /// A server's `Retry-After` is honoured up to this long.
    pub max_retry_after: Duration,
    /// Up to this fraction is added at random to each exponential wait, so that many agents retrying at
    /// once do not hit the server in lockstep.
    pub jitter: f64,
    /// Retry an attempt that timed out (off by default: a hung server tends to stay hung, and each try
    /// costs a whole timeout).
    pub retry_timeouts: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            jitter: 0.2,
            retry_timeouts: false,
        }
    }
}

impl RetryPolicy {
    /// A policy with `max_retries` and the default waits.
    pub fn with_max_retries(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            ..Default::default()
        }
    }

    /// The wait before retry number `retry` (1 for the first retry): the server's `Retry-After` when it
    /// sent one (capped at `max_retry_after`), else `base_delay * 2^(retry-1)` capped at `max_delay`, plus
    /// jitter.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_retry_after);
        }
        let exponent = retry.saturating_sub(1).min(31);
        let base = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let jitter = self.jitter.clamp(0.0, 1.0) * unit_random();
        base.mul_f64(1.0 + jitter).min(self.max_delay.max(base))
    }
}

/// A number in [0, 1) from the clock's nanoseconds: plenty for jitter, no RNG dependency.
fn unit_random() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // Scramble the low bits so that calls close in time still differ.
    let mixed = u64::from(nanos).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
    (mixed as f64) / ((1u64 << 53) as f64)
}

/// True for the statuses a retry can fix: 408 (request timeout), 429 (rate limited) and every 5xx.
/// Every other 4xx is permanent (see [`LlmError::is_permanent`](crate::LlmError::is_permanent)).
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}

/// Parses a `Retry-After` value given in seconds (integer or decimal). HTTP dates are not supported and
/// give `None` (the exponential wait applies).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_waits_are_capped() {
        let p = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(1, None), Duration::from_millis(250));
        assert_eq!(p.delay(2, None), Duration::from_millis(500));
        assert_eq!(p.delay(3, None), Duration::from_secs(1));
        assert_eq!(p.delay(10, None), Duration::from_secs(8));
        assert_eq!(p.delay(1000, None), Duration::from_secs(8));
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let p = RetryPolicy::default();
        for retry in 1..6 {
            let base = RetryPolicy { jitter: 0.0, ..p }.delay(retry, None);
            let d = p.delay(retry, None);
            assert!(
                d >= base && d <= base.mul_f64(1.2).min(p.max_delay.max(base)),
                "{d:?} vs {base:?}"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
