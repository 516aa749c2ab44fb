//! The `recall` tool's results, and an import that refuses a bad line without writing anything.

use std::time::Duration;

use somna_core::config::AgentConfig;
use somna_core::record::Trigger;
use somna_core::{AgentId, Fact, Timestamp, ToolCall};
use somna_runtime::import::{ImportError, ImportReport, import_jsonl};
use somna_runtime::{CompactRequest, Compactor, tools};
use somna_store::Store;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::*;

fn recall(store: &Store, agent: &somna_core::AgentId, arguments: &str) -> serde_json::Value {
    let call = ToolCall {
        id: "call_r".into(),
        name: tools::RECALL.into(),
        arguments: arguments.into(),
    };
    // `recall` writes nothing: what the agent was shown is never asked for.
    let ran = tools::run_builtin(
        store,
        agent,
        &call,
        Timestamp(0),
        |_| 5,
        || panic!("recall does not check a note"),
    )
    .unwrap();
    assert!(ran.refused.is_empty());
    serde_json::from_str(&ran.result).unwrap()
}

#[actix::test]
async fn recall_finds_matching_facts_and_archived_turns() {
    let stub = StubLlmServer::answering(Reply::text(
        "## Topic arc\n- Orders for the mill.\n## Decisions\n- Deliver to the north gate.\n\
         ## Pending\n- Deliveries by day 7.\n## User facts\n- Aldric pays in silver.\n\
         ## Artifacts\n- sword, horseshoe, lantern",
    ));
    let (store, smith) = new_agent("smith");
    // Two memory facts, from two journal entries.
    notes(
        &store,
        &smith,
        &["Aldric owes 40 silver", "Marta's inn needs a kettle"],
    );
    let facts = [
        "Aldric owes 40 silver for the sword",
        "Marta's inn needs a new kettle",
    ]
    .map(|t| Fact::new(Timestamp(0), t, vec![]));
    store.consolidate(&smith, facts.to_vec(), &[0, 1]).unwrap();
    // Thirty turns; a manual compaction archives the older ones (the horseshoe talk among them).
    fill(&store, &smith, 30, Timestamp(0));
    let config = agent_config("smith", 8192);
    let compactor = Compactor::new(store.clone(), stub_client(&stub, Duration::from_secs(5)));
    let outcome = compactor
        .compact(CompactRequest {
            agent: &smith,
            config: &config,
            trigger: Trigger::Manual,
            fixed_tokens: 0,
            now: Timestamp(0),
        })
        .await
        .unwrap();
    assert!(outcome.report().is_some(), "{outcome:?}");
    let archived = store.archive_range(&smith, 0, usize::MAX).unwrap();
    assert!(archived.iter().any(|m| m.content.contains("horseshoe")));

    let found = recall(&store, &smith, r#"{"query": "kettle for the inn"}"#);
    assert_eq!(
        found["facts"][0], "Marta's inn needs a new kettle",
        "{found}"
    );

    let found = recall(&store, &smith, r#"{"query": "horseshoe"}"#);
    let turns = found["archived"].as_array().unwrap();
    assert!(!turns.is_empty(), "{found}");
    for turn in turns {
        // `[date time] speaker: content`, an archived turn (not one of the live history).
        let turn = turn.as_str().unwrap();
        assert!(turn.starts_with("[1970-01-01 00:00] "), "{turn}");
        assert!(turn.contains("horseshoe"), "{turn}");
        let (_, content) = turn.split_once(": ").unwrap();
        assert!(archived.iter().any(|m| m.content == content), "{turn}");
    }
    // Journal entries are searched the same way.
    let found = recall(&store, &smith, r#"{"query": "owed silver"}"#);
    assert!(!found["journal"].as_array().unwrap().is_empty(), "{found}");
    // Bad arguments are an error result for the model, not a failure.
    let bad = recall(&store, &smith, r#"{"topic": "x"}"#);
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("bad arguments for recall"),
        "{bad}"
    );
}

/// `import_jsonl` of `input` into `agent` at time 0, compacting with the builtin provider.
async fn import(
    input: &[u8],
    agent: &AgentId,
    config: &AgentConfig,
    store: &Store,
) -> Result<ImportReport, ImportError> {
    let compactor = Compactor::new(
        store.clone(),
        std::sync::Arc::new(somna_llm::BuiltinClient::new()),
    );
    import_jsonl(
        input,
        agent,
        config,
        store,
        &compactor,
        Timestamp(0),
        |_, _| {},
    )
    .await
}

/// An imported message is history, not input: one over the live input limit (a long reply in a
/// real transcript, at a small window) is imported whole, counted, compacted away like any turn
/// with its original in the archive, and the agent's prompt stays within its budget.
#[actix::test]
async fn import_takes_a_message_over_the_input_limit_as_history() {
    let store = Store::temporary().unwrap();
    let smith = id("smith");
    let mut config = agent_config("smith", 2_000);
    config.compaction.working_share = 0.2;
    let limit = config.compaction.input_limit() as usize;
    let long = format!("The ledger says {}", "iron ingot ".repeat(limit));
    let mut lines = vec![serde_json::json!({"role": "assistant", "content": long}).to_string()];
    lines.extend((0..40).map(|i| {
        serde_json::json!({"role": "user", "content": format!("Line {i} about the forge.")})
            .to_string()
    }));
    let report = import(lines.join("\n").as_bytes(), &smith, &config, &store)
        .await
        .unwrap();
    assert_eq!(report.imported, 41);
    assert_eq!(report.over_input_limit, 1, "{report:?}");
    assert!(report.compactions > 0, "{report:?}");
    let original = store
        .archived_message(&smith, 0)
        .unwrap()
        .expect("archived");
    assert_eq!(original.content, long);
    let (built, _) = somna_runtime::prompt::preview(
        &store,
        &smith,
        &config,
        "What does the ledger say?",
        Timestamp(1),
    )
    .unwrap();
    assert!(built.total_tokens() <= built.budget, "{built:?}");
}

#[actix::test]
async fn import_refuses_a_bad_line_or_an_oversized_message_without_writing_anything() {
    let store = Store::temporary().unwrap();
    let smith = id("smith");
    let config = agent_config("smith", 8192);
    let good = r#"{"role":"user","content":"A sword, please."}"#;
    let oversized = serde_json::json!({
        "role": "user",
        "content": "iron ingot ".repeat(3 * config.compaction.prompt_budget() as usize),
    })
    .to_string();
    for (input, bad_line, says) in [
        (format!("{good}\n{{\"role\": \"user\"\n{good}\n"), 2, ""),
        (format!("{good}\n{good}\n{oversized}\n"), 3, "prompt budget"),
    ] {
        let err = import(input.as_bytes(), &smith, &config, &store)
            .await
            .unwrap_err();
        let ImportError::BadLine { line, message } = &err else {
            panic!("expected a bad line, got {err}");
        };
        assert_eq!(*line, bad_line, "{err}");
        assert!(message.contains(says), "{err}");
        assert!(
            store.agent(&smith).unwrap().is_none(),
            "no agent was created"
        );
        assert!(
            store.history(&smith).unwrap().is_empty(),
            "nothing was written"
        );
    }
}
