//! The event log.

use somna_core::{EventRecord, Timestamp, Trigger};

use crate::common::*;

#[test]
fn events_get_increasing_seqs_and_read_newest_first() {
    let (store, id) = store_with_agent!();
    let mut logged = Vec::new();
    for i in 0..5u64 {
        let event = if i % 2 == 0 {
            EventRecord::Note {
                at: Timestamp(NOW.0 + i),
                text: format!("note {i}"),
            }
        } else {
            EventRecord::CompactionFailed {
                at: Timestamp(NOW.0 + i),
                trigger: Trigger::Sleep,
                reason: "timeout".into(),
            }
        };
        assert_eq!(store.log_event(&id, event.clone()).unwrap(), i);
        logged.push(event);
    }
    let newest = store.events(&id, 2).unwrap();
    assert_eq!(newest.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 3]);
    assert_eq!(newest[0].event, logged[4]);
    assert_eq!(newest[1].event, logged[3]);
    let all = store.events(&id, usize::MAX).unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[4].event, logged[0]);
    assert_eq!(store.agent(&id).unwrap().unwrap().next_event_seq, 5);
    // Compactions log into the same sequence.
    let msgs = append_n(&store, &id, 10);
    let outcome = store
        .commit_compaction(&id, &commit_for(&msgs[..6], "s", NOW))
        .unwrap();
    assert!(
        matches!(
            outcome,
            somna_store::CommitOutcome::Committed { event_seq: 5, .. }
        ),
        "{outcome:?}"
    );
    assert_clean(&store, &id);
}
