//! API tokens: the server's scoped bearer tokens, stored hashed in the `tokens` tree.
//!
//! Besides the admin token (`SOMNA_API_TOKEN`, which is configuration and never stored), an
//! operator can make tokens that reach only the agents whose id starts with a prefix (a tenant,
//! a game server, one user's assistants) and only read, or read and write. The secret is shown
//! once, when the token is made: the store keeps its SHA-256 and never the secret, so a copy of
//! the database gives no one access. Secrets are 32 random bytes from the operating system, so a
//! plain (unsalted) hash is enough: there is no dictionary to try.
//!
//! Tokens are not agent content: their writes carry no cluster fence (any node may make or
//! revoke one), and each write is flushed before it returns, so a revocation survives a crash.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use somna_core::{AgentId, Timestamp};

use crate::codec;
use crate::error::{Result, StoreError};
use crate::store::{Store, tree_names};

/// What every secret starts with, so a leaked one is recognisable (secret scanners, logs).
pub const SECRET_PREFIX: &str = "somna_";

/// The longest token name.
pub const MAX_NAME_LEN: usize = 64;

/// What a scoped token may do with the agents it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Reads only: `GET` routes and the event stream.
    Read,
    /// Reads and commands: input, compaction, sleep, config changes, creating and retiring
    /// agents — within its prefix.
    ReadWrite,
}

impl Access {
    /// `read` or `read_write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read_write",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The agents a token reaches and what it may do with them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenScope {
    /// The agent-id prefix: the token reaches exactly the agents whose id starts with it. Never
    /// empty (a token for every agent is the admin token).
    pub agents: String,
    /// Read, or read and write.
    pub access: Access,
}

impl TokenScope {
    /// True when the token reaches agent `id`.
    pub fn reaches(&self, id: &AgentId) -> bool {
        self.reaches_id(id.as_str())
    }

    /// [`TokenScope::reaches`] of an id as a string (which need not be a valid id).
    pub fn reaches_id(&self, id: &str) -> bool {
        id.starts_with(&self.agents)
    }

    /// True when the token may change things (not only read).
    pub fn can_write(&self) -> bool {
        self.access == Access::ReadWrite
    }
}

/// A stored token: its name, scope, when it was made, and the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    /// The operator's name for it (unique; what `revoke` takes).
    pub name: String,
    /// What it reaches.
    pub scope: TokenScope,
    /// When it was made.
    pub created_at: Timestamp,
    /// SHA-256 of the secret, lowercase hex.
    pub hash: String,
}

/// The SHA-256 of `secret`, lowercase hex: what the store keeps and what a presented bearer
/// token is looked up by.
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// A new secret: [`SECRET_PREFIX`] and 32 bytes from the operating system's generator, in hex.
pub fn new_secret() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Invalid {
        what: "token secret",
        reason: format!("the operating system gave no random bytes: {e}"),
    })?;
    Ok(format!("{SECRET_PREFIX}{}", hex(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Checks a token name: 1 to [`MAX_NAME_LEN`] of ASCII letters, digits, `-`, `_` and `.`.
pub fn validate_name(name: &str) -> Result<()> {
    let invalid = |reason: String| StoreError::Invalid {
        what: "token name",
        reason,
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "{name:?} must be 1 to {MAX_NAME_LEN} characters long"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(invalid(format!(
            "{name:?} has {c:?}; use ASCII letters, digits, '-', '_' and '.'"
        )));
    }
    Ok(())
}

/// Checks a scope: a non-empty prefix of what an agent id may hold.
fn validate_scope(scope: &TokenScope) -> Result<()> {
    if scope.agents.is_empty() {
        return Err(StoreError::Invalid {
            what: "token scope",
            reason: "the agent prefix is empty (a token for every agent is the admin token, \
                     SOMNA_API_TOKEN)"
                .into(),
        });
    }
    // A prefix is valid when some id starting with it is: the prefix itself, or the prefix
    // followed by a letter (for prefixes ending in a separator).
    if AgentId::new(scope.agents.clone()).is_err()
        && AgentId::new(format!("{}a", scope.agents)).is_err()
    {
        return Err(StoreError::Invalid {
            what: "token scope",
            reason: format!(
                "no agent id starts with {:?} (ids are letters, digits, '-', '_' and '.')",
                scope.agents
            ),
        });
    }
    Ok(())
}

impl Store {
    /// Makes a token named `name` for `scope`; returns it and its secret (shown once: the store
    /// keeps only the hash). `StoreError::Invalid` when the name or scope is malformed,
    /// `StoreError::TokenExists` when the name is taken.
    pub fn create_token(
        &self,
        name: &str,
        scope: TokenScope,
        now: Timestamp,
    ) -> Result<(ApiToken, String)> {
        validate_name(name)?;
        validate_scope(&scope)?;
        let secret = new_secret()?;
        let token = ApiToken {
            name: name.to_owned(),
            scope,
            created_at: now,
            hash: hash_secret(&secret),
        };
        let value = codec::encode(tree_names::TOKENS, &token)?;
        let created = self.inner.trees.tokens.apply_batch_swapping(
            name.as_bytes(),
            None,
            &value,
            crate::backend::Batch::default(),
        )?;
        if !created {
            return Err(StoreError::TokenExists(name.to_owned()));
        }
        self.flush()?;
        Ok((token, secret))
    }

    /// Every token, by name.
    pub fn tokens(&self) -> Result<Vec<ApiToken>> {
        crate::store::decode_all(&self.inner.trees.tokens, tree_names::TOKENS)
    }

    /// Revokes (deletes) the token named `name`: `Ok(false)` when there is none. Flushed before
    /// it returns.
    pub fn revoke_token(&self, name: &str) -> Result<bool> {
        let tree = &self.inner.trees.tokens;
        if tree.get(name.as_bytes())?.is_none() {
            return Ok(false);
        }
        let mut batch = crate::backend::Batch::default();
        batch.remove(name.as_bytes());
        tree.apply_batch(batch)?;
        self.flush()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_hash_to_hex() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 64);
        // SHA-256 of "abc" (FIPS 180-2's example).
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_and_scopes_are_checked() {
        assert!(validate_name("game-server_1.eu").is_ok());
        for bad in ["", "a b", "ü", &"x".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        let scope = |agents: &str| TokenScope {
            agents: agents.into(),
            access: Access::Read,
        };
        assert!(validate_scope(&scope("tenant-a-")).is_ok());
        assert!(validate_scope(&scope("")).is_err());
        assert!(validate_scope(&scope("a b")).is_err());
        let a = scope("tenant-a-");
        assert!(a.reaches(&AgentId::new("tenant-a-bob").unwrap()));
        assert!(!a.reaches(&AgentId::new("tenant-b-bob").unwrap()));
        assert!(!a.can_write());
    }
}
