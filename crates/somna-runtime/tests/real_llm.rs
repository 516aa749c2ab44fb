//! Opt-in (`SOMNA_REAL_LLM=1`, see docs/llm.md): sleep compactions of windows of the 200-turn
//! fixture against a real OpenAI-compatible server (`scripts/local-llm.sh` starts SmolLM2-135M on
//! llama-cpp-python), with structured output off and on. Prints, per mode, the share of
//! compactions that committed an LLM summary (a sleep compaction has no fallback: anything else
//! is a failed compaction) and the seconds per summary request. Asserts nothing about the model's
//! quality: it measures. Never needed by CI.
//!
//! `SOMNA_REAL_LLM_URL` (default `http://127.0.0.1:8089/v1`), `SOMNA_REAL_LLM_MODEL` (default
//! `smollm2`), `SOMNA_REAL_LLM_RUNS` (compactions per mode, default 6).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use somna_core::config::{LlmConfig, Provider, StructuredOutput};
use somna_core::record::{CompactionMethod, Trigger};
use somna_core::{Role, Timestamp};
use somna_llm::{ChatRequest, ChatResponse, LlmClient, Purpose, build_client};
use somna_runtime::compactor::{CompactRequest, Compactor};
use somna_runtime::protocol::CompactionOutcome;
use somna_store::Store;
use somna_text::extractive::{Section, StructuredSummary};

use crate::support::*;

/// Messages in one compacted history.
const WINDOW: usize = 40;

/// Records the latency of every summary request and the structured fallbacks.
#[derive(Debug)]
struct Timed {
    inner: Arc<dyn LlmClient>,
    summaries: Mutex<Vec<Duration>>,
    fallbacks: Mutex<u32>,
    /// The raw text of the last summary answer (shown when a compaction fails).
    last_answer: Mutex<String>,
}

impl LlmClient for Timed {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, somna_llm::Result<ChatResponse>> {
        Box::pin(async move {
            let purpose = request.purpose;
            let started = Instant::now();
            let result = self.inner.chat(request).await;
            if purpose == Purpose::Summarize {
                self.summaries.lock().unwrap().push(started.elapsed());
            }
            if let Ok(r) = &result {
                *self.fallbacks.lock().unwrap() += r.structured_fallbacks;
                if purpose == Purpose::Summarize {
                    *self.last_answer.lock().unwrap() = r.text.clone();
                }
            }
            result
        })
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }
}

#[tokio::test]
async fn real_sleep_compactions_structured_vs_plain() {
    let Some((base_url, model)) = somna_testkit::real_llm() else {
        return;
    };
    let runs: usize = std::env::var("SOMNA_REAL_LLM_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6);
    let transcript = somna_testkit::transcript_200().unwrap();
    // Windows that start at a user turn, spread over the fixture.
    let starts: Vec<usize> = (0..transcript.len() - WINDOW)
        .filter(|i| transcript[*i].role == Role::User)
        .collect();
    let starts: Vec<usize> = (0..runs)
        .map(|r| starts[r * (starts.len() - 1) / runs.max(2).saturating_sub(1).max(1)])
        .collect();

    println!(
        "| structured_output | compactions | LLM summary committed | notes / non-empty sections per committed summary | s per summary request (mean) | structured fallbacks | reasons of the failures |"
    );
    println!("|---|---|---|---|---|---|---|");
    for mode in [StructuredOutput::Off, StructuredOutput::Auto] {
        let llm = build_client(
            &LlmConfig {
                provider: Provider::Openai,
                model: model.clone(),
                base_url: base_url.clone(),
                timeout: Duration::from_secs(600),
                max_retries: 0,
                max_concurrent: 1,
                structured_output: mode,
                ..LlmConfig::default()
            },
            &|_| None,
        )
        .unwrap();
        let timed = Arc::new(Timed {
            inner: llm,
            summaries: Mutex::new(Vec::new()),
            fallbacks: Mutex::new(0),
            last_answer: Mutex::new(String::new()),
        });
        let mut committed = 0;
        // Over the committed summaries: notes, and sections with at least one note.
        let (mut notes, mut sections) = (0usize, 0usize);
        let mut reasons = Vec::new();
        for (run, start) in starts.iter().enumerate() {
            let store = Store::temporary().unwrap();
            let agent = id("wren");
            let now = Timestamp(1_800_000_000_000);
            store.create_agent(&agent, now).unwrap();
            let counter = counter();
            for m in &transcript[*start..*start + WINDOW] {
                let mut m = m.clone();
                m.tokens = counter.count_message(&m);
                store.append(&agent, m, now).unwrap();
            }
            let total = store.usage_tokens(&agent).unwrap();
            let mut cfg = agent_config("wren", (total as f64 / 0.75).ceil() as u32);
            cfg.model = model.clone();
            cfg.compaction.compact_model = model.clone();
            let engine = Compactor::new(store.clone(), timed.clone());
            let started = Instant::now();
            let outcome = engine
                .compact(CompactRequest {
                    agent: &agent,
                    config: &cfg,
                    trigger: Trigger::Sleep,
                    fixed_tokens: 0,
                    now,
                })
                .await
                .unwrap();
            let took = started.elapsed();
            let verdict = match &outcome {
                CompactionOutcome::Done(r) if r.method == CompactionMethod::Llm => {
                    committed += 1;
                    let summary = &store.history(&agent).unwrap()[0].content;
                    let parsed = StructuredSummary::parse(summary);
                    for section in Section::ALL {
                        notes += parsed.items(section).len();
                        sections += usize::from(!parsed.items(section).is_empty());
                    }
                    format!(
                        "committed ({} → {} tokens)\n{summary}",
                        r.tokens_before, r.tokens_after
                    )
                }
                CompactionOutcome::Failed { reason, .. } => {
                    reasons.push(reason.clone());
                    let answer: String = timed
                        .last_answer
                        .lock()
                        .unwrap()
                        .chars()
                        .take(500)
                        .collect();
                    format!("failed: {reason}\nanswer: {answer}")
                }
                other => {
                    reasons.push(format!("{other:?}"));
                    format!("{other:?}")
                }
            };
            eprintln!(
                "--- {} run {run} (messages {start}..{}), {:.1} s: {verdict}",
                mode.as_str(),
                start + WINDOW,
                took.as_secs_f64()
            );
        }
        let summaries = timed.summaries.lock().unwrap().clone();
        let mean = summaries.iter().map(Duration::as_secs_f64).sum::<f64>()
            / summaries.len().max(1) as f64;
        let mut distinct: Vec<String> = reasons
            .iter()
            .map(|r| r.split(':').next().unwrap_or(r).to_string())
            .collect();
        distinct.sort();
        distinct.dedup();
        let per = |n: usize| n as f64 / committed.max(1) as f64;
        println!(
            "| {} | {} | {} ({:.0}%) | {:.1} / {:.1} | {:.1} ({} requests) | {} | {} |",
            mode.as_str(),
            starts.len(),
            committed,
            100.0 * committed as f64 / starts.len() as f64,
            per(notes),
            per(sections),
            mean,
            summaries.len(),
            timed.fallbacks.lock().unwrap(),
            distinct.join("; ")
        );
    }
}
