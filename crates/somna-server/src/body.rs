//! Request bodies: reading them under the size limit and parsing them as JSON with errors that name
//! the offending field.
//!
//! Bodies are read by hand rather than with actix-web's `Json` extractor, so that every failure is an
//! [`ApiError`] with a stable code: 413 `payload_too_large` past the limit, 400 `bad_json` with the
//! parser's message for text that is not JSON, 422 `invalid_body` (or `invalid_config` for config
//! bodies) with the field's path for JSON of the wrong shape. The `Content-Type` is not checked, so
//! that clients that forget to set it (a plain `urllib` POST) still work.

use actix_web::HttpRequest;
use actix_web::http::header;
use actix_web::web::{self, Bytes, BytesMut};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::error::{ApiError, ErrorCode, FieldError};

/// The default body limit: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// How much of an oversized body is read and thrown away before the 413 is sent, so that a client
/// still writing its body sees the answer instead of a reset connection. Past this the connection is
/// simply closed after the answer.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// How long a refused body may pause before the 413 is sent without reading the rest.
const DRAIN_IDLE: std::time::Duration = std::time::Duration::from_millis(250);

/// The default of how long a whole body may take to arrive (a guard against clients that trickle
/// bytes).
pub const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a body is, which decides the code of a shape error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    /// Any body: shape errors are `invalid_body`.
    Plain,
    /// A body that holds a config change at the path `at` (`""`: the whole body): shape errors
    /// at or under `at` are `invalid_config`, others `invalid_body`.
    Config {
        /// Where the config sits in the body.
        at: &'static str,
    },
}

impl BodyKind {
    fn code_for(self, path: &str) -> ErrorCode {
        match self {
            BodyKind::Config { at }
                if at.is_empty()
                    || path == at
                    || path
                        .strip_prefix(at)
                        .is_some_and(|rest| rest.starts_with('.')) =>
            {
                ErrorCode::InvalidConfig
            }
            _ => ErrorCode::InvalidBody,
        }
    }
}

/// Reads the whole body: at most `limits.max_bytes`, within `limits.timeout`. A body whose
/// declared `Content-Length` is over the limit is refused without waiting for it (a client that
/// declares 10 MB and sends it slowly gets its 413 at once, not a 408 after the body timeout);
/// what of it is already flowing is drained first.
pub(crate) async fn read_body(
    req: &HttpRequest,
    payload: web::Payload,
    limits: BodyLimits,
) -> Result<Bytes, ApiError> {
    if declared_length(req).is_some_and(|n| n > limits.max_bytes as u64) {
        // The drain is bounded by the body timeout too, against a body that trickles forever.
        let _ = tokio::time::timeout(limits.timeout, drain_while_flowing(payload)).await;
        return Err(too_large(limits.max_bytes));
    }
    tokio::time::timeout(limits.timeout, read_limited(req, payload, limits.max_bytes))
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {}",
                    humantime::format_duration(limits.timeout)
                ),
            ))
        })
}

/// How large a body may be and how long it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyLimits {
    /// Bodies larger than this are refused with 413.
    pub(crate) max_bytes: usize,
    /// Bodies that take longer are refused with 408.
    pub(crate) timeout: std::time::Duration,
}

/// Reads and throws away a refused body for as long as it keeps flowing (each chunk within
/// [`DRAIN_IDLE`] of the last, at most [`DRAIN_LIMIT`] bytes), so that a client still writing it
/// sees the answer instead of a reset connection, while a client that declared a large body and
/// does not send it gets its answer after one idle period, not after the body timeout.
async fn drain_while_flowing(mut payload: web::Payload) {
    let mut drained = 0usize;
    while drained <= DRAIN_LIMIT {
        match tokio::time::timeout(DRAIN_IDLE, payload.next()).await {
            Ok(Some(Ok(chunk))) => drained = drained.saturating_add(chunk.len()),
            Ok(Some(Err(_)) | None) | Err(_) => return,
        }
    }
}

/// The 413 for a body over `limit` bytes.
fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request body is larger than the limit of {limit} bytes"),
    )
}

/// The body length the client declared in `Content-Length`, if it did.
fn declared_length(req: &HttpRequest) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

async fn read_limited(
    req: &HttpRequest,
    mut payload: web::Payload,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = declared_length(req);
    let mut body = BytesMut::with_capacity(
        declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit)),
    );
    let mut oversized = false;
    let mut drained = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
        if oversized {
            drained = drained.saturating_add(chunk.len());
            if drained > DRAIN_LIMIT {
                break;
            }
            continue;
        }
        if body.len() + chunk.len() > limit {
            oversized = true;
            drained = body.len() + chunk.len();
            body.clear();
            continue;
        }
        body.extend_from_slice(&chunk);
    }
    if oversized {
        return Err(too_large(limit));
    }
    Ok(body.freeze())
}

/// Parses `bytes` as a `T`. An empty (or all-whitespace) body is `empty_default` when given.
pub(crate) fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    kind: BodyKind,
    empty_default: Option<T>,
) -> Result<T, ApiError> {
    if let Some(default) = empty_default
        && bytes.iter().all(u8::is_ascii_whitespace)
    {
        return Ok(default);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = match serde_path_to_error::deserialize(&mut de) {
        Ok(value) => value,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            return Err(json_error(&inner, &path, kind));
        }
    };
    de.end()
        .map_err(|e| ApiError::new(ErrorCode::BadJson, format!("invalid JSON: {e}")))?;
    Ok(value)
}

fn json_error(e: &serde_json::Error, path: &str, kind: BodyKind) -> ApiError {
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::new(ErrorCode::BadJson, format!("invalid JSON: {e}"))
        }
        Category::Data => {
            let field = if path == "." {
                String::new()
            } else {
                path.to_string()
            };
            let message = strip_position(&e.to_string());
            let code = kind.code_for(&field);
            let summary = if field.is_empty() {
                message.clone()
            } else {
                format!("{field}: {message}")
            };
            ApiError::new(code, summary).with_fields(vec![FieldError { field, message }])
        }
    }
}

/// Removes serde_json's ` at line 1 column 42` suffix (the field's path says more).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) if message[i..].contains(" column ") => message[..i].to_string(),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default)]
        force: bool,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
    }

    fn parse(text: &str) -> Result<Body, ApiError> {
        parse_json(text.as_bytes(), BodyKind::Plain, Some(Body::default()))
    }

    #[test]
    fn syntax_errors_are_bad_json_with_the_parsers_message() {
        let e = parse("{\"force\": tru").unwrap_err();
        assert_eq!(e.code, ErrorCode::BadJson);
        assert!(e.message.contains("line 1 column"), "{}", e.message);
        let e = parse("{} trailing").unwrap_err();
        assert_eq!(e.code, ErrorCode::BadJson);
    }

    #[test]
    fn shape_errors_name_the_field() {
        let e = parse(r#"{"inner": {"n": "x"}}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidBody);
        assert_eq!(e.fields[0].field, "inner.n");
        assert!(!e.fields[0].message.contains("line 1"), "{:?}", e.fields);
        let e = parse(r#"{"forse": true}"#).unwrap_err();
        assert_eq!(e.fields[0].field, "forse");
        let e = parse_json::<Body>(b"\"text\"", BodyKind::Config { at: "" }, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidConfig);
        assert_eq!(e.fields[0].field, "");
        let nested = BodyKind::Config { at: "inner" };
        let e = parse_json::<Body>(br#"{"inner": {"n": -1}}"#, nested, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidConfig);
        let e = parse_json::<Body>(br#"{"force": 1}"#, nested, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidBody);
    }

    #[test]
    fn empty_bodies_take_the_default_when_there_is_one() {
        assert_eq!(parse("  \n").unwrap(), Body::default());
        let e = parse_json::<Body>(b"", BodyKind::Plain, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadJson);
    }
}
