//! Shared test fixtures (in the workspace's `tests/fixtures/`) and their loaders.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use somna_core::interchange;
use somna_core::{Message, Timestamp};

/// Why a fixture could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read.
    #[error("cannot read fixture {path}: {source}")]
    Io {
        /// The fixture's path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line or the file is not what the loader expects.
    #[error("fixture {path} line {line}: {message}")]
    Parse {
        /// The fixture's path.
        path: PathBuf,
        /// The 1-based line (0 for a whole-file error).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The `[[agents]]` entry of Hild, the gatekeeper of Millbrook: the NPC of somna-server's demo
/// (`examples/serve.rs`, the Python host example) and of its tests, with one host tool,
/// `open_door`, that the host must answer. A runtime.toml's last tables.
pub const KEEPER: &str = r#"
[[agents]]
id = "keeper"
persona = "You are Hild, the gatekeeper of Millbrook. You guard the keep's doors."

[[agents.tools]]
name = "open_door"
description = "Opens one of the keep's doors."
parameters = { type = "object", properties = { door = { type = "string" } }, required = ["door"] }
"#;

/// The workspace's `tests/fixtures` directory.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// When the first fixture message was written: 2026-11-01T09:00:00Z. Each later line is one minute later.
pub const FIXTURE_START: Timestamp = Timestamp(1_793_523_600_000);

/// Loads an OpenAI-format JSONL transcript with somna-core's parser
/// ([`somna_core::interchange::parse_line`], the same one `somna import` uses). Messages get seq
/// 1, 2, … in file order, `created_at` one minute apart from [`FIXTURE_START`], and a token count
/// of 0 (count them with the caller's tokenizer). Blank lines are skipped.
pub fn load_jsonl(path: &Path) -> Result<Vec<Message>, FixtureError> {
    let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut messages = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let mut message = interchange::parse_line(raw).map_err(|e| FixtureError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        let seq = messages.len() as u64 + 1;
        message.seq = seq;
        message.created_at =
            FIXTURE_START.saturating_add(std::time::Duration::from_secs(60 * (seq - 1)));
        messages.push(message);
    }
    Ok(messages)
}

/// The 200-turn village transcript (`tests/fixtures/transcript_200.jsonl`).
pub fn transcript_200() -> Result<Vec<Message>, FixtureError> {
    load_jsonl(&fixtures_dir().join("transcript_200.jsonl"))
}

/// A hand-written expectation about one turn of a fixture.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExpectedItem {
    /// The 1-based line (= seq) where it is stated.
    pub turn: u64,
    /// A key phrase a faithful summary keeps (compare case-insensitively).
    pub key: String,
    /// What it is, in plain words.
    pub what: String,
}

/// What a summary of `transcript_200.jsonl` must keep, written by hand from the transcript
/// (`tests/fixtures/transcript_200.expect.json`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TranscriptExpect {
    /// Named entities that occur at least twice.
    pub entities: Vec<String>,
    /// Everything decided or agreed.
    pub decisions: Vec<ExpectedItem>,
    /// Open tasks and unanswered questions at the end.
    pub pending: Vec<ExpectedItem>,
    /// What users said about themselves.
    pub user_facts: Vec<ExpectedItem>,
    /// Files, URLs and codes that occur at least twice.
    pub artifacts: Vec<String>,
}

/// Loads `tests/fixtures/transcript_200.expect.json`.
pub fn transcript_200_expect() -> Result<TranscriptExpect, FixtureError> {
    let path = fixtures_dir().join("transcript_200.expect.json");
    let text = std::fs::read_to_string(&path).map_err(|source| FixtureError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| FixtureError::Parse {
        path,
        line: 0,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use somna_core::Role;

    #[test]
    fn loads_the_200_turn_transcript() {
        let messages = transcript_200().unwrap();
        assert_eq!(messages.len(), 200);
        assert_eq!(messages[0].seq, 1);
        assert_eq!(messages[0].name.as_deref(), Some("Mara"));
        assert_eq!(messages[199].seq, 200);
        let calls = messages.iter().filter(|m| m.has_tool_calls()).count();
        let results = messages.iter().filter(|m| m.role == Role::Tool).count();
        assert_eq!(calls, results);
        // Every tool result answers the call right before it.
        for (i, m) in messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
        {
            let call = &messages[i - 1].tool_calls[0];
            assert_eq!(m.tool_call_id.as_deref(), Some(call.id.as_str()));
        }
        assert_eq!(messages[1].created_at.0 - messages[0].created_at.0, 60_000);
    }

    #[test]
    fn expectations_point_at_their_turns() {
        let messages = transcript_200().unwrap();
        let expect = transcript_200_expect().unwrap();
        assert!(!expect.entities.is_empty());
        for item in expect
            .decisions
            .iter()
            .chain(&expect.pending)
            .chain(&expect.user_facts)
        {
            let content = &messages[(item.turn - 1) as usize].content;
            assert!(
                content.to_lowercase().contains(&item.key.to_lowercase()),
                "turn {} does not say {:?}: {content}",
                item.turn,
                item.key
            );
        }
    }

    #[test]
    fn reports_bad_lines() {
        let dir = std::env::temp_dir().join(format!("somna-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.jsonl");
        std::fs::write(
            &path,
            "{\"role\":\"user\",\"content\":\"ok\"}\n{\"role\":\"robot\",\"content\":\"x\"}\n",
        )
        .unwrap();
        let err = load_jsonl(&path).unwrap_err().to_string();
        assert!(
            err.contains("line 2") && err.contains("unknown role"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
