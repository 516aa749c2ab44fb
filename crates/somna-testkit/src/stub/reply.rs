//! The vocabulary of a stub's script: what it answers ([`Reply`]), what usage it reports
//! ([`UsageReport`]), and what it recorded of each request ([`RecordedRequest`]).

use std::time::Duration;

use serde_json::{Value, json};
use somna_core::ToolCall;

/// What the stub answers to one chat-completion request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 200 with this text as the assistant's content.
    Text(String),
    /// 200 with these tool calls (content `null`, finish reason `tool_calls`).
    ToolCalls(Vec<ToolCall>),
    /// 200 with this exact JSON body (for shapes the other variants do not cover).
    Json(Value),
    /// Waits this long (or until the server stops), then answers with the inner reply.
    Delay(Duration, Box<Reply>),
    /// This status (e.g. 500, 503) with this body.
    Status(u16, String),
    /// 429 with `Retry-After: <secs>` and an OpenAI-style error body.
    RateLimited {
        /// The `Retry-After` header, in seconds.
        retry_after_secs: u64,
    },
    /// 200 with a body that is not valid JSON.
    MalformedJson,
    /// 200 with an empty assistant content and no tool calls.
    EmptyContent,
    /// Reads the request, then closes the socket without any response.
    DropConnection,
    /// Reads the request and never answers (until the client gives up or the server stops).
    Hang,
    /// Sends the headers and part of the body, then stalls like [`Reply::Hang`].
    HangBody,
}

impl Reply {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// One tool call with `arguments` as JSON.
    pub fn tool_call(id: &str, name: &str, arguments: &Value) -> Reply {
        Reply::ToolCalls(vec![ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        }])
    }

    /// `reply` after `delay`.
    pub fn delayed(delay: Duration, reply: Reply) -> Reply {
        Reply::Delay(delay, Box::new(reply))
    }

    /// A text reply of `text` after `delay`: a slow model.
    pub fn text_after(delay: Duration, text: impl Into<String>) -> Reply {
        Reply::delayed(delay, Reply::text(text))
    }

    /// A text reply of at least `bytes` bytes of plain words, whatever `max_tokens` asked for.
    pub fn oversize(bytes: usize) -> Reply {
        const WORDS: &str = "the mill wheel turns and the river runs past the smithy door ";
        Reply::Text(WORDS.repeat(bytes / WORDS.len() + 1))
    }

    /// An error status with an OpenAI-style JSON error body carrying `message`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::Status(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}})
                .to_string(),
        )
    }
}

/// The `usage` the stub reports in 200 answers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum UsageReport {
    /// Honest: bytes of the messages / chars-per-token, rounded up (the default).
    #[default]
    Counted,
    /// `prompt_tokens` is always this number, whatever was sent: 100 is a server that reports far
    /// too few, 0 one that reports none.
    FixedPrompt(u32),
    /// The honest count times this factor (e.g. 50.0: far too many).
    Scaled(f64),
    /// No `usage` object in the answer at all.
    Absent,
}

/// What the stub reports as `usage.prompt_tokens_details.cached_tokens` in 200 answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheReport {
    /// No `prompt_tokens_details` at all, like most local servers (the default).
    #[default]
    Absent,
    /// Always this many cached tokens (at most the prompt's count).
    Fixed(u32),
    /// Like a server with a prefix cache: the tokens of the longest common prefix of this chat
    /// request's message contents and the previous one's.
    CommonPrefix,
}

/// How the stub treats a request's `response_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseFormats {
    /// Any is accepted and ignored: the script decides the answer (the default).
    #[default]
    Accepted,
    /// Any `response_format` other than `text` is refused with HTTP 400 and an OpenAI-style error
    /// naming it. The refusal consumes no scripted reply.
    Rejected,
    /// `json_schema` is refused as llama-cpp-python 0.3.36 refuses it (HTTP 500, a validation
    /// error naming `response_format`); `json_object` is accepted.
    LlamaCppPython,
}

/// One request the stub received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST`…
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Every header, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when it is empty or not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization` header.
    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }

    /// The requested model.
    pub fn model(&self) -> Option<&str> {
        self.body["model"].as_str()
    }

    /// The chat messages of the body (empty when there are none).
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// True when the request asks for a compaction summary (a message carries the
    /// `<transcript>` the summary prompt wraps the turns in).
    pub fn asks_for_summary(&self) -> bool {
        self.messages().iter().any(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("<transcript>"))
        })
    }

    /// The text content of the last message with `role`.
    pub fn last_content(&self, role: &str) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == role)
            .map(content_text)
    }

    /// True for a chat-completion request.
    pub fn is_chat(&self) -> bool {
        self.path.ends_with("/chat/completions")
    }

    /// The `type` of the body's `response_format` (`json_schema`, `json_object`, `text`), if any.
    pub fn response_format(&self) -> Option<&str> {
        self.body["response_format"]["type"].as_str()
    }

    /// The message contents, concatenated: what the stub counts as the prompt.
    pub fn prompt_text(&self) -> String {
        self.messages().iter().map(content_text).collect()
    }
}

/// The text of a message's `content` (a string, or the text parts of an array).
pub(crate) fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}
