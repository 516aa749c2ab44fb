//! somna-server: Somna's HTTP/JSON API over a running [`somna_runtime::Runtime`], for host programs
//! in any language (a MUD server in Python, an assistant backend), with Server-Sent Events and
//! Prometheus metrics. docs/api.md documents every endpoint.
//!
//! - [`server`]: [`Server`] (bind, `local_addr`, run until a shutdown future) and [`serve`].
//! - [`options`]: [`ServerOptions`] (address, bearer token, body limit, workers, metrics) and
//!   [`ServerOptions::from_env`] (`SOMNA_API_TOKEN`, `SOMNA_API_BIND`, `SOMNA_API_MAX_BODY_BYTES`).
//! - [`error`]: [`ApiError`] and its stable [`ErrorCode`]s (every error body is
//!   `{"error": {"code", "message", "fields"?}}`), and [`ServerError`] for startup.
//! - [`metrics`]: [`Metrics`], [`metrics::MeteredLlm`] (wraps the LLM client) and the Prometheus
//!   text rendering.
//! - [`openapi`]: the OpenAPI document of the API, generated from the handlers and the wire types,
//!   served at `/v1/openapi.json`.
//! - `routes`: the endpoints (`agents`: lifecycle and commands; `reads`: history, archive,
//!   search, journal, facts, events; `ops`: healthz, metrics, the SSE stream, 404/405).
//! - `auth`: the bearer-token check (constant time) and per-response counting middleware.
//! - `body`: reading bodies under the limit and parsing JSON with errors that name the field.
//! - `query`: strict query-string parsing and journal time bounds (`1d` or RFC 3339).
//! - `sse`: the event stream: filters, keep-alives, `lagged` notices, shutdown.
//!
//! Serving the API next to the runtime (inside the actix System that runs it):
//!
//! ```no_run
//! # async fn host(config: somna_core::config::ResolvedConfig, store: somna_store::Store,
//! #               llm: std::sync::Arc<dyn somna_llm::LlmClient>) -> anyhow::Result<()> {
//! use somna_server::{ServerOptions, metrics::MeteredLlm};
//! let options = ServerOptions::from_env()?; // SOMNA_API_BIND, SOMNA_API_TOKEN
//! let llm = MeteredLlm::wrap(llm, &options.metrics);
//! let runtime = somna_runtime::Runtime::start(config, store, llm, Default::default())?;
//! let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
//! somna_server::serve(runtime.clone(), options, shutdown).await?;
//! runtime.shutdown(somna_runtime::runtime::DEFAULT_GRACE).await?;
//! # Ok(()) }
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod auth;
mod body;
mod console;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod options;
mod query;
mod replay;
mod routes;
pub mod server;
mod sse;

pub use body::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES};
pub use error::{ApiError, ErrorCode, FieldError, Result, ServerError};
pub use metrics::{MeteredLlm, Metrics};
pub use options::{BIND_ENV, DEFAULT_BIND, MAX_BODY_ENV, ServerOptions, TOKEN_ENV};
pub use routes::tokens::{CreatedToken, TokenInfo, TokenList};
pub use server::{Server, serve};
