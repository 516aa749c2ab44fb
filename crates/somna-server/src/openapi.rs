//! The API's OpenAPI 3.1 document, generated from the code: the paths from each handler's
//! `#[utoipa::path]` (the handlers of the endpoint table, `routes::ENDPOINTS`), the schemas from
//! the wire types' `ToSchema` derives (somna-core's and somna-runtime's behind their `openapi`
//! feature). Served at [`OPENAPI_PATH`]; [`document`] builds it.
//!
//! The document asks for the bearer token on every operation but `GET /healthz`, like the server
//! (see `auth`): it is served under the same rule, so a server that needs a token shows its
//! surface only to clients that have it.

use std::sync::OnceLock;

use utoipa::openapi::schema::{AdditionalProperties, Schema};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, RefOr, Required};
use utoipa::{Modify, OpenApi};

use crate::error::ApiError;
use crate::routes::EndpointDocs;

/// Where the server serves the document.
pub const OPENAPI_PATH: &str = "/v1/openapi.json";

/// The name of the bearer-token security scheme in the document.
const BEARER: &str = "bearer";

/// The document's frame: info, the security scheme, the tags; the paths come from
/// [`EndpointDocs`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Somna HTTP API",
        description = "Host long-lived LLM agents: create them, send them input, hear their \
replies and tool calls (Server-Sent Events), read their history, archive, journal and memory, and \
operate them. docs/api.md describes every endpoint; this document is generated from the server's \
code. Error answers share one shape, `{\"error\": {\"code\", \"message\", \"fields\"?}}`, with a \
stable `code`."
    ),
    modifiers(&BearerScheme),
    security(("bearer" = [])),
    tags(
        (name = "agents", description = "The agent lifecycle: list, create, status, config, retire, input"),
        (name = "commands", description = "Commands to an agent: compact, sleep, uncompact"),
        (name = "reads", description = "Reads answered by the store; retired agents too"),
        (name = "events", description = "The runtime's events as Server-Sent Events"),
        (name = "tokens", description = "Scoped API tokens: list, make, revoke (admin token only)"),
        (name = "ops", description = "Health, metrics and this document")
    )
)]
struct ApiDoc;

/// Adds the bearer-token scheme the global security requirement names.
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut Document) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "The server's token (`SOMNA_API_TOKEN`), as `Authorization: Bearer <token>`. \
Needed when the server has one; a server bound to a non-loopback address always has one.",
            ))
            .build();
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(BEARER, SecurityScheme::Http(scheme));
    }
}

/// The OpenAPI document of every endpoint.
pub fn document() -> Document {
    let mut doc = ApiDoc::openapi().merge_from(EndpointDocs::openapi());
    wire_truths(&mut doc);
    doc
}

/// What the derives cannot say about the wire, said by hand:
///
/// - `compact` takes an empty body (it means `{"force": true}`), yet its body's schema is not
///   nullable (`null` is refused): utoipa makes a body optional only by making it nullable.
/// - `Inbound` refuses unknown fields (`deny_unknown_fields`, so that a typo such as `nmae` is an
///   error), which utoipa says of structs but not of an enum's variants.
fn wire_truths(doc: &mut Document) {
    for item in doc.paths.paths.values_mut() {
        if let Some(post) = &mut item.post
            && post.operation_id.as_deref() == Some("compact")
            && let Some(body) = &mut post.request_body
        {
            body.required = Some(Required::False);
        }
    }
    let inbound = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("Inbound"));
    if let Some(RefOr::T(Schema::OneOf(one_of))) = inbound {
        for variant in &mut one_of.items {
            if let RefOr::T(Schema::Object(object)) = variant {
                object.additional_properties =
                    Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
        }
    }
}

/// The document as JSON, built once; a failure to serialize it is a 500 `internal`.
pub(crate) fn document_json() -> Result<&'static str, ApiError> {
    static JSON: OnceLock<Result<String, serde_json::Error>> = OnceLock::new();
    JSON.get_or_init(|| document().to_json())
        .as_ref()
        .map(String::as_str)
        .map_err(|e| ApiError::internal(format!("cannot serialize the OpenAPI document: {e}")))
}

#[cfg(test)]
mod tests {
    //! The route check: the document, the endpoint table and what actix actually serves name the
    //! same operations (method and path), so that a route cannot be added, moved or dropped
    //! without the document following.

    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet};
    use std::rc::Rc;

    use actix_web::App;
    use actix_web::dev::Service;
    use actix_web::http::Method;
    use actix_web::test as actix_test;
    use serde_json::Value;

    use super::*;
    use crate::routes::{self, ENDPOINTS};

    /// An operation: `("GET", "/v1/agents/{id}")`.
    type Operation = (String, String);

    /// The methods probed on every registered path.
    const METHODS: [Method; 7] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ];

    /// The operations the document describes.
    fn documented() -> BTreeSet<Operation> {
        let doc: Value = serde_json::from_str(document_json().unwrap()).unwrap();
        let mut operations = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if METHODS
                    .iter()
                    .any(|m| m.as_str().eq_ignore_ascii_case(method))
                {
                    operations.insert((method.to_ascii_uppercase(), path.clone()));
                }
            }
        }
        operations
    }

    /// The operations of the endpoint table.
    fn table() -> BTreeSet<Operation> {
        ENDPOINTS
            .iter()
            .map(|e| (e.method.to_string(), e.path.to_string()))
            .collect()
    }

    /// The operations actix serves with `routes::configure`: every resource pattern it
    /// registered, probed with every method; an operation is served unless the answer is the
    /// 405 `method_not_allowed` fallback. (Handlers that need the server's state answer 500
    /// here: there is none, and it does not matter which handler answers, only that one does.)
    /// Also the `Allow` header of each 405, by pattern.
    async fn served() -> (BTreeSet<Operation>, BTreeMap<String, BTreeSet<String>>) {
        let map = Rc::new(RefCell::new(String::new()));
        let seen = Rc::clone(&map);
        let app = actix_test::init_service(
            App::new()
                .wrap_fn(move |req, srv| {
                    *seen.borrow_mut() = format!("{:?}", req.resource_map());
                    srv.call(req)
                })
                .configure(routes::configure),
        )
        .await;
        actix_test::call_service(
            &app,
            actix_test::TestRequest::get().uri("/healthz").to_request(),
        )
        .await;
        let patterns = registered_patterns(&map.borrow());
        assert!(
            patterns.len() > 10,
            "found no resources in actix's resource map (did its Debug format change?): {patterns:?}"
        );
        let mut operations = BTreeSet::new();
        let mut allowed = BTreeMap::new();
        for pattern in patterns {
            let uri = pattern.replace("{id}", "probe");
            for method in METHODS {
                let req = actix_test::TestRequest::default()
                    .method(method.clone())
                    .uri(&uri)
                    .to_request();
                let response = actix_test::call_service(&app, req).await;
                let status = response.status();
                let allow = response
                    .headers()
                    .get(actix_web::http::header::ALLOW)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.split(", ").map(str::to_string).collect::<BTreeSet<_>>());
                let body = actix_test::read_body(response).await;
                let fallback = status == actix_web::http::StatusCode::METHOD_NOT_ALLOWED
                    && String::from_utf8_lossy(&body).contains(r#""code":"method_not_allowed""#);
                if fallback {
                    allowed.insert(pattern.clone(), allow.unwrap_or_default());
                } else {
                    operations.insert((method.to_string(), pattern.clone()));
                }
            }
        }
        (operations, allowed)
    }

    /// The resource patterns in the `Debug` text of actix's `ResourceMap` (it has no other way to
    /// list them): each `patterns: Single("…")` but the root's empty one.
    fn registered_patterns(map: &str) -> BTreeSet<String> {
        const MARK: &str = "patterns: Single(\"";
        map.match_indices(MARK)
            .filter_map(|(at, _)| {
                let rest = &map[at + MARK.len()..];
                rest.find('"').map(|end| rest[..end].to_string())
            })
            .filter(|p| !p.is_empty())
            .collect()
    }

    #[test]
    fn the_document_describes_exactly_the_endpoint_table() {
        let documented = documented();
        let table = table();
        assert_eq!(
            table.len(),
            ENDPOINTS.len(),
            "the endpoint table names an operation twice"
        );
        assert!(table.contains(&("GET".to_string(), OPENAPI_PATH.to_string())));
        let undocumented: Vec<_> = table.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&table).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "the `#[utoipa::path]` of a handler disagrees with routes::ENDPOINTS:\n  in the table, \
not in the document: {undocumented:?}\n  in the document, not in the table: {unserved:?}"
        );
    }

    #[actix_rt::test]
    async fn actix_serves_exactly_the_documented_operations() {
        let (served, allowed) = served().await;
        let documented = documented();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&served).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "routes::configure and the OpenAPI document disagree (register routes through \
routes::ENDPOINTS only):\n  served, not documented: {undocumented:?}\n  documented, not served: \
{unserved:?}"
        );
        for (pattern, allow) in allowed {
            let methods: BTreeSet<String> = documented
                .iter()
                .filter(|(_, path)| *path == pattern)
                .map(|(method, _)| method.clone())
                .collect();
            assert_eq!(allow, methods, "the `Allow` of a 405 at {pattern}");
        }
    }

    #[test]
    fn the_hand_written_truths_hold() {
        let doc: Value = serde_json::from_str(document_json().unwrap()).unwrap();
        let compact = &doc["paths"]["/v1/agents/{id}/compact"]["post"]["requestBody"];
        assert_eq!(compact["required"], false, "{compact}");
        let variants = doc["components"]["schemas"]["Inbound"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(variants.len(), 3);
        for variant in variants {
            assert_eq!(variant["additionalProperties"], false, "{variant}");
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        // Clients and link resolution (schemathesis's) find operations by id; utoipa's default
        // is the handler's name, which two modules may share.
        let doc: Value = serde_json::from_str(document_json().unwrap()).unwrap();
        let mut ids = BTreeSet::new();
        for (method, path) in documented() {
            let id = &doc["paths"][&path][method.to_ascii_lowercase()]["operationId"];
            let id = id.as_str().unwrap_or_default().to_string();
            assert!(
                ids.insert(id.clone()),
                "{method} {path}: operationId {id:?} is taken"
            );
        }
    }

    #[test]
    fn every_operation_but_healthz_needs_the_token() {
        let doc: Value = serde_json::from_str(document_json().unwrap()).unwrap();
        assert_eq!(doc["security"], serde_json::json!([{ BEARER: [] }]));
        assert_eq!(
            doc["components"]["securitySchemes"][BEARER]["scheme"],
            "bearer"
        );
        for (method, path) in documented() {
            let operation = &doc["paths"][&path][method.to_ascii_lowercase()];
            let open = operation["security"] == serde_json::json!([{}]);
            assert_eq!(open, path == crate::auth::HEALTH_PATH, "{method} {path}");
            if !open {
                assert!(
                    operation["responses"]["401"].is_object(),
                    "{method} {path} does not document its 401"
                );
            }
        }
    }
}
