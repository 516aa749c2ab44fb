//! The agent commands every backend offers: a local database ([`crate::local::Local`]) or a
//! running server's HTTP API ([`crate::remote::Remote`]). `main.rs` picks one backend and
//! dispatches each command through this trait once. Each method performs the command and prints
//! its answer the way its backend renders it (locally from the library's types, remotely from the
//! server's JSON). Commands that only make sense locally (`run`, `check-config`, `stats`, `check`,
//! `prompt`, `import`, `export`) are not here.

use anyhow::Result;
use somna_core::AgentId;
use somna_runtime::protocol::Inbound;
use somna_store::TokenScope;

/// The journal filters of `somna journal`, as they were typed: the local backend parses them, the
/// remote one passes them through to the API.
#[derive(Debug, Default)]
pub struct JournalFilters {
    pub source: Option<String>,
    pub tags: Vec<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub min_importance: Option<u8>,
    /// At most this many entries (all when `None`).
    pub limit: Option<usize>,
}

/// One implementation per place the agents live; each method runs one command and prints it.
pub trait Backend {
    /// `somna agents`: every agent, retired ones included.
    fn agents(&self) -> Result<()>;
    /// `somna history`: the agent's history (or archive), the last `limit` messages.
    fn history(&self, id: &AgentId, limit: Option<usize>, archive: bool) -> Result<()>;
    /// `somna journal`: the agent's journal entries matching `filters`.
    fn journal(&self, id: &AgentId, filters: &JournalFilters) -> Result<()>;
    /// `somna create`: a new agent with run-time `changes` (`key=value`) over the config.
    fn create(&self, id: &AgentId, changes: &[String]) -> Result<()>;
    /// `somna delete`: retires the agent (nothing is deleted).
    fn delete(&self, id: &AgentId) -> Result<()>;
    /// `somna status`.
    fn status(&self, id: &AgentId) -> Result<()>;
    /// `somna send`: appends user input or an observation.
    fn send(&self, id: &AgentId, input: Inbound) -> Result<()>;
    /// `somna compact`: an error (exit 1) after the outcome is printed when it failed.
    fn compact(&self, id: &AgentId, force: bool) -> Result<()>;
    /// `somna sleep`: an error (exit 1) after the result is printed when a step failed.
    fn sleep(&self, id: &AgentId) -> Result<()>;
    /// `somna uncompact`: restores the messages the summary at `seq` replaced.
    fn uncompact(&self, id: &AgentId, seq: u64) -> Result<()>;
    /// `somna configure`: run-time `changes` (`key=value`) to the agent's config.
    fn configure(&self, id: &AgentId, changes: &[String]) -> Result<()>;
    /// `somna search`: the archive's best `limit` matches for `query`.
    fn search(&self, id: &AgentId, query: &str, limit: usize) -> Result<()>;
    /// `somna facts`.
    fn facts(&self, id: &AgentId) -> Result<()>;
    /// `somna events`: the agent's last `limit` events.
    fn events(&self, id: &AgentId, limit: usize) -> Result<()>;
    /// `somna token create`: a scoped token; prints its secret once.
    fn create_token(&self, name: &str, scope: TokenScope) -> Result<()>;
    /// `somna token list`.
    fn tokens(&self) -> Result<()>;
    /// `somna token revoke`: an error when there is no such token.
    fn revoke_token(&self, name: &str) -> Result<()>;
}
