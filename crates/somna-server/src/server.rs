//! [`Server`]: binds the listener, builds the actix-web app over a [`Runtime`], runs until the
//! injected shutdown future resolves, then stops gracefully (SSE streams end at once, requests in
//! flight get `shutdown_timeout`). [`serve`] is the whole job in one call.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::middleware::{NormalizePath, from_fn};
use actix_web::{App, HttpServer, web};
use somna_runtime::{Runtime, Stamped};

use crate::replay::{REPLAY_EVENTS, Replay};
use tokio::sync::{broadcast, watch};

use crate::auth;
use crate::body::BodyLimits;
use crate::error::{Result, ServerError};
use crate::metrics::Metrics;
use crate::options::ServerOptions;
use crate::routes;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The runtime the API drives.
    pub(crate) runtime: Runtime,
    /// Counters for `/metrics`.
    pub(crate) metrics: Metrics,
    /// The admin bearer token, when one is required.
    pub(crate) token: Option<String>,
    /// The store's scoped tokens, cached (see `auth`).
    pub(crate) tokens: auth::Tokens,
    /// The request body limits.
    pub(crate) body: BodyLimits,
    /// How often idle SSE streams send a keep-alive comment.
    pub(crate) sse_keep_alive: Duration,
    /// Turns true when the server shuts down (SSE streams end).
    pub(crate) shutdown: watch::Receiver<bool>,
    /// The live stream's ids and its newest events, for clients that reconnect.
    pub(crate) replay: Arc<Replay>,
}

/// A bound, not yet running, API server. [`Server::local_addr`] tells where it listens (useful with
/// port 0); [`Server::run`] serves until the shutdown future resolves.
pub struct Server {
    addr: SocketAddr,
    server: actix_web::dev::Server,
    stop_streams: watch::Sender<bool>,
    events: broadcast::Receiver<Stamped>,
    metrics: Metrics,
    replay: Arc<Replay>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Validates `options` (a non-loopback address needs a token) and binds the listener. Call
    /// inside the actix System that runs the runtime. Connections queue until [`Server::run`].
    pub fn bind(runtime: Runtime, options: ServerOptions) -> Result<Server> {
        options.validate()?;
        let io = |source| ServerError::Io {
            addr: options.bind,
            source,
        };
        let listener = std::net::TcpListener::bind(options.bind).map_err(io)?;
        let addr = listener.local_addr().map_err(io)?;
        let (stop_streams, shutdown) = watch::channel(false);
        // Subscribe before serving so that the metrics count every event from now on, and the
        // live stream numbers it.
        let events = runtime.subscribe();
        let boot = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let replay = Arc::new(Replay::new(format!("{boot:x}"), REPLAY_EVENTS));
        let state = web::Data::new(AppState {
            runtime,
            metrics: options.metrics.clone(),
            token: options.token.clone(),
            tokens: auth::Tokens::default(),
            body: BodyLimits {
                max_bytes: options.max_body_bytes,
                timeout: options.body_timeout,
            },
            sse_keep_alive: options.sse_keep_alive,
            shutdown,
            replay: replay.clone(),
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .wrap(from_fn(auth::middleware))
                .wrap(NormalizePath::trim())
                .configure(crate::console::configure)
                .configure(routes::configure)
        })
        .workers(options.workers)
        .disable_signals()
        .shutdown_timeout(options.shutdown_timeout.as_secs().max(1))
        .listen(listener)
        .map_err(|source| ServerError::Io { addr, source })?
        .run();
        tracing::info!(%addr, auth = options.token.is_some(), "API server listening");
        Ok(Server {
            addr,
            server,
            stop_streams,
            events,
            metrics: options.metrics,
            replay,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` resolves, then stops gracefully: SSE streams end, requests in flight
    /// get `shutdown_timeout` to finish. The runtime itself is not shut down (its owner does that).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let Server {
            addr,
            server,
            stop_streams,
            events,
            metrics,
            replay,
        } = self;
        let handle = server.handle();
        let counting = actix_web::rt::spawn(record_events(events, metrics, replay));
        tokio::pin!(server, shutdown);
        let ended = tokio::select! {
            result = &mut server => Some(result),
            () = &mut shutdown => None,
        };
        let result = match ended {
            Some(result) => result,
            None => {
                tracing::info!(%addr, "API server shutting down");
                let _ = stop_streams.send(true);
                // The stop command is sent at once; the server future handles it, so it must be
                // polled (awaiting the handle's future alone would wait forever).
                let (_, result) = futures::join!(handle.stop(true), server);
                result
            }
        };
        counting.abort();
        tracing::info!(%addr, "API server stopped");
        result.map_err(|source| ServerError::Io { addr, source })
    }
}

/// Feeds every runtime event to the metrics and to the live stream (which numbers and keeps it)
/// until the runtime's event bus closes.
async fn record_events(
    mut events: broadcast::Receiver<Stamped>,
    metrics: Metrics,
    replay: Arc<Replay>,
) {
    loop {
        match events.recv().await {
            Ok(stamped) => {
                metrics.observe_event(&stamped.event);
                replay.record(stamped);
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                metrics.missed_events(false, n);
                replay.lost(n);
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Binds and serves the API over `runtime` until `shutdown` resolves (see [`Server`]). Call inside
/// the actix System that runs the runtime.
pub async fn serve(
    runtime: Runtime,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    Server::bind(runtime, options)?.run(shutdown).await
}
