//! Scenarios: a scripted timeline of input for a runtime's agents (the village demo, load runs).
//!
//! A scenario file (TOML) names a simulated start time, a duration, a speed (simulated seconds per
//! real second), config overrides applied over runtime.toml, and a list of timed events:
//!
//! ```toml
//! title = "Three days in Emberfield"
//! start = "2026-06-01T06:00:00Z"
//! duration = "3d"
//! speed = 6000
//! set = ["defaults.tick_every=1m", "defaults.compaction.max_context_tokens=1600"]
//!
//! [[events]]
//! at = "2h 15m"            # offset from start
//! agent = "blacksmith"     # or "*" for every agent
//! kind = "user"            # user | observation | sleep
//! from = "Aldric"          # speaker name (user only)
//! text = "I need a new sword by Friday."
//! ```

use std::time::Duration;

use serde::Deserialize;
use somna_core::{AgentId, Timestamp};

use crate::protocol::Inbound;
use crate::runtime::{Runtime, RuntimeError};

/// A parsed scenario.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    /// Simulated time at the start (RFC 3339).
    pub start: String,
    /// Simulated length.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// Config overrides (`key.path=value`) applied over the runtime config.
    #[serde(default)]
    pub set: Vec<String>,
    #[serde(default)]
    pub events: Vec<ScenarioEvent>,
}

/// One timed event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioEvent {
    /// Offset from the start, in simulated time.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// The agent, or `*` for all.
    pub agent: String,
    pub kind: EventKind,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub text: String,
}

/// What a scenario event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Someone speaks to the agent.
    User,
    /// Something happens in the agent's world.
    Observation,
    /// The agent sleeps (consolidation, then compaction).
    Sleep,
}

/// Why a scenario is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: events[{index}]: {message}")]
    Event {
        file: String,
        index: usize,
        message: String,
    },
}

impl Scenario {
    /// Parses and checks a scenario; events are sorted by time.
    pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if !(s.speed.is_finite() && s.speed > 0.0) {
            return Err(ScenarioError::Parse {
                file: file.into(),
                message: format!("speed must be a positive number, got {}", s.speed),
            });
        }
        if Timestamp::parse_rfc3339(&s.start).is_err() {
            return Err(ScenarioError::Parse {
                file: file.into(),
                message: format!("start {:?} is not an RFC 3339 time", s.start),
            });
        }
        for (index, e) in s.events.iter().enumerate() {
            let bad = |message: String| ScenarioError::Event {
                file: file.into(),
                index,
                message,
            };
            if e.agent != "*" {
                AgentId::new(e.agent.as_str()).map_err(|err| bad(err.to_string()))?;
            }
            if e.kind != EventKind::Sleep && e.text.trim().is_empty() {
                return Err(bad("text is empty".into()));
            }
            if e.at > s.duration {
                return Err(bad(format!(
                    "at ({}) is after the scenario's end ({})",
                    humantime::format_duration(e.at),
                    humantime::format_duration(s.duration)
                )));
            }
        }
        s.events.sort_by_key(|e| e.at);
        Ok(s)
    }

    /// The simulated start time.
    pub fn start_time(&self) -> Timestamp {
        Timestamp::parse_rfc3339(&self.start).unwrap_or_default()
    }
}

/// Plays `scenario` against `runtime` in real time scaled by the runtime's clock (which must start
/// at the scenario's start). `on_event` is called before each event is delivered. Unknown agents are
/// reported through `on_event`'s caller via the returned count of skipped events.
pub async fn play(
    scenario: &Scenario,
    runtime: &Runtime,
    mut on_event: impl FnMut(&ScenarioEvent),
) -> Result<PlayReport, RuntimeError> {
    let clock = runtime.clock();
    let start = scenario.start_time();
    let mut report = PlayReport::default();
    for event in &scenario.events {
        let due = start.saturating_add(event.at);
        let now = clock.now();
        if due > now {
            let wait = Duration::from_millis(due.0 - now.0);
            tokio::time::sleep(clock.to_real(wait)).await;
        }
        on_event(event);
        let targets: Vec<AgentId> = if event.agent == "*" {
            runtime.agent_ids()
        } else {
            match AgentId::new(event.agent.as_str()) {
                Ok(id) => vec![id],
                Err(_) => Vec::new(),
            }
        };
        for id in targets {
            let result = match event.kind {
                EventKind::User => {
                    runtime
                        .send(
                            &id,
                            Inbound::User {
                                content: event.text.clone(),
                                name: event.from.clone(),
                            },
                        )
                        .await
                }
                EventKind::Observation => {
                    runtime
                        .send(
                            &id,
                            Inbound::Observation {
                                content: event.text.clone(),
                            },
                        )
                        .await
                }
                EventKind::Sleep => {
                    // Sleep in the background: the timeline goes on while agents consolidate.
                    let runtime = runtime.clone();
                    actix::spawn(async move {
                        let _ = runtime.sleep(&id).await;
                    });
                    Ok(())
                }
            };
            match result {
                Ok(()) => report.delivered += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "scenario event not delivered");
                    report.skipped += 1;
                }
            }
        }
    }
    let end = start.saturating_add(scenario.duration);
    let now = clock.now();
    if end > now {
        tokio::time::sleep(clock.to_real(Duration::from_millis(end.0 - now.0))).await;
    }
    Ok(report)
}

/// What playing a scenario did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlayReport {
    /// Inputs delivered (an event for `*` counts once per agent).
    pub delivered: usize,
    /// Inputs refused (unknown agent, bad input).
    pub skipped: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_sorts() {
        let s = Scenario::parse(
            r#"
title = "t"
start = "2026-06-01T06:00:00Z"
duration = "1d"
speed = 1000
[[events]]
at = "2h"
agent = "smith"
kind = "user"
from = "Aldric"
text = "hello"
[[events]]
at = "1h"
agent = "*"
kind = "sleep"
"#,
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.events[0].kind, EventKind::Sleep);
        assert_eq!(s.events[1].at, Duration::from_secs(7200));
    }

    #[test]
    fn errors_name_the_event() {
        let e = Scenario::parse(
            "title='t'\nstart='2026-06-01T06:00:00Z'\nduration='1h'\nspeed=10\n[[events]]\nat='2h'\nagent='a'\nkind='user'\ntext='x'\n",
            "s.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml: events[0]: at (2h) is after the scenario's end (1h)"
        );
        let e = Scenario::parse("title='t'\nstart='x'\nduration='1h'\nspeed=10\n", "s.toml")
            .unwrap_err();
        assert!(e.to_string().contains("RFC 3339"));
    }
}
