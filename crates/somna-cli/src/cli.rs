//! Command-line definition.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::{Result, anyhow};
use clap::{Parser, Subcommand};
use somna_core::Timestamp;

/// Somna: a runtime for long-lived LLM agents, with compaction, journals and memory.
#[derive(Debug, Parser)]
#[command(name = "somna", version, about, long_about = None)]
pub struct Cli {
    /// The runtime config file.
    #[arg(
        long,
        short,
        global = true,
        default_value = "runtime.toml",
        env = "SOMNA_CONFIG"
    )]
    pub config: PathBuf,
    /// The sled database directory (overrides the config's `[store]`, whatever its backend).
    #[arg(long, global = true, env = "SOMNA_DB")]
    pub db: Option<PathBuf>,
    /// Override a config key, e.g. `--set llm.provider=openai` (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print JSON instead of text (with --server: the server's answer).
    #[arg(long, global = true)]
    pub json: bool,
    /// Operate on a running server (`somna run --serve`) at this URL instead of a local database,
    /// e.g. `http://127.0.0.1:7878`. The bearer token comes from SOMNA_API_TOKEN.
    #[arg(long, global = true, env = "SOMNA_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// More logging (-v info, -vv debug); `SOMNA_LOG` takes a tracing filter.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the runtime: host the config's agents (until ctrl-c), or play a scenario.
    Run {
        /// A scenario file to play in accelerated time (e.g. examples/village/scenario.toml).
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Stop after this much real time (e.g. `30s`); default: until ctrl-c or the scenario's end.
        #[arg(long = "for", value_parser = humantime::parse_duration)]
        for_real: Option<std::time::Duration>,
        /// Print only sleeps, compactions and warnings, not every message.
        #[arg(long, short)]
        quiet: bool,
        /// Serve the HTTP API next to the runtime, on ADDR (default: SOMNA_API_BIND, else
        /// 127.0.0.1:7878; port 0 picks a free port). The token comes from SOMNA_API_TOKEN.
        #[arg(long, value_name = "ADDR")]
        serve: Option<Option<SocketAddr>>,
        /// Run as one node of a cluster sharing the Postgres store with other nodes: this node
        /// hosts the agents of the shards it leases (`[cluster]` in the config;
        /// docs/hosting-a-cluster.md).
        #[arg(long)]
        cluster: bool,
    },
    /// Validate a config file: exit 0 when valid, 2 with every error listed.
    CheckConfig {
        /// The file to check (default: --config).
        path: Option<PathBuf>,
    },
    /// List the agents in the database.
    Agents,
    #[command(flatten)]
    Agent(AgentCommand),
    /// Totals over every agent and the database size.
    Stats,
    /// Check the storage invariants of every agent (nothing lost, nothing duplicated).
    Check,
    /// Copy the whole database (the config's `[store]`, or --db) into an empty one — a
    /// `postgres://` URL or a new sled directory — and verify the copy agent by agent.
    MigrateStore {
        /// Where to: `postgres://user@host:5432/db` or a directory that does not exist yet.
        #[arg(long, value_name = "URL|DIR")]
        to: String,
        /// The Postgres schema to copy into (default: the config's `store.schema`).
        #[arg(long)]
        schema: Option<String>,
    },
    /// Measure Somna (no database needed: each conversation goes into a temporary one).
    #[command(subcommand)]
    Eval(EvalCommand),
    /// The cluster of nodes sharing the Postgres store (`somna run --cluster`).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Scoped API tokens: bearer tokens that reach only the agents whose id starts with a prefix,
    /// read-only or read-write (docs/api.md, "Tokens"). With --server, through the API with the
    /// admin token (SOMNA_API_TOKEN).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print an agent's live history (or its archive).
    History {
        agent: String,
        /// Only the last N messages.
        #[arg(long, short = 'n')]
        limit: Option<usize>,
        /// Print the archive instead of the live history.
        #[arg(long)]
        archive: bool,
    },
    /// Query an agent's journal, newest first.
    Journal {
        agent: String,
        /// Only entries of this source type (observation, note, reflection, compaction, extraction).
        #[arg(long)]
        source: Option<String>,
        /// Only entries with this tag (repeatable: all must match).
        #[arg(long)]
        tag: Vec<String>,
        /// Only entries at or after this time: a duration ago (`1d`, `3h`) or RFC 3339.
        #[arg(long)]
        since: Option<String>,
        /// Only entries before this time: a duration ago or RFC 3339.
        #[arg(long)]
        until: Option<String>,
        /// Only entries at or above this importance (1–10).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=10))]
        min_importance: Option<u8>,
        /// At most N entries.
        #[arg(long, short = 'n')]
        limit: Option<usize>,
    },
}

/// `somna cluster …`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The nodes (heartbeat age, shards held) and the shards' leases (unowned, expired, oldest).
    Status,
}

/// `somna token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token for the agents whose id starts with --agents; prints its secret, once (the
    /// database keeps only its SHA-256).
    Create {
        /// Its name (1–64 ASCII letters, digits, `-`, `_`, `.`), unique: what `revoke` takes.
        name: String,
        /// The agent-id prefix it reaches, e.g. `tenant-a-`.
        #[arg(long, value_name = "PREFIX")]
        agents: String,
        /// Reads only (GET routes and the event stream); default: reads and commands.
        #[arg(long)]
        read_only: bool,
    },
    /// The tokens: name, prefix, access, when made (never a secret).
    List,
    /// Revoke a token: a server refuses it within 2 s (at once when revoked through it).
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// `somna eval …`: Somna measuring itself.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Recall: import each conversation of DATASET_DIR with the config's `[defaults]` agent
    /// settings (and `--set`), build the prompt for each question, and report the share whose
    /// prompt holds some / all of the answer turns, against two baselines (docs/recall.md).
    Recall {
        /// A directory with `conversations/<name>.jsonl` and `questions.jsonl`.
        #[arg(value_name = "DATASET_DIR")]
        dataset: PathBuf,
        /// Skip the baselines (last-window, bm25-top5).
        #[arg(long)]
        no_baselines: bool,
        /// After each import, sleep (consolidate the journal into memory facts) and measure
        /// again: the report gains a `somna+sleep` row.
        #[arg(long)]
        consolidate: bool,
        /// Only the first N conversations (by name).
        #[arg(long, value_name = "N")]
        limit_conversations: Option<usize>,
        /// Only the first N questions of each conversation.
        #[arg(long, value_name = "N")]
        limit_questions: Option<usize>,
        /// With --json: every question's outcome per method too.
        #[arg(long)]
        details: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// Keep the vectors of every text embedded in DIR (a file per model) and reuse them on
        /// the next run: measuring a dataset again embeds nothing again.
        #[arg(long, value_name = "DIR")]
        embed_cache: Option<PathBuf>,
    },
}

/// Agent operations that work on a local database (or, with `--server`, a running one).
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create an agent from the config's defaults with run-time changes, e.g.
    /// `persona="You are Brannoc." compaction.sleep_threshold=0.6` (persisted).
    Create {
        agent: String,
        #[arg(value_name = "KEY=VALUE")]
        changes: Vec<String>,
    },
    /// Retire an agent: it is no longer hosted and its id cannot be reused; nothing is deleted
    /// (its history, archive, journal and facts stay readable).
    #[command(visible_alias = "retire")]
    Delete { agent: String },
    /// Usage, counts, state and config of an agent.
    Status { agent: String },
    /// Send input: a user message (or, with --observation, a world event).
    Send {
        agent: String,
        text: String,
        /// Who speaks (the message's name).
        #[arg(long)]
        from: Option<String>,
        /// A world event rather than speech: journaled, no reply owed.
        #[arg(long)]
        observation: bool,
    },
    /// Compact now (at the sleep threshold; --force: regardless of thresholds).
    Compact {
        agent: String,
        #[arg(long)]
        force: bool,
    },
    /// Sleep now: consolidation, reflection, then compaction at the sleep threshold.
    Sleep { agent: String },
    /// Undo a compaction: put the archived originals back in place of the summary at SEQ.
    Uncompact { agent: String, seq: u64 },
    /// Change the agent's config at run time, e.g. `compaction.sleep_threshold=0.6` (persisted).
    Configure {
        agent: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        changes: Vec<String>,
    },
    /// Search the archive (BM25 over the most recent archived messages).
    Search {
        agent: String,
        query: String,
        #[arg(long, short = 'n', default_value_t = 5)]
        limit: usize,
    },
    /// The agent's memory facts (with the journal entries they came from).
    Facts { agent: String },
    /// The agent's event log (compactions, failures, undos), newest first.
    Events {
        agent: String,
        #[arg(long, short = 'n', default_value_t = 20)]
        limit: usize,
    },
    /// Dry run: print exactly the messages the agent's next LLM call would receive for INPUT.
    Prompt {
        agent: String,
        #[arg(long)]
        input: String,
    },
    /// Import an OpenAI-format JSONL conversation, compacting as the thresholds require.
    Import {
        agent: String,
        file: PathBuf,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Export history, archive, journal and facts as JSONL (--openai: the original messages only,
    /// in seq order, in the format `import` reads).
    Export {
        agent: String,
        #[arg(long)]
        openai: bool,
        /// With --openai: give each line its `created_at` (RFC 3339), which `import` reads back.
        #[arg(long, requires = "openai")]
        times: bool,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
}

/// Parses `1d` (that long before `now`) or an RFC 3339 time.
pub fn parse_time(s: &str, now: Timestamp) -> Result<Timestamp> {
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(now.saturating_sub(d));
    }
    Timestamp::parse_rfc3339(s).map_err(|_| {
        anyhow!("{s:?} is neither a duration (like 1d or 3h) nor an RFC 3339 time (like 2026-11-21T10:00:00Z)")
    })
}

/// Now, for callers that need it.
#[allow(dead_code)]
pub fn now() -> Timestamp {
    Timestamp::from_system_time(SystemTime::now())
}

/// `compaction.sleep_threshold=0.6 model=gpt-4o` → overrides (an [`Invalid`](crate::Invalid)
/// error naming the key).
pub fn parse_overrides(pairs: &[String]) -> anyhow::Result<somna_core::config::AgentOverrides> {
    somna_core::config::AgentOverrides::from_pairs(pairs)
        .map_err(|e| crate::Invalid(e.to_string()).into())
}

/// A user message as an input (for `send`).
pub fn user_input(
    text: String,
    from: Option<String>,
    observation: bool,
) -> somna_runtime::protocol::Inbound {
    if observation {
        somna_runtime::protocol::Inbound::Observation { content: text }
    } else {
        somna_runtime::protocol::Inbound::User {
            content: text,
            name: from,
        }
    }
}
