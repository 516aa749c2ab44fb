//! `Store::copy_into`: a whole store into an empty one, exactly.

use somna_core::{JournalEntry, SourceType, Timestamp};
use somna_store::{CommitOutcome, Store, StoreError};

use crate::common::*;

/// A store with two agents that went through appends, a compaction, journal entries, facts and
/// a search (so the index tree holds something too).
fn lived_in() -> (Store, Vec<somna_core::AgentId>) {
    let store = Store::temporary().unwrap();
    let ids = vec![agent("mara"), agent("tobin")];
    for id in &ids {
        store.create_agent(id, NOW).unwrap();
        let messages = append_n(&store, id, 40);
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
    (store, ids)
}

#[test]
fn a_copy_holds_every_agent_exactly() {
    let (source, ids) = lived_in();
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
    for id in &ids {
        assert_eq!(snapshot(&dest, id), snapshot(&source, id), "{id}");
        assert_clean(&dest, id);
        assert_eq!(
            dest.search_archive(id, "smithy", 5).unwrap(),
            source.search_archive(id, "smithy", 5).unwrap()
        );
    }
    // The copy goes on living: an append there lands after the copied history.
    let next = dest.append(&ids[0], msg(99), NOW).unwrap();
    assert_eq!(next.seq, source.agent(&ids[0]).unwrap().unwrap().next_seq);
}

#[test]
fn a_copy_into_a_store_with_agents_is_refused_and_changes_nothing() {
    let (source, _) = lived_in();
    let (dest, id) = store_with_agent();
    let before = snapshot(&dest, &id);
    let err = source.copy_into(&dest).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("already holds agents"), "{err}");
    assert_eq!(snapshot(&dest, &id), before);
    assert_eq!(dest.agents().unwrap().len(), 1);
}
