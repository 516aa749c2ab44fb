//! [`BuiltinEmbedder`]: the static token table compiled into Somna (somna-embed's
//! [`somna_embed::StaticEmbedder`], distilled from all-MiniLM-L6-v2): offline, nothing to set up,
//! a few microseconds a message, so it runs inline.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;

use super::{EmbedError, Embedder, checked_unit_vectors};

/// The builtin embedder (`provider = "builtin"`). The table is parsed once per process and shared.
#[derive(Debug, Clone)]
pub struct BuiltinEmbedder {
    table: Arc<somna_embed::StaticEmbedder>,
}

impl BuiltinEmbedder {
    /// The process's builtin embedder (an error only if the table compiled in is broken).
    pub fn shared() -> Result<Self, EmbedError> {
        static TABLE: OnceLock<Result<Arc<somna_embed::StaticEmbedder>, String>> = OnceLock::new();
        TABLE
            .get_or_init(|| {
                somna_embed::StaticEmbedder::builtin()
                    .map(Arc::new)
                    .map_err(|e| format!("the builtin table: {e}"))
            })
            .clone()
            .map(|table| BuiltinEmbedder { table })
            .map_err(EmbedError::Local)
    }
}

impl Embedder for BuiltinEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = self.table.embed(&refs);
        Box::pin(async move { checked_unit_vectors(texts.len(), vectors) })
    }

    fn model(&self) -> &str {
        self.table.model_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_unit_vector_a_text_and_the_table_is_shared() {
        let a = BuiltinEmbedder::shared().unwrap();
        let b = BuiltinEmbedder::shared().unwrap();
        assert!(Arc::ptr_eq(&a.table, &b.table));
        let texts = ["Omar moved to Lisbon.", "", "Where does Omar live now?"];
        let v = a
            .embed(texts.iter().map(|t| (*t).to_owned()).collect())
            .await
            .unwrap();
        assert_eq!(v.len(), 3);
        for x in &v {
            assert_eq!(x.len(), 64);
            let norm: f32 = x.iter().map(|c| c * c).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4);
        }
        assert!(a.embed(Vec::new()).await.unwrap().is_empty());
        assert_eq!(a.model(), somna_embed::BUILTIN_MODEL_NAME);
    }
}
