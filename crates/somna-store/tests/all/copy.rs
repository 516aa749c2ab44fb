//! `Store::copy_into`: a whole store into an empty one, exactly — on sled sled to sled,
//! on Postgres between Postgres and sled both ways.

use somna_core::{JournalEntry, SourceType, Timestamp};
use somna_store::{CommitOutcome, Store, StoreError};

use crate::common::*;

on_both_backends!(
    a_copy_holds_every_agent_exactly,
    a_copy_into_a_store_with_agents_is_refused_and_changes_nothing,
);

/// Gives `store` two agents that went through appends, a compaction, journal entries and a
/// search (so the index tree holds something too).
fn live_in(store: &Store) -> Vec<somna_core::AgentId> {
    let ids = vec![agent("mara"), agent("tobin")];
    for id in &ids {
        store.create_agent(id, NOW).unwrap();
        let messages = append_n(store, id, 40);
        let commit = commit_for(&messages[..30], "Mara asked about the smithy.", NOW);
        assert!(matches!(
            store.commit_compaction(id, &commit).unwrap(),
            CommitOutcome::Committed { .. }
        ));
        for i in 0..5 {
            let entry = JournalEntry::new(
                Timestamp(NOW.0 + i),
                SourceType::Note,
                5,
                format!("note {i} about the mill"),
            );
            store.append_journal(id, entry).unwrap();
        }
        assert!(!store.search_archive(id, "smithy", 5).unwrap().is_empty());
    }
    ids
}

fn assert_same(source: &Store, dest: &Store, ids: &[somna_core::AgentId]) {
    for id in ids {
        assert_eq!(snapshot(dest, id), snapshot(source, id), "{id}");
        assert_clean(dest, id);
        assert_eq!(
            dest.search_archive(id, "smithy", 5).unwrap(),
            source.search_archive(id, "smithy", 5).unwrap()
        );
    }
}

fn a_copy_holds_every_agent_exactly() {
    // From the test's backend into sled, and from sled back into the test's backend.
    let source = temporary_store!();
    let ids = live_in(&source);
    let dest = Store::temporary().unwrap();
    let report = source.copy_into(&dest).unwrap();
    assert!(report.entries() > 0);
    assert_eq!(
        report
            .trees
            .iter()
            .find(|(name, _)| *name == "agents")
            .unwrap()
            .1,
        2
    );
    assert_same(&source, &dest, &ids);
    let back = temporary_store!();
    dest.copy_into(&back).unwrap();
    assert_same(&source, &back, &ids);
    // The copy goes on living: an append there lands after the copied history.
    let next = back.append(&ids[0], msg(99), NOW).unwrap();
    assert_eq!(next.seq, source.agent(&ids[0]).unwrap().unwrap().next_seq);
}

fn a_copy_into_a_store_with_agents_is_refused_and_changes_nothing() {
    let source = Store::temporary().unwrap();
    live_in(&source);
    let (dest, id) = store_with_agent!();
    let before = snapshot(&dest, &id);
    let err = source.copy_into(&dest).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("already holds agents"), "{err}");
    assert_eq!(snapshot(&dest, &id), before);
    assert_eq!(dest.agents().unwrap().len(), 1);
}
