//! `plan`: decide whether to compact and what: head (pinned), body (summarized), tail (kept).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::config::{CompactionConfig, MIN_TAIL_MESSAGES};
use crate::message::{Message, MessageKind, Role};
use crate::record::Trigger;
use crate::tokens::TokenCounter;
use crate::usage::Usage;

use super::mask::{mask_placeholder, tool_names};

/// Tokens reserved in every summarizer request for the instructions and the framing.
pub const PROMPT_RESERVE_TOKENS: u32 = 600;
/// Tokens the transcript framing adds per turn (`[#12 user (Aldric)]` and separators).
pub const FRAME_TOKENS_PER_TURN: u32 = 8;
/// The smallest transcript budget per summarizer request, whatever the config says.
pub const MIN_CHUNK_BUDGET: u32 = 128;

/// What `plan` looks at.
#[derive(Debug, Clone, Copy)]
pub struct PlanRequest<'a> {
    /// The agent's live history, in seq order.
    pub history: &'a [Message],
    /// Tokens of the rest of the prompt: the system prompt (persona) and the working context.
    pub fixed_tokens: u64,
    pub trigger: Trigger,
    /// The agent's calibration factor ([`calibration_factor`](crate::usage::calibration_factor):
    /// 1.0 for exact tokenizers): usage is measured in server tokens, by [`Usage`].
    pub calibration: f64,
}

/// The result of planning: a plan, or a reason to do nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PlanOutcome {
    Plan(Plan),
    Skip(Skip),
}

/// Why nothing is compacted, with the usage that was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skip {
    pub reason: SkipReason,
    /// Usage (0–1+) when planning.
    pub usage: f64,
}

/// Why a compaction was skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// Compaction is disabled for this agent (manual compaction still runs).
    Disabled,
    /// Usage is below the trigger's threshold.
    BelowThreshold { threshold: f64 },
    /// There is no history at all.
    EmptyHistory,
    /// Everything is in the pinned head or the preserve window: there is no body.
    WithinPreserveWindow { head: usize, tail: usize },
    /// The body has fewer messages than `min_compact_batch`.
    BatchTooSmall { body: usize, min: u32 },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Disabled => f.write_str("compaction is disabled"),
            SkipReason::BelowThreshold { threshold } => {
                write!(f, "below the threshold ({threshold:.2})")
            }
            SkipReason::EmptyHistory => f.write_str("the history is empty"),
            SkipReason::WithinPreserveWindow { head, tail } => write!(
                f,
                "everything is within the pinned head ({head}) and the preserve window ({tail})"
            ),
            SkipReason::BatchTooSmall { body, min } => {
                write!(
                    f,
                    "the body has {body} messages, fewer than min_compact_batch ({min})"
                )
            }
        }
    }
}

/// What to compact. Ranges are indices into the planned history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub trigger: Trigger,
    /// Usage when planning.
    pub usage: f64,
    /// Prompt tokens when planning (fixed + history).
    pub tokens_before: u64,
    /// Pinned messages, never compacted.
    pub head: Range<usize>,
    /// Messages to replace by a summary.
    pub body: Range<usize>,
    /// The preserve window, kept verbatim.
    pub tail: Range<usize>,
    /// Tokens of the body as stored.
    pub body_tokens: u64,
    /// Tokens of the tail as stored.
    pub tail_tokens: u64,
    /// Tokens of the head as stored.
    pub head_tokens: u64,
    /// Index of an earlier summary inside the body, folded into the new one.
    pub previous_summary: Option<usize>,
    /// The new summary's generation.
    pub generation: u32,
    /// Emergency only: the preserve window was reduced to its token share so the prompt fits.
    pub tail_shrunk: bool,
    /// Body indices shown to the summarizer as a placeholder (old tool outputs, oversized
    /// messages), in increasing order.
    pub masked_for_summary: Vec<usize>,
    /// Body sub-ranges, each fitting one summarizer request; more than one means chunk, then merge.
    pub chunks: Vec<Range<usize>>,
    /// Tokens the summarizer receives for the body (after masking, with framing).
    pub summarizer_tokens: u64,
}

/// The generation of a summary that replaces `covered`: one above the highest summary it folds in,
/// 1 when it folds in none.
pub fn next_generation<'a>(covered: impl IntoIterator<Item = &'a Message>) -> u32 {
    covered
        .into_iter()
        .filter_map(|m| m.summary().map(|s| s.generation))
        .max()
        .unwrap_or(0)
        + 1
}

/// Plans a compaction. Pure: reads only its arguments.
pub fn plan(req: &PlanRequest<'_>, cfg: &CompactionConfig, counter: &TokenCounter) -> PlanOutcome {
    let history = req.history;
    let history_tokens: u64 = history.iter().map(|m| u64::from(m.tokens)).sum();
    let measured = Usage::new(
        req.fixed_tokens,
        history_tokens,
        req.calibration,
        cfg.max_context_tokens,
    );
    let tokens_before = measured.tokens;
    let usage = measured.fraction();
    let skip = |reason| PlanOutcome::Skip(Skip { reason, usage });

    let threshold = match req.trigger {
        Trigger::Sleep => Some(cfg.sleep_threshold),
        Trigger::Emergency => Some(cfg.emergency_threshold),
        Trigger::Manual => None,
    };
    if let Some(threshold) = threshold {
        if !cfg.enabled {
            return skip(SkipReason::Disabled);
        }
        if usage < threshold {
            return skip(SkipReason::BelowThreshold { threshold });
        }
    }
    if history.is_empty() {
        return skip(SkipReason::EmptyHistory);
    }

    let groups = ToolGroups::new(history);
    let head_end = groups.cut_forward((cfg.head_size as usize).min(history.len()));
    let cap = cfg.tail_cap(req.fixed_tokens);
    let mut tail_start = preserve_start(history, cfg, true, cap);
    let mut tail_shrunk = false;
    if req.trigger == Trigger::Emergency {
        // The tail must leave room: if the prompt would still be over the emergency threshold with a
        // full-size summary, keep only the preserve window's token share.
        let head_tokens = sum_tokens(&history[..head_end]);
        let projected = |start: usize| {
            Usage::new(
                req.fixed_tokens,
                head_tokens
                    + u64::from(cfg.summary_cap())
                    + sum_tokens(&history[start.max(head_end)..]),
                req.calibration,
                cfg.max_context_tokens,
            )
            .fraction()
        };
        if crate::usage::over_emergency(projected(groups.cut_backward(tail_start, head_end)), cfg) {
            let by_ratio = preserve_start(history, cfg, false, cap);
            if by_ratio > tail_start {
                tail_start = by_ratio;
                tail_shrunk = true;
            }
        }
    }
    let tail_start = groups.cut_backward(tail_start.max(head_end), head_end);
    let body = head_end..tail_start;
    if body.is_empty() {
        return skip(SkipReason::WithinPreserveWindow {
            head: head_end,
            tail: history.len() - tail_start,
        });
    }
    if req.trigger != Trigger::Manual && body.len() < cfg.min_compact_batch as usize {
        return skip(SkipReason::BatchTooSmall {
            body: body.len(),
            min: cfg.min_compact_batch,
        });
    }

    let previous_summary = body.clone().find(|&i| history[i].summary().is_some());
    let generation = next_generation(body.clone().map(|i| &history[i]));

    let (masked_for_summary, chunks, summarizer_tokens) =
        summarizer_layout(history, body.clone(), cfg, counter);

    PlanOutcome::Plan(Plan {
        trigger: req.trigger,
        usage,
        tokens_before,
        head: 0..head_end,
        body_tokens: sum_tokens(&history[body.clone()]),
        tail_tokens: sum_tokens(&history[tail_start..]),
        head_tokens: sum_tokens(&history[..head_end]),
        body,
        tail: tail_start..history.len(),
        previous_summary,
        generation,
        tail_shrunk,
        masked_for_summary,
        chunks,
        summarizer_tokens,
    })
}

/// The transcript budget of one summarizer request.
pub fn chunk_budget(cfg: &CompactionConfig) -> u32 {
    cfg.summarizer_context_tokens
        .saturating_sub(cfg.summary_cap())
        .saturating_sub(PROMPT_RESERVE_TOKENS)
        .max(MIN_CHUNK_BUDGET)
}

impl Plan {
    /// The messages the plan replaces.
    pub fn body<'h>(&self, history: &'h [Message]) -> &'h [Message] {
        &history[self.body.clone()]
    }

    /// The body as the summarizer sees it: masked messages replaced by their placeholder (built),
    /// the others borrowed from `history` (a 2,000-message body is not copied to be read once).
    pub fn summarizer_view<'h>(
        &self,
        history: &'h [Message],
        counter: &TokenCounter,
    ) -> Vec<Cow<'h, Message>> {
        let names = tool_names(history);
        self.body
            .clone()
            .map(|i| {
                if self.masked_for_summary.binary_search(&i).is_ok() {
                    Cow::Owned(mask_placeholder(
                        &history[i],
                        &names,
                        &placeholder_counter(counter),
                    ))
                } else {
                    Cow::Borrowed(&history[i])
                }
            })
            .collect()
    }

    /// The summarizer view split into the plan's chunks.
    pub fn summarizer_chunks<'h>(
        &self,
        history: &'h [Message],
        counter: &TokenCounter,
    ) -> Vec<Vec<Cow<'h, Message>>> {
        let view = self.summarizer_view(history, counter);
        self.chunks
            .iter()
            .map(|r| view[r.start - self.body.start..r.end - self.body.start].to_vec())
            .collect()
    }

    /// A compact, stable text rendering (logs and snapshot tests).
    pub fn describe(&self, history: &[Message]) -> String {
        let seqs = |r: &Range<usize>| -> String {
            if r.is_empty() {
                "none".to_string()
            } else {
                format!("#{}..#{}", history[r.start].seq, history[r.end - 1].seq)
            }
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} usage={:.3} tokens={}",
            self.trigger, self.usage, self.tokens_before
        );
        // One part of the history: its seqs, how many messages and tokens.
        let part = |name: &str, range: &Range<usize>, tokens: u64| {
            format!(
                "{name} {} ({} msgs, {tokens} tok)",
                seqs(range),
                range.len()
            )
        };
        let _ = writeln!(out, "{}", part("head", &self.head, self.head_tokens));
        let _ = write!(out, "{}", part("body", &self.body, self.body_tokens));
        if let Some(i) = self.previous_summary {
            let _ = write!(out, " folds summary #{}", history[i].seq);
        }
        let _ = writeln!(out, " gen={}", self.generation);
        let _ = writeln!(
            out,
            "{}{}",
            part("tail", &self.tail, self.tail_tokens),
            if self.tail_shrunk { " shrunk" } else { "" }
        );
        let chunks: Vec<String> = self.chunks.iter().map(seqs).collect();
        let masked: Vec<String> = self
            .masked_for_summary
            .iter()
            .map(|&i| format!("#{}", history[i].seq))
            .collect();
        let _ = write!(
            out,
            "summarizer {} tok in {} chunk(s) [{}]",
            self.summarizer_tokens,
            self.chunks.len(),
            chunks.join(", ")
        );
        if !masked.is_empty() {
            let _ = write!(out, " masked [{}]", masked.join(" "));
        }
        out
    }
}

impl PlanOutcome {
    /// The plan, if there is one.
    pub fn into_plan(self) -> Option<Plan> {
        match self {
            PlanOutcome::Plan(p) => Some(p),
            PlanOutcome::Skip(_) => None,
        }
    }

    /// A compact, stable text rendering (logs and snapshot tests).
    pub fn describe(&self, history: &[Message]) -> String {
        match self {
            PlanOutcome::Plan(p) => p.describe(history),
            PlanOutcome::Skip(s) => format!("skip usage={:.3}: {}", s.usage, s.reason),
        }
    }
}

/// How placeholders are counted while planning: an upper estimate is enough (the summarizer never
/// reads a placeholder's count, and the layout only needs chunks that fit), and the heuristic errs
/// high while costing far less than an exact BPE count of every old tool output.
fn placeholder_counter(counter: &TokenCounter) -> TokenCounter {
    if counter.is_exact() {
        TokenCounter::heuristic()
    } else {
        *counter
    }
}

fn sum_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(|m| u64::from(m.tokens)).sum()
}

/// Where the preserve window starts: by count and (if `by_count`) the larger of the two windows.
/// Never more than `cap` tokens (see [`CompactionConfig::tail_cap`]), unless the latest
/// [`MIN_TAIL_MESSAGES`] alone take more.
fn preserve_start(history: &[Message], cfg: &CompactionConfig, by_count: bool, cap: u64) -> usize {
    let tokens_from = |budget: u64| {
        let mut start = history.len();
        let mut used = 0u64;
        while start > 0 && used + u64::from(history[start - 1].tokens) <= budget {
            used += u64::from(history[start - 1].tokens);
            start -= 1;
        }
        start
    };
    let start = tokens_from((cfg.preserve_ratio * f64::from(cfg.max_context_tokens)) as u64);
    let start = if by_count {
        start.min(history.len().saturating_sub(cfg.preserve_messages as usize))
    } else {
        start
    };
    let floor = history.len().saturating_sub(MIN_TAIL_MESSAGES);
    start.max(tokens_from(cap).min(floor))
}

/// Which masked indices and chunks the summarizer gets for `body`.
fn summarizer_layout(
    history: &[Message],
    body: Range<usize>,
    cfg: &CompactionConfig,
    counter: &TokenCounter,
) -> (Vec<usize>, Vec<Range<usize>>, u64) {
    let budget = u64::from(chunk_budget(cfg));
    let names = tool_names(history);
    let age_limit = history
        .len()
        .saturating_sub(cfg.mask_after_messages as usize);
    let mut masked = Vec::new();
    let mut chunks = Vec::new();
    let mut total = 0u64;
    let mut chunk_start = body.start;
    let mut chunk_tokens = 0u64;
    for i in body.clone() {
        let m = &history[i];
        let framed = |tokens: u32| u64::from(tokens) + u64::from(FRAME_TOKENS_PER_TURN);
        let mut cost = framed(m.tokens);
        let old_tool_output = m.role == Role::Tool
            && matches!(m.kind, MessageKind::Normal)
            && i < age_limit
            && !is_exempt(m, &names, cfg);
        if old_tool_output || cost > budget {
            let placeholder = mask_placeholder(m, &names, &placeholder_counter(counter));
            if placeholder.tokens < m.tokens {
                masked.push(i);
                cost = framed(placeholder.tokens);
            }
        }
        if chunk_tokens + cost > budget && i > chunk_start {
            chunks.push(chunk_start..i);
            chunk_start = i;
            chunk_tokens = 0;
        }
        chunk_tokens += cost;
        total += cost;
    }
    chunks.push(chunk_start..body.end);
    (masked, chunks, total)
}

fn is_exempt(m: &Message, names: &HashMap<&str, &str>, cfg: &CompactionConfig) -> bool {
    m.tool_call_id
        .as_deref()
        .and_then(|id| names.get(id))
        .is_some_and(|name| cfg.mask_exempt_tools.iter().any(|e| e == name))
}

/// Tool-call groups: an assistant message with tool calls and every result answering it. A cut
/// must never fall strictly inside a group's span.
struct ToolGroups {
    /// (first index, last index) of each group, sorted by start.
    spans: Vec<(usize, usize)>,
}

impl ToolGroups {
    fn new(history: &[Message]) -> Self {
        let mut call_at: HashMap<&str, usize> = HashMap::new();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut span_of: HashMap<usize, usize> = HashMap::new();
        for (i, m) in history.iter().enumerate() {
            if m.has_tool_calls() {
                span_of.insert(i, spans.len());
                spans.push((i, i));
                for call in &m.tool_calls {
                    call_at.insert(call.id.as_str(), i);
                }
            }
            if let Some(call) = m.tool_call_id.as_deref().and_then(|id| call_at.get(id)) {
                if let Some(&s) = span_of.get(call) {
                    spans[s].1 = spans[s].1.max(i);
                }
            }
        }
        spans.retain(|(a, b)| b > a);
        ToolGroups { spans }
    }

    /// Moves a cut (the index where the later part starts) forward past any group it splits.
    fn cut_forward(&self, mut cut: usize) -> usize {
        loop {
            let moved = self
                .spans
                .iter()
                .filter(|(a, b)| *a < cut && cut <= *b)
                .map(|(_, b)| b + 1)
                .max();
            match moved {
                Some(next) if next > cut => cut = next,
                _ => return cut,
            }
        }
    }

    /// Moves a cut backward (never below `floor`) to the start of any group it splits.
    fn cut_backward(&self, mut cut: usize, floor: usize) -> usize {
        loop {
            let moved = self
                .spans
                .iter()
                .filter(|(a, b)| *a < cut && cut <= *b)
                .map(|(a, _)| *a)
                .min();
            match moved {
                Some(prev) if prev < cut => cut = prev.max(floor),
                _ => return cut,
            }
            if cut == floor {
                return cut;
            }
        }
    }
}
