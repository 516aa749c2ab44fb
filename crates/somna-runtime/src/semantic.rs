//! Semantic retrieval's two embedding jobs, in one place: what was archived is embedded while the
//! agent sleeps (or after an import), never on a turn's hot path ([`embed_archive`]); the input is
//! embedded once per turn ([`embed_query`]) and fused with BM25 by the store
//! (`Store::search_archive_with`). Without an embedder nothing here runs and retrieval is BM25
//! alone.

use std::sync::Arc;
use std::time::Instant;

use somna_core::config::EmbedderSection;
use somna_core::{AgentId, Message};
use somna_llm::{EmbedError, Embedder};
use somna_store::{Store, StoreError};

/// An embedder and how much one sleep may embed: what agents get when `[embedder]` is set.
#[derive(Debug, Clone)]
pub struct Semantic {
    pub embedder: Arc<dyn Embedder>,
    /// The most archived messages one sleep embeds (the rest wait for the next one).
    pub max_per_sleep: usize,
}

impl Semantic {
    /// `embedder` with the limits of `section`.
    pub fn new(embedder: Arc<dyn Embedder>, section: &EmbedderSection) -> Self {
        Semantic {
            embedder,
            max_per_sleep: if section.max_per_sleep == 0 {
                usize::MAX
            } else {
                usize::try_from(section.max_per_sleep).unwrap_or(usize::MAX)
            },
        }
    }

    /// What `section` asks for — the builtin embedder unless it says otherwise — or `None` for
    /// `provider = "none"`: what `somna run` passes as [`crate::RuntimeOptions::semantic`]. An
    /// `openai` embedder's API key is read from the environment variable the section names.
    pub fn from_config(section: &EmbedderSection) -> Result<Option<Self>, EmbedError> {
        Ok(somna_llm::build_embedder_from_env(section)?.map(|e| Semantic::new(e, section)))
    }
}

/// Why embedding the archive failed (nothing was stored; the next sleep tries again).
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

/// What one [`embed_archive`] did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EmbedReport {
    /// Messages embedded and stored.
    pub embedded: usize,
    /// Archived messages still without a vector (beyond the limit).
    pub remaining: usize,
    /// Wall time, in milliseconds.
    pub ms: f64,
}

/// The text a message is embedded as: `Name: content` (the speaker is part of what a turn says).
pub fn embedding_text(m: &Message) -> String {
    match &m.name {
        Some(name) => format!("{name}: {}", m.content),
        None => m.content.clone(),
    }
}

/// Embeds up to `max` archived messages of `id` that have no vector of the embedder's model yet
/// and stores their vectors with the new watermark.
pub async fn embed_archive(
    store: &Store,
    id: &AgentId,
    embedder: &dyn Embedder,
    max: usize,
) -> Result<EmbedReport, SemanticError> {
    let started = Instant::now();
    let model = embedder.model().to_string();
    let todo = store.messages_to_embed(id, &model, max)?;
    let through = todo.through;
    if todo.messages.is_empty() {
        // Nothing to embed, but the watermark may move past archived messages without text.
        if store.vectors_meta(id)?.through < through {
            store.put_vectors(id, &model, through, &[])?;
        }
        return Ok(EmbedReport {
            remaining: todo.remaining,
            ..EmbedReport::default()
        });
    }
    let texts: Vec<String> = todo.messages.iter().map(embedding_text).collect();
    let vectors = embedder.embed(texts).await?;
    let pairs: Vec<(u64, Vec<f32>)> = todo.messages.iter().map(|m| m.seq).zip(vectors).collect();
    store.put_vectors(id, &model, through, &pairs)?;
    let report = EmbedReport {
        embedded: pairs.len(),
        remaining: todo.remaining,
        ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    tracing::debug!(agent = %id, embedded = report.embedded, remaining = report.remaining, ms = report.ms, "archive embedded");
    Ok(report)
}

/// [`embed_archive`] until nothing is left (after an import, which archives a whole
/// conversation at once). Returns the total.
pub async fn embed_whole_archive(
    store: &Store,
    id: &AgentId,
    embedder: &dyn Embedder,
    batch: usize,
) -> Result<EmbedReport, SemanticError> {
    let started = Instant::now();
    let mut total = EmbedReport::default();
    loop {
        let r = embed_archive(store, id, embedder, batch.max(1)).await?;
        total.embedded += r.embedded;
        total.remaining = r.remaining;
        if r.remaining == 0 || r.embedded == 0 {
            break;
        }
    }
    total.ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(total)
}

/// The vector of a turn's input, or `None` (logged) when the embedder fails: the turn then
/// retrieves by BM25 alone rather than not at all.
pub async fn embed_query(embedder: &dyn Embedder, agent: &AgentId, text: &str) -> Option<Vec<f32>> {
    if text.trim().is_empty() {
        return None;
    }
    match embedder.embed(vec![text.to_string()]).await {
        Ok(mut v) => v.pop(),
        Err(e) => {
            tracing::warn!(%agent, error = %e, "cannot embed the input; retrieving by keywords alone");
            None
        }
    }
}
