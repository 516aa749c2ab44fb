//! What the runtime's operations fail with: [`RuntimeError`], which callers (the API, the CLI)
//! match on, each variant naming the agent it concerns and printing its cause once.

use somna_core::AgentId;
use somna_store::StoreError;

use crate::agent::{AgentLoadError, ConfigureError};
use crate::ops;
use crate::protocol::InboundError;

/// Runtime errors callers can match on.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("unknown agent \"{0}\"")]
    UnknownAgent(AgentId),
    /// A cluster node was asked to run a command for an agent another node runs (`host`; `None`
    /// while its shard changes hands).
    #[error("agent \"{agent}\" {}", match host {
        Some(node) => format!("runs on node {node:?}; send this command to that node"),
        None => "is between nodes (its shard is changing hands); try again shortly".to_string(),
    })]
    NotHosted {
        agent: AgentId,
        host: Option<String>,
    },
    #[error("agent \"{0}\" already exists")]
    AgentExists(AgentId),
    #[error("agent \"{0}\": {1}")]
    Input(AgentId, InboundError),
    #[error("agent \"{0}\": {1}")]
    Configure(AgentId, ConfigureError),
    #[error("agent \"{0}\": {1}")]
    Load(AgentId, AgentLoadError),
    #[error("agent \"{0}\" is not reachable (stopped or overloaded)")]
    Mailbox(AgentId),
    /// The agent could not read its status from the store.
    #[error("agent \"{0}\": status: {1}")]
    Status(AgentId, StoreError),
    #[error("the runtime is shutting down")]
    ShuttingDown,
    #[error("cannot start the job pool: {0}")]
    JobPool(std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent could not take the request: it is stopping or has too many requests queued.
    #[error("agent \"{0}\" is busy (stopping, or too many requests queued)")]
    Busy(AgentId),
    /// An agent operation refused or failed (see [`ops::OpsError`]).
    #[error(transparent)]
    Ops(ops::OpsError),
}

/// Result alias for runtime operations.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compactor::CompactError;
    use crate::import::ImportError;
    use crate::protocol::UncompactError;

    use crate::error_chain as chain;

    fn unknown() -> StoreError {
        crate::unknown_agent("ghost")
    }

    /// Every wrapper of a store error says it once under `{:#}`, and keeps it matchable.
    #[test]
    fn store_errors_print_their_cause_once() {
        let wrapped: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(RuntimeError::from(unknown())),
            Box::new(RuntimeError::Status(
                AgentId::new("ghost").unwrap(),
                unknown(),
            )),
            Box::new(UncompactError::from(unknown())),
            Box::new(CompactError::from(unknown())),
            Box::new(ImportError::from(unknown())),
            Box::new(ImportError::from(CompactError::from(unknown()))),
        ];
        for e in wrapped {
            let text = chain(e.as_ref());
            assert_eq!(
                text.matches("unknown agent ghost").count(),
                1,
                "{e:?} prints {text:?}"
            );
        }
        assert!(matches!(
            UncompactError::from(unknown()),
            UncompactError::Store(StoreError::UnknownAgent(_))
        ));
    }
}
