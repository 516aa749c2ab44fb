//! Importing a conversation (OpenAI-format JSONL) into an agent's history, compacting whenever the
//! prompt would pass the emergency threshold, as the live runtime would have.

use std::io::BufRead;

use somna_core::config::AgentConfig;
use somna_core::interchange;
use somna_core::message::Message;
use somna_core::record::Trigger;
use somna_core::tokens::TokenCounter;
use somna_core::usage::{self, Usage, calibration_factor};
use somna_core::{AgentId, Timestamp};
use somna_store::{Store, StoreError};

use crate::compactor::{CompactError, CompactRequest, Compactor};
use crate::protocol::CompactionOutcome;

/// Why an import failed. A bad line stops the import before anything is written.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("line {line}: {message}")]
    BadLine { line: usize, message: String },
    #[error("reading the input")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Compact(#[from] CompactError),
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ImportReport {
    pub imported: usize,
    pub compactions: usize,
    /// Compactions that had to fall back to deterministic reduction.
    pub fallbacks: usize,
    /// Imported messages over the live input limit (`compaction.max_input_tokens`): accepted as
    /// history (see [`import_jsonl`]).
    pub over_input_limit: usize,
    pub history_len: u64,
    pub archive_len: u64,
    /// Usage after the import, 0–1 (persona + working budget + history, calibrated), as the agent
    /// measures it.
    pub usage: f64,
}

/// Parses every line first (so a bad line, or a message over the prompt budget, changes
/// nothing), then appends the messages, compacting
/// at the emergency threshold. `progress(done, total)` is called as messages are appended.
///
/// An imported message is history, not input: a message over the live input limit
/// (`compaction.max_input_tokens`, 278 tokens at a 2,000-token window) is accepted, since a real
/// transcript holds long answers and refusing one line would refuse the whole conversation; it is
/// compacted away like any other turn, its original kept in the archive. Only a message that no
/// prompt could show whole (over `max_context_tokens − max_reply_tokens`) is refused.
pub async fn import_jsonl(
    input: impl BufRead,
    agent: &AgentId,
    config: &AgentConfig,
    store: &Store,
    compactor: &Compactor,
    now: Timestamp,
    mut progress: impl FnMut(usize, usize),
) -> Result<ImportReport, ImportError> {
    let counter = TokenCounter::for_model(&config.model);
    let limit = config.compaction.prompt_budget();
    let input_limit = config.compaction.input_limit();
    let mut report = ImportReport::default();
    let mut messages = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut m = interchange::parse_line(&line).map_err(|e| ImportError::BadLine {
            line: i + 1,
            message: e.to_string(),
        })?;
        if m.created_at == Timestamp::ZERO {
            m.created_at = now;
        }
        m.tokens = counter.count_message(&m);
        if u64::from(m.tokens) > limit {
            return Err(ImportError::BadLine {
                line: i + 1,
                message: format!(
                    "the message is {} tokens, above this agent's prompt budget of {limit} \
                     (compaction.max_context_tokens − compaction.max_reply_tokens): no prompt \
                     could show it whole",
                    m.tokens
                ),
            });
        }
        report.over_input_limit += usize::from(m.tokens > input_limit);
        messages.push(m);
    }
    store.ensure_agent(agent, now)?;
    // What the live agent counts besides its history: the persona and the working context's
    // budget (one usage formula, somna_core::usage).
    let fixed = usage::fixed_tokens(
        &config.compaction,
        u64::from(counter.count_text(&config.persona)),
    );
    // The usage the agent would measure: its stored calibration applies to imported history too
    // (an import does not change it).
    let calibration = store
        .agent(agent)?
        .map(|r| r.calibration)
        .unwrap_or_default();
    let factor = calibration_factor(&counter, &calibration);
    let usage_of = |history_tokens: u64| {
        Usage::new(
            fixed,
            history_tokens,
            factor,
            config.compaction.max_context_tokens,
        )
    };
    let total = messages.len();
    let mut batch: Vec<Message> = Vec::new();
    let mut pending_tokens = 0u64;
    for (done, m) in messages.into_iter().enumerate() {
        pending_tokens += u64::from(m.tokens);
        batch.push(m);
        let over =
            usage_of(store.usage_tokens(agent)? + pending_tokens).is_emergency(&config.compaction);
        let last = done + 1 == total;
        if over || last || batch.len() >= 1_000 {
            store.append_batch(agent, std::mem::take(&mut batch), now)?;
            pending_tokens = 0;
            progress(done + 1, total);
        }
        if config.compaction.enabled && over {
            let outcome = compactor
                .compact(CompactRequest {
                    agent,
                    config,
                    trigger: Trigger::Emergency,
                    fixed_tokens: fixed,
                    now,
                })
                .await?;
            if let CompactionOutcome::Done(r) = outcome {
                report.compactions += 1;
                report.fallbacks += usize::from(r.fallback_reason.is_some());
            }
        }
        report.imported = done + 1;
    }
    if let Some(record) = store.agent(agent)? {
        report.history_len = record.history_len;
        report.archive_len = record.archive_len;
    }
    report.usage = usage_of(store.usage_tokens(agent)?).fraction();
    Ok(report)
}
