//! Configuration: runtime.toml's typed structs, layered overrides and the resolved per-agent config.
//!
//! Layers, lowest first: built-in defaults → `[defaults]` / `[defaults.compaction]` → each
//! `[[agents]]` entry's overrides → CLI/env overrides → run-time changes through the API (persisted in
//! the agent's `AgentRecord.overrides`). The result, [`AgentConfig`], has no `Option` left.
//!
//! NOTE: this file holds the agreed types; parsing, resolution and validation are being written.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::AgentId;

/// Caps, in tokens, of each section of a compaction summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SectionCaps {
    pub topic_arc: u32,
    pub decisions: u32,
    pub pending: u32,
    pub user_facts: u32,
    pub artifacts: u32,
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
    /// The summarizer's model; empty means the agent's model.
    pub compact_model: String,
    /// The summarizer's instructions; empty means the built-in default prompt.
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
}

/// The resolved memory/sleep settings of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryConfig {
    /// Consolidation considers journal entries at or above this importance (1–10).
    pub min_importance: u8,
    /// How importance is scored.
    pub importance: Scorer,
    /// Write reflections when the importance accumulated since the last one passes this.
    pub reflection_threshold: u32,
    /// How many memory facts the working context carries.
    pub working_facts: u32,
    /// How many archived messages the working context carries.
    pub working_archive: u32,
}

/// A tool the host program defines; calls to it are handed to the host as events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments, as a JSON string.
    #[serde(default = "ToolSpec::default_parameters")]
    pub parameters: String,
}

impl ToolSpec {
    fn default_parameters() -> String {
        r#"{"type":"object","properties":{}}"#.to_string()
    }
}

/// Config changes of one agent; every field optional. Used for `[defaults.compaction]`,
/// `[[agents]]` entries, CLI overrides and run-time changes (persisted in `AgentRecord`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionOverrides {
    pub enabled: Option<bool>,
    pub sleep_threshold: Option<f64>,
    pub emergency_threshold: Option<f64>,
    pub max_context_tokens: Option<u32>,
    pub preserve_messages: Option<u32>,
    pub preserve_ratio: Option<f64>,
    pub head_size: Option<u32>,
    pub min_compact_batch: Option<u32>,
    pub compact_model: Option<String>,
    pub compact_prompt: Option<String>,
    pub summary_max_tokens: Option<u32>,
    pub sections: Option<SectionCaps>,
    pub summarizer_context_tokens: Option<u32>,
    pub warn_after_compactions: Option<u32>,
    pub mask_after_messages: Option<u32>,
    pub mask_exempt_tools: Option<Vec<String>>,
    pub extraction: Option<Scorer>,
}

/// Memory overrides; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryOverrides {
    pub min_importance: Option<u8>,
    pub importance: Option<Scorer>,
    pub reflection_threshold: Option<u32>,
    pub working_facts: Option<u32>,
    pub working_archive: Option<u32>,
}

/// Per-agent changes over the defaults; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentOverrides {
    pub persona: Option<String>,
    pub model: Option<String>,
    #[serde(with = "humantime_serde")]
    pub tick_every: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub sleep_every: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub sleep_jitter: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub tool_timeout: Option<Duration>,
    pub compaction: CompactionOverrides,
    pub memory: MemoryOverrides,
}

/// Which LLM provider serves the agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Offline, deterministic: extractive summaries and a scripted agent brain.
    #[default]
    Builtin,
    /// Any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp's server).
    Openai,
}

/// The resolved `[llm]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmConfig {
    pub provider: Provider,
    /// The default model of every agent.
    pub model: String,
    /// The server's base URL (for `openai`), e.g. `http://127.0.0.1:8089/v1`.
    pub base_url: String,
    /// The environment variable that holds the API key (never the key itself); empty for none.
    pub api_key_env: String,
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    pub max_retries: u32,
    /// Global cap on LLM requests in flight.
    pub max_concurrent: u32,
}

/// The resolved `[store]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreConfig {
    /// The sled database directory (relative paths are relative to the config file's directory).
    pub path: PathBuf,
    /// sled's background flush interval.
    #[serde(with = "humantime_serde")]
    pub flush_every: Duration,
}

/// The resolved `[runtime]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeSection {
    /// Arbiters (threads) hosting agents; 0 means one per core.
    pub arbiters: u32,
    /// Cap on agents sleeping at once.
    pub max_concurrent_sleeps: u32,
}

/// The fully resolved config of one agent: no `Option` left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    pub id: AgentId,
    /// The agent's system prompt.
    pub persona: String,
    pub model: String,
    #[serde(with = "humantime_serde")]
    pub tick_every: Duration,
    #[serde(with = "humantime_serde")]
    pub sleep_every: Duration,
    #[serde(with = "humantime_serde")]
    pub sleep_jitter: Duration,
    #[serde(with = "humantime_serde")]
    pub tool_timeout: Duration,
    pub compaction: CompactionConfig,
    pub memory: MemoryConfig,
    /// Host-defined tools this agent may call.
    pub tools: Vec<ToolSpec>,
}
