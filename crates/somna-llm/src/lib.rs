//! somna-llm: Somna's LLM boundary, and the only crate that names async-openai.
//!
//! - [`client`]: the [`LlmClient`] trait and [`build_client`] (builtin or OpenAI-compatible, from config).
//! - [`types`]: [`ChatRequest`] (with its [`Structured`] form), [`ChatMessage`], [`ChatResponse`],
//!   [`Usage`], [`Purpose`].
//! - [`error`]: [`LlmError`], typed failures (timeout, rate limited, server, malformed, empty, refused…).
//! - [`openai`]: [`OpenAiClient`] — timeout per attempt, bounded retries, a global concurrency limit.
//! - [`retry`]: [`RetryPolicy`] — what is retried and how long to wait.
//! - [`builtin`]: [`BuiltinClient`] — offline and deterministic: answers summaries, fact extraction,
//!   consolidation, reflections and importance scores with somna-text's heuristics, and chat turns
//!   with a scripted agent brain.
//! - [`prompts`]: the requests Somna sends for summaries, extraction, consolidation, scores, reflections.
//! - [`grounding`]: the check of what models write into memory against the sources it cites (the
//!   citation markers themselves are somna-text's `cite`).
//! - [`embed`]: the [`Embedder`] boundary of semantic retrieval and [`build_embedder`]: an
//!   OpenAI-compatible `/v1/embeddings` client, or all-MiniLM-L6-v2 in process (somna-embed).
//!
//! See docs/llm.md for the semantics of retries, timeouts and concurrency.

pub mod builtin;
pub mod client;
pub mod embed;
pub mod error;
pub mod grounding;
pub mod openai;
pub mod prompts;
pub mod retry;
pub mod types;

pub use builtin::BuiltinClient;
pub use client::{LlmClient, build_client, build_client_from_env};
pub use embed::{BuiltinEmbedder, EmbedError, Embedder, build_embedder, build_embedder_from_env};
pub use error::{LlmError, Result};
pub use openai::{OpenAiClient, OpenAiSettings};
pub use retry::RetryPolicy;
pub use somna_core::{Role, ToolCall};
pub use types::{ChatMessage, ChatRequest, ChatResponse, Purpose, Structured, Usage};
