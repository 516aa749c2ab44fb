//! Runtime events: what subscribers (the HTTP API's SSE stream, the CLI's progress lines, tests) see.
//!
//! Every event goes to `tracing` and to a broadcast channel; compaction records also go to the
//! store's `events` tree (written by the store in the commit transaction).

use somna_core::Timestamp;
use tokio::sync::broadcast;

use crate::protocol::{Event, Stamped};

/// Publishes events to tracing and to every subscriber. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    /// Every event a subscriber sees: this runtime's and, in a cluster, the other nodes'.
    tx: broadcast::Sender<Stamped>,
    /// This runtime's own events only (what a cluster node publishes to the others).
    local: broadcast::Sender<Stamped>,
}

impl EventBus {
    /// A bus whose subscribers may lag by up to `capacity` events before they miss some.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        let (local, _) = broadcast::channel(capacity.max(16));
        EventBus { tx, local }
    }

    /// A subscriber to this runtime's own events (not those relayed from other nodes).
    pub fn subscribe_local(&self) -> broadcast::Receiver<Stamped> {
        self.local.subscribe()
    }

    /// Delivers an event another node of the cluster emitted to this runtime's subscribers.
    pub fn relay(&self, stamped: Stamped) {
        let _ = self.tx.send(stamped);
    }

    /// A new subscriber that sees every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Stamped> {
        self.tx.subscribe()
    }

    /// Logs `event` and sends it to subscribers (none listening is fine).
    pub fn emit(&self, at: Timestamp, event: Event) {
        match &event {
            Event::CompactionFailed { .. }
            | Event::Warning { .. }
            | Event::Error { .. }
            | Event::EmergencyStuck { .. }
            | Event::ReplyTruncated { .. }
            | Event::TurnFailed { .. }
            | Event::ToolRoundsExhausted { .. } => {
                tracing::warn!(agent = %event.agent(), kind = event.kind(), ?event, "event");
            }
            Event::AgentReplied { .. } => {
                tracing::debug!(agent = %event.agent(), kind = event.kind(), "event");
            }
            _ => tracing::info!(agent = %event.agent(), kind = event.kind(), "event"),
        }
        let stamped = Stamped { at, event };
        // Only a cluster node publishing to NATS listens to its own events apart.
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(stamped.clone());
        }
        let _ = self.tx.send(stamped);
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(4096)
    }
}
