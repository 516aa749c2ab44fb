//! Agents: creation, loading, records, overrides, calibration, retirement, reopening.

use std::time::Duration;

use somna_core::Timestamp;
use somna_core::config::AgentOverrides;
use somna_core::tokens::Calibration;
use somna_store::{Store, StoreError, StoreOptions};

use crate::common::*;

on_both_backends!(
    create_then_already_exists,
    ensure_agent_creates_once_and_then_loads,
    agents_lists_every_record_in_id_order,
    overrides_calibration_and_retire_are_persisted,
    unknown_agents_are_errors_for_writes_and_counters,
);

fn create_then_already_exists() {
    let store = temporary_store!();
    let id = agent("blacksmith");
    assert_eq!(store.agent(&id).unwrap(), None);
    let record = store.create_agent(&id, NOW).unwrap();
    assert_eq!(record.id, id);
    assert_eq!(record.created_at, NOW);
    assert_eq!(
        (record.next_seq, record.history_len, record.history_tokens),
        (0, 0, 0)
    );
    assert!(matches!(
        store.create_agent(&id, NOW),
        Err(StoreError::AlreadyExists(a)) if a == id
    ));
    assert_eq!(store.agent(&id).unwrap(), Some(record));
}

fn ensure_agent_creates_once_and_then_loads() {
    let store = temporary_store!();
    let id = agent("innkeeper");
    let first = store.ensure_agent(&id, NOW).unwrap();
    append_n(&store, &id, 3);
    let later = Timestamp(NOW.0 + 1_000);
    let second = store.ensure_agent(&id, later).unwrap();
    assert_eq!(second.created_at, first.created_at);
    assert_eq!(second.next_seq, 3);
}

fn agents_lists_every_record_in_id_order() {
    let store = temporary_store!();
    for name in ["zed", "alice", "bob"] {
        store.create_agent(&agent(name), NOW).unwrap();
    }
    let ids: Vec<String> = store
        .agents()
        .unwrap()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(ids, ["alice", "bob", "zed"]);
}

fn overrides_calibration_and_retire_are_persisted() {
    let (store, id) = store_with_agent!();
    let overrides = AgentOverrides {
        model: Some("gpt-4o-mini".into()),
        tick_every: Some(Duration::from_secs(2)),
        ..Default::default()
    };
    store.set_overrides(&id, overrides.clone()).unwrap();
    let calibration = Calibration {
        factor: 1.18,
        samples: 7,
    };
    store.update_calibration(&id, calibration).unwrap();
    append_n(&store, &id, 4);
    let retired = store.retire(&id).unwrap();
    assert!(retired.retired);

    let record = store.agent(&id).unwrap().unwrap();
    assert_eq!(record.overrides, overrides);
    assert_eq!(record.calibration, calibration);
    assert!(record.retired);
    // Retiring deletes nothing.
    assert_eq!(store.history(&id).unwrap().len(), 4);
    assert_eq!(record.history_len, 4);
}

fn unknown_agents_are_errors_for_writes_and_counters() {
    let store = temporary_store!();
    let id = agent("ghost");
    assert!(matches!(
        store.append(&id, msg(0), NOW),
        Err(StoreError::UnknownAgent(_))
    ));
    assert!(matches!(
        store.usage_tokens(&id),
        Err(StoreError::UnknownAgent(_))
    ));
    assert!(matches!(
        store.retire(&id),
        Err(StoreError::UnknownAgent(_))
    ));
    assert!(matches!(
        store.check_invariants(&id),
        Err(StoreError::UnknownAgent(_))
    ));
    // Reads of plain data are simply empty.
    assert!(store.history(&id).unwrap().is_empty());
    assert!(store.events(&id, 10).unwrap().is_empty());
}

// Reopens a sled directory (postgres/backend.rs reopens a schema).
#[test]
fn reopening_keeps_records_counters_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let id = agent("npc");
    let written = {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let written = fill_for_reopen(&store, &id);
        store.flush().unwrap();
        assert!(store.size_on_disk().unwrap() > 0);
        written
    };
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_reopened(&store, &id, &written);
    assert_eq!(store.agent(&id).unwrap().unwrap().compaction_count, 1);
}
