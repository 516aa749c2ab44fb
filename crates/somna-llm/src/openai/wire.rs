//! Somna's request and response types to and from async-openai's: participant names made
//! OpenAI-safe, tools as functions, `max_tokens` (not `max_completion_tokens`), and a response
//! without text or tool calls as [`LlmError::EmptyResponse`]; the structured form and the
//! per-agent cache hint; `cached_tokens` read back from `usage.prompt_tokens_details`.

use std::time::Duration;

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionCall, FunctionObject,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use somna_core::config::{CacheHint, ToolSpec};
use somna_core::{Role, ToolCall};
use somna_text::stable_hash;

use super::OpenAiSettings;
use super::structured::WireFormat;
use crate::error::{LlmError, Result};
use crate::types::{ChatMessage, ChatRequest, ChatResponse, Usage};

/// OpenAI allows names of `[A-Za-z0-9_-]{1,64}`; anything else becomes `_`.
fn wire_name(name: &Option<String>) -> Option<String> {
    let name = name.as_deref()?.trim();
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    (!cleaned.is_empty()).then_some(cleaned)
}

fn to_wire_message(m: &ChatMessage) -> ChatCompletionRequestMessage {
    match m.role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(m.content.clone()),
            name: wire_name(&m.name),
        }),
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(m.content.clone()),
            name: wire_name(&m.name),
        }),
        Role::Assistant => {
            let tool_calls: Vec<ChatCompletionMessageToolCalls> = m
                .tool_calls
                .iter()
                .map(|c| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: c.id.clone(),
                        function: FunctionCall {
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        },
                    })
                })
                .collect();
            #[allow(deprecated)]
            let message = ChatCompletionRequestAssistantMessage {
                content: (!m.content.is_empty() || tool_calls.is_empty())
                    .then(|| ChatCompletionRequestAssistantMessageContent::Text(m.content.clone())),
                name: wire_name(&m.name),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..Default::default()
            };
            ChatCompletionRequestMessage::Assistant(message)
        }
        Role::Tool => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(m.content.clone()),
            tool_call_id: m.tool_call_id.clone().unwrap_or_default(),
        }),
    }
}

fn to_wire_tool(tool: &ToolSpec) -> Result<ChatCompletionTools> {
    let parameters: serde_json::Value = serde_json::from_str(&tool.parameters).map_err(|e| {
        LlmError::config(
            format!("tools.{}.parameters", tool.name),
            format!("is not valid JSON: {e}"),
        )
    })?;
    Ok(ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: tool.name.clone(),
            description: (!tool.description.is_empty()).then(|| tool.description.clone()),
            parameters: Some(parameters),
            strict: None,
        },
    }))
}

/// A request body: async-openai's typed request as JSON (`fields`), plus the `response_format`
/// written with its schema's properties in their intended order (see [`ordered_json`]).
#[derive(Debug, Clone, Serialize)]
pub(super) struct WireBody {
    #[serde(flatten)]
    pub(super) fields: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<Box<RawValue>>,
}

/// The wire request, sent through async-openai's `byot` path so that fields its typed request
/// lacks can ride along. `max_tokens` (not `max_completion_tokens`) because local servers such as
/// llama.cpp's only know the older field. `format` picks the messages and the `response_format`;
/// the request's cache key becomes the hint `settings.cache_hint` names.
pub(super) fn to_wire(
    request: &ChatRequest,
    format: WireFormat,
    settings: &OpenAiSettings,
) -> Result<WireBody> {
    let tools = request
        .tools
        .iter()
        .map(to_wire_tool)
        .collect::<Result<Vec<_>>>()?;
    let form = request
        .structured
        .as_ref()
        .filter(|_| format != WireFormat::Plain);
    let messages = request.messages_for(form.is_some());
    let cache_key = request.cache_key.as_deref();
    let prompt_cache_key = cache_key
        .filter(|_| settings.cache_hint == CacheHint::PromptCacheKey)
        .map(prompt_cache_key);
    #[allow(deprecated)]
    let wire = CreateChatCompletionRequest {
        model: request.model.clone(),
        messages: messages.iter().map(to_wire_message).collect(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        tools: (!tools.is_empty()).then_some(tools),
        prompt_cache_key,
        ..Default::default()
    };
    let invalid = |e: serde_json::Error| {
        LlmError::config("request", format!("cannot be written as JSON: {e}"))
    };
    let mut fields = serde_json::to_value(wire).map_err(invalid)?;
    if let Some(key) = cache_key.filter(|_| settings.cache_hint == CacheHint::LlamaCpp) {
        fields["cache_prompt"] = Value::Bool(true);
        if settings.cache_slots > 0 {
            fields["id_slot"] = json!(stable_hash(key) % u64::from(settings.cache_slots));
        }
    }
    // OpenAI's json_schema (what async-openai's ResponseFormat::JsonSchema writes), or the
    // json_object dialect of llama-cpp-python.
    let response_format = form.map(|form| {
        let schema = ordered_json(&form.schema);
        if format == WireFormat::JsonSchema {
            format!(
                r#"{{"type":"json_schema","json_schema":{{"name":{},"schema":{schema},"strict":true}}}}"#,
                Value::String(form.name.clone())
            )
        } else {
            format!(r#"{{"type":"json_object","schema":{schema}}}"#)
        }
    });
    let response_format = response_format
        .map(RawValue::from_string)
        .transpose()
        .map_err(invalid)?;
    Ok(WireBody {
        fields,
        response_format,
    })
}

/// `value` as JSON text, with the `properties` of every schema object in the order of its
/// `required` list (the rest after them, sorted). Servers generate an object's keys in the order
/// its schema lists them (OpenAI says so; llama.cpp's grammar does it), and `serde_json::Value`
/// would sort them: a summary would start with `artifacts`, and an answer cut off by `max_tokens`
/// would lose the topic arc rather than the artifacts.
pub(super) fn ordered_json(value: &Value) -> String {
    let mut out = String::new();
    write_ordered(value, None, &mut out);
    out
}

fn write_ordered(value: &Value, order: Option<&[Value]>, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(item, None, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            if let Some(order) = order {
                let rank = |k: &String| order.iter().position(|o| o.as_str() == Some(k.as_str()));
                keys.sort_by_key(|k| (rank(k).unwrap_or(usize::MAX), (*k).clone()));
            }
            let required = map.get("required").and_then(Value::as_array);
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                let inner = if key == "properties" {
                    required.map(Vec::as_slice)
                } else {
                    None
                };
                write_ordered(&map[key], inner, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// OpenAI's `prompt_cache_key` for an agent's cache key: stable, and without the id itself.
pub(super) fn prompt_cache_key(key: &str) -> String {
    format!("somna-{:016x}", stable_hash(key))
}

pub(super) fn from_wire(
    response: CreateChatCompletionResponse,
    latency: Duration,
    attempts: u32,
) -> Result<ChatResponse> {
    let usage = response.usage.as_ref().map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        cached_tokens: u
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
    });
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(LlmError::EmptyResponse);
    };
    let message = choice.message;
    let tool_calls: Vec<ToolCall> = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(c) => ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            },
            ChatCompletionMessageToolCalls::Custom(c) => ToolCall {
                id: c.id,
                name: c.custom_tool.name,
                arguments: c.custom_tool.input,
            },
        })
        .collect();
    let text = match message.content {
        Some(text) if !text.trim().is_empty() => text,
        _ => message.refusal.unwrap_or_default(),
    };
    if text.trim().is_empty() && tool_calls.is_empty() {
        return Err(LlmError::EmptyResponse);
    }
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        latency,
        attempts,
        model: response.model,
        structured_fallbacks: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use somna_core::config::LlmConfig;

    fn settings(cache_hint: CacheHint, cache_slots: u32) -> OpenAiSettings {
        OpenAiSettings::from_config(&LlmConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            cache_hint,
            cache_slots,
            ..LlmConfig::default()
        })
    }

    fn value(body: WireBody) -> Value {
        serde_json::to_value(body).unwrap()
    }

    fn structured() -> ChatRequest {
        ChatRequest::new("m", vec![ChatMessage::user("write text")]).with_structured(
            "summary",
            json!({"type": "object", "properties": {}}),
            vec![ChatMessage::user("write JSON")],
        )
    }

    #[test]
    fn each_format_sends_its_messages_and_response_format() {
        let off = settings(CacheHint::Off, 0);
        let plain = value(to_wire(&structured(), WireFormat::Plain, &off).unwrap());
        assert_eq!(plain["messages"][0]["content"], "write text");
        assert!(plain.get("response_format").is_none());
        let schema = value(to_wire(&structured(), WireFormat::JsonSchema, &off).unwrap());
        assert_eq!(schema["messages"][0]["content"], "write JSON");
        assert_eq!(schema["response_format"]["type"], "json_schema");
        assert_eq!(schema["response_format"]["json_schema"]["name"], "summary");
        assert_eq!(schema["response_format"]["json_schema"]["strict"], true);
        assert_eq!(
            schema["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        let object = value(to_wire(&structured(), WireFormat::JsonObject, &off).unwrap());
        assert_eq!(object["messages"][0]["content"], "write JSON");
        assert_eq!(
            object["response_format"],
            json!({"type": "json_object", "schema": {"type": "object", "properties": {}}})
        );
        // A request without a structured form is plain whatever the format.
        let bare = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
        let wire = value(to_wire(&bare, WireFormat::JsonSchema, &off).unwrap());
        assert!(wire.get("response_format").is_none());
    }

    #[test]
    fn cache_hints_follow_the_config_and_need_a_key() {
        let keyed = ChatRequest::new("m", vec![ChatMessage::user("hi")]).with_cache_key("wren");
        let wire = |r: &ChatRequest, hint, slots| {
            value(to_wire(r, WireFormat::Plain, &settings(hint, slots)).unwrap())
        };
        let none = wire(&keyed, CacheHint::Off, 0);
        for field in ["prompt_cache_key", "cache_prompt", "id_slot"] {
            assert!(none.get(field).is_none(), "{field}");
        }
        let openai = wire(&keyed, CacheHint::PromptCacheKey, 0);
        assert_eq!(openai["prompt_cache_key"], prompt_cache_key("wren"));
        assert!(
            openai["prompt_cache_key"]
                .as_str()
                .unwrap()
                .starts_with("somna-")
        );
        assert!(
            !openai["prompt_cache_key"]
                .as_str()
                .unwrap()
                .contains("wren")
        );
        assert!(openai.get("cache_prompt").is_none());
        let llama = wire(&keyed, CacheHint::LlamaCpp, 4);
        assert_eq!(llama["cache_prompt"], true);
        let slot = llama["id_slot"].as_u64().unwrap();
        assert!(slot < 4);
        assert_eq!(wire(&keyed, CacheHint::LlamaCpp, 4)["id_slot"], slot);
        assert!(
            wire(&keyed, CacheHint::LlamaCpp, 0)
                .get("id_slot")
                .is_none()
        );
        // No key (a summary request): no hint.
        let unkeyed = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
        assert!(
            wire(&unkeyed, CacheHint::PromptCacheKey, 0)
                .get("prompt_cache_key")
                .is_none()
        );
        assert!(
            wire(&unkeyed, CacheHint::LlamaCpp, 4)
                .get("cache_prompt")
                .is_none()
        );
    }

    #[test]
    fn names_are_made_wire_safe() {
        assert_eq!(
            wire_name(&Some("Mara Fenwick".into())).as_deref(),
            Some("Mara_Fenwick")
        );
        assert_eq!(
            wire_name(&Some("ok_name-1".into())).as_deref(),
            Some("ok_name-1")
        );
        assert_eq!(wire_name(&Some("  ".into())), None);
        assert_eq!(wire_name(&None), None);
        assert_eq!(wire_name(&Some("x".repeat(100))).map(|n| n.len()), Some(64));
    }

    #[test]
    fn wire_request_carries_tools_and_messages() {
        let request = ChatRequest::new(
            "m",
            vec![
                ChatMessage::system("s"),
                ChatMessage::assistant_calls(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "journal_add".into(),
                        arguments: "{}".into(),
                    }],
                ),
                ChatMessage::tool_result("c1", "ok"),
            ],
        )
        .with_max_tokens(7)
        .with_tools(vec![ToolSpec {
            name: "journal_add".into(),
            description: "Write a note".into(),
            parameters: r#"{"type":"object"}"#.into(),
        }]);
        let json =
            value(to_wire(&request, WireFormat::Plain, &settings(CacheHint::Off, 0)).unwrap());
        assert_eq!(json["max_tokens"], 7);
        assert_eq!(json["tools"][0]["type"], "function");
        assert_eq!(json["tools"][0]["function"]["name"], "journal_add");
        assert_eq!(json["messages"][1]["tool_calls"][0]["id"], "c1");
        assert!(json["messages"][1].get("content").is_none());
        assert_eq!(json["messages"][2]["tool_call_id"], "c1");

        let bad = ChatRequest::new("m", vec![]).with_tools(vec![ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: "{".into(),
        }]);
        match to_wire(&bad, WireFormat::Plain, &settings(CacheHint::Off, 0)) {
            Err(LlmError::Config { key, .. }) => assert_eq!(key, "tools.t.parameters"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn schema_properties_go_out_in_the_order_of_required() {
        let schema = json!({
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "string"}, "c": {"type": "string"}},
            "required": ["c", "a", "b"],
        });
        assert_eq!(
            ordered_json(&schema),
            r#"{"properties":{"c":{"type":"string"},"a":{"type":"string"},"b":{"type":"string"}},"required":["c","a","b"],"type":"object"}"#
        );
        let request = ChatRequest::new("m", vec![ChatMessage::user("x")]).with_structured(
            "s",
            schema,
            vec![ChatMessage::user("y")],
        );
        let off = settings(CacheHint::Off, 0);
        let text = serde_json::to_string(&to_wire(&request, WireFormat::JsonSchema, &off).unwrap())
            .unwrap();
        assert!(
            text.contains(r#""properties":{"c":{"type":"string"},"a""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["model"], "m");
    }
}
