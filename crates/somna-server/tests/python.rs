//! examples/python_host.py, run against a real server: create (or reuse) an agent, configure it,
//! converse over SSE, answer a host tool call, compact, query the journal for synthesis entries.
//! The model is the stub OpenAI server, scripted to call `open_door` when a player mentions a door
//! and to answer summary requests with a sectioned summary.
//! Needs `python3` on the PATH (set `SOMNA_SKIP_PYTHON=1` to skip on a machine without it).

use std::process::Command;

use serde_json::json;
use somna_testkit::{Reply, StubLlmServer};

use crate::support::{TestServer, keeper_config};

#[actix_rt::test]
async fn python_host_example_runs_against_the_api() {
    if std::env::var_os("SOMNA_SKIP_PYTHON").is_some() {
        somna_testkit::skip("SOMNA_SKIP_PYTHON is set (examples/python_host.py was not run)");
        return;
    }
    let stub = StubLlmServer::start();
    stub.set_default_fn(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        let content = last["content"].as_str().unwrap_or_default().to_lowercase();
        let offers_door = req.body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "open_door"));
        let is_summary_request = req.asks_for_summary();
        if is_summary_request {
            Reply::text(
                "## Topic arc\n- Tobias the miller talked about the mill wheel.\n\
## Decisions\n- Hild opened the north door.\n## User facts\n- Tobias is the miller.",
            )
        } else if last["role"] == "tool" {
            Reply::text("The door stands open.")
        } else if last["role"] == "user" && offers_door && content.contains("door") {
            Reply::tool_call("call_door_py", "open_door", &json!({"door": "north"}))
        } else {
            Reply::text("Aye, the mill keeps turning.")
        }
    });
    let config = keeper_config(&stub);
    let token = "python-example-token";
    let s = TestServer::start_served(&config, |o| o.token = Some(token.into())).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/python_host.py");
    let base = s.base.clone();
    let output = actix_web::rt::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .args(["--url", &base, "--agent", "keeper", "--expect-tool-call"])
            .args(["--timeout", "20"])
            .env("SOMNA_API_TOKEN", token)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 is needed for this test (or set SOMNA_SKIP_PYTHON=1)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("keeper already exists; using it"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "refused as expected: invalid_config ['compaction.emergency_threshold', \
             'compaction.summary_max_tokens']"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("[tool call] open_door({'door': 'north'}) id=call_door_py"),
        "{stdout}"
    );
    assert!(stdout.contains("keeper: The door stands open."), "{stdout}");
    assert!(stdout.contains("synthesis entries since 1d: 1"), "{stdout}");
    // What the script did is in the store.
    let journal = s
        .get("/v1/agents/keeper/journal?source_type=compaction&tag=synthesis")
        .await
        .expect(200, None);
    assert_eq!(journal["entries"].as_array().unwrap().len(), 1);
    let config = s.get("/v1/agents/keeper/config").await.expect(200, None);
    assert_eq!(config["config"]["compaction"]["preserve_messages"], 6);
    s.stop().await;
}
