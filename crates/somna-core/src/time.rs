//! Timestamps. Core never reads the clock: callers pass `now` in, so every function stays pure.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The epoch itself; useful as "never".
    pub const ZERO: Timestamp = Timestamp(0);

    /// Converts a wall-clock time (times before the epoch clamp to zero).
    pub fn from_system_time(t: SystemTime) -> Self {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64)
            .unwrap_or(0);
        Timestamp(ms)
    }

    /// The wall-clock time this timestamp names.
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0)
    }

    /// This timestamp moved back by `d`, clamped at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_sub(d.as_millis().min(u128::from(u64::MAX)) as u64),
        )
    }

    /// This timestamp moved forward by `d`.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(u128::from(u64::MAX)) as u64),
        )
    }

    /// Parses RFC 3339 (`2026-11-21T10:00:00Z`).
    pub fn parse_rfc3339(s: &str) -> Result<Self, humantime::TimestampError> {
        humantime::parse_rfc3339_weak(s).map(Self::from_system_time)
    }
}

impl Timestamp {
    /// The date and minute in UTC, `2023-05-08 13:56`: how the prompt dates what was said.
    pub fn minute_label(self) -> String {
        let full = humantime::format_rfc3339_seconds(self.to_system_time()).to_string();
        // `2023-05-08T13:56:00Z` → `2023-05-08 13:56`.
        full.get(..16)
            .map_or(full.clone(), |s| s.replacen('T', " ", 1))
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 with millisecond precision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            humantime::format_rfc3339_millis(self.to_system_time())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minute_labels_are_utc_dates_and_minutes() {
        let t = Timestamp::parse_rfc3339("2023-05-08T13:56:42Z").unwrap();
        assert_eq!(t.minute_label(), "2023-05-08 13:56");
    }

    #[test]
    fn rfc3339_round_trip() {
        let t = Timestamp::parse_rfc3339("2026-11-21T10:00:00.250Z").unwrap_or_default();
        assert_eq!(t.to_string(), "2026-11-21T10:00:00.250Z");
        assert_eq!(t.saturating_sub(Duration::from_secs(1)).0, t.0 - 1000);
    }
}
