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
//! scaled one, or none at all).

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use somna_core::ToolCall;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the stub answers to one chat-completion request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 200 with this text as the assistant's content.
    Text(String),
    /// 200 with these tool calls (content `null`, finish reason `tool_calls`).
    ToolCalls(Vec<ToolCall>),
    /// 200 with this exact JSON body (for shapes the other variants do not cover).
    Json(Value),
    /// Waits this long (or until the server stops), then answers with the inner reply.
    Delay(Duration, Box<Reply>),
    /// This status (e.g. 500, 503) with this body.
    Status(u16, String),
    /// 429 with `Retry-After: <secs>` and an OpenAI-style error body.
    RateLimited {
        /// The `Retry-After` header, in seconds.
        retry_after_secs: u64,
    },
    /// 200 with a body that is not valid JSON.
    MalformedJson,
    /// 200 with an empty assistant content and no tool calls.
    EmptyContent,
    /// Reads the request, then closes the socket without any response.
    DropConnection,
    /// Reads the request and never answers (until the client gives up or the server stops).
    Hang,
    /// Sends the headers and part of the body, then stalls like [`Reply::Hang`].
    HangBody,
}

impl Reply {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// One tool call with `arguments` as JSON.
    pub fn tool_call(id: &str, name: &str, arguments: &Value) -> Reply {
        Reply::ToolCalls(vec![ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        }])
    }

    /// `reply` after `delay`.
    pub fn delayed(delay: Duration, reply: Reply) -> Reply {
        Reply::Delay(delay, Box::new(reply))
    }

    /// A text reply of at least `bytes` bytes of plain words, whatever `max_tokens` asked for.
    pub fn oversize(bytes: usize) -> Reply {
        const WORDS: &str = "the mill wheel turns and the river runs past the smithy door ";
        Reply::Text(WORDS.repeat(bytes / WORDS.len() + 1))
    }

    /// An error status with an OpenAI-style JSON error body carrying `message`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::Status(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}})
                .to_string(),
        )
    }
}

/// The `usage` the stub reports in 200 answers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum UsageReport {
    /// Honest: bytes of the messages / chars-per-token, rounded up (the default).
    #[default]
    Counted,
    /// `prompt_tokens` is always this number, whatever was sent: 100 is a server that reports far
    /// too few, 0 one that reports none.
    FixedPrompt(u32),
    /// The honest count times this factor (e.g. 50.0: far too many).
    Scaled(f64),
    /// No `usage` object in the answer at all.
    Absent,
}

/// One request the stub received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST`…
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Every header, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when it is empty or not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization` header.
    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }

    /// The requested model.
    pub fn model(&self) -> Option<&str> {
        self.body["model"].as_str()
    }

    /// The chat messages of the body (empty when there are none).
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text content of the last message with `role`.
    pub fn last_content(&self, role: &str) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == role)
            .map(content_text)
    }

    /// True for a chat-completion request.
    pub fn is_chat(&self) -> bool {
        self.path.ends_with("/chat/completions")
    }
}

type ReplyFn = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// The reply used when the script is empty.
#[derive(Clone)]
enum DefaultReply {
    Fixed(Reply),
    Computed(ReplyFn),
}

struct State {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<DefaultReply>,
    requests: Mutex<Vec<RecordedRequest>>,
    count: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    model: Mutex<String>,
    chars_per_token: Mutex<f64>,
    usage: Mutex<UsageReport>,
    next_id: AtomicUsize,
    /// True while replies are held ([`StubLlmServer::hold`]).
    held: watch::Sender<bool>,
}

/// Locks a mutex, recovering the data if a panicking test poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

impl StubLlmServer {
    /// Starts a server on `127.0.0.1:0` that answers [`DEFAULT_TEXT`] when its script is empty.
    ///
    /// # Panics
    /// When no loopback port can be bound or the server thread cannot start (a broken test machine).
    #[allow(clippy::expect_used)]
    pub fn start() -> StubLlmServer {
        Self::try_start().expect("start the stub LLM server")
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
            next_id: AtomicUsize::new(1),
            held: watch::Sender::new(false),
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

fn tokens(text: &str, chars_per_token: f64) -> u32 {
    let n = (text.len() as f64 / chars_per_token).ceil();
    if n >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        n as u32
    }
}

async fn serve(listener: TcpListener, state: Arc<State>, mut stopped: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    let _ = socket.set_nodelay(true);
                    tokio::spawn(connection(socket, state.clone(), stopped.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "stub LLM server accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stopped.changed() => return,
        }
    }
}

/// Counts a request in flight for as long as it lives (also when its task is dropped).
struct InFlight(Arc<State>);

impl InFlight {
    fn new(state: &Arc<State>) -> InFlight {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What to do with the connection after a reply.
enum After {
    KeepAlive,
    Close,
}

async fn connection(mut socket: TcpStream, state: Arc<State>, mut stopped: watch::Receiver<bool>) {
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let request = tokio::select! {
            r = read_request(&mut socket, &mut buffer) => r,
            _ = stopped.changed() => return,
        };
        let (request, wants_close) = match request {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "stub LLM server: bad request");
                let _ = write_response(
                    &mut socket,
                    400,
                    &[],
                    br#"{"error":{"message":"bad request"}}"#,
                    true,
                )
                .await;
                return;
            }
        };
        let _in_flight = InFlight::new(&state);
        state.count.fetch_add(1, Ordering::SeqCst);
        lock(&state.requests).push(request.clone());
        let reply = route(&state, &request);
        let mut held = state.held.subscribe();
        let after = tokio::select! {
            a = async {
                let _ = held.wait_for(|held| !*held).await;
                answer(&mut socket, &state, &request, reply, wants_close).await
            } => a,
            _ = stopped.changed() => return,
        };
        match after {
            After::KeepAlive if !wants_close => {}
            _ => return,
        }
    }
}

enum Route {
    Chat(Reply),
    Models,
    NotFound,
}

fn route(state: &State, request: &RecordedRequest) -> Route {
    let path = request.path.split('?').next().unwrap_or("");
    match (request.method.as_str(), path) {
        ("POST", "/v1/chat/completions") => {
            let scripted = lock(&state.script).pop_front();
            let reply = match scripted {
                Some(r) => r,
                None => {
                    let default = lock(&state.default).clone();
                    match default {
                        DefaultReply::Fixed(r) => r,
                        DefaultReply::Computed(f) => f(request),
                    }
                }
            };
            Route::Chat(reply)
        }
        ("GET", "/v1/models") => Route::Models,
        _ => Route::NotFound,
    }
}

async fn answer(
    socket: &mut TcpStream,
    state: &State,
    request: &RecordedRequest,
    route: Route,
    close: bool,
) -> After {
    let mut reply = match route {
        Route::Chat(reply) => reply,
        Route::Models => {
            let model = lock(&state.model).clone();
            let body = json!({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "somna-testkit"}]});
            return respond_json(socket, 200, &[], &body, close).await;
        }
        Route::NotFound => {
            let body = json!({"error": {"message": format!("no route for {} {}", request.method, request.path), "type": "invalid_request_error", "param": null, "code": null}});
            return respond_json(socket, 404, &[], &body, close).await;
        }
    };
    loop {
        match reply {
            Reply::Delay(delay, inner) => {
                tokio::time::sleep(delay).await;
                reply = *inner;
            }
            Reply::Text(text) => {
                let message = json!({"role": "assistant", "content": text});
                return respond_json(
                    socket,
                    200,
                    &[],
                    &completion(state, request, message, &text, "stop"),
                    close,
                )
                .await;
            }
            Reply::EmptyContent => {
                let message = json!({"role": "assistant", "content": ""});
                return respond_json(
                    socket,
                    200,
                    &[],
                    &completion(state, request, message, "", "stop"),
                    close,
                )
                .await;
            }
            Reply::ToolCalls(calls) => {
                let wire: Vec<Value> = calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                let args: String = calls.iter().map(|c| c.arguments.as_str()).collect();
                let message = json!({"role": "assistant", "content": null, "tool_calls": wire});
                return respond_json(
                    socket,
                    200,
                    &[],
                    &completion(state, request, message, &args, "tool_calls"),
                    close,
                )
                .await;
            }
            Reply::Json(body) => return respond_json(socket, 200, &[], &body, close).await,
            Reply::Status(status, body) => {
                let content_type = if body.trim_start().starts_with('{') {
                    "application/json"
                } else {
                    "text/plain"
                };
                let headers = [("content-type", content_type.to_string())];
                return finish(
                    write_response(socket, status, &headers, body.as_bytes(), close).await,
                );
            }
            Reply::RateLimited { retry_after_secs } => {
                let body = json!({"error": {"message": "rate limited by the stub", "type": "rate_limit_error", "param": null, "code": null}});
                let headers = [("retry-after", retry_after_secs.to_string())];
                return respond_json(socket, 429, &headers, &body, close).await;
            }
            Reply::MalformedJson => {
                let headers = [("content-type", "application/json".to_string())];
                let body = br#"{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"index": 0, "message": "#;
                return finish(write_response(socket, 200, &headers, body, close).await);
            }
            Reply::DropConnection => return After::Close,
            Reply::Hang => {
                wait_for_close(socket).await;
                return After::Close;
            }
            Reply::HangBody => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"id\": \"chatcmpl-stalled\", ";
                if socket.write_all(head.as_bytes()).await.is_ok() {
                    let _ = socket.flush().await;
                    wait_for_close(socket).await;
                }
                return After::Close;
            }
        }
    }
}

/// Waits until the client closes the connection.
async fn wait_for_close(socket: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    loop {
        match socket.read(&mut sink).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn completion(
    state: &State,
    request: &RecordedRequest,
    message: Value,
    completion_text: &str,
    finish: &str,
) -> Value {
    let chars_per_token = *lock(&state.chars_per_token);
    let prompt: String = request.messages().iter().map(content_text).collect();
    let counted = tokens(&prompt, chars_per_token);
    let completion_tokens = tokens(completion_text, chars_per_token);
    let usage = *lock(&state.usage);
    let prompt_tokens = match usage {
        UsageReport::Counted | UsageReport::Absent => counted,
        UsageReport::FixedPrompt(n) => n,
        UsageReport::Scaled(factor) => (f64::from(counted) * factor)
            .ceil()
            .min(f64::from(u32::MAX)) as u32,
    };
    let model = request
        .model()
        .map(str::to_string)
        .unwrap_or_else(|| lock(&state.model).clone());
    let id = state.next_id.fetch_add(1, Ordering::SeqCst);
    let mut body = json!({
        "id": format!("chatcmpl-stub-{id}"),
        "object": "chat.completion",
        "created": 1_795_000_000u32,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    });
    if usage != UsageReport::Absent {
        body["usage"] = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens.saturating_add(completion_tokens)
        });
    }
    body
}

/// The text of a message's `content` (a string, or the text parts of an array).
fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

async fn respond_json(
    socket: &mut TcpStream,
    status: u16,
    extra: &[(&str, String)],
    body: &Value,
    close: bool,
) -> After {
    let mut headers = vec![("content-type", "application/json".to_string())];
    headers.extend(extra.iter().cloned());
    finish(write_response(socket, status, &headers, body.to_string().as_bytes(), close).await)
}

fn finish(written: std::io::Result<()>) -> After {
    match written {
        Ok(()) => After::KeepAlive,
        Err(_) => After::Close,
    }
}

async fn write_response(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n", body.len()));
    if close {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    socket.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Most bytes a request head may take.
const MAX_HEAD: usize = 64 * 1024;
/// Most bytes a request body may take.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Reads one request (head and body). `Ok(None)` when the client closed the connection between requests.
/// The flag is true when the client asked to close the connection after this request.
async fn read_request(
    socket: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<(RecordedRequest, bool)>> {
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    // Read until the head is complete.
    let head_len = loop {
        if let Some(i) = find(buffer, b"\r\n\r\n") {
            break i + 4;
        }
        if buffer.len() > MAX_HEAD {
            return Err(invalid("request head too large"));
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return if buffer.is_empty() {
                Ok(None)
            } else {
                Err(invalid("connection closed mid-request"))
            };
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let mut raw_headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut raw_headers);
    let status = parsed
        .parse(&buffer[..head_len])
        .map_err(|e| invalid(&e.to_string()))?;
    if status.is_partial() {
        return Err(invalid("incomplete request head"));
    }
    let method = parsed.method.unwrap_or("").to_string();
    let path = parsed.path.unwrap_or("").to_string();
    let version = parsed.version.unwrap_or(1);
    let headers: Vec<(String, String)> = parsed
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let wants_close = match header("connection") {
        Some(v) => v.contains("close"),
        None => version == 0,
    };
    buffer.drain(..head_len);
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(socket, buffer).await?
    } else {
        let length: usize = match header("content-length") {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| invalid("bad content-length"))?,
            None => 0,
        };
        if length > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        fill(socket, buffer, length).await?;
        buffer.drain(..length).collect()
    };
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&raw_body).unwrap_or(Value::Null);
    Ok(Some((
        RecordedRequest {
            method,
            path,
            headers,
            body,
            raw_body,
        },
        wants_close,
    )))
}

/// Reads until `buffer` holds at least `n` bytes.
async fn fill(socket: &mut TcpStream, buffer: &mut Vec<u8>, n: usize) -> std::io::Result<()> {
    while buffer.len() < n {
        let mut chunk = [0u8; 8192];
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed mid-body",
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Ok(())
}

/// Decodes a chunked body (chunk extensions and trailers are skipped).
async fn read_chunked(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buffer, b"\r\n") {
                break i;
            }
            let want = buffer.len() + 1;
            fill(socket, buffer, want).await?;
        };
        let line = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        buffer.drain(..line_end + 2);
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let end = loop {
                    if let Some(i) = find(buffer, b"\r\n") {
                        break i;
                    }
                    let want = buffer.len() + 1;
                    fill(socket, buffer, want).await?;
                };
                buffer.drain(..end + 2);
                if end == 0 {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        fill(socket, buffer, size + 2).await?;
        body.extend_from_slice(&buffer[..size]);
        buffer.drain(..size + 2);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
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
