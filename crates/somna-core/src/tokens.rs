//! Token counting and calibration.

use serde::{Deserialize, Serialize};

/// A per-agent correction factor for tokenizers Somna only estimates, learned from the
/// `usage.prompt_tokens` that servers report (an exponential moving average of reported/estimated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Multiply an estimate by this to get the server's count.
    pub factor: f64,
    /// How many server reports fed the average.
    pub samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            factor: 1.0,
            samples: 0,
        }
    }
}
