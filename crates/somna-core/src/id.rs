//! Agent identifiers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest agent id accepted, in bytes.
pub const MAX_AGENT_ID_LEN: usize = 64;

/// An agent's id: 1 to 64 characters from `[A-Za-z0-9_.-]`, other than `.` and `..`.
///
/// The restriction keeps ids usable in URLs, file names and sled key prefixes (an id never contains
/// the 0x00 separator byte, so one agent's keys form a contiguous range). `.` and `..` are refused
/// because URLs and paths read them as "this" and "the parent" segment: such an agent could not be
/// addressed over HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentId(String);

/// The schema of an id as the API's OpenAPI document shows it: a string of 1 to 64 characters from
/// `[A-Za-z0-9_.-]` (the pattern cannot say "not `.` or `..`", so the description does).
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for AgentId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "An agent's id: 1 to 64 characters from `[A-Za-z0-9_.-]`, other than `.` and `..`.",
            ))
            .pattern(Some("^[A-Za-z0-9_.-]{1,64}$"))
            .min_length(Some(1))
            .max_length(Some(MAX_AGENT_ID_LEN))
            .examples(["smith"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for AgentId {}

/// Why a string is not a valid [`AgentId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentIdError {
    #[error("agent id is empty")]
    Empty,
    #[error("agent id {0:?} is longer than {MAX_AGENT_ID_LEN} bytes")]
    TooLong(String),
    #[error("agent id {0:?} has characters outside [A-Za-z0-9_.-]")]
    BadChar(String),
    #[error("agent id {0:?} is reserved (`.` and `..` are path segments, not names)")]
    Reserved(String),
}

impl AgentId {
    /// Checks `id` and wraps it.
    pub fn new(id: impl Into<String>) -> Result<Self, AgentIdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(AgentIdError::Empty);
        }
        if id.len() > MAX_AGENT_ID_LEN {
            return Err(AgentIdError::TooLong(id));
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        {
            return Err(AgentIdError::BadChar(id));
        }
        if matches!(id.as_str(), "." | "..") {
            return Err(AgentIdError::Reserved(id));
        }
        Ok(Self(id))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AgentId {
    type Error = AgentIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<AgentId> for String {
    fn from(value: AgentId) -> Self {
        value.0
    }
}

impl std::str::FromStr for AgentId {
    type Err = AgentIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AgentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_rejects() {
        assert!(AgentId::new("npc-blacksmith_1.v2").is_ok());
        assert_eq!(AgentId::new(""), Err(AgentIdError::Empty));
        assert!(matches!(AgentId::new("a b"), Err(AgentIdError::BadChar(_))));
        assert!(matches!(
            AgentId::new("a\0b"),
            Err(AgentIdError::BadChar(_))
        ));
        assert!(matches!(
            AgentId::new("x".repeat(65)),
            Err(AgentIdError::TooLong(_))
        ));
        for dots in [".", ".."] {
            assert_eq!(
                AgentId::new(dots),
                Err(AgentIdError::Reserved(dots.to_string()))
            );
        }
        assert!(AgentId::new("...").is_ok());
        assert!(AgentId::new(".hidden").is_ok());
        let e = serde_json::from_str::<AgentId>("\"..\"").unwrap_err();
        assert!(e.to_string().contains("reserved"), "{e}");
    }
}
