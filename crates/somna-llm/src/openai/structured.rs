//! The structured-output ladder of one client: how a request that has a [`Structured`] form asks
//! for its answer ([`WireFormat`]), and what the client learned from the server ([`Ladder`]).
//!
//! With `llm.structured_output = "auto"` the ladder starts at OpenAI's `json_schema`. A server
//! that rejects it (an error status whose body names `response_format`, the schema or the grammar:
//! llama-cpp-python answers HTTP 500 with a validation error naming `response_format`) gets the
//! same request at once as `json_object` with the schema (llama-cpp-python's dialect), and one
//! that rejects that too gets it as plain text. Each step down is remembered for every later
//! request of the client and its clones, and logged once. A pinned mode never steps down: its
//! rejection is the call's error.
//!
//! [`Structured`]: crate::types::Structured

use std::sync::atomic::{AtomicU8, Ordering};

use somna_core::config::StructuredOutput;

use crate::types::ChatRequest;

/// How one attempt asks for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WireFormat {
    /// `response_format: {"type": "json_schema", "json_schema": {name, schema, strict}}`.
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": …}`.
    JsonObject,
    /// No `response_format`; the plain form's messages.
    Plain,
}

impl WireFormat {
    /// The name in logs (the `structured_output` value that pins it).
    pub(super) fn as_str(self) -> &'static str {
        match self {
            WireFormat::JsonSchema => "json_schema",
            WireFormat::JsonObject => "json_object",
            WireFormat::Plain => "plain text",
        }
    }

    fn rung(self) -> u8 {
        match self {
            WireFormat::JsonSchema => 0,
            WireFormat::JsonObject => 1,
            WireFormat::Plain => 2,
        }
    }

    fn at(rung: u8) -> WireFormat {
        match rung {
            0 => WireFormat::JsonSchema,
            1 => WireFormat::JsonObject,
            _ => WireFormat::Plain,
        }
    }
}

/// The client's structured-output mode and, with `auto`, the rung it has reached. Shared by every
/// clone of the client.
#[derive(Debug)]
pub(super) struct Ladder {
    mode: StructuredOutput,
    /// With `auto`: 0 `json_schema`, 1 `json_object`, 2 plain text. Only ever rises.
    rung: AtomicU8,
}

impl Ladder {
    pub(super) fn new(mode: StructuredOutput) -> Self {
        Ladder {
            mode,
            rung: AtomicU8::new(0),
        }
    }

    /// The format of a request's first attempt.
    pub(super) fn format(&self, request: &ChatRequest) -> WireFormat {
        if request.structured.is_none() {
            return WireFormat::Plain;
        }
        match self.mode {
            StructuredOutput::JsonSchema => WireFormat::JsonSchema,
            StructuredOutput::JsonObject => WireFormat::JsonObject,
            StructuredOutput::Off => WireFormat::Plain,
            StructuredOutput::Auto => WireFormat::at(self.rung.load(Ordering::SeqCst)),
        }
    }

    /// The server rejected `rejected`: the format to send the request in now, or `None` when
    /// the mode is pinned (or the request was already plain). The first request of the client
    /// to reach a rung logs it; later requests start there.
    pub(super) fn step_down(&self, rejected: WireFormat, why: &str) -> Option<WireFormat> {
        if self.mode != StructuredOutput::Auto || rejected == WireFormat::Plain {
            return None;
        }
        let next = rejected.rung() + 1;
        let before = self.rung.fetch_max(next, Ordering::SeqCst);
        if before < next {
            tracing::warn!(
                provider = "openai",
                rejected = rejected.as_str(),
                next = WireFormat::at(next).as_str(),
                error = %why,
                "the LLM server rejected structured output; this client now asks for {}",
                WireFormat::at(next).as_str()
            );
        }
        Some(WireFormat::at(before.max(next)))
    }
}

/// True when an error body is about the request's `response_format`: it names it, the JSON
/// schema, or the grammar a server compiles the schema into.
pub(super) fn mentions_response_format(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    ["response_format", "json_schema", "json schema", "grammar"]
        .iter()
        .any(|needle| lower.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ChatMessage;

    fn structured() -> ChatRequest {
        ChatRequest::new("m", vec![ChatMessage::user("plain")]).with_structured(
            "s",
            serde_json::json!({"type": "object"}),
            vec![ChatMessage::user("json")],
        )
    }

    #[test]
    fn auto_steps_down_once_per_rung_and_remembers() {
        let ladder = Ladder::new(StructuredOutput::Auto);
        let plain = ChatRequest::new("m", vec![]);
        assert_eq!(ladder.format(&plain), WireFormat::Plain);
        assert_eq!(ladder.format(&structured()), WireFormat::JsonSchema);
        assert_eq!(
            ladder.step_down(WireFormat::JsonSchema, "x"),
            Some(WireFormat::JsonObject)
        );
        assert_eq!(ladder.format(&structured()), WireFormat::JsonObject);
        // A request that was still in flight with json_schema joins the rung reached since.
        assert_eq!(
            ladder.step_down(WireFormat::JsonSchema, "x"),
            Some(WireFormat::JsonObject)
        );
        assert_eq!(
            ladder.step_down(WireFormat::JsonObject, "x"),
            Some(WireFormat::Plain)
        );
        assert_eq!(ladder.format(&structured()), WireFormat::Plain);
        assert_eq!(ladder.step_down(WireFormat::Plain, "x"), None);
    }

    #[test]
    fn pinned_modes_never_step_down() {
        for (mode, format) in [
            (StructuredOutput::JsonSchema, WireFormat::JsonSchema),
            (StructuredOutput::JsonObject, WireFormat::JsonObject),
            (StructuredOutput::Off, WireFormat::Plain),
        ] {
            let ladder = Ladder::new(mode);
            assert_eq!(ladder.format(&structured()), format);
            assert_eq!(ladder.step_down(format, "x"), None);
        }
    }

    #[test]
    fn recognizes_rejections_of_response_format() {
        // llama-cpp-python 0.3.36, asked with json_schema (HTTP 500).
        let llama_cpp_python = r#"{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}","type":"internal_server_error"}}"#;
        assert!(mentions_response_format(llama_cpp_python));
        assert!(mentions_response_format(
            "Invalid schema for response_format 'summary'"
        ));
        assert!(mentions_response_format("failed to parse grammar"));
        assert!(!mentions_response_format(
            "This model's maximum context length is 4096 tokens"
        ));
    }
}
