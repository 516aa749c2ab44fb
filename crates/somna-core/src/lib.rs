//! somna-core: Somna's domain types and pure logic. No IO, no async, no sled, actix or async-openai:
//! everything here is a plain function or type, unit-testable on its own.
//!
//! - [`message`]: `Message`, `Role`, `ToolCall`, `MessageKind` (normal, summary, masked).
//! - [`journal`]: `JournalEntry`, `SourceType`, `JournalQuery`, memory `Fact`.
//! - [`record`]: `AgentRecord` (per-agent counters), `CompactionRecord`, `EventRecord` and
//!   `LoggedEvent` (the durable log).
//! - [`config`]: runtime.toml: raw structs, layered overrides, resolved per-agent config, validation.
//! - [`tokens`]: `TokenCounter` (tiktoken for known models, a calibrated heuristic otherwise) and
//!   `Calibration`.
//! - [`usage`]: the usage formula, written once (persona + working context + history, calibrated,
//!   over `max_context_tokens`); every caller uses `Usage::new`.
//! - [`compaction`]: `plan` (head/body/tail, tool groups, chunks), masking, the summary message text.
//! - [`interchange`]: OpenAI-format JSONL (import/export).
//! - [`names`]: [`str_enum!`], enums with a name per variant (`as_str`, `ALL`, `Display`, `FromStr`).
//! - [`retrieval`]: BM25 keyword scoring for the working context and `recall`.
//! - [`id`], [`time`]: `AgentId` and `Timestamp` (core never reads the clock; callers pass `now`).

pub mod compaction;
pub mod config;
pub mod id;
pub mod interchange;
pub mod journal;
pub mod message;
pub mod names;
pub mod record;
pub mod retrieval;
pub mod time;
pub mod tokens;
pub mod usage;

pub use id::AgentId;
pub use journal::{EntryId, Fact, FactId, JournalEntry, JournalQuery, SourceType};
pub use message::{Message, MessageKind, Role, Seq, SummaryMeta, ToolCall};
pub use record::{
    AgentRecord, CompactionMethod, CompactionRecord, Cover, EventRecord, GroundingCounts,
    LoggedEvent, StoredEvent, Trigger, Writer,
};
pub use time::Timestamp;
