//! Issue 10 item 5: one input cannot wedge an agent. Input over the agent's input limit is refused
//! before anything is written; the largest input that is accepted can be compacted below the
//! emergency threshold. The `Agent` component is driven directly, without actors.

use std::sync::Arc;
use std::time::Duration;

use somna_core::Timestamp;
use somna_core::message::{Message, ToolCall};
use somna_llm::LlmClient;
use somna_runtime::agent::AgentDeps;
use somna_runtime::protocol::InboundError;
use somna_runtime::{Agent, AgentState, Clock, Inbound};
use somna_store::Store;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::*;

fn deps(store: &Store, llm: Arc<dyn LlmClient>) -> AgentDeps {
    agent_deps(store, llm, Clock::starting_at(Timestamp(0), 1.0))
}

/// `n` words of village talk.
fn words(n: usize) -> String {
    let text = (0..n.div_ceil(30)).map(line).collect::<Vec<_>>().join(" ");
    text.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn input_over_the_limit_is_refused_on_every_kind_and_writes_nothing() {
    let store = Store::temporary().unwrap();
    let smith = id("smith");
    // 0.8 × 2048 − 300 = 1338 tokens a compaction can free; the derived limit is half of it.
    let mut config = agent_config("smith", 2048);
    config.tools = vec![somna_core::config::ToolSpec {
        name: "give_item".into(),
        description: String::new(),
        parameters: r#"{"type":"object"}"#.into(),
    }];
    assert_eq!(config.compaction.input_limit(), 669);
    store.create_agent(&smith, Timestamp(0)).unwrap();
    // A host tool call the agent waits on.
    let mut call = Message::assistant_calls(
        "",
        vec![ToolCall {
            id: "call_1".into(),
            name: "give_item".into(),
            arguments: "{}".into(),
        }],
    );
    call.tokens = counter().count_message(&call);
    store.append(&smith, call, Timestamp(0)).unwrap();
    let llm: Arc<dyn LlmClient> = Arc::new(somna_llm::BuiltinClient::new());
    let mut agent = Agent::load(config, deps(&store, llm)).unwrap();
    let before = snapshot(&store, &smith);
    let usage = agent.usage().unwrap();

    let big = words(2000);
    for input in [
        Inbound::User {
            content: big.clone(),
            name: Some("Aldric".into()),
        },
        Inbound::Observation {
            content: big.clone(),
        },
        Inbound::ToolResult {
            call_id: "call_1".into(),
            content: big.clone(),
        },
    ] {
        let err = agent.inbound(input).unwrap_err();
        let InboundError::TooLarge { tokens, limit } = &err else {
            panic!("expected TooLarge, got {err:?}");
        };
        assert_eq!(*limit, 669);
        assert!(*tokens > 669, "{tokens}");
        let message = err.to_string();
        assert!(
            message.contains("669") && message.contains("max_input_tokens"),
            "{message}"
        );
    }
    assert_eq!(snapshot(&store, &smith), before, "nothing was written");
    assert_eq!(agent.usage().unwrap(), usage);
    // The refused tool result left the call pending: a result that fits is still taken.
    let status = agent.status().unwrap();
    assert_eq!(status.pending_tools.len(), 1);
    agent
        .inbound(Inbound::ToolResult {
            call_id: "call_1".into(),
            content: "{\"ok\":true}".into(),
        })
        .unwrap();
    assert_eq!(agent.state(), AgentState::Idle);
    // An input right at a small explicit limit passes; one token more does not.
    let text = words(40);
    let tokens = counter().count_message(&Message::user(text.as_str()));
    let mut agent = Agent::load(
        {
            let mut c = agent_config("smith", 2048);
            c.compaction.max_input_tokens = tokens;
            c
        },
        deps(&store, Arc::new(somna_llm::BuiltinClient::new())),
    )
    .unwrap();
    agent
        .inbound(Inbound::User {
            content: text.clone(),
            name: None,
        })
        .unwrap();
    let err = agent
        .inbound(Inbound::User {
            content: format!("{text} more"),
            name: None,
        })
        .unwrap_err();
    assert!(matches!(err, InboundError::TooLarge { limit, .. } if limit == tokens));
}

/// The largest input the limit lets through, on top of a history near the sleep threshold, puts
/// the agent over the emergency threshold; the next tick's emergency compaction brings it back
/// below (the input is never more than a compaction can free).
#[tokio::test]
async fn the_largest_accepted_input_is_compacted_below_the_threshold() {
    let stub = StubLlmServer::answering(Reply::text(
        "## Topic arc\n- Aldric orders tools for the mill near Millbrook. [#0]\n## Decisions\n- Deliver to the north gate. [#0]",
    ));
    let (store, smith) = new_agent("smith");
    let config = agent_config("smith", 2048);
    let limit = config.compaction.input_limit();
    let mut agent = Agent::load(
        config.clone(),
        deps(&store, stub_client(&stub, Duration::from_secs(5))),
    )
    .unwrap();
    // History up to ~70% of the window.
    let mut i = 0;
    while agent.usage().unwrap() < 0.70 {
        fill(&store, &smith, 1, Timestamp(i as u64));
        i += 1;
    }
    // The largest input the agent takes: shrink until it is accepted (a refusal writes nothing).
    let mut n = 2 * limit as usize;
    let accepted = loop {
        let content = words(n);
        match agent.inbound(Inbound::User {
            content: content.clone(),
            name: Some("Aldric".into()),
        }) {
            Ok(()) => break content,
            Err(InboundError::TooLarge { .. }) => n -= 1,
            Err(e) => panic!("{e}"),
        }
    };
    let accepted_tokens = counter().count_message(&Message::user(accepted.as_str()));
    assert!(accepted_tokens <= limit && accepted_tokens + 10 > limit);
    let over = agent.usage().unwrap();
    assert!(over >= config.compaction.emergency_threshold, "{over}");

    let job = agent.tick().unwrap().expect("an emergency job");
    let kind = job.kind;
    assert!(matches!(
        kind,
        somna_runtime::agent::JobKind::Emergency { .. }
    ));
    let out = job.run().await;
    agent.finish(kind, &out);
    let report = out
        .compaction
        .as_ref()
        .and_then(|c| c.report())
        .expect("compacted");
    assert!(report.usage_after < config.compaction.emergency_threshold);
    assert!(
        agent.usage().unwrap() < config.compaction.emergency_threshold,
        "{}",
        agent.usage().unwrap()
    );
    assert_invariants(&store, &smith);
}
