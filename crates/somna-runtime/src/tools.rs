//! Agent tools: the built-in `journal_add` and `recall`, and the specs of host-defined tools.

use serde::Deserialize;
use somna_core::config::{AgentConfig, ToolSpec};
use somna_core::{AgentId, JournalEntry, SourceType, Timestamp, ToolCall};
use somna_store::{DocKind, Store, StoreError};

use crate::prompt::search_archive;

/// The name of the tool that writes a journal note.
pub const JOURNAL_ADD: &str = "journal_add";
/// The name of the tool that searches memory and the archive.
pub const RECALL: &str = "recall";
/// Hits `recall` returns from each source.
const RECALL_HITS: usize = 5;

/// The built-in tools every agent has.
pub fn builtin_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: JOURNAL_ADD.into(),
            description: "Write something worth remembering in your journal, with its importance \
(1 trivial – 10 life-changing)."
                .into(),
            parameters: r#"{"type":"object","properties":{"content":{"type":"string"},"importance":{"type":"integer","minimum":1,"maximum":10},"tags":{"type":"array","items":{"type":"string"}}},"required":["content"]}"#.into(),
        },
        ToolSpec {
            name: RECALL.into(),
            description: "Search your memory and earlier (archived) conversation for a topic.".into(),
            parameters: r#"{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}"#
                .into(),
        },
    ]
}

/// Every tool an agent may call: the built-ins, then the host's.
pub fn all_specs(config: &AgentConfig) -> Vec<ToolSpec> {
    let mut specs = builtin_specs();
    specs.extend(config.tools.iter().cloned());
    specs
}

/// True for `journal_add` and `recall`.
pub fn is_builtin(name: &str) -> bool {
    name == JOURNAL_ADD || name == RECALL
}

#[derive(Debug, Deserialize)]
struct JournalAddArgs {
    content: String,
    #[serde(default)]
    importance: Option<u8>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RecallArgs {
    query: String,
}

/// Runs a built-in tool call and returns the tool result's content (JSON). Bad arguments are answered
/// with an error result for the model, not a Rust error.
pub fn run_builtin(
    store: &Store,
    agent: &AgentId,
    call: &ToolCall,
    now: Timestamp,
    default_importance: impl Fn(&str) -> u8,
) -> Result<String, StoreError> {
    match call.name.as_str() {
        JOURNAL_ADD => match serde_json::from_str::<JournalAddArgs>(&call.arguments) {
            Ok(args) if !args.content.trim().is_empty() => {
                let importance = args
                    .importance
                    .unwrap_or_else(|| default_importance(&args.content));
                let entry = store.append_journal(
                    agent,
                    JournalEntry::new(now, SourceType::Note, importance, args.content.trim())
                        .with_tags(args.tags),
                )?;
                Ok(serde_json::json!({"ok": true, "entry_id": entry.id, "importance": entry.importance})
                    .to_string())
            }
            Ok(_) => Ok(error_result("`content` is empty")),
            Err(e) => Ok(error_result(&format!("bad arguments for journal_add: {e}"))),
        },
        RECALL => match serde_json::from_str::<RecallArgs>(&call.arguments) {
            Ok(args) => {
                let facts = store.facts(agent)?;
                let fact_hits: Vec<&str> = store
                    .search(agent, DocKind::Fact, &args.query, RECALL_HITS)?
                    .into_iter()
                    .filter_map(|h| facts.iter().find(|f| f.id == h.id))
                    .map(|f| f.text.as_str())
                    .collect();
                let journal: Vec<String> = store
                    .search(agent, DocKind::Journal, &args.query, RECALL_HITS)?
                    .into_iter()
                    .filter_map(|h| store.journal_entry(agent, h.id).transpose())
                    .map(|e| {
                        e.map(|e| {
                            format!("{} {}: {}", e.at.minute_label(), e.source_type, e.content)
                        })
                    })
                    .collect::<Result<_, _>>()?;
                let archived: Vec<String> = search_archive(store, agent, &args.query, RECALL_HITS)?
                    .into_iter()
                    .map(|m| {
                        format!(
                            "[{}] {}: {}",
                            m.created_at.minute_label(),
                            m.name.as_deref().unwrap_or(m.role.as_str()),
                            m.content
                        )
                    })
                    .collect();
                Ok(
                    serde_json::json!({"facts": fact_hits, "journal": journal, "archived": archived})
                        .to_string(),
                )
            }
            Err(e) => Ok(error_result(&format!("bad arguments for recall: {e}"))),
        },
        other => Ok(error_result(&format!("{other} is not a built-in tool"))),
    }
}

/// A tool result that tells the model what went wrong.
pub fn error_result(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}
