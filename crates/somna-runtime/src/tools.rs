//! Agent tools: the built-in `journal_add` and `recall`, and the specs of host-defined tools.

use std::sync::Arc;

use serde::Deserialize;
use somna_core::config::{AgentConfig, ToolSpec};
use somna_core::{AgentId, JournalEntry, SourceType, Timestamp, ToolCall};
use somna_llm::grounding::{Grounder, ONLY_YOU_SAID};
use somna_store::{DocKind, Store, StoreError};

use crate::prompt::search_archive;

/// The name of the tool that writes a journal note (the builtin provider's and the grounding
/// check's name for it too).
pub const JOURNAL_ADD: &str = somna_llm::builtin::JOURNAL_TOOL;
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

/// What a built-in tool call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The tool result's content (JSON), for the model.
    pub result: String,
    /// For a `journal_add` that was not written: the values of the note that nothing the agent
    /// was shown holds (see [`run_builtin`]); empty otherwise.
    pub refused: Vec<String>,
}

impl Ran {
    fn answer(result: String) -> Self {
        Ran {
            result,
            refused: Vec::new(),
        }
    }
}

/// Runs a built-in tool call. Bad arguments are answered with an error result for the model, not
/// a Rust error.
///
/// A `journal_add` note is a claim the model makes, and a note becomes memory at the next sleep:
/// it is written only when every checkable value in it (number, date, time, ID, name) is in what
/// the agent was shown, `seen` (built only for a note: the turn's prompt, see
/// `JobContext::seen`). Otherwise nothing is written and the model is told which values were
/// not found, so it can write the note again from what was said.
pub fn run_builtin(
    store: &Store,
    agent: &AgentId,
    call: &ToolCall,
    now: Timestamp,
    default_importance: impl Fn(&str) -> u8,
    seen: impl FnOnce() -> Result<Arc<Grounder>, StoreError>,
) -> Result<Ran, StoreError> {
    match call.name.as_str() {
        JOURNAL_ADD => match serde_json::from_str::<JournalAddArgs>(&call.arguments) {
            Ok(args) if !args.content.trim().is_empty() => {
                let content = args.content.trim();
                let refused = seen()?.unsupported(content);
                if !refused.is_empty() {
                    let yours = if refused.iter().any(|r| r.ends_with(ONLY_YOU_SAID)) {
                        "; what only you said is yours: note it as what you said (\"I told …\")"
                    } else {
                        ""
                    };
                    let result = error_result(&format!(
                        "not written: nothing in this conversation or your memory says {}; a note \
                         may hold only what was said or shown{yours}",
                        refused.join(", ")
                    ));
                    return Ok(Ran { result, refused });
                }
                let importance = args
                    .importance
                    .unwrap_or_else(|| default_importance(content));
                let entry = store.append_journal(
                    agent,
                    JournalEntry::new(now, SourceType::Note, importance, content)
                        .with_tags(args.tags),
                )?;
                Ok(Ran::answer(
                    serde_json::json!({"ok": true, "entry_id": entry.id, "importance": entry.importance})
                        .to_string(),
                ))
            }
            Ok(_) => Ok(Ran::answer(error_result("`content` is empty"))),
            Err(e) => Ok(Ran::answer(error_result(&format!(
                "bad arguments for journal_add: {e}"
            )))),
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
                Ok(Ran::answer(
                    serde_json::json!({"facts": fact_hits, "journal": journal, "archived": archived})
                        .to_string(),
                ))
            }
            Err(e) => Ok(Ran::answer(error_result(&format!(
                "bad arguments for recall: {e}"
            )))),
        },
        other => Ok(Ran::answer(error_result(&format!(
            "{other} is not a built-in tool"
        )))),
    }
}

/// A tool result that tells the model what went wrong.
pub fn error_result(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}
