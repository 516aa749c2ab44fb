//! Integration tests of somna-server: one binary, a real runtime behind a real HTTP server on
//! loopback, driven by a real HTTP client (reqwest).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod agents;
mod dashboard;
mod edges;
mod fuzz;
mod llm_usage;
mod metrics;
mod python;
mod reads;
mod scopes;
mod security;
mod stream;
mod support;
