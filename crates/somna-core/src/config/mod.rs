//! Configuration: runtime.toml's typed structs, layered overrides and the resolved per-agent config.
//!
//! Layers, lowest first: built-in defaults → `[defaults]` / `[defaults.compaction]` → each
//! `[[agents]]` entry's overrides → run-time changes through the API (persisted in the agent's
//! `AgentRecord.overrides`). CLI/env overrides (`key.path=value`) are merged into the parsed document
//! before any of this, so they can change any key of any layer. The result, [`AgentConfig`], has no
//! `Option` left.
//!
//! - this module: the resolved [`AgentConfig`] and [`MemoryConfig`], and the shared constants.
//! - `compaction`: [`CompactionConfig`], its [`SectionCaps`] and [`Scorer`], and their defaults.
//! - `tools`: [`ToolSpec`], a host-defined tool.
//! - `sections`: the runtime-wide sections: [`LlmConfig`], [`StoreConfig`], [`RuntimeSection`],
//!   [`ClusterSection`], [`EmbedderSection`], and their built-in defaults.
//! - `url`: [`DbUrl`] and the redaction of passwords in URLs.
//! - `file`: [`RuntimeConfig`], the raw file (`deny_unknown_fields` everywhere), [`DefaultsSection`],
//!   [`AgentEntry`], and parsing that reports every unknown key and wrong type at once.
//! - `overrides`: `key.path=value` overrides merged into the document, and [`overrides_from_env`].
//! - `layers`: the override types ([`AgentOverrides`], [`CompactionOverrides`],
//!   [`MemoryOverrides`]), their `merge` (a later layer wins, field by field) and `apply`.
//! - `resolve`: [`ResolvedConfig`] and [`AgentDefaults`]: layering plus validation.
//! - `validate`: the checks, which collect every error rather than stopping at the first.
//! - `source`: the line of each key in the file, so that late errors can name it.
//! - `error`: [`ConfigError`] (file, key, line, why) and [`ConfigErrors`].
//!
//! Nothing here reads a file or the environment: callers pass the text and the file's name.
//! docs/configuration.md describes every key.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::AgentId;

mod compaction;
mod error;
mod file;
mod layers;
mod overrides;
mod resolve;
mod sections;
mod source;
mod tools;
mod url;
mod validate;

pub use compaction::{
    CompactionConfig, MIN_TAIL_MESSAGES, Scorer, SectionCaps, WORKING_FLOOR_TOKENS,
};
pub use error::{ConfigError, ConfigErrors, Result};
pub use file::{AgentEntry, DefaultsSection, RuntimeConfig};
pub use layers::{AgentOverrides, CompactionOverrides, MemoryOverrides};
pub use overrides::{ENV_PREFIX, overrides_from_env};
pub use resolve::{AgentDefaults, ResolvedConfig};
pub use sections::{
    CacheHint, ClusterSection, DEFAULT_HISTORY_CACHE_MB, DEFAULT_STORE_CACHE_MB, EmbedderProvider,
    EmbedderSection, LlmConfig, Provider, RuntimeSection, StoreBackend, StoreConfig,
    StructuredOutput,
};
#[cfg(feature = "openapi")]
pub use tools::ToolParametersSchema;
pub use tools::ToolSpec;
pub use url::{DbUrl, UrlCredentials, redact_url, url_credentials};

/// The persona an agent gets when neither `[defaults]` nor its own entry sets one.
pub const DEFAULT_PERSONA: &str = "You are a helpful assistant. Answer plainly and briefly, say so \
when you do not know something, and keep track of what people tell you.";

/// Names of the tools the runtime itself gives every agent; host-defined tools may not reuse them.
pub const BUILTIN_TOOLS: &[&str] = &["journal_add", "recall"];

/// The smallest `max_context_tokens` (and `summarizer_context_tokens`) accepted.
pub const MIN_CONTEXT_TOKENS: u32 = 256;

/// The OpenAPI schema of a duration in a config (the API's document names it `Duration`): a
/// humantime string, `20ms`, `6h`, `1h 30m`, as `humantime_serde` reads and writes it.
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct DurationSchema;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for DurationSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        const UNIT: &str = "(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|\
minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|\
years|year|yrs|yr|y)";
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A duration: numbers with units, `20ms`, `6h`, `1h 30m` (humantime)",
            ))
            .pattern(Some(format!("^\\s*([0-9]+(\\.[0-9]+)?\\s*{UNIT}\\s*)+$")))
            .examples(["1s", "1h 30m"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for DurationSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
}

/// The resolved memory/sleep settings of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryConfig {
    /// Consolidation considers journal entries at or above this importance (1–10).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10))]
    pub min_importance: u8,
    /// How importance is scored.
    pub importance: Scorer,
    /// Write reflections when the importance accumulated since the last one passes this; 0 turns
    /// reflection off.
    pub reflection_threshold: u32,
    /// At most this many memory facts in the working context.
    pub working_facts: u32,
    /// At most this many archive hits in the working context, each with its neighbouring turns
    /// (within `compaction.working_share` of the window).
    pub working_archive: u32,
}

impl Default for MemoryConfig {
    /// The built-in defaults (see docs/configuration.md).
    fn default() -> Self {
        MemoryConfig {
            min_importance: 3,
            importance: Scorer::Heuristic,
            reflection_threshold: 50,
            working_facts: 5,
            working_archive: 256,
        }
    }
}

/// The fully resolved config of one agent: no `Option` left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentConfig {
    /// The agent's id.
    pub id: AgentId,
    /// The agent's system prompt.
    pub persona: String,
    /// The model that serves the agent's turns.
    pub model: String,
    /// How often the agent's loop runs (emergency check, pending input, maybe an LLM call).
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub tick_every: Duration,
    /// How often the agent sleeps (consolidation, then compaction at the sleep threshold).
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub sleep_every: Duration,
    /// Up to this much random delay is added to each sleep, so agents do not sleep at once.
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub sleep_jitter: Duration,
    /// How long a host-defined tool call may wait for the host's result.
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub tool_timeout: Duration,
    /// Compaction settings.
    pub compaction: CompactionConfig,
    /// Memory and sleep settings.
    pub memory: MemoryConfig,
    /// Host-defined tools this agent may call.
    pub tools: Vec<ToolSpec>,
}
