//! The agent lifecycle over HTTP: list, create, status, config (with validation), retire, input;
//! unknown agents, invalid ids, malformed JSON, wrong shapes, unknown paths and methods.

use reqwest::Method;
use serde_json::json;

use crate::support::{FAST, TestServer, strs};

#[actix_rt::test]
async fn lifecycle_create_status_configure_retire() {
    let s = TestServer::start(FAST).await;
    let list = s.get("/v1/agents").await.expect(200, None);
    assert_eq!(list["agents"], json!([]));

    let created = s
        .post(
            "/v1/agents",
            r#"{"id": "wren", "config": {"compaction": {"sleep_threshold": 0.6}, "memory": {"working_facts": 2}}}"#,
        )
        .await;
    assert_eq!(created.headers["location"], "/v1/agents/wren");
    let created = created.expect(201, None);
    assert_eq!(created["id"], "wren");
    assert_eq!(created["config"]["compaction"]["sleep_threshold"], 0.6);
    assert_eq!(created["config"]["memory"]["working_facts"], 2);
    // A persona from [defaults] and the defaults' tick.
    assert_eq!(
        created["config"]["persona"],
        "You are Wren, the steward of Millbrook."
    );
    assert_eq!(created["config"]["tick_every"], "20ms");

    s.post("/v1/agents", r#"{"id": "wren"}"#)
        .await
        .expect(409, Some("agent_exists"));

    let status = s.get("/v1/agents/wren").await.expect(200, None);
    assert_eq!(status["id"], "wren");
    assert_eq!(status["state"], "idle");
    assert_eq!(status["history_len"], 0);
    assert_eq!(status["compaction_count"], 0);
    assert_eq!(status["last_compaction"], json!(null));
    assert!(status["usage_pct"].as_f64().unwrap() >= 0.0);
    assert_eq!(status["max_context_tokens"], 8192);

    // Run-time configuration: merged over earlier changes, validated, persisted in the record.
    let changed = s
        .patch(
            "/v1/agents/wren/config",
            r#"{"compaction": {"emergency_threshold": 0.9}, "model": "builtin-large"}"#,
        )
        .await
        .expect(200, None);
    assert_eq!(changed["config"]["compaction"]["emergency_threshold"], 0.9);
    assert_eq!(changed["config"]["compaction"]["sleep_threshold"], 0.6);
    assert_eq!(changed["config"]["model"], "builtin-large");
    let got = s.get("/v1/agents/wren/config").await.expect(200, None);
    assert_eq!(got, changed);
    let record = s
        .runtime
        .store()
        .agent(&"wren".parse().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(record.overrides.compaction.emergency_threshold, Some(0.9));
    assert_eq!(record.overrides.compaction.sleep_threshold, Some(0.6));
    assert_eq!(record.overrides.model.as_deref(), Some("builtin-large"));

    s.input(
        "wren",
        json!({"type": "observation", "content": "The well froze."}),
    )
    .await;
    let list = s.get("/v1/agents").await.expect(200, None);
    assert_eq!(list["agents"][0]["id"], "wren");
    assert!(list["agents"][0]["history_len"].as_u64().unwrap() >= 1);
    assert_eq!(list["agents"][0]["pending_tools"], 0);

    // Retiring keeps every byte: the history is still readable, the id is not reused.
    let retired = s.delete("/v1/agents/wren").await.expect(200, None);
    assert_eq!(retired, json!({"id": "wren", "retired": true}));
    s.get("/v1/agents/wren")
        .await
        .expect(410, Some("agent_retired"));
    s.delete("/v1/agents/wren")
        .await
        .expect(410, Some("agent_retired"));
    s.post(
        "/v1/agents/wren/input",
        r#"{"type": "user", "content": "hi"}"#,
    )
    .await
    .expect(410, Some("agent_retired"));
    let history = s.get("/v1/agents/wren/history").await.expect(200, None);
    assert_eq!(
        history["messages"][0]["content"],
        "[observation] The well froze."
    );
    s.post("/v1/agents", r#"{"id": "wren"}"#)
        .await
        .expect(409, Some("agent_exists"));
    let list = s.get("/v1/agents").await.expect(200, None);
    assert_eq!(list["agents"], json!([]));
    assert!(list.get("retired").is_none());
    let list = s
        .get("/v1/agents?include_retired=true")
        .await
        .expect(200, None);
    assert_eq!(list["retired"], json!(["wren"]));
    s.stop().await;
}

#[actix_rt::test]
async fn invalid_thresholds_are_422_naming_the_field() {
    let s = TestServer::with_wren().await;
    let a = s
        .patch(
            "/v1/agents/wren/config",
            r#"{"compaction": {"emergency_threshold": 0.5}}"#,
        )
        .await;
    let e = a.expect(422, Some("invalid_config"));
    assert_eq!(
        e["error"]["fields"],
        json!([{
            "field": "compaction.emergency_threshold",
            "message": "must be above sleep_threshold (0.7), got 0.5"
        }])
    );
    insta::assert_snapshot!(a.text, @r#"{"error":{"code":"invalid_config","message":"compaction.emergency_threshold: must be above sleep_threshold (0.7), got 0.5","fields":[{"field":"compaction.emergency_threshold","message":"must be above sleep_threshold (0.7), got 0.5"}]}}"#);

    // Several problems at once: each field is named.
    let e = s
        .patch(
            "/v1/agents/wren/config",
            r#"{"compaction": {"sleep_threshold": 1.5, "preserve_messages": 0}, "memory": {"min_importance": 11}}"#,
        )
        .await
        .expect(422, Some("invalid_config"));
    let fields = strs(&e["error"]["fields"], "/field");
    assert_eq!(
        fields,
        [
            "compaction.sleep_threshold",
            "compaction.preserve_messages",
            "memory.min_importance"
        ]
    );

    // Wrong types and unknown keys are config errors too, named by their path.
    let wren_config = "/v1/agents/wren/config";
    s.refused_naming(
        Method::PATCH,
        wren_config,
        r#"{"compaction": {"sleep_threshold": "high"}}"#,
        "compaction.sleep_threshold",
    )
    .await;
    let e = s
        .refused_naming(
            Method::PATCH,
            wren_config,
            r#"{"compaction": {"emergency_treshold": 0.9}}"#,
            "compaction.emergency_treshold",
        )
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `emergency_treshold`")
    );
    s.refused_naming(
        Method::PATCH,
        wren_config,
        r#"{"tick_every": "soon"}"#,
        "tick_every",
    )
    .await;

    // Nothing of the refused changes was applied.
    let config = s.get(wren_config).await.expect(200, None);
    assert_eq!(config["config"]["compaction"]["emergency_threshold"], 0.8);

    // On creation the field is named by its path in the body.
    for (body, field) in [
        (
            r#"{"id": "bard", "config": {"compaction": {"emergency_threshold": 0.5}}}"#,
            "config.compaction.emergency_threshold",
        ),
        (
            r#"{"id": "bard", "config": {"compaction": {"max_context_tokens": -5}}}"#,
            "config.compaction.max_context_tokens",
        ),
    ] {
        s.refused_naming(Method::POST, "/v1/agents", body, field)
            .await;
    }
    // The refused agent was not created.
    s.get("/v1/agents/bard")
        .await
        .expect(404, Some("unknown_agent"));
    s.stop().await;
}

#[actix_rt::test]
async fn unknown_agents_are_404_on_every_agent_endpoint() {
    let s = TestServer::start(FAST).await;
    let calls: [(Method, &str, Option<&str>); 15] = [
        (Method::GET, "/v1/agents/ghost", None),
        (Method::DELETE, "/v1/agents/ghost", None),
        (Method::GET, "/v1/agents/ghost/config", None),
        (Method::PATCH, "/v1/agents/ghost/config", Some("{}")),
        (
            Method::POST,
            "/v1/agents/ghost/input",
            Some(r#"{"type":"user","content":"hi"}"#),
        ),
        (Method::POST, "/v1/agents/ghost/compact", Some("{}")),
        (Method::POST, "/v1/agents/ghost/sleep", None),
        (
            Method::POST,
            "/v1/agents/ghost/uncompact",
            Some(r#"{"summary_seq": 0}"#),
        ),
        (Method::GET, "/v1/agents/ghost/history", None),
        (Method::GET, "/v1/agents/ghost/archive", None),
        (Method::GET, "/v1/agents/ghost/archive/search?q=x", None),
        (Method::GET, "/v1/agents/ghost/journal", None),
        (Method::GET, "/v1/agents/ghost/facts", None),
        (Method::GET, "/v1/agents/ghost/events", None),
        (Method::GET, "/v1/agents/ghost/journal?since=1d", None),
    ];
    for (method, path, body) in calls {
        let e = s
            .call(method.clone(), path, body)
            .await
            .expect(404, Some("unknown_agent"));
        assert_eq!(
            e["error"]["message"], "no agent with id \"ghost\"",
            "{method} {path}"
        );
    }
    // Ids that cannot exist are refused as such.
    let long = format!("/v1/agents/{}", "x".repeat(65));
    for (method, path, body) in [
        (Method::GET, "/v1/agents/bad%20id", None),
        (Method::GET, "/v1/agents/caf%C3%A9/history", None),
        (Method::GET, "/v1/agents/a%2Fb/journal", None),
        (Method::GET, long.as_str(), None),
        (Method::POST, "/v1/agents", Some(r#"{"id": "no spaces"}"#)),
    ] {
        s.call(method, path, body)
            .await
            .expect(400, Some("invalid_agent_id"));
    }
    s.stop().await;
}

#[actix_rt::test]
async fn malformed_json_and_wrong_shapes() {
    let s = TestServer::with_wren().await;
    // Bodies that are not JSON: 400 `bad_json`, in the parser's words where it has some.
    let input = "/v1/agents/wren/input";
    for (path, body, message) in [
        (
            input,
            r#"{"type": "user", "content": "#,
            Some("invalid JSON: EOF while parsing a value at line 1 column 28"),
        ),
        (
            input,
            "{,}",
            Some("invalid JSON: key must be a string at line 1 column 2"),
        ),
        (input, "", None),
        (input, r#"{"type": "user", "content": "a"} {}"#, None),
        ("/v1/agents", "\u{feff}{}", None),
    ] {
        let e = s.post(path, body).await.expect(400, Some("bad_json"));
        if let Some(message) = message {
            assert_eq!(e["error"]["message"], message, "{body}");
        }
    }

    // JSON of the wrong shape: 422 with its code, saying what is wrong (the message has the
    // words, or the first field named is the one).
    for (path, body, code, says, field) in [
        (
            input,
            r#"{"type": "shout", "content": "x"}"#,
            "invalid_body",
            Some("unknown variant `shout`"),
            None,
        ),
        (
            input,
            r#"{"type": "user"}"#,
            "invalid_body",
            Some("content"),
            None,
        ),
        (
            input,
            r#"{"type": "user", "content": "  "}"#,
            "invalid_input",
            None,
            Some("content"),
        ),
        (
            "/v1/agents/wren/compact",
            r#"{"force": "yes"}"#,
            "invalid_body",
            None,
            Some("force"),
        ),
        (
            "/v1/agents",
            r#"{"id": "bard", "confg": {}}"#,
            "invalid_body",
            None,
            None,
        ),
        (
            "/v1/agents/wren/uncompact",
            r#"{"summary_seq": -1}"#,
            "invalid_body",
            None,
            None,
        ),
    ] {
        let e = s.post(path, body).await.expect(422, Some(code));
        if let Some(words) = says {
            let message = e["error"]["message"].as_str().unwrap();
            assert!(message.contains(words), "{body}: {e}");
        }
        if let Some(field) = field {
            assert_eq!(e["error"]["fields"][0]["field"], field, "{body}");
        }
    }
    s.stop().await;
}

#[actix_rt::test]
async fn unknown_paths_methods_and_parameters() {
    let s = TestServer::with_wren().await;
    s.get("/v1/nope").await.expect(404, Some("not_found"));
    s.get("/").await.expect(404, Some("not_found"));
    s.get("/v1/agents/wren/nope")
        .await
        .expect(404, Some("not_found"));
    let e = s
        .call(Method::PUT, "/v1/agents", Some("{}"))
        .await
        .expect(405, Some("method_not_allowed"));
    assert_eq!(e["error"]["message"], "/v1/agents does not take PUT");
    let put = s.call(Method::PUT, "/v1/agents/wren", None).await;
    put.expect(405, Some("method_not_allowed"));
    assert_eq!(
        put.headers["allow"], "GET, DELETE",
        "a 405 lists the methods taken"
    );
    s.post("/v1/agents/wren/history", "{}")
        .await
        .expect(405, Some("method_not_allowed"));
    s.post("/healthz", "{}")
        .await
        .expect(405, Some("method_not_allowed"));
    // Trailing and doubled slashes are normalized.
    s.get("/v1/agents/").await.expect(200, None);
    s.get("//v1//agents/wren").await.expect(200, None);

    s.bad_request_naming("/v1/agents/wren/history?limit=abc", "limit")
        .await;
    let e = s.bad_request("/v1/agents/wren/history?form_seq=3").await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown query parameter (expected one of: from_seq, limit)")
    );
    s.bad_requests(&[
        "/v1/agents/wren/history?limit=0",
        "/v1/agents/wren/history?limit=1001",
        "/v1/agents/wren/history?from_seq=-3",
        "/v1/agents/wren/history?limit=2&limit=3",
        "/v1/agents/wren?verbose=1",
        "/v1/agents?include_retired=maybe",
    ])
    .await;
    s.stop().await;
}

/// Issue 10 item 5: input over the agent's `max_input_tokens` is refused with 413
/// `input_too_large`, naming the limit and the input's size; nothing is written.
#[actix_rt::test]
async fn input_over_the_agents_limit_is_refused_with_413() {
    let s = TestServer::start(FAST).await;
    s.post(
        "/v1/agents",
        r#"{"id": "wren", "config": {"compaction": {"max_input_tokens": 50}}}"#,
    )
    .await
    .expect(201, None);
    let big = "The miller's cart lost a wheel by the north gate. ".repeat(40);
    let e = s
        .post(
            "/v1/agents/wren/input",
            &json!({"type": "user", "content": big}).to_string(),
        )
        .await
        .expect(413, Some("input_too_large"));
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("above this agent's limit of 50 (compaction.max_input_tokens)"),
        "{e}"
    );
    assert!(message.starts_with("input is "), "{e}");
    assert_eq!(e["error"]["fields"][0]["field"], "content");
    let status = s.get("/v1/agents/wren").await.expect(200, None);
    assert_eq!(status["history_len"], 0, "nothing was written");
    // Input within the limit is taken.
    s.input("wren", json!({"type": "user", "content": "Good morning."}))
        .await;
    s.stop().await;
}

#[actix_rt::test]
async fn the_openapi_document_is_served() {
    let s = TestServer::start(FAST).await;
    let answer = s.get("/v1/openapi.json").await;
    let doc = answer.expect(200, None);
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        doc,
        serde_json::to_value(somna_server::openapi::document()).unwrap()
    );
    assert!(doc["paths"]["/v1/agents/{id}/input"]["post"].is_object());
    s.get("/v1/openapi.json?x=1")
        .await
        .expect(400, Some("bad_request"));
    s.stop().await;
}
