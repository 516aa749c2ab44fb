//! [`OpenAiEmbedder`]: `POST {base_url}/embeddings` of any OpenAI-compatible server, batched.

use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::Deserialize;
use somna_core::config::EmbedderSection;

use super::{EmbedError, Embedder, checked_unit_vectors};
use crate::error::excerpt;

/// A client of an OpenAI-compatible `/v1/embeddings` endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    http: reqwest::Client,
    /// `{base_url}/embeddings`.
    url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    /// Texts per request.
    batch: usize,
}

/// The part of an embeddings response Somna reads.
#[derive(Debug, Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Debug, Deserialize)]
struct Datum {
    embedding: Embedding,
    /// The input's position; servers may answer out of order.
    #[serde(default)]
    index: Option<usize>,
}

/// One input's embedding as servers send it: a vector, or one vector per token (llama-cpp-python's
/// server for a model without a pooling layer), which Somna mean-pools.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Embedding {
    Pooled(Vec<f32>),
    PerToken(Vec<Vec<f32>>),
}

impl Embedding {
    /// The input's one vector: as sent, or the mean of its token vectors (which must share a
    /// length; none is an empty vector, refused by the checks after).
    fn pooled(self) -> Result<Vec<f32>, EmbedError> {
        match self {
            Embedding::Pooled(v) => Ok(v),
            Embedding::PerToken(rows) => {
                let Some(dims) = rows.first().map(Vec::len) else {
                    return Ok(Vec::new());
                };
                if rows.iter().any(|r| r.len() != dims) {
                    return Err(EmbedError::Malformed(
                        "token vectors of different lengths in one embedding".to_string(),
                    ));
                }
                let mut mean = vec![0.0f32; dims];
                for row in &rows {
                    mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
                }
                let n = rows.len() as f32;
                mean.iter_mut().for_each(|m| *m /= n);
                Ok(mean)
            }
        }
    }
}

impl OpenAiEmbedder {
    /// A client for `cfg` (`provider = "openai"`); the API key is read through `env` from the
    /// variable `cfg.api_key_env` names. Errors name the config key at fault.
    pub fn from_config(
        cfg: &EmbedderSection,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, EmbedError> {
        let base = cfg.base_url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base).map_err(|e| {
            EmbedError::config("embedder.base_url", format!("{base:?} is not a URL: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(EmbedError::config(
                "embedder.base_url",
                format!("{base:?} must start with http:// or https://"),
            ));
        }
        if cfg.model.trim().is_empty() {
            return Err(EmbedError::config(
                "embedder.model",
                "is empty; name the embedding model the server serves",
            ));
        }
        let api_key = crate::openai::api_key_from(&cfg.api_key_env, env)
            .map_err(|message| EmbedError::config("embedder.api_key_env", message))?;
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| {
                EmbedError::config("embedder", format!("cannot build the HTTP client: {e}"))
            })?;
        Ok(OpenAiEmbedder {
            http,
            url: format!("{base}/embeddings"),
            model: cfg.model.trim().to_string(),
            api_key,
            timeout: cfg.timeout,
            batch: usize::try_from(cfg.batch.max(1)).unwrap_or(64),
        })
    }

    /// One request for `texts` (at most `batch` of them).
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = serde_json::json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        let mut request = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                EmbedError::Timeout {
                    url: self.url.clone(),
                    after: self.timeout,
                }
            } else {
                EmbedError::Request {
                    url: self.url.clone(),
                    message: format!("{e:#}"),
                }
            }
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(failed)?;
        if !status.is_success() {
            return Err(EmbedError::Server {
                url: self.url.clone(),
                status: status.as_u16(),
                excerpt: excerpt(&String::from_utf8_lossy(&bytes), 200),
            });
        }
        let parsed: Response = serde_json::from_slice(&bytes).map_err(|e| {
            EmbedError::Malformed(format!(
                "{e}: {}",
                excerpt(&String::from_utf8_lossy(&bytes), 200)
            ))
        })?;
        let mut data = parsed.data;
        if data.iter().all(|d| d.index.is_some()) {
            data.sort_by_key(|d| d.index);
            if data.iter().enumerate().any(|(i, d)| d.index != Some(i)) {
                return Err(EmbedError::Malformed(
                    "the answer's indexes are not 0..n, one per input".to_string(),
                ));
            }
        }
        let vectors = data
            .into_iter()
            .map(|d| d.embedding.pooled())
            .collect::<Result<Vec<_>, _>>()?;
        checked_unit_vectors(texts.len(), vectors)
    }
}

impl Embedder for OpenAiEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(self.batch) {
                out.extend(self.request(chunk).await?);
            }
            Ok(out)
        })
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_token_embeddings_are_mean_pooled() {
        let d: Datum = serde_json::from_str(r#"{"embedding": [[1.0, 2.0], [3.0, 4.0]]}"#).unwrap();
        assert_eq!(d.embedding.pooled().unwrap(), [2.0, 3.0]);
        let d: Datum = serde_json::from_str(r#"{"embedding": [0.5, 1.5]}"#).unwrap();
        assert_eq!(d.embedding.pooled().unwrap(), [0.5, 1.5]);
        let d: Datum = serde_json::from_str(r#"{"embedding": [[1.0], [1.0, 2.0]]}"#).unwrap();
        assert!(d.embedding.pooled().is_err());
        assert!(serde_json::from_str::<Datum>(r#"{"embedding": "x"}"#).is_err());
    }
}
