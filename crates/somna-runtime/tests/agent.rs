//! The `Agent` component on its own: no actix System, no HTTP, a clock the test moves by hand.
//!
//! Each test drives the plain struct the way the actor does (inbound → tick → the job it returns
//! → finish; sleep, compact, status, configure) against a scripted LLM that answers at once, on a
//! paused tokio clock (`start_paused`): the runtime's `Clock` reads tokio's time, so
//! `tokio::time::advance` moves the agent's "now" (its backoffs, its tool deadlines, the times it
//! stamps) without a real wait.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use somna_core::config::{AgentOverrides, CompactionOverrides, ToolSpec};
use somna_core::{Role, Timestamp};
use somna_llm::{BuiltinClient, ChatRequest, ChatResponse, LlmClient, LlmError, Purpose};
use somna_runtime::agent::{JobKind, MAX_TURN_ATTEMPTS};
use somna_runtime::{Agent, AgentState, Clock, Event, Inbound};
use somna_store::Store;
use tokio::time::advance;

use crate::support::*;

/// An LLM whose chat turns follow a script (then "Aye."); every other request (summaries,
/// extraction, scores, consolidation) goes to the builtin provider. Answers at once, no IO.
#[derive(Debug, Default)]
struct Scripted {
    chats: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
    builtin: BuiltinClient,
}

impl Scripted {
    fn push(&self, answer: Result<ChatResponse, LlmError>) {
        self.chats.lock().unwrap().push_back(answer);
    }
}

impl LlmClient for Scripted {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let answer = if request.purpose == Purpose::Chat {
            let next = self.chats.lock().unwrap().pop_front();
            next.unwrap_or_else(|| Ok(reply("Aye.")))
        } else {
            Ok(self.builtin.respond(&request))
        };
        Box::pin(async move { answer })
    }

    fn provider(&self) -> &str {
        "scripted"
    }
}

/// A chat answer with this text.
fn reply(text: &str) -> ChatResponse {
    ChatResponse {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: None,
        latency: Duration::ZERO,
        attempts: 1,
        model: MODEL.into(),
        structured_fallbacks: 0,
    }
}

/// A chat answer that calls the host tool `give_item`.
fn calls_give_item(call_id: &str) -> ChatResponse {
    ChatResponse {
        tool_calls: vec![somna_core::ToolCall {
            id: call_id.into(),
            name: "give_item".into(),
            arguments: r#"{"item":"sword"}"#.into(),
        }],
        ..reply("")
    }
}

/// A failure retrying may fix.
fn overloaded() -> LlmError {
    LlmError::Timeout {
        after: Duration::from_secs(5),
        attempts: 1,
    }
}

const START: Timestamp = Timestamp(1_000_000);

/// An agent `smith` with `messages` turns of history in a window of `max_tokens`, which may call
/// the host tool `give_item` (answered within 30 s), over a scripted LLM, on a clock that starts
/// at `START`.
fn bench(messages: usize, max_tokens: u32) -> (Driven, Arc<Scripted>) {
    let store = Store::temporary().unwrap();
    let id = id("smith");
    store.create_agent(&id, START).unwrap();
    fill(&store, &id, messages, START);
    let mut config = agent_config("smith", max_tokens);
    config.tools = vec![ToolSpec {
        name: "give_item".into(),
        description: "Hands an item to the customer.".into(),
        parameters: r#"{"type":"object"}"#.into(),
    }];
    config.tool_timeout = Duration::from_secs(30);
    let llm = Arc::new(Scripted::default());
    let deps = agent_deps(&store, llm.clone(), Clock::starting_at(START, 1.0));
    (Driven::load(config, deps), llm)
}

#[tokio::test(start_paused = true)]
async fn input_is_kept_at_once_and_one_tick_steps_while_the_agent_stays_busy() {
    let (mut b, _) = bench(4, 8192);
    b.say("A sword, please.");
    let status = b.agent.status().unwrap();
    assert!(status.needs_reply);
    assert_eq!(status.history_len, 5, "appended before any tick");

    let job = b.agent.tick().unwrap().expect("a step");
    assert_eq!(job.kind, JobKind::Step);
    assert_eq!(b.agent.state(), AgentState::Stepping);
    // While the step is in flight nothing else starts.
    assert!(b.agent.tick().unwrap().is_none());
    assert!(b.agent.sleep(false).is_none());
    assert!(b.agent.compact(true).is_none());

    let out = b.run(job).await;
    assert!(out.replied && out.error.is_none(), "{out:?}");
    let status = b.agent.status().unwrap();
    assert_eq!(status.state, AgentState::Idle);
    assert!(!status.needs_reply && !status.reply_owed, "{status:?}");
    let last = b.store.history_tail(&b.id, 1).unwrap().remove(0);
    assert_eq!(
        (last.role, last.content.as_str()),
        (Role::Assistant, "Aye.")
    );
    assert_eq!(b.kinds(), ["agent_replied"]);
    assert!(b.tick().await.is_none(), "nothing is owed");
}

#[tokio::test(start_paused = true)]
async fn a_failing_turn_backs_off_on_the_clock_and_fails_after_bounded_attempts() {
    let (mut b, llm) = bench(4, 8192);
    for _ in 0..MAX_TURN_ATTEMPTS {
        llm.push(Err(overloaded()));
    }
    b.say("Hello?");
    let out = b.tick().await.expect("the first attempt");
    assert!(out.error.is_some());
    // Backoff 2 s, then 4 s, on the agent's clock: no attempt before it is due.
    for backoff in [2, 4] {
        assert!(b.tick().await.is_none(), "backing off");
        advance(Duration::from_secs(backoff - 1)).await;
        assert!(b.tick().await.is_none(), "still backing off");
        advance(Duration::from_secs(1)).await;
        let job = b.agent.tick().unwrap().expect("the next attempt is due");
        assert_eq!(job.kind, JobKind::Step);
        let out = b.run(job).await;
        assert!(out.error.is_some());
    }
    let failed = b.events().into_iter().find_map(|e| match e {
        Event::TurnFailed { attempts, .. } => Some(attempts),
        _ => None,
    });
    assert_eq!(failed, Some(MAX_TURN_ATTEMPTS));
    let status = b.agent.status().unwrap();
    assert!(!status.needs_reply && status.reply_owed, "{status:?}");
    advance(Duration::from_secs(3600)).await;
    assert!(b.tick().await.is_none(), "no retry after the turn failed");
    // New input owes a reply again, and the script is used up: the model answers.
    b.say("Hello again?");
    let out = b.tick().await.expect("a new turn");
    assert!(out.replied);
    assert!(!b.agent.status().unwrap().reply_owed);
}

#[tokio::test(start_paused = true)]
async fn a_host_tool_call_waits_for_the_host_then_the_step_goes_on() {
    let (mut b, llm) = bench(4, 8192);
    llm.push(Ok(calls_give_item("call_1")));
    b.say("A sword, please.");
    let out = b.tick().await.expect("a step");
    assert!(out.error.is_none(), "{out:?}");
    assert_eq!(b.agent.state(), AgentState::WaitingForTools);
    assert_eq!(b.kinds(), ["tool_call_requested"]);
    let status = b.agent.status().unwrap();
    assert_eq!(status.pending_tools.len(), 1);
    assert_eq!(
        status.pending_tools[0].deadline,
        START.saturating_add(Duration::from_secs(30))
    );
    // No sleep and no step while the host owes an answer; a compaction may run.
    assert!(b.agent.sleep(false).is_none());
    assert!(b.tick().await.is_none());
    assert!(matches!(
        b.agent.inbound(Inbound::ToolResult {
            call_id: "call_9".into(),
            content: "{}".into(),
        }),
        Err(somna_runtime::protocol::InboundError::UnknownToolCall(_))
    ));

    b.agent
        .inbound(Inbound::ToolResult {
            call_id: "call_1".into(),
            content: r#"{"given":true}"#.into(),
        })
        .unwrap();
    let status = b.agent.status().unwrap();
    assert_eq!(status.state, AgentState::Idle);
    assert!(status.needs_reply && status.pending_tools.is_empty());
    let out = b.tick().await.expect("the step goes on with the result");
    assert!(out.replied);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_host_tool_call_expires_at_its_deadline() {
    let (mut b, llm) = bench(4, 8192);
    llm.push(Ok(calls_give_item("call_1")));
    b.say("A sword, please.");
    b.tick().await.expect("a step");
    b.events();
    advance(Duration::from_secs(29)).await;
    assert!(b.tick().await.is_none(), "the host has a second left");
    assert_eq!(b.agent.status().unwrap().pending_tools.len(), 1);

    advance(Duration::from_secs(1)).await;
    // The tick answers the call with an error result and steps at once: the model is not left
    // hanging.
    let job = b.agent.tick().unwrap().expect("a step after the timeout");
    assert_eq!(job.kind, JobKind::Step);
    let out = b.run(job).await;
    assert!(out.replied);
    assert_eq!(b.kinds(), ["tool_call_timed_out", "agent_replied"]);
    let history = b.store.history_tail(&b.id, 2).unwrap();
    assert_eq!(history[0].tool_call_id.as_deref(), Some("call_1"));
    assert!(history[0].content.contains("did not answer"), "{history:?}");
    assert_eq!(
        history[0].created_at,
        START.saturating_add(Duration::from_secs(30)),
        "stamped by the agent's clock"
    );
}

#[tokio::test(start_paused = true)]
async fn the_emergency_check_comes_first_in_a_tick_and_the_step_follows() {
    // 40 turns in a window they fill to about 90%.
    let store_tokens = {
        let (b, _) = bench(40, 100_000);
        b.store.usage_tokens(&b.id).unwrap()
    };
    let (mut b, _) = bench(40, (store_tokens as f64 / 0.9) as u32);
    b.say("Is my sword ready?");
    let before = b.agent.usage().unwrap();
    assert!(before >= 0.8, "usage {before}");

    let job = b.agent.tick().unwrap().expect("an emergency compaction");
    assert_eq!(job.kind, JobKind::Emergency { then_step: true });
    assert_eq!(b.agent.state(), AgentState::Compacting);
    let out = b.run(job).await;
    assert!(out.replied, "the step ran after the compaction: {out:?}");
    let after = b.agent.usage().unwrap();
    assert!(after < 0.8, "usage {before} → {after}");
    let kinds = b.kinds();
    assert_eq!(kinds.first(), Some(&"emergency_triggered"), "{kinds:?}");
    assert!(kinds.contains(&"compaction_completed"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"agent_replied"), "{kinds:?}");
    let status = b.agent.status().unwrap();
    assert_eq!(status.compaction_count, 1);
    assert!(status.archive_len > 0);
}

#[tokio::test(start_paused = true)]
async fn sleep_and_a_manual_compaction_run_as_jobs_one_at_a_time() {
    let (mut b, _) = bench(30, 8192);
    let job = b.agent.sleep(false).expect("an idle agent sleeps");
    assert_eq!(job.kind, JobKind::Sleep { tired: false });
    assert_eq!(b.agent.state(), AgentState::Sleeping);
    assert!(b.agent.compact(true).is_none(), "one job at a time");
    assert!(b.agent.tick().unwrap().is_none());
    let out = b.run(job).await;
    assert!(out.error.is_none(), "{out:?}");
    // Far below the sleep threshold: the sleep's compaction skipped.
    assert!(
        matches!(
            out.compaction,
            Some(somna_runtime::CompactionOutcome::Skipped { .. })
        ),
        "{:?}",
        out.compaction
    );
    assert_eq!(b.agent.state(), AgentState::Idle);
    let kinds = b.kinds();
    assert_eq!(kinds.first(), Some(&"sleep_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"sleep_completed"), "{kinds:?}");

    let job = b.agent.compact(true).expect("an idle agent compacts");
    assert_eq!(job.kind, JobKind::Compact { force: true });
    assert_eq!(b.agent.state(), AgentState::Compacting);
    let out = b.run(job).await;
    let report = out.compaction.as_ref().and_then(|c| c.report()).cloned();
    let report = report.unwrap_or_else(|| panic!("{out:?}"));
    let status = b.agent.status().unwrap();
    assert_eq!(status.state, AgentState::Idle);
    assert_eq!(status.compaction_count, 1);
    assert_eq!(status.archive_len, report.compacted as u64);
    // The summary can be undone, and the agent says so.
    let summary_seq = report.summary_seq.unwrap();
    b.events();
    let undone = b.agent.uncompact(summary_seq).unwrap();
    assert!(matches!(
        undone,
        somna_store::UncompactOutcome::Restored { .. }
    ));
    assert_eq!(b.kinds(), ["uncompacted"]);
    assert_eq!(b.agent.status().unwrap().archive_len, 0);
}

#[tokio::test(start_paused = true)]
async fn the_clock_stamps_input_and_runs_accelerated() {
    let store = Store::temporary().unwrap();
    let id = id("smith");
    // One real second is a simulated minute.
    let clock = Clock::starting_at(START, 60.0);
    let llm = Arc::new(Scripted::default());
    let mut agent =
        Agent::load(agent_config("smith", 8192), agent_deps(&store, llm, clock)).unwrap();
    agent
        .inbound(Inbound::Observation {
            content: "The bell rings.".into(),
        })
        .unwrap();
    advance(Duration::from_secs(2)).await;
    agent
        .inbound(Inbound::Observation {
            content: "The bell rings again.".into(),
        })
        .unwrap();
    let stamps: Vec<Timestamp> = store
        .history(&id)
        .unwrap()
        .iter()
        .map(|m| m.created_at)
        .collect();
    assert_eq!(
        stamps,
        [START, START.saturating_add(Duration::from_secs(120))]
    );
    // The config's `tick_every` (1 s) in real time.
    let tick = agent.tick_period().as_secs_f64();
    assert!((tick - 1.0 / 60.0).abs() < 1e-6, "{tick}");
}

#[tokio::test(start_paused = true)]
async fn a_run_time_change_applies_at_once_and_survives_a_reload() {
    let (mut b, llm) = bench(4, 8192);
    let changed = b
        .agent
        .configure(AgentOverrides {
            tick_every: Some(Duration::from_secs(5)),
            compaction: CompactionOverrides {
                sleep_threshold: Some(0.6),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    assert_eq!(changed.compaction.sleep_threshold, 0.6);
    assert_eq!(b.agent.tick_period(), Duration::from_secs(5));
    assert_eq!(b.agent.status().unwrap().config, changed);
    // An invalid change is refused and changes nothing.
    let refused = b.agent.configure(AgentOverrides {
        compaction: CompactionOverrides {
            emergency_threshold: Some(0.5),
            ..Default::default()
        },
        ..Default::default()
    });
    assert!(refused.is_err());
    assert_eq!(b.agent.config(), &changed);

    let deps = agent_deps(&b.store, llm.clone(), Clock::starting_at(START, 1.0));
    let reloaded = Agent::load(agent_config("smith", 8192), deps).unwrap();
    assert_eq!(reloaded.config().compaction.sleep_threshold, 0.6);
}
