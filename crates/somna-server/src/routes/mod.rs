//! The endpoints, and helpers they share: reading the agent id from the path, telling an unknown
//! agent from a retired one, answering JSON.
//!
//! - [`agents`]: the agent lifecycle and commands (list, create, status, config, retire, input,
//!   compact, sleep, uncompact).
//! - [`reads`]: reads answered by the store (history, archive, archive search, journal, facts,
//!   events); they work for retired agents too.
//! - [`prompt`]: what an agent sees — the prompt its next LLM call would receive for an input.
//! - [`tokens`]: scoped API tokens (list, make, revoke; admin token only).
//! - [`ops`]: `/healthz`, `/metrics`, `/v1/openapi.json`, the `/v1/events` SSE stream, and the
//!   JSON 404/405 fallbacks.
//!
//! [`ENDPOINTS`] lists every endpoint once: [`configure`] registers them, and the OpenAPI
//! document (crate::openapi) lists their handlers' `#[utoipa::path]`s.

use actix_web::http::header::{self, ContentType};
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;
use somna_core::{AgentId, AgentRecord};
use somna_runtime::RuntimeError;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode, FieldError};
use crate::query::Params;
use crate::server::AppState;

pub(crate) mod agents;
pub(crate) mod ops;
pub(crate) mod prompt;
pub(crate) mod reads;
pub(crate) mod tokens;

/// The shared state as handlers receive it.
pub(crate) type State = web::Data<AppState>;

/// A handler's result.
pub(crate) type Reply = Result<HttpResponse, ApiError>;

/// One endpoint: the method and path actix serves it at, and its handler.
pub(crate) struct Endpoint {
    /// The HTTP method.
    pub(crate) method: Method,
    /// The path, with `{id}` for the agent id, as actix matches it and the OpenAPI document
    /// names it.
    pub(crate) path: &'static str,
    /// Gives a route (guarded by `method`) its handler.
    to: fn(actix_web::Route) -> actix_web::Route,
}

/// Declares the endpoint table, [`ENDPOINTS`], and the OpenAPI paths of its handlers,
/// [`EndpointDocs`], from one list: an endpoint cannot be served without being documented (its
/// handler needs a `#[utoipa::path]` for `EndpointDocs` to compile), and the route check
/// (`openapi::tests`) holds each `#[utoipa::path]`'s method and path to the table's.
macro_rules! endpoints {
    ($($method:ident $path:literal => $($handler:ident)::+),+ $(,)?) => {
        /// Every endpoint, in registration order. [`configure`] registers exactly these.
        pub(crate) static ENDPOINTS: &[Endpoint] = &[$(Endpoint {
            method: Method::$method,
            path: $path,
            to: |route| route.to($($handler)::+),
        }),+];

        /// The OpenAPI paths of the [`ENDPOINTS`]' handlers (each documented by its
        /// `#[utoipa::path]`).
        #[derive(utoipa::OpenApi)]
        #[openapi(paths($($($handler)::+),+))]
        pub(crate) struct EndpointDocs;
    };
}

endpoints! {
    GET "/healthz" => ops::healthz,
    GET "/metrics" => ops::metrics,
    GET "/v1/openapi.json" => ops::openapi,
    GET "/v1/agents" => agents::list,
    POST "/v1/agents" => agents::create,
    GET "/v1/agents/{id}" => agents::status,
    DELETE "/v1/agents/{id}" => agents::retire,
    GET "/v1/agents/{id}/config" => agents::get_config,
    PATCH "/v1/agents/{id}/config" => agents::configure,
    POST "/v1/agents/{id}/input" => agents::input,
    POST "/v1/agents/{id}/compact" => agents::compact,
    POST "/v1/agents/{id}/sleep" => agents::sleep,
    POST "/v1/agents/{id}/uncompact" => agents::uncompact,
    GET "/v1/agents/{id}/history" => reads::history,
    GET "/v1/agents/{id}/archive" => reads::archive,
    GET "/v1/agents/{id}/archive/search" => reads::search,
    GET "/v1/agents/{id}/journal" => reads::journal,
    GET "/v1/agents/{id}/facts" => reads::facts,
    GET "/v1/agents/{id}/prompt" => prompt::prompt,
    GET "/v1/agents/{id}/events" => reads::events,
    GET "/v1/events" => ops::events,
    GET "/v1/tokens" => tokens::list,
    POST "/v1/tokens" => tokens::create,
    DELETE "/v1/tokens/{name}" => tokens::revoke,
}

/// Registers every endpoint of [`ENDPOINTS`]: one resource per path, whose other methods answer
/// 405 `method_not_allowed`; any other path answers 404 `not_found`.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    let mut paths: Vec<&'static str> = Vec::new();
    for endpoint in ENDPOINTS {
        if !paths.contains(&endpoint.path) {
            paths.push(endpoint.path);
        }
    }
    for path in paths {
        let resource = ENDPOINTS
            .iter()
            .filter(|e| e.path == path)
            .fold(resource(path), |resource, e| {
                resource.route((e.to)(web::method(e.method.clone())))
            });
        cfg.service(resource);
    }
    cfg.default_service(web::to(ops::not_found));
}

/// The methods of the endpoints at `path` (a pattern of [`ENDPOINTS`]), in table order.
pub(crate) fn methods_at(path: &str) -> Vec<&'static str> {
    ENDPOINTS
        .iter()
        .filter(|e| e.path == path)
        .map(|e| e.method.as_str())
        .collect()
}

/// A resource whose other methods answer 405 `method_not_allowed`.
fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(ops::method_not_allowed))
}

/// The agent id in the path, validated, and reached by the request's token (403 `forbidden` when
/// a scoped token does not reach it): every route that names an agent reads it through here.
pub(crate) fn path_agent(req: &HttpRequest) -> Result<AgentId, ApiError> {
    let raw = req.match_info().get("id").unwrap_or_default();
    let id = parse_agent_id(raw, "id")?;
    Principal::of(req).check(id.as_str())?;
    Ok(id)
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

/// A `text/event-stream` response streaming `body`.
pub(crate) fn sse_response<S>(body: S) -> HttpResponse
where
    S: futures::Stream<Item = Result<actix_web::web::Bytes, std::convert::Infallible>> + 'static,
{
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        // A stream's connection is not reused: when the stream ends (at shutdown), it closes.
        .force_close()
        .streaming(body)
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
