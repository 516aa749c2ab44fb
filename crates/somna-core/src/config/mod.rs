//! Configuration: runtime.toml's typed structs, layered overrides and the resolved per-agent config.
//!
//! Layers, lowest first: built-in defaults → `[defaults]` / `[defaults.compaction]` → each
//! `[[agents]]` entry's overrides → run-time changes through the API (persisted in the agent's
//! `AgentRecord.overrides`). CLI/env overrides (`key.path=value`) are merged into the parsed document
//! before any of this, so they can change any key of any layer. The result, [`AgentConfig`], has no
//! `Option` left.
//!
//! - this module: the agreed types: the resolved [`AgentConfig`], [`CompactionConfig`],
//!   [`MemoryConfig`], [`LlmConfig`], [`StoreConfig`], [`RuntimeSection`], the override types
//!   ([`AgentOverrides`], [`CompactionOverrides`], [`MemoryOverrides`]) and their built-in defaults.
//! - `file`: [`RuntimeConfig`], the raw file (`deny_unknown_fields` everywhere), [`DefaultsSection`],
//!   [`AgentEntry`], and parsing that reports every unknown key and wrong type at once.
//! - `overrides`: `key.path=value` overrides merged into the document, and [`overrides_from_env`].
//! - `layers`: `merge` (a later layer wins, field by field) and `apply` of the override types.
//! - `resolve`: [`ResolvedConfig`] and [`AgentDefaults`]: layering plus validation.
//! - `validate`: the checks, which collect every error rather than stopping at the first.
//! - `source`: the line of each key in the file, so that late errors can name it.
//! - `error`: [`ConfigError`] (file, key, line, why) and [`ConfigErrors`].
//!
//! Nothing here reads a file or the environment: callers pass the text and the file's name.
//! docs/configuration.md describes every key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::id::AgentId;

mod error;
mod file;
mod layers;
mod overrides;
mod resolve;
mod source;
mod validate;

pub use error::{ConfigError, ConfigErrors, Result};
pub use file::{AgentEntry, DefaultsSection, RuntimeConfig};
pub use overrides::{ENV_PREFIX, overrides_from_env};
pub use resolve::{AgentDefaults, ResolvedConfig};

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

/// Caps, in tokens, of each section of a compaction summary.
///
/// In a file, a `sections` table replaces the lower layer's caps as a whole; caps it does not name
/// take their built-in defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct SectionCaps {
    /// What the conversation was about and how it moved.
    pub topic_arc: u32,
    /// What was decided or agreed.
    pub decisions: u32,
    /// What is still open: promises, questions, tasks.
    pub pending: u32,
    /// What the agent learned about the people it talks to.
    pub user_facts: u32,
    /// Items, places, documents and other things referred to.
    pub artifacts: u32,
}

impl SectionCaps {
    /// The sum of the caps, which must not exceed `summary_max_tokens`.
    pub fn total(&self) -> u64 {
        u64::from(self.topic_arc)
            + u64::from(self.decisions)
            + u64::from(self.pending)
            + u64::from(self.user_facts)
            + u64::from(self.artifacts)
    }
}

impl Default for SectionCaps {
    fn default() -> Self {
        SectionCaps {
            topic_arc: 400,
            decisions: 300,
            pending: 300,
            user_facts: 300,
            artifacts: 200,
        }
    }
}

/// How notable facts and importance scores are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scorer {
    /// Deterministic keyword/shape heuristics, no LLM call.
    #[default]
    Heuristic,
    /// Ask the LLM.
    Llm,
}

/// The resolved compaction settings of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionConfig {
    /// `false` turns off sleep and emergency compaction; manual still works.
    pub enabled: bool,
    /// Usage (0–1] at or above which a Sleep compacts.
    pub sleep_threshold: f64,
    /// Usage (0–1] at or above which a tick compacts at once; above `sleep_threshold`.
    pub emergency_threshold: f64,
    /// The model's context window, in tokens.
    pub max_context_tokens: u32,
    /// Keep at least this many recent messages verbatim.
    pub preserve_messages: u32,
    /// Keep at least this fraction of `max_context_tokens` of recent messages verbatim.
    pub preserve_ratio: f64,
    /// The first `head_size` messages are pinned and never compacted.
    pub head_size: u32,
    /// Skip a compaction whose body has fewer messages than this, unless forced.
    pub min_compact_batch: u32,
    /// The summarizer's model; empty means the agent's model (an [`AgentConfig`] never holds an
    /// empty one: resolution fills in the agent's model).
    pub compact_model: String,
    /// The summarizer's instructions; empty means the engine's built-in default prompt.
    pub compact_prompt: String,
    /// Cap on the whole summary, in tokens.
    pub summary_max_tokens: u32,
    /// Cap on each summary section.
    pub sections: SectionCaps,
    /// The summarizer's context window, in tokens (the request must fit in it).
    pub summarizer_context_tokens: u32,
    /// After this many compactions, warn that accuracy may degrade.
    pub warn_after_compactions: u32,
    /// Tool outputs older than this many messages (counted from the end) are masked.
    pub mask_after_messages: u32,
    /// Tool outputs of these tools are never masked.
    pub mask_exempt_tools: Vec<String>,
    /// How pre-compaction extraction finds notable facts.
    pub extraction: Scorer,
    /// The largest single input (a user message, an observation, a tool result) the agent
    /// accepts, in tokens; larger input is refused. 0 means the default derived from the window,
    /// [`CompactionConfig::input_limit`] gives the value in force.
    pub max_input_tokens: u32,
    /// Tokens reserved in the window for the agent's reply (and the most it may write): a prompt
    /// never takes more than `max_context_tokens − max_reply_tokens`.
    pub max_reply_tokens: u32,
    /// The share of the window the working context (memory facts and archive excerpts recalled
    /// for the latest input) may fill, most relevant first; 0 turns it off. Counted in every
    /// usage check whether or not it is filled, so that what compaction frees stays free.
    pub working_share: f64,
}

/// The working context's reserved room at small windows: at least this many tokens, or half the
/// prompt budget when that is less (see [`CompactionConfig::working_budget`]).
pub const WORKING_FLOOR_TOKENS: u64 = 768;
/// A compaction keeps at least this many of the latest messages verbatim, whatever
/// [`CompactionConfig::tail_cap`] allows: the live tail's floor.
pub const MIN_TAIL_MESSAGES: usize = 4;

impl CompactionConfig {
    /// The most tokens a prompt may take: the window minus the reply's reserve.
    pub fn prompt_budget(&self) -> u64 {
        u64::from(
            self.max_context_tokens
                .saturating_sub(self.max_reply_tokens),
        )
    }

    /// The summary's cap in tokens: `summary_max_tokens`, or when that is 0 (the default) 15% of
    /// the window, at least 200 and at most 1,500 (614 in a 4,096-token window, 1,228 in 8,192),
    /// and at least the sum of `sections` when they were set by hand.
    pub fn summary_cap(&self) -> u32 {
        if self.summary_max_tokens > 0 {
            return self.summary_max_tokens;
        }
        let derived = (self.max_context_tokens.saturating_mul(3) / 20).clamp(200, 1_500);
        if self.sections == SectionCaps::default() {
            derived
        } else {
            derived.max(u32::try_from(self.sections.total()).unwrap_or(u32::MAX))
        }
    }

    /// The section caps in force: `sections`, except that the built-in default caps (which sum to
    /// 1,500) shrink in proportion when the summary's cap is smaller, so they always fit it.
    pub fn section_caps(&self) -> SectionCaps {
        let cap = u64::from(self.summary_cap());
        if self.sections != SectionCaps::default() || self.sections.total() <= cap {
            return self.sections;
        }
        let total = self.sections.total();
        let scale = |n: u32| u32::try_from(u64::from(n) * cap / total).unwrap_or(n);
        let s = self.sections;
        SectionCaps {
            topic_arc: scale(s.topic_arc),
            decisions: scale(s.decisions),
            pending: scale(s.pending),
            user_facts: scale(s.user_facts),
            artifacts: scale(s.artifacts),
        }
    }

    /// The working context's budget in tokens: `working_share` of the window, and at small
    /// windows at least [`WORKING_FLOOR_TOKENS`] or half the prompt budget, whichever is less
    /// (0 when `working_share` is 0). Below 3,840 tokens a fifth of the window leaves retrieval
    /// a few hundred tokens beside the summary and the live tail, less than a keyword search
    /// needs to find what a question asks about (docs/prompt.md, "How the room is split").
    pub fn working_budget(&self) -> u64 {
        let share = if self.working_share.is_finite() {
            self.working_share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if share == 0.0 {
            return 0;
        }
        let by_share = (share * f64::from(self.max_context_tokens)).floor() as u64;
        by_share.max(WORKING_FLOOR_TOKENS.min(self.prompt_budget() / 2))
    }

    /// The most tokens a compaction keeps in the live tail when the agent's fixed prompt
    /// (persona and working budget) takes `fixed_tokens`: half of the room the tail has below
    /// the sleep threshold beside a full-size summary, so that a compaction always frees at
    /// least half of what the tail may grow to before the next one. The preserve window
    /// (`preserve_messages`, `preserve_ratio`) is cut to it, never below the latest
    /// [`MIN_TAIL_MESSAGES`] messages. With the defaults it binds at every window, most at small
    /// ones: ~1,300 tokens at 8,192 (the preserve window's 20% is 1,638), a few messages at 2,000.
    pub fn tail_cap(&self, fixed_tokens: u64) -> u64 {
        let threshold = self.sleep_threshold.min(self.emergency_threshold);
        let below = if threshold.is_finite() && threshold > 0.0 {
            (threshold * f64::from(self.max_context_tokens)).floor() as u64
        } else {
            0
        };
        below
            .saturating_sub(fixed_tokens)
            .saturating_sub(u64::from(self.summary_cap()))
            / 2
    }

    /// The largest input the agent accepts, in tokens: `max_input_tokens`, or when that is 0 the
    /// default derived from the window, half of what a compaction can bring the prompt down to
    /// (`(emergency_threshold × max_context_tokens − summary_max_tokens) / 2`). The other half is
    /// left to the persona, the working context and the recent turns, so whatever is accepted can
    /// always be compacted below the emergency threshold.
    pub fn input_limit(&self) -> u32 {
        if self.max_input_tokens > 0 {
            self.max_input_tokens
        } else {
            self.input_room() / 2
        }
    }

    /// What a compaction can bring the prompt below, in tokens: the emergency threshold's share
    /// of the window minus a full-size summary and the working context's budget. An explicit
    /// `max_input_tokens` may not exceed it.
    pub fn input_room(&self) -> u32 {
        let threshold = (self.emergency_threshold * f64::from(self.max_context_tokens)).floor();
        let threshold = if threshold.is_finite() && threshold > 0.0 {
            threshold.min(f64::from(u32::MAX)) as u32
        } else {
            0
        };
        let working = u32::try_from(self.working_budget()).unwrap_or(u32::MAX);
        threshold
            .saturating_sub(self.summary_cap())
            .saturating_sub(working)
    }
}

impl Default for CompactionConfig {
    /// The built-in defaults (see docs/configuration.md).
    fn default() -> Self {
        CompactionConfig {
            enabled: true,
            sleep_threshold: 0.70,
            emergency_threshold: 0.80,
            max_context_tokens: 8192,
            preserve_messages: 20,
            preserve_ratio: 0.20,
            head_size: 0,
            min_compact_batch: 5,
            compact_model: String::new(),
            compact_prompt: String::new(),
            summary_max_tokens: 0,
            sections: SectionCaps::default(),
            summarizer_context_tokens: 8192,
            warn_after_compactions: 3,
            mask_after_messages: 10,
            mask_exempt_tools: Vec::new(),
            extraction: Scorer::Heuristic,
            max_input_tokens: 0,
            max_reply_tokens: 512,
            working_share: 0.2,
        }
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

/// A tool the host program defines; calls to it are handed to the host as events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The name the model calls it by: 1–64 characters from `[A-Za-z0-9_-]`, not a builtin's name.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[A-Za-z0-9_-]{1,64}$"))]
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments, as a JSON string. A file may also write it as a TOML table,
    /// which is converted to JSON.
    #[serde(
        default = "ToolSpec::default_parameters",
        deserialize_with = "parameters_as_json"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = ToolParametersSchema))]
    pub parameters: String,
}

impl ToolSpec {
    fn default_parameters() -> String {
        r#"{"type":"object","properties":{}}"#.to_string()
    }
}

/// The OpenAPI schema of [`ToolSpec::parameters`] (the API's document names it
/// `ToolParameters`): JSON text, or an object that is turned into it (what `parameters_as_json`
/// reads); it is always written as text.
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct ToolParametersSchema;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ToolParametersSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String))
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .description(Some(
                "The JSON Schema of the arguments: JSON text, or an object (read as its text); \
always written as text",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ToolParametersSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        "ToolParameters".into()
    }
}

/// Reads `parameters` as a JSON string, or as a table (TOML) / object (JSON) turned into one.
fn parameters_as_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Parameters {
        Text(String),
        Schema(serde_json::Value),
    }
    match Parameters::deserialize(deserializer)? {
        Parameters::Text(text) => Ok(text),
        Parameters::Schema(value) => Ok(value.to_string()),
    }
}

/// Config changes of one agent; every field optional. Used for `[defaults.compaction]`,
/// `[[agents]]` entries, CLI overrides and run-time changes (persisted in `AgentRecord`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct CompactionOverrides {
    /// See [`CompactionConfig::enabled`].
    pub enabled: Option<bool>,
    /// See [`CompactionConfig::sleep_threshold`].
    pub sleep_threshold: Option<f64>,
    /// See [`CompactionConfig::emergency_threshold`].
    pub emergency_threshold: Option<f64>,
    /// See [`CompactionConfig::max_context_tokens`].
    pub max_context_tokens: Option<u32>,
    /// See [`CompactionConfig::preserve_messages`].
    pub preserve_messages: Option<u32>,
    /// See [`CompactionConfig::preserve_ratio`].
    pub preserve_ratio: Option<f64>,
    /// See [`CompactionConfig::head_size`].
    pub head_size: Option<u32>,
    /// See [`CompactionConfig::min_compact_batch`].
    pub min_compact_batch: Option<u32>,
    /// See [`CompactionConfig::compact_model`]; `""` means the agent's model.
    pub compact_model: Option<String>,
    /// See [`CompactionConfig::compact_prompt`]; `""` means the built-in prompt.
    pub compact_prompt: Option<String>,
    /// See [`CompactionConfig::summary_max_tokens`].
    pub summary_max_tokens: Option<u32>,
    /// See [`CompactionConfig::sections`]; replaces the lower layer's caps as a whole.
    pub sections: Option<SectionCaps>,
    /// See [`CompactionConfig::summarizer_context_tokens`].
    pub summarizer_context_tokens: Option<u32>,
    /// See [`CompactionConfig::warn_after_compactions`].
    pub warn_after_compactions: Option<u32>,
    /// See [`CompactionConfig::mask_after_messages`].
    pub mask_after_messages: Option<u32>,
    /// See [`CompactionConfig::mask_exempt_tools`]; replaces the lower layer's list.
    pub mask_exempt_tools: Option<Vec<String>>,
    /// See [`CompactionConfig::extraction`].
    pub extraction: Option<Scorer>,
    /// See [`CompactionConfig::max_input_tokens`]; 0 means the default derived from the window.
    pub max_input_tokens: Option<u32>,
    /// See [`CompactionConfig::max_reply_tokens`].
    pub max_reply_tokens: Option<u32>,
    /// See [`CompactionConfig::working_share`].
    pub working_share: Option<f64>,
}

/// Memory overrides; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct MemoryOverrides {
    /// See [`MemoryConfig::min_importance`].
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10))]
    pub min_importance: Option<u8>,
    /// See [`MemoryConfig::importance`].
    pub importance: Option<Scorer>,
    /// See [`MemoryConfig::reflection_threshold`].
    pub reflection_threshold: Option<u32>,
    /// See [`MemoryConfig::working_facts`].
    pub working_facts: Option<u32>,
    /// See [`MemoryConfig::working_archive`].
    pub working_archive: Option<u32>,
}

/// Per-agent changes over the defaults; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct AgentOverrides {
    /// See [`AgentConfig::persona`].
    pub persona: Option<String>,
    /// See [`AgentConfig::model`].
    pub model: Option<String>,
    /// See [`AgentConfig::tick_every`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub tick_every: Option<Duration>,
    /// See [`AgentConfig::sleep_every`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub sleep_every: Option<Duration>,
    /// See [`AgentConfig::sleep_jitter`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub sleep_jitter: Option<Duration>,
    /// See [`AgentConfig::tool_timeout`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub tool_timeout: Option<Duration>,
    /// Compaction changes.
    pub compaction: CompactionOverrides,
    /// Memory changes.
    pub memory: MemoryOverrides,
    /// Host-defined tools, replacing the agent's list (set at run time through the API; in
    /// runtime.toml, tools are declared with `[[defaults.tools]]` and `[[agents.tools]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

crate::str_enum! {
    /// Which LLM provider serves the agents; its name is the one used in runtime.toml.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum Provider as "provider" {
        /// Offline, deterministic: extractive summaries and a scripted agent brain.
        #[default]
        Builtin = "builtin",
        /// Any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp's server).
        Openai = "openai",
    }
}

/// The resolved `[llm]` section (also its raw form: every key has a built-in default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Which provider serves the agents.
    pub provider: Provider,
    /// The default model of every agent.
    pub model: String,
    /// The server's base URL (for `openai`), e.g. `http://127.0.0.1:8089/v1`.
    pub base_url: String,
    /// The environment variable that holds the API key (never the key itself); empty for none.
    pub api_key_env: String,
    /// How long one request may take before it counts as failed.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Retries after a failed request (429, 5xx, connection errors), with backoff.
    pub max_retries: u32,
    /// Global cap on LLM requests in flight.
    pub max_concurrent: u32,
    /// Whether summaries and consolidation facts are asked for as JSON under a schema.
    pub structured_output: StructuredOutput,
    /// The per-agent prompt-cache hint sent with chat turns, in the server's dialect.
    pub cache_hint: CacheHint,
    /// With `cache_hint = "llama_cpp"`: the server's slot count (`--parallel`); each agent's
    /// turns go to slot `hash(agent) % cache_slots`, so its cached prefix is found again. 0 sends
    /// no slot (the server picks one).
    pub cache_slots: u32,
}

crate::str_enum! {
    /// How summaries and consolidation facts are asked for (`[llm] structured_output`); its name
    /// is the one used in runtime.toml.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum StructuredOutput as "structured output" {
        /// `json_schema` first; when the server rejects it, `json_object` with the schema; when it
        /// rejects that too, plain text. Each step down is taken once per client and remembered.
        #[default]
        Auto = "auto",
        /// Always OpenAI's `response_format: {"type": "json_schema", ...}` (OpenAI, vLLM,
        /// llama.cpp's `llama-server`, SGLang).
        JsonSchema = "json_schema",
        /// Always `response_format: {"type": "json_object", "schema": ...}`, the dialect of
        /// llama-cpp-python's server (which rejects `json_schema`) and of llama.cpp's
        /// `llama-server`.
        JsonObject = "json_object",
        /// Plain text with `## Section` headings, read by the line reader.
        Off = "off",
    }
}

crate::str_enum! {
    /// Which prompt-cache hint chat turns carry (`[llm] cache_hint`); its name is the one used in
    /// runtime.toml.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum CacheHint as "cache hint" {
        /// None: the server caches (or not) on its own.
        #[default]
        Off = "off",
        /// OpenAI's `prompt_cache_key`: a stable string per agent, so one agent's turns are
        /// routed to the machine that holds its prefix.
        PromptCacheKey = "prompt_cache_key",
        /// llama.cpp's `cache_prompt: true`, and `id_slot` when `cache_slots` is set.
        LlamaCpp = "llama_cpp",
    }
}

impl Default for LlmConfig {
    /// The built-in defaults: the offline builtin provider.
    fn default() -> Self {
        LlmConfig {
            provider: Provider::Builtin,
            model: "builtin".to_string(),
            base_url: String::new(),
            api_key_env: String::new(),
            timeout: Duration::from_secs(60),
            max_retries: 3,
            max_concurrent: 8,
            structured_output: StructuredOutput::Auto,
            cache_hint: CacheHint::Off,
            cache_slots: 0,
        }
    }
}

crate::str_enum! {
    /// Which storage backend holds the agents; its name is the one configured.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum StoreBackend as "store backend" {
        /// One embedded sled database in `path` (the default: nothing to install).
        #[default]
        Sled = "sled",
        /// A PostgreSQL database at `url`, shared by every process that opens it.
        Postgres = "postgres",
    }
}

/// A database URL that never shows its password: `Debug`, `Display` and `Serialize` (so
/// `check-config --json` too) give `postgres://user:***@host/db`; [`DbUrl::expose`] gives the
/// real text to the driver.
#[derive(Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct DbUrl(String);

impl Serialize for DbUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl DbUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        DbUrl(url.into())
    }

    /// The URL itself, password included: only for the database driver.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when no URL is set.
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The URL with its password (if any) replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_url(&self.0)
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `scheme://user:password@host…` → `scheme://user:***@host…`; also a `password=` parameter of
/// the query string or of a key=value connection string. Anything without a password is returned
/// as it is.
pub fn redact_url(url: &str) -> String {
    let mut out = match url_credentials(url) {
        Some(c) => format!("{}://{}:***@{}", c.scheme, c.user, c.rest),
        None => url.to_string(),
    };
    // `password=…` up to the next `&` or white space.
    let mut searched = 0;
    while let Some(at) = out[searched..].to_ascii_lowercase().find("password=") {
        let start = searched + at + "password=".len();
        let end = out[start..]
            .find(|c: char| c == '&' || c.is_whitespace())
            .map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "***");
        searched = start + 3;
    }
    out
}

/// The parts of `scheme://user:password@host…` around its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlCredentials<'a> {
    pub scheme: &'a str,
    pub user: &'a str,
    pub password: &'a str,
    /// `host…`: what follows the `@`.
    pub rest: &'a str,
}

impl UrlCredentials<'_> {
    /// The URL without its credentials: `scheme://host…`.
    pub fn bare_url(&self) -> String {
        format!("{}://{}", self.scheme, self.rest)
    }
}

/// The credentials of `scheme://user:password@host…`; `None` when the URL carries no password.
pub fn url_credentials(url: &str) -> Option<UrlCredentials<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (userinfo, _) = rest[..authority_end].rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':')?;
    Some(UrlCredentials {
        scheme,
        user,
        password,
        rest: &rest[userinfo.len() + 1..],
    })
}

/// The default `[store] cache_mb`: sled's page cache in MiB.
pub const DEFAULT_STORE_CACHE_MB: u64 = 64;

/// The resolved `[store]` section (also its raw form: every key has a built-in default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sled` (default) or `postgres`.
    pub backend: StoreBackend,
    /// The sled database directory (relative paths are relative to the config file's directory).
    pub path: PathBuf,
    /// sled's background flush (fsync) interval; must be above zero. Bounds what a kill can take
    /// of the writes nobody waited on (replies, compactions, journal entries).
    #[serde(with = "humantime_serde")]
    pub flush_every: Duration,
    /// Acknowledge an input (HTTP 202, `Runtime::send`, `somna send`) only once it is flushed, so an
    /// acknowledged input survives a process kill and power loss (group commit). `false`
    /// acknowledges as soon as the input is in sled's in-memory log: faster, but a kill within
    /// `flush_every` can lose it. (A Postgres commit is durable when it returns.)
    pub durable_acks: bool,
    /// The most MiB of database pages sled keeps cached in the process (sled's `cache_capacity`);
    /// above zero. Larger caches save reads of old pages (history reads, searches of agents not
    /// touched lately) at the cost of resident memory.
    pub cache_mb: u64,
    /// The Postgres connection URL (`postgres://user:password@host:5432/db`) for
    /// `backend = "postgres"`; never printed with its password.
    pub url: DbUrl,
    /// The Postgres schema that holds Somna's tables (created at open).
    pub schema: String,
    /// Postgres connections in the pool.
    pub pool_size: u32,
}

impl Default for StoreConfig {
    /// The built-in defaults: sled in `./data`, flushed every 500 ms, durable acknowledgements;
    /// for Postgres, schema `somna` and 8 connections.
    fn default() -> Self {
        StoreConfig {
            backend: StoreBackend::Sled,
            path: PathBuf::from("data"),
            flush_every: Duration::from_millis(500),
            durable_acks: true,
            cache_mb: DEFAULT_STORE_CACHE_MB,
            url: DbUrl::default(),
            schema: "somna".to_string(),
            pool_size: 8,
        }
    }
}

/// The resolved `[runtime]` section (also its raw form: every key has a built-in default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSection {
    /// Arbiters (threads) hosting agents; 0 means one per core.
    pub arbiters: u32,
    /// Cap on agents sleeping at once.
    pub max_concurrent_sleeps: u32,
    /// Whether a turn that leaves an agent tired (near its emergency threshold) brings its sleep
    /// forward; `false`: agents sleep only on their schedule.
    pub sleep_when_tired: bool,
}

impl Default for RuntimeSection {
    /// The built-in defaults: one arbiter per core, four sleeps at once.
    fn default() -> Self {
        RuntimeSection {
            arbiters: 0,
            max_concurrent_sleeps: 4,
            sleep_when_tired: true,
        }
    }
}

/// The resolved `[cluster]` section (also its raw form: every key has a built-in default). Used by
/// `somna run --cluster`: several nodes on one Postgres store share the agents by shard leases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSection {
    /// This node's name, unique in the cluster; empty means `<hostname>-<pid>`.
    pub node: String,
    /// Shards the agents hash to; the same on every node for the life of the cluster.
    pub shards: u32,
    /// How long a shard lease lasts without renewal: how long a dead node's agents wait for a
    /// survivor (at most about this plus `renew_every`).
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// How often a node heartbeats, renews its leases and rebalances; at most a third of
    /// `lease_ttl`, so two renewals can fail before a lease runs out.
    #[serde(with = "humantime_serde")]
    pub renew_every: Duration,
    /// The most shards a node acquires per round (so a joining node does not stall the cluster
    /// loading thousands of agents at once). The next shards are taken once the last ones' agents
    /// run: while a node wins more, rounds come as soon as they do, at the latest every quarter of
    /// `renew_every`.
    pub acquire_per_round: u32,
    /// How often a node reads the inbox for inputs other nodes accepted for its agents (the
    /// fallback for lost NATS wake-ups and NATS outages).
    #[serde(with = "humantime_serde")]
    pub poll_every: Duration,
    /// NATS server for inbox wake-ups and event fan-out (`nats://127.0.0.1:4222`); empty: none
    /// (inputs then arrive within `poll_every`). Its password never shows in logs or
    /// `check-config` (a [`DbUrl`]).
    pub nats_url: DbUrl,
}

impl Default for ClusterSection {
    /// 256 shards, 10 s leases renewed every 3 s, 32 acquisitions per round, the inbox read every
    /// second, no NATS.
    fn default() -> Self {
        ClusterSection {
            node: String::new(),
            shards: 256,
            lease_ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(3),
            acquire_per_round: 32,
            poll_every: Duration::from_secs(1),
            nats_url: DbUrl::default(),
        }
    }
}

crate::str_enum! {
    /// Which embedder computes the vectors of semantic retrieval (`[embedder] provider`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum EmbedderProvider as "embedder provider" {
        /// None: retrieval is BM25 alone (offline, nothing to set up).
        #[default]
        None = "none",
        /// An OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, llama.cpp's server,
        /// Ollama, TEI) at `base_url`.
        Openai = "openai",
        /// all-MiniLM-L6-v2 in process, loaded from `path` (a build with the `local-embedder`
        /// feature; `scripts/local-embedder.sh` installs the model).
        Local = "local",
    }
}

/// The resolved `[embedder]` section (also its raw form: every key has a built-in default): the
/// embedder that semantic retrieval uses, for every agent. Vectors are computed while agents
/// sleep (what was archived since the last sleep) and once per turn for the input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedderSection {
    /// `none` (BM25 only), `openai` or `local`.
    pub provider: EmbedderProvider,
    /// With `openai`: the server's base URL, e.g. `http://127.0.0.1:8090/v1`.
    pub base_url: String,
    /// With `openai`: the embedding model's name. Stored vectors name it: vectors of another
    /// model are computed anew.
    pub model: String,
    /// With `openai`: the environment variable that holds the API key (never the key); empty
    /// for none.
    pub api_key_env: String,
    /// With `local`: the directory holding `model.safetensors` and `tokenizer.json`.
    pub path: String,
    /// How long one embedding request may take.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Texts per request (or per batch in process).
    pub batch: u32,
    /// The most archived messages one sleep embeds (the rest wait for the next sleep); 0 means
    /// no limit.
    pub max_per_sleep: u32,
}

impl Default for EmbedderSection {
    /// No embedder; 30 s requests of 64 texts; at most 5,000 messages a sleep.
    fn default() -> Self {
        EmbedderSection {
            provider: EmbedderProvider::None,
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            path: String::new(),
            timeout: Duration::from_secs(30),
            batch: 64,
            max_per_sleep: 5_000,
        }
    }
}

impl EmbedderSection {
    /// True when an embedder is configured.
    pub fn is_on(&self) -> bool {
        self.provider != EmbedderProvider::None
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

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn urls_never_show_their_password() {
        for (url, shown) in [
            (
                "postgres://somna:hunter2@db:5432/agents",
                "postgres://somna:***@db:5432/agents",
            ),
            ("postgres://somna@db/agents", "postgres://somna@db/agents"),
            (
                "postgresql://u:p%40ss@h/d?sslmode=require&password=hunter2",
                "postgresql://u:***@h/d?sslmode=require&password=***",
            ),
            (
                "host=db user=somna password=hunter2 dbname=agents",
                "host=db user=somna password=*** dbname=agents",
            ),
            ("", ""),
        ] {
            let url = DbUrl::new(url);
            assert_eq!(url.redacted(), shown);
            assert_eq!(format!("{url}"), shown);
            assert!(!format!("{url:?}").contains("hunter2"));
            assert!(!serde_json::to_string(&url).unwrap().contains("hunter2"));
        }
    }

    #[test]
    fn credentials_are_found_apart_from_the_url() {
        let c = url_credentials("nats://somna:hunter2@127.0.0.1:4222/x").unwrap();
        assert_eq!((c.user, c.password), ("somna", "hunter2"));
        assert_eq!(c.bare_url(), "nats://127.0.0.1:4222/x");
        assert_eq!(url_credentials("nats://127.0.0.1:4222"), None);
        assert_eq!(url_credentials("nats://somna@127.0.0.1:4222"), None);
    }

    #[test]
    fn the_nats_url_never_shows_its_password_either() {
        let cluster = ClusterSection {
            nats_url: DbUrl::new("nats://somna:hunter2@127.0.0.1:4222"),
            ..ClusterSection::default()
        };
        assert_eq!(
            cluster.nats_url.expose(),
            "nats://somna:hunter2@127.0.0.1:4222"
        );
        assert!(format!("{cluster:?}").contains("nats://somna:***@127.0.0.1:4222"));
        assert!(!format!("{cluster:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&cluster).unwrap().contains("hunter2"));
    }
}
