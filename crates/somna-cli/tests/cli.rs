//! The `somna` binary end to end: exit codes, import/export, prompt preview.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use std::io::Write;
use std::process::Output;

use support::{somna, text};

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
    // A file that is missing, unreadable or not UTF-8 is an invalid configuration: exit 2.
    let o = somna(dir.path(), &["check-config", "missing.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot read config file missing.toml"));
    std::fs::create_dir(dir.path().join("dir.toml")).unwrap();
    let o = somna(dir.path(), &["check-config", "dir.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot read config file dir.toml"));
    std::fs::write(
        dir.path().join("latin1.toml"),
        b"[defaults]\npersona = \"Caf\xe9\"\n",
    )
    .unwrap();
    let o = somna(dir.path(), &["check-config", "latin1.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("config file latin1.toml is not UTF-8 text"),
        "{}",
        text(&o)
    );
}

/// An agent `smith` with `n` imported messages (400: a few compactions; 60: none yet) in a fresh
/// directory.
fn imported(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), CONFIG).unwrap();
    std::fs::write(dir.path().join("t.jsonl"), conversation(n)).unwrap();
    let o = somna(dir.path(), &["import", "smith", "t.jsonl", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

/// The last line of `bytes` (the error after any log lines).
fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn commands_print_text_unless_json_is_given() {
    let dir = imported(400);
    let d = dir.path();
    let is_json = |o: &Output| serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok();
    // Each command: its text form, then its --json form.
    let cases: [(&[&str], &str); 6] = [
        // The import left nothing worth compacting: the builtin summary would not save enough.
        (
            &["compact", "smith", "--force"],
            "stalled: the summary would save only ",
        ),
        (&["sleep", "smith"], "slept"),
        (
            &["configure", "smith", "compaction.sleep_threshold=0.65"],
            "configured smith: model builtin",
        ),
        (&["facts", "smith"], "(from journal #"),
        (&["events", "smith", "-n", "50"], " compaction ("),
        (&["stats"], "history messages  "),
    ];
    for (args, expected) in cases {
        let o = somna(d, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(stdout(&o).contains(expected), "{args:?}: {}", text(&o));
        assert!(!is_json(&o), "{args:?} printed JSON: {}", text(&o));
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let o = somna(d, &with_json);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(is_json(&o), "{args:?} --json: {}", text(&o));
    }
    // Uncompact the newest summary: text, and the server's JSON shape with --json.
    let o = somna(d, &["events", "smith", "-n", "50", "--json"]);
    let events: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let newest = events.iter().find(|e| e["type"] == "compaction").unwrap();
    let seq = newest["summary_seq"].as_u64().unwrap().to_string();
    let o = somna(d, &["uncompact", "smith", &seq]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stdout(&o).starts_with("restored ")
            && stdout(&o).contains(&format!("the summary at #{seq}")),
        "{}",
        text(&o)
    );
    // No summary at that seq: an error naming it (exit 1), not a quiet `not_found`.
    let o = somna(d, &["uncompact", "smith", "999999", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no summary with seq 999999"),
        "{}",
        text(&o)
    );
}

#[test]
fn compact_and_sleep_exit_non_zero_when_they_fail() {
    // Not compacted yet: there is a body to compact.
    let dir = imported(60);
    let d = dir.path();
    // Every LLM call fails: the stub answers 500, with no retries.
    let stub = somna_testkit::StubLlmServer::start();
    stub.set_default(somna_testkit::Reply::Status(
        500,
        "the model is down".into(),
    ));
    let llm = [
        "--set".to_string(),
        "llm.provider=openai".to_string(),
        "--set".to_string(),
        "llm.model=stub".to_string(),
        "--set".to_string(),
        format!("llm.base_url={}", stub.base_url()),
        "--set".to_string(),
        "llm.max_retries=0".to_string(),
    ];
    let with = |args: &[&str]| -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(llm.iter().map(String::as_str));
        somna(d, &all)
    };
    let o = with(&["compact", "smith", "--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stdout(&o).starts_with("failed: "), "{}", text(&o));
    assert!(
        last_line(&o.stderr).starts_with("error: compaction failed: the summarizer failed"),
        "{}",
        text(&o)
    );
    let o = with(&["compact", "smith", "--force", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "failed", "{v}");

    // A sleep whose compaction fails: exit 1 too, with the result printed.
    let o = with(&[
        "sleep",
        "smith",
        "--set",
        "defaults.compaction.sleep_threshold=0.1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "slept", "{v}");
    assert_eq!(v["compaction"]["outcome"], "failed", "{v}");
    assert!(
        last_line(&o.stderr).starts_with("error: sleep failed: "),
        "{}",
        text(&o)
    );
    // The same agent with a working model compacts and sleeps with exit 0.
    assert!(somna(d, &["compact", "smith", "--force"]).status.success());
    assert!(somna(d, &["sleep", "smith"]).status.success());
}

#[test]
fn logs_carry_no_colour_codes_into_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    // No runtime.toml: `--db` with the defaults, which logs at debug level.
    let o = somna(dir.path(), &["-vv", "--db", "db", "create", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no usable config"), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
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
