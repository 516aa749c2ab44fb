//! Somna: a runtime that hosts many long-lived LLM agents and keeps each agent's prompt inside the
//! model's context window by compaction.
//!
//! The names a host program needs are at the top level (see `examples/embed.rs`):
//!
//! - configuration: [`ResolvedConfig`] (runtime.toml, layered and validated) and [`AgentConfig`]
//!   (one agent's resolved settings);
//! - running: [`Runtime`] (start, send [`Inbound`] input, compact, sleep, shut down), its
//!   [`RuntimeOptions`], [`RuntimeError`], and the live [`Event`] stream ([`Stamped`] with its time);
//! - retrieval by meaning: [`Semantic`] (`Semantic::from_config(&config.embedder)` gives the
//!   embedder `[embedder]` asks for, the builtin one by default; pass it as
//!   `RuntimeOptions::semantic`, which is `None`, BM25 alone, unless a host sets it);
//! - storage: [`Store`] (sled: history, archive, journal, memory, the event log) and [`StoreOptions`];
//! - the model: [`LlmClient`], [`build_client`] / [`build_client_from_env`], the offline
//!   [`BuiltinClient`];
//! - data: [`AgentId`], [`Message`], [`Role`], [`ToolCall`], [`JournalQuery`], [`SourceType`],
//!   [`Timestamp`], [`EventRecord`] (one entry of the durable log).
//!
//! The crates stay reachable as modules for everything else: [`core`] (`somna-core`: domain types,
//! configuration, token counting, compaction planning; no IO), [`store`] (`somna-store`), [`text`]
//! (`somna-text`: transcripts, citation markers, the extractive summarizer, fact heuristics; pure),
//! [`llm`] (`somna-llm`) and [`runtime`] (`somna-runtime`: the compaction engine, agents as actix
//! actors, the scheduler). `docs/architecture.md` has the bird's-eye view and the code map.
//!
//! ```no_run
//! use somna::{Inbound, ResolvedConfig, Runtime, RuntimeOptions, Store};
//!
//! # async fn host() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ResolvedConfig::load("[llm]\nprovider = \"builtin\"\n", "inline.toml", &[])?;
//! let store = Store::temporary()?;
//! let llm = somna::build_client_from_env(&config.llm)?;
//! let options = RuntimeOptions {
//!     semantic: somna::Semantic::from_config(&config.embedder)?,
//!     ..RuntimeOptions::default()
//! };
//! let runtime = Runtime::start(config, store, llm, options)?;
//! # let _ = (runtime, std::mem::size_of::<Inbound>());
//! # Ok(())
//! # }
//! ```

pub use somna_core as core;
pub use somna_llm as llm;
pub use somna_runtime as runtime;
pub use somna_store as store;
pub use somna_text as text;

pub use somna_core::config::{AgentConfig, ResolvedConfig};
pub use somna_core::{
    AgentId, EventRecord, JournalQuery, Message, Role, SourceType, Timestamp, ToolCall,
};
pub use somna_llm::{BuiltinClient, LlmClient, LlmError, build_client, build_client_from_env};
pub use somna_runtime::{
    AgentStatus, CompactionOutcome, Event, Inbound, Runtime, RuntimeError, RuntimeOptions,
    Semantic, Stamped,
};
pub use somna_store::{Store, StoreError, StoreOptions};
