//! Strict edges: input bodies with unknown fields, reserved agent ids, unknown event types and
//! declared bodies over the limit are refused at once with a code that names the fault.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{FAST, PATIENCE, TestServer};

#[actix_rt::test]
async fn input_with_an_unknown_field_is_422_and_appends_nothing() {
    let s = TestServer::with_wren().await;
    for (body, field) in [
        (
            json!({"type": "user", "content": "Hello", "nmae": "Tobias"}),
            "nmae",
        ),
        (
            json!({"type": "observation", "content": "Rain", "name": "world"}),
            "name",
        ),
        (
            json!({"type": "tool_result", "call_id": "c1", "content": "ok", "id": "c1"}),
            "id",
        ),
    ] {
        let e = s
            .post("/v1/agents/wren/input", &body.to_string())
            .await
            .expect(422, Some("invalid_body"));
        let message = e["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("unknown field `{field}`")),
            "{message}"
        );
    }
    let history = s.get("/v1/agents/wren/history").await.expect(200, None);
    assert_eq!(history["messages"].as_array().unwrap().len(), 0);
    // The right spelling is accepted and keeps the name.
    s.input(
        "wren",
        json!({"type": "user", "content": "Hello", "name": "Tobias"}),
    )
    .await;
    let history = s.get("/v1/agents/wren/history").await.expect(200, None);
    assert_eq!(history["messages"][0]["name"], "Tobias");
    s.stop().await;
}

#[actix_rt::test]
async fn dot_agent_ids_are_refused() {
    let s = TestServer::start(FAST).await;
    for id in [".", ".."] {
        let e = s
            .post("/v1/agents", &json!({ "id": id }).to_string())
            .await
            .expect(400, Some("invalid_agent_id"));
        assert_eq!(e["error"]["fields"][0]["field"], "id");
        assert!(
            e["error"]["message"].as_str().unwrap().contains("reserved"),
            "{e}"
        );
    }
    // Dots inside a longer id are fine.
    s.create("v1.2").await;
    s.create("...").await;
    s.stop().await;
}

#[actix_rt::test]
async fn an_unknown_event_type_is_400() {
    let s = TestServer::start(FAST).await;
    let e = s
        .bad_request_naming("/v1/events?types=agent_replied,agent_repiled", "types")
        .await;
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"agent_repiled\""), "{message}");
    assert!(message.contains("tool_call_requested"), "{message}");
    // Known names (with spaces and an empty item) still open the stream.
    drop(
        s.sse("/v1/events?types=agent_replied,%20tool_call_requested,")
            .await,
    );
    s.stop().await;
}

#[actix_rt::test]
async fn a_declared_length_over_the_limit_is_413_before_the_body_arrives() {
    // A body timeout far beyond the test's patience: only an answer that does not wait for the
    // body can arrive in time.
    let s = TestServer::start_small_bodies(Duration::from_secs(3600)).await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!(
        "POST /v1/agents/wren/input HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
Content-Length: 10000000\r\nConnection: close\r\n\r\n{{\"type\": "
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the answer's JSON body is complete (the connection may stay open while the
    // client is still expected to send).
    let text = tokio::time::timeout(PATIENCE, async {
        loop {
            let n = tcp.read(&mut buf).await.unwrap();
            response.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&response).to_string();
            if n == 0 || text.ends_with('}') {
                return text;
            }
        }
    })
    .await
    .expect("no answer while the declared body was still to come");
    assert!(
        text.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{text}"
    );
    assert!(text.contains(r#""code":"payload_too_large""#), "{text}");
    s.stop().await;
}
