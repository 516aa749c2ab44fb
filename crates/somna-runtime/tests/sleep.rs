//! Sleep in a running runtime: consolidation, reflection, compaction, and what the sleep's result
//! says when a step fails. The stub server plays the LLM.

use std::time::Duration;

use somna_core::config::ResolvedConfig;
use somna_core::{AgentId, JournalEntry, SourceType, Timestamp};
use somna_runtime::Runtime;
use somna_runtime::agent::{MAX_REFLECTION_CHARS, MAX_REFLECTION_LINES};
use somna_runtime::protocol::CompactionOutcome;
use somna_runtime::protocol::SleepResult;
use somna_store::Store;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::*;

/// A config with `agents` (id, max_context_tokens) and extra `[runtime]`/`[defaults.memory]`
/// lines; agents sleep every 150 ms.
fn config(agents: &[(&str, u32)], runtime: &str, memory: &str) -> ResolvedConfig {
    let agents: Vec<(&str, u32, &str)> = agents.iter().map(|&(id, max)| (id, max, "")).collect();
    runtime_config(
        Extra {
            runtime,
            defaults: "sleep_every = \"150ms\"",
            memory,
        },
        &agents,
    )
}

/// A store where `agent` has `n` journal entries of importance `importance`.
fn journaled(store: &Store, agent: &AgentId, n: usize, importance: u8) {
    store.create_agent(agent, Timestamp(0)).unwrap();
    for i in 0..n {
        store
            .append_journal(
                agent,
                JournalEntry::new(
                    Timestamp(i as u64 + 1),
                    SourceType::Observation,
                    importance,
                    line(i),
                ),
            )
            .unwrap();
    }
}

/// A temporary store where `smith` has `n` journal entries of importance `importance`.
fn smith_journaled(n: usize, importance: u8) -> (Store, AgentId) {
    let store = Store::temporary().unwrap();
    let smith = id("smith");
    journaled(&store, &smith, n, importance);
    (store, smith)
}

/// A runtime whose LLM is a new stub, hosting `smith` (a window of 100,000 tokens, reflection at
/// `reflection_threshold`) with `n` journal entries of importance `importance`.
fn smith_sleeping(
    n: usize,
    importance: u8,
    reflection_threshold: u32,
) -> (StubLlmServer, Store, AgentId, Runtime) {
    let stub = StubLlmServer::start();
    let (store, smith) = smith_journaled(n, importance);
    let memory = format!("reflection_threshold = {reflection_threshold}");
    let cfg = config(&[("smith", 100_000)], "", &memory);
    let runtime = start_stubbed(cfg, &store, &stub);
    (stub, store, smith, runtime)
}

fn slept(result: SleepResult) -> (Option<CompactionOutcome>, Option<String>) {
    match result {
        SleepResult::Slept {
            compaction, error, ..
        } => (compaction, error),
        SleepResult::Busy => panic!("busy"),
    }
}

/// Issue 10, item 3: a consolidation reply without fact lines must not mark entries consolidated;
/// an explicit "(none)" does, with no fact.
#[actix::test]
async fn a_consolidation_reply_without_facts_marks_nothing() {
    let (stub, store, smith, runtime) = smith_sleeping(10, 6, 1000);

    stub.push(Reply::text("I have read the journal carefully."));
    let (_, error) = slept(runtime.sleep(&smith).await.unwrap());
    let error = error.expect("the sleep reports the failed consolidation");
    assert!(error.contains("consolidation failed"), "{error}");
    assert!(error.contains("no `- fact` lines"), "{error}");
    assert_eq!(store.unconsolidated(&smith, 1).unwrap().len(), 10);
    assert!(store.facts(&smith).unwrap().is_empty());

    stub.push(Reply::text("(none)"));
    let (_, error) = slept(runtime.sleep(&smith).await.unwrap());
    assert_eq!(error, None);
    assert!(store.unconsolidated(&smith, 1).unwrap().is_empty());
    assert!(store.facts(&smith).unwrap().is_empty());
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Issue 10, item 4: with the LLM failing, the sleep's result carries every failed step.
#[actix::test]
async fn a_sleep_result_carries_every_failed_step() {
    let stub = StubLlmServer::answering(Reply::Status(500, "{\"error\":\"boom\"}".into()));
    let (store, smith) = smith_journaled(10, 6);
    fill(&store, &smith, 40, Timestamp(0));
    // Usage 75%: above the sleep threshold, below the emergency one.
    let persona = u64::from(counter().count_text("You are Brannoc, the village smith."));
    let window = ((store.usage_tokens(&smith).unwrap() + persona) as f64 / 0.75).ceil() as u32;
    let cfg = config(&[("smith", window)], "", "reflection_threshold = 20");
    let runtime = start_stubbed(cfg, &store, &stub);

    let (compaction, error) = slept(runtime.sleep(&smith).await.unwrap());
    assert!(
        matches!(compaction, Some(CompactionOutcome::Failed { .. })),
        "{compaction:?}"
    );
    let error = error.expect("the sleep reports its failures");
    for step in [
        "consolidation failed",
        "reflection failed",
        "compaction failed",
    ] {
        assert!(error.contains(step), "{step}: {error}");
    }
    assert_eq!(store.unconsolidated(&smith, 1).unwrap().len(), 10);
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Reflection runs during sleep once enough importance accumulated, and its size is capped.
#[actix::test]
async fn reflection_during_sleep_writes_capped_entries() {
    let (stub, store, smith, runtime) = smith_sleeping(6, 9, 50);
    let long = "Aldric keeps coming back to the mill and its orders ".repeat(40);
    stub.push(Reply::text("- Aldric orders tools for the mill [#1, #2]"));
    stub.push(Reply::text(
        (0..6)
            .map(|i| format!("- {long} [#{i}]"))
            .collect::<Vec<_>>()
            .join("\n"),
    ));

    let (_, error) = slept(runtime.sleep(&smith).await.unwrap());
    assert_eq!(error, None);
    let reflections = journal_of(&store, &smith, SourceType::Reflection, &[]);
    assert_eq!(reflections.len(), MAX_REFLECTION_LINES, "{reflections:?}");
    for r in &reflections {
        let chars = r.content.chars().count();
        assert!(chars <= MAX_REFLECTION_CHARS, "{chars}: {}", r.content);
        assert!(r.content.ends_with('…'), "{}", r.content);
    }
    let system = stub.last_request().unwrap().last_content("system").unwrap();
    assert!(
        system.contains("Look back on your recent journal"),
        "{system}"
    );
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// `max_concurrent_sleeps` holds in a running runtime: four agents due at once, two sleep at a
/// time (each sleep's consolidation call is held open by the stub).
#[actix::test]
async fn max_concurrent_sleeps_caps_scheduled_sleeps() {
    let stub = StubLlmServer::answering(Reply::text_after(
        Duration::from_millis(300),
        "- Aldric orders tools for the mill",
    ));
    let store = Store::temporary().unwrap();
    let names = ["a1", "a2", "a3", "a4"];
    for name in names {
        journaled(&store, &id(name), 3, 6);
    }
    let agents: Vec<(&str, u32)> = names.iter().map(|n| (*n, 100_000)).collect();
    let cfg = config(
        &agents,
        "max_concurrent_sleeps = 2",
        "reflection_threshold = 1000",
    );
    let llm = stub_client(&stub, Duration::from_secs(5));
    let runtime = Runtime::start(cfg, store.clone(), llm, options(true)).unwrap();
    assert!(
        stub.wait_for_requests(4, Duration::from_secs(10)).await,
        "every agent slept"
    );
    runtime.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(stub.max_in_flight(), 2, "two sleeps at a time, not more");
    for name in names {
        assert!(store.unconsolidated(&id(name), 1).unwrap().is_empty());
    }
}

/// The sleep schedule outlives the process: a runtime that loads an agent whose recorded next
/// sleep is overdue runs that sleep at once — once — and records the next one a period later; an
/// agent whose next sleep is an hour away does not sleep now.
#[actix::test]
async fn an_overdue_recorded_sleep_runs_once_at_load_and_the_next_is_recorded() {
    let store = Store::temporary().unwrap();
    let clock = somna_runtime::Clock::real();
    let now = clock.now();
    let (overdue, later) = (id("smith"), id("miller"));
    for a in [&overdue, &later] {
        store.create_agent(a, now).unwrap();
    }
    store
        .set_next_sleep(&overdue, now.saturating_sub(Duration::from_secs(600)))
        .unwrap();
    store
        .set_next_sleep(&later, now.saturating_add(Duration::from_secs(3600)))
        .unwrap();
    let cfg = runtime_config(
        Extra {
            runtime: "",
            defaults: "sleep_every = \"1h\"",
            memory: "",
        },
        &[("smith", 100_000, ""), ("miller", 100_000, "")],
    );
    let events = {
        let rt = Runtime::start(
            cfg,
            store.clone(),
            std::sync::Arc::new(somna_llm::BuiltinClient::new()),
            options(true),
        )
        .unwrap();
        let mut events = rt.subscribe();
        // Until the overdue sleep has ended; a second one would come from the same load (the
        // scheduler follows the recorded schedule, an hour on), so the run stops there.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        loop {
            let stamped = tokio::time::timeout_at(deadline, events.recv())
                .await
                .expect("the overdue sleep did not end within 10 s")
                .unwrap();
            let done = matches!(&stamped.event, somna_runtime::Event::SleepCompleted { agent } if agent == &overdue);
            seen.push(stamped);
            if done {
                break;
            }
        }
        rt.shutdown(Duration::from_secs(5)).await.unwrap();
        (seen, events)
    };
    let (seen, mut rest) = events;
    let mut slept = Vec::new();
    let rest = std::iter::from_fn(move || rest.try_recv().ok());
    for e in seen.into_iter().chain(rest) {
        if let somna_runtime::Event::SleepCompleted { agent } = e.event {
            slept.push(agent);
        }
    }
    assert_eq!(
        slept,
        std::slice::from_ref(&overdue),
        "only the overdue agent slept, once"
    );
    let next = store
        .agent(&overdue)
        .unwrap()
        .unwrap()
        .next_sleep_at
        .unwrap();
    assert!(
        next >= now.saturating_add(Duration::from_secs(3590)),
        "next sleep recorded a period later: {next:?} vs {now:?}"
    );
    assert_eq!(
        store.agent(&later).unwrap().unwrap().next_sleep_at,
        Some(now.saturating_add(Duration::from_secs(3600)))
    );
}
