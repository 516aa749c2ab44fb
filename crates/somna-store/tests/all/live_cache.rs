//! The live-history cache (`somna_store::live`): what a read serves from memory is what the trees
//! hold after every kind of write, and all agents' caches together stay within the budget.

use std::sync::Arc;

use somna_core::{AgentId, Message};
use somna_store::CommitOutcome;

use crate::common::*;

on_both_backends!(
    a_read_after_appends_is_served_from_memory_and_equals_the_trees,
    a_compaction_and_its_undo_drop_the_cached_history,
    the_caches_stay_within_the_budget_and_a_busy_agent_keeps_its_own,
    a_zero_budget_caches_nothing,
    a_sweep_drops_what_was_not_read_since_the_sweep_before,
    archived_originals_from_the_cache_follow_masking_compaction_and_undo,
);

/// The trees' live history, read with the cache off (and then back on).
fn stored_history(store: &somna_store::Store, id: &AgentId) -> Vec<Message> {
    let budget = store.history_cache_stats().budget;
    store.set_history_cache_bytes(0);
    let stored = store.history(id).unwrap();
    store.set_history_cache_bytes(budget);
    stored
}

fn a_read_after_appends_is_served_from_memory_and_equals_the_trees() {
    let (store, id) = store_with_agent!();
    append_n(&store, &id, 10);
    let before = store.history_cache_stats();
    store.live_history(&id).unwrap();
    let once = store.history_cache_stats();
    assert_eq!(
        once.misses,
        before.misses + 1,
        "the first read goes to the trees"
    );
    assert_eq!(
        once.bytes, before.bytes,
        "one read is not a conversation: nothing cached"
    );
    assert!(store.cached_live_history(&id).is_none());
    let first = store.live_history(&id).unwrap();
    assert_eq!(first.len(), 10);
    let after_first = store.history_cache_stats();
    assert_eq!(
        after_first.misses,
        before.misses + 2,
        "the second read goes to the trees"
    );
    assert!(after_first.bytes > before.bytes, "and is cached");

    // Appends extend the cached copy, even while a reader holds the previous snapshot.
    let more = append_n(&store, &id, 3);
    let second = store.live_history(&id).unwrap();
    let after_second = store.history_cache_stats();
    assert_eq!(
        after_second.misses, after_first.misses,
        "no read of the trees"
    );
    assert_eq!(after_second.hits, after_first.hits + 1);
    assert_eq!(
        first.len(),
        10,
        "a snapshot taken before the append is unchanged"
    );
    assert_eq!(&second[10..], &more[..]);
    // Partial reads come from the cache too.
    assert_eq!(store.history_tail(&id, 2).unwrap(), more[1..].to_vec());
    assert_eq!(
        store.history_range(&id, 11, 1).unwrap(),
        vec![more[1].clone()]
    );
    assert_eq!(store.history_cache_stats().misses, after_first.misses);

    assert_eq!(*second, stored_history(&store, &id));
    assert_clean(&store, &id);
}

fn a_compaction_and_its_undo_drop_the_cached_history() {
    let (store, id) = store_with_agent!();
    let stored = append_n(&store, &id, 12);
    store.live_history(&id).unwrap();
    let before = store.live_history(&id).unwrap();
    assert_eq!(before.len(), 12);

    compact(&store, &id, &stored[..8], "eight turns, summarized");
    let after = store.live_history(&id).unwrap();
    assert_eq!(after.len(), 5, "the summary and the four turns it left");
    assert!(after[0].summary().is_some());
    assert_eq!(*after, stored_history(&store, &id));
    assert_clean(&store, &id);

    store.uncompact(&id, 0, NOW).unwrap();
    let undone = store.live_history(&id).unwrap();
    assert_eq!(*undone, stored, "the undo is seen at once");
    assert_clean(&store, &id);
}

fn the_caches_stay_within_the_budget_and_a_busy_agent_keeps_its_own() {
    let store = temporary_store!();
    let ids: Vec<AgentId> = (0..40).map(|i| agent(&format!("npc{i:02}"))).collect();
    for id in &ids {
        store.create_agent(id, NOW).unwrap();
        append_n(&store, id, 20);
    }
    store.live_history(&ids[0]).unwrap();
    let one = store.live_history(&ids[0]).unwrap();
    let per_agent = store.history_cache_stats().bytes;
    assert!(per_agent > 0);
    // Room for about five agents' histories.
    let budget = per_agent * 5 + per_agent / 2;
    store.set_history_cache_bytes(budget);
    let busy = &ids[0];
    for id in &ids[1..] {
        store.live_history(id).unwrap();
        let history = store.live_history(id).unwrap();
        assert_eq!(history.len(), 20);
        assert!(
            store.history_cache_stats().bytes <= budget,
            "{:?} over a budget of {budget}",
            store.history_cache_stats()
        );
        // The busy agent is read between every other agent's reads: the clock hand passes it.
        assert_eq!(store.live_history(busy).unwrap(), one);
    }
    let stats = store.history_cache_stats();
    assert!(stats.evictions >= 30, "{stats:?}");
    let hits = stats.hits;
    store.live_history(busy).unwrap();
    assert_eq!(
        store.history_cache_stats().hits,
        hits + 1,
        "the busy agent stayed cached"
    );
    // An evicted agent reads its history from the trees again, whole (and, read twice within
    // a sweep period, is cached again).
    let misses = store.history_cache_stats().misses;
    assert_eq!(store.live_history(&ids[1]).unwrap().len(), 20);
    assert_eq!(store.history_cache_stats().misses, misses + 1);
    assert!(store.cached_live_history(&ids[1]).is_some());
    for id in &ids {
        assert_clean(&store, id);
    }
}

fn a_zero_budget_caches_nothing() {
    let (store, id) = store_with_agent!();
    store.set_history_cache_bytes(0);
    append_n(&store, &id, 5);
    for _ in 0..3 {
        store.live_history(&id).unwrap();
    }
    let stats = store.history_cache_stats();
    assert_eq!((stats.bytes, stats.hits), (0, 0), "{stats:?}");
    assert_eq!(stats.misses, 3);
}

fn archived_originals_from_the_cache_follow_masking_compaction_and_undo() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 20);
    let seqs: Vec<u64> = (0..22).collect();
    // Each step: read through the cache twice (the second from what the first kept; the cache
    // keeps what earlier steps read), and check which seqs read as archived, with their originals.
    let check = |what: &str, archived: &[u64]| {
        store.live_history(&id).unwrap();
        store.live_history(&id).unwrap();
        assert!(store.cached_live_history(&id).is_some());
        let first = store.archived_messages(&id, &seqs).unwrap();
        let second = store.archived_messages(&id, &seqs).unwrap();
        assert_eq!(first, second, "{what}: a cached read differs");
        let expected: Vec<Option<Arc<Message>>> = seqs
            .iter()
            .map(|&s| {
                archived
                    .contains(&s)
                    .then(|| Arc::new(all[s as usize].clone()))
            })
            .collect();
        assert_eq!(first, expected, "{what}");
        assert_clean(&store, &id);
    };
    check("nothing archived", &[]);

    store
        .commit_masking(&id, vec![masked_of(&all[3]), masked_of(&all[12])], NOW)
        .unwrap();
    check("two masked", &[3, 12]);

    let live = store.history(&id).unwrap();
    let outcome = compact(&store, &id, &live[..8], "the first eight");
    assert!(
        matches!(outcome, CommitOutcome::Committed { .. }),
        "{outcome:?}"
    );
    check("the first eight compacted", &[0, 1, 2, 3, 4, 5, 6, 7, 12]);

    store.uncompact(&id, 0, NOW).unwrap();
    check("the compaction undone", &[3, 12]);
}

fn a_sweep_drops_what_was_not_read_since_the_sweep_before() {
    let store = temporary_store!();
    let (talking, quiet) = (agent("talking"), agent("quiet"));
    for id in [&talking, &quiet] {
        store.create_agent(id, NOW).unwrap();
        append_n(&store, id, 6);
        store.live_history(id).unwrap();
        store.live_history(id).unwrap();
    }
    // Both were read since the (first) sweep: both stay.
    store.sweep_history_cache();
    assert_eq!(store.history_cache_stats().evictions, 0);
    store.live_history(&talking).unwrap();
    store.sweep_history_cache();
    let stats = store.history_cache_stats();
    assert_eq!(stats.evictions, 1, "{stats:?}");
    store.live_history(&talking).unwrap();
    assert_eq!(
        store.history_cache_stats().misses,
        stats.misses,
        "the talking agent stayed"
    );
    store.live_history(&quiet).unwrap();
    assert_eq!(
        store.history_cache_stats().misses,
        stats.misses + 1,
        "the quiet one went"
    );
    assert!(
        store.cached_live_history(&quiet).is_none(),
        "its read before was two sweeps ago"
    );
    store.live_history(&quiet).unwrap();
    assert!(
        store.cached_live_history(&quiet).is_some(),
        "read again at once: cached"
    );
    assert_clean(&store, &quiet);

    // Read once, then again two sweep periods later: not a conversation, not cached.
    let once = agent("once");
    store.create_agent(&once, NOW).unwrap();
    append_n(&store, &once, 3);
    store.live_history(&once).unwrap();
    store.sweep_history_cache();
    store.sweep_history_cache();
    store.live_history(&once).unwrap();
    assert!(store.cached_live_history(&once).is_none());
}
