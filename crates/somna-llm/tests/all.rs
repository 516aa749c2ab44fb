//! Integration tests of somna-llm, one binary: the OpenAI client over real HTTP against the stub server,
//! structured output, cache hints and cached tokens on the wire, the builtin provider, the summarizer acceptance test on the 200-turn fixture, and opt-in real-model
//! tests (SOMNA_REAL_LLM=1).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "all/builtin.rs"]
mod builtin;
#[path = "all/embed.rs"]
mod embed;
#[path = "all/grounding.rs"]
mod grounding;
#[path = "all/openai.rs"]
mod openai;
#[path = "all/prompts.rs"]
mod prompts;
#[path = "all/real_llm.rs"]
mod real_llm;
#[path = "all/summarizer.rs"]
mod summarizer;
#[path = "all/transcript.rs"]
mod transcript;
#[path = "all/wire_extras.rs"]
mod wire_extras;
