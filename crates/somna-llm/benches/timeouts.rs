//! How closely `OpenAiClient` keeps its waits, against the stub server over real HTTP: the request
//! timeout (on a hung server and on a body that never ends) and the `Retry-After` wait (honoured,
//! and capped). Prints a table; the tests assert behaviour only, these are the timings.
//!
//! `cargo bench -p somna-llm --bench timeouts`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use somna_core::config::{CacheHint, StructuredOutput};
use somna_llm::{ChatMessage, ChatRequest, OpenAiClient, OpenAiSettings, RetryPolicy};
use somna_testkit::{Reply, StubLlmServer};

/// Each case runs this many times; the table shows the worst run.
const RUNS: usize = 3;

fn settings(
    server: &StubLlmServer,
    timeout: Duration,
    max_retry_after: Duration,
) -> OpenAiSettings {
    OpenAiSettings {
        base_url: server.base_url(),
        timeout,
        connect_timeout: Duration::from_secs(1),
        retry: RetryPolicy {
            max_retries: 1,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
            max_retry_after,
            jitter: 0.0,
            retry_timeouts: false,
        },
        max_concurrent: 4,
        structured_output: StructuredOutput::Auto,
        cache_hint: CacheHint::Off,
        cache_slots: 0,
    }
}

fn request() -> ChatRequest {
    ChatRequest::new("tiny-model", vec![ChatMessage::user("Good morning!")]).with_max_tokens(16)
}

/// The worst elapsed time of `RUNS` calls, each against a fresh script of `replies`.
async fn worst(replies: &[Reply], timeout: Duration, max_retry_after: Duration) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..RUNS {
        let server = StubLlmServer::start();
        server.push_all(replies.iter().cloned());
        let client = OpenAiClient::new(settings(&server, timeout, max_retry_after), None).unwrap();
        let started = Instant::now();
        let _ = client.complete(request()).await;
        worst = worst.max(started.elapsed());
    }
    worst
}

/// A 429 asking to retry after `secs` seconds, then a 200.
fn retry_after_then_ok(secs: u64) -> Vec<Reply> {
    vec![
        Reply::RateLimited {
            retry_after_secs: secs,
        },
        Reply::text("ok"),
    ]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let minute = Duration::from_secs(60);
    let cases: Vec<(&str, Vec<Reply>, Duration, Duration)> = vec![
        (
            "timeout 300 ms, hung server",
            vec![Reply::Hang],
            Duration::from_millis(300),
            minute,
        ),
        (
            "timeout 2 s, hung server",
            vec![Reply::Hang],
            Duration::from_secs(2),
            minute,
        ),
        (
            "timeout 800 ms, body never ends",
            vec![Reply::HangBody],
            Duration::from_millis(800),
            minute,
        ),
        (
            "Retry-After 1 s, then 200",
            retry_after_then_ok(1),
            Duration::from_secs(1),
            minute,
        ),
        (
            "Retry-After 3600 s capped at 200 ms",
            retry_after_then_ok(3600),
            Duration::from_millis(200),
            Duration::from_millis(200),
        ),
    ];
    println!("| case | expected wait | worst of {RUNS} | over |");
    println!("|---|---|---|---|");
    for (name, replies, expected, max_retry_after) in cases {
        // For the Retry-After cases the per-attempt timeout must not be what ends the call.
        let timeout = if name.starts_with("Retry") {
            Duration::from_secs(5)
        } else {
            expected
        };
        let took = runtime.block_on(worst(&replies, timeout, max_retry_after));
        let over = took.as_secs_f64() / expected.as_secs_f64() - 1.0;
        println!(
            "| {name} | {expected:?} | {took:.3?} | {:+.1}% |",
            over * 100.0
        );
    }
}
