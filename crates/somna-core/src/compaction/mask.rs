//! Observation masking: replace old tool outputs with a short placeholder, without an LLM.
//!
//! A masked message keeps its seq, role and `tool_call_id` (so the tool pair stays valid for the
//! chat API), and its content says which tool produced how many tokens and that the original is in
//! the archive. Masking alone is the cheap first step of compaction.

use std::collections::HashMap;

use crate::config::CompactionConfig;
use crate::message::{Message, MessageKind, Role};
use crate::tokens::TokenCounter;

/// Which tool outputs to mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskPolicy {
    /// Tool outputs among the last `keep_recent` messages are kept.
    pub keep_recent: usize,
    /// Outputs of these tools are never masked.
    pub exempt_tools: Vec<String>,
}

impl MaskPolicy {
    /// The policy an agent's compaction config describes.
    pub fn from_config(cfg: &CompactionConfig) -> Self {
        MaskPolicy {
            keep_recent: cfg.mask_after_messages as usize,
            exempt_tools: cfg.mask_exempt_tools.clone(),
        }
    }
}

/// Maps each tool call id in `history` to the tool's name.
pub fn tool_names(history: &[Message]) -> HashMap<&str, &str> {
    history
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect()
}

/// The placeholder that stands in for `original`, with its token count set.
pub fn mask_placeholder(
    original: &Message,
    names: &HashMap<&str, &str>,
    counter: &TokenCounter,
) -> Message {
    let what = match (original.role, original.tool_call_id.as_deref()) {
        (Role::Tool, Some(id)) => format!(
            "output of tool `{}`",
            names.get(id).copied().unwrap_or("unknown")
        ),
        (role, _) => format!("{role} message"),
    };
    let content = format!(
        "[masked: {what}, {} tokens, seq #{}; the original is archived, use `recall` to retrieve it]",
        original.tokens, original.seq
    );
    // Field by field: `..original.clone()` copied the original's content (the long output being
    // masked) only to drop it.
    let mut masked = Message {
        seq: original.seq,
        role: original.role,
        content,
        name: original.name.clone(),
        tool_calls: original.tool_calls.clone(),
        tool_call_id: original.tool_call_id.clone(),
        created_at: original.created_at,
        tokens: 0,
        kind: MessageKind::Masked {
            original_tokens: original.tokens,
        },
    };
    masked.tokens = counter.count_message(&masked);
    masked
}

/// Placeholders for the old tool outputs of `history[..upto]` that `policy` allows to mask and that
/// would save tokens. Each placeholder has the seq of the message it replaces.
pub fn plan_masking(
    history: &[Message],
    upto: usize,
    policy: &MaskPolicy,
    counter: &TokenCounter,
) -> Vec<Message> {
    let names = tool_names(history);
    let limit = upto
        .min(history.len().saturating_sub(policy.keep_recent))
        .min(history.len());
    history[..limit]
        .iter()
        .filter(|m| m.role == Role::Tool && m.is_normal())
        .filter(|m| {
            let name = m.tool_call_id.as_deref().and_then(|id| names.get(id));
            !name.is_some_and(|n| policy.exempt_tools.iter().any(|e| e == n))
        })
        .map(|m| mask_placeholder(m, &names, counter))
        .filter(|p| {
            matches!(p.kind, MessageKind::Masked { original_tokens } if p.tokens < original_tokens)
        })
        .collect()
}
