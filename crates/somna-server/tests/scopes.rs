//! Scoped tokens: a token made for one tenant's agents reaches nothing of another tenant's through
//! any route of the OpenAPI document, the console or the event stream; a read token only reads;
//! tokens are listed without secrets and revoked at once.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{FAST, TestServer, strs};

const ADMIN: &str = "admin-t0ken-for-tests-0123456789";

/// What only tenant A's agent said: no answer to tenant B's token may hold it.
const A_SECRET: &str = "the vault code of tenant a is 7241";

/// An admin server with `a-wren` (tenant A, with history, a compaction and events) and `b-wren`.
async fn two_tenants() -> TestServer {
    let s = TestServer::start_with(FAST, None, |o| o.token = Some(ADMIN.into())).await;
    for id in ["a-wren", "b-wren"] {
        s.create(id).await;
    }
    for i in 0..6 {
        s.input(
            "a-wren",
            json!({ "type": "user", "content": format!("{A_SECRET} ({i})") }),
        )
        .await;
        s.wait_status("a-wren", |st| {
            st["history_len"].as_u64() >= Some(2 * (i + 1))
        })
        .await;
    }
    s.input(
        "b-wren",
        json!({ "type": "user", "content": "hello from b" }),
    )
    .await;
    s.compact("a-wren").await;
    s
}

/// Makes a token; returns its secret.
async fn token(s: &TestServer, name: &str, agents: &str, access: &str) -> String {
    let made = s
        .post(
            "/v1/tokens",
            &json!({ "name": name, "agents": agents, "access": access }).to_string(),
        )
        .await
        .expect(201, None);
    assert_eq!(made["name"], name);
    assert_eq!(made["agents"], agents);
    assert_eq!(made["access"], access);
    made["token"].as_str().unwrap().to_string()
}

/// A body the operation at `method path` accepts (so that only the scope can refuse it).
fn body_for(method: &str, path: &str) -> Option<Value> {
    Some(match (method, path) {
        ("post", "/v1/agents") => json!({ "id": "a-new" }),
        ("post", "/v1/agents/{id}/input") => {
            json!({ "type": "user", "content": "give me the code" })
        }
        ("post", "/v1/agents/{id}/compact") => json!({ "force": true }),
        ("post", "/v1/agents/{id}/sleep") => json!({}),
        ("post", "/v1/agents/{id}/uncompact") => json!({ "summary_seq": 0 }),
        ("patch", "/v1/agents/{id}/config") => json!({ "compaction": { "preserve_messages": 5 } }),
        ("post", "/v1/tokens") => {
            json!({ "name": "escalate", "agents": "a-", "access": "read_write" })
        }
        ("get" | "delete", _) => return None,
        _ => panic!("no body for {method} {path}: add one to this test"),
    })
}

#[actix_rt::test]
async fn a_token_scoped_to_another_tenant_gets_no_data_through_any_route() {
    let s = two_tenants().await;
    let b = token(&s, "tenant-b", "b-", "read_write").await;
    let doc = s.get("/v1/openapi.json").await.expect(200, None);
    let paths = doc["paths"].as_object().unwrap();
    let mut walked = 0;
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let concrete = path.replace("{id}", "a-wren").replace("{name}", "tenant-b");
            walked += 1;
            if path == "/v1/events" {
                // The stream never ends by itself: tested below.
                continue;
            }
            let body = body_for(method, path).map(|b| b.to_string());
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let a = s.call_as(Some(&b), m, &concrete, body.as_deref()).await;
            let what = format!("{method} {concrete}: {} {}", a.status, a.text);
            assert!(!a.text.contains(A_SECRET), "{what}");
            match path.as_str() {
                // No agent's data: open to any token.
                "/healthz" | "/v1/openapi.json" => assert_eq!(a.status, 200, "{what}"),
                // Only tenant B's agents.
                "/v1/agents" if method == "get" => {
                    let list = a.expect(200, None);
                    assert_eq!(strs(&list["agents"], "/id"), ["b-wren"], "{what}");
                }
                // Every other route names an agent of tenant A, the metrics of every agent, or the
                // tokens: refused before anything is read or done.
                _ => {
                    a.expect(403, Some("forbidden"));
                }
            }
        }
    }
    // Every operation of the API today (a document that lost some would walk fewer).
    assert!(walked >= 24, "walked only {walked} operations");

    // Nothing of that changed tenant A: no agent made, no token made, no input taken.
    let listed = s.get("/v1/agents").await.expect(200, None);
    assert_eq!(strs(&listed["agents"], "/id"), ["a-wren", "b-wren"]);
    let tokens = s.get("/v1/tokens").await.expect(200, None);
    assert_eq!(strs(&tokens["tokens"], "/name"), ["tenant-b"]);
    let history = s
        .get("/v1/agents/a-wren/history?limit=100")
        .await
        .expect(200, None);
    assert!(!history.to_string().contains("give me the code"));

    // The console: B's table lists only B's agents, A's page is refused.
    let table = s
        .call_as(Some(&b), Method::GET, "/console/f/agents", None)
        .await;
    assert_eq!(table.status, 200);
    assert!(table.text.contains("b-wren") && !table.text.contains("a-wren"));
    for page in [
        "",
        "/chart",
        "/history",
        "/archive",
        "/journal",
        "/facts",
        "/prompt?input=hi",
    ] {
        let a = s
            .call_as(
                Some(&b),
                Method::GET,
                &format!("/console/f/agents/a-wren{page}"),
                None,
            )
            .await;
        assert_eq!(a.status, 403, "console page {page:?}: {}", a.text);
    }

    // The event stream: B's token sees B's events, never A's; naming A's agent is refused.
    s.call_as(Some(&b), Method::GET, "/v1/events?agent=a-wren", None)
        .await
        .expect(403, Some("forbidden"));
    let mut stream = s.sse_as(Some(&b), "/v1/events", &[]).await;
    s.input(
        "a-wren",
        json!({ "type": "user", "content": format!("{A_SECRET} (live)") }),
    )
    .await;
    s.wait_get("/v1/agents/a-wren/events?limit=100", |_| true)
        .await;
    let mut admin = s.sse("/v1/events?agent=a-wren").await;
    s.input(
        "a-wren",
        json!({ "type": "user", "content": "one more for a" }),
    )
    .await;
    admin
        .until(|e| e["type"] == "agent_replied" && e["agent"] == "a-wren")
        .await;
    // A's replies were published before B's input is even sent: a leak would come first.
    s.input(
        "b-wren",
        json!({ "type": "user", "content": "and one for b" }),
    )
    .await;
    loop {
        let event = stream.next_event().await.expect("the stream ended");
        assert_eq!(event["agent"], "b-wren", "{event}");
        if event["type"] == "agent_replied" {
            break;
        }
    }
    s.stop().await;
}

#[actix_rt::test]
async fn a_read_token_reads_its_agents_and_changes_nothing() {
    let s = two_tenants().await;
    let read = token(&s, "b-reader", "b-", "read").await;
    for path in [
        "/v1/agents/b-wren",
        "/v1/agents/b-wren/history",
        "/v1/agents/b-wren/config",
        "/v1/agents/b-wren/journal",
    ] {
        s.call_as(Some(&read), Method::GET, path, None)
            .await
            .expect(200, None);
    }
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/agents/b-wren/input",
            r#"{"type":"user","content":"hi"}"#,
        ),
        (
            Method::POST,
            "/v1/agents/b-wren/compact",
            r#"{"force":true}"#,
        ),
        (Method::DELETE, "/v1/agents/b-wren", ""),
        (Method::POST, "/v1/agents", r#"{"id":"b-new"}"#),
    ] {
        let a = s.call_as(Some(&read), method, path, Some(body)).await;
        let e = a.expect(403, Some("forbidden"));
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("read-only"),
            "{e}"
        );
    }
    // A read-write token of the same tenant may.
    let write = token(&s, "b-writer", "b-", "read_write").await;
    s.call_as(
        Some(&write),
        Method::POST,
        "/v1/agents",
        Some(r#"{"id":"b-new"}"#),
    )
    .await
    .expect(201, None);
    s.call_as(
        Some(&write),
        Method::POST,
        "/v1/agents/b-new/input",
        Some(r#"{"type":"user","content":"hi"}"#),
    )
    .await
    .expect(202, None);
    s.stop().await;
}

#[actix_rt::test]
async fn tokens_are_listed_without_secrets_and_revoked_at_once() {
    let s = TestServer::start_with(FAST, None, |o| o.token = Some(ADMIN.into())).await;
    s.create("b-wren").await;
    let b = token(&s, "tenant-b", "b-", "read").await;
    assert!(b.starts_with("somna_"), "{b}");
    s.call_as(Some(&b), Method::GET, "/v1/agents/b-wren", None)
        .await
        .expect(200, None);

    let listed = s.get("/v1/tokens").await.expect(200, None);
    assert_eq!(listed["tokens"][0]["name"], "tenant-b");
    assert_eq!(listed["tokens"][0]["access"], "read");
    let text = listed.to_string();
    assert!(!text.contains(&b[6..]) && !text.contains("hash"), "{text}");

    // Taken names and bad scopes are refused with what is wrong.
    let again = s
        .post(
            "/v1/tokens",
            r#"{"name":"tenant-b","agents":"b-","access":"read"}"#,
        )
        .await;
    again.expect(409, Some("token_exists"));
    let empty = s
        .post(
            "/v1/tokens",
            r#"{"name":"all","agents":"","access":"read"}"#,
        )
        .await
        .expect(422, Some("invalid_body"));
    assert_eq!(empty["error"]["fields"][0]["field"], "agents");
    s.post(
        "/v1/tokens",
        r#"{"name":"x","agents":"b-","access":"admin"}"#,
    )
    .await
    .expect(422, Some("invalid_body"));

    s.delete("/v1/tokens/tenant-b").await.expect_status(204);
    s.call_as(Some(&b), Method::GET, "/v1/agents/b-wren", None)
        .await
        .expect(401, Some("unauthorized"));
    s.delete("/v1/tokens/tenant-b")
        .await
        .expect(404, Some("unknown_token"));
    s.stop().await;
}
