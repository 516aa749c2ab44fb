//! [`LocalEmbedder`]: all-MiniLM-L6-v2 in process (somna-embed), run on tokio's blocking pool so
//! that an embedding never stalls the threads that drive agents.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use somna_core::config::EmbedderSection;

use super::{EmbedError, Embedder, checked_unit_vectors};

/// The in-process embedder. Without the `local-embedder` feature, loading it fails with an error
/// that says how to build it in.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    model: Arc<somna_embed::LocalEmbedder>,
    name: String,
    /// Texts per forward pass.
    batch: usize,
}

impl LocalEmbedder {
    /// Loads the model from `cfg.path` (`provider = "local"`).
    pub fn from_config(cfg: &EmbedderSection) -> Result<Self, EmbedError> {
        let dir = cfg.path.trim();
        if dir.is_empty() {
            return Err(EmbedError::config(
                "embedder.path",
                "is empty; name the model directory (scripts/local-embedder.sh prints it)",
            ));
        }
        let model = somna_embed::LocalEmbedder::load(Path::new(dir))
            .map_err(|e| EmbedError::Local(format!("{e:#}")))?;
        Ok(LocalEmbedder {
            name: model.model_name().to_string(),
            model: Arc::new(model),
            batch: usize::try_from(cfg.batch.max(1)).unwrap_or(64),
        })
    }
}

impl Embedder for LocalEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
        let model = Arc::clone(&self.model);
        let batch = self.batch;
        Box::pin(async move {
            let n = texts.len();
            let vectors = tokio::task::spawn_blocking(move || {
                let mut out = Vec::with_capacity(texts.len());
                for chunk in texts.chunks(batch) {
                    let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    out.extend(
                        model
                            .embed(&refs)
                            .map_err(|e| EmbedError::Local(format!("{e:#}")))?,
                    );
                }
                Ok::<_, EmbedError>(out)
            })
            .await
            .map_err(|e| EmbedError::Local(format!("the embedding task failed: {e}")))??;
            checked_unit_vectors(n, vectors)
        })
    }

    fn model(&self) -> &str {
        &self.name
    }
}
