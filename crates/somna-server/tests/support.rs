//! Shared fixtures: a runtime plus a real API server on loopback, a real HTTP client, an SSE reader.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use somna_core::config::{Provider, ResolvedConfig};
use somna_llm::{BuiltinClient, LlmClient};
use somna_runtime::{Runtime, RuntimeOptions};
use somna_server::{MeteredLlm, Server, ServerOptions};
use somna_store::Store;
use somna_testkit::StubLlmServer;
use tokio::sync::oneshot;

/// A config whose agents tick every 20 ms and keep only a short verbatim tail, so that a forced
/// compaction has a body after a dozen messages.
pub const FAST: &str = r#"
[defaults]
persona = "You are Wren, the steward of Millbrook."
tick_every = "20ms"
tool_timeout = "30s"

[defaults.compaction]
preserve_messages = 4
preserve_ratio = 0.0
min_compact_batch = 2
"#;

/// The `[llm]` section of a runtime.toml whose model is served by `stub`: no retries, 10 s a
/// request. More `[llm]` keys may follow it.
pub fn stub_llm(stub: &StubLlmServer) -> String {
    format!(
        r#"
[llm]
provider = "openai"
model = "stub-model"
base_url = "{}"
max_retries = 0
timeout = "10s"
"#,
        stub.base_url()
    )
}

/// One agent, `keeper` ([`somna_testkit::KEEPER`]), with one host tool, `open_door`, served by
/// `stub`.
pub fn keeper_config(stub: &StubLlmServer) -> String {
    format!(
        "{}\n[defaults]\ntick_every = \"20ms\"\n{}",
        stub_llm(stub),
        somna_testkit::KEEPER
    )
}

/// A stub LLM server that answers summary requests with a short summary of Tobias's rye harvest
/// and every chat turn with `reply`.
pub fn summarizing_stub(reply: &'static str) -> StubLlmServer {
    let stub = StubLlmServer::start();
    stub.set_default_fn(move |req| {
        if req.asks_for_summary() {
            somna_testkit::Reply::text(
                "## Topic arc\n- Tobias talked about the rye harvest.\n## Decisions\n(none)",
            )
        } else {
            somna_testkit::Reply::text(reply)
        }
    });
    stub
}

/// How long any wait in a test may take before it fails (a hang guard, not a timing assertion).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A running runtime with the API in front of it.
pub struct TestServer {
    pub base: String,
    pub runtime: Runtime,
    pub client: reqwest::Client,
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<somna_server::Result<()>>>,
}

/// The string at `pointer` (a JSON pointer, `/role`) of each item of the array `list`.
pub fn strs<'a>(list: &'a Value, pointer: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|item| {
            item.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no string at {pointer} in {item}"))
        })
        .collect()
}

/// What a request came back with.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    /// The body as JSON (panics with the text when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// The error code of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {:?}", self.text))
            .to_string()
    }

    /// Asserts the status of an answer without a body to read (a 204).
    #[track_caller]
    pub fn expect_status(&self, status: u16) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text);
    }

    /// Asserts the status and, for errors, the code; returns the JSON body.
    #[track_caller]
    pub fn expect(&self, status: u16, code: Option<&str>) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text);
        if let Some(code) = code {
            assert_eq!(self.code(), code, "body: {}", self.text);
        }
        self.json()
    }
}

impl TestServer {
    /// The builtin LLM, `config` as runtime.toml, default server options.
    pub async fn start(config: &str) -> TestServer {
        Self::start_with(config, None, |_| {}).await
    }

    /// `config` as runtime.toml with the LLM client its `[llm]` section names (an OpenAI-compatible
    /// server: [`stub_llm`]'s), and the API with `options` adjusted by `adjust`.
    /// The builtin LLM, `FAST` config and one agent, `wren`.
    pub async fn with_wren() -> TestServer {
        let s = TestServer::start(FAST).await;
        s.create("wren").await;
        s
    }

    /// The builtin LLM, `FAST` config and one agent, `wren`; bodies of at most 1,024 bytes, each
    /// awaited at most `body_timeout`.
    pub async fn start_small_bodies(body_timeout: Duration) -> TestServer {
        let s = TestServer::start_with(FAST, None, |o| {
            o.max_body_bytes = 1024;
            o.body_timeout = body_timeout;
        })
        .await;
        s.create("wren").await;
        s
    }

    pub async fn start_served(config: &str, adjust: impl FnOnce(&mut ServerOptions)) -> TestServer {
        let resolved = ResolvedConfig::load(config, "test.toml", &[]).unwrap();
        assert_eq!(resolved.llm.provider, Provider::Openai);
        let llm = somna_llm::build_client(&resolved.llm, &|_| None).unwrap();
        Self::start_with(config, Some(llm), adjust).await
    }

    /// Starts a runtime over a temporary store with `llm` (the builtin when `None`, always wrapped
    /// in `MeteredLlm`) and the API with `options` adjusted by `adjust`.
    pub async fn start_with(
        config: &str,
        llm: Option<Arc<dyn LlmClient>>,
        adjust: impl FnOnce(&mut ServerOptions),
    ) -> TestServer {
        if let Ok(filter) = std::env::var("SOMNA_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .try_init();
        }
        let config = ResolvedConfig::load(config, "test.toml", &[]).unwrap();
        let mut options = ServerOptions::new("127.0.0.1:0".parse().unwrap());
        options.workers = 1;
        options.sse_keep_alive = Duration::from_millis(500);
        adjust(&mut options);
        let llm = llm.unwrap_or_else(|| Arc::new(BuiltinClient::new()));
        let llm = MeteredLlm::wrap(llm, &options.metrics);
        let runtime = Runtime::start(
            config,
            Store::temporary().unwrap(),
            llm,
            RuntimeOptions {
                schedule_sleeps: false,
                arbiters: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let server = Server::bind(runtime.clone(), options.clone()).unwrap();
        let base = format!("http://{}", server.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let served = actix_rt::spawn(server.run(async {
            let _ = stopped.await;
        }));
        TestServer {
            base,
            runtime,
            client: client(),
            token: options.token.clone(),
            stop: Some(stop),
            served: Some(served),
        }
    }

    /// Sends a request with the server's token (when it has one).
    pub async fn call(&self, method: Method, path: &str, body: Option<&str>) -> Answer {
        self.call_as(self.token.as_deref(), method, path, body)
            .await
    }

    /// Sends a request with `token` (none when `None`).
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<&str>,
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        answer(req.send().await.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    /// Asserts that a GET of `path` is refused with 400 `bad_request`; returns the error body.
    pub async fn bad_request(&self, path: &str) -> Value {
        let answer = self.get(path).await;
        assert_eq!(answer.status.as_u16(), 400, "GET {path}: {}", answer.text);
        assert_eq!(answer.code(), "bad_request", "GET {path}: {}", answer.text);
        answer.json()
    }

    /// Asserts that a GET of `path` is refused with 400 `bad_request` naming `field` first;
    /// returns the error body.
    pub async fn bad_request_naming(&self, path: &str, field: &str) -> Value {
        let e = self.bad_request(path).await;
        assert_eq!(e["error"]["fields"][0]["field"], field, "GET {path}: {e}");
        e
    }

    /// Asserts that a GET of each of `paths` is refused with 400 `bad_request`.
    pub async fn bad_requests(&self, paths: &[&str]) {
        for path in paths {
            self.bad_request(path).await;
        }
    }

    pub async fn post(&self, path: &str, body: &str) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: &str) -> Answer {
        self.call(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.call(Method::DELETE, path, None).await
    }

    /// Sends `body` by `method` to `path`, expects a 422 `invalid_config` whose first field is
    /// `field`, and returns the error body.
    pub async fn refused_naming(
        &self,
        method: Method,
        path: &str,
        body: &str,
        field: &str,
    ) -> Value {
        let e = self
            .call(method, path, Some(body))
            .await
            .expect(422, Some("invalid_config"));
        assert_eq!(e["error"]["fields"][0]["field"], field, "{body}");
        e
    }

    /// Creates an agent through the API.
    pub async fn create(&self, id: &str) {
        self.post("/v1/agents", &format!(r#"{{"id": "{id}"}}"#))
            .await
            .expect(201, None);
    }

    /// Sends one input and expects 202.
    pub async fn input(&self, id: &str, body: Value) {
        self.post(&format!("/v1/agents/{id}/input"), &body.to_string())
            .await
            .expect(202, None);
    }

    /// Compacts, retrying while the agent is busy with a step; returns the outcome.
    pub async fn compact(&self, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let a = self
                .post(&format!("/v1/agents/{id}/compact"), r#"{"force": true}"#)
                .await;
            if a.status == StatusCode::CONFLICT && tokio::time::Instant::now() < deadline {
                assert_eq!(a.code(), "busy");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            return a.expect(200, None);
        }
    }

    /// Waits until `check` holds for the agent's status.
    pub async fn wait_status(&self, id: &str, check: impl Fn(&Value) -> bool) -> Value {
        self.wait_get(&format!("/v1/agents/{id}"), check).await
    }

    /// Polls a GET of `path` (each answered 200) until `check` holds for the body; returns it.
    pub async fn wait_get(&self, path: &str, check: impl Fn(&Value) -> bool) -> Value {
        somna_testkit::poll_until(
            PATIENCE,
            Duration::from_millis(20),
            move || async move { self.get(path).await.expect(200, None) },
            check,
            |body| format!("GET {path} never matched: {body}"),
        )
        .await
    }

    /// Opens the SSE stream at `path` (with the token).
    pub async fn sse(&self, path: &str) -> Sse {
        self.sse_with(path, &[]).await
    }

    /// Opens the SSE stream at `path` with `Accept: text/event-stream` and `headers`.
    pub async fn sse_with(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        self.sse_as(self.token.as_deref(), path, headers).await
    }

    /// [`TestServer::sse_with`] with `token` instead of the server's.
    pub async fn sse_as(&self, token: Option<&str>, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut req = self
            .client
            .get(format!("{}{path}", self.base))
            .header("accept", "text/event-stream");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let response = req.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let mut sse = Sse {
            response,
            buffer: String::new(),
            comments: Vec::new(),
            last_id: None,
        };
        // The stream opens with a comment: once it is here, the subscription exists.
        let first = sse.next_frame().await.expect("the stream ended at once");
        assert_eq!(first, Frame::Comment("connected".into()));
        sse
    }

    /// Stops the server (gracefully) and the runtime.
    pub async fn stop(mut self) {
        // Close the client's idle keep-alive connections, which a graceful stop would otherwise
        // wait for (up to the keep-alive timeout).
        drop(std::mem::replace(&mut self.client, client()));
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.unwrap().unwrap();
        }
        self.runtime.shutdown(Duration::from_secs(2)).await.unwrap();
    }
}

/// A loopback HTTP client that ignores proxy settings.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(PATIENCE)
        .build()
        .unwrap()
}

/// Reads a whole response.
pub async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Answer {
        status,
        headers,
        text,
    }
}

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Comment(String),
    Data(Value),
}

/// An open event stream.
pub struct Sse {
    response: reqwest::Response,
    buffer: String,
    /// Comments seen by `next_event` (keep-alives).
    pub comments: Vec<String>,
    /// The `id:` of the last frame that had one.
    pub last_id: Option<String>,
}

impl Sse {
    /// The next frame, or `None` when the stream ended.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let frame = frame.trim_end();
                if let Some(comment) = frame.strip_prefix(':') {
                    return Some(Frame::Comment(comment.trim().to_string()));
                }
                if let Some(id) = frame.lines().find_map(|l| l.strip_prefix("id:")) {
                    self.last_id = Some(id.trim().to_string());
                }
                let data: String = frame
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n");
                return Some(Frame::Data(
                    serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data:?}")),
                ));
            }
            let chunk = tokio::time::timeout(PATIENCE, self.response.chunk())
                .await
                .expect("no SSE data in time")
                .unwrap();
            match chunk {
                Some(bytes) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                None => return None,
            }
        }
    }

    /// The next event (comments are collected, not returned).
    pub async fn next_event(&mut self) -> Option<Value> {
        loop {
            match self.next_frame().await? {
                Frame::Comment(c) => self.comments.push(c),
                Frame::Data(v) => return Some(v),
            }
        }
    }

    /// Skips events until one satisfies `check`.
    pub async fn until(&mut self, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            assert!(tokio::time::Instant::now() < deadline, "no matching event");
            let event = self.next_event().await.expect("the stream ended");
            if check(&event) {
                return event;
            }
        }
    }
}
