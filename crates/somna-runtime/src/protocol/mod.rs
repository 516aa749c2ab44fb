//! Every type that crosses the runtime's boundary, in one home: what callers send an agent, what
//! it answers, what it reports and what the runtime publishes. All of them serialize and
//! deserialize, so the API writes them and the CLI (and tests) read them back as the same types,
//! never as untyped JSON. Nothing here depends on the agent, the actor or the compactor; they
//! depend on this.
//!
//! - `agent.rs`: input ([`Inbound`], [`InboundError`]) and status ([`AgentStatus`], [`AgentState`],
//!   [`PendingTool`], [`CalibrationStatus`], [`ChatUsage`]).
//! - `answers.rs`: what a sleep, a compaction and an undo came to ([`SleepResult`],
//!   [`CompactionOutcome`], [`CompactionReport`], [`UncompactResult`]). A job's outcome becomes
//!   these answers in one place, [`crate::agent::JobOutcome`]'s `into_*` methods.
//! - `event.rs`: what happened ([`Event`], [`Stamped`]).

mod agent;
mod answers;
mod event;

pub use agent::{
    AgentState, AgentStatus, CalibrationStatus, ChatUsage, Inbound, InboundError, PendingTool,
};
pub use answers::{
    CompactionOutcome, CompactionReport, SleepResult, UncompactError, UncompactResult,
};
pub use event::{Event, Stamped};
