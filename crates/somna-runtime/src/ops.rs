//! Agent operations decided once. The policy of creating, retiring, loading and uncompacting an
//! agent lives here, and both the running [`Runtime`](crate::Runtime) and the offline path (the
//! `somna` CLI on a local database, through [`Offline`]) call it. The operations that need the
//! agent's state machine (status, input, compact, sleep, configure) go through the same
//! [`Agent`] component the actor wraps, so there is no second implementation of them.

use std::sync::Arc;

use somna_core::AgentId;
use somna_core::config::{AgentConfig, AgentOverrides, ConfigErrors, ResolvedConfig};
use somna_llm::LlmClient;
use somna_store::{Store, StoreError, UncompactOutcome};

use crate::agent::{Agent, AgentDeps, AgentLoadError};
use crate::clock::Clock;
use crate::compactor::Compactor;
use crate::events::EventBus;

/// Why an agent operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No record of this agent in the store.
    #[error("unknown agent \"{0}\"")]
    UnknownAgent(AgentId),
    /// `create` of an id that is already in use.
    #[error("agent \"{0}\" already exists")]
    Exists(AgentId),
    /// The agent was retired: its data stays readable, commands and its id are refused.
    #[error("agent \"{0}\" was retired")]
    Retired(AgentId),
    /// The config (the file's entry or defaults, with the requested overrides) is invalid.
    #[error("invalid config for agent {0}:\n{1}")]
    Invalid(AgentId, ConfigErrors),
    /// The overrides stored in the agent's record no longer resolve to a valid config.
    #[error("agent {0}: invalid persisted overrides:\n{1}")]
    Persisted(AgentId, ConfigErrors),
    /// The agent could not be loaded from the store.
    #[error("agent \"{0}\": {1}")]
    Load(AgentId, AgentLoadError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The config an agent starts from before its record's overrides: its runtime.toml entry, or the
/// defaults for an agent the file does not list.
pub fn base_config(config: &ResolvedConfig, id: &AgentId) -> AgentConfig {
    config
        .agent(id)
        .cloned()
        .unwrap_or_else(|| config.defaults.agent(id.clone()))
}

/// Decides whether `id` may be created with `overrides`: an id in use, or once used by a retired
/// agent, is refused before the config is checked. Returns the config the agent will run with;
/// writes nothing.
pub fn check_create(
    config: &ResolvedConfig,
    store: &Store,
    id: &AgentId,
    overrides: &AgentOverrides,
) -> Result<AgentConfig, OpsError> {
    if let Some(record) = store.agent(id)? {
        return Err(if record.retired {
            OpsError::Retired(id.clone())
        } else {
            OpsError::Exists(id.clone())
        });
    }
    config
        .agent_config(id, overrides)
        .map_err(|e| OpsError::Invalid(id.clone(), e))
}

/// Creates `id`'s record with `overrides` after [`check_create`]; returns the resolved config.
pub fn create(
    config: &ResolvedConfig,
    store: &Store,
    id: &AgentId,
    overrides: AgentOverrides,
    clock: &Clock,
) -> Result<AgentConfig, OpsError> {
    let resolved = check_create(config, store, id, &overrides)?;
    store.create_agent(id, clock.now())?;
    store.set_overrides(id, overrides)?;
    Ok(resolved)
}

/// The agent's config as it runs: [`base_config`] with its record's overrides.
pub fn agent_config(
    config: &ResolvedConfig,
    store: &Store,
    id: &AgentId,
) -> Result<AgentConfig, OpsError> {
    let record = store
        .agent(id)?
        .ok_or_else(|| OpsError::UnknownAgent(id.clone()))?;
    base_config(config, id)
        .with_overrides(&record.overrides)
        .map_err(|e| OpsError::Persisted(id.clone(), e))
}

/// Refuses a retired agent (its data stays readable); an unknown agent passes (callers that
/// need a record ask for it first).
pub fn require_hosted(store: &Store, id: &AgentId) -> Result<(), OpsError> {
    match store.agent(id)? {
        Some(record) if record.retired => Err(OpsError::Retired(id.clone())),
        _ => Ok(()),
    }
}

/// Agent operations on a database no runtime is hosting (sled allows one process per database):
/// the same policy as [`Runtime`](crate::Runtime), with a plain [`Agent`] in place of an actor.
#[derive(Debug, Clone)]
pub struct Offline {
    /// The resolved config the agents' configs come from.
    config: ResolvedConfig,
    /// The database.
    store: Store,
    /// Stamps records and loads agents.
    clock: Clock,
    /// Semantic retrieval's embedder for the agents loaded here (sleep, prompt), if any.
    semantic: Option<crate::semantic::Semantic>,
}

impl Offline {
    pub fn new(config: ResolvedConfig, store: Store, clock: Clock) -> Offline {
        Offline {
            config,
            store,
            clock,
            semantic: None,
        }
    }

    /// The same, with semantic retrieval's embedder for the agents it loads.
    pub fn with_semantic(mut self, semantic: Option<crate::semantic::Semantic>) -> Offline {
        self.semantic = semantic;
        self
    }

    /// The resolved config.
    pub fn config(&self) -> &ResolvedConfig {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The agent's config as it runs (an error for an unknown agent).
    pub fn agent_config(&self, id: &AgentId) -> Result<AgentConfig, OpsError> {
        agent_config(&self.config, &self.store, id)
    }

    /// An error for an unknown or a retired agent.
    pub fn require_hosted(&self, id: &AgentId) -> Result<(), OpsError> {
        self.agent_config(id)?;
        require_hosted(&self.store, id)
    }

    /// Creates the agent (see [`create`]).
    pub fn create(&self, id: &AgentId, overrides: AgentOverrides) -> Result<AgentConfig, OpsError> {
        create(&self.config, &self.store, id, overrides, &self.clock)
    }

    /// Retires the agent: no runtime hosts it again; nothing is deleted.
    pub fn retire(&self, id: &AgentId) -> Result<(), OpsError> {
        self.require_hosted(id)?;
        self.store.retire(id)?;
        Ok(())
    }

    /// A plain [`Agent`] over this database, wired like the runtime wires its actors (no timers).
    pub fn agent(&self, id: &AgentId, llm: Arc<dyn LlmClient>) -> Result<Agent, OpsError> {
        self.agent_config(id)?;
        let deps = AgentDeps {
            compactor: Compactor::new(self.store.clone(), Arc::clone(&llm)),
            store: self.store.clone(),
            llm,
            events: EventBus::default(),
            clock: self.clock,
            // An agent loaded for one operation is hosted by no runtime: counted nowhere shared.
            gauges: crate::gauges::AgentGauges::new(),
            semantic: self.semantic.clone(),
        };
        Agent::load(base_config(&self.config, id), deps).map_err(|e| OpsError::Load(id.clone(), e))
    }

    /// Undoes the compaction whose summary is at `summary_seq` (one store transaction: no agent
    /// runs here). Allowed for a retired agent, like the runtime.
    pub fn uncompact(&self, id: &AgentId, summary_seq: u64) -> Result<UncompactOutcome, OpsError> {
        self.agent_config(id)?;
        Ok(self.store.uncompact(id, summary_seq, self.clock.now())?)
    }
}
