//! Somna: a runtime that hosts many long-lived LLM agents and keeps each agent's prompt inside the
//! model's context window by compaction.
//!
//! This facade re-exports the workspace crates:
//! - [`core`] (`somna-core`): domain types, configuration, token counting, compaction planning. No IO.
//! - [`store`] (`somna-store`): the sled database: history, archive, journal, memory, events.
//! - [`llm`] (`somna-llm`): the `LlmClient` boundary, the OpenAI-compatible client, the builtin provider.
//! - [`runtime`] (`somna-runtime`): the compaction engine, agents as actix actors, the scheduler.
//!
//! `docs/architecture.md` has the bird's-eye view and the code map.

pub use somna_core as core;
pub use somna_llm as llm;
pub use somna_runtime as runtime;
pub use somna_store as store;
