//! Embedding vectors: only archived messages are offered for embedding, once per model; stored
//! vectors are found by similarity and fused with BM25; an uncompaction keeps them; a new model
//! starts over; a copy carries them.

use somna_core::{AgentId, Message};
use somna_store::Store;

use crate::common::*;

on_both_backends!(
    archived_messages_are_embedded_once_and_found_by_meaning,
    words_decide_when_a_message_holds_them_and_meaning_when_none_does,
);

fn said(name: &str, text: &str) -> Message {
    with_tokens(Message::user(text).with_name(name))
}

/// A toy embedding: one dimension per topic word, so tests can say what is near what.
fn vector(text: &str) -> Vec<f32> {
    let topics = ["pet", "city", "food", "music"];
    let lower = text.to_lowercase();
    let mut v: Vec<f32> = topics
        .iter()
        .map(|t| if lower.contains(t) { 1.0 } else { 0.0 })
        .collect();
    v.push(0.1);
    v
}

/// Embeds up to `limit` archived messages of `id` with [`vector`] under the model `toy`.
fn embed_archive(store: &Store, id: &AgentId, limit: usize) {
    let todo = store.messages_to_embed(id, "toy", limit).unwrap();
    let pairs: Vec<(u64, Vec<f32>)> = todo
        .messages
        .iter()
        .map(|m| (m.seq, vector(&m.content)))
        .collect();
    store.put_vectors(id, "toy", todo.through, &pairs).unwrap();
}

fn archived_messages_are_embedded_once_and_found_by_meaning() {
    let (store, id) = store_with_agent!();
    let all = store
        .append_batch(
            &id,
            vec![
                said("Nora", "The new pet sleeps on my feet"),
                said("Omar", "Biscuit chewed a shoe (pet)"),
                said("Nora", "Moving to a new city next month"),
                said("Omar", "Still here, live"),
            ],
            NOW,
        )
        .unwrap();
    // Nothing archived: nothing to embed.
    let todo = store.messages_to_embed(&id, "toy", 100).unwrap();
    assert!(todo.messages.is_empty(), "{todo:?}");
    compact(&store, &id, &all[..3], "s");

    // Archived, in seq order; the limit leaves the rest for later, and the watermark says where.
    let first = store.messages_to_embed(&id, "toy", 2).unwrap();
    let seqs: Vec<u64> = first.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [0, 1]);
    assert_eq!((first.through, first.remaining), (2, 1));
    let pairs: Vec<(u64, Vec<f32>)> = first
        .messages
        .iter()
        .map(|m| (m.seq, vector(&m.content)))
        .collect();
    store
        .put_vectors(&id, "toy", first.through, &pairs)
        .unwrap();
    let rest = store.messages_to_embed(&id, "toy", 100).unwrap();
    assert_eq!(rest.messages.len(), 1);
    assert_eq!(rest.messages[0].seq, 2);
    store
        .put_vectors(
            &id,
            "toy",
            rest.through,
            &[(2, vector(&rest.messages[0].content))],
        )
        .unwrap();
    assert!(
        store
            .messages_to_embed(&id, "toy", 100)
            .unwrap()
            .messages
            .is_empty()
    );
    let meta = store.vectors_meta(&id).unwrap();
    assert_eq!((meta.model.as_str(), meta.dims, meta.count), ("toy", 5, 3));

    // "animal" shares no word with any turn: BM25 finds nothing, the vectors find the pet turns.
    let query = vector("pet");
    assert!(store.search_archive(&id, "animal", 5).unwrap().is_empty());
    let hits = store
        .search_archive_with(&id, "animal", Some(("toy", &query)), 5)
        .unwrap();
    let found: Vec<u64> = hits.iter().map(|h| h.message.seq).collect();
    assert_eq!(&found[..2], [1, 0], "{hits:?}");
    let by_vector = store.search_vectors(&id, "toy", &query, 1).unwrap();
    assert_eq!(by_vector.len(), 1);
    // Another model's query finds nothing in these vectors.
    assert!(
        store
            .search_vectors(&id, "other", &query, 5)
            .unwrap()
            .is_empty()
    );
    // Fused: a turn both rankings put first comes first.
    let hits = store
        .search_archive_with(&id, "city", Some(("toy", &vector("city"))), 5)
        .unwrap();
    assert_eq!(hits[0].message.seq, 2, "{hits:?}");

    // Uncompacted: live again, so no longer a hit, but its vector stays (no work when archived again).
    let summary = store
        .history(&id)
        .unwrap()
        .iter()
        .find(|m| !m.is_normal())
        .map(|m| m.seq);
    let seq = summary.expect("a summary in history");
    store.uncompact(&id, seq, NOW).unwrap();
    assert!(
        store
            .search_archive_with(&id, "animal", Some(("toy", &query)), 5)
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.vectors_meta(&id).unwrap().count, 3);

    // A new model starts over from the first archived message and replaces the old vectors.
    let all = store.history(&id).unwrap();
    compact(&store, &id, &all[..3], "s2");
    let redo = store.messages_to_embed(&id, "toy-2", 100).unwrap();
    assert_eq!(redo.messages.len(), 3, "{redo:?}");
    store
        .put_vectors(&id, "toy-2", redo.through, &[(0, vec![1.0, 0.0])])
        .unwrap();
    let meta = store.vectors_meta(&id).unwrap();
    assert_eq!(
        (meta.model.as_str(), meta.dims, meta.count),
        ("toy-2", 2, 1)
    );
    assert!(
        store
            .search_vectors(&id, "toy", &query, 5)
            .unwrap()
            .is_empty()
    );
    // Vectors of different lengths in one call are refused, naming the message.
    let e = store
        .put_vectors(&id, "toy-2", 9, &[(1, vec![1.0, 0.0]), (2, vec![1.0])])
        .unwrap_err();
    assert!(e.to_string().contains("message 2"), "{e}");
}

fn words_decide_when_a_message_holds_them_and_meaning_when_none_does() {
    let (store, id) = store_with_agent!();
    // Eighty turns about pets, one about an allergy, then one live turn.
    let mut turns: Vec<Message> = (0..80)
        .map(|i| said("Nora", &format!("The pet did trick number {i} today")))
        .collect();
    turns.push(said(
        "Omar",
        "No hazelnuts near my plate, the allergy is back",
    ));
    turns.push(said("Omar", "Still here, live"));
    let all = store.append_batch(&id, turns, NOW).unwrap();
    compact(&store, &id, &all[..81], "s");
    embed_archive(&store, &id, 1_000);

    // The embedder reads the question as one about pets (a small model often does), but one
    // message holds every word of it: that message comes first. (Reciprocal-rank fusion with
    // the vectors weighing twice put sixty pet turns before it.)
    let hits = store
        .search_archive_with(&id, "hazelnuts allergy", Some(("toy", &vector("pet"))), 5)
        .unwrap();
    assert_eq!(hits[0].message.seq, 80, "{hits:?}");
    // No message holds "animal": the vectors decide, and the pet turns come first.
    let hits = store
        .search_archive_with(&id, "animal", Some(("toy", &vector("pet"))), 5)
        .unwrap();
    assert_eq!(hits.len(), 5);
    assert!(hits.iter().all(|h| h.message.seq < 80), "{hits:?}");

    // Each ranked document says how much of its score the words gave: the message that holds
    // every word of the question was found by its words, the pet turns by meaning alone.
    let ranked = store
        .rank_archive(&id, "hazelnuts allergy", Some(("toy", &vector("pet"))), 5)
        .unwrap();
    assert_eq!(ranked[0].id, 80, "{ranked:?}");
    assert!(ranked[0].words > 0.5, "{ranked:?}");
    let ranked = store
        .rank_archive(&id, "animal", Some(("toy", &vector("pet"))), 5)
        .unwrap();
    assert!(ranked.iter().all(|d| d.words == 0.0), "{ranked:?}");
    // Without a vector, BM25 alone: every score is the words'.
    let ranked = store.rank_archive(&id, "hazelnuts", None, 5).unwrap();
    assert!(
        !ranked.is_empty() && ranked.iter().all(|d| d.words == 1.0),
        "{ranked:?}"
    );
}

#[test]
fn a_copy_carries_the_vectors() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 10);
    compact(&store, &id, &all[..6], "s");
    embed_archive(&store, &id, 100);
    let dest = Store::temporary().unwrap();
    store.copy_into(&dest).unwrap();
    assert_eq!(
        dest.vectors_meta(&id).unwrap(),
        store.vectors_meta(&id).unwrap()
    );
    let q = vector("x");
    assert_eq!(
        dest.search_vectors(&id, "toy", &q, 3).unwrap(),
        store.search_vectors(&id, "toy", &q, 3).unwrap()
    );
}
