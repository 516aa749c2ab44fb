//! Store reads and the commands that change them: history and archive paging, forced compaction, the
//! journal query for synthesis entries since 1d, archive search, uncompact, the event log, sleep and
//! facts, and the metrics those operations leave behind.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{PATIENCE, TestServer};

/// Villager lines that differ in their words, so that archive search has something to rank.
fn line(i: usize) -> String {
    const NAMES: [&str; 4] = ["Aldric", "Marta", "Brannoc", "Elowen"];
    const THINGS: [&str; 4] = ["horseshoe", "lantern", "plough", "kettle"];
    format!(
        "{} brought the {} to the mill on day {i}; it cost {} silver.",
        NAMES[i % 4],
        THINGS[(i / 4) % 4],
        10 + i
    )
}

/// Pages through `path` (history or archive) `limit` at a time; returns every message.
async fn page_all(s: &TestServer, path: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut from = 0u64;
    let mut pages = 0;
    loop {
        let page = s
            .get(&format!("{path}?from_seq={from}&limit={limit}"))
            .await
            .expect(200, None);
        pages += 1;
        let messages = page["messages"].as_array().unwrap().clone();
        assert!(
            !messages.is_empty() || pages == 1,
            "an empty page past the first"
        );
        all.extend(messages);
        match page["next_from_seq"].as_u64() {
            Some(next) => {
                assert!(next > from);
                from = next;
            }
            None => break,
        }
        assert!(pages < 1000);
    }
    (all, pages)
}

fn seqs(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect()
}

#[actix_rt::test]
async fn paging_compaction_journal_search_uncompact_events() {
    let s = TestServer::with_wren().await;
    for i in 0..17 {
        s.input("wren", json!({"type": "observation", "content": line(i)}))
            .await;
    }
    // The agent journals the observations at its next step; wait for that, so that the journal
    // holds still for the paging below.
    wait_journal(&s, "wren", "source_type=observation", 17).await;
    // History pages: 17 messages, 5 at a time, follow the cursors.
    let (history, pages) = page_all(&s, "/v1/agents/wren/history", 5).await;
    assert_eq!(pages, 4);
    assert_eq!(seqs(&history), (0..17).collect::<Vec<u64>>());
    assert_eq!(history[3]["content"], format!("[observation] {}", line(3)));
    assert_eq!(history[3]["role"], "user");
    let last = s
        .get("/v1/agents/wren/history?from_seq=15&limit=5")
        .await
        .expect(200, None);
    assert_eq!(seqs(last["messages"].as_array().unwrap()), [15, 16]);
    assert_eq!(last["next_from_seq"], json!(null));
    // Exactly one page: no cursor to an empty page.
    let exact = s
        .get("/v1/agents/wren/history?from_seq=12&limit=5")
        .await
        .expect(200, None);
    assert_eq!(exact["next_from_seq"], json!(null));

    // A forced compaction: 17 messages, 4 kept verbatim.
    let outcome = s.compact("wren").await;
    assert_eq!(outcome["outcome"], "done", "{outcome}");
    assert_eq!(outcome["trigger"], "manual");
    assert_eq!(outcome["compacted"], 13);
    assert_eq!(outcome["preserved"], 4);
    let summary_seq = outcome["summary_seq"].as_u64().unwrap();
    assert_eq!(summary_seq, 0);
    let status = s.get("/v1/agents/wren").await.expect(200, None);
    assert_eq!(status["compaction_count"], 1);
    assert_eq!(status["history_len"], 5);
    assert_eq!(status["archive_len"], 13);
    assert!(status["last_compaction"].as_u64().unwrap() > 0);

    // History now starts with the summary; the archive holds the originals, paged 4 at a time.
    let history = s.get("/v1/agents/wren/history").await.expect(200, None);
    let first = &history["messages"][0];
    assert_eq!(first["kind"]["type"], "summary");
    assert!(
        first["content"]
            .as_str()
            .unwrap()
            .starts_with("[CONTEXT SUMMARY]")
    );
    let (archive, pages) = page_all(&s, "/v1/agents/wren/archive", 4).await;
    assert_eq!(pages, 4);
    assert_eq!(seqs(&archive), (0..13).collect::<Vec<u64>>());
    assert_eq!(archive[7]["content"], format!("[observation] {}", line(7)));

    // Every synthesis entry of the agent since yesterday: the one this compaction wrote.
    let journal = s
        .get("/v1/agents/wren/journal?source_type=compaction&tag=synthesis&since=1d")
        .await
        .expect(200, None);
    let entries = journal["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{journal}");
    assert_eq!(entries[0]["source_type"], "compaction");
    assert_eq!(entries[0]["importance"], 7);
    assert_eq!(entries[0]["tags"], json!(["compaction", "synthesis"]));
    assert_eq!(entries[0]["covers"], json!([0, 12]));
    assert_eq!(journal["next_cursor"], json!(null));
    // Its text is the summary's.
    let summary_text = first["content"].as_str().unwrap();
    assert!(summary_text.contains(entries[0]["content"].as_str().unwrap()));
    // The same with an RFC 3339 bound, both tags, and a bound in the future.
    s.get("/v1/agents/wren/journal?tag=compaction,synthesis&since=2000-01-01T00:00:00Z")
        .await
        .expect(200, None)["entries"]
        .as_array()
        .map(|e| assert_eq!(e.len(), 1))
        .unwrap();
    let none = s
        .get("/v1/agents/wren/journal?source_type=compaction&since=2999-01-01T00:00:00Z")
        .await
        .expect(200, None);
    assert_eq!(none["entries"], json!([]));
    let none = s
        .get("/v1/agents/wren/journal?source_type=compaction&until=1d")
        .await
        .expect(200, None);
    assert_eq!(none["entries"], json!([]));
    s.bad_request_naming("/v1/agents/wren/journal?since=yesterday", "since")
        .await;
    s.bad_requests(&[
        "/v1/agents/wren/journal?source_type=diary",
        "/v1/agents/wren/journal?min_importance=11",
        "/v1/agents/wren/journal?cursor=x",
    ])
    .await;

    // Journal paging: every entry, newest first, 3 at a time through the cursor.
    let everything = s
        .get("/v1/agents/wren/journal?limit=1000")
        .await
        .expect(200, None);
    let all_ids: Vec<u64> = everything["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(all_ids.len() >= 2, "{everything}");
    assert!(all_ids.windows(2).all(|w| w[0] > w[1]), "{all_ids:?}");
    let mut paged = Vec::new();
    let mut cursor: Option<u64> = None;
    loop {
        let path = match cursor {
            Some(c) => format!("/v1/agents/wren/journal?limit=3&cursor={c}"),
            None => "/v1/agents/wren/journal?limit=3".to_string(),
        };
        let page = s.get(&path).await.expect(200, None);
        paged.extend(
            page["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_u64().unwrap()),
        );
        match page["next_cursor"].as_u64() {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, all_ids);
    let notable = s
        .get("/v1/agents/wren/journal?min_importance=7&limit=1000")
        .await
        .expect(200, None);
    assert!(
        notable["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["importance"].as_u64().unwrap() >= 7)
    );

    // Archive search finds the archived line about the plough.
    let hits = s
        .get("/v1/agents/wren/archive/search?q=plough%20Brannoc&limit=3")
        .await
        .expect(200, None);
    assert_eq!(hits["query"], "plough Brannoc");
    let hits = hits["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 3);
    assert!(
        hits[0]["content"].as_str().unwrap().contains("plough"),
        "{hits:?}"
    );
    s.bad_requests(&[
        "/v1/agents/wren/archive/search?q=",
        "/v1/agents/wren/archive/search",
    ])
    .await;

    // What the agent sees: the prompt for a question about the plough carries the summary,
    // recalls the archived line in its working context, and counts every token of the window.
    let before = s.get("/v1/agents/wren").await.expect(200, None);
    let question = "What did Brannoc pay for the plough?";
    let seen = s
        .get("/v1/agents/wren/prompt?input=What%20did%20Brannoc%20pay%20for%20the%20plough%3F")
        .await
        .expect(200, None);
    let parts = &seen["parts"];
    let part = |name: &str| parts[name].as_u64().unwrap();
    let messages = seen["messages"].as_array().unwrap();
    let message_tokens: u64 = messages.iter().map(|m| m["tokens"].as_u64().unwrap()).sum();
    assert_eq!(
        part("persona") + part("summary") + part("working_context") + part("live_history"),
        message_tokens,
        "{seen}"
    );
    assert_eq!(
        seen["total_tokens"].as_u64().unwrap() + part("reply_reserve") + part("free"),
        seen["window_tokens"].as_u64().unwrap(),
        "{seen}"
    );
    assert!(
        part("summary") > 0,
        "the compaction's summary is in the prompt: {seen}"
    );
    assert_eq!(messages[0]["part"], "system");
    let last = messages.last().unwrap();
    assert_eq!(
        (&last["part"], &last["role"], &last["content"]),
        (&json!("live_history"), &json!("user"), &json!(question))
    );
    let note = messages
        .iter()
        .find(|m| m["part"] == "working_context")
        .unwrap_or_else(|| panic!("no working context: {seen}"));
    assert!(
        note["content"].as_str().unwrap().contains("plough"),
        "{note}"
    );
    assert!(part("working_context") > 0);
    let excerpts = seen["recalled"]["excerpts"].as_array().unwrap();
    assert!(!excerpts.is_empty(), "{seen}");
    // Nothing was written: the agent's history is as long as before.
    let after = s.get("/v1/agents/wren").await.expect(200, None);
    assert_eq!(after["history_len"], before["history_len"]);
    s.bad_requests(&[
        "/v1/agents/wren/prompt?input=a&input=b",
        "/v1/agents/wren/prompt?q=plough",
    ])
    .await;
    s.get("/v1/agents/ghost/prompt")
        .await
        .expect(404, Some("unknown_agent"));

    // Undo the compaction: history is whole again, the archive empty, a second undo finds nothing.
    let undone = s
        .post(
            "/v1/agents/wren/uncompact",
            &format!(r#"{{"summary_seq": {summary_seq}}}"#),
        )
        .await
        .expect(200, None);
    assert_eq!(
        undone,
        json!({"outcome": "restored", "summary_seq": 0, "restored": 13})
    );
    let (history, _) = page_all(&s, "/v1/agents/wren/history", 100).await;
    assert_eq!(seqs(&history), (0..17).collect::<Vec<u64>>());
    let archive = s.get("/v1/agents/wren/archive").await.expect(200, None);
    assert_eq!(archive["messages"], json!([]));
    s.post("/v1/agents/wren/uncompact", r#"{"summary_seq": 0}"#)
        .await
        .expect(404, Some("unknown_summary"));

    // The event log, newest first: the undo, then the compaction.
    let events = s
        .get("/v1/agents/wren/events?limit=10")
        .await
        .expect(200, None);
    let events = events["events"].as_array().unwrap();
    assert_eq!(events[0]["event"]["type"], "uncompaction");
    assert_eq!(events[0]["event"]["restored"], 13);
    assert_eq!(events[1]["event"]["type"], "compaction");
    assert_eq!(events[1]["event"]["trigger"], "manual");
    assert!(events[0]["seq"].as_u64() > events[1]["seq"].as_u64());
    let one = s
        .get("/v1/agents/wren/events?limit=1")
        .await
        .expect(200, None);
    assert_eq!(one["events"].as_array().unwrap().len(), 1);

    // The metrics saw the compaction (counted from the event stream, so allow it a moment).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let metrics = loop {
        let m = s.get("/metrics").await;
        assert_eq!(m.status, 200);
        assert_eq!(
            m.headers["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        if m.text
            .contains("somna_compactions_total{trigger=\"manual\",outcome=\"completed\"} 1\n")
            || tokio::time::Instant::now() > deadline
        {
            break m.text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        metrics.contains("somna_compactions_total{trigger=\"manual\",outcome=\"completed\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("somna_agents 1\n"));
    let saved = sample(&metrics, "somna_compaction_tokens_saved_total");
    assert!(saved > 0.0, "{metrics}");
    // The builtin summarizer was called through the metered client.
    assert!(
        sample(
            &metrics,
            "somna_llm_request_duration_seconds_count{purpose=\"summarize\"}"
        ) >= 1.0
    );
    assert!(
        sample(
            &metrics,
            "somna_llm_request_duration_seconds_bucket{purpose=\"summarize\",le=\"+Inf\"}"
        ) >= 1.0
    );
    assert!(sample(&metrics, "somna_api_errors_total{code=\"unknown_summary\"}") >= 1.0);
    assert!(sample(&metrics, "somna_api_errors_total{code=\"bad_request\"}") >= 1.0);
    assert!(sample(&metrics, "somna_ticks_total") > 0.0);
    assert_eq!(sample(&metrics, "somna_errors_total{source=\"api\"}"), 0.0);
    s.stop().await;
}

/// Waits until the journal query `query` of `agent` finds `n` entries.
async fn wait_journal(s: &TestServer, agent: &str, query: &str, n: usize) {
    s.wait_get(
        &format!("/v1/agents/{agent}/journal?{query}&limit=1000"),
        |j| j["entries"].as_array().unwrap().len() == n,
    )
    .await;
}

/// The value of the sample line that starts with `series ` (0 when absent).
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.parse().unwrap())
}

#[actix_rt::test]
async fn sleep_consolidates_into_facts() {
    let s = TestServer::with_wren().await;
    for text in [
        "Aldric swore an oath to guard the north gate until the winter ends.",
        "Marta's daughter was born at dawn; the whole village celebrated.",
        "The blacksmith died in the fire at the forge last night.",
    ] {
        s.input("wren", json!({"type": "observation", "content": text}))
            .await;
    }
    // Observations are journaled by the agent's next step.
    wait_journal(&s, "wren", "source_type=observation", 3).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let facts = s.get("/v1/agents/wren/facts").await.expect(200, None);
    assert_eq!(facts["facts"], json!([]));
    let slept = loop {
        let a = s.post("/v1/agents/wren/sleep", "").await;
        if a.status == 409 && tokio::time::Instant::now() < deadline {
            assert_eq!(a.code(), "busy");
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        break a.expect(200, None);
    };
    assert_eq!(slept["outcome"], "slept", "{slept}");
    assert_eq!(slept["error"], json!(null));
    // The compaction after consolidation is skipped: usage is far below the sleep threshold.
    assert_eq!(slept["compaction"]["outcome"], "skipped");
    assert_eq!(slept["compaction"]["reason"]["reason"], "below_threshold");
    let facts = s.get("/v1/agents/wren/facts").await.expect(200, None);
    let facts = facts["facts"].as_array().unwrap();
    assert!(!facts.is_empty(), "consolidation wrote no fact");
    for f in facts {
        assert!(!f["text"].as_str().unwrap().is_empty());
        assert!(!f["source_entry_ids"].as_array().unwrap().is_empty());
    }
    let consolidated = s
        .get("/v1/agents/wren/journal?source_type=observation")
        .await
        .expect(200, None);
    // Entries at or above `memory.min_importance` (3) were consolidated; the facts cite them.
    let entries = consolidated["entries"].as_array().unwrap();
    let cited: Vec<u64> = facts
        .iter()
        .flat_map(|f| f["source_entry_ids"].as_array().unwrap().clone())
        .map(|id| id.as_u64().unwrap())
        .collect();
    for e in entries {
        let important = e["importance"].as_u64().unwrap() >= 3;
        assert_eq!(e["consolidated"] == true, important, "{e}");
    }
    assert!(
        entries.iter().any(|e| e["consolidated"] == true),
        "{consolidated}"
    );
    assert!(
        cited
            .iter()
            .all(|id| entries.iter().any(|e| e["id"].as_u64() == Some(*id))),
        "{cited:?}"
    );
    s.get("/v1/agents/wren/facts?limit=3")
        .await
        .expect(400, Some("bad_request"));
    s.stop().await;
}
