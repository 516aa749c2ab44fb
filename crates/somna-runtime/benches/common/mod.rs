//! What the runtime's benches share: an LLM that costs nothing and the process's CPU clock.

use std::time::Duration;

use futures::future::BoxFuture;
use somna_llm::{ChatRequest, ChatResponse, LlmClient, LlmError};

/// An LLM that costs nothing: a fixed line at once, so a turn's cost is the runtime's alone.
#[derive(Debug)]
pub struct InstantLlm;

impl LlmClient for InstantLlm {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        drop(request);
        Box::pin(async {
            Ok(ChatResponse {
                text: "Aye, I remember that well enough.".into(),
                tool_calls: Vec::new(),
                usage: None,
                latency: Duration::ZERO,
                attempts: 1,
                model: "instant".into(),
                structured_fallbacks: 0,
            })
        })
    }

    fn provider(&self) -> &str {
        "instant"
    }
}

/// CPU time (user + system) of the whole process, every thread, to the nanosecond.
pub fn process_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
