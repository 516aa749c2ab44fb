//! Issue 11 item 2: the usage formula has one definition (`somna_core::usage::Usage`), so the
//! compaction plan, the agent's tick and status, the compaction engine and the import report the
//! same number for the same agent, calibration included.

use std::sync::Arc;

use somna_core::compaction::{PlanOutcome, PlanRequest, plan};
use somna_core::record::Trigger;
use somna_core::tokens::Calibration;
use somna_core::usage::{Usage, calibration_factor};
use somna_core::{Message, Timestamp};
use somna_llm::{BuiltinClient, LlmClient};
use somna_runtime::agent::AgentDeps;
use somna_runtime::import::import_jsonl;
use somna_runtime::protocol::{Event, Stamped};
use somna_runtime::{Agent, Clock, CompactRequest, CompactionOutcome, Compactor, EventBus};
use somna_store::Store;
use tokio::sync::broadcast::Receiver;

use crate::support::*;

/// The first event of `rx` that `pick` reads a usage from.
fn usage_event(rx: &mut Receiver<Stamped>, pick: impl Fn(&Event) -> Option<f64>) -> f64 {
    while let Ok(stamped) = rx.try_recv() {
        if let Some(usage) = pick(&stamped.event) {
            return usage;
        }
    }
    panic!("no such event")
}

#[tokio::test]
async fn plan_tick_import_status_and_the_compactor_agree_on_usage() {
    let store = Store::temporary().unwrap();
    let smith = id("smith");
    let mut config = agent_config("smith", 4096);
    config.persona = "You are Smith, the blacksmith of Millbrook. You speak plainly.".into();
    // A tokenizer Somna only estimates, with a learned calibration above 1.0.
    assert!(!counter().is_exact());
    let calibration = Calibration {
        factor: 1.37,
        samples: 12,
    };
    store.ensure_agent(&smith, Timestamp(0)).unwrap();
    store.update_calibration(&smith, calibration).unwrap();
    let llm: Arc<dyn LlmClient> = Arc::new(BuiltinClient::new());
    let compactor = Compactor::new(store.clone(), Arc::clone(&llm));

    // Import 40 turns without compacting.
    let jsonl: String = (0..40)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            format!(
                "{}\n",
                serde_json::json!({"role": role, "content": line(i)})
            )
        })
        .collect();
    let mut quiet = config.clone();
    quiet.compaction.enabled = false;
    let report = import_jsonl(
        jsonl.as_bytes(),
        &smith,
        &quiet,
        &store,
        &compactor,
        Timestamp(0),
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(report.compactions, 0);

    // The one formula, by hand: persona + history, calibrated, over the window.
    let persona = u64::from(counter().count_text(&config.persona));
    let history: Vec<Message> = store.history(&smith).unwrap();
    let history_tokens: u64 = history.iter().map(|m| u64::from(m.tokens)).sum();
    let factor = calibration_factor(&counter(), &calibration);
    let expected = Usage::new(
        persona,
        history_tokens,
        factor,
        config.compaction.max_context_tokens,
    )
    .fraction();
    let uncalibrated = (persona + history_tokens) as f64 / 4096.0;
    assert!(
        expected > uncalibrated * 1.3,
        "{expected} vs {uncalibrated}"
    );
    assert_eq!(report.usage, expected, "import");

    let planned = match plan(
        &PlanRequest {
            history: &history,
            fixed_tokens: persona,
            trigger: Trigger::Manual,
            calibration: factor,
        },
        &config.compaction,
        &counter(),
    ) {
        PlanOutcome::Plan(p) => p.usage,
        PlanOutcome::Skip(s) => s.usage,
    };
    assert_eq!(planned, expected, "plan");

    // The compaction engine reads the calibration from the agent's record.
    let mut sleepy = config.clone();
    sleepy.compaction.sleep_threshold = 0.99;
    let outcome = compactor
        .compact(CompactRequest {
            agent: &smith,
            config: &sleepy,
            trigger: Trigger::Sleep,
            fixed_tokens: persona,
            now: Timestamp(0),
        })
        .await
        .unwrap();
    let CompactionOutcome::Skipped { usage, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(usage, expected, "compactor");

    // The agent: status, the tick's emergency check, and the job's compaction.
    let mut urgent = config.clone();
    urgent.compaction.emergency_threshold = 0.05;
    let events = EventBus::new(256);
    let mut rx = events.subscribe();
    let mut agent = Agent::load(
        urgent,
        AgentDeps {
            store: store.clone(),
            compactor: compactor.clone(),
            llm,
            events,
            clock: Clock::starting_at(Timestamp(0), 1.0),
            gauges: Default::default(),
            semantic: None,
        },
    )
    .unwrap();
    assert_eq!(agent.status().unwrap().usage, expected, "status");
    assert_eq!(agent.usage().unwrap(), expected, "usage");
    let job = agent.tick().unwrap().expect("an emergency compaction");
    let ticked = usage_event(&mut rx, |e| match e {
        Event::EmergencyTriggered { usage, .. } => Some(*usage),
        _ => None,
    });
    assert_eq!(ticked, expected, "tick");
    job.run().await;
    let started = usage_event(&mut rx, |e| match e {
        Event::CompactionStarted { usage, .. } => Some(*usage),
        _ => None,
    });
    assert_eq!(started, expected, "the job's compaction");
}
