//! The builtin provider: offline and deterministic. [`BuiltinClient`] answers every [`Purpose`]:
//! summaries with somna-text's extractive summarizer, facts and scores with its heuristics
//! ([`somna_text::facts`]), and chat turns with a scripted agent brain (`brain.rs`: templates in
//! persona, `journal_add` notes when offered). This module reads the request (its transcript, caps
//! and listed entries) and writes the answer in the form the request asked for.
//! A request with a structured form (summaries, consolidation) is answered in that form, as JSON,
//! unless the client was built with `llm.structured_output = "off"`.

mod brain;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use somna_core::{Message, Role};
use somna_text::extractive::{StructuredSummary, summarize};
use somna_text::transcript::{self, Turn};
use somna_text::{consolidate, estimate_tokens, extract_facts, reflect, score_importance};

pub use brain::{JOURNAL_TOOL, NOTABLE_IMPORTANCE};

use crate::client::LlmClient;
use crate::error::LlmError;
use crate::prompts;
use crate::types::{ChatMessage, ChatRequest, ChatResponse, Purpose, Usage};

/// A token counter the builtin provider measures summaries with.
pub type TokenCount = Arc<dyn Fn(&str) -> u32 + Send + Sync>;

/// The offline, deterministic [`LlmClient`]: the same request always gets the same answer.
#[derive(Clone)]
pub struct BuiltinClient {
    /// Counts tokens for summary caps; `len/4` unless the runtime passes its `TokenCounter`.
    count: TokenCount,
    /// Answers the structured form of a request that has one, in JSON (like a server that
    /// supports `response_format`); `false` with `llm.structured_output = "off"`.
    structured: bool,
}

impl fmt::Debug for BuiltinClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltinClient").finish_non_exhaustive()
    }
}

impl Default for BuiltinClient {
    fn default() -> Self {
        Self::new()
    }
}

impl BuiltinClient {
    /// A builtin client that counts tokens as `len/4` and answers structured requests in JSON.
    pub fn new() -> Self {
        BuiltinClient {
            count: Arc::new(estimate_tokens),
            structured: true,
        }
    }

    /// A builtin client that counts summary tokens with `count` (e.g. the runtime's tokenizer).
    pub fn with_counter(count: TokenCount) -> Self {
        BuiltinClient {
            count,
            structured: true,
        }
    }

    /// Whether the structured form of a request is answered (in JSON) rather than the plain one.
    pub fn with_structured_output(mut self, structured: bool) -> Self {
        self.structured = structured;
        self
    }

    /// Answers `request` at once (the [`LlmClient::chat`] future just returns this).
    pub fn respond(&self, request: &ChatRequest) -> ChatResponse {
        let started = Instant::now();
        // The form a server with this client's support would be sent: the structured one's
        // messages ask for JSON, and the answer is JSON.
        let structured = self.structured && request.structured.is_some();
        let view;
        let request = if structured {
            view = ChatRequest {
                messages: request.messages_for(true).to_vec(),
                ..request.clone()
            };
            &view
        } else {
            request
        };
        let (text, tool_calls) = match request.purpose {
            Purpose::Summarize => {
                let summary = self.summary(request);
                let text = if structured {
                    prompts::summary_json(&summary)
                } else {
                    summary.render()
                };
                (text, Vec::new())
            }
            Purpose::Extract => {
                let facts = extract_facts(&turns_of(request));
                (fact_lines(facts.into_iter().map(|(f, _)| f)), Vec::new())
            }
            Purpose::Consolidate => {
                let facts = consolidate(&entries_of(request));
                let text = if structured {
                    prompts::facts_json(&facts)
                } else {
                    fact_lines(facts)
                };
                (text, Vec::new())
            }
            Purpose::Score => {
                let text = request
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .map(|m| prompts::text_of_score_request(&m.content))
                    .unwrap_or("");
                (score_importance(text).to_string(), Vec::new())
            }
            Purpose::Reflect => (reflect(&entries_of(request)), Vec::new()),
            Purpose::Chat => brain::reply(request),
        };
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.content))
            .sum();
        let completion_tokens = estimate_tokens(&text)
            + tool_calls
                .iter()
                .map(|c| estimate_tokens(&c.arguments))
                .sum::<u32>();
        tracing::debug!(
            provider = "builtin",
            purpose = %request.purpose,
            prompt_tokens,
            completion_tokens,
            "builtin LLM answered"
        );
        ChatResponse {
            text,
            tool_calls,
            usage: Some(Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens: None,
            }),
            latency: started.elapsed(),
            attempts: 1,
            model: if request.model.is_empty() {
                "builtin".to_string()
            } else {
                request.model.clone()
            },
            structured_fallbacks: 0,
        }
    }

    fn summary(&self, request: &ChatRequest) -> StructuredSummary {
        let instructions: String = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let caps = prompts::parse_caps(&instructions).unwrap_or_default();
        let max_tokens = request
            .max_tokens
            .unwrap_or(prompts::DEFAULT_SUMMARY_MAX_TOKENS);
        summarize(&turns_of(request), &caps, max_tokens, &*self.count)
    }
}

impl LlmClient for BuiltinClient {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let response = self.respond(&request);
        Box::pin(async move { Ok(response) })
    }

    fn provider(&self) -> &str {
        "builtin"
    }
}

/// The turns a request is about: the framed transcript of the last message that holds one; else every
/// non-system message as a turn, where summaries (whole messages, or `<summary …>` … `</summary>` blocks of
/// a merge request) become earlier-summary turns so that they are folded together.
fn turns_of(request: &ChatRequest) -> Vec<Turn> {
    if let Some(framed) = request
        .messages
        .iter()
        .rev()
        .find(|m| transcript::find(&m.content).is_some())
    {
        return transcript::parse(&framed.content);
    }
    let mut turns = Vec::new();
    for m in request.messages.iter().filter(|m| m.role != Role::System) {
        let blocks = summary_blocks(&m.content);
        if blocks.is_empty() {
            turns.push(turn_of(turns.len() as u64 + 1, m, m.content.clone()));
            continue;
        }
        for block in blocks {
            let content = format!("{}\n{}", Message::SUMMARY_PREFIX, block.render());
            turns.push(turn_of(turns.len() as u64 + 1, m, content));
        }
    }
    turns
}

/// The summaries in `text`: each `<summary …>` … `</summary>` block, or the whole text, that parses into
/// a non-empty [`StructuredSummary`].
fn summary_blocks(text: &str) -> Vec<StructuredSummary> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<summary") {
        let after_tag = match rest[start..].find('>') {
            Some(i) => start + i + 1,
            None => break,
        };
        let end = rest[after_tag..]
            .find("</summary>")
            .map_or(rest.len(), |i| after_tag + i);
        blocks.push(StructuredSummary::parse(&rest[after_tag..end]));
        rest = &rest[(end + "</summary>".len()).min(rest.len())..];
    }
    if blocks.is_empty() {
        blocks.push(StructuredSummary::parse(text));
    }
    blocks.retain(|b| !b.is_empty());
    blocks
}

fn turn_of(seq: u64, m: &ChatMessage, content: String) -> Turn {
    Turn {
        seq,
        role: m.role,
        name: m.name.clone(),
        content,
        tool_calls: m.tool_calls.clone(),
        tool_call_id: m.tool_call_id.clone(),
        at: None,
    }
}

/// Journal entries of a consolidation or reflection request: the entries listed in the last user
/// message, as [`prompts::consolidate_request`] and [`prompts::reflect_request`] list them.
fn entries_of(request: &ChatRequest) -> Vec<(Option<u64>, String)> {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| prompts::listed_entries(&m.content))
        .unwrap_or_default()
}

fn fact_lines(facts: impl IntoIterator<Item = String>) -> String {
    let lines: Vec<String> = facts.into_iter().map(|f| format!("- {f}")).collect();
    if lines.is_empty() {
        prompts::NO_FACTS.to_string()
    } else {
        lines.join("\n")
    }
}
