//! The per-agent event log: compactions, uncompactions, maskings, failures and notes.

use somna_core::{AgentId, EventRecord, LoggedEvent};

use crate::codec;
use crate::error::Result;
use crate::keys;
use crate::store::{Store, TreeId, WriteSet, tree_names};

impl Store {
    /// Logs an event; returns its seq.
    pub fn log_event(&self, id: &AgentId, event: EventRecord) -> Result<u64> {
        let state = self.state(id)?;
        let mut guard = state.lock();
        let mut next = guard.clone();
        let mut writes = WriteSet::with_capacity(2);
        let seq = push_event(id, &mut next, &event, &mut writes)?;
        writes.put_record(&next)?;
        self.apply_expecting_no_conflict(id, &writes)?;
        state.publish(&mut guard, next);
        Ok(seq)
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
                Ok(LoggedEvent {
                    seq: keys::trailing_u64(&key).unwrap_or_default(),
                    event: codec::decode(tree_names::EVENTS, &key, &value)?,
                })
            })
            .collect()
    }
}

/// Assigns the next event seq of `record` to `event` and adds its write; returns the seq.
pub(crate) fn push_event(
    id: &AgentId,
    record: &mut somna_core::AgentRecord,
    event: &EventRecord,
    writes: &mut WriteSet,
) -> Result<u64> {
    let seq = record.next_event_seq;
    record.next_event_seq += 1;
    let value = codec::encode(tree_names::EVENTS, event)?;
    writes.create(TreeId::Events, keys::seq(id, seq), value, seq);
    Ok(seq)
}
