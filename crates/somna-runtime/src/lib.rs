//! somna-runtime: the part of Somna that runs.
//!
//! - [`compactor`]: the compaction engine (`Compactor`): plan, extract, summarize through the
//!   `LlmClient`, validate, commit through the store; emergency fallbacks, the stall guard, undo.
//! - [`agent`]: the `Agent` component: input, the tick's emergency check and step, sleep
//!   (consolidation, reflection, compaction), tools, run-time configuration. Plain struct. Also
//!   the actor's plain job queue (one job at a time, requests queued behind it, the drain) and
//!   tick cadence.
//! - [`protocol`]: every type that crosses the runtime's boundary (input, status, the answers to
//!   sleep, compact and undo, events), Serialize + Deserialize, depending on nothing else here.
//! - [`actor`]: `AgentActor`, the thin actix shell around an `Agent` (crate-internal, like its
//!   messages).
//! - `scheduler` (crate-internal): the `Scheduler` actor and its plain `SleepPlan` (period,
//!   jitter, cap).
//! - [`runtime`]: `Runtime` (load, spread over Arbiters, route, shut down) and `run`.
//! - [`ops`]: agent operations decided once (create, retire, load, uncompact), called by
//!   `Runtime` and by `Offline`, the same operations on a database no runtime hosts.
//! - [`import`]: OpenAI-format JSONL import, compacting at the thresholds as it goes.
//! - [`eval`]: recall measurement (`somna eval recall`): import a dataset's conversations, check
//!   which answer turns each question's prompt holds, against two frozen baselines.
//! - [`scenario`]: scripted timelines of input (the village demo).
//! - [`prompt`]: building the LLM prompt: persona, working context, summary, history.
//! - [`semantic`]: embedding the archive while agents sleep and the input once per turn, for
//!   retrieval that fuses meaning with keywords (`Semantic`, `Semantic::from_config`).
//! - [`tools`]: built-in tools `journal_add` and `recall`; host tool specs.
//! - [`events`]: the `EventBus` (tracing + broadcast) that carries `protocol::Event`s.
//! - [`clock`]: simulated (accelerated) time. [`stats`]: tick lateness.
//! - [`gauges`]: agents by state and by context usage, counted by the agents as they change (a
//!   read asks none of them).

pub mod actor;
pub mod agent;
pub mod clock;
pub mod compactor;
pub mod eval;
pub mod events;
pub mod gauges;
pub mod import;
pub mod ops;
pub mod prompt;
pub mod protocol;
pub mod runtime;
pub mod scenario;
pub(crate) mod scheduler;
pub mod semantic;
pub mod stats;
pub(crate) mod ticker;
pub mod tools;
pub(crate) mod work;

/// The error and its sources joined by ": ", as anyhow prints `{:#}` (for tests that check a cause
/// is named once).
#[cfg(test)]
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

/// The store's error for the unknown agent `name` (for tests of how its wrappers print it).
#[cfg(test)]
pub(crate) fn unknown_agent(name: &str) -> somna_store::StoreError {
    somna_store::StoreError::UnknownAgent(somna_core::AgentId::new(name).unwrap())
}

pub use agent::Agent;
pub use clock::Clock;
pub use compactor::{CompactError, CompactRequest, Compactor};
pub use events::EventBus;
pub use ops::{Offline, OpsError};
pub use protocol::{
    AgentState, AgentStatus, CalibrationStatus, ChatUsage, CompactionOutcome, CompactionReport,
    Event, Inbound, SleepResult, Stamped, UncompactError, UncompactResult,
};
pub use runtime::{Runtime, RuntimeError, RuntimeOptions, run};
pub use semantic::Semantic;
