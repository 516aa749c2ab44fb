//! The [`LlmClient`] trait every provider implements, and [`build_client`], which picks one from config.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use somna_core::config::{LlmConfig, Provider, StructuredOutput};

use crate::builtin::BuiltinClient;
use crate::error::{LlmError, Result};
use crate::openai::OpenAiClient;
use crate::types::{ChatRequest, ChatResponse};

/// A chat-completion provider. Implementations are cheap to share (`Arc<dyn LlmClient>`) and safe to call
/// from many tasks at once.
pub trait LlmClient: Send + Sync + fmt::Debug {
    /// One chat completion.
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>>;
    /// Provider name for logs and metrics ("builtin", "openai").
    fn provider(&self) -> &str;
}

/// The client that `cfg.provider` names: [`BuiltinClient`] or [`OpenAiClient`]. For `openai`, the API key
/// is read through `env` from the variable `llm.api_key_env` names. Errors are [`LlmError::Config`] naming
/// the key at fault (`llm.api_key_env`, `llm.base_url`, `llm.model`, `llm.timeout`, `llm.max_concurrent`).
pub fn build_client(
    cfg: &LlmConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn LlmClient>> {
    match cfg.provider {
        Provider::Builtin => Ok(Arc::new(
            BuiltinClient::new()
                .with_structured_output(cfg.structured_output != StructuredOutput::Off),
        )),
        Provider::Openai => Ok(Arc::new(OpenAiClient::from_config(cfg, env)?)),
    }
}

/// [`build_client`] reading the API key from the process environment.
pub fn build_client_from_env(cfg: &LlmConfig) -> Result<Arc<dyn LlmClient>> {
    build_client(cfg, &|name| std::env::var(name).ok())
}
