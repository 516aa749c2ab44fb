//! A model that invents on purpose: [`inventing_reply`] answers Somna's memory requests (summary,
//! merge, extraction, consolidation, reflection) with well-formed answers — JSON when the request
//! asks for a schema, text otherwise — whose items mix true ones (a turn's or an entry's own first
//! sentence, citing it) with items carrying names, prices, ledger IDs, dates and a plain word
//! found nowhere in the request ([`INVENTED`]), with right-looking, wrong, out-of-range and missing citations.
//! Tests check that none of [`INVENTED`] is ever committed to history, journal or memory.

use serde_json::{Value, json};

use super::{RecordedRequest, Reply};

/// Every value the inventing stub makes up. None of them occurs in any fixture: a test that finds
/// one in what Somna committed has found an invented value committed as memory.
pub const INVENTED: [&str; 10] = [
    "kombucha",
    "Zorbath",
    "Quillane",
    "Ignatz",
    "9871",
    "4,321",
    "QX-5531",
    "ZR-8820",
    "2031-03-17",
    "6113",
];

/// What a memory request asks for, read from its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Summary,
    Extraction,
    Consolidation,
    Reflection,
    Chat,
}

fn kind(request: &RecordedRequest) -> Kind {
    let system = request.last_content("system").unwrap_or_default();
    if system.contains("List the notable, durable facts") {
        Kind::Extraction
    } else if system.contains("consolidate a character's journal") {
        Kind::Consolidation
    } else if system.contains("Look back on your recent journal") {
        Kind::Reflection
    } else if request.asks_for_summary() || system.contains("partial summaries") {
        Kind::Summary
    } else {
        Kind::Chat
    }
}

/// One true item: a source's number and its first sentence.
fn truths(request: &RecordedRequest, kind: Kind) -> Vec<(u64, String)> {
    let user = request.last_content("user").unwrap_or_default();
    let mut out = Vec::new();
    for line in user.lines() {
        let Some(rest) = line.strip_prefix("[#") else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse::<u64>() else {
            continue;
        };
        let Some((header, text)) = rest.split_once("] ") else {
            continue;
        };
        // Transcript turns by people only (not tool results or calls); entries all.
        if matches!(kind, Kind::Summary | Kind::Extraction)
            && !(header.contains(" user") || header.contains(" assistant"))
        {
            continue;
        }
        let text = strip_tags(text);
        let sentence = text
            .split_inclusive(['.', '!', '?'])
            .next()
            .unwrap_or(text)
            .trim()
            .to_string();
        if sentence.len() >= 12 {
            out.push((n, sentence));
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}

/// An entry listing's `(importance N)` / `(source)` tag dropped.
fn strip_tags(text: &str) -> &str {
    match text.strip_prefix('(').and_then(|r| r.split_once(") ")) {
        Some((_, after)) => after,
        None => text,
    }
}

/// The invented items, each with what it cites (`first`: a source that exists).
fn inventions(first: u64) -> Vec<(String, Vec<u64>)> {
    vec![
        (
            "Zorbath sold the blue ribbon for 9871 silver".into(),
            vec![first],
        ),
        (
            "The ledger QX-5531 was settled on 2031-03-17".into(),
            vec![first],
        ),
        ("Quillane paid 4,321 gold for the marsh map".into(), vec![]),
        (
            "Brother Ignatz keeps ledger ZR-8820 with 6113 crowns".into(),
            vec![999_999],
        ),
        // No name, number or date: a word nobody said.
        (
            "Everyone at the mill brews kombucha by the barrel".into(),
            vec![first],
        ),
    ]
}

/// The inventing model's answer to `request` (see the module docs).
pub fn inventing_reply(request: &RecordedRequest) -> Reply {
    let kind = kind(request);
    let json = matches!(
        request.response_format(),
        Some("json_schema" | "json_object")
    );
    let truths = truths(request, kind);
    let first = truths.first().map_or(0, |t| t.0);
    let mut items: Vec<(String, Vec<u64>)> = Vec::new();
    let mut invented = inventions(first).into_iter();
    for (n, sentence) in &truths {
        items.push((sentence.clone(), vec![*n]));
        if let Some(i) = invented.next() {
            items.push(i);
        }
    }
    items.extend(invented);
    let cited = |(text, sources): &(String, Vec<u64>)| {
        if sources.is_empty() {
            text.clone()
        } else {
            let marks: Vec<String> = sources.iter().map(|s| format!("#{s}")).collect();
            format!("{text} [{}]", marks.join(", "))
        }
    };
    let object =
        |key: &str, (text, sources): &(String, Vec<u64>)| json!({ key: text, "sources": sources });
    let text = match (kind, json) {
        (Kind::Chat, _) => "Of course.".to_string(),
        (Kind::Summary, true) => {
            let notes: Vec<Value> = items.iter().map(|i| object("note", i)).collect();
            let half = notes.len() / 2;
            json!({
                "topic_arc": notes[..half],
                "decisions": notes[half..],
                "pending": [],
                "user_facts": [],
                "artifacts": [],
            })
            .to_string()
        }
        (Kind::Summary, false) => {
            let half = items.len() / 2;
            let lines = |part: &[(String, Vec<u64>)]| {
                part.iter()
                    .map(|i| format!("- {}", cited(i)))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            format!(
                "## Topic arc\n{}\n\n## Decisions\n{}\n\n## Pending\n(none)\n\n## User facts\n(none)\n\n## Artifacts\n(none)",
                lines(&items[..half]),
                lines(&items[half..])
            )
        }
        (Kind::Consolidation, true) => {
            let facts: Vec<Value> = items.iter().map(|i| object("fact", i)).collect();
            json!({ "facts": facts }).to_string()
        }
        (Kind::Extraction | Kind::Consolidation | Kind::Reflection, _) => items
            .iter()
            .map(|i| format!("- {}", cited(i)))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    Reply::text(text)
}
