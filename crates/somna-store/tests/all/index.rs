//! The search index: messages indexed once archived, journal entries and facts once written;
//! searches find archived originals only; a database without an index is indexed by its first
//! search; `check_invariants` compares the index with the content.

use somna_core::{Fact, JournalEntry, Message, SourceType};
use somna_store::{DocKind, Store};

use crate::common::*;

on_both_backends!(
    archive_search_finds_archived_originals_by_stem_and_speaker,
    masked_originals_are_searchable,
    journal_entries_and_facts_are_indexed,
    many_postings_seal_into_blocks_and_still_score,
);

fn said(name: &str, text: &str) -> Message {
    with_tokens(Message::user(text).with_name(name))
}

fn archive_search_finds_archived_originals_by_stem_and_speaker() {
    let (store, id) = store_with_agent!();
    let all = store
        .append_batch(
            &id,
            vec![
                said("Nora", "We finally adopted two kittens from the shelter"),
                said("Omar", "How are the kittens settling in, Nora?"),
                said("Nora", "They sleep all day on the windowsill"),
                said("Omar", "I moved to Lisbon last week"),
            ],
            NOW,
        )
        .unwrap();
    // Nothing is archived yet: live messages are in the prompt already.
    assert!(
        store
            .search_archive(&id, "kitten shelters", 5)
            .unwrap()
            .is_empty()
    );
    let outcome = compact(&store, &id, &all[..3], "s");
    assert!(matches!(
        outcome,
        somna_store::CommitOutcome::Committed { .. }
    ));

    // "shelters" meets "shelter"; "adopting" meets "adopted".
    let hits = store
        .search_archive(&id, "Which shelters was she adopting from?", 5)
        .unwrap();
    assert_eq!(hits[0].message.seq, 0, "{hits:?}");
    // A turn BY Nora matches a question naming Nora, though its text does not.
    let hits = store
        .search_archive(&id, "Where does Nora's cat sleep on the windowsill?", 5)
        .unwrap();
    assert_eq!(hits[0].message.seq, 2, "{hits:?}");
    // The live turn (Lisbon) is not indexed until it is archived.
    assert!(store.search_archive(&id, "Lisbon", 5).unwrap().is_empty());
    assert!(
        store
            .search(&id, DocKind::Message, "Lisbon", 5)
            .unwrap()
            .is_empty()
    );
    assert_clean(&store, &id);

    // Uncompacting makes them live again: still indexed, no longer archive hits.
    store.uncompact(&id, 0, NOW).unwrap();
    assert!(store.search_archive(&id, "kittens", 5).unwrap().is_empty());
    assert_eq!(
        store
            .search(&id, DocKind::Message, "kittens", 5)
            .unwrap()
            .len(),
        2
    );
    assert_clean(&store, &id);
}

fn masked_originals_are_searchable() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 20);
    store
        .commit_masking(&id, vec![masked_of(&all[3])], NOW)
        .unwrap();
    let hits = store.search_archive(&id, "turn 3", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].message, all[3]);
    assert_clean(&store, &id);
}

fn journal_entries_and_facts_are_indexed() {
    let (store, id) = store_with_agent!();
    let e = store
        .append_journal(
            &id,
            JournalEntry::new(NOW, SourceType::Note, 5, "Omar relocated to Lisbon"),
        )
        .unwrap();
    store
        .append_journal(
            &id,
            JournalEntry::new(NOW, SourceType::Note, 5, "The bakery opens at dawn"),
        )
        .unwrap();
    store
        .consolidate(
            &id,
            vec![Fact::new(NOW, "Omar lives in Lisbon now", vec![])],
            &[e.id],
        )
        .unwrap();
    let hits = store
        .search(&id, DocKind::Journal, "relocating", 5)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, e.id);
    assert_eq!(
        store.search(&id, DocKind::Fact, "lisbon", 5).unwrap().len(),
        1
    );
    assert!(
        store
            .search(&id, DocKind::Fact, "bakery", 5)
            .unwrap()
            .is_empty()
    );
    assert_clean(&store, &id);
}

fn many_postings_seal_into_blocks_and_still_score() {
    let (store, id) = store_with_agent!();
    // 300 messages share "smithy": the term's head seals two blocks of 128.
    let all = append_n(&store, &id, 300);
    compact(&store, &id, &all[..290], "s");
    let hits = store.search_archive(&id, "smithy far", 300).unwrap();
    // User turns ask for the smithy; assistant turns say "far" unless their number is a multiple
    // of 7.
    let matching = all[..290]
        .iter()
        .filter(|m| m.content.contains("smithy") || m.content.contains("far"))
        .count();
    assert_eq!(hits.len(), matching);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert_clean(&store, &id);
}

// Drops a sled tree directly.
#[test]
fn a_database_without_an_index_is_indexed_on_first_load() {
    let (dir, id) = closed_sled_store(30, Some((20, "s")));
    // Drop the index as a build without it would have left the database.
    {
        let db = raw_sled_open(dir.path()).unwrap();
        db.drop_tree("terms").unwrap();
        db.flush().unwrap();
    }
    let store = Store::open(dir.path(), Default::default()).unwrap();
    assert_eq!(
        store.search(&id, DocKind::Message, "turn 7", 1).unwrap()[0].id,
        7
    );
    assert_clean(&store, &id);
}
