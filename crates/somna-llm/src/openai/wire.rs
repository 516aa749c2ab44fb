//! Somna's request and response types to and from async-openai's: participant names made
//! OpenAI-safe, tools as functions, `max_tokens` (not `max_completion_tokens`), and a response
//! without text or tool calls as [`LlmError::EmptyResponse`].

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
use somna_core::config::ToolSpec;
use somna_core::{Role, ToolCall};

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

/// The wire request. `max_tokens` (not `max_completion_tokens`) because local servers such as
/// llama.cpp's only know the older field.
pub(super) fn to_wire(request: &ChatRequest) -> Result<CreateChatCompletionRequest> {
    let tools = request
        .tools
        .iter()
        .map(to_wire_tool)
        .collect::<Result<Vec<_>>>()?;
    #[allow(deprecated)]
    let wire = CreateChatCompletionRequest {
        model: request.model.clone(),
        messages: request.messages.iter().map(to_wire_message).collect(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        tools: (!tools.is_empty()).then_some(tools),
        ..Default::default()
    };
    Ok(wire)
}

pub(super) fn from_wire(
    response: CreateChatCompletionResponse,
    latency: Duration,
    attempts: u32,
) -> Result<ChatResponse> {
    let usage = response.usage.as_ref().map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let json = serde_json::to_value(to_wire(&request).unwrap()).unwrap();
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
        match to_wire(&bad) {
            Err(LlmError::Config { key, .. }) => assert_eq!(key, "tools.t.parameters"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
