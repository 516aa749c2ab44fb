//! [`StubLlmServer`]: a real OpenAI-compatible HTTP/1.1 server on `127.0.0.1:0`, for tests.
//!
//! It is a small hand-written server on tokio (its own thread, its own runtime) rather than actix-web, so
//! that faults are faithful: [`Reply::DropConnection`] closes the socket after reading the request without a
//! byte of response, [`Reply::Hang`] never answers, [`Reply::HangBody`] sends headers and half a body and
//! then stalls. Connections are kept alive between requests like a real server's.
//!
//! Replies come from a script consumed in order ([`StubLlmServer::push`]); when it is empty, the default
//! reply answers (a fixed [`Reply`] or a closure over the request). Every request is recorded (method,
//! path, headers, parsed JSON body), counted, and the most requests in flight at once is tracked.
//!
//! Usage in responses: `prompt_tokens` = bytes of all message contents / `chars_per_token` (4 unless set),
//! rounded up; `completion_tokens` likewise for the reply, so token calibration can be tested. A server
//! that lies about usage is one [`StubLlmServer::set_usage`] away ([`UsageReport`]: a fixed count, a
//! scaled one, or none at all). It can report cached prompt tokens ([`CacheReport`]) and refuse
//! `response_format` like a server without structured output ([`ResponseFormats`]).
//!
//! - this file: [`StubLlmServer`], its settings and what it recorded.
//! - `invent.rs`: [`inventing_reply`], a model that invents names, prices, IDs and dates on
//!   purpose ([`StubLlmServer::set_inventing`]).
//! - `reply.rs`: the vocabulary of a script: [`Reply`], [`UsageReport`], [`CacheReport`],
//!   [`ResponseFormats`], [`RecordedRequest`].
//! - `serve.rs`: the accept loop, one task per connection, routing, and the answer to each [`Reply`].
//! - `http.rs`: HTTP/1.1 on the socket: reading a request (lengths and chunked bodies), writing a
//!   response.

mod http;
mod invent;
mod reply;
mod serve;

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use invent::{INVENTED, inventing_reply};
pub use reply::{CacheReport, RecordedRequest, Reply, ResponseFormats, UsageReport};
use serve::serve;

type ReplyFn = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// The reply used when the script is empty.
#[derive(Clone)]
pub(crate) enum DefaultReply {
    Fixed(Reply),
    Computed(ReplyFn),
}

pub(crate) struct State {
    pub(crate) script: Mutex<VecDeque<Reply>>,
    pub(crate) default: Mutex<DefaultReply>,
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    pub(crate) count: AtomicUsize,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) max_in_flight: AtomicUsize,
    pub(crate) model: Mutex<String>,
    pub(crate) chars_per_token: Mutex<f64>,
    pub(crate) usage: Mutex<UsageReport>,
    pub(crate) cache: Mutex<CacheReport>,
    pub(crate) response_formats: Mutex<ResponseFormats>,
    /// The prompt text of the last chat request answered (for [`CacheReport::CommonPrefix`]).
    pub(crate) last_prompt: Mutex<String>,
    pub(crate) next_id: AtomicUsize,
    /// True while replies are held ([`StubLlmServer::hold`]).
    pub(crate) held: watch::Sender<bool>,
    /// How `POST /v1/embeddings` answers.
    pub(crate) embeddings: Mutex<Embeddings>,
}

/// How the stub answers `POST /v1/embeddings` ([`StubLlmServer::set_embeddings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embeddings {
    /// Deterministic vectors of this many dimensions: each word (lower-cased alphanumeric run of
    /// two or more characters) adds ±1 at a dimension its hash picks, so texts that share words
    /// are close ([`hashed_embedding`]).
    Hashed(usize),
    /// A well-formed answer with one vector too few.
    OneShort,
    /// Vectors that hold a NaN.
    NotANumber,
    /// This HTTP status with an OpenAI-style error body.
    Status(u16),
}

/// The stub's deterministic embedding of `text` in `dims` dimensions (see [`Embeddings::Hashed`]),
/// not normalized. Tests compute what the server sent with it.
pub fn hashed_embedding(text: &str, dims: usize) -> Vec<f32> {
    let dims = dims.max(1);
    let mut v = vec![0.0f32; dims];
    // A constant component, so that a text with no word is not the zero vector.
    v[0] = 0.25;
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let at = usize::try_from(h % dims as u64).unwrap_or(0);
        v[at] += if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
    }
    v
}

/// Locks a mutex, recovering the data if a panicking test poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running stub server. Stops (and joins its thread) on drop.
pub struct StubLlmServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for StubLlmServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StubLlmServer")
            .field("addr", &self.addr)
            .field("requests", &self.request_count())
            .finish_non_exhaustive()
    }
}

/// The text the default reply gives until a test sets another.
pub const DEFAULT_TEXT: &str = "stub reply";

/// The model the stub names when a request names none.
pub const DEFAULT_MODEL: &str = "stub-model";

/// The dimensions of the stub's embeddings until a test sets others.
pub const DEFAULT_EMBEDDING_DIMS: usize = 64;

impl StubLlmServer {
    /// Starts a server on `127.0.0.1:0` that answers [`DEFAULT_TEXT`] when its script is empty.
    ///
    /// # Panics
    /// When no loopback port can be bound or the server thread cannot start (a broken test machine).
    #[allow(clippy::expect_used)]
    pub fn start() -> StubLlmServer {
        Self::try_start().expect("start the stub LLM server")
    }

    /// Starts a server (see [`StubLlmServer::start`]) that answers `reply` whenever its script is
    /// empty: [`StubLlmServer::set_default`] from the first request on.
    pub fn answering(reply: Reply) -> StubLlmServer {
        let server = Self::start();
        server.set_default(reply);
        server
    }

    /// Like [`StubLlmServer::start`], returning the error instead of panicking.
    pub fn try_start() -> std::io::Result<StubLlmServer> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(DefaultReply::Fixed(Reply::text(DEFAULT_TEXT))),
            requests: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            model: Mutex::new(DEFAULT_MODEL.to_string()),
            chars_per_token: Mutex::new(4.0),
            usage: Mutex::new(UsageReport::Counted),
            cache: Mutex::new(CacheReport::Absent),
            response_formats: Mutex::new(ResponseFormats::Accepted),
            last_prompt: Mutex::new(String::new()),
            next_id: AtomicUsize::new(1),
            held: watch::Sender::new(false),
            embeddings: Mutex::new(Embeddings::Hashed(DEFAULT_EMBEDDING_DIMS)),
        });
        let (stop, stopped) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("stub-llm-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, thread_state, stopped).await,
                        Err(e) => tracing::error!(error = %e, "stub LLM server cannot listen"),
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        tracing::debug!(%addr, "stub LLM server started");
        Ok(StubLlmServer {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// The OpenAI base URL, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) -> &Self {
        lock(&self.state.script).push_back(reply);
        self
    }

    /// Appends several replies to the script.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) -> &Self {
        lock(&self.state.script).extend(replies);
        self
    }

    /// Replies still waiting in the script.
    pub fn pending_replies(&self) -> usize {
        lock(&self.state.script).len()
    }

    /// The reply used whenever the script is empty.
    pub fn set_default(&self, reply: Reply) -> &Self {
        *lock(&self.state.default) = DefaultReply::Fixed(reply);
        self
    }

    /// A reply computed from each request whenever the script is empty.
    pub fn set_default_fn(
        &self,
        f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> &Self {
        *lock(&self.state.default) = DefaultReply::Computed(Arc::new(f));
        self
    }

    /// Answers every request the script does not as a model that invents on purpose
    /// ([`inventing_reply`]): memory requests get well-formed answers whose items carry the
    /// [`INVENTED`] values beside true ones.
    pub fn set_inventing(&self) -> &Self {
        self.set_default_fn(inventing_reply)
    }

    /// How `POST /v1/embeddings` answers from now on (by default [`Embeddings::Hashed`] of
    /// [`DEFAULT_EMBEDDING_DIMS`]).
    pub fn set_embeddings(&self, embeddings: Embeddings) -> &Self {
        *lock(&self.state.embeddings) = embeddings;
        self
    }

    /// The model `/v1/models` lists (and responses name when the request names none).
    pub fn set_model(&self, model: impl Into<String>) -> &Self {
        *lock(&self.state.model) = model.into();
        self
    }

    /// How many bytes make one token in reported usage (4 by default).
    pub fn set_chars_per_token(&self, chars_per_token: f64) -> &Self {
        *lock(&self.state.chars_per_token) = chars_per_token.max(0.01);
        self
    }

    /// What `usage` later answers report (honest [`UsageReport::Counted`] by default).
    pub fn set_usage(&self, usage: UsageReport) -> &Self {
        *lock(&self.state.usage) = usage;
        self
    }

    /// What `usage.prompt_tokens_details.cached_tokens` later answers report (none by default).
    pub fn set_cache_report(&self, cache: CacheReport) -> &Self {
        *lock(&self.state.cache) = cache;
        self
    }

    /// How later requests with a `response_format` are treated (accepted by default).
    pub fn set_response_formats(&self, formats: ResponseFormats) -> &Self {
        *lock(&self.state.response_formats) = formats;
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// The latest request.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        lock(&self.state.requests).last().cloned()
    }

    /// How many requests arrived (every path).
    pub fn request_count(&self) -> usize {
        self.state.count.load(Ordering::SeqCst)
    }

    /// Requests being answered right now.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests that were in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Holds every reply from now on: requests are received, recorded and counted in flight, then
    /// wait until [`StubLlmServer::release`]. A test that must act while a call is in flight holds,
    /// waits for the request ([`StubLlmServer::wait_for_requests`]), acts, then releases, so no
    /// timing decides whether the call was still in flight.
    pub fn hold(&self) -> &Self {
        self.state.held.send_replace(true);
        self
    }

    /// Lets the held replies go, and the later ones answer at once again.
    pub fn release(&self) -> &Self {
        self.state.held.send_replace(false);
        self
    }

    /// Waits until at least `n` requests arrived, or `timeout` passed; true when they did.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.request_count() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// The usage the stub reports for `text`: bytes / chars-per-token, rounded up.
    pub fn tokens_of(&self, text: &str) -> u32 {
        tokens(text, *lock(&self.state.chars_per_token))
    }
}

impl Drop for StubLlmServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        tracing::debug!(addr = %self.addr, "stub LLM server stopped");
    }
}

pub(crate) fn tokens(text: &str, chars_per_token: f64) -> u32 {
    let n = (text.len() as f64 / chars_per_token).ceil();
    if n >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        n as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::io::{Read, Write};

    /// Sends raw bytes and reads until the server closes or `timeout` passes.
    fn exchange(addr: SocketAddr, request: &str, timeout: Duration) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(timeout)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn post(body: &str) -> String {
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"12345678"}]}"#;

    #[test]
    fn answers_text_with_usage_and_records_the_request() {
        let server = StubLlmServer::start();
        server.push(Reply::text("hello there"));
        let response = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        let body: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "hello there");
        assert_eq!(body["usage"]["prompt_tokens"], 2);
        assert_eq!(body["usage"]["completion_tokens"], 3);
        assert_eq!(body["model"], "m");
        let recorded = server.last_request().unwrap();
        assert_eq!(recorded.path, "/v1/chat/completions");
        assert_eq!(recorded.authorization(), Some("Bearer k"));
        assert_eq!(recorded.last_content("user").as_deref(), Some("12345678"));
        assert_eq!(server.request_count(), 1);
        assert_eq!(server.max_in_flight(), 1);
        assert_eq!(server.in_flight(), 0);
    }

    #[test]
    fn default_reply_closure_sees_the_request() {
        let server = StubLlmServer::start();
        server.set_default_fn(|r| {
            Reply::text(format!(
                "echo {}",
                r.last_content("user").unwrap_or_default()
            ))
        });
        let response = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
        assert!(response.contains("echo 12345678"), "{response}");
    }

    #[test]
    fn chunked_bodies_and_models_and_unknown_paths() {
        let server = StubLlmServer::start();
        server.set_model("tiny");
        let chunked = format!(
            "POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
            BODY.len(),
            BODY
        );
        let response = exchange(server.addr(), &chunked, Duration::from_secs(5));
        assert!(response.contains(DEFAULT_TEXT), "{response}");
        assert_eq!(server.last_request().unwrap().model(), Some("m"));
        let models = exchange(
            server.addr(),
            "GET /v1/models HTTP/1.1\r\nconnection: close\r\n\r\n",
            Duration::from_secs(5),
        );
        assert!(models.contains(r#""id":"tiny""#), "{models}");
        let missing = exchange(
            server.addr(),
            "GET /nope HTTP/1.1\r\nconnection: close\r\n\r\n",
            Duration::from_secs(5),
        );
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        assert_eq!(server.request_count(), 3);
    }

    #[test]
    fn keeps_connections_alive() {
        let server = StubLlmServer::start();
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let keep = post(BODY).replace("connection: close\r\n", "");
        for _ in 0..2 {
            s.write_all(keep.as_bytes()).unwrap();
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            while !String::from_utf8_lossy(&got).contains("total_tokens") {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&chunk[..n]);
            }
        }
        assert_eq!(server.request_count(), 2);
    }

    #[test]
    fn faults_are_faithful() {
        let server = StubLlmServer::start();
        server.push_all([
            Reply::DropConnection,
            Reply::RateLimited {
                retry_after_secs: 7,
            },
            Reply::Status(503, "overloaded".into()),
            Reply::MalformedJson,
            Reply::Hang,
        ]);
        assert_eq!(
            exchange(server.addr(), &post(BODY), Duration::from_secs(5)),
            ""
        );
        let limited = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
        assert!(limited.starts_with("HTTP/1.1 429"), "{limited}");
        assert!(limited.contains("retry-after: 7\r\n"), "{limited}");
        let unavailable = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
        assert!(
            unavailable.starts_with("HTTP/1.1 503") && unavailable.ends_with("overloaded"),
            "{unavailable}"
        );
        let malformed = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
        let malformed_body = malformed.split("\r\n\r\n").nth(1).unwrap();
        assert!(serde_json::from_str::<Value>(malformed_body).is_err());
        // A hung request gets nothing until the client gives up; it stays in flight meanwhile.
        let hung = exchange(server.addr(), &post(BODY), Duration::from_millis(300));
        assert_eq!(hung, "");
        assert_eq!(server.request_count(), 5);
        assert_eq!(server.pending_replies(), 0);
    }

    #[test]
    fn usage_can_lie_or_be_absent() {
        let server = StubLlmServer::start();
        let usage = |server: &StubLlmServer| {
            let response = exchange(server.addr(), &post(BODY), Duration::from_secs(5));
            let body: Value =
                serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            body["usage"].clone()
        };
        assert_eq!(usage(&server)["prompt_tokens"], 2);
        server.set_usage(UsageReport::FixedPrompt(100));
        assert_eq!(usage(&server)["prompt_tokens"], 100);
        server.set_usage(UsageReport::FixedPrompt(0));
        assert_eq!(usage(&server)["prompt_tokens"], 0);
        server.set_usage(UsageReport::Scaled(50.0));
        assert_eq!(usage(&server)["prompt_tokens"], 100);
        server.set_usage(UsageReport::Absent);
        assert_eq!(usage(&server), Value::Null);
        assert!(matches!(Reply::oversize(200_000), Reply::Text(t) if t.len() >= 200_000));
    }

    #[test]
    fn reports_cached_tokens_on_demand() {
        let server = StubLlmServer::start();
        let details = |server: &StubLlmServer, body: &str| {
            let response = exchange(server.addr(), &post(body), Duration::from_secs(5));
            let body: Value =
                serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            body["usage"]["prompt_tokens_details"].clone()
        };
        assert_eq!(details(&server, BODY), Value::Null);
        server.set_cache_report(CacheReport::Fixed(1));
        assert_eq!(details(&server, BODY)["cached_tokens"], 1);
        server.set_cache_report(CacheReport::CommonPrefix);
        // "12345678" after "12345678": all 8 bytes, 2 tokens; then "1234abcd": 4 bytes, 1 token.
        assert_eq!(details(&server, BODY)["cached_tokens"], 2);
        let other = BODY.replace("12345678", "1234abcd");
        assert_eq!(details(&server, &other)["cached_tokens"], 1);
    }

    #[test]
    fn refuses_response_formats_on_demand() {
        let server = StubLlmServer::start();
        // The answer to a request that asks for `kind` of response format.
        let asking_for = |kind: &str| {
            let body = BODY.replace(
                r#""messages""#,
                &format!(r#""response_format":{{"type":"{kind}"}},"messages""#),
            );
            exchange(server.addr(), &post(&body), Duration::from_secs(5))
        };
        server.push(Reply::text("scripted"));
        server.set_response_formats(ResponseFormats::Rejected);
        let refused = asking_for("json_schema");
        assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
        assert!(refused.contains("response_format"), "{refused}");
        assert_eq!(
            server.last_request().unwrap().response_format(),
            Some("json_schema")
        );
        // The refusal consumed no scripted reply.
        assert_eq!(server.pending_replies(), 1);
        server.set_response_formats(ResponseFormats::LlamaCppPython);
        let refused = asking_for("json_schema");
        assert!(refused.starts_with("HTTP/1.1 500"), "{refused}");
        let accepted = asking_for("json_object");
        assert!(accepted.contains("scripted"), "{accepted}");
    }

    #[test]
    fn held_replies_wait_for_the_release() {
        let server = StubLlmServer::start();
        server.hold();
        let addr = server.addr();
        let call = std::thread::spawn(move || exchange(addr, &post(BODY), Duration::from_secs(10)));
        let started = std::time::Instant::now();
        while server.in_flight() == 0 && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.request_count(), 1);
        assert!(!call.is_finished(), "received, not answered");
        server.release();
        let response = call.join().unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    }

    #[test]
    fn stops_on_drop_even_with_a_hung_request() {
        let server = StubLlmServer::start();
        server.set_default(Reply::Hang);
        let addr = server.addr();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(post(BODY).as_bytes()).unwrap();
        let started = std::time::Instant::now();
        while server.in_flight() == 0 && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.in_flight(), 1);
        drop(server);
        // The listener is gone: nothing accepts on the port any more.
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}
