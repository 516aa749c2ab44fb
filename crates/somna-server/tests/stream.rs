//! The SSE stream: an agent's reply, a host tool call round trip (through the stub OpenAI server,
//! scripted to call the host's tool), busy agents, keep-alives, and the stream ending at shutdown.

use std::time::Duration;

use serde_json::json;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::{FAST, Frame, TestServer, keeper_config, strs};

#[actix_rt::test]
async fn sse_delivers_an_agent_reply() {
    let s = TestServer::with_wren().await;
    s.create("bard").await;
    let mut all = s.sse("/v1/events").await;
    let mut wren = s.sse("/v1/events?agent=wren&types=agent_replied").await;
    s.input(
        "bard",
        json!({"type": "user", "content": "Hello, who are you?"}),
    )
    .await;
    s.input(
        "wren",
        json!({"type": "user", "content": "Good morning! My name is Tobias.", "name": "Tobias"}),
    )
    .await;
    let reply = wren.next_event().await.unwrap();
    assert_eq!(reply["type"], "agent_replied");
    assert_eq!(reply["agent"], "wren");
    assert!(reply["at"].as_u64().unwrap() > 0);
    let text = reply["text"].as_str().unwrap();
    assert!(!text.is_empty());
    // The reply is in the agent's history at the seq the event names.
    let seq = reply["seq"].as_u64().unwrap();
    let history = s
        .get(&format!("/v1/agents/wren/history?from_seq={seq}&limit=1"))
        .await
        .expect(200, None);
    assert_eq!(history["messages"][0]["role"], "assistant");
    assert_eq!(history["messages"][0]["content"], text);
    // The unfiltered stream sees both agents.
    let bard = all
        .until(|e| e["type"] == "agent_replied" && e["agent"] == "bard")
        .await;
    assert!(!bard["text"].as_str().unwrap().is_empty());
    // Idle streams carry keep-alive comments (every 500 ms in these tests).
    match wren.next_frame().await.unwrap() {
        Frame::Comment(c) => assert_eq!(c, "keep-alive"),
        Frame::Data(d) => panic!("wren's filtered stream got {d}"),
    }
    s.get("/v1/events?agent=not%20an%20id")
        .await
        .expect(400, Some("invalid_agent_id"));
    s.bad_requests(&["/v1/events?agnet=wren"]).await;
    s.stop().await;
}

#[actix_rt::test]
async fn host_tool_call_round_trip() {
    let stub = StubLlmServer::start();
    // The model calls the host's tool for any user message, and answers once the result is in.
    stub.set_default_fn(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        if last["role"] == "tool" {
            Reply::text(format!(
                "The north door is open now (the keep said {}).",
                last["content"].as_str().unwrap_or_default()
            ))
        } else {
            Reply::tool_call("call_door_1", "open_door", &json!({"door": "north"}))
        }
    });
    let s = TestServer::start_served(&keeper_config(&stub), |_| {}).await;
    let mut events = s.sse("/v1/events?agent=keeper").await;
    s.input(
        "keeper",
        json!({"type": "user", "content": "Please open the north door.", "name": "Tobias"}),
    )
    .await;
    let call = events.until(|e| e["type"] == "tool_call_requested").await;
    assert_eq!(call["agent"], "keeper");
    assert_eq!(call["call_id"], "call_door_1");
    assert_eq!(call["name"], "open_door");
    let arguments: serde_json::Value =
        serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"door": "north"}));
    let status = s
        .wait_status("keeper", |st| st["state"] == "waiting_for_tools")
        .await;
    assert_eq!(status["pending_tools"][0]["call_id"], "call_door_1");
    assert_eq!(status["pending_tools"][0]["name"], "open_door");

    // A result for a call the agent is not waiting on is refused.
    s.post(
        "/v1/agents/keeper/input",
        r#"{"type": "tool_result", "call_id": "call_nope", "content": "{}"}"#,
    )
    .await
    .expect(404, Some("unknown_tool_call"));
    // The host answers; the model's next turn sees the result and replies.
    s.input(
        "keeper",
        json!({"type": "tool_result", "call_id": "call_door_1", "content": "{\"opened\": true}"}),
    )
    .await;
    let reply = events.until(|e| e["type"] == "agent_replied").await;
    assert_eq!(
        reply["text"],
        "The north door is open now (the keep said {\"opened\": true})."
    );
    let chats: Vec<_> = stub
        .requests()
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    assert_eq!(chats.len(), 2);
    let offered = strs(&chats[0].body["tools"], "/function/name");
    assert!(offered.contains(&"open_door"), "{offered:?}");
    let tool_message = chats[1].messages().last().unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_door_1");
    // History: the user's line, the call, the result, the reply.
    let history = s.get("/v1/agents/keeper/history").await.expect(200, None);
    let roles = strs(&history["messages"], "/role");
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(history["messages"][1]["tool_calls"][0]["id"], "call_door_1");
    s.stop().await;
}

#[actix_rt::test]
async fn commands_wait_for_the_job_in_flight_and_busy_is_409() {
    let stub = StubLlmServer::answering(Reply::text_after(
        Duration::from_millis(1500),
        "Slowly, the gate creaks.",
    ));
    let s = TestServer::start_served(&keeper_config(&stub), |_| {}).await;
    let mut events = s.sse("/v1/events?agent=keeper&types=agent_replied").await;
    s.input(
        "keeper",
        json!({"type": "user", "content": "Open up, please."}),
    )
    .await;
    s.wait_status("keeper", |st| st["state"] == "stepping")
        .await;
    // While the step runs, compactions and sleeps queue behind it (up to MAX_DEFERRED); past
    // that, and only then, the agent is busy.
    let queued = somna_runtime::actor::MAX_DEFERRED;
    let answers = futures::future::join_all(
        (0..queued + 2).map(|_| s.post("/v1/agents/keeper/compact", r#"{"force": true}"#)),
    )
    .await;
    let busy: Vec<_> = answers.iter().filter(|a| a.status == 409).collect();
    assert_eq!(busy.len(), 2, "{answers:?}");
    for a in &busy {
        assert_eq!(a.code(), "busy");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("busy")
        );
    }
    for a in answers.iter().filter(|a| a.status != 409) {
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.json()["outcome"].is_string());
    }
    // The step finished before the queued work ran: its reply is in.
    let reply = events.next_event().await.unwrap();
    assert_eq!(reply["text"], "Slowly, the gate creaks.");
    let history = s.get("/v1/agents/keeper/history").await.expect(200, None);
    assert_eq!(history["messages"].as_array().unwrap().len(), 2);
    // A sleep asked for during a step runs after it.
    s.input("keeper", json!({"type": "user", "content": "Still there?"}))
        .await;
    s.wait_status("keeper", |st| st["state"] == "stepping")
        .await;
    let slept = s
        .post("/v1/agents/keeper/sleep", "")
        .await
        .expect(200, None);
    assert_eq!(slept["outcome"], "slept");
    let history = s.get("/v1/agents/keeper/history").await.expect(200, None);
    assert_eq!(history["messages"].as_array().unwrap().len(), 4);
    s.stop().await;
}

#[actix_rt::test]
async fn shutdown_ends_event_streams() {
    let s = TestServer::start(FAST).await;
    let mut events = s.sse("/v1/events").await;
    let runtime = s.runtime.clone();
    let stopping = actix_rt::spawn(s.stop());
    // The stream ends (rather than hanging until a timeout) and the server stops.
    loop {
        match events.next_frame().await {
            None => break,
            Some(Frame::Comment(_)) => {}
            Some(Frame::Data(d)) => panic!("unexpected event {d}"),
        }
    }
    stopping.await.unwrap();
    assert!(runtime.agent_ids().is_empty());
}

/// An agent's durable event log as SSE: `id:` is the event's seq, the stream follows the log, and
/// a client that reconnects with `Last-Event-ID` gets exactly the events after it.
#[actix_rt::test]
async fn the_event_log_streams_and_resumes_from_last_event_id() {
    let s = TestServer::with_wren().await;
    let sleep = || async {
        s.post("/v1/agents/wren/sleep", "{}")
            .await
            .expect(200, None);
    };
    sleep().await;
    sleep().await;
    let logged = s.get("/v1/agents/wren/events").await.expect(200, None);
    let seqs: Vec<u64> = logged["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .rev()
        .collect();
    assert!(seqs.len() >= 2, "{logged}");
    let first = seqs[0];

    // From a seq: everything after it, oldest first, each with its seq as the id.
    let mut from_first = s
        .sse_with(&format!("/v1/agents/wren/events?after={first}"), &[])
        .await;
    for &seq in &seqs[1..] {
        let e = from_first.next_event().await.unwrap();
        assert_eq!(e["seq"].as_u64(), Some(seq), "{e}");
        assert_eq!(
            from_first.last_id.as_deref(),
            Some(seq.to_string().as_str())
        );
    }
    // Without a position: only what is logged from now on, as it is logged.
    let mut tail = s.sse_with("/v1/agents/wren/events", &[]).await;
    sleep().await;
    let new = tail.until(|e| e["event"]["type"] == "sleep").await;
    let new_seq = new["seq"].as_u64().unwrap();
    assert!(new_seq > *seqs.last().unwrap(), "{new}");
    assert!(new["event"]["next"].as_u64().unwrap() > 0, "{new}");
    // The first stream follows too: the same event, next in line.
    let followed = from_first
        .until(|e| e["seq"].as_u64() == Some(new_seq))
        .await;
    assert_eq!(followed, new);

    // A reconnect with Last-Event-ID (it wins over `after`) resumes right after it.
    let resume = seqs[seqs.len() - 1].to_string();
    let mut resumed = s
        .sse_with(
            "/v1/agents/wren/events?after=0",
            &[("last-event-id", resume.as_str())],
        )
        .await;
    let e = resumed.next_event().await.unwrap();
    assert_eq!(e["seq"].as_u64(), Some(new_seq), "{e}");

    // Bad positions are named.
    let ask = |header: Option<(&'static str, &'static str)>, path: &'static str| {
        let mut req = s
            .client
            .get(format!("{}{path}", s.base))
            .header("accept", "text/event-stream");
        if let Some((name, value)) = header {
            req = req.header(name, value);
        }
        async move { crate::support::answer(req.send().await.unwrap()).await }
    };
    let cases = [
        (
            Some(("last-event-id", "yesterday")),
            "/v1/agents/wren/events",
            400,
            "bad_request",
        ),
        (None, "/v1/agents/wren/events?after=-1", 400, "bad_request"),
        (None, "/v1/agents/nobody/events", 404, "unknown_agent"),
    ];
    for (header, path, status, code) in cases {
        let a = ask(header, path).await;
        a.expect(status, Some(code));
        if header.is_some() {
            assert!(a.text.contains("Last-Event-ID"), "{}", a.text);
        }
    }
    s.stop().await;
}
