//! `GET /v1/agents/{id}/prompt`: what an agent sees — the prompt its next LLM call would receive
//! for an input, message by message and part by part, as `somna prompt` prints it. Nothing is
//! written: the input is not sent.

use actix_web::HttpRequest;
use actix_web::http::StatusCode;
use serde::Serialize;
use somna_core::config::AgentConfig;
use somna_core::{Fact, Role, Seq, ToolCall};
use somna_runtime::prompt::{Prompt, WorkingContext};
use utoipa::ToSchema;

use super::{Reply, State, json, path_agent, runtime_error};
use crate::error::{ApiError, Denied, ErrorBody};
use crate::query::Params;

/// The longest input a preview takes, in bytes (an input is a user turn: the same bound).
const MAX_INPUT: usize = 64 * 1024;

/// The prompt an agent's next LLM call would receive.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PromptView<'a> {
    /// The model the call would go to.
    model: &'a str,
    /// The input the preview was built for (the last user message).
    input: &'a str,
    /// The agent's context window (`max_context_tokens`).
    window_tokens: u32,
    /// The most tokens the prompt may carry: the window less the reply reserve.
    budget_tokens: u64,
    /// The prompt's tokens (the messages and the reply's priming).
    total_tokens: u64,
    /// The window's tokens by part.
    parts: PromptParts,
    /// The oldest live turns left out to fit the budget (still in the history; the next tick
    /// compacts).
    dropped_turns: usize,
    /// The messages, in the order the model reads them.
    messages: Vec<PromptMessage<'a>>,
    /// What retrieval recalled for the input: the working context's facts and archive excerpts.
    recalled: Recalled<'a>,
}

/// The window's tokens by part; they add up to the window.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PromptParts {
    /// The persona (the system message without the summaries).
    persona: u64,
    /// The compaction summaries.
    summary: u64,
    /// The working context: memory facts and archive excerpts recalled for the input.
    working_context: u64,
    /// The live history (the newest turns, the input among them).
    live_history: u64,
    /// Reserved for the reply (`max_reply_tokens`).
    reply_reserve: u64,
    /// Left unused.
    free: u64,
}

impl PromptParts {
    /// The parts of `built` in a window of `window` tokens.
    pub(crate) fn of(built: &Prompt, window: u32) -> Self {
        PromptParts {
            persona: built.persona_tokens,
            summary: built.summary_tokens,
            working_context: built.working_tokens,
            live_history: built.history_tokens,
            reply_reserve: built.reply_reserve,
            free: u64::from(window).saturating_sub(built.total_tokens() + built.reply_reserve),
        }
    }

    /// Each part with its short name and label, in the window's order (`free` last).
    pub(crate) fn labelled(&self) -> [(&'static str, &'static str, u64); 6] {
        [
            ("persona", "persona", self.persona),
            ("summary", "summary", self.summary),
            ("working", "working context", self.working_context),
            ("live", "live history", self.live_history),
            ("reserve", "reply reserve", self.reply_reserve),
            ("free", "free", self.free),
        ]
    }
}

/// Which part of the prompt a message is.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PromptPart {
    /// The system message: persona and summaries.
    System,
    /// The working context note.
    WorkingContext,
    /// A turn of the live history.
    LiveHistory,
}

/// One message of the prompt.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PromptMessage<'a> {
    part: PromptPart,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    content: &'a str,
    /// Its tokens, as the budget counts them.
    tokens: u32,
    #[serde(skip_serializing_if = "<[ToolCall]>::is_empty")]
    tool_calls: &'a [ToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// What the working context holds.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Recalled<'a> {
    /// Memory facts, most relevant first.
    facts: &'a [Fact],
    /// Archive excerpts, in the order they were said.
    excerpts: Vec<ExcerptView>,
}

/// A run of archived turns around search hits.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExcerptView {
    /// The archived turns it shows, in order.
    turns: Vec<Seq>,
    /// Those of them that are search hits (the rest are their neighbours).
    hits: Vec<Seq>,
}

impl<'a> PromptView<'a> {
    /// The view of `built` (with the `working` context it holds) for `input` under `config`.
    pub(crate) fn new(
        config: &'a AgentConfig,
        input: &'a str,
        built: &'a Prompt,
        working: &'a WorkingContext,
    ) -> Self {
        let window = config.compaction.max_context_tokens;
        let total = built.total_tokens();
        let messages = built
            .messages
            .iter()
            .zip(&built.message_tokens)
            .enumerate()
            .map(|(i, (m, &tokens))| PromptMessage {
                part: if i == 0 {
                    PromptPart::System
                } else if built.note_index == Some(i) {
                    PromptPart::WorkingContext
                } else {
                    PromptPart::LiveHistory
                },
                role: m.role,
                name: m.name.as_deref(),
                content: &m.content,
                tokens,
                tool_calls: &m.tool_calls,
                tool_call_id: m.tool_call_id.as_deref(),
            })
            .collect();
        let parts = PromptParts::of(built, window);
        PromptView {
            model: &config.model,
            input,
            window_tokens: window,
            budget_tokens: built.budget,
            total_tokens: total,
            parts,
            dropped_turns: built.dropped_turns,
            messages,
            recalled: Recalled {
                facts: &working.facts,
                excerpts: working
                    .excerpts
                    .iter()
                    .map(|e| ExcerptView {
                        turns: e.turns.iter().map(|t| t.seq).collect(),
                        hits: e.hits.clone(),
                    })
                    .collect(),
            },
        }
    }
}

/// The `input` a preview asks for: what the query names (may be empty: the prompt as it stands,
/// with an empty turn), bounded.
pub(crate) fn preview_input(params: &Params) -> Result<&str, ApiError> {
    let input = params.get("input").unwrap_or_default();
    if input.len() > MAX_INPUT {
        return Err(ApiError::bad_param(
            "input",
            format!("longer than {MAX_INPUT} bytes"),
        ));
    }
    Ok(input)
}

/// `GET /v1/agents/{id}/prompt?input`: the prompt the agent's next LLM call would receive if
/// `input` arrived now.
#[utoipa::path(
    get,
    operation_id = "agent_prompt",
    path = "/v1/agents/{id}/prompt",
    tag = "agents",
    summary = "What an agent sees",
    description = "The prompt the agent's next LLM call would receive if `input` arrived now, \
message by message with their tokens and the part of the prompt each is (system, working context, \
live history), the window's tokens by part (persona, summary, working context, live history, reply \
reserve, free), and what retrieval recalled for the input. Retrieval runs as a turn runs it (by \
meaning too when an embedder is configured). Nothing is written: the input is not sent.",
    params(
        ("id" = somna_core::AgentId, Path, description = "The agent's id"),
        ("input" = Option<String>, Query, description = "The next input (default: empty); at most 65,536 bytes"),
    ),
    responses(
        (status = 200, description = "The prompt", body = PromptView),
        (status = 400, description = "`invalid_agent_id`; `bad_request`: an unknown or repeated query parameter, an input over 65,536 bytes", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`: no agent with that id", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired (its data can still be read)", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
    ),
)]
pub(crate) async fn prompt(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["input"], &[])?;
    let id = path_agent(&req)?;
    let input = preview_input(&params)?;
    let status = state
        .runtime
        .status(&id)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    let (built, working) = state
        .runtime
        .preview(&id, &status.config, input)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    json(
        StatusCode::OK,
        &PromptView::new(&status.config, input, &built, &working),
    )
}
