//! The SSE stream: an agent's reply, a host tool call round trip (through the stub OpenAI server,
//! scripted to call the host's tool), busy agents, keep-alives, and the stream ending at shutdown.

use std::time::Duration;

use serde_json::json;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::{FAST, Frame, TestServer, keeper_config};

#[actix_rt::test]
async fn sse_delivers_an_agent_reply() {
    let s = TestServer::start(FAST).await;
    s.create("wren").await;
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
    let offered: Vec<&str> = chats[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"open_door"), "{offered:?}");
    let tool_message = chats[1].messages().last().unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_door_1");
    // History: the user's line, the call, the result, the reply.
    let history = s.get("/v1/agents/keeper/history").await.expect(200, None);
    let roles: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(history["messages"][1]["tool_calls"][0]["id"], "call_door_1");
    s.stop().await;
}

#[actix_rt::test]
async fn commands_wait_for_the_job_in_flight_and_busy_is_409() {
    let stub = StubLlmServer::start();
    stub.set_default(Reply::delayed(
        Duration::from_millis(1500),
        Reply::text("Slowly, the gate creaks."),
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
