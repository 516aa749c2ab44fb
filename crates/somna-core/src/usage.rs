//! The usage formula, written once: how full an agent's context window is.
//!
//! Usage = (persona + working context + live history) tokens by the local count, calibrated for
//! tokenizers Somna only estimates (times [`Calibration::effective_factor`], rounded up, never
//! below the local count), divided by `max_context_tokens`. The working context counts with its
//! budget (`compaction.working_share` of the window) whether or not a turn fills it, so usage is
//! O(1), the same for every caller, and what compaction frees stays free for it
//! ([`fixed_tokens`]). Every caller (the compaction plan, the agent's tick and status, the
//! compaction engine, the import and the prompt preview) computes it with [`Usage::new`] over
//! [`fixed_tokens`], so they always agree on the same agent.

use crate::config::CompactionConfig;
use crate::tokens::{Calibration, TokenCounter};

/// The tokens every usage check counts besides the live history: the persona and the working
/// context's budget.
pub fn fixed_tokens(compaction: &CompactionConfig, persona_tokens: u64) -> u64 {
    persona_tokens.saturating_add(compaction.working_budget())
}

/// How full a prompt makes the context window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// Prompt tokens by the local count: persona + working context + live history.
    pub tokens: u64,
    /// `tokens` calibrated: times the factor, rounded up; never below `tokens`.
    pub calibrated: u64,
    /// The context window, `max_context_tokens` (at least 1).
    pub max: u64,
}

impl Usage {
    /// The usage of a prompt of `fixed_tokens` (persona and working context) plus `history_tokens`
    /// (the live history, as stored), calibrated by `factor` (see [`calibration_factor`]; a factor
    /// below 1.0 or not a finite number counts as 1.0, one above [`Calibration::MAX_RATIO`] as
    /// that), in a window of `max_context_tokens`.
    pub fn new(
        fixed_tokens: u64,
        history_tokens: u64,
        factor: f64,
        max_context_tokens: u32,
    ) -> Usage {
        let tokens = fixed_tokens.saturating_add(history_tokens);
        let factor = if factor.is_finite() {
            factor.clamp(1.0, Calibration::MAX_RATIO)
        } else {
            1.0
        };
        // f64 → u64 saturates; the floor keeps huge counts exact where f64 rounding would not.
        let calibrated = ((tokens as f64 * factor).ceil() as u64).max(tokens);
        Usage {
            tokens,
            calibrated,
            max: u64::from(max_context_tokens.max(1)),
        }
    }

    /// Usage as a share of the window, 0–1 (above 1 when the prompt does not fit).
    pub fn fraction(&self) -> f64 {
        self.calibrated as f64 / self.max as f64
    }

    /// Whether this usage calls for an emergency compaction under `compaction`: the one place
    /// the decision is made ([`over_emergency`]).
    pub fn is_emergency(&self, compaction: &CompactionConfig) -> bool {
        over_emergency(self.fraction(), compaction)
    }
}

/// Whether usage `fraction` (calibrated, 0–1) is at or over `compaction`'s emergency threshold:
/// the tick's check, the ladder's goal, the plan's tail, the import's batches and the tired sleep
/// all ask this, so they cannot disagree on an agent at the threshold.
pub fn over_emergency(fraction: f64, compaction: &CompactionConfig) -> bool {
    fraction >= compaction.emergency_threshold
}

/// The factor usage applies for an agent whose tokens `counter` counts and whose server reports
/// taught it `calibration`: 1.0 for an exact tokenizer, else [`Calibration::effective_factor`].
pub fn calibration_factor(counter: &TokenCounter, calibration: &Calibration) -> f64 {
    if counter.is_exact() {
        1.0
    } else {
        calibration.effective_factor()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_calibrated_and_never_below_the_local_count() {
        let u = Usage::new(100, 900, 1.25, 2_000);
        assert_eq!(u.tokens, 1_000);
        assert_eq!(u.calibrated, 1_250);
        assert_eq!(u.fraction(), 0.625);
        // A factor below 1.0 (a server that says fewer tokens) cannot lower usage.
        assert_eq!(Usage::new(100, 900, 0.5, 2_000).calibrated, 1_000);
        assert_eq!(Usage::new(100, 900, f64::NAN, 2_000).calibrated, 1_000);
        assert_eq!(Usage::new(0, 10, 100.0, 2_000).calibrated, 30);
        // Rounded up: 3 × 1.1 = 3.3 → 4.
        assert_eq!(Usage::new(0, 3, 1.1, 2_000).calibrated, 4);
        // A zero window counts as one token.
        assert_eq!(Usage::new(0, 3, 1.0, 0).fraction(), 3.0);
    }

    #[test]
    fn the_working_budget_counts_whether_filled_or_not() {
        let c = CompactionConfig {
            max_context_tokens: 4_000,
            working_share: 0.25,
            ..CompactionConfig::default()
        };
        assert_eq!(fixed_tokens(&c, 50), 1_050);
        let off = CompactionConfig {
            working_share: 0.0,
            ..c
        };
        assert_eq!(fixed_tokens(&off, 50), 50);
    }

    #[test]
    fn the_emergency_begins_at_the_threshold_itself() {
        let c = CompactionConfig {
            emergency_threshold: 0.8,
            ..CompactionConfig::default()
        };
        assert!(!over_emergency(0.799, &c));
        assert!(over_emergency(0.8, &c));
        // On calibrated usage: 700 local tokens are 770 at 1.1, over 0.75 of 1,000.
        let u = Usage::new(0, 700, 1.1, 1_000);
        let c = CompactionConfig {
            emergency_threshold: 0.75,
            ..c
        };
        assert!(u.is_emergency(&c));
        assert!(!Usage::new(0, 700, 1.0, 1_000).is_emergency(&c));
    }

    #[test]
    fn the_factor_is_one_for_exact_tokenizers() {
        let cal = Calibration {
            factor: 1.4,
            samples: Calibration::CORROBORATION,
        };
        assert_eq!(calibration_factor(&TokenCounter::heuristic(), &cal), 1.4);
        // Above TRUSTED only once corroborated.
        let early = Calibration { samples: 9, ..cal };
        assert_eq!(
            calibration_factor(&TokenCounter::heuristic(), &early),
            Calibration::TRUSTED
        );
        assert_eq!(
            calibration_factor(&TokenCounter::for_model("gpt-4o"), &cal),
            1.0
        );
        let low = Calibration {
            factor: 0.7,
            samples: 9,
        };
        assert_eq!(calibration_factor(&TokenCounter::heuristic(), &low), 1.0);
        // The same number `Calibration::apply` gives.
        let u = Usage::new(
            0,
            1_003,
            calibration_factor(&TokenCounter::heuristic(), &cal),
            1,
        );
        assert_eq!(u.calibrated, cal.apply(1_003));
    }
}
