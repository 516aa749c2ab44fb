//! The request and response types of [`LlmClient`](crate::LlmClient): provider-neutral, serde-friendly.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use somna_core::config::ToolSpec;
use somna_core::{Message, Role, ToolCall};

somna_core::str_enum! {
    /// What a request is for. A hint for logs, metrics and the builtin provider; it is not sent
    /// over the wire. Its name is the snake_case one used in logs and metrics labels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Purpose as "purpose" {
        /// An agent's conversational turn.
        #[default]
        Chat = "chat",
        /// A compaction summary of a framed transcript.
        Summarize = "summarize",
        /// Pre-compaction extraction of notable facts from a framed transcript.
        Extract = "extract",
        /// Consolidation of journal entries into durable memory facts.
        Consolidate = "consolidate",
        /// An importance score (1–10) for one text.
        Score = "score",
        /// A higher-level reflection over recent journal entries.
        Reflect = "reflect",
    }
}

/// One message of a chat request, in the OpenAI chat shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// The text (may be empty for an assistant message that only calls tools).
    pub content: String,
    /// Optional participant name, e.g. which villager spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Function calls an assistant message requested.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with `role` and `content` and nothing else.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

somna_core::chat_constructors!(ChatMessage);

impl From<&Message> for ChatMessage {
    fn from(m: &Message) -> Self {
        ChatMessage {
            role: m.role,
            content: m.content.clone(),
            name: m.name.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
        }
    }
}

impl From<Message> for ChatMessage {
    fn from(m: Message) -> Self {
        ChatMessage {
            role: m.role,
            content: m.content,
            name: m.name,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
        }
    }
}

/// One chat completion request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model name the server knows (ignored by the builtin provider except for echoing it back).
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Cap on the completion's tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature; `None` leaves the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// What the request is for (not sent over the wire).
    #[serde(default)]
    pub purpose: Purpose,
    /// A stable key of the agent the request serves (the runtime sets its id on chat turns), so
    /// the server can find the agent's cached prompt prefix again. What goes on the wire, if
    /// anything, is the client's choice (`llm.cache_hint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
    /// The same request asking for a JSON answer under a schema. A client that uses structured
    /// output (`llm.structured_output`) sends this form; otherwise it sends `messages`, which ask
    /// for plain text. The answer of either form is read by the same reader in [`crate::prompts`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Structured>,
}

/// The structured form of a [`ChatRequest`]: its messages ask for JSON, and the answer must match
/// `schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Structured {
    /// The schema's name on the wire (`[A-Za-z0-9_-]{1,64}`), e.g. `compaction_summary`.
    pub name: String,
    /// A JSON schema (the subset OpenAI's strict mode accepts: every property required, no
    /// additional properties; `maxItems` on lists).
    pub schema: serde_json::Value,
    /// The messages to send with the schema, in place of the plain form's.
    pub messages: Vec<ChatMessage>,
}

impl ChatRequest {
    /// A chat request for `model` with `messages`, purpose [`Purpose::Chat`].
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            ..Default::default()
        }
    }

    /// Sets the purpose.
    pub fn with_purpose(mut self, purpose: Purpose) -> Self {
        self.purpose = purpose;
        self
    }

    /// Sets the completion's token cap.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Offers tools to the model.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the stable per-agent cache key.
    pub fn with_cache_key(mut self, key: impl Into<String>) -> Self {
        self.cache_key = Some(key.into());
        self
    }

    /// Adds the structured form: `messages` that ask for JSON matching `schema`.
    pub fn with_structured(
        mut self,
        name: impl Into<String>,
        schema: serde_json::Value,
        messages: Vec<ChatMessage>,
    ) -> Self {
        self.structured = Some(Structured {
            name: name.into(),
            schema,
            messages,
        });
        self
    }

    /// The messages to send: the structured form's when `structured` and the request has one,
    /// else the plain ones.
    pub fn messages_for(&self, structured: bool) -> &[ChatMessage] {
        match &self.structured {
            Some(form) if structured => &form.messages,
            _ => &self.messages,
        }
    }

    /// True when a tool named `name` is offered.
    pub fn offers_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    /// The content of the first system message, if any.
    pub fn system_prompt(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
    }
}

/// Token usage that the server reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt, as the server counted them (feeds token calibration).
    pub prompt_tokens: u32,
    /// Tokens of the completion.
    pub completion_tokens: u32,
    /// Of the prompt tokens, those the server served from its prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`); `None` when it did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
}

/// A successful chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The text of the first choice (may be empty when the model only calls tools).
    pub text: String,
    /// Tool calls the model requested.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Token usage, when the server reported it.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Wall time of the whole call: waiting for a concurrency slot, every attempt and every backoff.
    pub latency: Duration,
    /// How many HTTP attempts the call took (1 when the first one succeeded).
    pub attempts: u32,
    /// The model that answered, as the server named it.
    pub model: String,
    /// How many structured forms the server rejected during this call before one was accepted
    /// (`llm.structured_output = "auto"` steps down: `json_schema`, `json_object`, plain text).
    /// 0 almost always: the client remembers a step down for every later request.
    #[serde(default)]
    pub structured_fallbacks: u32,
}

impl ChatResponse {
    /// True when the model requested at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_message_from_core_message_keeps_every_field() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "journal_add".into(),
            arguments: "{}".into(),
        };
        let m = Message::assistant_calls("noting", vec![call.clone()]).with_name("Wren");
        let c = ChatMessage::from(&m);
        assert_eq!(c.role, Role::Assistant);
        assert_eq!(c.content, "noting");
        assert_eq!(c.name.as_deref(), Some("Wren"));
        assert_eq!(c.tool_calls, vec![call]);
        let t = ChatMessage::from(Message::tool_result("call_1", "ok"));
        assert_eq!(t.tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(t.role, Role::Tool);
    }

    #[test]
    fn request_helpers() {
        let r = ChatRequest::new(
            "m",
            vec![
                ChatMessage::system("You are Wren."),
                ChatMessage::user("hi"),
            ],
        )
        .with_purpose(Purpose::Summarize)
        .with_max_tokens(10);
        assert_eq!(r.system_prompt(), Some("You are Wren."));
        assert_eq!(r.purpose.to_string(), "summarize");
        assert!(!r.offers_tool("journal_add"));
        assert_eq!(r.max_tokens, Some(10));
    }
}
