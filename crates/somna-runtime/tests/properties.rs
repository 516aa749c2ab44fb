//! Property tests of the engine: random histories with tool calls, compacted by the builtin
//! summarizer, then undone.

use std::sync::Arc;

use proptest::prelude::*;
use somna_core::message::{Message, ToolCall};
use somna_core::record::Trigger;
use somna_core::{Role, Timestamp};
use somna_runtime::compactor::{CompactRequest, Compactor};
use somna_runtime::protocol::CompactionOutcome;
use somna_store::UncompactOutcome;

use crate::support::*;

#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    Tools(usize, Vec<usize>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..50).prop_map(Step::User),
        (0usize..50).prop_map(Step::Assistant),
        (0usize..50, prop::collection::vec(100usize..3000, 1..4))
            .prop_map(|(a, r)| Step::Tools(a, r)),
    ]
}

fn build(steps: &[Step]) -> Vec<Message> {
    let mut out = Vec::new();
    for (n, s) in steps.iter().enumerate() {
        match s {
            Step::User(i) => out.push(Message::user(line(*i)).with_name("Aldric")),
            Step::Assistant(i) => out.push(Message::assistant(line(*i))),
            Step::Tools(i, sizes) => {
                let calls = (0..sizes.len())
                    .map(|k| ToolCall {
                        id: format!("c{n}_{k}"),
                        name: "inventory".into(),
                        arguments: format!("{{\"q\":{i}}}"),
                    })
                    .collect();
                out.push(Message::assistant_calls("", calls));
                for (k, size) in sizes.iter().enumerate() {
                    out.push(Message::tool_result(
                        format!("c{n}_{k}"),
                        "ingot ".repeat(size / 6),
                    ));
                }
            }
        }
    }
    let counter = counter();
    for m in &mut out {
        m.tokens = counter.count_message(m);
    }
    out
}

/// No tool result in live history without its call right before it, and no call without results.
fn tool_pairs_whole(history: &[Message]) -> bool {
    let calls: Vec<&str> = history
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    let results: Vec<&str> = history
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    results.iter().all(|r| calls.contains(r)) && calls.iter().all(|c| results.contains(c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Compaction keeps tool pairs whole in the live history, keeps the invariants, and uncompact
    /// restores the history exactly.
    #[test]
    fn commit_then_uncompact_restores_exactly(steps in prop::collection::vec(step(), 8..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (store, agent) = new_agent("prop");
        store.append_batch(&agent, build(&steps), Timestamp(0)).unwrap();
        let before = store.history(&agent).unwrap();
        let total: u64 = before.iter().map(|m| u64::from(m.tokens)).sum();
        let mut cfg = agent_config("prop", ((total as f64) / 0.9) as u32 + 64);
        cfg.compaction.preserve_messages = 3;
        cfg.compaction.summary_max_tokens = 300;
        let engine = Compactor::new(store.clone(), Arc::new(somna_llm::BuiltinClient::new()));
        let outcome = rt.block_on(engine.compact(CompactRequest {
            agent: &agent,
            config: &cfg,
            trigger: Trigger::Manual,
            fixed_tokens: 0,
            now: Timestamp(1),
        })).unwrap();
        let after = store.history(&agent).unwrap();
        prop_assert!(tool_pairs_whole(&after), "{after:#?}");
        prop_assert!(store.check_invariants(&agent).unwrap().is_ok());
        match outcome {
            CompactionOutcome::Done(report) => {
                let seq = report.summary_seq.unwrap();
                prop_assert_eq!(after[0].role, Role::System);
                let undone = engine.uncompact(&agent, seq, Timestamp(2)).unwrap();
                prop_assert!(matches!(undone, UncompactOutcome::Restored { .. }), "{:?}", undone);
                prop_assert_eq!(store.history(&agent).unwrap(), before);
                prop_assert!(store.check_invariants(&agent).unwrap().is_ok());
            }
            other => {
                // Skipped or stalled: nothing changed.
                prop_assert!(!matches!(other, CompactionOutcome::Busy));
                prop_assert_eq!(after, before);
            }
        }
    }
}
