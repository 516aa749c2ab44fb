//! The live stream's memory (`GET /v1/events`): every event the runtime publishes gets an id, and
//! the newest [`REPLAY_EVENTS`] are kept, so that a client that reconnects with `Last-Event-ID`
//! gets what it missed instead of a gap.
//!
//! An id is `BOOT.N`: `BOOT` names this server process (its start time), `N` counts its events
//! from one. A `Last-Event-ID` of this boot resumes right after `N` (with a `lagged` notice first
//! when some of what followed was already dropped from the buffer). One of another boot — the server
//! restarted, or the client moved to another node of a cluster — cannot be resumed exactly: the
//! events the old process sent after `N` before it stopped are gone with it. The stream then says
//! so (`server_restarted`) and replays every event of this boot it still holds, so nothing the
//! new process published is missed. Durable state (histories, the event log) is in the store;
//! this is for the live events (replies, tool calls) a host acts on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use somna_runtime::Stamped;
use tokio::sync::broadcast;

/// Events kept for clients that reconnect.
pub(crate) const REPLAY_EVENTS: usize = 4096;

/// One entry of the stream: an event with its number, or events that were lost before they got
/// one (the recorder fell behind the runtime's bus).
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Event(u64, Arc<Stamped>),
    Lost(u64),
}

/// Where a reconnecting client's stream starts.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The live entries from now on.
    pub(crate) rx: broadcast::Receiver<Entry>,
    /// What the client missed, oldest first.
    pub(crate) backlog: Vec<Entry>,
    /// The `Last-Event-ID` was another process's: the events it sent after it are gone.
    pub(crate) restarted: bool,
}

/// Why a `Last-Event-ID` cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("Last-Event-ID {0:?} is not an id of this stream (BOOT.N, as its `id:` lines)")]
pub(crate) struct BadEventId(pub(crate) String);

/// The ids and the buffer.
#[derive(Debug)]
pub(crate) struct Replay {
    boot: String,
    buffer: Mutex<Buffer>,
    tx: broadcast::Sender<Entry>,
}

#[derive(Debug)]
struct Buffer {
    /// The number the next event gets.
    next: u64,
    entries: VecDeque<Entry>,
    capacity: usize,
}

impl Replay {
    /// A replay of `capacity` entries for the process that started at `boot` (any token without
    /// a `.`); live subscribers that fall `capacity` entries behind get a `lagged` notice.
    pub(crate) fn new(boot: String, capacity: usize) -> Replay {
        debug_assert!(!boot.contains('.'));
        let (tx, _) = broadcast::channel(capacity.max(1));
        Replay {
            boot,
            buffer: Mutex::new(Buffer {
                next: 1,
                entries: VecDeque::with_capacity(capacity.min(1024)),
                capacity: capacity.max(1),
            }),
            tx,
        }
    }

    /// This process's boot token.
    pub(crate) fn boot(&self) -> &str {
        &self.boot
    }

    /// Numbers `stamped`, keeps it, and hands it to the live subscribers.
    pub(crate) fn record(&self, stamped: Stamped) {
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let n = buffer.next;
        buffer.next += 1;
        self.push(&mut buffer, Entry::Event(n, Arc::new(stamped)));
    }

    /// Records that `missed` events never reached the recorder.
    pub(crate) fn lost(&self, missed: u64) {
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        self.push(&mut buffer, Entry::Lost(missed));
    }

    /// Under the buffer's lock, so that a subscriber sees each entry once: in its backlog or live.
    fn push(&self, buffer: &mut Buffer, entry: Entry) {
        if buffer.entries.len() == buffer.capacity {
            buffer.entries.pop_front();
        }
        buffer.entries.push_back(entry.clone());
        // No subscriber is not an error.
        let _ = self.tx.send(entry);
    }

    /// A subscription from now on, or after `last_event_id` (a client's `Last-Event-ID`).
    pub(crate) fn subscribe(&self, last_event_id: Option<&str>) -> Result<Resume, BadEventId> {
        let after = last_event_id.map(parse_id).transpose()?;
        let buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let rx = self.tx.subscribe();
        let Some((boot, n)) = after else {
            return Ok(Resume {
                rx,
                backlog: Vec::new(),
                restarted: false,
            });
        };
        // The first number still held (what follows the oldest entry).
        let first = buffer
            .entries
            .iter()
            .find_map(|e| match e {
                Entry::Event(id, _) => Some(*id),
                Entry::Lost(_) => None,
            })
            .unwrap_or(buffer.next);
        let restarted = boot != self.boot;
        // From this boot's first event after a restart; else from the one after `n`.
        let from = if restarted { 1 } else { n.saturating_add(1) };
        let mut backlog = Vec::new();
        if from < first {
            backlog.push(Entry::Lost(first - from));
        }
        let mut past = false;
        for entry in &buffer.entries {
            past = past
                || match entry {
                    Entry::Event(id, _) => *id >= from,
                    Entry::Lost(_) => false,
                };
            if past {
                backlog.push(entry.clone());
            }
        }
        Ok(Resume {
            rx,
            backlog,
            restarted,
        })
    }
}

/// `BOOT.N` → (BOOT, N).
fn parse_id(id: &str) -> Result<(&str, u64), BadEventId> {
    let bad = || BadEventId(id.chars().take(100).collect());
    let (boot, n) = id.trim().rsplit_once('.').ok_or_else(bad)?;
    let n = n.parse::<u64>().map_err(|_| bad())?;
    if boot.is_empty() {
        return Err(bad());
    }
    Ok((boot, n))
}

#[cfg(test)]
mod tests {
    use somna_core::{AgentId, Timestamp};
    use somna_runtime::Event;

    use super::*;

    fn said(text: &str) -> Stamped {
        Stamped {
            at: Timestamp(1),
            event: Event::AgentReplied {
                agent: AgentId::new("smith").unwrap(),
                seq: 0,
                text: text.into(),
                usage: somna_runtime::ChatUsage::default(),
            },
        }
    }

    fn ids(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Event(n, _) => n.to_string(),
                Entry::Lost(k) => format!("lost {k}"),
            })
            .collect()
    }

    #[test]
    fn a_client_of_this_boot_resumes_after_its_last_id_and_hears_of_what_was_dropped() {
        let replay = Replay::new("b1".into(), 3);
        for i in 0..5 {
            replay.record(said(&format!("r{i}")));
        }
        // 1..=5 published, 3..=5 held.
        let r = replay.subscribe(Some("b1.3")).unwrap();
        assert_eq!(ids(&r.backlog), ["4", "5"]);
        assert!(!r.restarted);
        let r = replay.subscribe(Some("b1.1")).unwrap();
        assert_eq!(ids(&r.backlog), ["lost 1", "3", "4", "5"]);
        let r = replay.subscribe(Some("b1.5")).unwrap();
        assert!(r.backlog.is_empty());
        assert!(replay.subscribe(None).unwrap().backlog.is_empty());
    }

    #[test]
    fn a_client_of_another_boot_gets_every_event_of_this_one() {
        let replay = Replay::new("b2".into(), 8);
        replay.record(said("a"));
        replay.lost(2);
        replay.record(said("b"));
        let r = replay.subscribe(Some("b1.40")).unwrap();
        assert!(r.restarted);
        assert_eq!(ids(&r.backlog), ["1", "lost 2", "2"]);
    }

    #[test]
    fn live_entries_follow_the_backlog_without_a_gap_or_a_repeat() {
        let replay = Replay::new("b3".into(), 8);
        replay.record(said("a"));
        let mut r = replay.subscribe(Some("b3.0")).unwrap();
        replay.record(said("b"));
        assert_eq!(ids(&r.backlog), ["1"]);
        let live = r.rx.try_recv().unwrap();
        assert_eq!(ids(&[live]), ["2"]);
    }

    #[test]
    fn a_malformed_id_is_refused_by_name() {
        let replay = Replay::new("b4".into(), 8);
        for bad in ["", "12", "b4.x", ".3"] {
            let e = replay.subscribe(Some(bad)).unwrap_err();
            assert!(e.to_string().contains("Last-Event-ID"), "{e}");
        }
    }
}
