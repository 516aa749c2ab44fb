//! The README's main job: the shipped village scenario parses against the shipped runtime.toml, and
//! a shortened run of it (its first two days, at four times the demo's speed, offline builtin
//! provider) sleeps, consolidates and compacts. Bounded in time; asserts what happened, not when.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use somna_core::config::ResolvedConfig;
use somna_core::record::EventRecord;
use somna_runtime::scenario::{self, EventKind, Scenario};
use somna_runtime::{Clock, Event, Runtime, RuntimeOptions};
use somna_store::Store;

fn shipped(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[actix::test]
async fn a_shortened_village_run_sleeps_consolidates_and_compacts() {
    let mut scenario =
        Scenario::parse(&shipped("examples/village/scenario.toml"), "scenario.toml").unwrap();
    let config = ResolvedConfig::load(&shipped("runtime.toml"), "runtime.toml", &scenario.set)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.agents.len(), 5);
    assert!(scenario.events.len() > 150);

    // Shorten: up to just after the second night's sleep, four times faster.
    let second_sleep = scenario
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Sleep)
        .nth(1)
        .expect("the scenario sleeps every night")
        .at;
    scenario.duration = second_sleep + Duration::from_secs(3600);
    scenario.events.retain(|e| e.at <= second_sleep);
    scenario.speed *= 4.0;

    let store = Store::temporary().unwrap();
    let llm: Arc<dyn somna_llm::LlmClient> = Arc::new(somna_llm::BuiltinClient::new());
    let runtime = Runtime::start(
        config,
        store.clone(),
        llm,
        RuntimeOptions {
            clock: Clock::starting_at(scenario.start_time(), scenario.speed),
            schedule_sleeps: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rx = runtime.subscribe();
    let collector = actix::spawn(async move {
        let mut kinds = BTreeSet::new();
        while let Ok(s) = rx.recv().await {
            kinds.insert(s.event.kind());
            if matches!(s.event, Event::SleepCompleted { .. }) {
                kinds.insert("sleep_completed");
            }
        }
        kinds
    });
    let report = tokio::time::timeout(
        Duration::from_secs(120),
        scenario::play(&scenario, &runtime, |_| {}),
    )
    .await
    .expect("the shortened run ends in bounded time")
    .unwrap();
    assert_eq!(report.skipped, 0);
    runtime.shutdown(Duration::from_secs(30)).await.unwrap();
    drop(runtime);
    let kinds = collector.await.unwrap();

    assert!(kinds.contains("sleep_completed"), "{kinds:?}");
    assert!(kinds.contains("consolidation_completed"), "{kinds:?}");
    let mut compactions = 0;
    let mut facts = 0;
    for record in store.agents().unwrap() {
        compactions += store
            .events(&record.id, usize::MAX)
            .unwrap()
            .iter()
            .filter(|e| matches!(e.event, EventRecord::Compaction(_)))
            .count();
        facts += store.facts(&record.id).unwrap().len();
    }
    assert!(compactions >= 1, "no compaction; events seen: {kinds:?}");
    assert!(facts >= 1, "consolidation wrote no memory fact");
}
