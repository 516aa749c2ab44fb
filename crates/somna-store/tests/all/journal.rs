//! Journal entries, queries (source, tags, importance, time range, limit, cursor), consolidation.

use somna_core::{Fact, JournalEntry, JournalQuery, SourceType, Timestamp};
use somna_store::{Store, StoreError};

use crate::common::*;

on_both_backends!(
    queries_are_newest_first_and_filter,
    the_cursor_pages_through_everything_once,
    consolidation_writes_facts_with_provenance_and_marks_entries,
    consolidating_an_unknown_entry_changes_nothing,
    journals_of_agents_are_separate,
);

/// Writes a varied journal: entry i has `at = 1000 + 10 i`, a source type cycling through all five,
/// importance `1 + i % 10`, and the tag `even` or `odd` (plus `quest` for every third entry).
/// `None` when the test is skipped (see `try_temporary_store`).
fn seeded(n: u64) -> Option<(Store, somna_core::AgentId)> {
    let (store, id) = try_store_with_agent()?;
    for i in 0..n {
        let source = SourceType::ALL[(i % 5) as usize];
        let mut tags = vec![if i % 2 == 0 { "even" } else { "odd" }];
        if i % 3 == 0 {
            tags.push("quest");
        }
        let entry = JournalEntry::new(
            Timestamp(1_000 + 10 * i),
            source,
            (1 + i % 10) as u8,
            format!("entry {i}"),
        )
        .with_tags(tags);
        let stored = store.append_journal(&id, entry).unwrap();
        assert_eq!(stored.id, i);
    }
    Some((store, id))
}

fn ids(entries: &[JournalEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.id).collect()
}

/// The expected answer, computed by filtering every entry with `JournalQuery::matches`.
fn brute_force(store: &Store, id: &somna_core::AgentId, q: &JournalQuery) -> Vec<u64> {
    let all = store.query_journal(id, &JournalQuery::default()).unwrap();
    let mut out: Vec<u64> = all.iter().filter(|e| q.matches(e)).map(|e| e.id).collect();
    out.truncate(q.limit.unwrap_or(usize::MAX));
    out
}

fn queries_are_newest_first_and_filter() {
    let Some((store, id)) = seeded(60) else {
        return;
    };
    let all = store.query_journal(&id, &JournalQuery::default()).unwrap();
    assert_eq!(ids(&all), (0..60).rev().collect::<Vec<_>>());

    let cases = [
        JournalQuery {
            source_type: Some(SourceType::Compaction),
            ..Default::default()
        },
        JournalQuery {
            source_type: Some(SourceType::Note),
            limit: Some(4),
            ..Default::default()
        },
        JournalQuery {
            tags: vec!["quest".into(), "odd".into()],
            ..Default::default()
        },
        JournalQuery {
            min_importance: Some(9),
            ..Default::default()
        },
        JournalQuery {
            since: Some(Timestamp(1_200)),
            until: Some(Timestamp(1_300)),
            ..Default::default()
        },
        JournalQuery {
            source_type: Some(SourceType::Observation),
            tags: vec!["even".into()],
            min_importance: Some(5),
            since: Some(Timestamp(1_100)),
            ..Default::default()
        },
        JournalQuery {
            limit: Some(0),
            ..Default::default()
        },
        JournalQuery {
            before_id: Some(10),
            limit: Some(3),
            ..Default::default()
        },
        JournalQuery {
            source_type: Some(SourceType::Reflection),
            before_id: Some(33),
            ..Default::default()
        },
    ];
    for q in &cases {
        let got = ids(&store.query_journal(&id, q).unwrap());
        assert_eq!(got, brute_force(&store, &id, q), "{q:?}");
    }
    // Spot-check two answers by hand.
    let compaction = store.query_journal(&id, &cases[0]).unwrap();
    assert_eq!(
        ids(&compaction),
        [58, 53, 48, 43, 38, 33, 28, 23, 18, 13, 8, 3]
    );
    assert!(
        compaction
            .iter()
            .all(|e| e.source_type == SourceType::Compaction)
    );
    assert_eq!(
        ids(&store.query_journal(&id, &cases[4]).unwrap()),
        (20..30).rev().collect::<Vec<_>>()
    );
}

fn the_cursor_pages_through_everything_once() {
    let Some((store, id)) = seeded(47) else {
        return;
    };
    for source in [None, Some(SourceType::Extraction)] {
        let mut q = JournalQuery {
            source_type: source,
            limit: Some(4),
            ..Default::default()
        };
        let mut seen = Vec::new();
        loop {
            let page = store.query_journal(&id, &q).unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 4);
            seen.extend(ids(&page));
            q.before_id = page.last().map(|e| e.id);
        }
        let expected = brute_force(
            &store,
            &id,
            &JournalQuery {
                source_type: source,
                ..Default::default()
            },
        );
        assert_eq!(seen, expected, "source {source:?}");
    }
}

fn consolidation_writes_facts_with_provenance_and_marks_entries() {
    let Some((store, id)) = seeded(10) else {
        return;
    };
    let candidates = store.unconsolidated(&id, 6).unwrap();
    assert_eq!(ids(&candidates), [5, 6, 7, 8, 9]);
    let facts = store
        .consolidate(
            &id,
            vec![
                Fact::new(NOW, "The smith owes the innkeeper ten coins", vec![5, 7]),
                Fact::new(NOW, "The well is dry in summer", Vec::new()),
            ],
            &[5, 6, 7, 7],
        )
        .unwrap();
    assert_eq!(facts.iter().map(|f| f.id).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(
        facts[0].source_entry_ids,
        [5, 7],
        "given provenance is kept"
    );
    assert_eq!(
        facts[1].source_entry_ids,
        [5, 6, 7, 7],
        "missing provenance becomes the consolidated entries"
    );
    assert_eq!(store.facts(&id).unwrap(), facts);
    assert_eq!(ids(&store.unconsolidated(&id, 6).unwrap()), [8, 9]);
    let all = store.query_journal(&id, &JournalQuery::default()).unwrap();
    assert!(
        all.iter()
            .all(|e| e.consolidated == [5, 6, 7].contains(&e.id))
    );
    assert_eq!(store.agent(&id).unwrap().unwrap().next_fact_id, 2);
    assert_clean(&store, &id);
}

fn consolidating_an_unknown_entry_changes_nothing() {
    let Some((store, id)) = seeded(3) else {
        return;
    };
    let result = store.consolidate(&id, vec![Fact::new(NOW, "x", vec![1])], &[1, 42]);
    assert!(
        matches!(result, Err(StoreError::UnknownEntry { entry: 42, .. })),
        "{result:?}"
    );
    assert!(store.facts(&id).unwrap().is_empty());
    assert_eq!(store.unconsolidated(&id, 1).unwrap().len(), 3);
    assert_eq!(store.agent(&id).unwrap().unwrap().next_fact_id, 0);
}

fn journals_of_agents_are_separate() {
    let Some((store, a)) = seeded(5) else {
        return;
    };
    let b = agent("npc-b");
    store.create_agent(&b, NOW).unwrap();
    let e = store
        .append_journal(&b, JournalEntry::new(NOW, SourceType::Compaction, 7, "b's"))
        .unwrap();
    assert_eq!(e.id, 0);
    let q = JournalQuery {
        source_type: Some(SourceType::Compaction),
        ..Default::default()
    };
    assert_eq!(ids(&store.query_journal(&b, &q).unwrap()), [0]);
    assert_eq!(ids(&store.query_journal(&a, &q).unwrap()), [3]);
    assert_clean(&store, &a);
    assert_clean(&store, &b);
}
