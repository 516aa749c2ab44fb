//! Bearer-token authentication, the scope of scoped tokens, and the per-response bookkeeping, as
//! one actix-web middleware.
//!
//! When the server has a token, every request except `GET /healthz` and the web console's static
//! shell (`/console`, its script and stylesheet: no data) must carry
//! `Authorization: Bearer <token>`; anything else is 401 `unauthorized`. The comparison with the
//! admin token takes the same time wherever the first differing byte is (`subtle`), so it cannot
//! be guessed byte by byte from response times; only its length may leak.
//!
//! A **scoped token** (made with `POST /v1/tokens` or `somna token create`; stored hashed, see
//! `somna_store::tokens`) acts as a [`Principal::Scoped`]: it reaches only the agents whose id
//! starts with its prefix, and a read token only reads. The middleware refuses what a scoped token
//! can never do (403 `forbidden`: `/metrics`, `/v1/tokens`, any method but `GET`/`HEAD` for a read
//! token); the routes check the agent they name ([`crate::routes::path_agent`], the body of
//! `POST /v1/agents`) and filter what lists agents (`GET /v1/agents`, the console's table, the
//! event stream). A server without an admin token (loopback only) lets every request act as admin,
//! as before, but still honours a scoped token that a client presents.
//!
//! Scoped tokens are looked up by the SHA-256 of the presented secret in a cache of the store's
//! tokens, reloaded when it is older than [`TOKENS_FRESH_FOR`] (so a token made or revoked on
//! another node or by the CLI takes effect within that time) and at once after this server makes
//! or revokes one.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, ResponseError, web};
use somna_store::tokens::{SECRET_PREFIX, hash_secret};
use somna_store::{Store, StoreError, TokenScope};
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ErrorCode};
use crate::server::AppState;

/// The path that never needs the token.
pub(crate) const HEALTH_PATH: &str = "/healthz";

/// How long the cache of scoped tokens is trusted before it is read from the store again.
pub(crate) const TOKENS_FRESH_FOR: Duration = Duration::from_secs(2);

/// Who a request acts as (in the request's extensions, put there by [`middleware`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    /// The admin token, or any request to a server that has none.
    Admin,
    /// A scoped token: its name and scope.
    Scoped { name: String, scope: TokenScope },
}

impl Principal {
    /// The principal of `req`. A request that did not pass the middleware has none; it is treated
    /// as reaching nothing (fail closed).
    pub(crate) fn of(req: &HttpRequest) -> Principal {
        req.extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_else(|| Principal::Scoped {
                name: "(none)".into(),
                scope: TokenScope {
                    // No agent id holds a space.
                    agents: " ".into(),
                    access: somna_store::Access::Read,
                },
            })
    }

    /// True when the principal reaches agent `id`.
    pub(crate) fn reaches(&self, id: &str) -> bool {
        match self {
            Principal::Admin => true,
            Principal::Scoped { scope, .. } => scope.reaches_id(id),
        }
    }

    /// `Ok` when the principal reaches agent `id`, else 403 `forbidden` naming the token's scope.
    pub(crate) fn check(&self, id: &str) -> Result<(), ApiError> {
        match self {
            Principal::Scoped { name, scope } if !scope.reaches_id(id) => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "token {name:?} reaches the agents whose id starts with {:?}, not {id:?}",
                    scope.agents
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The store's scoped tokens by the hash of their secret, reloaded when stale.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    cache: RwLock<TokenCache>,
}

#[derive(Debug, Default)]
struct TokenCache {
    loaded: Option<Instant>,
    by_hash: HashMap<String, (String, TokenScope)>,
}

impl Tokens {
    /// The name and scope of the token whose secret is `secret`, if the store has it.
    pub(crate) fn lookup(
        &self,
        store: &Store,
        secret: &str,
    ) -> Result<Option<(String, TokenScope)>, StoreError> {
        let hash = hash_secret(secret);
        let fresh = self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .loaded
            .is_some_and(|at| at.elapsed() < TOKENS_FRESH_FOR);
        if !fresh {
            self.reload(store)?;
        }
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        Ok(cache.by_hash.get(&hash).cloned())
    }

    /// Reads the tokens from the store again (after this server made or revoked one, or when
    /// the cache is stale).
    pub(crate) fn reload(&self, store: &Store) -> Result<(), StoreError> {
        let by_hash = store
            .tokens()?
            .into_iter()
            .map(|t| (t.hash, (t.name, t.scope)))
            .collect();
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        cache.loaded = Some(Instant::now());
        cache.by_hash = by_hash;
        Ok(())
    }
}

/// The token of `header_value` when it is `Bearer <token>` (the scheme is case-insensitive).
pub(crate) fn bearer(header_value: Option<&str>) -> Option<&str> {
    let (scheme, token) = header_value?.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// True when `header_value` is `Bearer <expected>` (the scheme is case-insensitive).
pub(crate) fn bearer_matches(header_value: Option<&str>, expected: &str) -> bool {
    bearer(header_value)
        .is_some_and(|token| bool::from(token.as_bytes().ct_eq(expected.as_bytes())))
}

/// Who the request acts as, or the 401 that refuses it.
fn principal(state: &AppState, req: &ServiceRequest) -> Result<Principal, ApiError> {
    if req.path() == HEALTH_PATH || crate::console::is_public(req.path()) {
        return Ok(Principal::Admin);
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Some(expected) = &state.token
        && bearer_matches(given, expected)
    {
        return Ok(Principal::Admin);
    }
    if let Some(secret) = bearer(given).filter(|s| s.starts_with(SECRET_PREFIX))
        && let Some((name, scope)) = state.tokens.lookup(state.runtime.store(), secret)?
    {
        return Ok(Principal::Scoped { name, scope });
    }
    match (&state.token, given) {
        (None, _) => Ok(Principal::Admin),
        (Some(_), Some(_)) => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "the bearer token is wrong",
        )),
        (Some(_), None) => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "missing `Authorization: Bearer <token>` header",
        )),
    }
}

/// What a scoped token can never do, whatever agent it names: 403 `forbidden`.
fn refuse_scoped(name: &str, scope: &TokenScope, req: &ServiceRequest) -> Option<ApiError> {
    let path = req.path();
    let forbidden = |what: String| Some(ApiError::new(ErrorCode::Forbidden, what));
    if path == "/metrics" {
        return forbidden(format!(
            "token {name:?} is scoped to some agents; the metrics cover every agent (use the \
             admin token)"
        ));
    }
    if path == "/v1/tokens" || path.starts_with("/v1/tokens/") {
        return forbidden(format!(
            "token {name:?} is scoped; only the admin token manages tokens"
        ));
    }
    if !scope.can_write() && !matches!(*req.method(), Method::GET | Method::HEAD) {
        return forbidden(format!(
            "token {name:?} is read-only; {} {path} changes things",
            req.method()
        ));
    }
    None
}

/// Finds who the request acts as (unless the path is public), refuses what its scope never
/// allows, runs the request, and counts the response in the metrics.
pub(crate) async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        let e = ApiError::internal("the server state is missing");
        return Ok(req.into_response(e.error_response()));
    };
    let refused = match principal(&state, &req) {
        Ok(Principal::Scoped { name, scope }) => {
            let refused = refuse_scoped(&name, &scope, &req);
            req.extensions_mut()
                .insert(Principal::Scoped { name, scope });
            refused
        }
        Ok(Principal::Admin) => {
            req.extensions_mut().insert(Principal::Admin);
            None
        }
        Err(e) => Some(e),
    };
    if let Some(error) = refused {
        let response = error.error_response();
        state
            .metrics
            .observe_response(response.status().as_u16(), Some(error.code));
        return Ok(req.into_response(response));
    }
    let response = next.call(req).await?.map_into_boxed_body();
    let code = response.response().extensions().get::<ErrorCode>().copied();
    state
        .metrics
        .observe_response(response.status().as_u16(), code);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        assert!(bearer_matches(Some("Bearer abc"), "abc"));
        assert!(bearer_matches(Some("bearer  abc "), "abc"));
        assert!(!bearer_matches(Some("Bearer abd"), "abc"));
        assert!(!bearer_matches(Some("Bearer abcd"), "abc"));
        assert!(!bearer_matches(Some("Bearer "), "abc"));
        assert!(!bearer_matches(Some("Basic abc"), "abc"));
        assert!(!bearer_matches(Some("abc"), "abc"));
        assert!(!bearer_matches(None, "abc"));
    }
}
