//! The event log.

use somna_core::{EventRecord, Timestamp, Trigger};

use crate::common::*;

on_both_backends!(
    events_get_increasing_seqs_and_read_newest_first,
    events_after_follows_the_log_oldest_first,
);

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

fn events_after_follows_the_log_oldest_first() {
    let (store, id) = store_with_agent!();
    assert!(store.events_after(&id, None, 10).unwrap().is_empty());
    for i in 0..6u64 {
        let note = EventRecord::Note {
            at: Timestamp(NOW.0 + i),
            text: format!("note {i}"),
        };
        store.log_event(&id, note).unwrap();
    }
    let seqs = |after, limit| {
        store
            .events_after(&id, after, limit)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(seqs(None, 100), [0, 1, 2, 3, 4, 5]);
    assert_eq!(seqs(Some(2), 100), [3, 4, 5]);
    assert_eq!(seqs(Some(2), 2), [3, 4]);
    assert_eq!(seqs(Some(5), 100), Vec::<u64>::new());
    assert_eq!(seqs(Some(u64::MAX), 100), Vec::<u64>::new());
    // Outside a cluster nobody is named as the writer.
    assert!(
        store
            .events(&id, 10)
            .unwrap()
            .iter()
            .all(|e| e.by.is_none())
    );
    // Another agent's events are not in the range.
    let other = somna_core::AgentId::new("other").unwrap();
    store.ensure_agent(&other, NOW).unwrap();
    store
        .log_event(
            &other,
            EventRecord::Note {
                at: NOW,
                text: "x".into(),
            },
        )
        .unwrap();
    assert_eq!(seqs(Some(4), 100), [5]);
}
