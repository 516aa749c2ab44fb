//! The transport async-openai sends through ([`Transport`], via its `middleware` feature): one HTTP
//! exchange, no retries; a non-2xx answer comes back as a typed [`HttpStatus`] (keeping
//! `Retry-After`), and an empty bearer is left out.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use reqwest::header::{AUTHORIZATION, RETRY_AFTER};

use super::EXCERPT_CHARS;
use super::structured::mentions_response_format;
use crate::error::excerpt;
use crate::retry::parse_retry_after;

/// A non-2xx answer, carried through async-openai as `OpenAIError::Boxed`.
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {excerpt}")]
pub(super) struct HttpStatus {
    pub(super) status: u16,
    pub(super) excerpt: String,
    pub(super) retry_after: Option<Duration>,
    /// The whole body (not only the excerpt) names the request's `response_format`.
    pub(super) about_format: bool,
}

/// The transport async-openai sends through: one HTTP exchange, no retries.
#[derive(Clone)]
pub(super) struct Transport {
    pub(super) http: reqwest::Client,
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
                about_format: mentions_response_format(&body),
            })))
        })
    }
}

/// async-openai always sends `Authorization: Bearer <key>`; with no key that is an empty bearer, which
/// some servers reject. Leave the header out instead.
pub(super) fn drop_empty_bearer(headers: &mut reqwest::header::HeaderMap) {
    if headers.get(AUTHORIZATION).is_some_and(|v| {
        v.as_bytes()
            .strip_prefix(b"Bearer")
            .is_some_and(|k| k.trim_ascii().is_empty())
    }) {
        headers.remove(AUTHORIZATION);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
