//! The Server-Sent Events stream of runtime events (`GET /v1/events`).
//!
//! Wire format: the stream opens with the comment `: connected`; then every event is one
//! `data: <json>` line and a blank line, the JSON being the runtime's `Stamped` event (`{"at": ms,
//! "type": "...", ...}`). A `: keep-alive` comment goes out when nothing else did for the keep-alive
//! period. A subscriber that falls behind the runtime's event buffer gets
//! `data: {"type":"lagged","missed":N}` and the stream goes on with the newest events; it is never
//! dropped for lagging. The stream ends when the server shuts down.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::web::Bytes;
use futures::Stream;
use somna_core::AgentId;
use somna_runtime::Stamped;
use tokio::sync::{broadcast, watch};

use crate::metrics::{Metrics, SseClientGuard};

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EventFilter {
    /// Only this agent's events.
    pub(crate) agent: Option<AgentId>,
    /// Only events of these types (`agent_replied`, `tool_call_requested`, …); empty means all.
    pub(crate) types: Vec<String>,
}

impl EventFilter {
    fn admits(&self, stamped: &Stamped) -> bool {
        self.agent
            .as_ref()
            .is_none_or(|a| stamped.event.agent() == a)
            && (self.types.is_empty() || self.types.iter().any(|t| t == stamped.event.kind()))
    }
}

/// Every event `type` the runtime emits (`Event::kind`), the names `?types=` accepts. An unknown
/// name is a 400, so that a typo never makes a stream silently empty. A new `Event` variant adds its
/// name here (the test `event_types_are_the_runtimes` stops compiling until it does).
pub(crate) const EVENT_TYPES: &[&str] = &[
    "compaction_started",
    "compaction_completed",
    "compaction_skipped",
    "compaction_failed",
    "emergency_triggered",
    "uncompacted",
    "sleep_started",
    "consolidation_completed",
    "sleep_completed",
    "agent_replied",
    "tool_call_requested",
    "tool_call_timed_out",
    "warning",
    "error",
    "emergency_stuck",
    "reply_truncated",
    "turn_failed",
    "tool_rounds_exhausted",
];

/// The first bytes of every stream.
pub(crate) const CONNECTED: &str = ": connected\n\n";
/// The keep-alive comment.
pub(crate) const KEEP_ALIVE: &str = ": keep-alive\n\n";

struct State {
    rx: broadcast::Receiver<Stamped>,
    filter: EventFilter,
    keep_alive: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
    metrics: Metrics,
    started: bool,
    _client: SseClientGuard,
}

/// The SSE body for one subscriber: its events as they come, keep-alives, `lagged` notices; it ends
/// when `shutdown` turns true (or the runtime's event bus closes).
pub(crate) fn event_stream(
    rx: broadcast::Receiver<Stamped>,
    filter: EventFilter,
    keep_alive: Duration,
    shutdown: watch::Receiver<bool>,
    metrics: Metrics,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    let period = keep_alive.max(Duration::from_millis(10));
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = State {
        rx,
        filter,
        keep_alive: interval,
        shutdown,
        _client: metrics.sse_client(),
        metrics,
        started: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        if !s.started {
            s.started = true;
            return Some((Ok(Bytes::from_static(CONNECTED.as_bytes())), s));
        }
        if *s.shutdown.borrow() {
            return None;
        }
        loop {
            tokio::select! {
                biased;
                changed = s.shutdown.changed() => {
                    if changed.is_err() || *s.shutdown.borrow() {
                        return None;
                    }
                }
                received = s.rx.recv() => match received {
                    Ok(stamped) => {
                        if !s.filter.admits(&stamped) {
                            continue;
                        }
                        match serde_json::to_string(&stamped) {
                            Ok(json) => {
                                s.keep_alive.reset();
                                return Some((Ok(Bytes::from(format!("data: {json}\n\n"))), s));
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot serialize an event for SSE");
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        s.metrics.missed_events(true, missed);
                        s.keep_alive.reset();
                        let line = format!("data: {{\"type\":\"lagged\",\"missed\":{missed}}}\n\n");
                        return Some((Ok(Bytes::from(line)), s));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = s.keep_alive.tick() => {
                    return Some((Ok(Bytes::from_static(KEEP_ALIVE.as_bytes())), s));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use somna_core::Timestamp;
    use somna_runtime::Event;

    use super::*;

    fn stamped(agent: &str, text: &str) -> Stamped {
        Stamped {
            at: Timestamp(1_000),
            event: Event::AgentReplied {
                agent: AgentId::new(agent).unwrap(),
                seq: 3,
                text: text.into(),
                usage: somna_runtime::ChatUsage::default(),
            },
        }
    }

    async fn next_text<S: Stream<Item = Result<Bytes, Infallible>> + Unpin>(s: &mut S) -> String {
        let Some(Ok(bytes)) = s.next().await else {
            return "<end>".into();
        };
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn filters_lags_and_ends_at_shutdown() {
        let (tx, rx) = broadcast::channel(16);
        let (stop, stopped) = watch::channel(false);
        let metrics = Metrics::new();
        let filter = EventFilter {
            agent: Some(AgentId::new("smith").unwrap()),
            types: vec![],
        };
        let mut s = Box::pin(event_stream(
            rx,
            filter,
            Duration::from_secs(3600),
            stopped,
            metrics.clone(),
        ));
        assert_eq!(next_text(&mut s).await, CONNECTED);
        // 20 events into a buffer of 16: the oldest 4 are lost.
        for i in 0..20 {
            tx.send(stamped(
                if i % 2 == 0 { "smith" } else { "bard" },
                &format!("r{i}"),
            ))
            .unwrap();
        }
        assert_eq!(
            next_text(&mut s).await,
            "data: {\"type\":\"lagged\",\"missed\":4}\n\n"
        );
        // Then the survivors, filtered to smith: r4, r6, ...
        let first = next_text(&mut s).await;
        assert_eq!(
            first,
            "data: {\"at\":1000,\"type\":\"agent_replied\",\"agent\":\"smith\",\"seq\":3,\"text\":\"r4\"}\n\n"
        );
        for i in [6, 8, 10, 12, 14, 16, 18] {
            assert!(next_text(&mut s).await.contains(&format!("\"r{i}\"")));
        }
        stop.send(true).unwrap();
        assert_eq!(next_text(&mut s).await, "<end>");
        let rendered = metrics.render(&Default::default());
        assert!(rendered.contains("somna_events_missed_total{consumer=\"sse\"} 4"));
    }

    #[tokio::test(start_paused = true)]
    async fn keep_alive_when_idle() {
        let (_tx, rx) = broadcast::channel::<Stamped>(16);
        let (_stop, stopped) = watch::channel(false);
        let mut s = Box::pin(event_stream(
            rx,
            EventFilter::default(),
            Duration::from_secs(15),
            stopped,
            Metrics::new(),
        ));
        assert_eq!(next_text(&mut s).await, CONNECTED);
        // The paused clock advances by itself to the next timer.
        assert_eq!(next_text(&mut s).await, KEEP_ALIVE);
        assert_eq!(next_text(&mut s).await, KEEP_ALIVE);
    }

    #[tokio::test]
    async fn type_filter() {
        let (tx, rx) = broadcast::channel(16);
        let (_stop, stopped) = watch::channel(false);
        let filter = EventFilter {
            agent: None,
            types: vec!["sleep_started".into()],
        };
        let mut s = Box::pin(event_stream(
            rx,
            filter,
            Duration::from_secs(3600),
            stopped,
            Metrics::new(),
        ));
        assert_eq!(next_text(&mut s).await, CONNECTED);
        tx.send(stamped("smith", "ignored")).unwrap();
        tx.send(Stamped {
            at: Timestamp(5),
            event: Event::SleepStarted {
                agent: AgentId::new("bard").unwrap(),
            },
        })
        .unwrap();
        assert_eq!(
            next_text(&mut s).await,
            "data: {\"at\":5,\"type\":\"sleep_started\",\"agent\":\"bard\"}\n\n"
        );
    }

    /// The `type` of `event` as [`EVENT_TYPES`] spells it. The match is exhaustive: a new `Event`
    /// variant does not compile here until it is given a name in [`EVENT_TYPES`].
    fn listed_type(event: &Event) -> &'static str {
        let i = match event {
            Event::CompactionStarted { .. } => 0,
            Event::CompactionCompleted { .. } => 1,
            Event::CompactionSkipped { .. } => 2,
            Event::CompactionFailed { .. } => 3,
            Event::EmergencyTriggered { .. } => 4,
            Event::Uncompacted { .. } => 5,
            Event::SleepStarted { .. } => 6,
            Event::ConsolidationCompleted { .. } => 7,
            Event::SleepCompleted { .. } => 8,
            Event::AgentReplied { .. } => 9,
            Event::ToolCallRequested { .. } => 10,
            Event::ToolCallTimedOut { .. } => 11,
            Event::Warning { .. } => 12,
            Event::Error { .. } => 13,
            Event::EmergencyStuck { .. } => 14,
            Event::ReplyTruncated { .. } => 15,
            Event::TurnFailed { .. } => 16,
            Event::ToolRoundsExhausted { .. } => 17,
        };
        EVENT_TYPES[i]
    }

    #[test]
    fn event_types_are_the_runtimes() {
        let agent = AgentId::new("smith").unwrap();
        let trigger = somna_core::record::Trigger::Manual;
        let events = [
            Event::CompactionStarted {
                agent: agent.clone(),
                trigger,
                usage: 0.5,
            },
            Event::CompactionSkipped {
                agent: agent.clone(),
                trigger,
                reason: "r".into(),
                usage: 0.5,
            },
            Event::CompactionFailed {
                agent: agent.clone(),
                trigger,
                reason: "r".into(),
            },
            Event::EmergencyTriggered {
                agent: agent.clone(),
                usage: 0.9,
            },
            Event::Uncompacted {
                agent: agent.clone(),
                summary_seq: 1,
                restored: 2,
            },
            Event::SleepStarted {
                agent: agent.clone(),
            },
            Event::ConsolidationCompleted {
                agent: agent.clone(),
                entries: 1,
                facts: 1,
                reflections: 0,
            },
            Event::SleepCompleted {
                agent: agent.clone(),
            },
            Event::AgentReplied {
                agent: agent.clone(),
                seq: 1,
                text: "t".into(),
                usage: somna_runtime::ChatUsage::default(),
            },
            Event::ToolCallRequested {
                agent: agent.clone(),
                call_id: "c".into(),
                name: "n".into(),
                arguments: "{}".into(),
            },
            Event::ToolCallTimedOut {
                agent: agent.clone(),
                call_id: "c".into(),
                name: "n".into(),
            },
            Event::Warning {
                agent: agent.clone(),
                message: "m".into(),
            },
            Event::Error {
                agent: agent.clone(),
                message: "m".into(),
            },
            Event::EmergencyStuck {
                agent: agent.clone(),
                usage: 0.9,
                threshold: 0.8,
                reason: "r".into(),
            },
            Event::ReplyTruncated {
                agent: agent.clone(),
                seq: 1,
                tokens: 900,
                kept: 512,
            },
            Event::TurnFailed {
                agent: agent.clone(),
                attempts: 3,
                reason: "r".into(),
            },
            Event::ToolRoundsExhausted { agent, rounds: 4 },
        ];
        for event in &events {
            assert_eq!(listed_type(event), event.kind());
            let json = serde_json::to_value(event).unwrap();
            assert_eq!(json["type"], event.kind());
        }
        // Every name is distinct, so the index of each variant is its own.
        let mut names = EVENT_TYPES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EVENT_TYPES.len());
    }
}
