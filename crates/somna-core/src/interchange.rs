//! OpenAI-format JSONL, one message per line — the import/export format.
//!
//! ```json
//! {"role":"user","content":"Hello","name":"Aldric"}
//! {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]}
//! {"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"}
//! ```
//!
//! A line may carry `"created_at"`, an RFC 3339 time (`"2023-05-08T13:56:00Z"`): when the message
//! was said. Somna keeps it (the working context dates what it recalls); a line without it is
//! stamped with the import's time.

use serde::{Deserialize, Serialize};

use crate::message::{Message, Role, ToolCall};
use crate::time::Timestamp;

/// One line of OpenAI-format JSONL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiMessage {
    pub role: String,
    /// Text; `null` for an assistant message with only tool calls. Content parts (a list of
    /// `{"type":"text","text":…}`) are accepted and joined.
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<OpenAiToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// When the message was said, RFC 3339 (an extension of OpenAI's shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One content part; only text parts carry text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// A tool call in OpenAI's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: OpenAiFunction,
}

/// The function of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

fn function_type() -> String {
    "function".to_string()
}

/// Why a JSONL line is not a message; each variant names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterchangeError {
    /// The line is not JSON in OpenAI's message shape.
    #[error("not a message: {reason}")]
    NotAMessage {
        /// The JSON parser's description (line and column within the line).
        reason: String,
    },
    /// `role` is not one Somna knows.
    #[error("{0}")]
    Role(crate::names::UnknownName),
    /// A `tool` message without the `tool_call_id` it answers.
    #[error("a tool message needs tool_call_id")]
    MissingToolCallId,
    /// A non-tool message with neither text nor tool calls.
    #[error("the message has neither content nor tool_calls")]
    Empty,
    /// `created_at` is not an RFC 3339 time.
    #[error("created_at {value:?} is not an RFC 3339 time such as \"2023-05-08T13:56:00Z\"")]
    Time {
        /// The value found.
        value: String,
    },
}

/// Parses one JSONL line into a message (seq and tokens are left for the caller; `created_at` is
/// the line's time, or zero when it has none). Errors name what is wrong.
pub fn parse_line(line: &str) -> Result<Message, InterchangeError> {
    let m: OpenAiMessage =
        serde_json::from_str(line).map_err(|e| InterchangeError::NotAMessage {
            reason: e.to_string(),
        })?;
    let role: Role = m.role.parse().map_err(InterchangeError::Role)?;
    let content = match m.content {
        None => String::new(),
        Some(Content::Text(t)) => t,
        Some(Content::Parts(parts)) => parts
            .into_iter()
            .filter_map(|p| p.text)
            .collect::<Vec<_>>()
            .join("\n"),
    };
    if role == Role::Tool && m.tool_call_id.is_none() {
        return Err(InterchangeError::MissingToolCallId);
    }
    if content.is_empty() && m.tool_calls.is_empty() && role != Role::Tool {
        return Err(InterchangeError::Empty);
    }
    let mut msg = Message::new(role, content);
    if let Some(value) = m.created_at {
        msg.created_at =
            Timestamp::parse_rfc3339(value.trim()).map_err(|_| InterchangeError::Time { value })?;
    }
    msg.name = m.name;
    msg.tool_call_id = m.tool_call_id;
    msg.tool_calls = m
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
        })
        .collect();
    Ok(msg)
}

/// The message as one JSONL line in OpenAI's shape, with its `created_at` when `with_time`.
pub fn to_line_with(m: &Message, with_time: bool) -> String {
    let line = OpenAiMessage {
        role: m.role.as_str().to_string(),
        content: if m.content.is_empty() && m.has_tool_calls() {
            None
        } else {
            Some(Content::Text(m.content.clone()))
        },
        name: m.name.clone(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| OpenAiToolCall {
                id: c.id.clone(),
                kind: function_type(),
                function: OpenAiFunction {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                },
            })
            .collect(),
        tool_call_id: m.tool_call_id.clone(),
        created_at: with_time
            .then(|| humantime::format_rfc3339_seconds(m.created_at.to_system_time()).to_string()),
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// The message as one JSONL line in OpenAI's shape (no time).
pub fn to_line(m: &Message) -> String {
    to_line_with(m, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for line in [
            r#"{"role":"user","content":"Hello","name":"Aldric"}"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]}"#,
            r#"{"role":"tool","content":"{\"ok\":true}","tool_call_id":"c1"}"#,
        ] {
            let m = parse_line(line).unwrap();
            assert_eq!(to_line(&m), line);
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |line: &str| parse_line(line).unwrap_err();
        assert!(matches!(err("{"), InterchangeError::NotAMessage { .. }));
        assert!(err("{").to_string().starts_with("not a message"));
        let robot = err(r#"{"role":"robot","content":"x"}"#);
        assert!(matches!(robot, InterchangeError::Role(_)));
        assert!(
            robot.to_string().contains("unknown role \"robot\""),
            "{robot}"
        );
        assert_eq!(
            err(r#"{"role":"tool","content":"x"}"#),
            InterchangeError::MissingToolCallId
        );
        assert_eq!(err(r#"{"role":"user"}"#), InterchangeError::Empty);
        let parts = parse_line(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}"#,
        )
        .unwrap();
        assert_eq!(parts.content, "a");
        let late = err(r#"{"role":"user","content":"x","created_at":"yesterday"}"#);
        assert!(
            late.to_string()
                .contains("created_at \"yesterday\" is not an RFC 3339 time"),
            "{late}"
        );
    }

    #[test]
    fn times_are_read_and_written() {
        let line =
            r#"{"role":"user","content":"Hi","name":"Nora","created_at":"2023-05-08T13:56:00Z"}"#;
        let m = parse_line(line).unwrap();
        assert_eq!(m.created_at.minute_label(), "2023-05-08 13:56");
        assert_eq!(to_line_with(&m, true), line);
        assert_eq!(
            to_line(&m),
            r#"{"role":"user","content":"Hi","name":"Nora"}"#
        );
        assert_eq!(
            parse_line(r#"{"role":"user","content":"Hi"}"#)
                .unwrap()
                .created_at,
            Timestamp::ZERO
        );
    }
}
