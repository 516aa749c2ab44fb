//! The [`Embedder`] boundary of semantic retrieval, and [`build_embedder`], which picks one from
//! `[embedder]`.
//!
//! - `openai.rs`: [`OpenAiEmbedder`], a client of any OpenAI-compatible `/v1/embeddings` server
//!   (OpenAI, vLLM, llama.cpp's server, Ollama, TEI).
//! - `builtin.rs`: [`BuiltinEmbedder`], a static token table distilled from all-MiniLM-L6-v2,
//!   compiled in (offline, no setup, microseconds a message).
//! - `local.rs`: [`LocalEmbedder`], all-MiniLM-L6-v2 in process (somna-embed; real with the
//!   `local-embedder` feature).
//!
//! Every vector an embedder returns is checked (one per text, one length for all, finite, not all
//! zero) and L2-normalized, whatever the server sent: a dot product is then the cosine.

mod builtin;
mod local;
mod openai;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use somna_core::config::{EmbedderProvider, EmbedderSection};

pub use builtin::BuiltinEmbedder;
pub use local::LocalEmbedder;
pub use openai::OpenAiEmbedder;

/// Computes vectors for texts. Cheap to share (`Arc<dyn Embedder>`), safe to call from many tasks.
pub trait Embedder: Send + Sync + fmt::Debug {
    /// One unit-length vector per text, in order, all of one length.
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>>;
    /// The model's name: stored with the vectors, so that a change of model is noticed.
    fn model(&self) -> &str;
}

/// Why an embedding failed. Every variant names what was at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmbedError {
    /// The configuration cannot work; `key` names the setting (e.g. `embedder.base_url`).
    #[error("invalid embedder config {key}: {message}")]
    Config { key: String, message: String },
    /// The request did not complete (refused, dropped, unreadable).
    #[error("embedding request to {url} failed: {message}")]
    Request { url: String, message: String },
    /// The server did not answer within `embedder.timeout`.
    #[error("embedding request to {url} timed out after {after:?}")]
    Timeout { url: String, after: Duration },
    /// The server answered with an error status.
    #[error("embedding server at {url} answered HTTP {status}: {excerpt}")]
    Server {
        url: String,
        status: u16,
        excerpt: String,
    },
    /// The server answered 200 with something that is not one good vector per text.
    #[error("embedding server sent a malformed response: {0}")]
    Malformed(String),
    /// The in-process model failed (or is not built in).
    #[error("in-process embedder: {0}")]
    Local(String),
}

impl EmbedError {
    fn config(key: &str, message: impl Into<String>) -> Self {
        EmbedError::Config {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// The embedder `cfg.provider` names, or `None` for `none`. For `openai`, the API key is read
/// through `env` from the variable `embedder.api_key_env` names.
pub fn build_embedder(
    cfg: &EmbedderSection,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    match cfg.provider {
        EmbedderProvider::None => Ok(None),
        EmbedderProvider::Openai => Ok(Some(Arc::new(OpenAiEmbedder::from_config(cfg, env)?))),
        EmbedderProvider::Local => Ok(Some(Arc::new(LocalEmbedder::from_config(cfg)?))),
        EmbedderProvider::Builtin => Ok(Some(Arc::new(BuiltinEmbedder::shared()?))),
    }
}

/// [`build_embedder`] reading the API key from the process environment.
pub fn build_embedder_from_env(
    cfg: &EmbedderSection,
) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    build_embedder(cfg, &|name| std::env::var(name).ok())
}

/// Checks `vectors` against the `texts` they answer (one each, one length, finite, not zero) and
/// scales each to unit length.
pub fn checked_unit_vectors(
    texts: usize,
    mut vectors: Vec<Vec<f32>>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != texts {
        return Err(EmbedError::Malformed(format!(
            "{} vector(s) for {texts} text(s)",
            vectors.len()
        )));
    }
    let dims = vectors.first().map_or(0, Vec::len);
    for (i, v) in vectors.iter_mut().enumerate() {
        if v.is_empty() || v.len() != dims {
            return Err(EmbedError::Malformed(format!(
                "vector {i} has {} dimensions, vector 0 has {dims}",
                v.len()
            )));
        }
        if v.len() > MAX_DIMS {
            return Err(EmbedError::Malformed(format!(
                "vector {i} has {} dimensions, more than {MAX_DIMS}",
                v.len()
            )));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(EmbedError::Malformed(format!(
                "vector {i} holds a value that is not a finite number"
            )));
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON {
            return Err(EmbedError::Malformed(format!("vector {i} is all zeros")));
        }
        v.iter_mut().for_each(|x| *x /= norm);
    }
    Ok(vectors)
}

/// The most dimensions a vector may have (the largest common models have 4,096).
pub const MAX_DIMS: usize = 8_192;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_checked_and_normalized() {
        let v = checked_unit_vectors(2, vec![vec![3.0, 4.0], vec![0.0, 2.0]]).unwrap();
        assert_eq!(v, [vec![0.6, 0.8], vec![0.0, 1.0]]);
        let bad = |vs: Vec<Vec<f32>>| checked_unit_vectors(2, vs).unwrap_err().to_string();
        assert!(bad(vec![vec![1.0]]).contains("1 vector(s) for 2 text(s)"));
        assert!(bad(vec![vec![1.0], vec![1.0, 2.0]]).contains("vector 1 has 2 dimensions"));
        assert!(bad(vec![vec![1.0], vec![f32::NAN]]).contains("not a finite number"));
        assert!(bad(vec![vec![1.0], vec![0.0]]).contains("vector 1 is all zeros"));
    }

    #[test]
    fn none_builds_no_embedder_and_bad_configs_name_their_key() {
        let none = EmbedderSection {
            provider: EmbedderProvider::None,
            ..EmbedderSection::default()
        };
        assert!(build_embedder(&none, &|_| None).unwrap().is_none());
        let builtin = build_embedder(&EmbedderSection::default(), &|_| None)
            .unwrap()
            .expect("the default is the builtin embedder");
        assert_eq!(builtin.model(), somna_embed::BUILTIN_MODEL_NAME);
        let openai = EmbedderSection {
            provider: EmbedderProvider::Openai,
            base_url: "ftp://x".into(),
            model: "m".into(),
            ..EmbedderSection::default()
        };
        let e = build_embedder(&openai, &|_| None).unwrap_err();
        assert!(e.to_string().contains("embedder.base_url"), "{e}");
        let keyed = EmbedderSection {
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key_env: "SOMNA_NO_SUCH_KEY".into(),
            ..openai
        };
        let e = build_embedder(&keyed, &|_| None).unwrap_err();
        assert!(e.to_string().contains("SOMNA_NO_SUCH_KEY"), "{e}");
    }
}
