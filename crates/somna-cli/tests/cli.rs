//! The `somna` binary end to end: exit codes, import/export, prompt preview.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Output;

use support::{RECENT_COMPACTIONS, assert_says, smith_config, somna, strs, success_json, text};

/// A small window, so that a few hundred messages make a few compactions.
fn config() -> String {
    smith_config(
        "",
        "",
        r#"max_context_tokens = 2000
preserve_messages = 10
summary_max_tokens = 500
sections = { topic_arc = 150, decisions = 100, pending = 100, user_facts = 80, artifacts = 60 }
"#,
    )
}

#[test]
fn check_config_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.toml"), config()).unwrap();
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
    assert_says(&o, "cannot read config file missing.toml");
    std::fs::create_dir(dir.path().join("dir.toml")).unwrap();
    let o = somna(dir.path(), &["check-config", "dir.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "cannot read config file dir.toml");
    std::fs::write(
        dir.path().join("latin1.toml"),
        b"[defaults]\npersona = \"Caf\xe9\"\n",
    )
    .unwrap();
    let o = somna(dir.path(), &["check-config", "latin1.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "config file latin1.toml is not UTF-8 text");
}

/// A fresh directory with `config()` as its runtime.toml.
fn configured() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), config()).unwrap();
    dir
}

/// An agent `smith` with `n` imported messages (400: a few compactions; 60: none yet) in a fresh
/// directory.
fn imported(n: usize) -> tempfile::TempDir {
    let dir = configured();
    std::fs::write(dir.path().join("t.jsonl"), conversation(n)).unwrap();
    let o = somna(dir.path(), &["import", "smith", "t.jsonl", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

/// `somna` in `dir` with `args`, then each of `sets` as `--set KEY=VALUE`.
fn somna_with_sets(dir: &Path, args: &[&str], sets: &[String]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    for set in sets {
        all.extend(["--set", set.as_str()]);
    }
    somna(dir, &all)
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
        (&["compact", "smith", "--force"], "compacted (manual, "),
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
    assert_says(&o, "no summary with seq 999999");
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
        "--set",
        "defaults.compaction.min_compact_batch=1",
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
    let dir = configured();
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
    let v: serde_json::Value = success_json(&o);
    let messages = v["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are Brenna, the village smith."),
        "{system}"
    );
    assert!(system.contains("[CONTEXT SUMMARY]"), "{system}");
    // What is recalled for this input is a note right before it, not in the stable prefix.
    assert!(!system.contains("[WORKING CONTEXT]"), "{system}");
    let note_at = v["working_context_index"].as_u64().unwrap() as usize;
    assert_eq!(note_at, messages.len() - 2);
    let note = messages[note_at]["content"].as_str().unwrap();
    assert!(note.starts_with("[WORKING CONTEXT]"), "{note}");
    assert!(
        note.contains("## Earlier conversation that may be relevant (archived)"),
        "{note}"
    );
    assert!(
        !v["working_context"]["excerpts"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(v["total_tokens"].as_u64().unwrap() <= v["budget_tokens"].as_u64().unwrap());
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
    let dir = imported(400);
    let o = somna(dir.path(), &[&RECENT_COMPACTIONS[..], &["--json"]].concat());
    let entries: Vec<serde_json::Value> = success_json(&o);
    assert!(!entries.is_empty());
    assert!(
        entries
            .iter()
            .all(|e| e["source_type"] == "compaction" && e["importance"] == 7)
    );
    let o = somna(dir.path(), &["history", "nobody"]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "unknown agent \"nobody\"");
    let o = somna(
        dir.path(),
        &["journal", "smith", "--since", "yesterday-ish"],
    );
    assert_says(&o, "--since");
    let o = somna(
        dir.path(),
        &["configure", "smith", "compaction.emergency_threshold=0.5"],
    );
    assert!(!o.status.success());
    assert_says(&o, "emergency_threshold");
}

/// Issue 10 item 5: `somna send` refuses input over the agent's `max_input_tokens` with exit 2 and
/// a message naming the limit; nothing is written.
#[test]
fn send_refuses_input_over_the_limit() {
    let dir = configured();
    let o = somna(dir.path(), &["create", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    // (0.8 × 2000 − 500 − 744) / 2 = 178 tokens: the working budget at a 2,000-token window is
    // half the prompt budget (1,488 / 2), above its 20% share.
    let big = "The miller's cart lost a wheel by the north gate. ".repeat(200);
    let o = somna(dir.path(), &["send", "smith", &big]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("above this agent's limit of 178 (compaction.max_input_tokens)"),
        "{t}"
    );
    let o = somna(dir.path(), &["history", "smith", "--json"]);
    let history: Vec<serde_json::Value> = success_json(&o);
    assert!(history.is_empty(), "nothing was written: {history:?}");
    let o = somna(dir.path(), &["send", "smith", "Good morning."]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `import` keeps each line's `created_at`; `export --openai --times` writes it back, and the
/// prompt dates what it recalls.
#[test]
fn import_keeps_message_times_and_export_writes_them_back() {
    let dir = configured();
    let lines: Vec<String> = (0..300)
        .map(|i| {
            let (role, name, text) = if i % 2 == 0 {
                ("user", "Nora", format!("Day {i}: the ferry to Lisbon runs late again, number {i}."))
            } else {
                ("assistant", "Omar", format!("Reply {i}: I keep a kettle on for you, number {i}."))
            };
            let day = 1 + i / 20;
            format!(
                r#"{{"role":"{role}","content":"{text}","name":"{name}","created_at":"2023-05-{day:02}T10:{:02}:00Z"}}"#,
                i % 60
            )
        })
        .collect();
    let input = lines.join("\n") + "\n";
    std::fs::write(dir.path().join("dated.jsonl"), &input).unwrap();
    let o = somna(dir.path(), &["import", "nora", "dated.jsonl", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = somna(dir.path(), &["export", "nora", "--openai", "--times"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), input);
    // A bad time is refused at its line, before anything is written.
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"role\":\"user\",\"content\":\"x\",\"created_at\":\"tuesday\"}\n",
    )
    .unwrap();
    let o = somna(dir.path(), &["import", "other", "bad.jsonl", "-q"]);
    assert!(!o.status.success());
    assert_says(&o, "line 1: created_at \"tuesday\" is not an RFC 3339 time");
    // The prompt dates what it recalls from the archive.
    let o = somna(
        dir.path(),
        &[
            "prompt",
            "nora",
            "--input",
            "What about the ferry to Lisbon, number 4?",
            "--json",
        ],
    );
    let v: serde_json::Value = success_json(&o);
    let note = v["messages"][v["working_context_index"].as_u64().unwrap() as usize]["content"]
        .as_str()
        .unwrap()
        .to_string();
    // A day heads the turns said that day; the turns after it carry no time of their own.
    let day = note
        .split("[2023-05-01]\n")
        .nth(1)
        .expect("the day's heading");
    assert!(
        day.starts_with("Nora: Day ") || day.starts_with("Omar: Reply "),
        "{note}"
    );
    assert!(
        note.contains("number 3.\nNora: Day 4: the ferry to Lisbon"),
        "{note}"
    );
    assert!(!note.contains("[10:"), "{note}");
}

/// `somna eval recall --json` on a slice of the shipped dataset: a report with one row per method,
/// every question counted, nothing over budget; a missing dataset is invalid input (exit 2).
#[test]
fn eval_recall_prints_a_json_report_of_every_method() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), "[store]\npath = \"db\"\n").unwrap();
    let dataset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall");
    let dataset = dataset.to_str().unwrap();
    let o = somna(
        dir.path(),
        &[
            "eval",
            "recall",
            dataset,
            "--json",
            "--limit-conversations",
            "1",
            "--limit-questions",
            "20",
            "--set",
            "defaults.compaction.max_context_tokens=4000",
        ],
    );
    let report: serde_json::Value = success_json(&o);
    assert_eq!(report["questions"], 20);
    assert_eq!(report["max_context_tokens"], 4000);
    let methods = strs(&report["methods"], "/method");
    assert_eq!(
        methods,
        [
            "somna",
            "somna-note",
            "bm25+nbrs@room",
            "bm25+nbrs",
            "bm25-packed",
            "last-window",
            "bm25-top5"
        ]
    );
    for m in report["methods"].as_array().unwrap() {
        assert_eq!(m["overall"]["questions"], 20);
        assert_eq!(m["overall"]["over_budget"], 0);
        assert!(m["overall"]["all"].as_u64() <= m["overall"]["some"].as_u64());
    }
    // No database is created: each conversation went into a temporary store.
    assert!(!dir.path().join("db").exists());

    let o = somna(dir.path(), &["eval", "recall", "no-such-dir"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "no-such-dir");
    let o = somna(
        dir.path(),
        &["eval", "recall", dataset, "--server", "http://127.0.0.1:1"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn migrate_store_copies_sled_into_postgres_and_back() {
    let Some(url) = support::pg_url_or_skip() else {
        return;
    };
    // A password in the URL (trust auth ignores it) must never be printed.
    let url = url.replacen("://postgres@", "://postgres:pw-never-shown@", 1);
    let schema = format!(
        "somna_cli_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let _cleanup = support::DropSchema::new(&url, &schema);
    let dir = imported(400);
    let d = dir.path();
    let on_pg = [
        "--set",
        "store.backend=postgres",
        "--set",
        &format!("store.url={url}"),
        "--set",
        &format!("store.schema={schema}"),
    ];
    let export = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["export", "smith"]);
        let o = somna(d, &args);
        assert!(o.status.success(), "{}", text(&o));
        stdout(&o)
    };
    let on_sled = export(&[]);
    assert!(on_sled.lines().count() > 400, "{on_sled}");

    let o = somna(d, &["migrate-store", "--to", &url, "--schema", &schema]);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains("every agent's export is identical"), "{said}");
    assert!(!said.contains("pw-never-shown"), "{said}");
    assert_eq!(export(&on_pg), on_sled);
    let mut check = on_pg.to_vec();
    check.push("check");
    let o = somna(d, &check);
    assert!(o.status.success(), "{}", text(&o));

    // Into a store that already holds agents: refused, nothing changed, no password shown.
    let o = somna(d, &["migrate-store", "--to", &url, "--schema", &schema]);
    assert!(!o.status.success());
    let said = text(&o);
    assert!(said.contains("already holds agents"), "{said}");
    assert!(!said.contains("pw-never-shown"), "{said}");

    // And back, from Postgres into a new sled directory.
    let back = d.join("back");
    let mut to_sled = on_pg.to_vec();
    to_sled.extend(["migrate-store", "--to", back.to_str().unwrap()]);
    let o = somna(d, &to_sled);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(export(&["--db", back.to_str().unwrap()]), on_sled);
}

/// Semantic retrieval over the wire: with `[embedder]` on the stub server, `somna import` embeds
/// the archive it made (one request per batch), `somna prompt` embeds the input once, `somna
/// sleep` embeds only what was archived since; an embedder that fails makes `import` fail with
/// the server's words, while the prompt falls back to keywords.
#[test]
fn the_embedder_indexes_the_archive_and_each_input_over_the_wire() {
    let stub = somna_testkit::StubLlmServer::start();
    let dir = configured();
    let d = dir.path();
    std::fs::write(d.join("t.jsonl"), conversation(400)).unwrap();
    let embed = [
        "embedder.provider=openai".to_string(),
        format!("embedder.base_url={}", stub.base_url()),
        "embedder.model=stub-embed".to_string(),
        "embedder.batch=100".to_string(),
    ];
    let with = |args: &[&str]| somna_with_sets(d, args, &embed);
    let o = with(&["import", "smith", "t.jsonl", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let embedded: usize = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("embedded "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `embedded` line: {}", text(&o)));
    assert!(embedded > 100, "{}", text(&o));
    let inputs: usize = stub
        .requests()
        .iter()
        .map(|r| r.body["input"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(inputs, embedded, "every archived message sent once");
    assert!(stub.requests().iter().all(|r| r.path == "/v1/embeddings"));

    let before = stub.request_count();
    let o = with(&[
        "prompt",
        "smith",
        "--input",
        "What about the ferry?",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stub.request_count(), before + 1, "the input, once");
    assert_eq!(
        stub.last_request().unwrap().body["input"],
        serde_json::json!(["What about the ferry?"])
    );

    // A sleep embeds only what was archived since the last embedding: what its own compaction
    // archived (if the import left the agent above the sleep threshold), never the import's
    // again; the next sleep, with nothing archived since, embeds nothing.
    let before = stub.request_count();
    let o = with(&["sleep", "smith", "--json"]);
    let sleep: serde_json::Value = success_json(&o);
    let sent: usize = stub
        .requests()
        .iter()
        .skip(before)
        .map(|r| r.body["input"].as_array().map_or(0, Vec::len))
        .sum();
    let archived = sleep["compaction"]["compacted"].as_u64().unwrap_or(0) as usize;
    assert!(sent <= archived, "{sent} > {archived}: {}", text(&o));
    let before = stub.request_count();
    let o = with(&["sleep", "smith", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stub.request_count(), before, "{}", text(&o));

    // A failing embedder: the prompt still comes (keywords alone); an import says why it failed.
    stub.set_embeddings(somna_testkit::Embeddings::Status(503));
    let o = with(&["prompt", "smith", "--input", "What about the ferry?"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(d.join("u.jsonl"), conversation(400)).unwrap();
    let o = with(&["import", "jones", "u.jsonl", "-q"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_says(&o, "HTTP 503");
}

/// Issue 25 over the wire: a server that invents on purpose (names, prices, ledger IDs and dates
/// found nowhere in the request, with right-looking, wrong, out-of-range and missing citations,
/// beside true items) answers `somna compact --force` and `somna sleep` in both structured-output
/// modes; not one invented value reaches the history, the journal or memory, the true items do,
/// and what the check did is reported and counted in `status`.
#[test]
fn an_inventing_model_gets_none_of_its_values_into_memory() {
    for mode in ["json_schema", "off"] {
        let stub = somna_testkit::StubLlmServer::start();
        stub.set_inventing();
        let dir = imported(300);
        let d = dir.path();
        let llm = [
            "llm.provider=openai".to_string(),
            "llm.model=stub".to_string(),
            format!("llm.base_url={}", stub.base_url()),
            format!("llm.structured_output={mode}"),
            "defaults.memory.reflection_threshold=1".to_string(),
            "defaults.compaction.extraction=llm".to_string(),
        ];
        let with = |args: &[&str]| somna_with_sets(d, args, &llm);
        let o = with(&["compact", "smith", "--force", "--json"]);
        assert!(o.status.success(), "{mode}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["outcome"], "done", "{mode}: {v}");
        assert_eq!(v["method"], "llm", "{mode}: {v}");
        let g = &v["grounding"];
        assert!(g["kept"].as_u64().unwrap() >= 1, "{mode}: {v}");
        assert!(g["dropped"].as_u64().unwrap() >= 4, "{mode}: {v}");

        let o = with(&["sleep", "smith", "--json"]);
        assert!(o.status.success(), "{mode}: {}", text(&o));

        // The requests held none of the invented values; the answers held all of them.
        let requests = stub.requests();
        assert!(requests.iter().any(|r| r.asks_for_summary()));
        for r in &requests {
            let prompt = r.prompt_text();
            for value in somna_testkit::INVENTED {
                assert!(!prompt.contains(value), "{mode}: {value} was in a request");
            }
        }
        // What was committed as text: every string of the three listings. Their numbers (times,
        // seqs, token counts) are left out: a time of today holds "6113" as well as any text.
        let mut committed = String::new();
        for args in [
            &["history", "smith", "--json"][..],
            &["journal", "smith", "--json"][..],
            &["facts", "smith", "--json"][..],
        ] {
            let o = somna(d, args);
            assert!(o.status.success(), "{}", text(&o));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            push_strings(&v, &mut committed);
        }
        for value in somna_testkit::INVENTED {
            assert!(
                !committed.contains(value),
                "{mode}: the invented {value} was committed"
            );
        }
        // The true items made it: a summary item, a fact and a reflection citing their sources.
        assert!(committed.contains("the wolves near the mill"), "{mode}");
        let o = somna(d, &["facts", "smith", "--json"]);
        let facts: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            facts.as_array().is_some_and(|f| f
                .iter()
                .any(|f| f["source_seqs"].as_array().is_some_and(|s| !s.is_empty()))),
            "{mode}: no fact names the turns behind it: {facts}"
        );
        let o = somna(d, &["status", "smith", "--json"]);
        let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let g = &status["grounding"];
        assert!(g["dropped"].as_u64().unwrap() >= 8, "{mode}: {status}");
        assert!(g["kept"].as_u64().unwrap() >= 2, "{mode}: {status}");
        let o = somna(d, &["status", "smith"]);
        assert!(stdout(&o).contains("memory items "), "{}", text(&o));
    }
}

/// Appends every string `v` holds, at any depth, each on its own line.
fn push_strings(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| push_strings(i, out)),
        serde_json::Value::Object(map) => map.values().for_each(|i| push_strings(i, out)),
        _ => {}
    }
}
