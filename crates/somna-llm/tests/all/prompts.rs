//! Snapshots of every request Somna sends for its own work, as `somna_llm::prompts` builds it (the
//! same builders the runtime uses): a change to a prompt's text shows up here as a diff.

use somna_core::config::CompactionConfig;
use somna_core::{JournalEntry, Message, SourceType, Timestamp};
use somna_llm::{ChatRequest, prompts};

/// The request as text: its purpose and limits, then each message with its role.
fn render(request: &ChatRequest) -> String {
    let mut out = format!(
        "purpose: {} · max_tokens: {:?} · temperature: {:?} · tools: {}\n",
        request.purpose,
        request.max_tokens,
        request.temperature,
        request.tools.len()
    );
    for m in &request.messages {
        out.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
    }
    // The structured form: its schema, and the messages that differ from the plain form's.
    if let Some(form) = &request.structured {
        out.push_str(&format!(
            "--- structured form {:?}, schema:\n{}\n",
            form.name,
            serde_json::to_string_pretty(&form.schema).unwrap()
        ));
        for (i, m) in form.messages.iter().enumerate() {
            if request.messages.get(i) == Some(m) {
                out.push_str(&format!("--- structured {} (as above)\n", m.role.as_str()));
            } else {
                out.push_str(&format!(
                    "--- structured {}\n{}\n",
                    m.role.as_str(),
                    m.content
                ));
            }
        }
    }
    out
}

fn entries() -> Vec<JournalEntry> {
    [
        (
            3,
            7,
            SourceType::Observation,
            "Mara said she is allergic to walnuts.",
        ),
        (5, 4, SourceType::Note, "Aldric owes 40 gold for the sword."),
    ]
    .into_iter()
    .map(|(id, importance, source, text)| {
        let mut e = JournalEntry::new(Timestamp(1), source, importance, text);
        e.id = id;
        e
    })
    .collect()
}

fn chunk() -> Vec<Message> {
    let mut a = Message::user("A sword, please. I pay in silver.").with_name("Aldric");
    a.seq = 12;
    let mut b = Message::assistant("Forty gold, ready by day 7.");
    b.seq = 13;
    vec![a, b]
}

#[test]
fn every_request_somna_sends() {
    let cfg = CompactionConfig::default();
    let model = "npc";
    let all = [
        ("summary", prompts::summary_request(model, &cfg, &chunk())),
        (
            "merge",
            prompts::merge_request(
                model,
                &cfg,
                &["## Topic arc\n- a".into(), "## Topic arc\n- b".into()],
            ),
        ),
        ("extraction", prompts::extract_request(model, &chunk())),
        (
            "consolidation",
            prompts::consolidate_request(model, &entries()),
        ),
        (
            "reflection",
            prompts::reflect_request(model, "You are Wren, the steward of Millbrook.", &entries()),
        ),
        (
            "score",
            prompts::score_request(model, "Mara is moving to Eastmere."),
        ),
    ];
    let text = all
        .iter()
        .map(|(name, r)| format!("=== {name}\n{}", render(r)))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text);
}
