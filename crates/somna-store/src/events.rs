//! The per-agent event log: compactions, uncompactions, maskings, failures and notes.

use somna_core::{AgentId, AgentRecord, EventRecord, LoggedEvent, StoredEvent, Timestamp, Writer};

use crate::codec;
use crate::error::Result;
use crate::keys;
use crate::store::{Store, TreeId, WriteSet, tree_names};

impl Store {
    /// Logs an event; returns its seq.
    pub fn log_event(&self, id: &AgentId, event: EventRecord) -> Result<u64> {
        self.log_with(id, &event, |_| {})
    }

    /// Ends a sleep: logs its `Sleep` event and advances the durable schedule to `next` in one
    /// transaction, so a due time is either served and recorded or neither. Returns the seq.
    pub fn finish_sleep(&self, id: &AgentId, event: EventRecord, next: Timestamp) -> Result<u64> {
        self.log_with(id, &event, |r| {
            r.next_sleep_at = Some(next);
            if let EventRecord::Sleep {
                grounding: Some(g), ..
            } = &event
            {
                r.grounding.add(*g);
            }
        })
    }

    /// Logs `event` and applies `change` to the agent's record, in one transaction.
    fn log_with(
        &self,
        id: &AgentId,
        event: &EventRecord,
        change: impl FnOnce(&mut AgentRecord),
    ) -> Result<u64> {
        let by = self.writer(id);
        self.update_record_with(id, |record, writes| {
            change(record);
            push_event(id, record, event, by, writes)
        })
        .map(|(_, seq)| seq)
    }

    /// The agent's last `limit` events, newest first.
    pub fn events(&self, id: &AgentId, limit: usize) -> Result<Vec<LoggedEvent>> {
        let prefix = keys::prefix(id);
        let end = keys::prefix_end(&prefix);
        self.inner
            .trees
            .events
            .range(prefix..end)
            .rev()
            .take(limit)
            .map(|item| {
                let (key, value) = item?;
                logged(&key, &value)
            })
            .collect()
    }

    /// The agent's events after seq `after` (all of them for `None`), oldest first, at most
    /// `limit`: how a follower of the log (an SSE stream resumed from `Last-Event-ID`) catches up.
    pub fn events_after(
        &self,
        id: &AgentId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>> {
        let prefix = keys::prefix(id);
        let start = match after {
            Some(seq) => match seq.checked_add(1) {
                Some(next) => keys::seq(id, next),
                None => return Ok(Vec::new()),
            },
            None => prefix.clone(),
        };
        let end = keys::prefix_end(&prefix);
        self.inner
            .trees
            .events
            .range(start..end)
            .take(limit)
            .map(|item| {
                let (key, value) = item?;
                logged(&key, &value)
            })
            .collect()
    }

    /// Who writes this agent's events from this store: the node and its lease epoch on the
    /// agent's shard (`None` outside a cluster, or when the node does not hold the shard, in
    /// which case the write is refused as fenced anyway).
    pub(crate) fn writer(&self, id: &AgentId) -> Option<Writer> {
        let membership = self.inner.cluster.as_ref()?;
        let (_, fence) = membership.fence(id.as_str().as_bytes());
        fence.map(|f| Writer {
            node: f.node,
            epoch: f.epoch,
        })
    }
}

/// A stored event read back under its key.
fn logged(key: &[u8], value: &[u8]) -> Result<LoggedEvent> {
    let stored: StoredEvent = codec::decode(tree_names::EVENTS, key, value)?;
    Ok(LoggedEvent {
        seq: keys::trailing_u64(key).unwrap_or_default(),
        event: stored.event,
        by: stored.by,
    })
}

/// Assigns the next event seq of `record` to `event` and adds its write; returns the seq.
pub(crate) fn push_event(
    id: &AgentId,
    record: &mut somna_core::AgentRecord,
    event: &EventRecord,
    by: Option<Writer>,
    writes: &mut WriteSet,
) -> Result<u64> {
    let seq = record.next_event_seq;
    record.next_event_seq += 1;
    let stored = StoredEvent {
        event: event.clone(),
        by,
    };
    let value = codec::encode(tree_names::EVENTS, &stored)?;
    writes.create(TreeId::Events, keys::seq(id, seq), value, seq);
    Ok(seq)
}

#[cfg(test)]
mod tests {
    use somna_core::Trigger;

    use super::*;

    #[test]
    fn an_event_stored_before_writers_were_recorded_reads_back_without_one() {
        let event = EventRecord::CompactionFailed {
            at: Timestamp(7),
            trigger: Trigger::Emergency,
            reason: "timeout".into(),
        };
        let old = codec::encode(tree_names::EVENTS, &event).unwrap();
        let read = logged(b"agent\x00\x00\x00\x00\x00\x00\x00\x00\x03", &old).unwrap();
        assert_eq!(read.event, event);
        assert_eq!(read.by, None);
        let by = Writer {
            node: "n1".into(),
            epoch: 4,
        };
        let new = codec::encode(
            tree_names::EVENTS,
            &StoredEvent {
                event: event.clone(),
                by: Some(by.clone()),
            },
        )
        .unwrap();
        let read = logged(b"k", &new).unwrap();
        assert_eq!((read.event, read.by), (event, Some(by)));
    }
}
