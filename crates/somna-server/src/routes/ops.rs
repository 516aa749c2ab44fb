//! `/healthz`, `/metrics`, the `/v1/events` SSE stream, and the JSON fallbacks for unknown paths
//! (404 `not_found`) and methods (405 `method_not_allowed`).

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};

use super::{Reply, State, json, no_params, parse_agent_id};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::RuntimeGauges;
use crate::query::Params;
use crate::sse::{EVENT_TYPES, EventFilter, event_stream};

/// `GET /healthz` (no token needed): `{"status":"ok"}` while the server runs.
pub(crate) async fn healthz() -> Reply {
    json(
        StatusCode::OK,
        &serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }),
    )
}

/// `GET /metrics`: Prometheus text format.
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

/// `GET /v1/events?agent=ID&types=a,b`: Server-Sent Events of the runtime's events.
pub(crate) async fn events(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["agent", "types"], &[])?;
    let agent = params
        .get("agent")
        .map(|a| parse_agent_id(a.trim(), "agent"))
        .transpose()?;
    let types: Vec<String> = params
        .get("types")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(unknown) = types.iter().find(|t| !EVENT_TYPES.contains(&t.as_str())) {
        return Err(ApiError::bad_param(
            "types",
            format!(
                "unknown event type {unknown:?} (expected any of: {})",
                EVENT_TYPES.join(", ")
            ),
        ));
    }
    if *state.shutdown.borrow() {
        return Err(ApiError::new(
            ErrorCode::ShuttingDown,
            "the server is shutting down",
        ));
    }
    let stream = event_stream(
        state.runtime.subscribe(),
        EventFilter { agent, types },
        state.sse_keep_alive,
        state.shutdown.clone(),
        state.metrics.clone(),
    );
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        // A stream's connection is not reused: when the stream ends (at shutdown), it closes.
        .force_close()
        .streaming(stream))
}

/// Any path that is not an endpoint.
pub(crate) async fn not_found(req: HttpRequest) -> Reply {
    Err(ApiError::new(
        ErrorCode::NotFound,
        format!("no endpoint at {}", req.path()),
    ))
}

/// An endpoint asked with a method it does not take.
pub(crate) async fn method_not_allowed(req: HttpRequest) -> Reply {
    Err(ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} does not take {}", req.path(), req.method()),
    ))
}
