//! The agent gauges of a running runtime (`Runtime::agent_gauges`): agents by state and by usage
//! bucket follow the agents' jobs, compactions, tool calls, creation, retirement and shutdown, and
//! always add up to the agents hosted.

use std::time::Duration;

use somna_core::config::AgentOverrides;
use somna_runtime::gauges::{AgentGaugesSnapshot, usage_bucket};
use somna_runtime::{AgentState, Inbound, Runtime};
use somna_testkit::{Reply, StubLlmServer};

use crate::support::*;

/// Waits (5 s at most) until the gauges satisfy `check`, and returns them.
async fn until(
    runtime: &Runtime,
    what: &str,
    check: impl Fn(&AgentGaugesSnapshot) -> bool,
) -> AgentGaugesSnapshot {
    somna_testkit::poll_until(
        Duration::from_secs(5),
        Duration::from_millis(10),
        || std::future::ready(runtime.agent_gauges()),
        check,
        |g| format!("gauges never showed {what}: {g:?}"),
    )
    .await
}

/// The gauges count each hosted agent once, by state and by usage bucket.
fn assert_adds_up(runtime: &Runtime, g: &AgentGaugesSnapshot) {
    let hosted = runtime.agent_ids().len() as u64;
    assert_eq!(runtime.agent_count() as u64, hosted);
    assert_eq!(g.agents(), hosted, "by state: {g:?}");
    assert_eq!(g.by_usage.iter().sum::<u64>(), hosted, "by usage: {g:?}");
}

#[actix::test]
async fn gauges_follow_states_usage_and_hosting_and_add_up_to_the_agents() {
    let stub = StubLlmServer::answering(Reply::text(
        "## Topic arc\n- Aldric orders tools for the mill near Millbrook. [#0]\n## Decisions\n- Deliver to the north gate. [#0]",
    ));
    let (store, smith) = with_history("smith", 30);
    // Smith's history fills 65% of its window.
    let persona = u64::from(counter().count_text(PERSONA));
    let tokens = store.usage_tokens(&smith).unwrap() + persona;
    let window = (tokens as f64 / 0.65).ceil() as u32;
    let cfg = runtime_config(
        Extra {
            defaults: "sleep_every = \"1h\"\ntool_timeout = \"1h\"",
            ..Default::default()
        },
        &[
            ("smith", window, ""),
            (
                "keeper",
                8192,
                "tools = [{ name = \"give_item\", description = \"Give an item\", parameters = '{\"type\":\"object\"}' }]",
            ),
        ],
    );
    let runtime = start_stubbed(cfg, &store, &stub);
    let keeper = id("keeper");

    let g = runtime.agent_gauges();
    assert_adds_up(&runtime, &g);
    assert_eq!(g.in_state(AgentState::Idle), 2);
    let before = runtime.status(&smith).await.unwrap().usage;
    assert!((0.6..0.7).contains(&before), "{before}");
    assert_eq!(g.by_usage[usage_bucket(before)], 1, "{g:?}");
    let keeper_usage = runtime.status(&keeper).await.unwrap().usage;
    assert!((g.usage_sum - before - keeper_usage).abs() < 1e-5, "{g:?}");

    // A compaction moves smith to a lower bucket as soon as it returns; an uncompact moves it back.
    let outcome = runtime.compact(&smith, true).await.unwrap();
    let report = outcome.report().expect("compacted").clone();
    let after = runtime.status(&smith).await.unwrap().usage;
    assert!(
        usage_bucket(after) < usage_bucket(before),
        "{before} → {after}"
    );
    let g = runtime.agent_gauges();
    assert_eq!(g.by_usage[usage_bucket(before)], 0, "{g:?}");
    assert_eq!(g.by_usage[usage_bucket(after)], 1, "{g:?}");
    assert_adds_up(&runtime, &g);
    runtime
        .uncompact(&smith, report.summary_seq.unwrap())
        .await
        .unwrap();
    let g = runtime.agent_gauges();
    assert_eq!(g.by_usage[usage_bucket(before)], 1, "{g:?}");
    assert_adds_up(&runtime, &g);

    // The keeper calls a host tool and waits for it.
    stub.push(Reply::tool_call(
        "call_1",
        "give_item",
        &serde_json::json!({"item": "sword"}),
    ));
    runtime
        .send(
            &keeper,
            Inbound::User {
                content: "A sword, please.".into(),
                name: Some("Aldric".into()),
            },
        )
        .await
        .unwrap();
    let g = until(&runtime, "the keeper waiting for its tool", |g| {
        g.in_state(AgentState::WaitingForTools) == 1
    })
    .await;
    assert_eq!(g.in_state(AgentState::Idle), 1);
    assert_adds_up(&runtime, &g);

    // A new agent is counted at once, a retired one (waiting for its tool) no more.
    runtime
        .create_agent(id("baker"), AgentOverrides::default())
        .unwrap();
    let g = runtime.agent_gauges();
    assert_eq!(g.in_state(AgentState::Idle), 2);
    assert_adds_up(&runtime, &g);
    runtime.retire_agent(&keeper).await.unwrap();
    let g = runtime.agent_gauges();
    assert_eq!(g.in_state(AgentState::WaitingForTools), 0, "{g:?}");
    assert_eq!(g.agents(), 2);
    assert_adds_up(&runtime, &g);

    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(runtime.agent_gauges(), AgentGaugesSnapshot::default());
}
