//! Heuristic importance scores, pre-compaction fact extraction, consolidation and reflection.

use std::collections::BTreeSet;

use somna_core::Role;

use crate::cite;
use crate::extractive::FACT_CUES;
use crate::transcript::Turn;
use crate::words::{self as text, EntityCounter};

/// Sentences scoring at least this much are extracted as facts.
pub const EXTRACT_MIN_IMPORTANCE: u8 = 5;

/// Sentences scoring at least this much survive consolidation.
pub const CONSOLIDATE_MIN_IMPORTANCE: u8 = 4;

const SMALL_TALK: &[&str] = &[
    "hello",
    "hi",
    "hey",
    "thanks",
    "thank you",
    "ok",
    "okay",
    "goodnight",
    "good night",
    "good morning",
    "bye",
    "goodbye",
    "see you",
    "cheers",
];

const LIFE_EVENTS: &[&str] = &[
    "married",
    "wedding",
    "divorce",
    "died",
    "dead",
    "death",
    "funeral",
    "born",
    "pregnant",
    "baby",
    "sick",
    "ill",
    "injured",
    "hurt",
    "attack",
    "attacked",
    "fire",
    "war",
    "stolen",
    "robbed",
    "moving to",
    "moved",
    "lost",
    "promoted",
    "fired",
    "new job",
    "allergic",
    "arrested",
    "wolves",
    "wolf",
];

const EMOTIONS: &[&str] = &[
    "love", "hate", "afraid", "scared", "angry", "furious", "worried", "happy", "sad", "grief",
    "proud", "ashamed",
];

const DECISION_WORDS: &[&str] = &[
    "decided",
    "agreed",
    "let's",
    "settled on",
    "we will",
    "promise",
    "promised",
    "confirmed",
];

const TASK_WORDS: &[&str] = &[
    "need to",
    "needs to",
    "todo",
    "must",
    "have to",
    "has to",
    "pending",
    "remind me",
    "don't forget",
    "due",
];

/// The item of `items` whose `text` has the highest [`score_importance`]; the earliest of those
/// on a tie; `None` when there are none.
pub fn most_important<T>(items: &[T], text: impl Fn(&T) -> &str) -> Option<&T> {
    items
        .iter()
        .enumerate()
        .max_by(|a, b| {
            score_importance(text(a.1))
                .cmp(&score_importance(text(b.1)))
                .then(b.0.cmp(&a.0))
        })
        .map(|(_, item)| item)
}

/// A heuristic importance score, 1 (small talk) to 10 (life-changing): facts about people, decisions, tasks,
/// life events, strong feelings, names and numbers raise it; questions and very short texts lower it.
pub fn score_importance(text: &str) -> u8 {
    let norm = text::normalized(text);
    let words = text::words(text);
    if text::content_words(text).is_empty() {
        return 1;
    }
    if words.len() <= 4 && text::has_cue(&norm, SMALL_TALK) {
        return 1;
    }
    let mut score: i32 = 2;
    if text::has_cue(&norm, FACT_CUES) {
        score += 3;
    }
    if text::has_cue(&norm, DECISION_WORDS) {
        score += 3;
    }
    if text::has_cue(&norm, TASK_WORDS) {
        score += 2;
    }
    if text::has_cue(&norm, LIFE_EVENTS) {
        score += 3;
    }
    if text::has_cue(&norm, EMOTIONS) {
        score += 1;
    }
    if text::has_number(text) {
        score += 1;
    }
    let names = text::entity_runs(text)
        .iter()
        .filter(|(_, initial)| !initial)
        .count();
    score += names.min(2) as i32;
    if text.trim_end().ends_with('?') {
        score -= 1;
    }
    if text.trim().chars().count() < 25 {
        score -= 1;
    }
    score.clamp(1, 10) as u8
}

/// The notable facts of `turns` with an importance each, chronological and deduplicated: every sentence
/// (user, assistant) that scores at least [`EXTRACT_MIN_IMPORTANCE`], as `speaker: sentence`. Earlier
/// summaries and tool output are skipped (they were journaled when they were made).
pub fn extract_facts(turns: &[Turn]) -> Vec<(String, u8)> {
    let mut out: Vec<(String, u8, BTreeSet<String>)> = Vec::new();
    for turn in turns {
        if turn.is_summary() || matches!(turn.role, Role::Tool | Role::System) {
            continue;
        }
        for sentence in text::sentences(&turn.content) {
            if sentence.trim_end().ends_with('?') {
                continue;
            }
            let mut importance = score_importance(&sentence);
            if turn.role == Role::User && text::has_cue(&text::normalized(&sentence), FACT_CUES) {
                importance = (importance + 1).min(10);
            }
            if importance < EXTRACT_MIN_IMPORTANCE {
                continue;
            }
            let words = text::content_words(&sentence);
            if out.iter().any(|(_, _, w)| text::jaccard(w, &words) >= 0.6) {
                continue;
            }
            let fact = cite::with_marker(&format!("{}: {sentence}", turn.speaker()), &[turn.seq]);
            out.push((fact, importance, words));
        }
    }
    out.into_iter()
        .map(|(fact, importance, _)| (fact, importance))
        .collect()
}

/// Durable facts from journal entries (with their ids, when listed with one): their sentences
/// that score at least [`CONSOLIDATE_MIN_IMPORTANCE`], without near-duplicates, in the entries'
/// order, each citing its entry (`fact [#id]`).
pub fn consolidate(entries: &[(Option<u64>, String)]) -> Vec<String> {
    let mut out: Vec<(String, BTreeSet<String>)> = Vec::new();
    for (id, entry) in entries {
        for sentence in text::sentences(&cite::strip_all(strip_importance(entry))) {
            if score_importance(&sentence) < CONSOLIDATE_MIN_IMPORTANCE {
                continue;
            }
            let words = text::content_words(&sentence);
            if out.iter().any(|(_, w)| text::jaccard(w, &words) >= 0.6) {
                continue;
            }
            let ids: Vec<u64> = id.iter().copied().collect();
            out.push((cite::with_marker(&sentence, &ids), words));
        }
    }
    out.into_iter().map(|(s, _)| s).collect()
}

/// A short reflection over journal entries: who and what they keep coming back to, and the entry that
/// matters most.
/// The reflection cites the entries it names people from and the one it quotes (`[#id]`, when
/// they were listed with ids).
pub fn reflect(entries: &[(Option<u64>, String)]) -> String {
    let entries: Vec<(Option<u64>, String)> = entries
        .iter()
        .map(|(id, e)| (*id, cite::strip_all(strip_importance(e)).trim().to_string()))
        .filter(|(_, e)| !e.is_empty())
        .collect();
    let Some((top_id, top)) = most_important(&entries, |(_, e)| e.as_str()).cloned() else {
        return "Reflection: nothing notable happened.".to_string();
    };
    let mut counter = EntityCounter::default();
    for (_, e) in &entries {
        for s in text::sentences(e) {
            counter.add_sentence(&s);
        }
    }
    let names: Vec<String> = counter
        .recurring(1)
        .into_iter()
        .take(2)
        .map(|(n, _)| n)
        .collect();
    let mut cites: Vec<u64> = top_id.into_iter().collect();
    for name in &names {
        let first = entries
            .iter()
            .find(|(_, e)| text::contains_phrase(e, name))
            .and_then(|(id, _)| *id);
        if let Some(id) = first.filter(|id| !cites.contains(id)) {
            cites.push(id);
        }
    }
    let about = match names.as_slice() {
        [] => String::new(),
        [one] => format!("Lately much has revolved around {one}. "),
        [one, two, ..] => format!("Lately much has revolved around {one} and {two}. "),
    };
    cite::with_marker(
        &format!("Reflection: {about}What matters most: {top}"),
        &cites,
    )
}

/// Drops a leading `- ` bullet and a `[importance N]` or `(N)` tag.
fn strip_importance(entry: &str) -> &str {
    let e = entry.trim();
    let e = e.strip_prefix("- ").unwrap_or(e);
    if let Some(rest) = e.strip_prefix('[') {
        if let Some((tag, after)) = rest.split_once(']') {
            if tag.chars().any(|c| c.is_ascii_digit()) {
                return after.trim_start();
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_rank_what_matters() {
        let small = score_importance("Hello there!");
        let chat = score_importance("The weather has been nice.");
        let fact = score_importance("My name is Mara and I am allergic to walnuts.");
        let event = score_importance(
            "Captain Hale said wolves attacked Bram's sheep at the North Pasture.",
        );
        let decision =
            score_importance("We decided the Harvest Festival is on the 14th of Brightmoon.");
        assert_eq!(small, 1);
        assert!(chat < fact, "{chat} < {fact}");
        assert!(chat < event, "{chat} < {event}");
        assert!(chat < decision, "{chat} < {decision}");
        for s in [small, chat, fact, event, decision] {
            assert!((1..=10).contains(&s));
        }
    }

    #[test]
    fn extracts_notable_sentences() {
        let turns = vec![
            Turn::new(1, Role::User, "Hi! My name is Mara Fenwick. Nice weather.")
                .with_name("Mara"),
            Turn::new(
                2,
                Role::Assistant,
                "We decided the festival is on the 14th at the Old Mill.",
            ),
            Turn::new(3, Role::Tool, "{\"ok\": true}"),
            Turn::new(4, Role::User, "My name is Mara Fenwick!").with_name("Mara"),
        ];
        let facts = extract_facts(&turns);
        let texts: Vec<&str> = facts.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Mara: My name is Mara Fenwick. [#1]",
                "assistant: We decided the festival is on the 14th at the Old Mill. [#2]"
            ]
        );
        assert!(facts.iter().all(|(_, i)| *i >= EXTRACT_MIN_IMPORTANCE));
    }

    #[test]
    fn consolidates_and_reflects() {
        let entries = vec![
            (
                Some(1),
                "[importance 7] Mara is allergic to walnuts.".to_string(),
            ),
            (Some(2), "- Mara is allergic to walnuts!".to_string()),
            (None, "ok".to_string()),
            (
                Some(4),
                "Tobin needs to repair Thornwick Bridge before the festival. [#12]".to_string(),
            ),
        ];
        assert_eq!(
            consolidate(&entries),
            vec![
                "Mara is allergic to walnuts. [#1]",
                "Tobin needs to repair Thornwick Bridge before the festival. [#4]"
            ]
        );
        let r = reflect(&entries);
        assert!(
            r.starts_with("Reflection: Lately much has revolved around"),
            "{r}"
        );
        assert!(r.contains("Mara"), "{r}");
        assert!(r.ends_with("[#1, #4]"), "{r}");
        assert_eq!(reflect(&[]), "Reflection: nothing notable happened.");
    }
}
