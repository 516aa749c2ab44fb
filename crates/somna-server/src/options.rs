//! [`ServerOptions`]: where to listen, the bearer token, limits, and the metrics handle; read from
//! the environment by [`ServerOptions::from_env`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::body::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES};
use crate::error::{Result, ServerError};
use crate::metrics::Metrics;

/// The environment variable that holds the API's bearer token.
pub const TOKEN_ENV: &str = "SOMNA_API_TOKEN";
/// The environment variable that holds the address to bind (`127.0.0.1:7878`).
pub const BIND_ENV: &str = "SOMNA_API_BIND";
/// The environment variable that holds the request body limit in bytes.
pub const MAX_BODY_ENV: &str = "SOMNA_API_MAX_BODY_BYTES";
/// The default address: loopback, port 7878.
pub const DEFAULT_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7878);

/// How the server listens and what it accepts.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address to listen on. Loopback by default; any other address needs `token`. Port 0 picks
    /// a free port ([`Server::local_addr`](crate::Server::local_addr) tells which).
    pub bind: SocketAddr,
    /// The bearer token every request but `/healthz` must carry. Required on a non-loopback
    /// address; optional on loopback (when set, it is required there too).
    pub token: Option<String>,
    /// Bodies larger than this are refused with 413 `payload_too_large`.
    pub max_body_bytes: usize,
    /// Bodies that take longer than this to arrive are refused with 408 `request_timeout`.
    pub body_timeout: Duration,
    /// HTTP worker threads (each runs its own event loop; handlers only wait on the runtime).
    pub workers: usize,
    /// How often an idle SSE stream sends a keep-alive comment.
    pub sse_keep_alive: Duration,
    /// How long shutdown waits for requests in flight before closing them.
    pub shutdown_timeout: Duration,
    /// The metrics `/metrics` renders. Wrap the LLM client with
    /// [`MeteredLlm::wrap`](crate::metrics::MeteredLlm::wrap)`(llm, &options.metrics)` before
    /// starting the runtime to get LLM latencies and errors.
    pub metrics: Metrics,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: DEFAULT_BIND,
            token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            workers: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, 4),
            sse_keep_alive: Duration::from_secs(15),
            shutdown_timeout: Duration::from_secs(5),
            metrics: Metrics::new(),
        }
    }
}

impl ServerOptions {
    /// The defaults with `bind` as the address.
    pub fn new(bind: SocketAddr) -> Self {
        ServerOptions {
            bind,
            ..ServerOptions::default()
        }
    }

    /// Sets the bearer token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The defaults, then `SOMNA_API_BIND`, `SOMNA_API_TOKEN` and `SOMNA_API_MAX_BODY_BYTES` from the
    /// process environment (empty values count as unset).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`ServerOptions::from_env`], reading variables through `var` (for tests and for callers
    /// that layer their own flags over the environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut options = ServerOptions::default();
        if let Some(bind) = get(BIND_ENV) {
            options.bind = bind
                .trim()
                .parse()
                .map_err(|e| ServerError::InvalidOption {
                    name: BIND_ENV.to_string(),
                    message: format!("{bind:?} is not an address like 127.0.0.1:7878: {e}"),
                })?;
        }
        if let Some(token) = get(TOKEN_ENV) {
            options.token = Some(token);
        }
        if let Some(max) = get(MAX_BODY_ENV) {
            options.max_body_bytes =
                max.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ServerError::InvalidOption {
                        name: MAX_BODY_ENV.to_string(),
                        message: format!("expected a positive number of bytes, got {max:?}"),
                    }
                })?;
        }
        Ok(options)
    }

    /// Checks the options: a non-loopback address needs a token; a token must be usable.
    pub fn validate(&self) -> Result<()> {
        if let Some(token) = &self.token {
            if token.is_empty() {
                return Err(ServerError::InvalidToken("it is empty".into()));
            }
            if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(ServerError::InvalidToken(
                    "it contains whitespace or control characters".into(),
                ));
            }
        } else if !self.bind.ip().is_loopback() {
            return Err(ServerError::TokenRequired(self.bind));
        }
        if self.max_body_bytes == 0 {
            return Err(ServerError::InvalidOption {
                name: "max_body_bytes".into(),
                message: "must be above zero".into(),
            });
        }
        if self.body_timeout.is_zero() {
            return Err(ServerError::InvalidOption {
                name: "body_timeout".into(),
                message: "must be above zero".into(),
            });
        }
        if self.workers == 0 {
            return Err(ServerError::InvalidOption {
                name: "workers".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<ServerOptions> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ServerOptions::from_vars(|name| map.get(name).cloned())
    }

    #[test]
    fn reads_the_environment() {
        let o = from(&[]).unwrap();
        assert_eq!(o.bind, DEFAULT_BIND);
        assert_eq!(o.token, None);
        assert_eq!(o.max_body_bytes, 1024 * 1024);
        let o = from(&[
            (BIND_ENV, "0.0.0.0:9000"),
            (TOKEN_ENV, "s3cret-token"),
            (MAX_BODY_ENV, "2048"),
        ])
        .unwrap();
        assert_eq!(o.bind.to_string(), "0.0.0.0:9000");
        assert_eq!(o.token.as_deref(), Some("s3cret-token"));
        assert_eq!(o.max_body_bytes, 2048);
        o.validate().unwrap();
        assert_eq!(from(&[(TOKEN_ENV, "  ")]).unwrap().token, None);
        let e = from(&[(BIND_ENV, "localhost")]).unwrap_err();
        assert!(e.to_string().contains(BIND_ENV), "{e}");
        assert!(from(&[(MAX_BODY_ENV, "0")]).is_err());
    }

    #[test]
    fn non_loopback_needs_a_token() {
        let o = ServerOptions::new("0.0.0.0:0".parse().unwrap());
        let e = o.validate().unwrap_err();
        assert!(matches!(e, ServerError::TokenRequired(_)));
        assert_eq!(
            e.to_string(),
            "refusing to bind 0.0.0.0:0: a non-loopback address needs a bearer token (set SOMNA_API_TOKEN)"
        );
        ServerOptions::new("[::1]:0".parse().unwrap())
            .validate()
            .unwrap();
        ServerOptions::new("0.0.0.0:0".parse().unwrap())
            .with_token("abc")
            .validate()
            .unwrap();
        let e = ServerOptions::new("127.0.0.1:0".parse().unwrap())
            .with_token("a b")
            .validate()
            .unwrap_err();
        assert!(matches!(e, ServerError::InvalidToken(_)));
    }
}
