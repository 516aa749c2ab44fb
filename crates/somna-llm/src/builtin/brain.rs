//! The scripted agent brain of the builtin provider: answers in persona from templates, varied
//! deterministically by the input, recalls what it was told (also through summaries and memory in the
//! prompt), and notes notable things with a `journal_add` tool call when that tool is offered.

use std::collections::BTreeSet;

use somna_core::{Role, ToolCall};
use somna_text::score_importance;
use somna_text::words as text;

use crate::types::{ChatMessage, ChatRequest};

/// The name of the tool the brain calls to write a journal note.
pub const JOURNAL_TOOL: &str = "journal_add";

/// User messages scoring at least this much are noted in the journal.
pub const NOTABLE_IMPORTANCE: u8 = 6;

/// The brain's answer: text, or a tool call (with empty text).
pub(crate) fn reply(request: &ChatRequest) -> (String, Vec<ToolCall>) {
    let persona = Persona::from_prompt(request.system_prompt().unwrap_or(""));
    let Some(last) = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role != Role::System)
    else {
        return (persona.greeting(None, 0), Vec::new());
    };
    if last.role == Role::Tool {
        return (after_tool(request, last, &persona), Vec::new());
    }
    let said = last.content.trim();
    let seed = text::stable_hash(&format!(
        "{}\u{1f}{said}",
        persona.name.as_deref().unwrap_or("")
    ));
    let context = &request.messages[..request.messages.len().saturating_sub(1)];
    let speaker = last.name.clone().or_else(|| recall_user_name(context));
    let norm = text::normalized(said);

    if said.ends_with('?') {
        return (
            answer(said, &norm, context, speaker.as_deref(), seed),
            Vec::new(),
        );
    }
    let importance = score_importance(said);
    if importance >= NOTABLE_IMPORTANCE && request.offers_tool(JOURNAL_TOOL) {
        let note = notable_sentence(said);
        let who = speaker.as_deref().unwrap_or("Someone");
        let arguments = serde_json::json!({
            "content": format!("{who} told me: {note}"),
            "importance": importance,
        });
        let call = ToolCall {
            id: format!("call_{:016x}", seed),
            name: JOURNAL_TOOL.to_string(),
            arguments: arguments.to_string(),
        };
        return (String::new(), vec![call]);
    }
    if is_greeting(&norm) {
        return (persona.greeting(speaker.as_deref(), seed), Vec::new());
    }
    if importance >= NOTABLE_IMPORTANCE {
        return (acknowledge(said, speaker.as_deref(), seed), Vec::new());
    }
    (
        small_talk(said, speaker.as_deref(), &persona, seed),
        Vec::new(),
    )
}

/// Who the brain is, from its system prompt ("You are Wren, the steward of Millbrook.").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Persona {
    /// The character's name, when the prompt gives one.
    pub name: Option<String>,
    /// What the character is ("the steward of Millbrook").
    pub role: Option<String>,
}

impl Persona {
    pub(crate) fn from_prompt(prompt: &str) -> Persona {
        let first = text::first_sentence(prompt).unwrap_or_default();
        let lower = first.to_lowercase();
        let Some(at) = ["you are ", "your name is ", "i am "]
            .iter()
            .find_map(|p| lower.find(p).map(|i| i + p.len()))
        else {
            return Persona::default();
        };
        let rest = first[at..].trim_end_matches(['.', '!']);
        let (head, tail) = match rest.split_once(',') {
            Some((h, t)) => (h.trim(), Some(t.trim())),
            None => (rest.trim(), None),
        };
        let is_name = head
            .split_whitespace()
            .all(|w| w.chars().next().is_some_and(char::is_uppercase))
            && !head.is_empty()
            && head.split_whitespace().count() <= 3;
        if is_name {
            Persona {
                name: Some(head.to_string()),
                role: tail.filter(|t| !t.is_empty()).map(str::to_string),
            }
        } else {
            Persona {
                name: None,
                role: Some(rest.trim().to_string()).filter(|r| !r.is_empty()),
            }
        }
    }

    fn greeting(&self, speaker: Option<&str>, seed: u64) -> String {
        let to = speaker.map(|s| format!(", {s}")).unwrap_or_default();
        let me = match (&self.name, &self.role) {
            (Some(n), Some(r)) => format!("{n} here, {r}."),
            (Some(n), None) => format!("{n} here."),
            (None, Some(r)) => format!("I'm {r}."),
            (None, None) => String::new(),
        };
        let templates = [
            format!("Good day{to}! {me} What brings you by?"),
            format!("Well met{to}. {me} How can I help?"),
            format!("Hello{to}! {me} What's on your mind today?"),
        ];
        pick(&templates, seed)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn pick(templates: &[String], seed: u64) -> String {
    let i = (seed % templates.len() as u64) as usize;
    templates[i].clone()
}

fn is_greeting(norm: &str) -> bool {
    [
        "hello",
        "hi",
        "hey",
        "greetings",
        "good morning",
        "good evening",
        "good afternoon",
        "well met",
    ]
    .iter()
    .any(|g| norm.starts_with(&format!(" {g} ")))
}

/// The most notable sentence of a message.
fn notable_sentence(said: &str) -> String {
    let sentences = text::sentences(said);
    somna_text::most_important(&sentences, String::as_str)
        .cloned()
        .unwrap_or_else(|| said.to_string())
}

/// What the conversation is about: the first name mentioned, else the longest content word.
fn topic(said: &str) -> String {
    if let Some((name, _)) = text::entity_runs(said)
        .into_iter()
        .find(|(_, initial)| !initial)
    {
        return name;
    }
    text::content_words(said)
        .into_iter()
        .max_by(|a, b| a.len().cmp(&b.len()).then(b.cmp(a)))
        .unwrap_or_else(|| "that".to_string())
}

fn acknowledge(said: &str, speaker: Option<&str>, seed: u64) -> String {
    let to = speaker.map(|s| format!(", {s}")).unwrap_or_default();
    let topic = topic(said);
    let templates = [
        format!("That is worth remembering{to}. I'll keep {topic} in mind."),
        format!("I won't forget that{to}. Tell me more about {topic}."),
        format!("Thank you for telling me{to}. {topic} matters, I can see that."),
    ];
    pick(&templates, seed)
}

fn small_talk(said: &str, speaker: Option<&str>, persona: &Persona, seed: u64) -> String {
    let to = speaker.map(|s| format!(", {s}")).unwrap_or_default();
    let topic = topic(said);
    let me = persona.name.as_deref().unwrap_or("I");
    let templates = [
        format!("I see{to}. Tell me more about {topic}."),
        format!("Hm, {topic}. {me} will think about that."),
        format!("Is that so{to}? There is always something new about {topic}."),
        format!("Interesting{to}. What else about {topic}?"),
    ];
    pick(&templates, seed)
}

/// Answers a question from what the context says (summaries and memory included).
fn answer(
    question: &str,
    norm: &str,
    context: &[ChatMessage],
    speaker: Option<&str>,
    seed: u64,
) -> String {
    let to = speaker.map(|s| format!(", {s}")).unwrap_or_default();
    if [" my name ", " who am i "].iter().any(|c| norm.contains(c)) {
        return match recall_user_name(context) {
            Some(name) => format!("You're {name}, of course."),
            None => "I don't think you've told me your name yet.".to_string(),
        };
    }
    let keys: BTreeSet<String> = text::content_words(question);
    let mut best: Option<(usize, String)> = None;
    for message in context.iter().filter(|m| m.role != Role::Tool) {
        // Sentences never span lines, and a line that holds none of the keys anywhere has no
        // sentence that does: most lines of a long prompt are passed over unsplit.
        let lines = message.content.lines().filter(|line| {
            let lower = text::lowered(line);
            keys.iter().any(|k| lower.contains(k.as_str()))
        });
        for sentence in lines.flat_map(text::sentences) {
            if sentence.ends_with('?') || sentence.starts_with('#') {
                continue;
            }
            let overlap = text::content_overlap(&sentence, &keys);
            if overlap > 0 && best.as_ref().is_none_or(|(o, _)| overlap > *o) {
                best = Some((overlap, sentence));
            }
        }
    }
    let needed = if keys.len() >= 3 { 2 } else { 1 };
    match best {
        Some((overlap, sentence)) if overlap >= needed => {
            let templates = [
                format!("From what I remember{to}: {sentence}"),
                format!("If I recall correctly: {sentence}"),
            ];
            pick(&templates, seed)
        }
        _ => {
            let templates = [
                format!("I'm not sure{to}. I'll ask around."),
                format!("I don't know yet{to}, but I'll find out."),
                format!("Good question{to}. Nobody has told me."),
            ];
            pick(&templates, seed)
        }
    }
}

/// The user's name, as the context states it: "my name is Mara" in a user message, or in a line labelled
/// with a user's name inside a summary or memory ("- Mara: My name is Mara Fenwick."), else the name of
/// the latest user message.
fn recall_user_name(context: &[ChatMessage]) -> Option<String> {
    for message in context.iter().rev() {
        if message.role == Role::Tool {
            continue;
        }
        for line in message.content.lines().rev() {
            let line = line.trim();
            let line = line.strip_prefix("- ").unwrap_or(line);
            let said_by_user = message.role == Role::User
                || line.split_once(": ").is_some_and(|(label, _)| {
                    !matches!(label, "assistant" | "system" | "tool")
                        && (1..=3).contains(&label.split_whitespace().count())
                        && label.chars().next().is_some_and(char::is_uppercase)
                });
            if said_by_user {
                if let Some(name) = name_after_cue(line) {
                    return Some(name);
                }
            }
        }
        if let (Role::User, Some(name)) = (message.role, &message.name) {
            return Some(name.clone());
        }
    }
    None
}

fn name_after_cue(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    for cue in ["my name is ", "call me "] {
        if let Some(i) = lower.rfind(cue) {
            let name: Vec<&str> = line[i + cue.len()..]
                .split_whitespace()
                .take_while(|w| w.chars().next().is_some_and(char::is_uppercase))
                .take(3)
                .map(|w| w.trim_end_matches(|c: char| !c.is_alphanumeric()))
                .collect();
            if !name.is_empty() {
                return Some(name.join(" "));
            }
        }
    }
    None
}

/// After a tool result: confirm a journal note, or report what the tool said.
fn after_tool(request: &ChatRequest, result: &ChatMessage, persona: &Persona) -> String {
    let tool = result
        .tool_call_id
        .as_deref()
        .and_then(|id| {
            request
                .messages
                .iter()
                .flat_map(|m| m.tool_calls.iter())
                .find(|c| c.id == id)
        })
        .map(|c| c.name.clone())
        .or_else(|| result.name.clone())
        .unwrap_or_else(|| "the tool".to_string());
    let asker = request.messages.iter().rev().find(|m| m.role == Role::User);
    let speaker = asker
        .and_then(|m| m.name.clone())
        .or_else(|| recall_user_name(&request.messages));
    let to = speaker
        .as_deref()
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    let seed = text::stable_hash(&result.content);
    if tool == JOURNAL_TOOL {
        let topic = asker
            .map(|m| topic(&m.content))
            .unwrap_or_else(|| "that".to_string());
        let templates = [
            format!("I've written that down{to}. I'll remember {topic}."),
            format!("Noted in my journal{to}. {topic} won't slip my mind."),
        ];
        return pick(&templates, seed);
    }
    let me = persona.name.as_deref().unwrap_or("I");
    format!(
        "{me} checked {tool}{to}: {}",
        crate::error::excerpt(&result.content, 160)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_persona() {
        assert_eq!(
            Persona::from_prompt("You are Wren, the steward of Millbrook. Be kind."),
            Persona {
                name: Some("Wren".into()),
                role: Some("the steward of Millbrook".into())
            }
        );
        assert_eq!(
            Persona::from_prompt("You are a helpful assistant."),
            Persona {
                name: None,
                role: Some("a helpful assistant".into())
            }
        );
        assert_eq!(Persona::from_prompt(""), Persona::default());
    }

    #[test]
    fn recalls_the_name_from_a_summary() {
        let context = vec![
            ChatMessage::system("You are Wren."),
            ChatMessage::assistant(
                "[CONTEXT SUMMARY]\n## User facts\n- Mara: My name is Mara Fenwick.",
            ),
            ChatMessage::user("hello"),
        ];
        assert_eq!(recall_user_name(&context).as_deref(), Some("Mara Fenwick"));
        let context = vec![
            ChatMessage::assistant("My name is Wren."),
            ChatMessage::system("- assistant: my name is Wren"),
        ];
        assert_eq!(recall_user_name(&context), None);
        let context = vec![ChatMessage::user("My name is Mara Fenwick, baker.")];
        assert_eq!(recall_user_name(&context).as_deref(), Some("Mara Fenwick"));
    }
}
