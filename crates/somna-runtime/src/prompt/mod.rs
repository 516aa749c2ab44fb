//! The agent's prompt: what its LLM call receives, within a budget, in a cache-stable order.
//!
//! **Layout.** `[system: persona + leading summary] [live history, in order] [context note]
//! [latest user turn] [what followed it in this step]`. Everything that is the same from one turn
//! to the next between two compactions — the persona, the summary, the live history — comes first
//! and in order, so a model server's prefix cache (vLLM, llama.cpp, SGLang, OpenAI, Anthropic)
//! reuses it; what changes every turn — the working context, retrieved anew for the latest input —
//! is one system message placed right before the latest user turn, so only it and the newly
//! appended turns are prefilled again. docs/llm.md says more.
//!
//! **Budget.** The window is split explicitly: the reply's reserve (`max_reply_tokens`) is never
//! used; the persona, the summary and the live history take what they need; the working context
//! fills what is left, most relevant first — at least `working_share` of the window, which every
//! usage check reserves for it, and more when the live history is short. A prompt
//! never exceeds `max_context_tokens − max_reply_tokens`: if the live history alone would (the
//! emergency compaction normally prevents it), the oldest turns are left out of this prompt —
//! never out of the store — keeping tool calls with their results.
//!
//! **Working context.** Memory facts, then excerpts of the archive: each hit of the store's index
//! with the turn before it and the reply after it, merged where they overlap, dated and named,
//! in the order they were said.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::rc::Rc;

use rustc_hash::{FxBuildHasher, FxHashMap};
use serde::Serialize;
use somna_core::config::AgentConfig;
use somna_core::message::{Message, MessageKind, Role};
use somna_core::tokens::{REPLY_PRIMING, TokenCounter};
use somna_core::{AgentId, Timestamp};
use somna_llm::ChatMessage;
use somna_store::{Store, StoreError};
use somna_text::cite;

mod working;

pub use working::{Caps, Excerpt, Query, WorkingContext};

/// The working context takes all the room the rest of the prompt leaves up to this many tokens,
/// or `working_share` of the window when that is more: past it, a note would grow with the window
/// though its tokens are prefilled anew every turn (it sits after the cached prefix), and its
/// last hits are the least relevant.
pub const NOTE_ROOM: u64 = 4_096;

/// A built prompt with its token breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    /// What the LLM call receives, in order.
    pub messages: Vec<ChatMessage>,
    /// Per message, its token count (same order as `messages`).
    pub message_tokens: Vec<u32>,
    /// Tokens of the persona (the leading system message without the summary).
    pub persona_tokens: u64,
    /// Tokens of the compaction summaries in the prompt.
    pub summary_tokens: u64,
    /// Tokens of the context note (the working context).
    pub working_tokens: u64,
    /// Tokens of the live turns (summaries excluded).
    pub history_tokens: u64,
    /// The most tokens this prompt may take (`max_context_tokens − max_reply_tokens`).
    pub budget: u64,
    /// The tokens kept free for the reply.
    pub reply_reserve: u64,
    /// Where the context note sits in `messages`, if there is one.
    pub note_index: Option<usize>,
    /// Live turns left out of this prompt (oldest first) because the history alone was over the
    /// budget; they are still in the store.
    pub dropped_turns: usize,
}

impl Prompt {
    /// All prompt tokens: the messages plus the reply priming every chat prompt carries.
    pub fn total_tokens(&self) -> u64 {
        self.message_tokens
            .iter()
            .map(|&t| u64::from(t))
            .sum::<u64>()
            + u64::from(REPLY_PRIMING)
    }
}

/// Builds the messages of the agent's next LLM call from its live `history` and `working`
/// context (see the module docs for the layout and the budget). Leading summaries are merged into
/// the first system message (some chat templates accept only one system message at the start);
/// later summaries stay where the history has them.
pub fn build(
    config: &AgentConfig,
    working: &WorkingContext,
    history: &[Message],
    counter: &TokenCounter,
) -> Prompt {
    let budget = config.compaction.prompt_budget();
    let reply_reserve = u64::from(config.compaction.max_reply_tokens);
    let mut system = config.persona.clone();
    let mut summary_tokens = 0u64;
    let mut rest = history;
    while let Some((first, tail)) = rest.split_first() {
        if first.role == Role::System && matches!(first.kind, MessageKind::Summary(_)) {
            system.push_str("\n\n");
            system.push_str(&shown_summary(first));
            summary_tokens += u64::from(first.tokens);
            rest = tail;
        } else {
            break;
        }
    }
    // The persona counted, each summary by its stored count (which covers the blank line that
    // joins it): the long system message is not tokenized anew on every turn.
    let persona_only = counter.count_fixed_message(Role::System, &config.persona);
    let mut system_tokens =
        persona_only.saturating_add(u32::try_from(summary_tokens).unwrap_or(u32::MAX));
    // Over the budget without a working context: leave the oldest turns out of this prompt.
    let fixed = |system_tokens: u32, rest: &[Message]| {
        u64::from(system_tokens)
            + rest.iter().map(|m| u64::from(m.tokens)).sum::<u64>()
            + u64::from(REPLY_PRIMING)
    };
    let mut dropped_turns = 0;
    while fixed(system_tokens, rest) > budget && rest.len() > 1 {
        let n = droppable_prefix(rest);
        dropped_turns += n;
        rest = &rest[n..];
    }
    if fixed(system_tokens, rest) > budget && summary_tokens > 0 {
        // Even the latest turn does not fit beside the summary: the persona alone, then.
        system = config.persona.clone();
        system_tokens = persona_only;
        summary_tokens = 0;
    }
    let mut persona_tokens = u64::from(system_tokens).saturating_sub(summary_tokens);

    let mut messages = Vec::with_capacity(rest.len() + 2);
    let mut message_tokens = Vec::with_capacity(rest.len() + 2);
    messages.push(ChatMessage::system(system));
    message_tokens.push(system_tokens);
    let mut history_tokens = 0u64;
    for m in rest {
        if matches!(m.kind, MessageKind::Summary(_)) {
            summary_tokens += u64::from(m.tokens);
        } else {
            history_tokens += u64::from(m.tokens);
        }
        let mut chat = ChatMessage::from(m);
        if matches!(m.kind, MessageKind::Summary(_)) {
            // A summary's citations are kept in the store, not shown (docs/prompt.md).
            chat.content = shown_summary(m).to_string();
        }
        messages.push(chat);
        message_tokens.push(m.tokens);
    }
    if fixed(system_tokens, rest) > budget && messages.len() > 1 {
        // A latest turn that alone is over the budget (an input above every limit) is cut: its
        // content shrinks to what the rest leaves beside its fixed cost (role, name, tool calls).
        if let (Some(m), Some(original), Some(last)) =
            (messages.last_mut(), rest.last(), message_tokens.last_mut())
        {
            let frame = counter.count_message(&Message {
                content: String::new(),
                ..original.clone()
            });
            let others = fixed(system_tokens, rest).saturating_sub(u64::from(*last));
            let allowed = budget.saturating_sub(others + u64::from(frame));
            // The margin covers the ellipsis the cut appends.
            m.content = cut_to_tokens(&m.content, allowed.saturating_sub(4), counter);
            if u64::from(counter.count_text(&m.content)) > allowed {
                m.content.clear();
            }
            let cut = frame.saturating_add(counter.count_text(&m.content));
            history_tokens = history_tokens.saturating_sub(u64::from(*last)) + u64::from(cut);
            *last = cut;
        }
    }
    let total = |message_tokens: &[u32]| {
        message_tokens.iter().map(|&t| u64::from(t)).sum::<u64>() + u64::from(REPLY_PRIMING)
    };
    if total(&message_tokens) > budget {
        // Not even the latest turn's fixed cost fits beside the persona (a persona that leaves
        // the window no room, which configuration refuses): the persona is cut.
        let others = total(&message_tokens) - u64::from(message_tokens[0]);
        let frame = counter.count_message(&Message::new(Role::System, ""));
        let allowed = budget.saturating_sub(others + u64::from(frame));
        let mut persona = cut_to_tokens(&messages[0].content, allowed.saturating_sub(4), counter);
        if u64::from(counter.count_text(&persona)) > allowed {
            persona.clear();
        }
        let tokens = frame.saturating_add(counter.count_text(&persona));
        messages[0].content = persona;
        message_tokens[0] = tokens;
        persona_tokens = u64::from(tokens);
    }

    // The working context fills what is left, up to its share of the window.
    let mut working_tokens = 0;
    let mut note_index = None;
    let used = total(&message_tokens);
    // The working context may use whatever the rest leaves free (its share is reserved by the
    // usage formula, so at least that much is free whenever usage is below the thresholds).
    let room = budget.saturating_sub(used);
    if let Some((mut note, estimate)) = working.render(counter, Caps::for_room(room)) {
        let mut tokens = u32::try_from(estimate).unwrap_or(u32::MAX);
        if u64::from(tokens) > room {
            note = cut_to_tokens(&note, room.saturating_sub(8), counter);
            tokens = counter.count_message(&Message::new(Role::System, &note));
        }
        if !note.trim().is_empty() && u64::from(tokens) <= room {
            // Right before the latest user turn; at the end when there is none.
            let at = messages
                .iter()
                .rposition(|m| m.role == Role::User)
                .filter(|&i| i > 0)
                .unwrap_or(messages.len());
            messages.insert(at, ChatMessage::system(note));
            message_tokens.insert(at, tokens);
            working_tokens = u64::from(tokens);
            note_index = Some(at);
        }
    }
    Prompt {
        messages,
        message_tokens,
        persona_tokens,
        summary_tokens,
        working_tokens,
        history_tokens,
        budget,
        reply_reserve,
        note_index,
        dropped_turns,
    }
}

/// The text a summary shows in the prompt: its content without its citations (docs/prompt.md).
/// The same summary is shown on every turn until the next compaction, and stripping a long one
/// costs tens of microseconds (docs/benchmarks.md), so each thread remembers the last summaries it
/// stripped, by seq and a hash of the content (a rolling summary keeps its seq from one generation
/// to the next; its content does not).
fn shown_summary(m: &Message) -> Rc<str> {
    /// Summaries remembered per thread at most; past it the memory starts over.
    const REMEMBERED: usize = 256;
    /// (seq, hash of the content) → (the content, what it shows).
    type Shown = FxHashMap<(u64, u64), (Rc<str>, Rc<str>)>;
    thread_local! {
        static SHOWN: RefCell<Shown> = RefCell::new(Shown::default());
    }
    let key = (m.seq, FxBuildHasher.hash_one(m.content.as_str()));
    SHOWN.with_borrow_mut(|shown| {
        // The content is compared too: a hash says nothing for certain.
        if let Some((content, stripped)) = shown.get(&key)
            && **content == *m.content
        {
            return Rc::clone(stripped);
        }
        if shown.len() >= REMEMBERED {
            shown.clear();
        }
        let stripped: Rc<str> = cite::strip_all(&m.content).into();
        shown.insert(key, (m.content.as_str().into(), Rc::clone(&stripped)));
        stripped
    })
}

/// The tokens of the prompt [`build`] makes without a working context, when the persona, the
/// summaries and the whole live history fit the budget (then nothing is left out or cut, and the
/// total is what they count); `None` when they do not (only `build` knows what it leaves out).
/// Counts what `build` counts without building it: the live turns are not copied.
fn fitting_total(config: &AgentConfig, history: &[Message], counter: &TokenCounter) -> Option<u64> {
    let persona = counter.count_fixed_message(Role::System, &config.persona);
    let total = u64::from(persona)
        + history.iter().map(|m| u64::from(m.tokens)).sum::<u64>()
        + u64::from(REPLY_PRIMING);
    (total <= config.compaction.prompt_budget()).then_some(total)
}

/// How many leading messages of `rest` can leave the prompt together: one, or an assistant turn
/// with tool calls and the tool results that answer it (a cut never separates them). Never the
/// last message.
fn droppable_prefix(rest: &[Message]) -> usize {
    let mut n = 1;
    if rest[0].role == Role::Assistant && !rest[0].tool_calls.is_empty() {
        while n < rest.len() - 1 && rest[n].role == Role::Tool {
            n += 1;
        }
    }
    // Orphaned tool results at the front go with it.
    while n < rest.len() - 1 && rest[n].role == Role::Tool {
        n += 1;
    }
    n.min(rest.len() - 1)
}

/// `text` cut at a word boundary to at most about `tokens` tokens (by `counter`).
fn cut_to_tokens(text: &str, tokens: u64, counter: &TokenCounter) -> String {
    if u64::from(counter.count_text(text)) <= tokens {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    // Binary search on the character count.
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let candidate: String = chars[..mid].iter().collect();
        if u64::from(counter.count_text(&candidate)) < tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut cut: String = chars[..lo].iter().collect();
    if let Some(space) = cut.rfind(char::is_whitespace) {
        cut.truncate(space);
    }
    if cut.is_empty() {
        cut
    } else {
        format!("{cut}…")
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
    assemble_with(store, agent, config, history, None, counter)
}

/// [`assemble`] with the latest input's vector and the model that made it (semantic retrieval).
pub fn assemble_with(
    store: &Store,
    agent: &AgentId,
    config: &AgentConfig,
    history: &[Message],
    semantic: Option<(&str, &[f32])>,
    counter: &TokenCounter,
) -> Result<(Prompt, WorkingContext), StoreError> {
    // What the prompt leaves free without a working context is the working context's room: at
    // least its reserved share while usage is below the thresholds, more when the live history is
    // short.
    // A share of 0 turns the working context off.
    let room = if config.compaction.working_budget() == 0 {
        0
    } else {
        let cap = config.compaction.working_budget().max(NOTE_ROOM);
        let bare = fitting_total(config, history, counter).unwrap_or_else(|| {
            build(config, &WorkingContext::default(), history, counter).total_tokens()
        });
        config
            .compaction
            .prompt_budget()
            .saturating_sub(bare)
            .min(cap)
    };
    let query = Query::latest(history, semantic);
    let working = WorkingContext::gather_with(store, agent, &query, config, counter, room)?;
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
    preview_with(store, agent, config, input, None, now)
}

/// [`preview`] with `input`'s vector and the model that made it (semantic retrieval).
pub fn preview_with(
    store: &Store,
    agent: &AgentId,
    config: &AgentConfig,
    input: &str,
    semantic: Option<(&str, &[f32])>,
    now: Timestamp,
) -> Result<(Prompt, WorkingContext), StoreError> {
    let counter = TokenCounter::for_model(&config.model);
    let mut history = store.history(agent)?;
    let mut next = Message::user(input).at(now);
    next.seq = store.agent(agent)?.map_or(0, |r| r.next_seq);
    next.tokens = counter.count_message(&next);
    history.push(next);
    assemble_with(store, agent, config, &history, semantic, &counter)
}

/// The most tokens the agent's LLM call may carry: what an over-budget check compares a
/// prompt's `total_tokens()` with (`max_context_tokens − max_reply_tokens`).
pub fn budget(config: &AgentConfig) -> u64 {
    config.compaction.prompt_budget()
}

/// The latest user input in `history` (the retrieval query).
pub fn latest_input(history: &[Message]) -> &str {
    latest_user(history).map_or("", |m| m.content.as_str())
}

/// The latest user message of `history` that is an original (not a summary or placeholder).
fn latest_user(history: &[Message]) -> Option<&Message> {
    history
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.is_normal())
}

/// The archived messages that best match `query` (the `recall` tool, `somna search`, the API's
/// archive search): the store's index, originals only.
pub fn search_archive(
    store: &Store,
    agent: &AgentId,
    query: &str,
    k: usize,
) -> Result<Vec<Message>, StoreError> {
    Ok(store
        .search_archive(agent, query, k)?
        .into_iter()
        .map(|h| h.message)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use somna_core::{SummaryMeta, Timestamp};

    /// A history of `n` turns (a leading summary first when `summary`), each counted as stored.
    fn history(n: usize, summary: bool, counter: &TokenCounter) -> Vec<Message> {
        let mut out = Vec::new();
        if summary {
            let mut s = Message::new(
                Role::System,
                format!(
                    "{} The miller owes the smith [1] two sacks.",
                    Message::SUMMARY_PREFIX
                ),
            );
            s.tokens = counter.count_message(&s);
            s.kind = MessageKind::Summary(SummaryMeta {
                covers_from_seq: 0,
                covers_through_seq: 9,
                compacted_count: 10,
                original_tokens: 400,
                summary_tokens: s.tokens,
                generation: 1,
                compacted_at: Timestamp(0),
            });
            out.push(s);
        }
        for i in 0..n {
            let text = "wolves by the mill ".repeat(1 + i % 7);
            let mut m = if i % 2 == 0 {
                Message::user(text).with_name("Aldric")
            } else {
                Message::assistant(text)
            };
            m.seq = 10 + i as u64;
            m.tokens = counter.count_message(&m);
            out.push(m);
        }
        out
    }

    /// The total counted without building is the built prompt's whenever it is given (every
    /// window from far too small to ample; a refused one is built, as before).
    #[test]
    fn the_total_counted_without_building_is_the_built_prompts() {
        let counter = TokenCounter::for_model("gpt-4o");
        let mut config = AgentConfig::with_builtin_defaults(AgentId::new("smith").unwrap());
        config.model = "gpt-4o".into();
        config.compaction.max_reply_tokens = 64;
        let (mut given, mut refused) = (0, 0);
        for summary in [false, true] {
            for n in [1, 2, 5, 20, 60] {
                let history = history(n, summary, &counter);
                for window in (128..4_000).step_by(61) {
                    config.compaction.max_context_tokens = window;
                    let built = build(&config, &WorkingContext::default(), &history, &counter);
                    // Nothing left out or cut: every live turn whole, the persona whole.
                    let live = &history[usize::from(summary)..];
                    let whole = built.dropped_turns == 0
                        && built.messages.len() == live.len() + 1
                        && built.messages[0].content.starts_with(&config.persona)
                        && built.messages[1..]
                            .iter()
                            .zip(live)
                            .all(|(b, m)| b.content == m.content);
                    match fitting_total(&config, &history, &counter) {
                        Some(total) => {
                            given += 1;
                            assert_eq!(total, built.total_tokens(), "{n} turns, window {window}");
                            assert!(
                                whole,
                                "{n} turns, window {window}: the build left something out"
                            );
                        }
                        // Over the budget as stored: `assemble` builds it, as before.
                        None => refused += 1,
                    }
                }
            }
        }
        assert!(
            given > 100 && refused > 30,
            "{given} given, {refused} refused"
        );
    }

    /// A summary is shown without its citations on every build, and a new summary under the
    /// same seq (the next generation of a rolling summary) is shown as it is now, not as the
    /// thread remembered the last one.
    #[test]
    fn a_summary_is_shown_stripped_and_never_as_an_older_one_under_its_seq() {
        let counter = TokenCounter::for_model("gpt-4o");
        let config = AgentConfig::with_builtin_defaults(AgentId::new("smith").unwrap());
        let mut history = history(3, true, &counter);
        history[0].content = format!(
            "{} The miller owes the smith [#1] two sacks.",
            Message::SUMMARY_PREFIX
        );
        for _ in 0..2 {
            let built = build(&config, &WorkingContext::default(), &history, &counter);
            let system = &built.messages[0].content;
            assert!(
                system.ends_with("The miller owes the smith two sacks."),
                "{system}"
            );
        }
        history[0].content = format!(
            "{} The miller paid the smith [#2] in full.",
            Message::SUMMARY_PREFIX
        );
        let built = build(&config, &WorkingContext::default(), &history, &counter);
        let system = &built.messages[0].content;
        assert!(
            system.ends_with("The miller paid the smith in full."),
            "{system}"
        );
        assert!(!system.contains("owes"), "{system}");
    }
}
