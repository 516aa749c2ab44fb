//! The runtime-wide sections of runtime.toml, each its own raw and resolved form: `[llm]`
//! ([`LlmConfig`]), `[store]` ([`StoreConfig`]), `[runtime]`, `[cluster]` and `[embedder]`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DbUrl;

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

/// The default `[store] cache_mb`: sled's page cache in MiB.
pub const DEFAULT_STORE_CACHE_MB: u64 = 64;

/// The default `[store] history_cache_mb`: the live-history cache's budget in MiB.
pub const DEFAULT_HISTORY_CACHE_MB: u64 = 8;

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
    /// The most MiB of decoded live history kept in memory between turns, over all agents (on
    /// either backend): an agent whose history is there reads none of it from the store on its
    /// turn. Past the budget, the histories of agents not read lately are dropped (read again
    /// when needed). 0 turns the cache off.
    pub history_cache_mb: u64,
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
            history_cache_mb: DEFAULT_HISTORY_CACHE_MB,
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
        /// None: retrieval is BM25 alone.
        None = "none",
        /// An OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, llama.cpp's server,
        /// Ollama, TEI) at `base_url`.
        Openai = "openai",
        /// all-MiniLM-L6-v2 in process, loaded from `path` (a build with the `local-embedder`
        /// feature; `scripts/local-embedder.sh` installs the model).
        Local = "local",
        /// The default: a static token table distilled from all-MiniLM-L6-v2, compiled in
        /// (offline, nothing to set up, microseconds a message; weaker than `local`).
        #[default]
        Builtin = "builtin",
    }
}

/// The resolved `[embedder]` section (also its raw form: every key has a built-in default): the
/// embedder that semantic retrieval uses, for every agent. Vectors are computed while agents
/// sleep (what was archived since the last sleep) and once per turn for the input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedderSection {
    /// `builtin` (the default: compiled in, offline), `none` (BM25 only), `openai` or `local`.
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
    /// The builtin embedder; 30 s requests of 64 texts; at most 5,000 messages a sleep.
    fn default() -> Self {
        EmbedderSection {
            provider: EmbedderProvider::Builtin,
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
