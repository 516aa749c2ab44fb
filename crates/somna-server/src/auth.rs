//! Bearer-token authentication and the per-response bookkeeping, as one actix-web middleware.
//!
//! When the server has a token, every request except `GET /healthz` and the web console's static
//! shell (`/console`, its script and stylesheet: no data) must carry
//! `Authorization: Bearer <token>`; anything else is 401 `unauthorized`. The comparison takes the
//! same time wherever the first differing byte is (`subtle`), so the token cannot be guessed byte by
//! byte from response times; only its length may leak.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{ResponseError, web};
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ErrorCode};
use crate::server::AppState;

/// The path that never needs the token.
pub(crate) const HEALTH_PATH: &str = "/healthz";

/// True when `header_value` is `Bearer <expected>` (the scheme is case-insensitive).
pub(crate) fn bearer_matches(header_value: Option<&str>, expected: &str) -> bool {
    let Some(value) = header_value else {
        return false;
    };
    let value = value.trim();
    let Some((scheme, token)) = value.split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    bool::from(token.trim().as_bytes().ct_eq(expected.as_bytes()))
}

/// Checks the token (unless the path is `/healthz`), runs the request, and counts the response in
/// the metrics.
pub(crate) async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        let e = ApiError::internal("the server state is missing");
        return Ok(req.into_response(e.error_response()));
    };
    if let Some(expected) = &state.token
        && req.path() != HEALTH_PATH
        && !crate::console::is_public(req.path())
    {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if !bearer_matches(given, expected) {
            let message = if given.is_some() {
                "the bearer token is wrong"
            } else {
                "missing `Authorization: Bearer <token>` header"
            };
            let response = ApiError::new(ErrorCode::Unauthorized, message).error_response();
            state
                .metrics
                .observe_response(response.status().as_u16(), Some(ErrorCode::Unauthorized));
            return Ok(req.into_response(response));
        }
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
