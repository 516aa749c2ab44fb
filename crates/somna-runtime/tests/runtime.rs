//! End-to-end: real actors in an actix System, a temporary sled db, the stub LLM server over HTTP.
//! Time is accelerated through config: agents tick every 20 ms.

use std::sync::Arc;
use std::time::Duration;

use somna_core::config::{AgentOverrides, ResolvedConfig};
use somna_core::record::Trigger;
use somna_core::{AgentId, Message, Timestamp};
use somna_llm::LlmClient;
use somna_runtime::protocol::SleepResult;
use somna_runtime::{CompactionReport, Event, Inbound, Runtime, RuntimeOptions, Stamped};
use somna_store::{Store, StoreOptions};
use somna_testkit::{Reply, StubLlmServer};
use tokio::sync::broadcast;

use crate::support::*;

/// A config with one `[[agents]]` entry per (id, max_context_tokens, extra TOML lines).
fn config(agents: &[(&str, u32, &str)]) -> ResolvedConfig {
    let defaults = "sleep_every = \"1h\"\ntool_timeout = \"300ms\"";
    runtime_config(
        Extra {
            defaults,
            ..Default::default()
        },
        agents,
    )
}

/// The window that puts `tokens` of history (plus the persona) at `usage`.
fn window_for(tokens: u64, usage: f64) -> u32 {
    let persona = u64::from(counter().count_text(PERSONA));
    ((tokens + persona) as f64 / usage).ceil() as u32
}

fn summarizer(stub: &StubLlmServer) -> Arc<dyn LlmClient> {
    stub.set_default(Reply::text(
        "## Topic arc\n- Aldric orders tools for the mill near Millbrook. [#0]\n## Decisions\n- Deliver to the north gate. [#0]",
    ));
    stub_client(stub, Duration::from_secs(5))
}

/// Collects events until `done` holds for one of them (or panics after `timeout`).
async fn wait_for(
    rx: &mut broadcast::Receiver<Stamped>,
    timeout: Duration,
    done: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(s)) => {
                let stop = done(&s.event);
                seen.push(s.event);
                if stop {
                    return seen;
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(e)) => panic!("event stream ended: {e}"),
            Err(_) => panic!("timed out; events so far: {seen:#?}"),
        }
    }
}

/// A runtime over `store` and `llm` whose events are subscribed to before the start: an agent's
/// first tick (an emergency) may come before `start` returns.
fn start_subscribed(
    cfg: ResolvedConfig,
    store: &Store,
    llm: Arc<dyn LlmClient>,
) -> (Runtime, broadcast::Receiver<Stamped>) {
    let bus = somna_runtime::EventBus::new(4096);
    let rx = bus.subscribe();
    let options = RuntimeOptions {
        events: Some(bus),
        ..options(false)
    };
    (
        Runtime::start(cfg, store.clone(), llm, options).unwrap(),
        rx,
    )
}

/// The events already published (none is waited for).
fn drain(rx: &mut broadcast::Receiver<Stamped>) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(s) => seen.push(s.event),
            Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
            Err(_) => return seen,
        }
    }
}

fn kinds(events: &[Event], agent: &AgentId) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| e.agent() == agent)
        .map(Event::kind)
        .collect()
}

#[actix::test]
async fn emergency_fires_at_tick_start_above_the_threshold_and_not_below() {
    let stub = StubLlmServer::start();
    let store = Store::temporary().unwrap();
    let (hot, cool) = (id("hot"), id("cool"));
    for a in [&hot, &cool] {
        store.create_agent(a, Timestamp(0)).unwrap();
        fill(&store, a, 40, Timestamp(0));
    }
    let tokens = store.usage_tokens(&hot).unwrap();
    let cfg = config(&[
        ("hot", window_for(tokens, 0.85), ""),
        ("cool", window_for(tokens, 0.78), ""),
    ]);
    let (runtime, mut rx) = start_subscribed(cfg, &store, summarizer(&stub));
    let events = wait_for(
        &mut rx,
        Duration::from_secs(10),
        |e| matches!(e, Event::CompactionCompleted { agent, .. } if agent.as_str() == "hot"),
    )
    .await;
    assert_eq!(
        kinds(&events, &hot),
        [
            "emergency_triggered",
            "compaction_started",
            "compaction_completed"
        ]
    );
    let Some(Event::CompactionCompleted { report, .. }) = events.last() else {
        unreachable!()
    };
    assert_eq!(report.trigger, Trigger::Emergency);
    assert!(report.usage_after < 0.8);
    // The cool agent (78% < 80%) ticks without an emergency: 20 ticks, each handled before
    // `tick` returns (an emergency is announced within the tick itself).
    for _ in 0..20 {
        runtime.tick(&cool).await.unwrap();
    }
    let later = drain(&mut rx);
    assert!(kinds(&events, &cool).is_empty() && kinds(&later, &cool).is_empty());
    let cool_status = runtime.status(&cool).await.unwrap();
    assert_eq!(cool_status.compaction_count, 0);
    assert!(cool_status.usage > 0.75 && cool_status.usage < 0.8);
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_invariants(&store, &hot);
}

#[actix::test]
async fn sleep_consolidates_before_compacting_and_journals_the_synthesis() {
    let stub = StubLlmServer::start();
    let (store, smith) = with_history("smith", 40);
    notes(
        &store,
        &smith,
        &[
            "Aldric owes 40 silver for the sword",
            "Marta's inn needs a new kettle",
        ],
    );
    let tokens = store.usage_tokens(&smith).unwrap();
    // The scheduler drives the sleep: every 300 ms of real time.
    let cfg = config(&[("smith", window_for(tokens, 0.74), "sleep_every = \"300ms\"")]);
    let llm = summarizer(&stub);
    stub.push(Reply::text(
        "- Aldric owes 40 silver [#0]\n- Marta's inn needs a kettle [#1]",
    ));
    let runtime = Runtime::start(cfg, store.clone(), llm, options(true)).unwrap();
    let mut rx = runtime.subscribe();
    let events = until_kind(&mut rx, Duration::from_secs(10), "sleep_completed").await;
    assert_eq!(
        kinds(&events, &smith),
        [
            "sleep_started",
            "consolidation_completed",
            "compaction_started",
            "compaction_completed",
            "sleep_completed"
        ]
    );
    let facts = store.facts(&smith).unwrap();
    assert_eq!(facts.len(), 2);
    assert_eq!(facts[0].source_entry_ids, vec![0]);
    // The notes are consolidated; what is left is what the compaction wrote afterwards (the next
    // sleep consolidates those).
    let left = store.unconsolidated(&smith, 1).unwrap();
    assert!(left.iter().all(|e| e.id >= 2), "{left:?}");
    let synthesis = synthesis_entries(&store, &smith);
    assert_eq!(synthesis.len(), 1);
    assert!(synthesis[0].content.contains("Millbrook"));
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[actix::test]
async fn agents_honour_their_own_thresholds_and_configure_survives_a_restart() {
    let stub = StubLlmServer::start();
    let (dir, store) = on_disk();
    let (eager, patient) = (id("eager"), id("patient"));
    for a in [&eager, &patient] {
        store.create_agent(a, Timestamp(0)).unwrap();
        fill(&store, a, 40, Timestamp(0));
    }
    let tokens = store.usage_tokens(&eager).unwrap();
    let window = window_for(tokens, 0.65);
    let cfg = config(&[
        ("eager", window, "compaction.sleep_threshold = 0.5"),
        (
            "patient",
            window,
            "compaction.sleep_threshold = 0.7\ncompaction.emergency_threshold = 0.9",
        ),
    ]);
    let runtime = start(cfg.clone(), &store, summarizer(&stub));
    let slept = |r: SleepResult| match r {
        SleepResult::Slept { compaction, .. } => compaction.expect("a compaction outcome"),
        SleepResult::Busy => panic!("busy"),
    };
    let e = slept(runtime.sleep(&eager).await.unwrap());
    let p = slept(runtime.sleep(&patient).await.unwrap());
    assert!(e.report().is_some(), "eager compacts at 65% ≥ 50%: {e:?}");
    assert!(
        matches!(p, somna_runtime::CompactionOutcome::Skipped { .. }),
        "patient skips at 65% < 70%: {p:?}"
    );

    // Lower the patient agent's threshold at run time: the next sleep compacts.
    let changed = runtime
        .configure(&patient, overrides(&["compaction.sleep_threshold=0.6"]))
        .await
        .unwrap();
    assert_eq!(changed.compaction.sleep_threshold, 0.6);
    // An invalid change is refused and names the key.
    let err = runtime
        .configure(&patient, overrides(&["compaction.emergency_threshold=0.5"]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("emergency_threshold"), "{err}");
    let p = slept(runtime.sleep(&patient).await.unwrap());
    assert!(p.report().is_some(), "{p:?}");
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    drop(runtime);
    drop(store);

    // Restart on the same database: the run-time change is still there.
    let store = reopen(dir.path()).await;
    let runtime = start(cfg, &store, summarizer(&stub));
    let status = runtime.status(&patient).await.unwrap();
    assert_eq!(status.config.compaction.sleep_threshold, 0.6);
    assert_eq!(status.compaction_count, 1);
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A store in a fresh directory, for a run that restarts on it ([`reopen`]).
fn on_disk() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    (dir, store)
}

/// Opens a database again once every handle of the previous run is gone (the actors drop theirs
/// when their Arbiter stops).
async fn reopen(path: &std::path::Path) -> Store {
    for _ in 0..100 {
        if let Ok(s) = Store::open(path, StoreOptions::default()) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the database stayed locked");
}

#[actix::test]
async fn shutdown_during_an_in_flight_compaction_loses_nothing() {
    let stub = StubLlmServer::start();
    // The summary request is held until the end of the test: the compaction cannot finish.
    stub.hold();
    stub.set_default(Reply::text("## Topic arc\n- x"));
    let (dir, store) = on_disk();
    let smith = id("smith");
    store.create_agent(&smith, Timestamp(0)).unwrap();
    let appended = fill(&store, &smith, 40, Timestamp(0));
    let tokens = store.usage_tokens(&smith).unwrap();
    let cfg = config(&[("smith", window_for(tokens, 0.7), "")]);
    let runtime = start(cfg, &store, stub_client(&stub, Duration::from_secs(10)));
    let compaction = {
        let runtime = runtime.clone();
        let smith = smith.clone();
        actix::spawn(async move { runtime.compact(&smith, true).await })
    };
    assert!(stub.wait_for_requests(1, Duration::from_secs(30)).await);
    assert!(stub.in_flight() >= 1, "the summary request is in flight");
    // A short grace: the compaction is abandoned mid-way.
    runtime.shutdown(Duration::from_millis(200)).await.unwrap();
    let _ = compaction.await;
    drop(runtime);
    drop(store);
    let store = reopen(dir.path()).await;
    assert_invariants(&store, &smith);
    let history = store.history(&smith).unwrap();
    let archive = store.archive_range(&smith, 0, usize::MAX).unwrap();
    assert_eq!(history.len() + archive.len(), appended.len());
    assert_eq!(
        history, appended,
        "the abandoned compaction changed nothing"
    );
}

#[actix::test]
async fn an_agent_replies_and_calls_a_host_tool_that_times_out_or_answers() {
    let stub = StubLlmServer::start();
    let (store, smith) = empty_store();
    let cfg = config(&[(
        "smith",
        8192,
        "tools = [{ name = \"give_item\", description = \"Give an item\", parameters = '{\"type\":\"object\"}' }]",
    )]);
    stub.push(give_item("call_1", "sword"));
    stub.push(Reply::text("Here is your sword."));
    stub.push(give_item("call_2", "shield"));
    stub.push(Reply::text("Sorry, I could not hand it over."));
    let runtime = start_stubbed(cfg, &store, &stub);
    let mut rx = runtime.subscribe();

    // The host answers the first call.
    aldric_says(&runtime, &smith, "A sword, please.").await;
    let events = until_kind(&mut rx, Duration::from_secs(5), "tool_call_requested").await;
    let Some(Event::ToolCallRequested { call_id, name, .. }) = events.last() else {
        unreachable!()
    };
    assert_eq!((call_id.as_str(), name.as_str()), ("call_1", "give_item"));
    host_answers(&runtime, &smith, "call_1", "{\"ok\":true}")
        .await
        .unwrap();
    let events = until_kind(&mut rx, Duration::from_secs(5), "agent_replied").await;
    let Some(Event::AgentReplied { text, .. }) = events.last() else {
        unreachable!()
    };
    assert_eq!(text, "Here is your sword.");
    // The model saw the host's tool result.
    let sent = stub.last_request().unwrap();
    assert_eq!(sent.messages().last().unwrap()["role"], "tool");
    // The advertised tools: the built-ins and the host's.
    let tools: Vec<String> = sent.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tools, ["journal_add", "recall", "give_item"]);

    // The host never answers the second call: after tool_timeout the model gets an error result.
    aldric_says(&runtime, &smith, "And a shield.").await;
    let events = until_kind(&mut rx, Duration::from_secs(5), "agent_replied").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolCallTimedOut { call_id, .. } if call_id == "call_2"))
    );
    let sent = stub.last_request().unwrap();
    let last = sent.messages().last().unwrap();
    assert_eq!(last["role"], "tool");
    assert!(last["content"].as_str().unwrap().contains("did not answer"));
    // An answer to an unknown call is refused.
    assert!(host_answers(&runtime, &smith, "nope", "x").await.is_err());
    stop_checked(runtime, &store, &smith).await;
}

#[actix::test]
async fn the_builtin_provider_talks_notes_and_recalls_offline() {
    let (store, smith) = empty_store();
    let cfg = config(&[("smith", 8192, "")]);
    let runtime = start(cfg, &store, Arc::new(somna_llm::BuiltinClient::new()));
    let mut rx = runtime.subscribe();
    aldric_says(
        &runtime,
        &smith,
        "My name is Aldric and I promise to pay 40 silver by Friday for the sword.",
    )
    .await;
    // Talks: the reply event carries what the history's last message says.
    let text = next_reply(&mut rx).await;
    let history = store.history(&smith).unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.role, somna_core::Role::Assistant);
    assert_eq!(last.content, text);
    assert!(!text.trim().is_empty());
    // Notes: the promise went into the journal through the journal_add tool.
    let journal = store
        .query_journal(&smith, &somna_core::JournalQuery::default())
        .unwrap();
    assert!(
        journal.iter().any(|e| e.content.contains("40 silver")),
        "{journal:?}"
    );
    // Recalls: asked later, the reply brings the promise back.
    aldric_says(&runtime, &smith, "What did I promise to pay you?").await;
    let text = next_reply(&mut rx).await;
    assert!(text.contains("40 silver"), "{text}");
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Each turn that ends in a reply is counted with the time its work took (what `/metrics`
/// exports as `somna_turn_work_seconds`).
#[actix::test]
async fn each_reply_is_a_turn_counted_with_its_work_time() {
    let (store, smith) = empty_store();
    let cfg = config(&[("smith", 8192, "")]);
    let runtime = start(cfg, &store, Arc::new(somna_llm::BuiltinClient::new()));
    let mut rx = runtime.subscribe();
    assert_eq!(runtime.turn_stats().summary().turns, 0);
    for line in [
        "Good morrow, smith.",
        "What do you sell?",
        "How much for the axe?",
    ] {
        aldric_says(&runtime, &smith, line).await;
        next_reply(&mut rx).await;
    }
    // Recorded on the agent's Arbiter when the step's job has ended, just after its reply event.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while runtime.turn_stats().summary().turns < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turns were not counted"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let turns = runtime.turn_stats().summary();
    assert_eq!(turns.turns, 3);
    // The builtin brain's reply alone is tens of microseconds.
    assert!(turns.max > Duration::from_micros(10), "{turns:?}");
    assert!(
        turns.p50 <= turns.p99 && turns.p99 <= turns.max,
        "{turns:?}"
    );
    assert!(
        turns.max <= turns.sum && turns.sum <= turns.max * 3,
        "{turns:?}"
    );
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[actix::test]
async fn a_futile_emergency_is_not_retried_until_the_history_changes() {
    let stub = StubLlmServer::start();
    let (store, smith) = new_agent("smith");
    // A persona so long that it alone is over the emergency threshold: compaction cannot help.
    // Configuration refuses such a persona by its raw count, so it is set after validation, as a
    // calibration factor above 1 (a server counting more tokens than Somna estimates) can make
    // a persona that passed grow this large.
    fill(&store, &smith, 6, Timestamp(0));
    let persona = "You are Brannoc, the village smith, and you remember every blade. ".repeat(150);
    let persona_tokens = u64::from(counter().count_text(&persona));
    let tokens = store.usage_tokens(&smith).unwrap() + persona_tokens;
    let window = (tokens as f64 / 0.95).ceil() as u32;
    assert!(persona_tokens as f64 / f64::from(window) > 0.8);
    let mut cfg = config(&[("smith", window, "")]);
    cfg.agents[0].persona = persona;
    let (runtime, mut rx) = start_subscribed(cfg, &store, summarizer(&stub));
    let events = until_kind(&mut rx, Duration::from_secs(20), "emergency_stuck").await;
    assert_eq!(
        kinds(&events, &smith),
        [
            "emergency_triggered",
            "compaction_started",
            "compaction_skipped",
            "emergency_stuck"
        ]
    );
    let Some(Event::EmergencyStuck { reason, .. }) = events.last() else {
        unreachable!()
    };
    assert!(
        reason.contains(&format!(
            "the persona and working context take {persona_tokens}"
        )),
        "{reason}"
    );
    // 30 more ticks, each handled before `tick` returns: no new emergency.
    for _ in 0..30 {
        runtime.tick(&smith).await.unwrap();
    }
    let later = drain(&mut rx);
    assert!(kinds(&later, &smith).is_empty(), "{later:?}");
    // New history: the agent tries again (once). It was written behind the agent's back, which
    // its own ticks notice within `FULL_CHECK_EVERY` of them; an explicit tick notices at once.
    fill(&store, &smith, 1, Timestamp(0));
    runtime.tick(&smith).await.unwrap();
    let events = until_kind(&mut rx, Duration::from_secs(20), "compaction_skipped").await;
    assert_eq!(kinds(&events, &smith)[0], "emergency_triggered");
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[actix::test]
async fn a_sleep_asked_for_while_the_agent_is_busy_runs_after_the_job() {
    let stub = StubLlmServer::start();
    let (store, smith) = empty_store();
    let cfg = config(&[("smith", 8192, "")]);
    // The step's reply is held until the sleep and the compaction are queued behind it.
    stub.hold();
    stub.push(Reply::text("Aye, a sword."));
    let runtime = start_stubbed(cfg, &store, &stub);
    let mut rx = runtime.subscribe();
    runtime
        .send(
            &smith,
            Inbound::User {
                content: "A sword, please.".into(),
                name: None,
            },
        )
        .await
        .unwrap();
    // The step is in flight (its request is held); a sleep and a compaction queue behind it.
    assert!(stub.wait_for_requests(1, Duration::from_secs(30)).await);
    let sleep = runtime.sleep(&smith);
    let compact = runtime.compact(&smith, true);
    tokio::pin!(sleep, compact);
    // A first poll puts each request in the agent's mailbox, in this order.
    assert!(futures::poll!(&mut sleep).is_pending());
    assert!(futures::poll!(&mut compact).is_pending());
    // The mailbox is in order: once the status answers, both requests were taken and queued.
    let status = runtime.status(&smith).await.unwrap();
    assert_eq!(status.state, somna_runtime::AgentState::Stepping);
    stub.release();
    let (slept, compacted) = tokio::join!(sleep, compact);
    assert!(matches!(slept.unwrap(), SleepResult::Slept { .. }));
    assert!(
        matches!(
            compacted.unwrap(),
            somna_runtime::CompactionOutcome::Skipped { .. }
        ),
        "too little history to compact, but it ran"
    );
    let mut seen = Vec::new();
    while let Ok(s) = rx.try_recv() {
        seen.push(s.event);
    }
    let order = kinds(&seen, &smith);
    let replied = order.iter().position(|k| *k == "agent_replied").unwrap();
    let slept_at = order.iter().position(|k| *k == "sleep_started").unwrap();
    assert!(replied < slept_at, "{order:?}");
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[actix::test]
async fn uncompact_through_the_runtime_restores_and_says_so() {
    let stub = StubLlmServer::start();
    let (store, smith, runtime, before, report) = compacted_smith(&stub).await;
    let mut rx = runtime.subscribe();
    let seq = report.summary_seq.unwrap();
    let n = report.compacted;
    let undone = runtime.uncompact(&smith, seq).await.unwrap();
    assert_eq!(
        undone,
        somna_store::UncompactOutcome::Restored { restored: n }
    );
    assert_eq!(store.history(&smith).unwrap(), before);
    let events = until_kind(&mut rx, Duration::from_secs(5), "uncompacted").await;
    assert!(
        matches!(events.last(), Some(Event::Uncompacted { summary_seq: 0, restored, .. }) if *restored == n)
    );
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// With `[store] durable_acks` (the default) `send` returns only after a group-commit flush that
/// started after the input was appended; with `durable_acks = false` it waits for no flush.
#[actix::test]
async fn send_waits_for_a_flush_only_with_durable_acks() {
    for durable in [true, false] {
        let (store, smith) = empty_store();
        let cfg = config(&[("smith", 8192, "")]);
        let cfg = ResolvedConfig {
            store: somna_core::config::StoreConfig {
                durable_acks: durable,
                ..cfg.store.clone()
            },
            ..cfg
        };
        let runtime = start(cfg, &store, Arc::new(somna_llm::BuiltinClient::new()));
        for i in 0..3 {
            runtime
                .send(
                    &smith,
                    Inbound::Observation {
                        content: format!("bell {i} rings"),
                    },
                )
                .await
                .unwrap();
        }
        let stats = store.group_commit_stats();
        if durable {
            assert_eq!(stats.served, 3, "{stats:?}");
            assert!((1..=3).contains(&stats.flushes), "{stats:?}");
        } else {
            assert_eq!(stats, somna_store::GroupCommitStats::default());
        }
        runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

/// The acceptance test of issue 10 item 7: a host tool call the agent waits on when the process
/// stops is still pending after a restart, and the host's late answer is taken and replied to.
#[actix::test]
async fn a_pending_host_tool_call_survives_a_restart() {
    let stub = StubLlmServer::start();
    let (dir, store) = on_disk();
    let smith = id("smith");
    let cfg = config(&[(
        "smith",
        8192,
        "tool_timeout = \"1h\"\ntools = [{ name = \"give_item\", parameters = '{\"type\":\"object\"}' }]",
    )]);
    stub.push(give_item("call_1", "sword"));
    let llm = stub_client(&stub, Duration::from_secs(5));
    let runtime = start(cfg.clone(), &store, Arc::clone(&llm));
    let mut rx = runtime.subscribe();
    aldric_says(&runtime, &smith, "A sword, please.").await;
    until_kind(&mut rx, Duration::from_secs(5), "tool_call_requested").await;
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    drop(runtime);
    drop(store);

    let store = reopen(dir.path()).await;
    stub.push(Reply::text("Here is your sword."));
    let runtime = start(cfg, &store, llm);
    let status = runtime.status(&smith).await.unwrap();
    assert_eq!(status.state, somna_runtime::AgentState::WaitingForTools);
    let pending: Vec<&str> = status
        .pending_tools
        .iter()
        .map(|p| p.call_id.as_str())
        .collect();
    assert_eq!(pending, ["call_1"]);
    let mut rx = runtime.subscribe();
    host_answers(&runtime, &smith, "call_1", "{\"ok\":true}")
        .await
        .unwrap();
    let events = until_kind(&mut rx, Duration::from_secs(5), "agent_replied").await;
    assert!(
        matches!(events.last(), Some(Event::AgentReplied { text, .. }) if text == "Here is your sword.")
    );
    let sent = stub.last_request().unwrap();
    assert_eq!(sent.messages().last().unwrap()["role"], "tool");
    stop_checked(runtime, &store, &smith).await;
}

/// The acceptance test of issue 10 item 7: `sleep_every` changed at run time is honoured by the
/// scheduler without a restart. The agent starts with a sleep a year away; after the change to
/// 50 ms (real time here) it sleeps.
#[actix::test]
async fn a_run_time_sleep_every_change_is_honoured_without_restart() {
    let (store, smith) = empty_store();
    let cfg = config(&[("smith", 8192, "sleep_every = \"365d\"")]);
    let runtime = Runtime::start(
        cfg,
        store.clone(),
        Arc::new(somna_llm::BuiltinClient::new()),
        options(true),
    )
    .unwrap();
    let mut rx = runtime.subscribe();
    let changed = runtime
        .configure(
            &smith,
            AgentOverrides {
                sleep_every: Some(Duration::from_millis(50)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(changed.sleep_every, Duration::from_millis(50));
    let events = until_kind(&mut rx, Duration::from_secs(10), "sleep_completed").await;
    assert!(kinds(&events, &smith).contains(&"sleep_started"));
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// The runtime decides where an uncompact runs: a retired agent (no actor) is undone in the store,
/// a never-known id is refused.
#[actix::test]
async fn uncompact_of_a_retired_agent_is_routed_to_the_store_by_the_runtime() {
    let stub = StubLlmServer::start();
    let (store, smith, runtime, before, report) = compacted_smith(&stub).await;
    let seq = report.summary_seq.unwrap();
    runtime.retire_agent(&smith).await.unwrap();
    let undone = runtime.uncompact(&smith, seq).await.unwrap();
    assert_eq!(
        undone,
        somna_store::UncompactOutcome::Restored {
            restored: report.compacted
        }
    );
    assert_eq!(store.history(&smith).unwrap(), before);
    assert!(matches!(
        runtime.uncompact(&id("ghost"), 0).await,
        Err(somna_runtime::RuntimeError::UnknownAgent(_))
    ));
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// `smith` with 30 turns of history in a running runtime, compacted once by `stub`'s summarizer:
/// the store, the id, the runtime, the history before the compaction and the compaction's report.
async fn compacted_smith(
    stub: &StubLlmServer,
) -> (Store, AgentId, Runtime, Vec<Message>, CompactionReport) {
    let (store, smith) = with_history("smith", 30);
    let before = store.history(&smith).unwrap();
    let cfg = config(&[("smith", 8192, "")]);
    let runtime = start(cfg, &store, summarizer(stub));
    let outcome = runtime.compact(&smith, true).await.unwrap();
    let report = outcome.report().expect("compacted").clone();
    (store, smith, runtime, before, report)
}

/// A temporary store without agents, and the id `smith` (the runtime creates it from its config).
fn empty_store() -> (Store, AgentId) {
    (Store::temporary().unwrap(), id("smith"))
}

/// Shuts `runtime` down, then checks the store's invariants for `agent`.
async fn stop_checked(runtime: Runtime, store: &Store, agent: &AgentId) {
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_invariants(store, agent);
}

/// Aldric says `line` to `agent`; returns once the input is acknowledged.
async fn aldric_says(runtime: &Runtime, agent: &AgentId, line: &str) {
    let input = Inbound::User {
        content: line.into(),
        name: Some("Aldric".into()),
    };
    runtime.send(agent, input).await.unwrap();
}

/// The model's call `call_id` of the host tool `give_item` for `item`.
fn give_item(call_id: &str, item: &str) -> Reply {
    Reply::tool_call(call_id, "give_item", &serde_json::json!({ "item": item }))
}

/// The host's answer `content` to the tool call `call_id` of `agent`.
async fn host_answers(
    runtime: &Runtime,
    agent: &AgentId,
    call_id: &str,
    content: &str,
) -> Result<(), somna_runtime::RuntimeError> {
    let input = Inbound::ToolResult {
        call_id: call_id.into(),
        content: content.into(),
    };
    runtime.send(agent, input).await
}

/// The events on `rx` up to and including the next one of `kind` (`agent_replied`), within
/// `timeout`.
async fn until_kind(
    rx: &mut broadcast::Receiver<Stamped>,
    timeout: Duration,
    kind: &str,
) -> Vec<Event> {
    wait_for(rx, timeout, |e| e.kind() == kind).await
}

/// The text of the next `agent_replied` event on `rx` (within 5 s).
async fn next_reply(rx: &mut broadcast::Receiver<Stamped>) -> String {
    let events = until_kind(rx, Duration::from_secs(5), "agent_replied").await;
    match events.last() {
        Some(Event::AgentReplied { text, .. }) => text.clone(),
        _ => panic!("no reply: {events:?}"),
    }
}

/// Issue 26, item 5: an agent whose turns bring it near its emergency threshold sleeps early
/// (a `sleep_started` with `tired`), its compactions are a sleep's, no emergency runs, and the
/// durable sleep schedule is left as it was. Negative control: the same turns with the scheduler
/// off end in emergency compactions.
#[actix::test]
async fn a_tired_agent_sleeps_before_its_emergency() {
    for scheduled in [true, false] {
        let (store, smith) = empty_store();
        let cfg = runtime_config(
            Extra {
                defaults: "sleep_every = \"1h\"",
                ..Extra::default()
            },
            &[("smith", 1_500, "")],
        );
        let llm: Arc<dyn LlmClient> = Arc::new(somna_llm::BuiltinClient::new());
        let runtime = Runtime::start(cfg, store.clone(), llm, options(scheduled)).unwrap();
        let mut rx = runtime.subscribe();
        let mut events = Vec::new();
        let mut due = None;
        for i in 0..40 {
            aldric_says(
                &runtime,
                &smith,
                &format!("Order {i}: two iron hinges and a latch for the barn door, by Friday."),
            )
            .await;
            events.extend(until_kind(&mut rx, Duration::from_secs(10), "agent_replied").await);
            // The schedule the agent's load wrote.
            due = due.or(store.agent(&smith).unwrap().unwrap().next_sleep_at);
        }
        runtime.shutdown(Duration::from_secs(5)).await.unwrap();
        events.extend(drain(&mut rx));
        let tired = events
            .iter()
            .filter(|e| matches!(e, Event::SleepStarted { tired: true, .. }))
            .count();
        let emergencies = events
            .iter()
            .filter(|e| matches!(e, Event::EmergencyTriggered { .. }))
            .count();
        let by_sleep = events
            .iter()
            .filter(|e| {
                matches!(e, Event::CompactionCompleted { report, .. } if report.trigger == Trigger::Sleep)
            })
            .count();
        println!(
            "scheduled {scheduled}: {tired} tired sleeps, {by_sleep} sleep compactions, {emergencies} emergencies"
        );
        if scheduled {
            assert!(tired > 0 && by_sleep > 0, "{events:#?}");
            assert_eq!(emergencies, 0, "{events:#?}");
            assert!(due.is_some());
            assert_eq!(
                store.agent(&smith).unwrap().unwrap().next_sleep_at,
                due,
                "a tired sleep leaves the schedule as it was"
            );
        } else {
            assert_eq!(tired, 0);
            assert!(emergencies > 0, "the turns reach the emergency threshold");
        }
    }
}

/// A cluster node's tasks (membership, loader, inbox) take its shards and host their agents, and
/// stop at shutdown: after `Runtime::shutdown` the node has left the node list, and stays gone
/// for ten renewal periods (a membership task still running would heartbeat it back and take
/// the shards again). Needs Postgres (`SOMNA_TEST_PG_URL`).
#[actix::test]
async fn a_cluster_nodes_tasks_stop_at_shutdown() {
    let Some(url) = somna_testkit::pg_url_or_skip() else {
        return;
    };
    let schema = format!("rt_cluster_stop_{}", std::process::id());
    let node = "rt-node-1";
    let store = Store::open_postgres_cluster(
        &url,
        somna_store::PostgresOptions {
            schema: schema.clone(),
            pool_size: 4,
        },
        somna_store::ClusterOptions {
            node: node.into(),
            shards: 4,
            statement_timeout: Duration::from_secs(2),
        },
    )
    .unwrap();
    let mut cfg = config(&[("ada", 4000, ""), ("bob", 4000, "")]);
    cfg.cluster.shards = 4;
    cfg.cluster.renew_every = Duration::from_millis(100);
    cfg.cluster.lease_ttl = Duration::from_secs(2);
    cfg.cluster.poll_every = Duration::from_millis(100);
    let renew_every = cfg.cluster.renew_every;
    let runtime = Runtime::start(
        cfg,
        store.clone(),
        Arc::new(somna_llm::BuiltinClient::new()),
        options(false),
    )
    .unwrap();
    let view = store.cluster().unwrap();
    let listed = || view.nodes().unwrap().iter().any(|n| n.node == node);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while runtime.agent_ids().len() < 2 || !listed() {
        assert!(
            std::time::Instant::now() < deadline,
            "the node never took its shards: hosts {:?}",
            runtime.agent_ids()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    assert!(!listed(), "shutdown leaves the node list");
    tokio::time::sleep(renew_every * 10).await;
    assert!(
        !listed(),
        "a membership task still ran after shutdown: it heartbeat the node back"
    );
    assert!(view.held().is_empty(), "it took shards after shutdown");
    assert!(
        runtime.agent_ids().is_empty(),
        "it loaded agents after shutdown"
    );
    drop((runtime, store));
    let _ = Store::temporary_postgres_in(&url, &schema);
}

/// A node on Postgres loads its agents on several threads (`Runtime::start`): every agent of the
/// file and every agent already in the store is hosted once, with what its record holds (a
/// stored history owes a reply; a run-time override applies). Needs Postgres
/// (`SOMNA_TEST_PG_URL`).
#[actix::test]
async fn a_node_on_postgres_hosts_every_agent_of_its_file_and_store() {
    let Some(url) = somna_testkit::pg_url_or_skip() else {
        return;
    };
    let store = Store::temporary_postgres(&url).unwrap();
    let listed: Vec<String> = (0..23).map(|i| format!("npc{i:02}")).collect();
    let entries: Vec<(&str, u32, &str)> = listed.iter().map(|id| (id.as_str(), 4000, "")).collect();
    // Five agents created through the API earlier: in the store, not in the file.
    let extra: Vec<AgentId> = (0..5)
        .map(|i| AgentId::new(format!("guest{i}")).unwrap())
        .collect();
    for id in &extra {
        store.create_agent(id, Timestamp(1)).unwrap();
    }
    store
        .set_overrides(
            &extra[0],
            AgentOverrides {
                compaction: somna_core::config::CompactionOverrides {
                    max_context_tokens: Some(6000),
                    ..Default::default()
                },
                ..AgentOverrides::default()
            },
        )
        .unwrap();
    let stub = StubLlmServer::start();
    let runtime = Runtime::start(
        config(&entries),
        store.clone(),
        stub_client(&stub, Duration::from_secs(5)),
        options(false),
    )
    .unwrap();
    let mut hosted = runtime.agent_ids();
    hosted.sort();
    let mut expected: Vec<AgentId> = listed
        .iter()
        .map(|id| AgentId::new(id.as_str()).unwrap())
        .chain(extra.iter().cloned())
        .collect();
    expected.sort();
    assert_eq!(hosted, expected);
    let status = runtime.status(&extra[0]).await.unwrap();
    assert_eq!(
        status.max_context_tokens, 6000,
        "the stored override applies"
    );
    let status = runtime.status(&extra[1]).await.unwrap();
    assert_eq!(status.id, extra[1]);
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}
