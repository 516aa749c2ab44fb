//! The `somna` binary end to end: exit codes, import/export, prompt preview.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

fn somna(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_somna"))
        .current_dir(dir)
        .args(args)
        .env_remove("SOMNA_CONFIG")
        .env_remove("SOMNA_DB")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const CONFIG: &str = r#"
[store]
path = "db"
[defaults]
persona = "You are Brenna, the village smith."
[defaults.compaction]
max_context_tokens = 2000
preserve_messages = 10
summary_max_tokens = 500
sections = { topic_arc = 150, decisions = 100, pending = 100, user_facts = 80, artifacts = 60 }
"#;

#[test]
fn check_config_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.toml"), CONFIG).unwrap();
    let o = somna(dir.path(), &["check-config", "ok.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(
        dir.path().join("bad.toml"),
        "[defaults.compaction]\nsleep_threshold = 0.9\nemergency_threshold = 0.8\n[[agents]]\nid = \"a b\"\n",
    )
    .unwrap();
    let o = somna(dir.path(), &["check-config", "bad.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("emergency_threshold"), "{t}");
    assert!(t.contains("agents[0].id"), "{t}");
    let o = somna(dir.path(), &["check-config", "missing.toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("cannot read config file missing.toml"));
}

/// A conversation in OpenAI JSONL with tool calls, `n` lines.
fn conversation(n: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    let mut lines = 0;
    while lines < n {
        let line = match i % 10 {
            3 if lines + 2 <= n => {
                lines += 1;
                out.push_str(&format!(
                    "{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"id\":\"c{i}\",\"type\":\"function\",\"function\":{{\"name\":\"inventory\",\"arguments\":\"{{}}\"}}}}]}}\n"
                ));
                format!(
                    "{{\"role\":\"tool\",\"content\":\"{} ingots\",\"tool_call_id\":\"c{i}\"}}",
                    i % 40
                )
            }
            k if k % 2 == 0 => format!(
                "{{\"role\":\"user\",\"content\":\"Message {i}: the wolves near the mill took {} sheep; Aldric will pay {} silver.\",\"name\":\"Aldric\"}}",
                i % 9,
                i % 50
            ),
            _ => format!(
                "{{\"role\":\"assistant\",\"content\":\"Reply {i}: we agreed to meet at the north gate on day {}.\"}}",
                i % 7
            ),
        };
        out.push_str(&line);
        out.push('\n');
        lines += 1;
        i += 1;
    }
    out
}

#[test]
fn import_export_round_trip_of_10000_messages_and_prompt_preview() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), CONFIG).unwrap();
    let input = conversation(10_000);
    let mut f = std::fs::File::create(dir.path().join("talk.jsonl")).unwrap();
    f.write_all(input.as_bytes()).unwrap();
    drop(f);

    let o = somna(dir.path(), &["import", "smith", "talk.jsonl", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("imported 10000 messages into smith"), "{t}");
    assert!(
        !t.contains("compaction(s)") || !t.contains(" 0 compaction(s)"),
        "{t}"
    );

    let o = somna(dir.path(), &["export", "smith", "--openai"]);
    assert!(o.status.success(), "{}", text(&o));
    let exported = String::from_utf8(o.stdout).unwrap();
    assert_eq!(exported.lines().count(), 10_000);
    assert_eq!(exported, input, "the same messages come back, in order");

    // Invariants hold after ~100 compactions.
    let o = somna(dir.path(), &["check"]);
    assert!(o.status.success(), "{}", text(&o));

    // Sleep consolidates the extraction entries into facts.
    let o = somna(dir.path(), &["sleep", "smith"]);
    assert!(o.status.success(), "{}", text(&o));

    // The prompt of a compacted agent: the summary, the tail, the retrieved working context.
    let o = somna(
        dir.path(),
        &[
            "prompt",
            "smith",
            "--input",
            "Message 42: what about the wolves near the mill?",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let messages = v["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are Brenna, the village smith."),
        "{system}"
    );
    assert!(system.contains("[CONTEXT SUMMARY]"), "{system}");
    assert!(
        system.contains("## Earlier conversation that may be relevant (archived)"),
        "{system}"
    );
    assert!(
        !v["working_context"]["archived"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(messages.len() > 10, "the tail follows the summary");
    assert_eq!(
        messages.last().unwrap()["content"],
        "Message 42: what about the wolves near the mill?"
    );
    // The text form names the sections too.
    let o = somna(dir.path(), &["prompt", "smith", "--input", "wolves"]);
    let t = text(&o);
    assert!(
        t.contains("working context") && t.contains("[CONTEXT SUMMARY]"),
        "{t}"
    );
}

#[test]
fn journal_and_errors_for_unknown_agents() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), CONFIG).unwrap();
    std::fs::write(dir.path().join("t.jsonl"), conversation(400)).unwrap();
    assert!(
        somna(dir.path(), &["import", "smith", "t.jsonl", "-q"])
            .status
            .success()
    );
    let o = somna(
        dir.path(),
        &[
            "journal",
            "smith",
            "--source",
            "compaction",
            "--since",
            "1d",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!entries.is_empty());
    assert!(
        entries
            .iter()
            .all(|e| e["source_type"] == "compaction" && e["importance"] == 7)
    );
    let o = somna(dir.path(), &["history", "nobody"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("unknown agent \"nobody\""),
        "{}",
        text(&o)
    );
    let o = somna(
        dir.path(),
        &["journal", "smith", "--since", "yesterday-ish"],
    );
    assert!(text(&o).contains("--since"), "{}", text(&o));
    let o = somna(
        dir.path(),
        &["configure", "smith", "compaction.emergency_threshold=0.5"],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("emergency_threshold"), "{}", text(&o));
}

/// Issue 10 item 5: `somna send` refuses input over the agent's `max_input_tokens` with exit 2 and
/// a message naming the limit; nothing is written.
#[test]
fn send_refuses_input_over_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), CONFIG).unwrap();
    let o = somna(dir.path(), &["create", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    // (0.8 × 2000 − 500) / 2 = 550 tokens.
    let big = "The miller's cart lost a wheel by the north gate. ".repeat(200);
    let o = somna(dir.path(), &["send", "smith", &big]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("above this agent's limit of 550 (compaction.max_input_tokens)"),
        "{t}"
    );
    let o = somna(dir.path(), &["history", "smith", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let history: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(history.is_empty(), "nothing was written: {history:?}");
    let o = somna(dir.path(), &["send", "smith", "Good morning."]);
    assert!(o.status.success(), "{}", text(&o));
}
