//! [`OpenAiClient`]: any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp's
//! server) through async-openai, with a per-attempt timeout, bounded retries with backoff, a global
//! concurrency limit shared by all clones, and typed errors.
//!
//! async-openai's own client retries 429/5xx/connect errors up to three times inside every call, which would
//! hide attempts from us. So the client is given its own transport (a tower service, via async-openai's
//! `middleware` feature) that does no retrying, turns every non-2xx answer into a typed status error (keeping
//! `Retry-After`), and drops the `Authorization` header when no key is configured. The retry loop here counts
//! and bounds attempts itself.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::{Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionCall, FunctionObject,
};
use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, RETRY_AFTER};
use somna_core::config::{LlmConfig, ToolSpec};
use somna_core::{Role, ToolCall};
use tokio::sync::Semaphore;

use crate::client::LlmClient;
use crate::error::{LlmError, Result, excerpt};
use crate::retry::{RetryPolicy, is_retryable_status, parse_retry_after};
use crate::types::{ChatMessage, ChatRequest, ChatResponse, Usage};

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
        let var = cfg.api_key_env.trim();
        let api_key = if var.is_empty() {
            None
        } else {
            match env(var).filter(|k| !k.trim().is_empty()) {
                Some(key) => Some(key),
                None => {
                    return Err(LlmError::config(
                        "llm.api_key_env",
                        format!(
                            "environment variable {var} is not set (it should hold the API key)"
                        ),
                    ));
                }
            }
        };
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
        let wire = to_wire(&request)?;
        let settings = &self.inner.settings;
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
                "LLM attempt"
            );
            let outcome = tokio::time::timeout(
                settings.timeout,
                self.inner.client.chat().create(wire.clone()),
            )
            .await;
            drop(permit);
            let failure = match outcome {
                Ok(Ok(response)) => {
                    let response = from_wire(response, started.elapsed(), attempt)?;
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
                Ok(Err(error)) => self.classify(error),
                Err(_elapsed) => Failure::Timeout,
            };
            let wait = retry_wait(&policy, &failure, attempt);
            let final_error = failure.into_error(settings, attempt);
            let Some(delay) = wait else {
                tracing::warn!(
                    provider = "openai",
                    model = %request.model,
                    purpose = %request.purpose,
                    attempt,
                    error = %final_error,
                    "LLM call failed"
                );
                return Err(final_error);
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

    fn classify(&self, error: OpenAIError) -> Failure {
        match error {
            OpenAIError::Reqwest(e) => self.classify_transport(&e),
            OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpStatus>() {
                Ok(status) => Failure::Status {
                    status: status.status,
                    excerpt: status.excerpt,
                    retry_after: status.retry_after,
                },
                Err(other) => Failure::Connection(error_chain(&*other)),
            },
            OpenAIError::ApiError(api) => Failure::Status {
                status: api.status_code.as_u16(),
                excerpt: excerpt(&api.api_error.message, EXCERPT_CHARS),
                retry_after: None,
            },
            OpenAIError::JSONDeserialize(e, body) => Failure::Fatal(LlmError::Malformed {
                excerpt: format!("{e}; body: {}", excerpt(&body, EXCERPT_CHARS)),
            }),
            OpenAIError::InvalidArgument(message) => {
                Failure::Fatal(LlmError::config("request", message))
            }
            other => Failure::Connection(error_chain(&other)),
        }
    }

    fn classify_transport(&self, e: &reqwest::Error) -> Failure {
        if e.is_timeout() {
            Failure::Timeout
        } else if is_refused(e) {
            Failure::Refused
        } else {
            Failure::Connection(error_chain(e))
        }
    }

    fn transport_error(&self, e: &reqwest::Error, attempts: u32) -> LlmError {
        self.classify_transport(e)
            .into_error(&self.inner.settings, attempts)
    }
}

impl LlmClient for OpenAiClient {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse>> {
        Box::pin(self.complete(request))
    }

    fn provider(&self) -> &str {
        "openai"
    }
}

/// Why one attempt failed.
#[derive(Debug, Clone)]
enum Failure {
    Timeout,
    Status {
        status: u16,
        excerpt: String,
        retry_after: Option<Duration>,
    },
    Refused,
    Connection(String),
    Fatal(LlmError),
}

impl Failure {
    fn into_error(self, settings: &OpenAiSettings, attempts: u32) -> LlmError {
        match self {
            Failure::Timeout => LlmError::Timeout {
                after: settings.timeout,
                attempts,
            },
            Failure::Status {
                status: 429,
                retry_after,
                ..
            } => LlmError::RateLimited {
                retry_after,
                attempts,
            },
            Failure::Status {
                status, excerpt, ..
            } => LlmError::Server {
                status,
                url: chat_url(settings),
                excerpt,
                attempts,
            },
            Failure::Refused => LlmError::ConnectionRefused {
                url: settings.base_url.clone(),
                attempts,
            },
            Failure::Connection(message) => LlmError::Connection { message, attempts },
            Failure::Fatal(e) => e,
        }
    }
}

/// The wait before the next attempt after attempt number `attempt` failed with `failure`, or `None`
/// when the call gives up: the failure is not retryable, or the retries are used up.
fn retry_wait(policy: &RetryPolicy, failure: &Failure, attempt: u32) -> Option<Duration> {
    let retryable = match failure {
        Failure::Timeout => policy.retry_timeouts,
        Failure::Fatal(_) => false,
        Failure::Status { status, .. } => is_retryable_status(*status),
        Failure::Refused | Failure::Connection(_) => true,
    };
    if !retryable || attempt > policy.max_retries {
        return None;
    }
    let retry_after = match failure {
        Failure::Status { retry_after, .. } => *retry_after,
        _ => None,
    };
    Some(policy.delay(attempt, retry_after))
}

/// The URL chat completions go to (what async-openai appends to the base URL).
fn chat_url(settings: &OpenAiSettings) -> String {
    format!(
        "{}/chat/completions",
        settings.base_url.trim_end_matches('/')
    )
}

fn is_refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = err.source();
    }
    false
}

/// An error and its sources, joined with `: ` (reqwest's own message alone rarely says what happened).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(err) = source {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = err.source();
    }
    parts.join(": ")
}

/// A non-2xx answer, carried through async-openai as `OpenAIError::Boxed`.
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {excerpt}")]
struct HttpStatus {
    status: u16,
    excerpt: String,
    retry_after: Option<Duration>,
}

/// The transport async-openai sends through: one HTTP exchange, no retries.
#[derive(Clone)]
struct Transport {
    http: reqwest::Client,
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let mut request = factory.build().await?;
            drop_empty_bearer(request.headers_mut());
            let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let body = response.text().await.map_err(OpenAIError::Reqwest)?;
            Err(OpenAIError::Boxed(Box::new(HttpStatus {
                status: status.as_u16(),
                excerpt: excerpt(&body, EXCERPT_CHARS),
                retry_after,
            })))
        })
    }
}

/// async-openai always sends `Authorization: Bearer <key>`; with no key that is an empty bearer, which
/// some servers reject. Leave the header out instead.
fn drop_empty_bearer(headers: &mut reqwest::header::HeaderMap) {
    if headers.get(AUTHORIZATION).is_some_and(|v| {
        v.as_bytes()
            .strip_prefix(b"Bearer")
            .is_some_and(|k| k.trim_ascii().is_empty())
    }) {
        headers.remove(AUTHORIZATION);
    }
}

/// OpenAI allows names of `[A-Za-z0-9_-]{1,64}`; anything else becomes `_`.
fn wire_name(name: &Option<String>) -> Option<String> {
    let name = name.as_deref()?.trim();
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    (!cleaned.is_empty()).then_some(cleaned)
}

fn to_wire_message(m: &ChatMessage) -> ChatCompletionRequestMessage {
    match m.role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(m.content.clone()),
            name: wire_name(&m.name),
        }),
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(m.content.clone()),
            name: wire_name(&m.name),
        }),
        Role::Assistant => {
            let tool_calls: Vec<ChatCompletionMessageToolCalls> = m
                .tool_calls
                .iter()
                .map(|c| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: c.id.clone(),
                        function: FunctionCall {
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        },
                    })
                })
                .collect();
            #[allow(deprecated)]
            let message = ChatCompletionRequestAssistantMessage {
                content: (!m.content.is_empty() || tool_calls.is_empty())
                    .then(|| ChatCompletionRequestAssistantMessageContent::Text(m.content.clone())),
                name: wire_name(&m.name),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..Default::default()
            };
            ChatCompletionRequestMessage::Assistant(message)
        }
        Role::Tool => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(m.content.clone()),
            tool_call_id: m.tool_call_id.clone().unwrap_or_default(),
        }),
    }
}

fn to_wire_tool(tool: &ToolSpec) -> Result<ChatCompletionTools> {
    let parameters: serde_json::Value = serde_json::from_str(&tool.parameters).map_err(|e| {
        LlmError::config(
            format!("tools.{}.parameters", tool.name),
            format!("is not valid JSON: {e}"),
        )
    })?;
    Ok(ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: tool.name.clone(),
            description: (!tool.description.is_empty()).then(|| tool.description.clone()),
            parameters: Some(parameters),
            strict: None,
        },
    }))
}

/// The wire request. `max_tokens` (not `max_completion_tokens`) because local servers such as
/// llama.cpp's only know the older field.
fn to_wire(request: &ChatRequest) -> Result<CreateChatCompletionRequest> {
    let tools = request
        .tools
        .iter()
        .map(to_wire_tool)
        .collect::<Result<Vec<_>>>()?;
    #[allow(deprecated)]
    let wire = CreateChatCompletionRequest {
        model: request.model.clone(),
        messages: request.messages.iter().map(to_wire_message).collect(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        tools: (!tools.is_empty()).then_some(tools),
        ..Default::default()
    };
    Ok(wire)
}

fn from_wire(
    response: CreateChatCompletionResponse,
    latency: Duration,
    attempts: u32,
) -> Result<ChatResponse> {
    let usage = response.usage.as_ref().map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
    });
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(LlmError::EmptyResponse);
    };
    let message = choice.message;
    let tool_calls: Vec<ToolCall> = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(c) => ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            },
            ChatCompletionMessageToolCalls::Custom(c) => ToolCall {
                id: c.id,
                name: c.custom_tool.name,
                arguments: c.custom_tool.input,
            },
        })
        .collect();
    let text = match message.content {
        Some(text) if !text.trim().is_empty() => text,
        _ => message.refusal.unwrap_or_default(),
    };
    if text.trim().is_empty() && tool_calls.is_empty() {
        return Err(LlmError::EmptyResponse);
    }
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        latency,
        attempts,
        model: response.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<Duration>) -> Failure {
        Failure::Status {
            status,
            excerpt: String::new(),
            retry_after,
        }
    }

    #[test]
    fn waits_honour_retry_after_capped_and_give_up_on_permanent_statuses() {
        let policy = RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
            jitter: 0.0,
            retry_timeouts: false,
        };
        let wait = |f: &Failure, attempt| retry_wait(&policy, f, attempt);
        // 429 waits what the server asked, up to max_retry_after; without a header, exponentially.
        let limited = status(429, Some(Duration::from_secs(1)));
        assert_eq!(wait(&limited, 1), Some(Duration::from_secs(1)));
        let greedy = status(429, Some(Duration::from_secs(3600)));
        assert_eq!(wait(&greedy, 1), Some(Duration::from_secs(5)));
        assert_eq!(wait(&status(503, None), 2), Some(Duration::from_millis(20)));
        // The retries run out.
        assert_eq!(wait(&status(503, None), 3), None);
        // Permanent statuses and fatal errors are never retried; timeouts only when asked.
        for code in [400, 401, 403, 404] {
            assert_eq!(wait(&status(code, None), 1), None, "{code}");
        }
        assert_eq!(wait(&Failure::Fatal(LlmError::EmptyResponse), 1), None);
        assert_eq!(wait(&Failure::Timeout, 1), None);
        let patient = RetryPolicy {
            retry_timeouts: true,
            ..policy
        };
        assert_eq!(
            retry_wait(&patient, &Failure::Timeout, 1),
            Some(Duration::from_millis(10))
        );
        assert_eq!(wait(&Failure::Refused, 1), Some(Duration::from_millis(10)));
    }

    #[test]
    fn names_are_made_wire_safe() {
        assert_eq!(
            wire_name(&Some("Mara Fenwick".into())).as_deref(),
            Some("Mara_Fenwick")
        );
        assert_eq!(
            wire_name(&Some("ok_name-1".into())).as_deref(),
            Some("ok_name-1")
        );
        assert_eq!(wire_name(&Some("  ".into())), None);
        assert_eq!(wire_name(&None), None);
        assert_eq!(wire_name(&Some("x".repeat(100))).map(|n| n.len()), Some(64));
    }

    #[test]
    fn wire_request_carries_tools_and_messages() {
        let request = ChatRequest::new(
            "m",
            vec![
                ChatMessage::system("s"),
                ChatMessage::assistant_calls(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "journal_add".into(),
                        arguments: "{}".into(),
                    }],
                ),
                ChatMessage::tool_result("c1", "ok"),
            ],
        )
        .with_max_tokens(7)
        .with_tools(vec![ToolSpec {
            name: "journal_add".into(),
            description: "Write a note".into(),
            parameters: r#"{"type":"object"}"#.into(),
        }]);
        let json = serde_json::to_value(to_wire(&request).unwrap()).unwrap();
        assert_eq!(json["max_tokens"], 7);
        assert_eq!(json["tools"][0]["type"], "function");
        assert_eq!(json["tools"][0]["function"]["name"], "journal_add");
        assert_eq!(json["messages"][1]["tool_calls"][0]["id"], "c1");
        assert!(json["messages"][1].get("content").is_none());
        assert_eq!(json["messages"][2]["tool_call_id"], "c1");

        let bad = ChatRequest::new("m", vec![]).with_tools(vec![ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: "{".into(),
        }]);
        match to_wire(&bad) {
            Err(LlmError::Config { key, .. }) => assert_eq!(key, "tools.t.parameters"),
            other => panic!("unexpected {other:?}"),
        }
    }

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

    #[test]
    fn empty_bearer_is_dropped() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(AUTHORIZATION, "Bearer ".parse().unwrap());
        drop_empty_bearer(&mut headers);
        assert!(headers.get(AUTHORIZATION).is_none());
        headers.insert(AUTHORIZATION, "Bearer sk-1".parse().unwrap());
        drop_empty_bearer(&mut headers);
        assert!(headers.get(AUTHORIZATION).is_some());
    }
}
