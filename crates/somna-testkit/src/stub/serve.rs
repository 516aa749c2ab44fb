//! The stub's serving side: the accept loop, one task per connection (kept alive between
//! requests), routing, and the answer to each [`Reply`] — faults included — with its usage.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::http::{read_request, write_response};
use super::reply::{CacheReport, RecordedRequest, Reply, ResponseFormats, UsageReport};
use super::{DefaultReply, State, lock, tokens};

pub(super) async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    mut stopped: watch::Receiver<bool>,
) {
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
    Embeddings,
    NotFound,
}

fn route(state: &State, request: &RecordedRequest) -> Route {
    let path = request.path.split('?').next().unwrap_or("");
    match (request.method.as_str(), path) {
        ("POST", "/v1/chat/completions") => {
            if let Some(refusal) = refuse_format(state, request) {
                return Route::Chat(refusal);
            }
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
        ("POST", "/v1/embeddings") => Route::Embeddings,
        _ => Route::NotFound,
    }
}

/// The status and body of an answer to `POST /v1/embeddings`: one vector per input (a string or
/// a list of strings), as the stub is set ([`Embeddings`]).
fn embeddings(state: &State, request: &RecordedRequest) -> (u16, Value) {
    use super::Embeddings;
    let mode = *lock(&state.embeddings);
    let inputs: Vec<String> = match request.body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => {
            let body = json!({"error": {"message": "input must be a string or a list of strings", "type": "invalid_request_error"}});
            return (400, body);
        }
    };
    let dims = match mode {
        Embeddings::Hashed(dims) => dims,
        Embeddings::Status(status) => {
            let body = json!({"error": {"message": "the embedding model is not loaded", "type": "server_error"}});
            return (status, body);
        }
        Embeddings::OneShort | Embeddings::NotANumber => super::DEFAULT_EMBEDDING_DIMS,
    };
    let mut vectors: Vec<Vec<f32>> = inputs
        .iter()
        .map(|t| super::hashed_embedding(t, dims))
        .collect();
    match mode {
        Embeddings::OneShort => {
            vectors.pop();
        }
        Embeddings::NotANumber => {
            if let Some(v) = vectors.first_mut() {
                v[0] = f32::NAN;
            }
        }
        _ => {}
    }
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            // serde_json writes a NaN as null, which a client must refuse as it would a NaN.
            json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    let model = request
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(super::DEFAULT_MODEL)
        .to_string();
    let tokens: u32 = inputs
        .iter()
        .map(|t| super::tokens(t, *lock(&state.chars_per_token)))
        .sum();
    (
        200,
        json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
}

/// The refusal of the request's `response_format`, when the stub is set to refuse it.
fn refuse_format(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let kind = request.response_format().filter(|k| *k != "text")?;
    match *lock(&state.response_formats) {
        ResponseFormats::Accepted => None,
        ResponseFormats::Rejected => Some(Reply::error(
            400,
            &format!("response_format of type {kind:?} is not supported by this server"),
        )),
        ResponseFormats::LlamaCppPython if kind == "json_schema" => Some(Reply::Status(
            500,
            json!({"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}", "type": "internal_server_error", "param": null, "code": null}})
                .to_string(),
        )),
        ResponseFormats::LlamaCppPython => None,
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
        Route::Embeddings => {
            let (status, body) = embeddings(state, request);
            return respond_json(socket, status, &[], &body, close).await;
        }
        Route::NotFound => {
            let body = json!({"error": {"message": format!("no route for {} {}", request.method, request.path), "type": "invalid_request_error", "param": null, "code": null}});
            return respond_json(socket, 404, &[], &body, close).await;
        }
    };
    // The replies that are a completion: its message, the text its tokens are counted on, and
    // its finish reason.
    let (message, completion_text, finish_reason) = loop {
        match reply {
            Reply::Delay(delay, inner) => {
                tokio::time::sleep(delay).await;
                reply = *inner;
            }
            Reply::Text(text) => {
                break (json!({"role": "assistant", "content": text}), text, "stop");
            }
            Reply::EmptyContent => {
                break (
                    json!({"role": "assistant", "content": ""}),
                    String::new(),
                    "stop",
                );
            }
            Reply::ToolCalls(calls) => {
                let wire: Vec<Value> = calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                let args: String = calls.iter().map(|c| c.arguments.as_str()).collect();
                let message = json!({"role": "assistant", "content": null, "tool_calls": wire});
                break (message, args, "tool_calls");
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
    };
    let body = completion(state, request, message, &completion_text, finish_reason);
    respond_json(socket, 200, &[], &body, close).await
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
    let prompt = request.prompt_text();
    let counted = tokens(&prompt, chars_per_token);
    let previous = std::mem::replace(&mut *lock(&state.last_prompt), prompt.clone());
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
        let cached = match *lock(&state.cache) {
            CacheReport::Absent => None,
            CacheReport::Fixed(n) => Some(n),
            CacheReport::CommonPrefix => {
                let shared = common_prefix(&previous, &prompt);
                Some(tokens(&prompt[..shared], chars_per_token))
            }
        };
        if let Some(cached) = cached {
            body["usage"]["prompt_tokens_details"] =
                json!({"cached_tokens": cached.min(prompt_tokens)});
        }
    }
    body
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

/// The byte length of the longest common prefix of `a` and `b`, on a char boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}
