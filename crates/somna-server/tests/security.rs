//! Auth (bearer token, `/healthz` open), the refusal to bind a non-loopback address without a token,
//! and body limits (413 with or without a Content-Length).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use somna_core::config::ResolvedConfig;
use somna_runtime::{Runtime, RuntimeOptions};
use somna_server::{Server, ServerError, ServerOptions};
use somna_store::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{FAST, TestServer, answer, client};

const TOKEN: &str = "t0ken-for-tests-0123456789";

#[actix_rt::test]
async fn bearer_token_is_required_except_for_healthz() {
    let s = TestServer::start_with(FAST, None, |o| o.token = Some(TOKEN.into())).await;
    let c = client();
    let url = |p: &str| format!("{}{p}", s.base);

    let health = answer(c.get(url("/healthz")).send().await.unwrap()).await;
    assert_eq!(health.expect(200, None)["status"], "ok");

    for path in [
        "/v1/agents",
        "/metrics",
        "/v1/openapi.json",
        "/v1/events",
        "/v1/agents/ghost",
        "/v1/nope",
    ] {
        let missing = answer(c.get(url(path)).send().await.unwrap()).await;
        let e = missing.expect(401, Some("unauthorized"));
        assert_eq!(missing.headers["www-authenticate"], "Bearer");
        assert_eq!(
            e["error"]["message"],
            "missing `Authorization: Bearer <token>` header"
        );
        let wrong = answer(
            c.get(url(path))
                .bearer_auth("t0ken-for-tests-0123456780")
                .send()
                .await
                .unwrap(),
        )
        .await;
        let e = wrong.expect(401, Some("unauthorized"));
        assert_eq!(e["error"]["message"], "the bearer token is wrong");
        let prefix = answer(c.get(url(path)).bearer_auth("t0ken").send().await.unwrap()).await;
        prefix.expect(401, Some("unauthorized"));
        let basic = answer(
            c.get(url(path))
                .basic_auth("user", Some(TOKEN))
                .send()
                .await
                .unwrap(),
        )
        .await;
        basic.expect(401, Some("unauthorized"));
    }
    // A POST without the token changes nothing.
    let refused = answer(
        c.post(url("/v1/agents"))
            .body(r#"{"id": "wren"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    refused.expect(401, Some("unauthorized"));
    assert!(s.runtime.agent_ids().is_empty());

    // With the token everything works (the helper sends it).
    s.create("wren").await;
    s.get("/v1/agents").await.expect(200, None);
    s.get("/v1/agents/ghost")
        .await
        .expect(404, Some("unknown_agent"));
    let metrics = s.get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics
            .text
            .contains("somna_api_errors_total{code=\"unauthorized\"} ")
    );
    drop(s.sse("/v1/events").await);
    s.stop().await;
}

#[actix_rt::test]
async fn non_loopback_needs_a_token() {
    let runtime = Runtime::start(
        ResolvedConfig::default(),
        Store::temporary().unwrap(),
        std::sync::Arc::new(somna_llm::BuiltinClient::new()),
        RuntimeOptions {
            schedule_sleeps: false,
            arbiters: 1,
            ..Default::default()
        },
    )
    .unwrap();
    // Refused before anything is bound.
    let e = Server::bind(
        runtime.clone(),
        ServerOptions::new("0.0.0.0:0".parse().unwrap()),
    )
    .unwrap_err();
    assert!(matches!(e, ServerError::TokenRequired(_)));
    assert!(e.to_string().contains("SOMNA_API_TOKEN"));
    let e = Server::bind(
        runtime.clone(),
        ServerOptions::new("[::]:0".parse().unwrap()),
    )
    .unwrap_err();
    assert!(matches!(e, ServerError::TokenRequired(_)));
    // `serve` refuses the same way.
    let e = somna_server::serve(
        runtime.clone(),
        ServerOptions::new("0.0.0.0:0".parse().unwrap()),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ServerError::TokenRequired(_)));
    runtime.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[actix_rt::test]
async fn bodies_over_the_limit_are_413() {
    let s = TestServer::start_small_bodies(Duration::from_millis(300)).await;
    let big = json!({"type": "user", "content": "a".repeat(2000)}).to_string();
    let e = s
        .post("/v1/agents/wren/input", &big)
        .await
        .expect(413, Some("payload_too_large"));
    assert_eq!(
        e["error"]["message"],
        "the request body is larger than the limit of 1024 bytes"
    );
    // Just under the limit is fine.
    let fits = json!({"type": "observation", "content": "b".repeat(900)}).to_string();
    assert!(fits.len() <= 1024);
    s.post("/v1/agents/wren/input", &fits)
        .await
        .expect(202, None);
    // A much larger body (several MiB) still gets its 413 rather than a reset connection.
    let huge = "x".repeat(5 * 1024 * 1024);
    s.post("/v1/agents", &huge)
        .await
        .expect(413, Some("payload_too_large"));
    // Nothing of the refused input reached the agent.
    let history = s.get("/v1/agents/wren/history").await.expect(200, None);
    assert_eq!(history["messages"].as_array().unwrap().len(), 1);

    // A chunked body (no Content-Length) is counted as it arrives.
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut request = format!(
        "POST /v1/agents/wren/input HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    for _ in 0..4 {
        let chunk = "c".repeat(400);
        request.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    request.push_str("0\r\n\r\n");
    let response = raw_exchange(&addr, &request).await;
    assert_refused(&response, "413 Payload Too Large", "payload_too_large");

    // A body that trickles in slower than the body timeout is refused.
    let request = format!(
        "POST /v1/agents/wren/input HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100\r\n\
Connection: close\r\n\r\n{{\"type\": "
    );
    let response = raw_exchange(&addr, &request).await;
    assert_refused(&response, "408 Request Timeout", "request_timeout");
    s.stop().await;
}

/// Sends `request` as it is on a new connection to `addr` and reads the response until the
/// server closes the connection.
async fn raw_exchange(addr: &str, request: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    response
}

/// Asserts that a raw `response` has the status `status` (`413 Payload Too Large`) and the error
/// code `code`.
fn assert_refused(response: &str, status: &str, code: &str) {
    assert!(
        response.starts_with(&format!("HTTP/1.1 {status}\r\n")),
        "{response}"
    );
    assert!(
        response.contains(&format!(r#""code":"{code}""#)),
        "{response}"
    );
}
