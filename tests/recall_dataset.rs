//! The shipped recall dataset (datasets/recall/) is exactly what its seeded generator
//! (examples/recall_dataset/) writes, the generator's phrase bank passes its own audit, and the
//! dataset stays small enough to ship.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../examples/recall_dataset/generate.rs"]
mod generate;

use std::path::Path;

#[test]
fn the_shipped_recall_dataset_is_what_the_generator_writes() {
    assert_eq!(generate::audit(), Vec::<String>::new());
    let generated = generate::generate(generate::SEED, generate::CONVERSATIONS);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/recall");
    let mut bytes = 0;
    for (name, jsonl) in &generated.conversations {
        let shipped = std::fs::read_to_string(dir.join(format!("conversations/{name}.jsonl")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            shipped == *jsonl,
            "conversations/{name}.jsonl differs from the generator's output: run \
             `cargo run --example recall_dataset`"
        );
        bytes += shipped.len();
    }
    let shipped = std::fs::read_to_string(dir.join("questions.jsonl")).unwrap();
    assert!(
        shipped == generated.questions,
        "questions.jsonl differs from the generator's output"
    );
    bytes += shipped.len();
    let files = std::fs::read_dir(dir.join("conversations"))
        .unwrap()
        .count();
    assert_eq!(
        files,
        generated.conversations.len(),
        "no stray conversation files"
    );
    assert!(bytes < 2_000_000, "{bytes} bytes");
    assert!(generated.categories.values().sum::<usize>() >= 1_000);
    assert!(
        generated.turns.iter().all(|&n| (400..=800).contains(&n)),
        "{:?}",
        generated.turns
    );
}
