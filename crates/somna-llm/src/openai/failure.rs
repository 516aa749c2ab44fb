//! Why one attempt failed ([`Failure`]), whether and how long to wait before the next
//! ([`retry_wait`]), and the [`LlmError`] a failure becomes when the call gives up.

use std::time::Duration;

use async_openai::error::OpenAIError;

use super::structured::mentions_response_format;
use super::transport::HttpStatus;
use super::{EXCERPT_CHARS, OpenAiSettings};
use crate::error::{LlmError, excerpt};
use crate::retry::{RetryPolicy, is_retryable_status};

/// Why one attempt failed.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    Timeout,
    Status {
        status: u16,
        excerpt: String,
        retry_after: Option<Duration>,
        /// The body is about the request's `response_format` (see `structured.rs`).
        about_format: bool,
    },
    Refused,
    Connection(String),
    Fatal(LlmError),
}

impl Failure {
    /// The server rejected the request's `response_format`: an error status (not 429 or 408,
    /// which say nothing about the request) whose body names it.
    pub(super) fn rejects_format(&self) -> bool {
        matches!(self, Failure::Status { status, about_format: true, .. } if *status != 429 && *status != 408)
    }

    pub(super) fn into_error(self, settings: &OpenAiSettings, attempts: u32) -> LlmError {
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
pub(super) fn retry_wait(
    policy: &RetryPolicy,
    failure: &Failure,
    attempt: u32,
) -> Option<Duration> {
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
pub(super) fn chat_url(settings: &OpenAiSettings) -> String {
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

/// What an error of async-openai means for the retry loop.
pub(super) fn classify(error: OpenAIError) -> Failure {
    match error {
        OpenAIError::Reqwest(e) => classify_transport(&e),
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpStatus>() {
            Ok(status) => Failure::Status {
                status: status.status,
                excerpt: status.excerpt,
                retry_after: status.retry_after,
                about_format: status.about_format,
            },
            Err(other) => Failure::Connection(error_chain(&*other)),
        },
        OpenAIError::ApiError(api) => Failure::Status {
            status: api.status_code.as_u16(),
            about_format: mentions_response_format(&api.api_error.message),
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

/// What a transport error means for the retry loop.
pub(super) fn classify_transport(e: &reqwest::Error) -> Failure {
    if e.is_timeout() {
        Failure::Timeout
    } else if is_refused(e) {
        Failure::Refused
    } else {
        Failure::Connection(error_chain(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<Duration>) -> Failure {
        Failure::Status {
            status,
            excerpt: String::new(),
            retry_after,
            about_format: false,
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
}
