//! A recall dataset on disk: `conversations/<name>.jsonl` (OpenAI-format JSONL, exactly what
//! `somna import` reads) and `questions.jsonl` (one question per line, naming its conversation and
//! the 0-based indexes of the non-empty lines that answer it). See docs/recall.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a dataset could not be loaded. Every variant names the file (and line) at fault.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    BadLine {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: question {index}: {message}")]
    BadQuestion {
        path: PathBuf,
        /// 1-based, counting questions (non-empty lines).
        index: usize,
        message: String,
    },
    #[error("{path} has no conversations (expected conversations/<name>.jsonl files)")]
    NoConversations { path: PathBuf },
}

/// One turn of a conversation, as the baselines and the "held" check see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// `user`, `assistant`, … as in the file.
    pub role: String,
    /// The speaker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The text.
    #[serde(default)]
    pub content: String,
    /// When it was said (RFC 3339), if the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// One conversation: its JSONL text (imported as is) and its turns (the non-empty lines, parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The file's stem: what questions name.
    pub name: String,
    /// The file's text, handed to the import unchanged.
    pub jsonl: String,
    /// The non-empty lines in order; a question's `answer_turns` index this list.
    pub turns: Vec<Turn>,
}

/// One question about a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The conversation's name (its file stem).
    pub conversation: String,
    /// What is asked: the input the prompt is built for.
    pub question: String,
    /// The 0-based indexes of the turns that hold the answer (non-empty lines of the file).
    pub answer_turns: Vec<usize>,
    /// A free-form category (`single_hop`, `multi_hop`, `temporal`, `speaker`, `paraphrase`,
    /// `adjacent`, …): the report has one row per category.
    pub category: String,
    /// A short reference answer, for people reading misses (not checked).
    #[serde(default)]
    pub answer: String,
}

/// Conversations and the questions about them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dataset {
    /// Sorted by name.
    pub conversations: Vec<Conversation>,
    /// In file order.
    pub questions: Vec<Question>,
}

impl Dataset {
    /// Loads `dir/conversations/*.jsonl` and `dir/questions.jsonl`, checking that every question
    /// names a conversation and turns it has.
    pub fn load(dir: &Path) -> Result<Dataset, DatasetError> {
        let conv_dir = dir.join("conversations");
        let entries = std::fs::read_dir(&conv_dir).map_err(|source| DatasetError::Read {
            path: conv_dir.clone(),
            source,
        })?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|source| DatasetError::Read {
                    path: conv_dir.clone(),
                    source,
                })?
                .path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
        files.sort();
        let mut conversations = Vec::with_capacity(files.len());
        for path in files {
            let jsonl = read(&path)?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            conversations.push(Conversation::parse(name, jsonl, &path)?);
        }
        if conversations.is_empty() {
            return Err(DatasetError::NoConversations { path: conv_dir });
        }
        let questions_path = dir.join("questions.jsonl");
        let questions = parse_questions(&read(&questions_path)?, &questions_path)?;
        let dataset = Dataset {
            conversations,
            questions,
        };
        dataset.check(&questions_path)?;
        Ok(dataset)
    }

    /// The conversation named `name`.
    pub fn conversation(&self, name: &str) -> Option<&Conversation> {
        self.conversations.iter().find(|c| c.name == name)
    }

    /// The questions of each conversation, in file order, keyed by conversation name.
    pub fn questions_by_conversation(&self) -> BTreeMap<&str, Vec<(usize, &Question)>> {
        let mut out: BTreeMap<&str, Vec<(usize, &Question)>> = BTreeMap::new();
        for (i, q) in self.questions.iter().enumerate() {
            out.entry(q.conversation.as_str()).or_default().push((i, q));
        }
        out
    }

    /// Every question names a known conversation and turns inside it.
    fn check(&self, path: &Path) -> Result<(), DatasetError> {
        for (i, q) in self.questions.iter().enumerate() {
            let bad = |message: String| DatasetError::BadQuestion {
                path: path.to_path_buf(),
                index: i + 1,
                message,
            };
            let Some(c) = self.conversation(&q.conversation) else {
                return Err(bad(format!("unknown conversation {:?}", q.conversation)));
            };
            if q.answer_turns.is_empty() {
                return Err(bad("answer_turns is empty".into()));
            }
            if let Some(t) = q.answer_turns.iter().find(|&&t| t >= c.turns.len()) {
                return Err(bad(format!(
                    "answer turn {t} is past the end of {:?} ({} turns)",
                    q.conversation,
                    c.turns.len()
                )));
            }
        }
        Ok(())
    }
}

impl Conversation {
    /// Parses the non-empty lines of `jsonl` (from `path`, named in errors).
    pub fn parse(name: String, jsonl: String, path: &Path) -> Result<Conversation, DatasetError> {
        let mut turns = Vec::new();
        for (i, line) in jsonl.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let turn: Turn = serde_json::from_str(line).map_err(|e| DatasetError::BadLine {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })?;
            turns.push(turn);
        }
        Ok(Conversation { name, jsonl, turns })
    }
}

fn read(path: &Path) -> Result<String, DatasetError> {
    std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_questions(text: &str, path: &Path) -> Result<Vec<Question>, DatasetError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(line).map_err(|e| DatasetError::BadLine {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })?,
        );
    }
    Ok(out)
}
