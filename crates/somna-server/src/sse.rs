//! The Server-Sent Events stream of runtime events (`GET /v1/events`).
//!
//! Wire format: the stream opens with the comment `: connected`; then every event is an
//! `id: BOOT.N` line, one `data: <json>` line and a blank line, the JSON being the runtime's
//! `Stamped` event (`{"at": ms, "type": "...", ...}`). A client that reconnects with
//! `Last-Event-ID` gets what it missed first (see `replay`): after a restart of the server the
//! stream first says `data: {"type":"server_restarted"}`. A `: keep-alive` comment goes out when
//! nothing else did for the keep-alive period. A subscriber that falls behind gets
//! `data: {"type":"lagged","missed":N}` and the stream goes on with the newest events; it is never
//! dropped for lagging. The stream ends when the server shuts down.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use actix_web::web::Bytes;
use futures::Stream;
use somna_core::AgentId;
use somna_runtime::Stamped;
use somna_store::{LoggedEvent, Store};
use tokio::sync::{broadcast, watch};

use crate::metrics::{Metrics, SseClientGuard};
use crate::replay::{Entry, Resume};

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EventFilter {
    /// Only this agent's events.
    pub(crate) agent: Option<AgentId>,
    /// Only events of these types (`agent_replied`, `tool_call_requested`, …); empty means all.
    pub(crate) types: Vec<String>,
    /// A scoped token's scope: only the events of the agents it reaches.
    pub(crate) scope: Option<somna_store::TokenScope>,
}

impl EventFilter {
    fn admits(&self, stamped: &Stamped) -> bool {
        self.agent
            .as_ref()
            .is_none_or(|a| stamped.event.agent() == a)
            && (self.types.is_empty() || self.types.iter().any(|t| t == stamped.event.kind()))
            && self
                .scope
                .as_ref()
                .is_none_or(|s| s.reaches(stamped.event.agent()))
    }
}

/// The first bytes of every stream.
pub(crate) const CONNECTED: &str = ": connected\n\n";
/// The keep-alive comment.
pub(crate) const KEEP_ALIVE: &str = ": keep-alive\n\n";

struct State {
    rx: broadcast::Receiver<Entry>,
    /// What a reconnecting client missed, then a `server_restarted` notice first when it was
    /// another process's stream.
    backlog: VecDeque<Entry>,
    restarted: bool,
    boot: String,
    filter: EventFilter,
    keep_alive: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
    metrics: Metrics,
    started: bool,
    _client: SseClientGuard,
}

impl State {
    /// The frame of `entry`, or `None` when the filter leaves it out.
    fn frame(&self, entry: &Entry) -> Option<Bytes> {
        match entry {
            Entry::Event(n, stamped) => {
                if !self.filter.admits(stamped) {
                    return None;
                }
                match serde_json::to_string(&**stamped) {
                    Ok(json) => Some(Bytes::from(format!(
                        "id: {}.{n}\ndata: {json}\n\n",
                        self.boot
                    ))),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot serialize an event for SSE");
                        None
                    }
                }
            }
            Entry::Lost(missed) => {
                self.metrics.missed_events(true, *missed);
                Some(lagged(*missed))
            }
        }
    }
}

fn lagged(missed: u64) -> Bytes {
    Bytes::from(format!(
        "data: {{\"type\":\"lagged\",\"missed\":{missed}}}\n\n"
    ))
}

/// The notice that the `Last-Event-ID` was another process's (see `replay`).
pub(crate) const RESTARTED: &str = "data: {\"type\":\"server_restarted\"}\n\n";

/// A timer that first fires one `period` from now (at least 10 ms), then every period; missed
/// ticks are delayed, not bunched.
fn every(period: Duration) -> tokio::time::Interval {
    let period = period.max(Duration::from_millis(10));
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// The SSE body for one subscriber: what it missed (`resume`), then its events as they come,
/// keep-alives, `lagged` notices; it ends when `shutdown` turns true (or the event bus closes).
/// `boot` names this process in the events' ids.
pub(crate) fn event_stream(
    resume: Resume,
    boot: String,
    filter: EventFilter,
    keep_alive: Duration,
    shutdown: watch::Receiver<bool>,
    metrics: Metrics,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    let state = State {
        rx: resume.rx,
        backlog: resume.backlog.into(),
        restarted: resume.restarted,
        boot,
        filter,
        keep_alive: every(keep_alive),
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
        if s.restarted {
            s.restarted = false;
            return Some((Ok(Bytes::from_static(RESTARTED.as_bytes())), s));
        }
        while let Some(entry) = s.backlog.pop_front() {
            if let Some(frame) = s.frame(&entry) {
                s.keep_alive.reset();
                return Some((Ok(frame), s));
            }
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
                    Ok(entry) => {
                        if let Some(frame) = s.frame(&entry) {
                            s.keep_alive.reset();
                            return Some((Ok(frame), s));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        s.metrics.missed_events(true, missed);
                        s.keep_alive.reset();
                        return Some((Ok(lagged(missed)), s));
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

/// How often a log stream reads the store when no live event woke it: events another node logs
/// while the NATS fan-out is down still arrive within this.
pub(crate) const LOG_POLL: Duration = Duration::from_secs(1);
/// Most events a log stream reads from the store at once.
const LOG_BATCH: usize = 100;

struct LogState {
    store: Store,
    agent: AgentId,
    /// The seq of the last event sent (`None`: from the first event on).
    cursor: Option<u64>,
    pending: VecDeque<LoggedEvent>,
    rx: broadcast::Receiver<Stamped>,
    /// The live events still come (the bus is open).
    live: bool,
    poll: tokio::time::Interval,
    keep_alive: tokio::time::Interval,
    shutdown: watch::Receiver<bool>,
    started: bool,
    /// Read the store before waiting (at the start, and after a full batch).
    read_now: bool,
    _client: SseClientGuard,
}

impl LogState {
    /// The next events after the cursor, from the store (off the async workers: a Postgres read
    /// blocks). A failed read is logged and retried at the next wake-up.
    async fn read(&mut self) {
        let (store, agent, cursor) = (self.store.clone(), self.agent.clone(), self.cursor);
        let read = actix_web::rt::task::spawn_blocking(move || {
            store.events_after(&agent, cursor, LOG_BATCH)
        })
        .await;
        match read {
            Ok(Ok(events)) => {
                self.read_now = events.len() == LOG_BATCH;
                if let Some(last) = events.last() {
                    self.cursor = Some(last.seq);
                }
                self.pending.extend(events);
            }
            Ok(Err(e)) => {
                tracing::warn!(agent = %self.agent, error = %e, "cannot read the event log for SSE")
            }
            Err(e) => {
                tracing::warn!(agent = %self.agent, error = %e, "the event log read panicked")
            }
        }
    }
}

/// The SSE body of one agent's durable event log (`GET /v1/agents/{id}/events` with `Accept:
/// text/event-stream`): every logged event after `cursor` (`None`: from the first), oldest first,
/// then each new one as it is logged, as `id: <seq>` and `data: <LoggedEvent json>`. The `id` is
/// what a client sends back as `Last-Event-ID` to resume after a disconnect, on this node or any
/// other of a cluster, without a gap or a repeat. Live events of the agent (this node's, or any
/// node's through the cluster's fan-out) wake it; a poll every [`LOG_POLL`] covers the rest.
pub(crate) fn log_stream(
    store: Store,
    agent: AgentId,
    cursor: Option<u64>,
    rx: broadcast::Receiver<Stamped>,
    keep_alive: Duration,
    shutdown: watch::Receiver<bool>,
    metrics: &Metrics,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    let state = LogState {
        store,
        agent,
        cursor,
        pending: VecDeque::new(),
        rx,
        live: true,
        poll: every(LOG_POLL),
        keep_alive: every(keep_alive),
        shutdown,
        started: false,
        read_now: true,
        _client: metrics.sse_client(),
    };
    futures::stream::unfold(state, |mut s| async move {
        if !s.started {
            s.started = true;
            return Some((Ok(Bytes::from_static(CONNECTED.as_bytes())), s));
        }
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            if let Some(event) = s.pending.pop_front() {
                match serde_json::to_string(&event) {
                    Ok(json) => {
                        s.keep_alive.reset();
                        let frame = format!("id: {}\ndata: {json}\n\n", event.seq);
                        return Some((Ok(Bytes::from(frame)), s));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot serialize a logged event for SSE");
                        continue;
                    }
                }
            }
            if s.read_now {
                s.read().await;
                if !s.pending.is_empty() {
                    continue;
                }
            }
            tokio::select! {
                biased;
                changed = s.shutdown.changed() => {
                    if changed.is_err() || *s.shutdown.borrow() {
                        return None;
                    }
                }
                received = s.rx.recv(), if s.live => match received {
                    Ok(stamped) => s.read_now |= stamped.event.agent() == &s.agent,
                    // Missed live events may have been this agent's: read to be sure.
                    Err(broadcast::error::RecvError::Lagged(_)) => s.read_now = true,
                    // No live events any more (the runtime is stopping): the poll goes on.
                    Err(broadcast::error::RecvError::Closed) => s.live = false,
                },
                _ = s.poll.tick() => s.read_now = true,
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
    use crate::replay::Replay;

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

    /// The stream of boot `b` from the start of `replay` through `filter`, kept alive hourly.
    fn open(
        replay: &Replay,
        filter: EventFilter,
        stopped: watch::Receiver<bool>,
        metrics: Metrics,
    ) -> impl Stream<Item = Result<Bytes, Infallible>> + Unpin {
        Box::pin(event_stream(
            replay.subscribe(None).unwrap(),
            "b".into(),
            filter,
            Duration::from_secs(3600),
            stopped,
            metrics,
        ))
    }

    #[tokio::test]
    async fn filters_lags_and_ends_at_shutdown() {
        let replay = Replay::new("b".into(), 16);
        let (stop, stopped) = watch::channel(false);
        let metrics = Metrics::new();
        let filter = EventFilter {
            agent: Some(AgentId::new("smith").unwrap()),
            types: vec![],
            scope: None,
        };
        let mut s = open(&replay, filter, stopped, metrics.clone());
        assert_eq!(next_text(&mut s).await, CONNECTED);
        // 20 events into a buffer of 16: the oldest 4 are lost.
        for i in 0..20 {
            replay.record(stamped(
                if i % 2 == 0 { "smith" } else { "bard" },
                &format!("r{i}"),
            ));
        }
        assert_eq!(
            next_text(&mut s).await,
            "data: {\"type\":\"lagged\",\"missed\":4}\n\n"
        );
        // Then the survivors, filtered to smith: r4, r6, ...
        let first = next_text(&mut s).await;
        assert_eq!(
            first,
            "id: b.5\ndata: {\"at\":1000,\"type\":\"agent_replied\",\"agent\":\"smith\",\"seq\":3,\"text\":\"r4\"}\n\n"
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
        let replay = Replay::new("b".into(), 16);
        let (_stop, stopped) = watch::channel(false);
        let mut s = Box::pin(event_stream(
            replay.subscribe(None).unwrap(),
            "b".into(),
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
        let replay = Replay::new("b".into(), 16);
        let (_stop, stopped) = watch::channel(false);
        let filter = EventFilter {
            agent: None,
            types: vec!["sleep_started".into()],
            scope: None,
        };
        let mut s = open(&replay, filter, stopped, Metrics::new());
        assert_eq!(next_text(&mut s).await, CONNECTED);
        replay.record(stamped("smith", "ignored"));
        replay.record(Stamped {
            at: Timestamp(5),
            event: Event::SleepStarted {
                agent: AgentId::new("bard").unwrap(),
                tired: false,
            },
        });
        assert_eq!(
            next_text(&mut s).await,
            "id: b.2\ndata: {\"at\":5,\"type\":\"sleep_started\",\"agent\":\"bard\"}\n\n"
        );
    }

    #[tokio::test]
    async fn a_scoped_token_streams_only_the_agents_it_reaches() {
        let replay = Replay::new("b".into(), 16);
        let (_stop, stopped) = watch::channel(false);
        let filter = EventFilter {
            scope: Some(somna_store::TokenScope {
                agents: "tenant-b-".into(),
                access: somna_store::Access::Read,
            }),
            ..EventFilter::default()
        };
        let mut s = open(&replay, filter, stopped, Metrics::new());
        assert_eq!(next_text(&mut s).await, CONNECTED);
        replay.record(stamped("tenant-a-bob", "secret of a"));
        replay.record(stamped("tenant-b-bob", "for b"));
        let text = next_text(&mut s).await;
        assert!(
            text.starts_with("id: b.2\n") && text.contains("for b"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_reconnecting_client_gets_what_it_missed_then_the_live_events() {
        let replay = Replay::new("b".into(), 16);
        let (_stop, stopped) = watch::channel(false);
        for i in 0..3 {
            replay.record(stamped("smith", &format!("r{i}")));
        }
        let open = |last: &str| {
            Box::pin(event_stream(
                replay.subscribe(Some(last)).unwrap(),
                "b".into(),
                EventFilter::default(),
                Duration::from_secs(3600),
                stopped.clone(),
                Metrics::new(),
            ))
        };
        // Of this boot: after its last id, without a notice.
        let mut s = open("b.1");
        assert_eq!(next_text(&mut s).await, CONNECTED);
        assert!(next_text(&mut s).await.starts_with("id: b.2\n"));
        assert!(next_text(&mut s).await.starts_with("id: b.3\n"));
        replay.record(stamped("smith", "live"));
        let live = next_text(&mut s).await;
        assert!(
            live.starts_with("id: b.4\n") && live.contains("\"live\""),
            "{live}"
        );
        // Of another boot: the notice, then every event of this one.
        let mut s = open("a.99");
        assert_eq!(next_text(&mut s).await, CONNECTED);
        assert_eq!(next_text(&mut s).await, RESTARTED);
        for n in 1..=4 {
            assert!(next_text(&mut s).await.starts_with(&format!("id: b.{n}\n")));
        }
    }
}
