//! Messages: the unit of an agent's history and archive.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// A message's sequence number, unique per agent and increasing in append order.
pub type Seq = u64;

crate::str_enum! {
    /// Who wrote a message, as in the OpenAI chat format; its name is the wire name (`system`,
    /// `user`, `assistant`, `tool`), and `developer` reads as `system`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum Role as "role" {
        System = "system" | "developer",
        User = "user",
        Assistant = "assistant",
        Tool = "tool",
    }
}

/// One function call requested by an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    /// The id that the matching tool result names in its `tool_call_id`.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments, as the JSON text the model produced (kept verbatim: it may be invalid JSON).
    pub arguments: String,
}

/// What kind of entry a history message is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessageKind {
    /// An original message as it was appended.
    #[default]
    Normal,
    /// A compaction summary standing in for archived messages.
    Summary(SummaryMeta),
    /// An old tool output replaced by a short placeholder; the original is in the archive.
    Masked {
        /// Tokens of the original message.
        original_tokens: u32,
    },
}

/// Metadata of a summary message: what it covers and what it saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SummaryMeta {
    /// The first original seq the summary covers (its own seq).
    pub covers_from_seq: Seq,
    /// The last original seq the summary covers.
    pub covers_through_seq: Seq,
    /// How many history messages (originals and an earlier summary) this summary replaced.
    pub compacted_count: u32,
    /// Tokens of the messages it replaced.
    pub original_tokens: u32,
    /// Tokens of the summary message itself.
    pub summary_tokens: u32,
    /// 1 for a first summary; an earlier summary folded in gives its generation + 1.
    pub generation: u32,
    /// When the compaction committed.
    pub compacted_at: Timestamp,
}

/// Gives a message type of the OpenAI chat shape (fields `role`, `content`, `name`,
/// `tool_calls`, `tool_call_id`, and a `new(role, content)` that leaves the others empty) its
/// constructors, written once for [`Message`] and the LLM client's request message: `system`,
/// `user`, `assistant`, `assistant_calls`, `tool_result` and `with_name`.
#[macro_export]
macro_rules! chat_constructors {
    ($message:ident) => {
        impl $message {
            /// A system message.
            pub fn system(content: impl Into<String>) -> Self {
                Self::new($crate::message::Role::System, content)
            }

            /// A user message.
            pub fn user(content: impl Into<String>) -> Self {
                Self::new($crate::message::Role::User, content)
            }

            /// An assistant message.
            pub fn assistant(content: impl Into<String>) -> Self {
                Self::new($crate::message::Role::Assistant, content)
            }

            /// An assistant message that requests tool calls.
            pub fn assistant_calls(
                content: impl Into<String>,
                calls: Vec<$crate::message::ToolCall>,
            ) -> Self {
                $message {
                    tool_calls: calls,
                    ..Self::new($crate::message::Role::Assistant, content)
                }
            }

            /// A tool result answering `call_id`.
            pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
                $message {
                    tool_call_id: Some(call_id.into()),
                    ..Self::new($crate::message::Role::Tool, content)
                }
            }

            /// Sets the participant name.
            pub fn with_name(mut self, name: impl Into<String>) -> Self {
                self.name = Some(name.into());
                self
            }
        }
    };
}

/// One message of an agent's history or archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    /// Position in the agent's history; summaries take the seq of the first message they cover.
    pub seq: Seq,
    pub role: Role,
    pub content: String,
    /// Optional participant name (OpenAI `name`), e.g. which villager spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Function calls an assistant message requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub created_at: Timestamp,
    /// Token count computed once at append time (see `TokenCounter::count_message`).
    pub tokens: u32,
    #[serde(default)]
    pub kind: MessageKind,
}

crate::chat_constructors!(Message);

impl Message {
    /// The text a summary message starts with.
    pub const SUMMARY_PREFIX: &'static str = "[CONTEXT SUMMARY]";

    /// A plain message with seq 0 and no token count yet; the store assigns both at append time.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            seq: 0,
            role,
            content: content.into(),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: Timestamp::ZERO,
            tokens: 0,
            kind: MessageKind::Normal,
        }
    }

    /// Sets the creation time.
    pub fn at(mut self, t: Timestamp) -> Self {
        self.created_at = t;
        self
    }

    /// The summary metadata, when this is a summary message.
    pub fn summary(&self) -> Option<&SummaryMeta> {
        match &self.kind {
            MessageKind::Summary(meta) => Some(meta),
            _ => None,
        }
    }

    /// True for an original message (not a summary, not a masked placeholder).
    pub fn is_normal(&self) -> bool {
        matches!(self.kind, MessageKind::Normal)
    }

    /// True for an assistant message that requests tool calls.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }
}
