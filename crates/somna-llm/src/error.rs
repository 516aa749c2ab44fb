//! Typed errors of every LLM call.

use std::time::Duration;

/// A `Result` whose error is [`LlmError`].
pub type Result<T, E = LlmError> = std::result::Result<T, E>;

/// Why an LLM call failed. Every variant that involves the network says how many attempts were made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The server did not answer within the request timeout.
    #[error("LLM request timed out after {after:?} ({attempts} attempt(s))")]
    Timeout {
        /// The per-attempt timeout that expired.
        after: Duration,
        /// Attempts made, the timed-out one included.
        attempts: u32,
    },
    /// The server kept answering 429 until the retries ran out.
    #[error("LLM server rate-limited the request {attempts} times{}", fmt_retry_after(*.retry_after))]
    RateLimited {
        /// The server's last `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered with an error status (5xx after the retries ran out, or a 4xx at once).
    #[error("LLM server answered HTTP {status} for {url} after {attempts} attempt(s): {excerpt}")]
    Server {
        /// The HTTP status code.
        status: u16,
        /// The URL the request went to (a 404 usually means a wrong `llm.base_url`).
        url: String,
        /// The start of the response body.
        excerpt: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered 200 with a body that is not a chat completion.
    #[error("LLM server sent a malformed response: {excerpt}")]
    Malformed {
        /// What was wrong, and the start of the body.
        excerpt: String,
    },
    /// The server answered with neither text nor tool calls.
    #[error("LLM server sent an empty response (no text and no tool calls)")]
    EmptyResponse,
    /// Nothing listens at the server's address.
    #[error(
        "connection to the LLM server at {url} was refused after {attempts} attempt(s) (is it running?)"
    )]
    ConnectionRefused {
        /// The base URL that refused.
        url: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The connection failed or was dropped before a complete response arrived.
    #[error("connection to the LLM server failed after {attempts} attempt(s): {message}")]
    Connection {
        /// The transport's description of the failure.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The configuration cannot work; `key` names the setting (e.g. `llm.api_key_env`).
    #[error("invalid LLM config {key}: {message}")]
    Config {
        /// The config key at fault, e.g. `llm.base_url`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

fn fmt_retry_after(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (last Retry-After: {d:?})"),
        None => String::new(),
    }
}

impl LlmError {
    /// Every [`LlmError::kind`], in declaration order: the closed set of names a metrics label
    /// can take.
    pub const KINDS: [&'static str; 8] = [
        "timeout",
        "rate_limited",
        "server",
        "malformed",
        "empty_response",
        "connection_refused",
        "connection",
        "config",
    ];

    /// A short stable name of the variant, for metrics labels and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Timeout { .. } => "timeout",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Server { .. } => "server",
            LlmError::Malformed { .. } => "malformed",
            LlmError::EmptyResponse => "empty_response",
            LlmError::ConnectionRefused { .. } => "connection_refused",
            LlmError::Connection { .. } => "connection",
            LlmError::Config { .. } => "config",
        }
    }

    /// How many attempts were made before giving up (1 for errors that are never retried).
    pub fn attempts(&self) -> u32 {
        match self {
            LlmError::Timeout { attempts, .. }
            | LlmError::RateLimited { attempts, .. }
            | LlmError::Server { attempts, .. }
            | LlmError::ConnectionRefused { attempts, .. }
            | LlmError::Connection { attempts, .. } => *attempts,
            LlmError::Malformed { .. } | LlmError::EmptyResponse => 1,
            LlmError::Config { .. } => 0,
        }
    }

    /// True when sending the same request again cannot succeed: a 4xx other than 408 and 429 (a bad
    /// request, a bad key, no access, a wrong URL or model) or a config error. A chat turn that
    /// fails with one gives up at once instead of retrying.
    pub fn is_permanent(&self) -> bool {
        match self {
            LlmError::Server { status, .. } => {
                (400..500).contains(status) && !crate::retry::is_retryable_status(*status)
            }
            LlmError::Config { .. } => true,
            _ => false,
        }
    }

    /// A config error naming `key`.
    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Self {
        LlmError::Config {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The first `max` characters of `text` on one line, with `…` when cut. Used for error excerpts.
pub fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variant's position in the declaration; fails to compile when a variant is added, as a
    /// reminder to add it to [`LlmError::KINDS`] and to the test below.
    fn variant(e: &LlmError) -> usize {
        match e {
            LlmError::Timeout { .. } => 0,
            LlmError::RateLimited { .. } => 1,
            LlmError::Server { .. } => 2,
            LlmError::Malformed { .. } => 3,
            LlmError::EmptyResponse => 4,
            LlmError::ConnectionRefused { .. } => 5,
            LlmError::Connection { .. } => 6,
            LlmError::Config { .. } => 7,
        }
    }

    #[test]
    fn kinds_lists_every_kind_in_order() {
        let (text, attempts) = (String::from("x"), 1);
        let every = [
            LlmError::Timeout {
                after: Duration::from_secs(1),
                attempts,
            },
            LlmError::RateLimited {
                retry_after: None,
                attempts,
            },
            LlmError::Server {
                status: 500,
                url: text.clone(),
                excerpt: text.clone(),
                attempts,
            },
            LlmError::Malformed {
                excerpt: text.clone(),
            },
            LlmError::EmptyResponse,
            LlmError::ConnectionRefused {
                url: text.clone(),
                attempts,
            },
            LlmError::Connection {
                message: text.clone(),
                attempts,
            },
            LlmError::config("k", text),
        ];
        assert_eq!(every.len(), LlmError::KINDS.len());
        for (i, e) in every.iter().enumerate() {
            assert_eq!(variant(e), i);
            assert_eq!(e.kind(), LlmError::KINDS[i]);
        }
    }

    #[test]
    fn messages_name_what_is_wrong() {
        let e = LlmError::config(
            "llm.api_key_env",
            "environment variable OPENAI_KEY is not set",
        );
        assert_eq!(
            e.to_string(),
            "invalid LLM config llm.api_key_env: environment variable OPENAI_KEY is not set"
        );
        let e = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(2)),
            attempts: 3,
        };
        assert_eq!(
            e.to_string(),
            "LLM server rate-limited the request 3 times (last Retry-After: 2s)"
        );
        assert_eq!(e.kind(), "rate_limited");
        assert_eq!(e.attempts(), 3);
        let e = LlmError::Server {
            status: 404,
            url: "http://127.0.0.1:8089/v1/chat/completions".into(),
            excerpt: "not found".into(),
            attempts: 1,
        };
        assert_eq!(
            e.to_string(),
            "LLM server answered HTTP 404 for http://127.0.0.1:8089/v1/chat/completions after 1 \
attempt(s): not found"
        );
    }

    #[test]
    fn permanent_errors_are_4xx_but_408_and_429_and_config() {
        let server = |status| LlmError::Server {
            status,
            url: String::new(),
            excerpt: String::new(),
            attempts: 1,
        };
        for status in [400, 401, 403, 404, 422] {
            assert!(server(status).is_permanent(), "{status}");
        }
        for status in [408, 429, 500, 502, 503] {
            assert!(!server(status).is_permanent(), "{status}");
        }
        assert!(LlmError::config("llm.model", "is empty").is_permanent());
        assert!(!LlmError::EmptyResponse.is_permanent());
        assert!(
            !LlmError::Timeout {
                after: Duration::from_secs(1),
                attempts: 1
            }
            .is_permanent()
        );
    }

    #[test]
    fn excerpt_cuts_on_char_boundaries_and_flattens() {
        assert_eq!(excerpt("héllo\nwörld", 7), "héllo w…");
        assert_eq!(excerpt("  short  ", 80), "short");
        assert_eq!(excerpt("", 5), "");
    }
}
