//! [`MeteredLlm`]: an LLM client decorator that records every call in [`Metrics`].

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use somna_llm::{ChatRequest, ChatResponse, LlmClient};

use super::Metrics;

/// An [`LlmClient`] decorator that records every call's latency and errors in [`Metrics`].
#[derive(Debug)]
pub struct MeteredLlm {
    inner: Arc<dyn LlmClient>,
    metrics: Metrics,
}

impl MeteredLlm {
    /// Wraps `llm` so that its calls show up in `metrics`. Install it before `Runtime::start`:
    /// `Runtime::start(config, store, MeteredLlm::wrap(llm, &options.metrics), runtime_options)`.
    pub fn wrap(llm: Arc<dyn LlmClient>, metrics: &Metrics) -> Arc<dyn LlmClient> {
        Arc::new(MeteredLlm {
            inner: llm,
            metrics: metrics.clone(),
        })
    }
}

impl LlmClient for MeteredLlm {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, somna_llm::Result<ChatResponse>> {
        let purpose = request.purpose;
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.chat(request).await;
            self.metrics
                .observe_llm(purpose, started.elapsed(), result.as_ref().err());
            if let Ok(response) = &result {
                self.metrics.observe_llm_response(purpose, response);
            }
            result
        })
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }
}
