//! `somna run --serve` and `somna --server URL …` end to end: a real server in a child process
//! (offline builtin model, fast ticks), driven by the CLI the way a script would, stopped with
//! ctrl-c (SIGINT), then its database checked with the local commands.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::{RECENT_COMPACTIONS, Served, assert_says, smith_config, text};

const TOKEN: &str = "cli-test-token";

/// Fast ticks and flushes, and a small window.
fn config() -> String {
    smith_config(
        "flush_every = \"100ms\"\n",
        "tick_every = \"100ms\"\n",
        r#"max_context_tokens = 2000
preserve_messages = 4
preserve_ratio = 0.0
summary_max_tokens = 500
sections = { topic_arc = 150, decisions = 100, pending = 100, user_facts = 80, artifacts = 60 }
"#,
    )
}

/// A temporary directory with [`config`] as its runtime.toml.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.toml"), config()).unwrap();
    dir
}

/// The `somna` command in `dir` with a clean environment (and `token` as SOMNA_API_TOKEN).
fn command(dir: &Path, token: Option<&str>) -> Command {
    let mut c = support::command(dir);
    if let Some(t) = token {
        c.env("SOMNA_API_TOKEN", t);
    }
    c
}

/// Starts `somna run --serve 127.0.0.1:0` with the test token.
fn serve(dir: &Path) -> Served {
    let mut c = command(dir, Some(TOKEN));
    c.args(["run", "--serve", "127.0.0.1:0", "--for", "60s", "--quiet"]);
    Served::start(c)
}

/// `GET /healthz` with a plain socket: the status line and body.
/// `somna --server URL args…` with the test token.
fn remote(dir: &Path, url: &str, args: &[&str]) -> Output {
    command(dir, Some(TOKEN))
        .arg("--server")
        .arg(url)
        .args(args)
        .output()
        .unwrap()
}

/// [`remote`] with `--json`, which must succeed; its answer.
fn remote_json(dir: &Path, url: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let o = remote(dir, url, &all);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Polls the agent's status until it owes no reply and is idle (10 s at most); whether it did.
fn answered(dir: &Path, url: &str, agent: &str) -> bool {
    for _ in 0..200 {
        let s = remote_json(dir, url, &["status", agent]);
        if !s["needs_reply"].as_bool().unwrap() && s["state"] == "idle" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn healthz(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_cli_drives_a_running_server_and_the_database_stays_consistent() {
    let project = project();
    let dir = project.path();
    let served = serve(dir);
    let url = served.url.clone();
    let health = healthz(&url);
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(r#""status":"ok""#), "{health}");

    // The server holds the database: a local command says so once, in words, and points at
    // --server.
    let o = command(dir, None).arg("agents").output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("in use by another process").count(), 1, "{err}");
    assert!(err.contains("--server URL"), "{err}");
    assert!(!err.contains("Os {"), "{err}");

    let somna = |args: &[&str]| remote(dir, &url, args);
    let json = |args: &[&str]| remote_json(dir, &url, args);

    // Create: text names the resolved config; a second create is refused with its code.
    let o = somna(&[
        "create",
        "smith",
        "persona=You are Brannoc, the blacksmith of Millbrook.",
        "compaction.sleep_threshold=0.65",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).starts_with(
            "created smith: model builtin, tick every 100ms, window 2000 tokens, sleep at 65%"
        ),
        "{}",
        text(&o)
    );
    let o = somna(&["create", "smith"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_says(&o, "error: agent_exists: ");
    let v = json(&["create", "wren"]);
    assert_eq!(v["id"], "wren");
    assert_eq!(v["config"]["persona"], "You are Brenna, the village smith.");

    // A conversation: each message gets its reply before the next is sent.
    for i in 0..6 {
        let said = format!("Message {i}: I need a new horseshoe for my mare, she threw one.");
        let o = somna(&["send", "smith", &said, "--from", "Aldric"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).starts_with("accepted"), "{}", text(&o));
        assert!(
            answered(dir, &url, "smith"),
            "smith never answered message {i}"
        );
    }
    let o = somna(&["send", "wren", "Snow falls on the forge.", "--observation"]);
    assert!(o.status.success(), "{}", text(&o));

    // Status: the text form, and the server's JSON.
    let o = somna(&["status", "smith"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("agent        smith\nstate        idle\n"), "{t}");
    assert!(t.contains("sleep at 65%, emergency at 80%"), "{t}");
    let s = json(&["status", "smith"]);
    assert_eq!(s["history_len"], 12, "{s}");
    assert_eq!(s["compaction_count"], 0);

    // History, paged by the client: the text form shows speakers; -n keeps the last ones.
    let o = somna(&["history", "smith"]);
    let t = text(&o);
    assert!(t.contains("user (Aldric)"), "{t}");
    assert!(t.contains("Message 5: I need a new horseshoe"), "{t}");
    let h = json(&["history", "smith", "-n", "3"]);
    let messages = h["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2]["seq"], 11);
    assert_eq!(messages[2]["role"], "assistant");

    // A forced compaction, then its synthesis entry through journal filters passed through.
    let outcome = json(&["compact", "smith", "--force"]);
    assert_eq!(outcome["outcome"], "done", "{outcome}");
    assert_eq!(outcome["trigger"], "manual");
    assert_eq!(outcome["preserved"], 4);
    assert_eq!(outcome["compacted"], 8);
    let summary_seq = outcome["summary_seq"].as_u64().unwrap();
    let j = json(&RECENT_COMPACTIONS);
    let entries = j["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{j}");
    assert_eq!(entries[0]["source_type"], "compaction");
    assert_eq!(entries[0]["covers"], serde_json::json!([0, 7]));
    assert!(
        entries[0]["tags"]
            .as_array()
            .unwrap()
            .contains(&"synthesis".into())
    );
    assert_eq!(j["next_cursor"], Value::Null);
    let o = somna(&["journal", "smith", "--since", "yesterday"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "error: bad_request: since: ");
    let o = somna(&["history", "smith"]);
    assert_says(&o, "[summary gen 1 of #0..#7, 8 msgs]");
    let archive = json(&["history", "smith", "--archive"]);
    assert_eq!(archive["messages"].as_array().unwrap().len(), 8);
    let hits = json(&["search", "smith", "horseshoe", "-n", "2"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 2, "{hits}");
    let events = json(&["events", "smith"]);
    assert_eq!(events["events"][0]["event"]["type"], "compaction");
    assert_eq!(events["events"][0]["event"]["summary_seq"], summary_seq);
    let facts = json(&["facts", "smith"]);
    assert!(facts["facts"].is_array(), "{facts}");

    // A config change that does not validate: exit 2, the field named (text and JSON).
    let o = somna(&["configure", "smith", "compaction.emergency_threshold=0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: invalid_config: compaction.emergency_threshold: must be above sleep_threshold (0.65), got 0.5"),
        "{err}"
    );
    let o = somna(&[
        "configure",
        "smith",
        "compaction.emergency_threshold=0.5",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "invalid_config");
    assert_eq!(
        v["error"]["fields"][0]["field"],
        "compaction.emergency_threshold"
    );
    let v = json(&["configure", "smith", "compaction.emergency_threshold=0.9"]);
    assert_eq!(v["config"]["compaction"]["emergency_threshold"], 0.9);
    assert_eq!(v["config"]["compaction"]["sleep_threshold"], 0.65);

    // Undo the compaction, then sleep (nothing to compact below the threshold).
    let v = json(&["uncompact", "smith", &summary_seq.to_string()]);
    assert_eq!(v["outcome"], "restored");
    assert_eq!(v["restored"], 8);
    let o = somna(&["uncompact", "smith", &summary_seq.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "error: unknown_summary: ");
    let v = json(&["sleep", "smith"]);
    assert_eq!(v["outcome"], "slept", "{v}");
    // The text forms of the server's answers.
    let o = somna(&["sleep", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).starts_with("slept"), "{}", text(&o));
    let o = somna(&["events", "smith"]);
    assert_says(
        &o,
        &format!("uncompaction: summary #{summary_seq} undone, 8 messages restored"),
    );
    assert_says(&o, " compaction (manual, ");

    // Errors: unknown agent (1), wrong or missing token (1, 401), local-only commands (2).
    let o = somna(&["status", "ghost"]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "error: unknown_agent: no agent with id \"ghost\"");
    for token in [Some("wrong-token"), None] {
        let o = command(dir, token)
            .args(["--server", &url, "agents"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert_says(&o, "error: unauthorized: ");
    }
    for args in [
        &["check"][..],
        &["stats"],
        &["prompt", "smith", "--input", "hi"],
        &["export", "smith"],
    ] {
        let o = somna(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_says(&o, "works on a local database only");
    }
    let o = somna(&["send", "a b", "hi"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Retire smith: commands are refused, reads still work, the list names it.
    let o = somna(&["delete", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).starts_with("retired smith"), "{}", text(&o));
    let o = somna(&["send", "smith", "Are you there?"]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "error: agent_retired: ");
    let h = json(&["history", "smith"]);
    let retired_history = h["messages"].as_array().unwrap().len();
    assert!(retired_history >= 12, "{h}");
    let o = somna(&["agents"]);
    let t = text(&o);
    assert!(t.contains("\nwren "), "{t}");
    assert!(t.contains("retired: smith"), "{t}");
    let v = json(&["agents"]);
    assert_eq!(v["agents"][0]["id"], "wren");
    assert_eq!(v["retired"], serde_json::json!(["smith"]));

    // Stop the run as ctrl-c does: the API stops, then the runtime, and the table is printed.
    let (ok, out) = served.stop();
    assert!(ok, "{out}");
    assert!(out.contains("somna: API server stopped"), "{out}");
    assert!(out.contains("\nwren "), "{out}");
    assert!(out.contains("database flushed to"), "{out}");

    // The database, opened locally: consistent, with everything the server wrote.
    let local = |args: &[&str]| command(dir, None).args(args).output().unwrap();
    let o = local(&["check"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = local(&["history", "smith", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let history: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(history.len(), retired_history);
    let o = local(&["agents", "--json"]);
    let agents: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let smith = agents.iter().find(|a| a["id"] == "smith").unwrap();
    assert_eq!(smith["retired"], true);
    assert_eq!(smith["overrides"]["compaction"]["emergency_threshold"], 0.9);
    let o = local(&["journal", "wren", "--source", "observation"]);
    assert_says(&o, "Snow falls on the forge.");
}

#[test]
fn serve_refuses_a_public_address_without_a_token_and_create_works_locally() {
    let project = project();
    let dir = project.path();
    let o = command(dir, None)
        .args(["run", "--serve", "0.0.0.0:0", "--for", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "a non-loopback address needs a bearer token");
    assert!(!dir.join("db").exists(), "nothing started");

    // create / configure / delete on a local database.
    let local = |args: &[&str]| command(dir, None).args(args).output().unwrap();
    let o = local(&["create", "smith", "compaction.emergency_threshold=0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_says(&o, "compaction.emergency_threshold");
    let o = local(&["create", "smith", "model=smith-7b", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["model"], "smith-7b");
    let o = local(&["create", "smith"]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "already exists");
    let o = local(&["configure", "smith", "compaction.emergency_threshold=0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = local(&["delete", "smith"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = local(&["send", "smith", "hello"]);
    assert_eq!(o.status.code(), Some(1));
    assert_says(&o, "was retired");
    let o = local(&["agents"]);
    assert_says(&o, "(retired)");
}

/// Scoped tokens end to end: made locally before the server starts, used by the CLI against the
/// server (its agents only, reads only), listed and revoked through the server.
#[test]
fn scoped_tokens_made_locally_reach_only_their_agents_and_are_revoked_through_the_server() {
    let project = project();
    let dir = project.path();
    let made = command(dir, None)
        .args([
            "token",
            "create",
            "tenant-b",
            "--agents",
            "b-",
            "--read-only",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let made: Value = serde_json::from_slice(&made.stdout).unwrap();
    let scoped = made["token"].as_str().unwrap().to_string();
    assert_eq!(made["access"], "read");

    let served = serve(dir);
    let url = served.url.clone();
    for agent in ["a-smith", "b-smith"] {
        let o = remote(dir, &url, &["create", agent]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let as_b = |args: &[&str]| {
        command(dir, Some(&scoped))
            .arg("--server")
            .arg(&url)
            .args(args)
            .output()
            .unwrap()
    };
    let o = as_b(&["status", "b-smith", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = as_b(&["status", "a-smith"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_says(&o, "forbidden");
    let o = as_b(&["send", "b-smith", "hello"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_says(&o, "read-only");
    let o = as_b(&["agents", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !text(&o).contains("a-smith") && text(&o).contains("b-smith"),
        "{}",
        text(&o)
    );
    let o = as_b(&["token", "list"]);
    assert_says(&o, "forbidden");

    let listed = remote_json(dir, &url, &["token", "list"]);
    assert_eq!(listed["tokens"][0]["name"], "tenant-b");
    let o = remote(dir, &url, &["token", "revoke", "tenant-b"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = as_b(&["status", "b-smith"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_says(&o, "unauthorized");
    let (clean, log) = served.stop();
    assert!(clean, "{log}");
}

/// The same runtime on the Postgres backend: `somna run --serve` with `[store] backend =
/// "postgres"`, the CLI driving it over HTTP (create, a conversation, a forced compaction), then
/// the local commands on the same schema once the server has stopped.
#[test]
fn the_runtime_serves_from_postgres() {
    let Some(pg) = support::PgScratch::new("somna_serve", |_, _| config()) else {
        return;
    };
    let (url, schema, dir) = (&pg.url, &pg.schema, pg.dir());
    let on_pg = [
        "--set".to_string(),
        "store.backend=postgres".to_string(),
        "--set".to_string(),
        format!("store.url={url}"),
        "--set".to_string(),
        format!("store.schema={schema}"),
    ];
    let mut c = command(dir, Some(TOKEN));
    c.args(&on_pg)
        .args(["run", "--serve", "127.0.0.1:0", "--for", "60s", "--quiet"]);
    let served = Served::start(c);
    let api = served.url.clone();
    let somna = |args: &[&str]| remote(dir, &api, args);
    let json = |args: &[&str]| remote_json(dir, &api, args);
    assert_eq!(json(&["create", "smith"])["id"], "smith");
    for i in 0..8 {
        let said = format!("Message {i}: I need a new horseshoe for my mare, she threw one.");
        let o = somna(&["send", "smith", &said, "--from", "Aldric"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            answered(dir, &api, "smith"),
            "smith never answered message {i}"
        );
    }
    let outcome = json(&["compact", "smith", "--force"]);
    assert_eq!(outcome["outcome"], "done", "{outcome}");
    assert!(outcome["compacted"].as_u64().unwrap() > 0, "{outcome}");
    let (stopped, out) = served.stop();
    assert!(stopped, "{out}");
    assert!(out.contains("(schema somna_serve_"), "{out}");

    // The server is gone: the local commands read the same schema.
    let local =
        |args: &[&str]| -> Output { command(dir, None).args(&on_pg).args(args).output().unwrap() };
    let o = local(&["check"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = local(&["history", "smith", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let history: Value = serde_json::from_slice(&o.stdout).unwrap();
    let messages = history.as_array().expect("a list of messages");
    assert!(
        messages.iter().any(|m| m["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("[CONTEXT SUMMARY]")),
        "{history}"
    );
    let o = local(&["history", "smith", "--archive", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let archive: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!archive.as_array().unwrap().is_empty(), "{archive}");
}
