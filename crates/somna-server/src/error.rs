//! Errors: [`ServerError`] (the server could not start or stopped abnormally) and [`ApiError`], the
//! JSON error every failed request answers with, with its stable [`ErrorCode`].
//!
//! Every error body has the shape `{"error": {"code": "...", "message": "...", "fields": [...]}}`;
//! `fields` is present only when specific values of the request were at fault (a config key, a
//! body field).

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use somna_core::config::ConfigErrors;
use somna_runtime::RuntimeError;
use somna_runtime::agent::ConfigureError;
use somna_runtime::protocol::InboundError;
use somna_store::StoreError;
use utoipa::ToSchema;

/// Why the server could not start, or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address is not on the loopback interface and no bearer token was given.
    #[error(
        "refusing to bind {0}: a non-loopback address needs a bearer token (set SOMNA_API_TOKEN)"
    )]
    TokenRequired(std::net::SocketAddr),
    /// The token is unusable (empty or with whitespace or control characters).
    #[error("invalid API token: {0}")]
    InvalidToken(String),
    /// An option has a value the server cannot work with.
    #[error("invalid server option {name}: {message}")]
    InvalidOption {
        /// The option (or environment variable) at fault.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// Binding or serving failed.
    #[error("cannot serve on {addr}: {source}")]
    Io {
        /// The address the server tried to bind.
        addr: std::net::SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The result type of starting and running the server.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

somna_core::str_enum! {
    /// The stable error codes of the API, named as they appear in error bodies and metrics
    /// labels. A host program matches on these, never on messages.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum ErrorCode as "error code" {
        /// 400: a bad query parameter, an unreadable body, a bad cursor.
        BadRequest = "bad_request",
        /// 400: the body is not JSON; the message is the parser's.
        BadJson = "bad_json",
        /// 400: an agent id that is not 1–64 characters of `[A-Za-z0-9_.-]`.
        InvalidAgentId = "invalid_agent_id",
        /// 401: a missing or wrong bearer token.
        Unauthorized = "unauthorized",
        /// 403: a scoped token asked for what it does not reach (another agent, a write with a
        /// read token, the metrics, token management); the message names the token's scope.
        Forbidden = "forbidden",
        /// 408: the request body did not arrive in time.
        RequestTimeout = "request_timeout",
        /// 404: no agent with that id.
        UnknownAgent = "unknown_agent",
        /// 404: the agent is not waiting for a tool call with that id.
        UnknownToolCall = "unknown_tool_call",
        /// 404: the agent's history has no summary with that seq (or it cannot be undone).
        UnknownSummary = "unknown_summary",
        /// 404: no API token with that name.
        UnknownToken = "unknown_token",
        /// 404: no such endpoint.
        NotFound = "not_found",
        /// 405: the endpoint exists but not with this method.
        MethodNotAllowed = "method_not_allowed",
        /// 409: an agent with that id exists (or existed and was retired: ids are never reused).
        AgentExists = "agent_exists",
        /// 409: the agent cannot take the command now (too many commands wait behind its job in
        /// flight, it is stopping, or an uncompact meets a compaction or sleep); try again shortly.
        Busy = "busy",
        /// 409: on a cluster, another node runs the agent; the message names it (send the
        /// command there), or says its shard is changing hands.
        NotHosted = "not_hosted",
        /// 409: an API token with that name exists (revoke it first, or pick another name).
        TokenExists = "token_exists",
        /// 410: the agent was retired (deleted); its data can still be read.
        AgentRetired = "agent_retired",
        /// 413: the body is larger than the limit.
        PayloadTooLarge = "payload_too_large",
        /// 422: JSON of the wrong shape (a missing field, a wrong type, an unknown field).
        InvalidBody = "invalid_body",
        /// 422: a config change that does not validate; `fields` names each key.
        InvalidConfig = "invalid_config",
        /// 422: input the agent refuses (empty content).
        InvalidInput = "invalid_input",
        /// 500: a real internal failure (the store's IO).
        Internal = "internal",
        /// 503: the agent does not answer (stopped or overloaded).
        Unavailable = "unavailable",
        /// 503: the runtime is shutting down.
        ShuttingDown = "shutting_down",
        /// 413: input larger than the agent's `compaction.max_input_tokens`; the message names the
        /// limit and the input's size, and nothing was written.
        InputTooLarge = "input_too_large",
    }
}

impl ErrorCode {
    /// The HTTP status that goes with the code.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest | ErrorCode::BadJson | ErrorCode::InvalidAgentId => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::UnknownAgent
            | ErrorCode::UnknownToolCall
            | ErrorCode::UnknownSummary
            | ErrorCode::UnknownToken
            | ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::AgentExists
            | ErrorCode::Busy
            | ErrorCode::NotHosted
            | ErrorCode::TokenExists => StatusCode::CONFLICT,
            ErrorCode::AgentRetired => StatusCode::GONE,
            ErrorCode::PayloadTooLarge | ErrorCode::InputTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidBody | ErrorCode::InvalidConfig | ErrorCode::InvalidInput => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Unavailable | ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// One value of the request that was at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// Where the value is: its path in the JSON body (`config.compaction.emergency_threshold`) or
    /// the query parameter's name.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// A failed request: what the API answers, as `{"error": {...}}` with the code's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The stable code.
    pub code: ErrorCode,
    /// A readable explanation, without a trailing period.
    pub message: String,
    /// The values at fault, when known.
    pub fields: Vec<FieldError>,
}

/// The refusals of the token check, 401 and 403: part of the responses of every operation that
/// a token guards and a scoped token can be refused. Described, never built.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum Denied {
    /// `unauthorized`: the bearer token is missing or wrong
    #[response(status = 401)]
    Unauthorized(ErrorBody<'static>),
    /// `forbidden`: a scoped token that does not reach this (another tenant's agent, a command
    /// with a read-only token, the metrics, token management)
    #[response(status = 403)]
    Forbidden(ErrorBody<'static>),
}

/// The errors of a read of an agent's stored data (history, archive, journal, facts, events): the
/// responses of its OpenAPI operations, with [`Denied`]. Described, never built: handlers answer
/// [`ApiError`]s.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ReadErrors {
    /// `invalid_agent_id`; `bad_request`: an unknown, repeated or bad query parameter
    #[response(status = 400)]
    BadRequest(ErrorBody<'static>),
    /// `unknown_agent`: no agent with that id
    #[response(status = 404)]
    UnknownAgent(ErrorBody<'static>),
    /// `internal`: the store failed
    #[response(status = 500)]
    Internal(ErrorBody<'static>),
}

/// The errors of a parameterless read of a hosted agent (its status, its config): the responses
/// of their OpenAPI operations, with [`Denied`]. Described, never built.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum StatusErrors {
    /// `invalid_agent_id`; `bad_request`: a query parameter (it takes none)
    #[response(status = 400)]
    BadRequest(ErrorBody<'static>),
    /// `unknown_agent`: no agent with that id
    #[response(status = 404)]
    UnknownAgent(ErrorBody<'static>),
    /// `agent_retired`: the agent was retired (its data can still be read)
    #[response(status = 410)]
    Retired(ErrorBody<'static>),
    /// `internal`: the store failed
    #[response(status = 500)]
    Internal(ErrorBody<'static>),
    /// `unavailable`: the agent does not answer; `shutting_down`
    #[response(status = 503)]
    Unavailable(ErrorBody<'static>),
}

/// The body of every error response: `{"error": {"code", "message", "fields"?}}`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

/// What went wrong.
#[derive(Serialize, ToSchema)]
struct ErrorDetail<'a> {
    /// The stable code to match on.
    code: ErrorCode,
    /// A readable explanation (never match on it).
    message: &'a str,
    /// The values at fault; present only when specific values were.
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    fields: &'a [FieldError],
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// Adds the values at fault.
    pub fn with_fields(mut self, fields: Vec<FieldError>) -> Self {
        self.fields = fields;
        self
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// 400 `bad_request` about one query parameter.
    pub fn bad_param(name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(ErrorCode::BadRequest, format!("{name}: {message}")).with_fields(vec![
            FieldError {
                field: name.to_string(),
                message,
            },
        ])
    }

    /// 404 `unknown_agent`.
    pub fn unknown_agent(id: &str) -> Self {
        Self::new(ErrorCode::UnknownAgent, format!("no agent with id {id:?}"))
    }

    /// 422 `invalid_config`, one field per config error; `prefix` is where the config sits in the
    /// body (`config.` when it is nested, empty when it is the whole body).
    pub fn invalid_config(errors: &ConfigErrors, prefix: &str) -> Self {
        let fields: Vec<FieldError> = errors
            .iter()
            .map(|e| FieldError {
                field: format!("{prefix}{}", e.key),
                message: e.message.clone(),
            })
            .collect();
        let message = fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; ");
        Self::new(ErrorCode::InvalidConfig, message).with_fields(fields)
    }

    /// 500 `internal`, logged.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        tracing::error!(%message, "internal error answering an API request");
        Self::new(ErrorCode::Internal, message)
    }

    /// The JSON body of this error.
    pub fn body(&self) -> String {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: &self.message,
                fields: &self.fields,
            },
        };
        // Serializing plain strings cannot fail; fall back to a fixed body all the same.
        serde_json::to_string(&body).unwrap_or_else(|_| {
            format!(
                r#"{{"error":{{"code":"{}","message":"unserializable error"}}}}"#,
                self.code.as_str()
            )
        })
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.code.status());
        response.content_type(mime_json());
        if self.code == ErrorCode::Unauthorized {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        let mut response = response.body(self.body());
        response.extensions_mut().insert(self.code);
        response
    }
}

/// `application/json`.
pub(crate) fn mime_json() -> header::ContentType {
    header::ContentType::json()
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::internal(format!("store: {e}"))
    }
}

impl From<RuntimeError> for ApiError {
    /// Maps runtime errors to codes. `UnknownAgent` becomes `unknown_agent`; handlers that can tell
    /// a retired agent from an unknown one do so before this.
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::UnknownAgent(id) => ApiError::unknown_agent(id.as_str()),
            e @ RuntimeError::NotHosted { .. } => {
                ApiError::new(ErrorCode::NotHosted, e.to_string())
            }
            RuntimeError::AgentExists(id) => ApiError::new(
                ErrorCode::AgentExists,
                format!(
                    "agent {:?} already exists (ids of retired agents are not reused)",
                    id.as_str()
                ),
            ),
            RuntimeError::Input(_, InboundError::UnknownToolCall(call)) => ApiError::new(
                ErrorCode::UnknownToolCall,
                format!("the agent is not waiting for a tool call with id {call:?}"),
            ),
            RuntimeError::Input(_, InboundError::Empty) => {
                ApiError::new(ErrorCode::InvalidInput, "content is empty").with_fields(vec![
                    FieldError {
                        field: "content".into(),
                        message: "is empty".into(),
                    },
                ])
            }
            RuntimeError::Input(_, e @ InboundError::TooLarge { .. }) => {
                let message = e.to_string();
                ApiError::new(ErrorCode::InputTooLarge, message.clone()).with_fields(vec![
                    FieldError {
                        field: "content".into(),
                        message,
                    },
                ])
            }
            RuntimeError::Input(id, InboundError::Store(e)) => {
                ApiError::internal(format!("agent {id}: store: {e}"))
            }
            RuntimeError::Configure(_, ConfigureError::Invalid(errors)) => {
                ApiError::invalid_config(&errors, "")
            }
            RuntimeError::Configure(id, ConfigureError::Store(e)) => {
                ApiError::internal(format!("agent {id}: store: {e}"))
            }
            RuntimeError::Mailbox(id) => ApiError::new(
                ErrorCode::Unavailable,
                format!(
                    "agent {:?} is not reachable (stopped or overloaded)",
                    id.as_str()
                ),
            ),
            RuntimeError::ShuttingDown => {
                ApiError::new(ErrorCode::ShuttingDown, "the runtime is shutting down")
            }
            // Load, Agent, Store, JobPool and anything added later: real internal failures.
            e => ApiError::internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_have_error_statuses() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn codes_serialize_as_their_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.as_str(), "{code:?}");
        }
    }

    #[test]
    fn body_shape() {
        let e = ApiError::bad_param("limit", "must be a number");
        insta::assert_snapshot!(e.body(), @r#"{"error":{"code":"bad_request","message":"limit: must be a number","fields":[{"field":"limit","message":"must be a number"}]}}"#);
        let e = ApiError::unknown_agent("ghost");
        insta::assert_snapshot!(e.body(), @r#"{"error":{"code":"unknown_agent","message":"no agent with id \"ghost\""}}"#);
    }
}
