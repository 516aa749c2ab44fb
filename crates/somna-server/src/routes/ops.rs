//! `/healthz`, `/metrics`, `/v1/openapi.json`, the `/v1/events` SSE stream, and the JSON
//! fallbacks for unknown paths (404 `not_found`) and methods (405 `method_not_allowed`).

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use serde::Serialize;
use somna_core::AgentId;
use utoipa::ToSchema;

use super::{Reply, State, json, methods_at, no_params, parse_agent_id, sse_response};
use crate::auth::Principal;
use crate::error::{ApiError, Denied, ErrorBody, ErrorCode};
use crate::metrics::RuntimeGauges;
use crate::query::Params;
use crate::sse::{EventFilter, event_stream};
use somna_runtime::Event;

/// The answer of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
struct Health {
    /// Always `ok` (a server that cannot answer does not answer).
    #[schema(pattern = "^ok$")]
    status: &'static str,
    /// The server's version.
    #[schema(example = "0.1.0")]
    version: &'static str,
}

/// `GET /healthz` (no token needed): `{"status":"ok"}` while the server runs.
#[utoipa::path(
    get,
    operation_id = "healthz",
    path = "/healthz",
    tag = "ops",
    summary = "Health check",
    description = "`{\"status\": \"ok\", \"version\"}` while the server runs. Needs no token.",
    security(()),
    responses((status = 200, description = "The server runs", body = Health)),
)]
pub(crate) async fn healthz() -> Reply {
    json(
        StatusCode::OK,
        &Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
        },
    )
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(
    get,
    operation_id = "metrics",
    path = "/metrics",
    tag = "ops",
    summary = "Prometheus metrics",
    description = "The metrics in Prometheus text format (`text/plain; version=0.0.4`); docs/api.md \
lists them.",
    responses(
        (status = 200, description = "The metrics", body = String, content_type = "text/plain"),
        (status = 400, description = "`bad_request`: a query parameter (it takes none)", body = ErrorBody),
        Denied,
    ),
)]
pub(crate) async fn metrics(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let text = state.metrics.render(&RuntimeGauges::of(&state.runtime));
    Ok(HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        ))
        .body(text))
}

/// `GET /v1/openapi.json`: this API's OpenAPI document.
#[utoipa::path(
    get,
    operation_id = "openapi",
    path = "/v1/openapi.json",
    tag = "ops",
    summary = "This document",
    description = "The API's OpenAPI 3.1 document, generated from the server's code. Under the \
same token rule as every other `/v1` endpoint.",
    responses(
        (status = 200, description = "The OpenAPI document", body = Object, content_type = "application/json"),
        (status = 400, description = "`bad_request`: a query parameter (it takes none)", body = ErrorBody),
        Denied,
        (status = 500, description = "`internal`: the document could not be serialized", body = ErrorBody),
    ),
)]
pub(crate) async fn openapi(req: HttpRequest) -> Reply {
    no_params(&req)?;
    Ok(HttpResponse::Ok()
        .content_type(header::ContentType::json())
        .body(crate::openapi::document_json()?))
}

/// `GET /v1/events?agent=ID&types=a,b`: Server-Sent Events of the runtime's events.
#[utoipa::path(
    get,
    operation_id = "event_stream",
    path = "/v1/events",
    tag = "events",
    summary = "The event stream (SSE)",
    description = "A Server-Sent Events stream of the runtime's events: it opens with the comment \
`: connected`, then each event is an `id: BOOT.N` line and one `data:` line holding a JSON object \
with a `type` (see docs/api.md for the types and their fields); idle streams get a `: keep-alive` \
comment. A client that reconnects with `Last-Event-ID` first gets the events it missed (of the \
newest 4,096); when the id is another server process's (a restart, another node), the stream says \
`{\"type\":\"server_restarted\"}` and replays every event of this process it still holds. It ends \
when the server shuts down.",
    params(
        ("agent" = Option<AgentId>, Query, description = "Only this agent's events"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event (the last `id:` the client saw)"),
        ("types" = Option<String>, Query, description = "Only these event types, comma-separated \
(`agent_replied,tool_call_requested`); a name that is not an event type is a 400", example = "agent_replied,tool_call_requested"),
    ),
    responses(
        (status = 200, description = "The stream", body = String, content_type = "text/event-stream"),
        (status = 400, description = "`bad_request`: an unknown parameter or event type, a \
`Last-Event-ID` that is not `BOOT.N`; `invalid_agent_id`: `agent` is not an agent id", body = ErrorBody),
        Denied,
        (status = 503, description = "`shutting_down`: the server is shutting down", body = ErrorBody),
    ),
)]
pub(crate) async fn events(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["agent", "types"], &[])?;
    let agent = params
        .get("agent")
        .map(|a| parse_agent_id(a.trim(), "agent"))
        .transpose()?;
    let principal = Principal::of(&req);
    if let Some(agent) = &agent {
        principal.check(agent.as_str())?;
    }
    let types: Vec<String> = params
        .get("types")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    // An unknown name is a 400, so that a typo never makes a stream silently empty.
    if let Some(unknown) = types.iter().find(|t| !Event::KINDS.contains(&t.as_str())) {
        return Err(ApiError::bad_param(
            "types",
            format!(
                "unknown event type {unknown:?} (expected any of: {})",
                Event::KINDS.join(", ")
            ),
        ));
    }
    if *state.shutdown.borrow() {
        return Err(ApiError::new(
            ErrorCode::ShuttingDown,
            "the server is shutting down",
        ));
    }
    let last_event_id = match req.headers().get("last-event-id") {
        Some(value) => Some(value.to_str().map_err(|_| {
            ApiError::bad_param("Last-Event-ID", "the header is not visible ASCII")
        })?),
        None => None,
    };
    let resume = state
        .replay
        .subscribe(last_event_id)
        .map_err(|e| ApiError::bad_param("Last-Event-ID", e.to_string()))?;
    let stream = event_stream(
        resume,
        state.replay.boot().to_string(),
        EventFilter {
            agent,
            types,
            scope: match principal {
                Principal::Admin => None,
                Principal::Scoped { scope, .. } => Some(scope),
            },
        },
        state.sse_keep_alive,
        state.shutdown.clone(),
        state.metrics.clone(),
    );
    Ok(sse_response(stream))
}

/// Any path that is not an endpoint.
pub(crate) async fn not_found(req: HttpRequest) -> Reply {
    Err(ApiError::new(
        ErrorCode::NotFound,
        format!("no endpoint at {}", req.path()),
    ))
}

/// An endpoint asked with a method it does not take; `Allow` lists the methods it takes (RFC 9110
/// requires it with a 405).
pub(crate) async fn method_not_allowed(req: HttpRequest) -> Reply {
    let error = ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} does not take {}", req.path(), req.method()),
    );
    let mut response = error.error_response();
    let allowed = req
        .match_pattern()
        .map(|p| methods_at(&p))
        .unwrap_or_default();
    if let Ok(value) = header::HeaderValue::from_str(&allowed.join(", ")) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    Ok(response)
}
