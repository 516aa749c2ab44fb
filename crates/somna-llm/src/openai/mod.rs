//! [`OpenAiClient`]: any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp's
//! server) through async-openai, with a per-attempt timeout, bounded retries with backoff, a global
//! concurrency limit shared by all clones, and typed errors.
//!
//! async-openai's own client retries 429/5xx/connect errors up to three times inside every call, which would
//! hide attempts from us. So the client is given its own transport (a tower service, via async-openai's
//! `middleware` feature) that does no retrying, turns every non-2xx answer into a typed status error (keeping
//! `Retry-After`), and drops the `Authorization` header when no key is configured. The retry loop here counts
//! and bounds attempts itself.
//!
//! - this file: [`OpenAiSettings`] and [`OpenAiClient`] (the retry loop, `/models`).
//! - `transport.rs`: the retry-free transport async-openai sends through, and the typed status it
//!   carries back.
//! - `failure.rs`: why one attempt failed, whether and how long to wait before the next, and the
//!   [`LlmError`] a failure becomes.
//! - `structured.rs`: the structured-output ladder (`json_schema`, `json_object`, plain text) and
//!   what the client remembers of a server that rejected a step.
//! - `wire.rs`: Somna's request and response types to and from async-openai's.

mod failure;
mod structured;
mod transport;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::{Config, OpenAIConfig};
use async_openai::types::chat::CreateChatCompletionResponse;
use futures::future::BoxFuture;
use somna_core::config::{CacheHint, LlmConfig, StructuredOutput};
use tokio::sync::Semaphore;

use crate::client::LlmClient;
use crate::error::{LlmError, Result, excerpt};
use crate::retry::RetryPolicy;
use crate::types::{ChatRequest, ChatResponse};
use failure::{Failure, classify, classify_transport, retry_wait};
use structured::{Ladder, WireFormat};
use transport::{Transport, drop_empty_bearer};
use wire::{from_wire, to_wire};

/// How long error excerpts are, in characters.
const EXCERPT_CHARS: usize = 200;

/// Everything [`OpenAiClient`] needs except the API key.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSettings {
    /// The server's base URL, e.g. `http://127.0.0.1:8089/v1` (`/chat/completions` is appended).
    pub base_url: String,
    /// Each attempt (connect, send, wait, read the whole body) must finish within this.
    pub timeout: Duration,
    /// Connecting must finish within this (and within `timeout`).
    pub connect_timeout: Duration,
    /// Which failures are retried and how long to wait in between.
    pub retry: RetryPolicy,
    /// At most this many requests in flight at once, across every clone of the client.
    pub max_concurrent: u32,
    /// How requests with a structured form ask for their answer (`llm.structured_output`).
    pub structured_output: StructuredOutput,
    /// Which per-agent cache hint requests with a cache key carry (`llm.cache_hint`).
    pub cache_hint: CacheHint,
    /// llama.cpp's slot count for slot affinity (`llm.cache_slots`; 0: no `id_slot`).
    pub cache_slots: u32,
}

impl OpenAiSettings {
    /// Settings from the resolved `[llm]` section (default waits; connect timeout at most 10 s).
    pub fn from_config(cfg: &LlmConfig) -> Self {
        OpenAiSettings {
            base_url: cfg.base_url.trim().trim_end_matches('/').to_string(),
            timeout: cfg.timeout,
            connect_timeout: cfg.timeout.min(Duration::from_secs(10)),
            retry: RetryPolicy::with_max_retries(cfg.max_retries),
            max_concurrent: cfg.max_concurrent,
            structured_output: cfg.structured_output,
            cache_hint: cfg.cache_hint,
            cache_slots: cfg.cache_slots,
        }
    }

    /// Checks what cannot work; errors name the config key (`llm.base_url`, `llm.timeout`, …).
    pub fn validate(&self) -> Result<()> {
        validate_base_url(&self.base_url)?;
        if self.timeout.is_zero() {
            return Err(LlmError::config("llm.timeout", "must be above zero"));
        }
        if self.max_concurrent == 0 {
            return Err(LlmError::config("llm.max_concurrent", "must be at least 1"));
        }
        Ok(())
    }
}

fn validate_base_url(base_url: &str) -> Result<()> {
    const KEY: &str = "llm.base_url";
    if base_url.trim().is_empty() {
        return Err(LlmError::config(
            KEY,
            "is empty; set it to the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8089/v1",
        ));
    }
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| LlmError::config(KEY, format!("{base_url:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::config(
            KEY,
            format!("{base_url:?} must start with http:// or https://"),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(LlmError::config(KEY, format!("{base_url:?} has no host")));
    }
    Ok(())
}

/// A client of an OpenAI-compatible server. Cheap to clone; clones share the connection pool and the
/// concurrency limit.
#[derive(Clone)]
pub struct OpenAiClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// async-openai's client over our retry-free transport; holds the API key (redacted in its `Debug`).
    client: Client<OpenAIConfig>,
    /// The same HTTP client, for calls async-openai does not make for us (`/models`).
    http: reqwest::Client,
    settings: OpenAiSettings,
    /// One permit per request in flight.
    limit: Arc<Semaphore>,
    /// The structured-output mode and what the server taught this client.
    ladder: Ladder,
    has_key: bool,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner.settings;
        f.debug_struct("OpenAiClient")
            .field("base_url", &s.base_url)
            .field("timeout", &s.timeout)
            .field("max_retries", &s.retry.max_retries)
            .field("max_concurrent", &s.max_concurrent)
            .field(
                "api_key",
                &if self.inner.has_key {
                    "<set>"
                } else {
                    "<none>"
                },
            )
            .finish()
    }
}

impl OpenAiClient {
    /// A client with `settings` and an optional API key (sent as `Authorization: Bearer <key>`; kept only in
    /// memory, never logged).
    pub fn new(settings: OpenAiSettings, api_key: Option<String>) -> Result<Self> {
        settings.validate()?;
        let api_key = api_key.filter(|k| !k.trim().is_empty());
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.connect_timeout.min(settings.timeout))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| {
                LlmError::config("llm.provider", format!("cannot build the HTTP client: {e}"))
            })?;
        // Every field set explicitly: OpenAIConfig::new() would read OPENAI_* variables behind our back.
        let config = OpenAIConfig::new()
            .with_api_base(settings.base_url.trim_end_matches('/'))
            .with_api_key(api_key.clone().unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        let client =
            Client::with_config(config).with_http_service(Transport { http: http.clone() });
        let permits = usize::try_from(settings.max_concurrent).unwrap_or(usize::MAX);
        Ok(OpenAiClient {
            inner: Arc::new(Inner {
                client,
                http,
                limit: Arc::new(Semaphore::new(permits)),
                ladder: Ladder::new(settings.structured_output),
                has_key: api_key.is_some(),
                settings,
            }),
        })
    }

    /// A client from the resolved `[llm]` section; the API key is read through `env` from the variable that
    /// `llm.api_key_env` names (none when that is empty). Errors name the config key at fault.
    pub fn from_config(cfg: &LlmConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        if cfg.model.trim().is_empty() {
            return Err(LlmError::config(
                "llm.model",
                "is empty; name the model the server serves",
            ));
        }
        let api_key = api_key_from(&cfg.api_key_env, env)
            .map_err(|message| LlmError::config("llm.api_key_env", message))?;
        Self::new(OpenAiSettings::from_config(cfg), api_key)
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.inner.settings
    }

    /// How many more requests could start right now without waiting for the concurrency limit.
    pub fn available_permits(&self) -> usize {
        self.inner.limit.available_permits()
    }

    /// The model ids the server lists at `GET /models` (one attempt, no retries): a cheap health check.
    pub async fn models(&self) -> Result<Vec<String>> {
        let settings = &self.inner.settings;
        let mut headers = self.inner.client.config().headers();
        drop_empty_bearer(&mut headers);
        let url = format!("{}/models", settings.base_url);
        let response = self
            .inner
            .http
            .get(&url)
            .headers(headers)
            .send()
            .await
            .map_err(|e| self.transport_error(&e, 1))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| self.transport_error(&e, 1))?;
        if !status.is_success() {
            return Err(LlmError::Server {
                status: status.as_u16(),
                url,
                excerpt: excerpt(&body, EXCERPT_CHARS),
                attempts: 1,
            });
        }
        let value: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| LlmError::Malformed {
                excerpt: format!("{e}; body: {}", excerpt(&body, EXCERPT_CHARS)),
            })?;
        Ok(value["data"]
            .as_array()
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// One chat completion with retries (see [`RetryPolicy`]); logs each attempt.
    pub async fn complete(&self, request: ChatRequest) -> Result<ChatResponse> {
        let started = Instant::now();
        let settings = &self.inner.settings;
        let mut format = self.inner.ladder.format(&request);
        let mut wire = to_wire(&request, format, settings)?;
        let mut fallbacks: u32 = 0;
        let policy = settings.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let permit = self
                .inner
                .limit
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| LlmError::Connection {
                    message: "the concurrency limiter was closed".to_string(),
                    attempts: attempt - 1,
                })?;
            let attempt_started = Instant::now();
            tracing::debug!(
                provider = "openai",
                model = %request.model,
                purpose = %request.purpose,
                attempt,
                format = format.as_str(),
                "LLM attempt"
            );
            let outcome = tokio::time::timeout(
                settings.timeout,
                self.inner
                    .client
                    .chat()
                    .create_byot::<_, CreateChatCompletionResponse>(wire.clone()),
            )
            .await;
            drop(permit);
            let failure = match outcome {
                Ok(Ok(response)) => {
                    let mut response = from_wire(response, started.elapsed(), attempt)?;
                    response.structured_fallbacks = fallbacks;
                    tracing::debug!(
                        provider = "openai",
                        model = %response.model,
                        purpose = %request.purpose,
                        attempt,
                        latency_ms = response.latency.as_millis() as u64,
                        prompt_tokens = response.usage.map(|u| u.prompt_tokens),
                        "LLM call succeeded"
                    );
                    return Ok(response);
                }
                Ok(Err(error)) => classify(error),
                Err(_elapsed) => Failure::Timeout,
            };
            if format != WireFormat::Plain && failure.rejects_format() {
                let error = failure.into_error(settings, attempt);
                match self.inner.ladder.step_down(format, &error.to_string()) {
                    // The same request, at once, in the next format down (bounded: at most two
                    // steps, json_schema → json_object → plain text).
                    Some(next) => {
                        fallbacks += 1;
                        format = next;
                        wire = to_wire(&request, format, settings)?;
                        continue;
                    }
                    // A pinned format: sending the same request again cannot succeed.
                    None => {
                        return Err(given_up(
                            &request,
                            attempt,
                            error,
                            format_args!(
                                "the LLM server rejected structured output (llm.structured_output = {})",
                                settings.structured_output.as_str()
                            ),
                        ));
                    }
                }
            }
            let wait = retry_wait(&policy, &failure, attempt);
            let final_error = failure.into_error(settings, attempt);
            let Some(delay) = wait else {
                return Err(given_up(
                    &request,
                    attempt,
                    final_error,
                    format_args!("LLM call failed"),
                ));
            };
            tracing::warn!(
                provider = "openai",
                model = %request.model,
                purpose = %request.purpose,
                attempt,
                attempt_ms = attempt_started.elapsed().as_millis() as u64,
                delay_ms = delay.as_millis() as u64,
                error = %final_error,
                "LLM attempt failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    fn transport_error(&self, e: &reqwest::Error, attempts: u32) -> LlmError {
        classify_transport(e).into_error(&self.inner.settings, attempts)
    }
}

/// Logs the error a call ends in on attempt `attempt`, with `why` as the line's message, and
/// returns it.
fn given_up(
    request: &ChatRequest,
    attempt: u32,
    error: LlmError,
    why: std::fmt::Arguments<'_>,
) -> LlmError {
    tracing::warn!(
        provider = "openai",
        model = %request.model,
        purpose = %request.purpose,
        attempt,
        error = %error,
        "{why}"
    );
    error
}

impl LlmClient for OpenAiClient {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse>> {
        Box::pin(self.complete(request))
    }

    fn provider(&self) -> &str {
        "openai"
    }
}

/// The API key in the environment variable `var` names (read through `env`): `None` when `var` is
/// empty, an error message when the variable is unset or blank. Shared by every client that takes
/// a key (`[llm]`, `[embedder]`).
pub(crate) fn api_key_from(
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<Option<String>, String> {
    let var = var.trim();
    if var.is_empty() {
        return Ok(None);
    }
    env(var)
        .filter(|k| !k.trim().is_empty())
        .map(Some)
        .ok_or_else(|| {
            format!("environment variable {var} is not set (it should hold the API key)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_checked() {
        for (url, needle) in [
            ("", "is empty"),
            ("not a url", "is not a URL"),
            ("ftp://x/v1", "must start with http"),
        ] {
            match validate_base_url(url) {
                Err(LlmError::Config { key, message }) => {
                    assert_eq!(key, "llm.base_url");
                    assert!(message.contains(needle), "{message}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(validate_base_url("http://127.0.0.1:8089/v1").is_ok());
    }
}
