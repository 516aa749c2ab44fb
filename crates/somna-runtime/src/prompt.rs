//! Building an agent's prompt: persona, working context (relevant memory facts and archived turns),
//! then the live history (with its compaction summary) — exactly what the LLM call receives.

use serde::Serialize;
use somna_core::config::{AgentConfig, MemoryConfig};
use somna_core::message::{Message, MessageKind, Role};
use somna_core::retrieval;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Fact, Timestamp};
use somna_llm::{ChatMessage, prompts};
use somna_store::{Store, StoreError};

/// How many of the most recent archived messages retrieval looks at.
pub const ARCHIVE_SEARCH_WINDOW: u64 = 2_000;
/// Longest excerpt of an archived message in the working context, in characters.
const EXCERPT_CHARS: usize = 300;

/// What the agent remembers that is relevant to the latest input.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkingContext {
    /// Memory facts, most relevant first.
    pub facts: Vec<Fact>,
    /// Archived (compacted away) messages, most relevant first.
    pub archived: Vec<Message>,
}

impl WorkingContext {
    /// Retrieves the top-k facts and archived messages for `query` (BM25 keyword scoring).
    pub fn gather(
        store: &Store,
        agent: &AgentId,
        query: &str,
        memory: &MemoryConfig,
    ) -> Result<Self, StoreError> {
        if query.trim().is_empty() {
            return Ok(WorkingContext::default());
        }
        let mut out = WorkingContext::default();
        if memory.working_facts > 0 {
            let facts = store.facts(agent)?;
            let texts: Vec<&str> = facts.iter().map(|f| f.text.as_str()).collect();
            out.facts = retrieval::top_k(query, &texts, memory.working_facts as usize)
                .into_iter()
                .map(|h| facts[h.index].clone())
                .collect();
        }
        if memory.working_archive > 0 {
            out.archived = search_archive(store, agent, query, memory.working_archive as usize)?;
        }
        Ok(out)
    }

    /// True when there is nothing to add to the prompt.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty() && self.archived.is_empty()
    }

    /// The working context as a prompt section, or `None` when empty.
    pub fn render(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut out = String::new();
        if !self.facts.is_empty() {
            out.push_str(prompts::MEMORY_HEADING);
            out.push('\n');
            for f in &self.facts {
                out.push_str(&format!("- {}\n", f.text));
            }
        }
        if !self.archived.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(prompts::ARCHIVE_HEADING);
            out.push('\n');
            for m in &self.archived {
                out.push_str(&format!(
                    "- [#{} {}{}] {}\n",
                    m.seq,
                    m.role,
                    m.name
                        .as_deref()
                        .map_or_else(String::new, |n| format!(" ({n})")),
                    excerpt(&m.content, EXCERPT_CHARS)
                ));
            }
        }
        Some(out.trim_end().to_string())
    }
}

/// Searches the agent's most recent archived messages for `query`.
pub fn search_archive(
    store: &Store,
    agent: &AgentId,
    query: &str,
    k: usize,
) -> Result<Vec<Message>, StoreError> {
    let next = store.agent(agent)?.map_or(0, |r| r.next_seq);
    let from = next.saturating_sub(ARCHIVE_SEARCH_WINDOW);
    let archived: Vec<Message> = store
        .archive_range(agent, from, ARCHIVE_SEARCH_WINDOW as usize)?
        .into_iter()
        .filter(|m| m.is_normal() && !m.content.trim().is_empty())
        .collect();
    let texts: Vec<&str> = archived.iter().map(|m| m.content.as_str()).collect();
    Ok(retrieval::top_k(query, &texts, k)
        .into_iter()
        .map(|h| archived[h.index].clone())
        .collect())
}

/// A built prompt with its token breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    pub messages: Vec<ChatMessage>,
    /// Tokens of the persona.
    pub persona_tokens: u64,
    /// Tokens of the working context section.
    pub working_tokens: u64,
    /// Tokens of the live history (summary included).
    pub history_tokens: u64,
    /// Per message, the token count (same order as `messages`).
    pub message_tokens: Vec<u32>,
}

impl Prompt {
    /// All prompt tokens.
    pub fn total_tokens(&self) -> u64 {
        self.persona_tokens + self.working_tokens + self.history_tokens
    }
}

/// Builds the messages of the agent's next LLM call. Summary messages (role system) stay where the
/// history has them; a leading summary is merged into the first system message, since some chat
/// templates accept only one system message at the start.
pub fn build(
    config: &AgentConfig,
    working: &WorkingContext,
    history: &[Message],
    counter: &TokenCounter,
) -> Prompt {
    let persona_tokens = u64::from(counter.count_text(&config.persona));
    let mut system = config.persona.clone();
    let mut working_tokens = 0;
    if let Some(section) = working.render() {
        working_tokens = u64::from(counter.count_text(&section)) + 2;
        system.push_str("\n\n");
        system.push_str(&section);
    }
    let mut messages = Vec::with_capacity(history.len() + 1);
    let mut message_tokens = Vec::with_capacity(history.len() + 1);
    let mut rest = history;
    let mut history_tokens = 0u64;
    while let Some((first, tail)) = rest.split_first() {
        if first.role == Role::System && matches!(first.kind, MessageKind::Summary(_)) {
            system.push_str("\n\n");
            system.push_str(&first.content);
            history_tokens += u64::from(first.tokens);
            rest = tail;
        } else {
            break;
        }
    }
    let system_message = ChatMessage::system(system);
    message_tokens
        .push(counter.count_message(&Message::new(Role::System, &system_message.content)));
    messages.push(system_message);
    for m in rest {
        messages.push(ChatMessage::from(m));
        message_tokens.push(m.tokens);
        history_tokens += u64::from(m.tokens);
    }
    Prompt {
        messages,
        persona_tokens,
        working_tokens,
        history_tokens,
        message_tokens,
    }
}

/// The prompt of the agent's next LLM call over `history` (its last user turn is the retrieval
/// query): the one assembly the live step and every preview share.
pub fn assemble(
    store: &Store,
    agent: &AgentId,
    config: &AgentConfig,
    history: &[Message],
    counter: &TokenCounter,
) -> Result<(Prompt, WorkingContext), StoreError> {
    let working = WorkingContext::gather(store, agent, latest_input(history), &config.memory)?;
    let built = build(config, &working, history, counter);
    Ok((built, working))
}

/// The prompt the agent's next LLM call would receive if `input` arrived now (`somna prompt`,
/// `somna eval recall`): the stored history plus `input` as a new user turn, nothing written.
pub fn preview(
    store: &Store,
    agent: &AgentId,
    config: &AgentConfig,
    input: &str,
    now: Timestamp,
) -> Result<(Prompt, WorkingContext), StoreError> {
    let counter = TokenCounter::for_model(&config.model);
    let mut history = store.history(agent)?;
    let mut next = Message::user(input).at(now);
    next.seq = store.agent(agent)?.map_or(0, |r| r.next_seq);
    next.tokens = counter.count_message(&next);
    history.push(next);
    assemble(store, agent, config, &history, &counter)
}

/// The most prompt tokens the agent's LLM call may carry: what an over-budget check compares a
/// prompt's `total_tokens()` with.
pub fn budget(config: &AgentConfig) -> u64 {
    u64::from(config.compaction.max_context_tokens)
}

/// The latest user input in `history` (the retrieval query).
pub fn latest_input(history: &[Message]) -> &str {
    history
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.is_normal())
        .map_or("", |m| m.content.as_str())
}

fn excerpt(text: &str, max_chars: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max_chars {
        one_line
    } else {
        let cut: String = one_line.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}
