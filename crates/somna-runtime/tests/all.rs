//! Integration tests of somna-runtime: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod agent;
mod builtins;
mod compactor;
mod gauges;
mod limits;
mod main_job;
mod ops;
mod prompt;
mod properties;
mod real_grounding;
mod real_llm;
mod recall;
mod runtime;
mod sleep;
mod support;
mod untrusted_llm;
mod usage;
