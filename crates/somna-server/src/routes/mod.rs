//! The endpoints, and helpers they share: reading the agent id from the path, telling an unknown
//! agent from a retired one, answering JSON.
//!
//! - [`agents`]: the agent lifecycle and commands (list, create, status, config, retire, input,
//!   compact, sleep, uncompact).
//! - [`reads`]: reads answered by the store (history, archive, archive search, journal, facts,
//!   events); they work for retired agents too.
//! - [`ops`]: `/healthz`, `/metrics`, the `/v1/events` SSE stream, and the JSON 404/405 fallbacks.

use actix_web::http::StatusCode;
use actix_web::http::header::ContentType;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;
use somna_core::{AgentId, AgentRecord};
use somna_runtime::RuntimeError;

use crate::error::{ApiError, ErrorCode, FieldError};
use crate::query::Params;
use crate::server::AppState;

pub(crate) mod agents;
pub(crate) mod ops;
pub(crate) mod reads;

/// The shared state as handlers receive it.
pub(crate) type State = web::Data<AppState>;

/// A handler's result.
pub(crate) type Reply = Result<HttpResponse, ApiError>;

/// Registers every endpoint.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz").route(web::get().to(ops::healthz)))
        .service(resource("/metrics").route(web::get().to(ops::metrics)))
        .service(
            web::scope("/v1")
                .service(
                    resource("/agents")
                        .route(web::get().to(agents::list))
                        .route(web::post().to(agents::create)),
                )
                .service(
                    resource("/agents/{id}")
                        .route(web::get().to(agents::status))
                        .route(web::delete().to(agents::retire)),
                )
                .service(
                    resource("/agents/{id}/config")
                        .route(web::get().to(agents::get_config))
                        .route(web::patch().to(agents::configure)),
                )
                .service(resource("/agents/{id}/input").route(web::post().to(agents::input)))
                .service(resource("/agents/{id}/compact").route(web::post().to(agents::compact)))
                .service(resource("/agents/{id}/sleep").route(web::post().to(agents::sleep)))
                .service(
                    resource("/agents/{id}/uncompact").route(web::post().to(agents::uncompact)),
                )
                .service(resource("/agents/{id}/history").route(web::get().to(reads::history)))
                .service(resource("/agents/{id}/archive").route(web::get().to(reads::archive)))
                .service(
                    resource("/agents/{id}/archive/search").route(web::get().to(reads::search)),
                )
                .service(resource("/agents/{id}/journal").route(web::get().to(reads::journal)))
                .service(resource("/agents/{id}/facts").route(web::get().to(reads::facts)))
                .service(resource("/agents/{id}/events").route(web::get().to(reads::events)))
                .service(resource("/events").route(web::get().to(ops::events))),
        )
        .default_service(web::to(ops::not_found));
}

/// A resource whose other methods answer 405 `method_not_allowed`.
fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(ops::method_not_allowed))
}

/// The agent id in the path, validated.
pub(crate) fn path_agent(req: &HttpRequest) -> Result<AgentId, ApiError> {
    let raw = req.match_info().get("id").unwrap_or_default();
    parse_agent_id(raw, "id")
}

/// `raw` as an agent id; `field` names where it came from.
pub(crate) fn parse_agent_id(raw: &str, field: &str) -> Result<AgentId, ApiError> {
    AgentId::new(raw).map_err(|e| {
        ApiError::new(ErrorCode::InvalidAgentId, e.to_string()).with_fields(vec![FieldError {
            field: field.to_string(),
            message: e.to_string(),
        }])
    })
}

/// The stored record of `id` (hosted or retired), or 404 `unknown_agent`.
pub(crate) fn known_agent(state: &AppState, id: &AgentId) -> Result<AgentRecord, ApiError> {
    state
        .runtime
        .store()
        .agent(id)?
        .ok_or_else(|| ApiError::unknown_agent(id.as_str()))
}

/// Maps a runtime error about `id`; an agent the runtime does not host but the store knows as
/// retired is 410 `agent_retired`.
pub(crate) fn runtime_error(state: &AppState, id: &AgentId, e: RuntimeError) -> ApiError {
    if let RuntimeError::UnknownAgent(_) = &e
        && let Ok(Some(record)) = state.runtime.store().agent(id)
        && record.retired
    {
        return ApiError::new(
            ErrorCode::AgentRetired,
            format!(
                "agent {:?} was retired; its history, archive and journal can still be read",
                id.as_str()
            ),
        );
    }
    e.into()
}

/// Refuses any query parameter.
pub(crate) fn no_params(req: &HttpRequest) -> Result<(), ApiError> {
    Params::parse(req.query_string(), &[], &[]).map(|_| ())
}

/// A JSON response.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_string(value)
        .map_err(|e| ApiError::internal(format!("cannot serialize the response: {e}")))?;
    Ok(HttpResponse::build(status)
        .content_type(ContentType::json())
        .body(body))
}
