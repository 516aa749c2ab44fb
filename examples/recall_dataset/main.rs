//! Writes Somna's recall dataset (docs/recall.md): seeded and deterministic, so running it again
//! gives byte-identical files.
//!
//! ```text
//! cargo run --example recall_dataset            # writes datasets/recall/
//! cargo run --example recall_dataset -- OUT_DIR
//! ```

#![allow(clippy::print_stdout)]

mod generate;

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let problems = generate::audit();
    if !problems.is_empty() {
        for p in &problems {
            println!("phrase bank: {p}");
        }
        std::process::exit(1);
    }
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("datasets/recall"), PathBuf::from);
    let generated = generate::generate(generate::SEED, generate::CONVERSATIONS);
    let conversations = out.join("conversations");
    std::fs::create_dir_all(&conversations)?;
    for (name, jsonl) in &generated.conversations {
        std::fs::write(conversations.join(format!("{name}.jsonl")), jsonl)?;
    }
    std::fs::write(out.join("questions.jsonl"), &generated.questions)?;
    let turns: usize = generated.turns.iter().sum();
    let questions: usize = generated.categories.values().sum();
    println!(
        "wrote {}: {} conversations ({} turns: {:?}), {questions} questions",
        out.display(),
        generated.conversations.len(),
        turns,
        generated.turns
    );
    for (category, n) in &generated.categories {
        println!("  {category:<12} {n}");
    }
    Ok(())
}
