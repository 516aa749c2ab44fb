//! The real model, when one is at hand: set `SOMNA_EMBEDDER_DIR` to a directory that
//! `scripts/local-embedder.sh` filled (its last line), and build with `--features candle`.
//!
//! `SOMNA_EMBEDDER_DIR=$(scripts/local-embedder.sh | tail -n1) cargo test -p somna-embed --features candle --release`
#![cfg(feature = "candle")]
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::OnceLock;

use somna_embed::LocalEmbedder;

/// The model, loaded once for every test here; `None` (and a line saying so) without
/// `SOMNA_EMBEDDER_DIR`.
fn embedder(test: &str) -> Option<&'static LocalEmbedder> {
    static MODEL: OnceLock<Option<LocalEmbedder>> = OnceLock::new();
    let model = MODEL.get_or_init(|| {
        let dir = PathBuf::from(std::env::var_os("SOMNA_EMBEDDER_DIR")?);
        Some(LocalEmbedder::load(&dir).unwrap_or_else(|e| panic!("{e}")))
    });
    if model.is_none() {
        skip(
            test,
            "SOMNA_EMBEDDER_DIR is not set (scripts/local-embedder.sh fetches the model)",
        );
    }
    model.as_ref()
}

/// `skipped: <test>: <why>` straight to standard error (the harness hides `eprintln!` of a passing
/// test) and to the file `SOMNA_SKIP_LOG` names, as somna-testkit's `skip` does (not a dependency
/// here: this crate's tests build nothing else of the workspace).
fn skip(test: &str, why: &str) {
    use std::io::Write;
    let line = format!("skipped: {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("SOMNA_SKIP_LOG") {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f32]) -> f32 {
    dot(a, a).sqrt()
}

#[test]
fn embeddings_are_384_wide_and_unit_length() {
    let Some(model) = embedder("embeddings_are_384_wide_and_unit_length") else {
        return;
    };
    assert_eq!(model.dims(), 384);
    assert_eq!(model.model_name(), "all-MiniLM-L6-v2");
    let texts = ["The cat sat on the mat", "", "ünïcödé and emoji 🐈", "a"];
    let vectors = model.embed(&texts).unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (text, v) in texts.iter().zip(&vectors) {
        assert_eq!(v.len(), 384, "{text:?}");
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
        assert!((norm(v) - 1.0).abs() < 1e-5, "{text:?}: norm {}", norm(v));
    }
    assert!(model.embed(&[]).unwrap().is_empty());
}

#[test]
fn similar_sentences_are_closer() {
    let Some(model) = embedder("similar_sentences_are_closer") else {
        return;
    };
    let v = model
        .embed(&[
            "The cat sat on the mat",
            "A kitten was sitting on a rug",
            "Quarterly revenue rose by 4%",
        ])
        .unwrap();
    let near = dot(&v[0], &v[1]);
    let far = dot(&v[0], &v[2]);
    eprintln!("cat~kitten {near:.4}, cat~revenue {far:.4}");
    assert!(near > far + 0.2, "cat~kitten {near} vs cat~revenue {far}");
}

#[test]
fn embedding_is_deterministic_and_independent_of_the_batch() {
    let Some(model) = embedder("embedding_is_deterministic_and_independent_of_the_batch") else {
        return;
    };
    let texts: Vec<String> = (0..70)
        .map(|i| {
            format!(
                "message {i}: {}",
                "words that make it longer ".repeat(i % 9)
            )
        })
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let first = model.embed(&texts).unwrap();
    let again = model.embed(&texts).unwrap();
    assert_eq!(first, again, "the same batch gave different embeddings");
    // Alone (no padding, another batch shape) each text comes out the same to float rounding.
    for (i, text) in texts.iter().enumerate().step_by(7) {
        let alone = model.embed(&[text]).unwrap().remove(0);
        let cos = dot(&alone, &first[i]);
        assert!(cos > 0.99999, "text {i}: cosine {cos} alone vs batched");
    }
}

#[test]
fn long_texts_are_cut_not_refused() {
    let Some(model) = embedder("long_texts_are_cut_not_refused") else {
        return;
    };
    let long = "word ".repeat(2000);
    let longer = "word ".repeat(3000);
    let v = model.embed(&[&long, &longer]).unwrap();
    // Both are cut to the same 256 tokens.
    assert!(dot(&v[0], &v[1]) > 0.99999);
}

/// Matches reference embeddings computed without candle (tests/reference.py: BERT in numpy,
/// float64, Hugging Face's Python tokenizer), stored in tests/reference.tsv.
#[test]
fn matches_the_python_reference() {
    let Some(model) = embedder("matches_the_python_reference") else {
        return;
    };
    assert_matches(model, include_str!("reference.tsv"));
}

/// all-mpnet-base-v2 (MPNet, which candle does not ship: `src/mpnet.rs`) matches reference
/// embeddings computed without candle (tests/reference.py), when
/// `SOMNA_EMBEDDER_MPNET_DIR` names its directory (`scripts/local-embedder.sh --model
/// all-mpnet-base-v2`).
#[test]
fn mpnet_matches_the_python_reference() {
    let test = "mpnet_matches_the_python_reference";
    let Some(dir) = std::env::var_os("SOMNA_EMBEDDER_MPNET_DIR") else {
        skip(test, "SOMNA_EMBEDDER_MPNET_DIR is not set");
        return;
    };
    let model = LocalEmbedder::load(&PathBuf::from(dir)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.dims(), 768);
    assert_matches(&model, include_str!("reference_mpnet.tsv"));
}

fn assert_matches(model: &LocalEmbedder, reference: &str) {
    let cases = parse_reference(reference);
    assert!(!cases.is_empty());
    let texts: Vec<&str> = cases.iter().map(|(t, _)| t.as_str()).collect();
    let ours = model.embed(&texts).unwrap();
    let mut worst = (1f32, 0f32);
    for ((text, theirs), ours) in cases.iter().zip(&ours) {
        assert_eq!(ours.len(), theirs.len(), "{text:?}: dimensions");
        let cos = dot(ours, theirs) / norm(theirs);
        let max_diff = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(cos > 0.9999, "{text:?}: cosine {cos} to the reference");
        assert!(max_diff < 1e-3, "{text:?}: max |diff| {max_diff}");
        worst = (worst.0.min(cos), worst.1.max(max_diff));
    }
    eprintln!(
        "{} texts: lowest cosine {:.7}, largest |diff| {:.2e}",
        cases.len(),
        worst.0,
        worst.1
    );
}

/// A tiny reader for the reference file: lines of `text<TAB>f1,f2,...`.
fn parse_reference(text: &str) -> Vec<(String, Vec<f32>)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (t, v) = line.split_once('\t').unwrap();
            let v = v
                .split(',')
                .map(|x| x.trim().parse::<f32>().unwrap())
                .collect();
            (t.to_owned(), v)
        })
        .collect()
}

/// The builtin static table tokenizes as the model's own tokenizer does (BERT uncased WordPiece):
/// the same ids for the reference sentences and for text with accents, contractions, digits,
/// symbols and long words; and the table's vectors rank meaning as the model's do on a few pairs.
#[test]
fn the_builtin_table_tokenizes_as_the_model_does() {
    let Some(model) = embedder("the_builtin_table_tokenizes_as_the_model_does") else {
        return;
    };
    if model.model_name() != "all-MiniLM-L6-v2" {
        return skip(
            "the_builtin_table_tokenizes_as_the_model_does",
            "the table is all-MiniLM-L6-v2's",
        );
    }
    let table = somna_embed::StaticEmbedder::builtin().unwrap();
    let reference = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference.tsv");
    let mut texts: Vec<String> = std::fs::read_to_string(reference)
        .unwrap()
        .lines()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_owned)
        .collect();
    texts.extend(
        [
            "Unaffable, isn't it? I'd've paid $4.50 (or €5) — 10% off!",
            "Naïve café owners in São Paulo said: \"hello\"...",
            "Supercalifragilisticexpialidocious antidisestablishmentarianism",
            "e-mail me at nora@example.com about the 2023-05-08 meeting #42",
            "Tabs\tand\nnewlines   and    spaces",
        ]
        .map(str::to_owned),
    );
    for text in &texts {
        let (got, want) = (table.token_ids(text), model.token_ids(text).unwrap());
        // The model's tokenizer cuts at its window; the table's does not.
        let got = if want.len() >= somna_embed::MAX_TOKENS - 2 {
            &got[..want.len().min(got.len())]
        } else {
            &got[..]
        };
        assert_eq!(got, want, "{text:?}");
    }
}
