//! Scoped API tokens (admin token only; the middleware refuses scoped tokens here): list, make,
//! revoke. The secret is answered once, by `POST /v1/tokens`; the store keeps its hash.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use somna_core::Timestamp;
use somna_store::{Access, ApiToken, StoreError, TokenScope};
use utoipa::ToSchema;

use super::{Reply, State, json, no_params};
use crate::body::{BodyKind, parse_json, read_body};
use crate::error::{ApiError, Denied, ErrorBody, ErrorCode};

/// A scoped token as listed: never its secret (nor its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    /// The token's name (what `DELETE /v1/tokens/{name}` takes).
    pub name: String,
    /// The agent-id prefix: the token reaches exactly the agents whose id starts with it.
    pub agents: String,
    /// `read` (GET routes and the event stream) or `read_write` (also commands, creating and
    /// retiring agents within the prefix).
    #[schema(value_type = String, example = "read")]
    pub access: Access,
    /// When it was made.
    pub created_at: Timestamp,
}

impl From<&ApiToken> for TokenInfo {
    fn from(token: &ApiToken) -> Self {
        TokenInfo {
            name: token.name.clone(),
            agents: token.scope.agents.clone(),
            access: token.scope.access,
            created_at: token.created_at,
        }
    }
}

/// The answer of `GET /v1/tokens`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    /// Every scoped token, by name.
    pub tokens: Vec<TokenInfo>,
}

/// The body of `POST /v1/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateToken {
    /// A name for it: 1–64 ASCII letters, digits, `-`, `_` and `.`; unique.
    name: String,
    /// The agent-id prefix it reaches (not empty: a token for every agent is the admin token).
    agents: String,
    /// `read` or `read_write`.
    #[schema(value_type = String, example = "read")]
    access: Access,
}

/// The answer of `POST /v1/tokens`: the token and its secret, shown this once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    /// The bearer token to give the client (`Authorization: Bearer <token>`); the server keeps
    /// only its SHA-256 and cannot show it again.
    pub token: String,
    /// What it is.
    #[serde(flatten)]
    pub info: TokenInfo,
}

/// `GET /v1/tokens`: every scoped token (admin token only).
#[utoipa::path(
    get,
    operation_id = "list_tokens",
    path = "/v1/tokens",
    tag = "tokens",
    summary = "List the scoped tokens",
    description = "Every scoped token by name, with its agent prefix and access; never a secret. \
Admin token only.",
    responses(
        (status = 200, description = "The tokens", body = TokenList),
        (status = 400, description = "`bad_request`: a query parameter (it takes none)", body = ErrorBody),
        Denied,
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
    ),
)]
pub(crate) async fn list(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let tokens = state.runtime.store().tokens()?;
    json(
        StatusCode::OK,
        &TokenList {
            tokens: tokens.iter().map(TokenInfo::from).collect(),
        },
    )
}

/// `POST /v1/tokens` `{name, agents, access}`: makes a scoped token (201) and answers its secret.
#[utoipa::path(
    post,
    operation_id = "create_token",
    path = "/v1/tokens",
    tag = "tokens",
    summary = "Make a scoped token",
    description = "Makes a token that reaches only the agents whose id starts with `agents`, for \
`read` or `read_write`. The answer holds the secret, shown this once (the server keeps its \
SHA-256). It works at once on this server and within 2 s on the other nodes of a cluster. Admin \
token only.",
    request_body = CreateToken,
    responses(
        (status = 201, description = "Made; `token` is the secret", body = CreatedToken),
        (status = 400, description = "`bad_json`: the body is not JSON; `bad_request`: a query \
parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 409, description = "`token_exists`: a token has that name", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit", body = ErrorBody),
        (status = 422, description = "`invalid_body`: JSON of the wrong shape, a malformed name \
or an empty or impossible prefix (`fields` names it)", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
    ),
)]
pub(crate) async fn create(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let body: CreateToken = parse_json(&bytes, BodyKind::Plain, None)?;
    let scope = TokenScope {
        agents: body.agents,
        access: body.access,
    };
    let store = state.runtime.store();
    let (token, secret) = store
        .create_token(
            &body.name,
            scope,
            Timestamp::from_system_time(std::time::SystemTime::now()),
        )
        .map_err(|e| match e {
            StoreError::TokenExists(_) => ApiError::new(ErrorCode::TokenExists, e.to_string()),
            StoreError::Invalid { what, ref reason } => {
                let field = if what == "token name" {
                    "name"
                } else {
                    "agents"
                };
                ApiError::new(ErrorCode::InvalidBody, e.to_string()).with_fields(vec![
                    crate::error::FieldError {
                        field: field.into(),
                        message: reason.clone(),
                    },
                ])
            }
            e => ApiError::from(e),
        })?;
    state.tokens.reload(store)?;
    tracing::info!(name = %token.name, agents = %token.scope.agents, access = %token.scope.access, "API token made");
    json(
        StatusCode::CREATED,
        &CreatedToken {
            token: secret,
            info: TokenInfo::from(&token),
        },
    )
}

/// `DELETE /v1/tokens/{name}`: revokes a scoped token at once (204).
#[utoipa::path(
    delete,
    operation_id = "revoke_token",
    path = "/v1/tokens/{name}",
    tag = "tokens",
    summary = "Revoke a scoped token",
    description = "Deletes the token: this server refuses it at once, the other nodes of a \
cluster within 2 s. Admin token only.",
    params(("name" = String, Path, description = "The token's name", example = "tenant-b")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 400, description = "`bad_request`: a query parameter (it takes none)", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_token`: no token has that name", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
    ),
)]
pub(crate) async fn revoke(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let name = req.match_info().get("name").unwrap_or_default();
    let store = state.runtime.store();
    if !store.revoke_token(name)? {
        return Err(ApiError::new(
            ErrorCode::UnknownToken,
            format!("no token named {name:?}"),
        ));
    }
    state.tokens.reload(store)?;
    tracing::info!(name, "API token revoked");
    Ok(HttpResponse::NoContent().finish())
}
