//! Appending and reading history and the archive.

use somna_core::{Message, Timestamp};
use somna_store::StoreError;

use crate::common::*;

on_both_backends!(
    append_assigns_seq_and_created_at_and_counts_tokens,
    append_batch_is_ordered_and_counted,
    only_normal_messages_can_be_appended,
    ranges_and_tails,
    agents_with_prefix_ids_do_not_see_each_other,
    concurrent_appends_keep_seqs_and_counters_consistent,
);

fn append_assigns_seq_and_created_at_and_counts_tokens() {
    let (store, id) = store_with_agent!();
    let given = Timestamp(1_234);
    let a = store
        .append(&id, with_tokens(Message::user("hello")).at(given), NOW)
        .unwrap();
    let b = store
        .append(&id, with_tokens(Message::assistant("hi there")), NOW)
        .unwrap();
    assert_eq!((a.seq, b.seq), (0, 1));
    assert_eq!(a.created_at, given, "a set created_at is kept");
    assert_eq!(
        b.created_at, NOW,
        "a zero created_at is stamped with the caller's time, not the wall clock"
    );
    assert_eq!(
        store.usage_tokens(&id).unwrap(),
        u64::from(a.tokens + b.tokens)
    );
    assert_eq!(store.history(&id).unwrap(), vec![a, b]);
    let record = store.agent(&id).unwrap().unwrap();
    assert_eq!((record.next_seq, record.history_len), (2, 2));
    assert_clean(&store, &id);
}

fn append_batch_is_ordered_and_counted() {
    let (store, id) = store_with_agent!();
    let stored = append_n(&store, &id, 100);
    assert_eq!(
        stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (0..100).collect::<Vec<_>>()
    );
    let total: u64 = stored.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(store.usage_tokens(&id).unwrap(), total);
    assert!(store.append_batch(&id, Vec::new(), NOW).unwrap().is_empty());
    assert_eq!(store.agent(&id).unwrap().unwrap().next_seq, 100);
    assert_clean(&store, &id);
}

fn only_normal_messages_can_be_appended() {
    let (store, id) = store_with_agent!();
    let original = store.append(&id, msg(0), NOW).unwrap();
    let placeholder = masked_of(&original);
    assert!(matches!(
        store.append(&id, placeholder, NOW),
        Err(StoreError::Invalid { what: "append", .. })
    ));
    let summary = summary_for(&[original], "x", NOW);
    assert!(matches!(
        store.append(&id, summary, NOW),
        Err(StoreError::Invalid { .. })
    ));
    assert_eq!(store.history(&id).unwrap().len(), 1);
}

fn ranges_and_tails() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    assert_eq!(
        store.history_range(&id, 10, 5).unwrap(),
        all[10..15].to_vec()
    );
    assert_eq!(
        store.history_range(&id, 28, 100).unwrap(),
        all[28..].to_vec()
    );
    assert!(store.history_range(&id, 30, 100).unwrap().is_empty());
    assert_eq!(store.history_tail(&id, 3).unwrap(), all[27..].to_vec());
    assert_eq!(store.history_tail(&id, 100).unwrap(), all);
    assert!(store.history_tail(&id, 0).unwrap().is_empty());

    compact(&store, &id, &all[..20], "the first twenty");
    assert_eq!(
        store.archive_range(&id, 0, usize::MAX).unwrap(),
        all[..20].to_vec()
    );
    assert_eq!(store.archive_range(&id, 5, 3).unwrap(), all[5..8].to_vec());
    assert_eq!(store.archived(&id, 7, 9).unwrap(), all[7..10].to_vec());
    assert_eq!(
        store.archived(&id, 19, u64::MAX).unwrap(),
        all[19..20].to_vec()
    );
    assert!(store.archived(&id, 9, 7).unwrap().is_empty());
    let history = store.history(&id).unwrap();
    assert_eq!(history.len(), 11);
    assert!(history[0].summary().is_some());
    assert_eq!(history[1..], all[20..]);
}

fn agents_with_prefix_ids_do_not_see_each_other() {
    let (store, a) = store_with_agent!();
    let b = agent("npc2");
    let c = agent("np");
    store.create_agent(&b, NOW).unwrap();
    store.create_agent(&c, NOW).unwrap();
    append_n(&store, &a, 3);
    append_n(&store, &b, 5);
    append_n(&store, &c, 7);
    assert_eq!(store.history(&a).unwrap().len(), 3);
    assert_eq!(store.history(&b).unwrap().len(), 5);
    assert_eq!(store.history(&c).unwrap().len(), 7);
    assert_eq!(store.history_tail(&c, 1).unwrap()[0].seq, 6);
    for id in [&a, &b, &c] {
        assert_clean(&store, id);
    }
}

fn concurrent_appends_keep_seqs_and_counters_consistent() {
    let (store, id) = store_with_agent!();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..50 {
                    store.append(&id, msg(i), NOW).unwrap();
                }
            });
        }
    });
    let history = store.history(&id).unwrap();
    assert_eq!(
        history.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (0..200).collect::<Vec<_>>()
    );
    let total: u64 = history.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(store.usage_tokens(&id).unwrap(), total);
    assert_clean(&store, &id);
}
