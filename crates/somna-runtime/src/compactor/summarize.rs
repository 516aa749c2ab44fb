//! The LLM summary of a plan's body: one request per chunk that fits the summarizer's window,
//! merged in bounded rounds, then validated (non-empty, shaped like the requested sections, smaller
//! than the body, within its cap).

use somna_core::GroundingCounts;
use somna_core::compaction::Plan;
use somna_core::config::{AgentConfig, CompactionConfig};
use somna_core::message::Message;
use somna_core::tokens::TokenCounter;
use somna_llm::LlmError;
use somna_llm::grounding::{self, GroundedSummary, Grounder};
use somna_llm::prompts;
use somna_text::cite;
use somna_text::transcript::Turn;

use super::Compactor;

/// Most summaries merged in one request when a chunked body is merged.
const MERGE_FAN_IN: usize = 8;
/// Most rounds of merging (a bound, not a loop condition that can run forever).
const MAX_MERGE_ROUNDS: usize = 4;
/// Summaries may overshoot `summary_max_tokens` by this factor (tokenizers disagree slightly).
const SUMMARY_CAP_SLACK: f64 = 1.10;

/// A summary checked against its sources: the text to commit and what the check did.
#[derive(Debug)]
pub(super) struct Summary {
    pub(super) text: String,
    pub(super) grounding: GroundingCounts,
}

/// What the items written about `plan`'s body may cite: its turns (and the items of an earlier
/// summary among them), and the names of the agent's persona (its other words are the model's to
/// use, not to cite).
pub(super) fn body_grounder(plan: &Plan, history: &[Message], config: &AgentConfig) -> Grounder {
    let turns: Vec<Turn> = plan.body(history).iter().map(Turn::from).collect();
    let names = grounding::names_in(&config.persona);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Grounder::from_turns(&turns, &names).knowing(&config.persona)
}

/// Why an LLM summary could not be used.
#[derive(Debug)]
pub(super) enum SummaryFailure {
    Llm(LlmError),
    Invalid(String),
}

impl std::fmt::Display for SummaryFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SummaryFailure::Llm(e) => write!(f, "the summarizer failed: {e}"),
            SummaryFailure::Invalid(why) => write!(f, "the summary was rejected: {why}"),
        }
    }
}

impl Compactor {
    /// Summarizes the plan's body with the LLM: one request per chunk, then merges.
    pub(super) async fn summarize(
        &self,
        plan: &Plan,
        history: &[Message],
        config: &AgentConfig,
        counter: &TokenCounter,
    ) -> Result<Summary, SummaryFailure> {
        let cfg = &config.compaction;
        let model = if cfg.compact_model.is_empty() {
            config.model.clone()
        } else {
            cfg.compact_model.clone()
        };
        let mut parts = Vec::new();
        // The server's own count of the last answer's tokens, when it reports one.
        let mut server_tokens = None;
        let chunks = plan.summarizer_chunks(history, counter);
        let chunked = chunks.len() > 1;
        let grounder = chunked.then(|| body_grounder(plan, history, config));
        let mut failed_parts = Vec::new();
        // Items the parts' checks dropped: counted with the final summary's.
        let mut part_dropped = 0;
        for chunk in chunks {
            let (text, completion) = self
                .ask(prompts::summary_request(&model, cfg, &chunk))
                .await?;
            server_tokens = completion;
            // A part is checked before it is merged: the merge works from what holds up, and a
            // part with nothing the model wrote that does (only quotes of the turns its items
            // cite) is left out.
            match &grounder {
                Some(g) => {
                    let part = grounding::ground_summary(&text, g);
                    part_dropped += part.counts.dropped;
                    if part.as_written > 0 {
                        parts.push(part.text);
                    } else {
                        failed_parts.extend(part.examples);
                    }
                }
                None => parts.push(text),
            }
        }
        if parts.is_empty() {
            return Err(SummaryFailure::Invalid(format!(
                "no part of it holds up against the turns it cites ({})",
                failed_parts
                    .into_iter()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        let mut rounds = 0;
        while parts.len() > 1 {
            if rounds == MAX_MERGE_ROUNDS {
                return Err(SummaryFailure::Invalid(format!(
                    "still {} partial summaries after {MAX_MERGE_ROUNDS} merge rounds",
                    parts.len()
                )));
            }
            rounds += 1;
            let mut merged = Vec::new();
            for group in parts.chunks(MERGE_FAN_IN) {
                if group.len() == 1 {
                    merged.push(group[0].clone());
                    continue;
                }
                let (text, completion) =
                    self.ask(prompts::merge_request(&model, cfg, group)).await?;
                server_tokens = completion;
                merged.push(text);
            }
            parts = merged;
        }
        let text = parts.pop().unwrap_or_default();
        let mut grounded = self.ground(&text, plan, history, config);
        if grounded.counts.committed() == 0 && grounded.counts.total() > 0 {
            return Err(SummaryFailure::Invalid(format!(
                "none of its {} items holds up against the turns it cites ({})",
                grounded.counts.total(),
                grounded.examples.join("; ")
            )));
        }
        // A summary most of whose committed items are quotes (items that did not hold up as
        // written, replaced by the turn they cite) is not the model's: what is left is whichever
        // turns its items happened to cite, a worse summary than the extractive one.
        let quoted = grounded
            .counts
            .committed()
            .saturating_sub(grounded.as_written);
        if quoted > grounded.as_written {
            return Err(SummaryFailure::Invalid(format!(
                "{quoted} of its {} items would be quotes of the turns they cite, and only {} \
                 holds up as written ({})",
                grounded.counts.total(),
                grounded.as_written,
                grounded.examples.join("; ")
            )));
        }
        // The server counted its answer; a repaired answer is another text.
        let server_tokens = server_tokens.filter(|_| grounded.text == text);
        validate_summary(&grounded.text, plan, cfg, counter, server_tokens)?;
        grounded.counts.dropped += part_dropped;
        Ok(Summary {
            text: grounded.text,
            grounding: grounded.counts,
        })
    }

    /// Checks every item of a summary of `plan`'s body against the turns it cites
    /// ([`grounding::ground_summary`]); what was repaired or dropped is logged.
    pub(super) fn ground(
        &self,
        text: &str,
        plan: &Plan,
        history: &[Message],
        config: &AgentConfig,
    ) -> GroundedSummary {
        let grounder = body_grounder(plan, history, config);
        let grounded = grounding::ground_summary(text, &grounder);
        if grounded.counts.kept < grounded.counts.total() {
            tracing::info!(
                counts = %grounded.counts,
                examples = %grounded.examples.join("; "),
                "summary items failed the grounding check"
            );
        }
        grounded
    }

    /// Sends one summary or merge request: the answer's text (a JSON answer rendered to sections)
    /// and the server's count of it.
    async fn ask(
        &self,
        request: somna_llm::ChatRequest,
    ) -> Result<(String, Option<u32>), SummaryFailure> {
        let response = self.llm.chat(request).await.map_err(SummaryFailure::Llm)?;
        let completion = response.usage.map(|u| u.completion_tokens);
        Ok((prompts::read_summary(&response.text), completion))
    }
}

/// Rejects a summary that is empty, not shaped like a summary, larger than what it replaces, or
/// over its cap. The cap is checked with the server's count of the answer when it reported one
/// (it enforced `max_tokens` with its own tokenizer), else with ours.
fn validate_summary(
    text: &str,
    plan: &Plan,
    cfg: &CompactionConfig,
    counter: &TokenCounter,
    server_tokens: Option<u32>,
) -> Result<(), SummaryFailure> {
    if text.trim().is_empty() {
        return Err(SummaryFailure::Invalid("empty".into()));
    }
    // Measured as the prompt shows it: without the items' citations.
    let tokens = u64::from(counter.count_text(&cite::strip_all(text)));
    if tokens >= plan.body_tokens {
        return Err(SummaryFailure::Invalid(format!(
            "{tokens} tokens, not smaller than the {} tokens it replaces",
            plan.body_tokens
        )));
    }
    if let Some(why) = prompts::summary_shape_problem(text, cfg) {
        return Err(SummaryFailure::Invalid(why));
    }
    let cap = (f64::from(cfg.summary_cap()) * SUMMARY_CAP_SLACK) as u64;
    let measured = server_tokens.filter(|t| *t > 0).map_or(tokens, u64::from);
    if measured > cap {
        return Err(SummaryFailure::Invalid(format!(
            "{measured} tokens, over the summary's cap ({}, compaction.summary_max_tokens)",
            cfg.summary_cap()
        )));
    }
    Ok(())
}
