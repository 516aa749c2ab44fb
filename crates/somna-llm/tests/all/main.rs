//! Integration tests of somna-llm, one binary: the OpenAI client over real HTTP against the stub server,
//! structured output, cache hints and cached tokens on the wire, the builtin provider, grounding,
//! the prompts, and opt-in real-model tests (SOMNA_REAL_LLM=1). The extractive summarizer's
//! acceptance test and the transcript's tests are somna-text's (`crates/somna-text/tests/all/`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod borrowed_words;
mod builtin;
mod embed;
mod grounding;
mod openai;
mod prompts;
mod real_llm;
mod wire_extras;
