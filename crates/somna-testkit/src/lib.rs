//! somna-testkit: test support shared by every Somna crate. A dev-dependency of the crates' tests and
//! of the root examples; never a runtime dependency.
//!
//! - [`stub`]: [`StubLlmServer`], a real OpenAI-compatible HTTP server on loopback with scripted replies and
//!   faults on demand ([`Reply`]), recording every request ([`RecordedRequest`]).
//! - [`corpus`]: the fixed multilingual text corpus of somna-core's token-counting tests and
//!   `tokens` benchmark.
//! - [`fixtures`]: loaders for the shared fixtures in `tests/fixtures/` (the 200-turn transcript and its
//!   hand-written expectations), and [`KEEPER`], the gatekeeper agent of somna-server's demo and
//!   tests.
//! - [`compaction`]: [`plain_compaction`], the summary, synthesis entry and record of a compaction
//!   built by hand (for benchmarks that need a compacted history without the engine).
//! - [`env`]: the knobs tests and benches read from the environment ([`env_or`], the Postgres
//!   database of the benchmarks, the real model of the opt-in tests).
//! - [`wait`]: [`poll_until`], the one polling loop of tests that wait for something asynchronous.
//! - [`skip`]: [`skip()`], the one way a test that cannot run here says so (and is counted).

pub mod compaction;
pub mod corpus;
pub mod env;
pub mod fixtures;
pub mod latency;
pub mod skip;
pub mod stub;
pub mod wait;

pub use compaction::{PlainCompaction, plain_compaction};
pub use env::{bench_pg_url, env_or, pg_url_or_skip, real_llm};
pub use fixtures::{KEEPER, TranscriptExpect, load_jsonl, transcript_200, transcript_200_expect};
pub use latency::percentile;
pub use skip::{SKIP_LOG_ENV, skip};
pub use stub::{
    CacheReport, Embeddings, INVENTED, RecordedRequest, Reply, ResponseFormats, StubLlmServer,
    UsageReport, hashed_embedding, inventing_reply,
};
pub use wait::poll_until;
