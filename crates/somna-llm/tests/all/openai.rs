//! OpenAiClient over real HTTP against the stub server: success, every fault with the exact number of
//! attempts the server saw, timeouts, the concurrency limit, the API key, config errors.
//!
//! Behaviour only: no test asserts how long anything took. The waits themselves (Retry-After
//! honoured and capped, the timeout kept within 10%) are measured by `benches/timeouts.rs`; which
//! wait the client chooses is unit-tested in `openai.rs` (`retry_wait`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use somna_core::config::{CacheHint, LlmConfig, Provider, StructuredOutput, ToolSpec};
use somna_llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmClient, LlmError, OpenAiClient, OpenAiSettings,
    RetryPolicy, ToolCall, build_client,
};
use somna_testkit::{Reply, StubLlmServer};

/// Fast retries so that fault tests finish quickly; no jitter so waits are exact.
fn policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
        jitter: 0.0,
        retry_timeouts: false,
    }
}

fn settings(server: &StubLlmServer) -> OpenAiSettings {
    OpenAiSettings {
        base_url: server.base_url(),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(1),
        retry: policy(2),
        max_concurrent: 8,
        structured_output: StructuredOutput::Auto,
        cache_hint: CacheHint::Off,
        cache_slots: 0,
    }
}

fn client(settings: OpenAiSettings) -> OpenAiClient {
    OpenAiClient::new(settings, None).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest::new(
        "tiny-model",
        vec![
            ChatMessage::system("You are Wren, the steward of Millbrook."),
            ChatMessage::user("Good morning! I am Mara.").with_name("Mara Fenwick"),
        ],
    )
    .with_max_tokens(64)
    .with_temperature(0.5)
}

/// The answer to `request()` sent with `s` to `server`: it must have come on attempt `attempts`,
/// the server having seen exactly that many requests.
async fn answered(server: &StubLlmServer, s: OpenAiSettings, attempts: u32) -> ChatResponse {
    let response = client(s).chat(request()).await.unwrap();
    assert_eq!(response.attempts, attempts);
    assert_eq!(server.request_count(), attempts as usize);
    response
}

/// The error `request()` sent with `s` to `server` ends in, after the server saw exactly
/// `requests` requests.
async fn failed(server: &StubLlmServer, s: OpenAiSettings, requests: usize) -> LlmError {
    let err = client(s).chat(request()).await.unwrap_err();
    assert_eq!(server.request_count(), requests);
    err
}

fn llm_config(base_url: &str, api_key_env: &str) -> LlmConfig {
    LlmConfig {
        provider: Provider::Openai,
        model: "tiny-model".into(),
        base_url: base_url.into(),
        api_key_env: api_key_env.into(),
        timeout: Duration::from_secs(5),
        max_retries: 1,
        max_concurrent: 4,
        structured_output: StructuredOutput::Auto,
        cache_hint: CacheHint::Off,
        cache_slots: 0,
    }
}

#[tokio::test]
async fn text_reply_with_usage_and_the_request_on_the_wire() {
    let server = StubLlmServer::start();
    server.push(Reply::text("Good morning, Mara."));
    let response = answered(&server, settings(&server), 1).await;
    assert_eq!(response.text, "Good morning, Mara.");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.model, "tiny-model");
    let prompt = "You are Wren, the steward of Millbrook.Good morning! I am Mara.";
    let usage = response.usage.unwrap();
    assert_eq!(usage.prompt_tokens, server.tokens_of(prompt));
    assert_eq!(
        usage.completion_tokens,
        server.tokens_of("Good morning, Mara.")
    );

    let sent = server.last_request().unwrap();
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.model(), Some("tiny-model"));
    assert_eq!(sent.body["max_tokens"], 64);
    assert_eq!(sent.body["temperature"], 0.5);
    assert!(sent.body.get("tools").is_none());
    let messages = sent.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    // OpenAI names allow no spaces.
    assert_eq!(messages[1]["name"], "Mara_Fenwick");
    // No key configured: no Authorization header at all.
    assert_eq!(sent.authorization(), None);
}

#[tokio::test]
async fn tool_definitions_go_out_and_tool_calls_come_back() {
    let server = StubLlmServer::start();
    let call = ToolCall {
        id: "call_7".into(),
        name: "journal_add".into(),
        arguments: r#"{"content":"Mara is allergic to walnuts","importance":7}"#.into(),
    };
    server.push(Reply::ToolCalls(vec![call.clone()]));
    let tool = ToolSpec {
        name: "journal_add".into(),
        description: "Write a note in your journal".into(),
        parameters: r#"{"type":"object","properties":{"content":{"type":"string"},"importance":{"type":"integer"}},"required":["content"]}"#.into(),
    };
    let response = client(settings(&server))
        .chat(request().with_tools(vec![tool]))
        .await
        .unwrap();
    assert_eq!(response.tool_calls, vec![call.clone()]);
    assert_eq!(response.text, "");
    assert!(response.usage.is_some());

    let sent = server.last_request().unwrap();
    assert_eq!(sent.body["tools"][0]["type"], "function");
    assert_eq!(sent.body["tools"][0]["function"]["name"], "journal_add");
    assert_eq!(
        sent.body["tools"][0]["function"]["description"],
        "Write a note in your journal"
    );
    assert_eq!(
        sent.body["tools"][0]["function"]["parameters"]["required"][0],
        "content"
    );

    // The call and its result go back to the server in the next turn.
    server.push(Reply::text("Noted."));
    let mut follow_up = request();
    follow_up
        .messages
        .push(ChatMessage::assistant_calls("", vec![call]));
    follow_up
        .messages
        .push(ChatMessage::tool_result("call_7", r#"{"ok":true}"#));
    client(settings(&server)).chat(follow_up).await.unwrap();
    let sent = server.last_request().unwrap();
    assert_eq!(sent.messages()[2]["tool_calls"][0]["id"], "call_7");
    assert_eq!(
        sent.messages()[2]["tool_calls"][0]["function"]["name"],
        "journal_add"
    );
    assert_eq!(sent.messages()[3]["role"], "tool");
    assert_eq!(sent.messages()[3]["tool_call_id"], "call_7");
}

#[tokio::test]
async fn a_500_is_retried_then_succeeds() {
    let server = StubLlmServer::start();
    server.push_all([Reply::Status(500, "boom".into()), Reply::text("ok")]);
    let response = answered(&server, settings(&server), 2).await;
    assert_eq!(response.text, "ok");
}

#[tokio::test]
async fn two_503s_then_success_uses_every_retry() {
    let server = StubLlmServer::start();
    server.push_all([
        Reply::Status(503, "busy".into()),
        Reply::Status(503, "busy".into()),
        Reply::text("finally"),
    ]);
    answered(&server, settings(&server), 3).await;
}

#[tokio::test]
async fn persistent_500_is_a_server_error_after_max_retries_plus_one() {
    let server = StubLlmServer::answering(Reply::Status(
        500,
        r#"{"error":{"message":"the model crashed"}}"#.into(),
    ));
    let err = failed(&server, settings(&server), 3).await;
    match &err {
        LlmError::Server {
            status,
            url,
            excerpt,
            attempts,
        } => {
            assert_eq!(*status, 500);
            assert_eq!(*url, format!("{}/chat/completions", server.base_url()));
            assert!(excerpt.contains("the model crashed"), "{excerpt}");
            assert_eq!(*attempts, 3);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("HTTP 500"), "{err}");
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let server = StubLlmServer::start();
    server.push(Reply::Status(
        400,
        r#"{"error":{"message":"bad model"}}"#.into(),
    ));
    let err = failed(&server, settings(&server), 1).await;
    assert!(
        matches!(
            err,
            LlmError::Server {
                status: 400,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn permanent_4xx_are_not_retried_and_a_404_names_the_url() {
    for status in [400, 401, 403, 404] {
        let server = StubLlmServer::answering(Reply::error(status, "nope"));
        let err = client(settings(&server)).chat(request()).await.unwrap_err();
        assert!(err.is_permanent(), "{status}: {err:?}");
        assert_eq!(err.attempts(), 1, "{status}");
        assert_eq!(server.request_count(), 1, "{status}");
        let url = format!("{}/chat/completions", server.base_url());
        assert!(err.to_string().contains(&url), "{err}");
    }
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let server = StubLlmServer::start();
    server.push_all([
        Reply::RateLimited {
            retry_after_secs: 1,
        },
        Reply::text("after the wait"),
    ]);
    let response = answered(&server, settings(&server), 2).await;
    assert_eq!(response.text, "after the wait");
}

#[tokio::test]
async fn retry_after_is_capped() {
    let server = StubLlmServer::start();
    server.push_all([
        Reply::RateLimited {
            retry_after_secs: 3600,
        },
        Reply::text("ok"),
    ]);
    let mut s = settings(&server);
    s.retry.max_retry_after = Duration::from_millis(200);
    // Uncapped, this call would wait an hour; it finishes, after a second attempt.
    answered(&server, s, 2).await;
}

#[tokio::test]
async fn persistent_429_is_rate_limited_with_the_servers_retry_after() {
    let server = StubLlmServer::answering(Reply::RateLimited {
        retry_after_secs: 0,
    });
    let err = failed(&server, settings(&server), 3).await;
    assert_eq!(
        err,
        LlmError::RateLimited {
            retry_after: Some(Duration::ZERO),
            attempts: 3
        }
    );
}

#[tokio::test]
async fn malformed_json_is_not_retried() {
    let server = StubLlmServer::start();
    server.push(Reply::MalformedJson);
    let err = failed(&server, settings(&server), 1).await;
    match &err {
        LlmError::Malformed { excerpt } => {
            assert!(excerpt.contains("chatcmpl-broken"), "{excerpt}")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_body_of_the_wrong_shape_is_malformed() {
    let server = StubLlmServer::start();
    server.push(Reply::Json(json!({"hello": "world"})));
    let err = failed(&server, settings(&server), 1).await;
    assert!(matches!(err, LlmError::Malformed { .. }), "{err:?}");
}

#[tokio::test]
async fn empty_content_is_an_empty_response_and_not_retried() {
    let server = StubLlmServer::start();
    server.push(Reply::EmptyContent);
    let err = client(settings(&server)).chat(request()).await.unwrap_err();
    assert_eq!(err, LlmError::EmptyResponse);
    assert_eq!(server.request_count(), 1);
    // No choices at all is empty too.
    server.push(Reply::Json(json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []
    })));
    let err = client(settings(&server)).chat(request()).await.unwrap_err();
    assert_eq!(err, LlmError::EmptyResponse);
}

#[tokio::test]
async fn a_dropped_connection_is_retried_then_a_connection_error() {
    let server = StubLlmServer::answering(Reply::DropConnection);
    let err = failed(&server, settings(&server), 3).await;
    match &err {
        LlmError::Connection { attempts, message } => {
            assert_eq!(*attempts, 3);
            assert!(!message.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_dropped_connection_then_success() {
    let server = StubLlmServer::start();
    server.push_all([Reply::DropConnection, Reply::text("second time lucky")]);
    let response = answered(&server, settings(&server), 2).await;
    assert_eq!(response.text, "second time lucky");
}

#[tokio::test]
async fn a_hung_server_times_out_on_time_without_retrying() {
    let server = StubLlmServer::answering(Reply::Hang);
    let mut s = settings(&server);
    s.timeout = Duration::from_millis(300);
    let err = failed(&server, s, 1).await;
    assert_eq!(
        err,
        LlmError::Timeout {
            after: Duration::from_millis(300),
            attempts: 1
        }
    );
}

#[tokio::test]
async fn a_body_that_never_ends_times_out_on_time() {
    let server = StubLlmServer::answering(Reply::HangBody);
    let mut s = settings(&server);
    s.timeout = Duration::from_millis(300);
    let err = failed(&server, s, 1).await;
    assert!(
        matches!(err, LlmError::Timeout { attempts: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn timeouts_are_retried_when_the_policy_says_so() {
    let server = StubLlmServer::start();
    server.push_all([Reply::Hang, Reply::text("awake now")]);
    let mut s = settings(&server);
    s.timeout = Duration::from_millis(300);
    s.retry.retry_timeouts = true;
    let response = answered(&server, s, 2).await;
    assert_eq!(response.text, "awake now");
}

#[tokio::test]
async fn a_slow_answer_within_the_timeout_succeeds() {
    let server = StubLlmServer::start();
    server.push(Reply::text_after(Duration::from_millis(300), "slowly"));
    let mut s = settings(&server);
    s.timeout = Duration::from_secs(2);
    let response = client(s).chat(request()).await.unwrap();
    assert_eq!(response.text, "slowly");
    assert_eq!(response.attempts, 1);
}

#[tokio::test]
async fn nothing_listening_is_connection_refused_after_retries() {
    // Bind to learn a free port, then free it: nothing listens there any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let s = OpenAiSettings {
        base_url: base_url.clone(),
        timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        retry: policy(2),
        max_concurrent: 2,
        structured_output: StructuredOutput::Auto,
        cache_hint: CacheHint::Off,
        cache_slots: 0,
    };
    let err = client(s).chat(request()).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::ConnectionRefused {
            url: base_url.clone(),
            attempts: 3
        }
    );
    assert!(err.to_string().contains(&base_url), "{err}");
}

#[tokio::test]
async fn concurrency_limit_is_never_exceeded() {
    let server = StubLlmServer::answering(Reply::text_after(Duration::from_millis(100), "done"));
    let mut s = settings(&server);
    s.max_concurrent = 3;
    let shared = client(s);
    let mut tasks = Vec::new();
    for i in 0..20 {
        // Every task gets its own clone: the limit is shared by all of them.
        let c = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = request();
            r.messages.push(ChatMessage::user(format!("request {i}")));
            c.chat(r).await
        }));
    }
    for task in tasks {
        let response = task.await.unwrap().unwrap();
        assert_eq!(response.text, "done");
    }
    assert_eq!(server.request_count(), 20);
    assert_eq!(server.max_in_flight(), 3);
    assert_eq!(shared.available_permits(), 3);
}

#[tokio::test]
async fn the_api_key_from_the_named_variable_is_sent_as_a_bearer_token() {
    let server = StubLlmServer::start();
    let cfg = llm_config(&server.base_url(), "SOMNA_TEST_LLM_KEY");
    let env = |name: &str| (name == "SOMNA_TEST_LLM_KEY").then(|| "sk-test-123".to_string());
    let client = build_client(&cfg, &env).unwrap();
    assert_eq!(client.provider(), "openai");
    // The key is never shown.
    assert!(!format!("{client:?}").contains("sk-test-123"));
    client.chat(request()).await.unwrap();
    assert_eq!(
        server.last_request().unwrap().authorization(),
        Some("Bearer sk-test-123")
    );
}

#[tokio::test]
async fn lists_the_servers_models() {
    let server = StubLlmServer::start();
    server.set_model("smol");
    let models = client(settings(&server)).models().await.unwrap();
    assert_eq!(models, vec!["smol".to_string()]);
    assert_eq!(server.last_request().unwrap().path, "/v1/models");
}

#[tokio::test]
async fn usage_follows_the_servers_tokenizer() {
    // A server whose tokenizer yields twice as many tokens as len/4: calibration sees the difference.
    let server = StubLlmServer::start();
    let c = client(settings(&server));
    let at_4 = c
        .chat(request())
        .await
        .unwrap()
        .usage
        .unwrap()
        .prompt_tokens;
    server.set_chars_per_token(2.0);
    let at_2 = c
        .chat(request())
        .await
        .unwrap()
        .usage
        .unwrap()
        .prompt_tokens;
    assert!(at_2 == at_4 * 2 || at_2 == at_4 * 2 - 1, "{at_4} -> {at_2}");
}

#[test]
fn config_errors_name_the_key() {
    let unset = |_: &str| None;
    let err = build_client(
        &llm_config("http://127.0.0.1:1/v1", "SOMNA_NO_SUCH_KEY"),
        &unset,
    )
    .unwrap_err();
    match &err {
        LlmError::Config { key, message } => {
            assert_eq!(key, "llm.api_key_env");
            assert!(message.contains("SOMNA_NO_SUCH_KEY"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("llm.api_key_env"), "{err}");

    for bad in ["not a url", "ftp://example.invalid/v1", ""] {
        let err = build_client(&llm_config(bad, ""), &unset).unwrap_err();
        assert!(
            matches!(&err, LlmError::Config { key, .. } if key == "llm.base_url"),
            "{bad}: {err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("invalid LLM config llm.base_url: "),
            "{err}"
        );
    }

    let mut cfg = llm_config("http://127.0.0.1:1/v1", "");
    cfg.max_concurrent = 0;
    assert!(
        matches!(build_client(&cfg, &unset), Err(LlmError::Config { key, .. }) if key == "llm.max_concurrent")
    );
    let mut cfg = llm_config("http://127.0.0.1:1/v1", "");
    cfg.timeout = Duration::ZERO;
    assert!(
        matches!(build_client(&cfg, &unset), Err(LlmError::Config { key, .. }) if key == "llm.timeout")
    );
    let mut cfg = llm_config("http://127.0.0.1:1/v1", "");
    cfg.model = String::new();
    assert!(
        matches!(build_client(&cfg, &unset), Err(LlmError::Config { key, .. }) if key == "llm.model")
    );

    // The builtin provider needs none of it.
    let mut cfg = llm_config("", "SOMNA_NO_SUCH_KEY");
    cfg.provider = Provider::Builtin;
    let builtin: Arc<dyn LlmClient> = build_client(&cfg, &unset).unwrap();
    assert_eq!(builtin.provider(), "builtin");
}
