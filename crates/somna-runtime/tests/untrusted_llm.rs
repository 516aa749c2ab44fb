//! Trust nothing the model server sends (issue 10): lying usage reports, oversize replies, permanent
//! 4xx, transient failures and the tool-round limit. The `Agent` component is driven directly
//! (tick → job → finish) against the stub server over HTTP, so every turn is explicit.

use std::time::Duration;

use serde_json::json;
use somna_core::config::AgentConfig;
use somna_core::tokens::Calibration;
use somna_core::{Message, Role, Timestamp};
use somna_runtime::agent::{MAX_TOOL_ROUNDS, MAX_TURN_ATTEMPTS};
use somna_runtime::{Clock, Event};
use somna_store::Store;
use somna_testkit::{Reply, StubLlmServer, UsageReport};

use crate::support::*;

/// An agent whose history holds `messages` turns of village talk, in a window of `max_tokens`.
fn harness(stub: &StubLlmServer, messages: usize, max_tokens: u32) -> Driven {
    let (store, id) = new_agent("wren");
    fill(&store, &id, messages, Timestamp(0));
    let deps = agent_deps(
        &store,
        stub_client(stub, Duration::from_secs(5)),
        Clock::real(),
    );
    Driven::load(agent_config("wren", max_tokens), deps)
}

/// Usage by the local count alone (persona + working context + history, uncalibrated).
fn local_usage(h: &Driven) -> f64 {
    h.agent.prompt_tokens().unwrap() as f64
        / f64::from(h.agent.config().compaction.max_context_tokens)
}

fn calibration(h: &Driven) -> Calibration {
    h.store.agent(&h.id).unwrap().unwrap().calibration
}

#[actix::test]
async fn a_lying_usage_report_cannot_move_usage_below_the_local_count() {
    for lie in [
        UsageReport::FixedPrompt(100),
        UsageReport::FixedPrompt(0),
        UsageReport::Scaled(50.0),
        UsageReport::Absent,
    ] {
        let stub = StubLlmServer::start();
        stub.set_usage(lie);
        // About half the window: no compaction gets in the way.
        let mut h = harness(&stub, 40, 6000);
        for turn in 0..6 {
            h.say(&format!(
                "Turn {turn}: how is the {} coming along?",
                line(turn)
            ));
            let out = h.tick().await.expect("a step");
            assert!(out.replied, "{lie:?}: {:?}", out.error);
            let (usage, local) = (h.agent.usage().unwrap(), local_usage(&h));
            assert!(usage >= local, "{lie:?}: usage {usage} < local {local}");
        }
        // Every lie was ignored (or there was nothing to read): the calibration never moved.
        assert_eq!(calibration(&h), Calibration::default(), "{lie:?}");
        assert_eq!(stub.request_count(), 6);
    }
}

#[actix::test]
async fn calibration_feedback_follows_an_honest_server_by_bounded_steps() {
    let stub = StubLlmServer::start();
    // The server's tokenizer yields more tokens than the heuristic counts (bytes / 3).
    stub.set_chars_per_token(3.0);
    let mut h = harness(&stub, 20, 8000);
    let mut previous = Calibration::default();
    for turn in 0..5u32 {
        h.say(&format!("Turn {turn}: {}", line(turn as usize)));
        let out = h.tick().await.expect("a step");
        assert!(out.replied, "{:?}", out.error);
        let cal = calibration(&h);
        assert_eq!(cal.samples, turn + 1);
        assert!(cal.factor > previous.factor, "{cal:?} after {previous:?}");
        assert!(cal.factor - previous.factor <= Calibration::MAX_STEP + 1e-12);
        previous = cal;
    }
    // The agent's usage applies what was learned, above the local count.
    let expected = counter().calibrated(h.agent.prompt_tokens().unwrap(), &previous) as f64
        / f64::from(h.agent.config().compaction.max_context_tokens);
    assert_eq!(h.agent.usage().unwrap(), expected);
    assert!(h.agent.usage().unwrap() > local_usage(&h));
}

#[actix::test]
async fn an_oversize_reply_is_cut_at_the_cap_with_an_event() {
    let stub = StubLlmServer::start();
    // 200 KB in answer to max_tokens = 512.
    stub.push(Reply::oversize(200_000));
    let mut h = harness(&stub, 10, 8000);
    h.say("Tell me everything about the mill.");
    let out = h.tick().await.expect("a step");
    assert!(out.replied, "{:?}", out.error);
    let reply_max = h.agent.config().compaction.max_reply_tokens;
    assert_eq!(stub.last_request().unwrap().body["max_tokens"], reply_max);
    let events = h.events();
    let truncated = events
        .iter()
        .find_map(|e| match e {
            Event::ReplyTruncated {
                seq, tokens, kept, ..
            } => Some((*seq, *tokens, *kept)),
            _ => None,
        })
        .expect("a reply_truncated event");
    let (seq, tokens, kept) = truncated;
    let limit = u64::from(reply_max) * 5 / 4;
    assert!(tokens > 20_000, "{tokens}");
    assert!(kept <= limit, "{kept} > {limit}");
    let last = h.store.history_tail(&h.id, 1).unwrap().pop().unwrap();
    assert_eq!((last.seq, last.role), (seq, Role::Assistant));
    assert!(last.content.ends_with('…'));
    assert!(u64::from(last.tokens) <= limit + 10);
    // Nothing like an emergency: the window still has room.
    assert!(h.agent.usage().unwrap() < 0.8);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::EmergencyTriggered { .. }))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::AgentReplied { text, .. } if text.ends_with('…')))
    );
}

#[actix::test]
async fn a_permanent_4xx_fails_the_turn_at_once_and_the_reply_stays_owed() {
    for status in [400, 401, 403, 404] {
        let stub = StubLlmServer::start();
        stub.push(Reply::error(status, "no such model"));
        let mut h = harness(&stub, 10, 8000);
        h.say("Hello?");
        let out = h.tick().await.expect("a step");
        assert!(out.permanent && !out.replied, "{status}: {out:?}");
        let events = h.events();
        let failed = events
            .iter()
            .find_map(|e| match e {
                Event::TurnFailed {
                    attempts, reason, ..
                } => Some((*attempts, reason.clone())),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{status}: no turn_failed in {events:#?}"));
        assert_eq!(failed.0, 1, "{status}");
        assert!(failed.1.contains(&format!("HTTP {status}")), "{}", failed.1);
        if status == 404 {
            let url = format!("{}/chat/completions", stub.base_url());
            assert!(failed.1.contains(&url), "{}", failed.1);
        }
        let s = h.agent.status().unwrap();
        assert!(!s.needs_reply && s.reply_owed, "{status}: {s:?}");
        // No retry: later ticks call nothing.
        for _ in 0..3 {
            assert!(h.tick().await.is_none(), "{status}");
        }
        assert_eq!(stub.request_count(), 1, "{status}");
        // New input: the agent answers, and the owed reply is settled.
        h.say("Hello again?");
        let out = h.tick().await.expect("a step");
        assert!(out.replied, "{status}: {out:?}");
        assert!(!h.agent.status().unwrap().reply_owed);
    }
}

#[actix::test]
async fn transient_failures_fail_the_turn_after_bounded_attempts() {
    let stub = StubLlmServer::answering(Reply::Status(503, "overloaded".into()));
    let mut h = harness(&stub, 10, 8000);
    h.say("Hello?");
    let mut failed = None;
    // The agent backs off between attempts (2 s, then 4 s) on the real clock; wait for them,
    // bounded. The sleep is part of what is tested here (real backoffs against a real server);
    // agent.rs checks the same ladder on a paused clock.
    for _ in 0..400 {
        if h.tick().await.is_some() {
            failed = h.events().into_iter().find_map(|e| match e {
                Event::TurnFailed { attempts, .. } => Some(attempts),
                _ => None,
            });
            if failed.is_some() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(failed, Some(MAX_TURN_ATTEMPTS));
    assert_eq!(stub.request_count(), MAX_TURN_ATTEMPTS as usize);
    let s = h.agent.status().unwrap();
    assert!(!s.needs_reply && s.reply_owed, "{s:?}");
    assert!(h.tick().await.is_none());
}

#[actix::test]
async fn the_tool_round_limit_ends_the_turn_with_an_event_and_the_reply_owed() {
    let stub = StubLlmServer::start();
    // A model that never stops noting things down.
    stub.set_default(Reply::tool_call(
        "call_1",
        "journal_add",
        &json!({"content": "Aldric asked again", "importance": 3}),
    ));
    let mut h = harness(&stub, 10, 8000);
    h.say("Hello?");
    let out = h.tick().await.expect("a step");
    assert!(out.error.is_none() && !out.replied, "{out:?}");
    assert!(out.tool_rounds_exhausted);
    let events = h.events();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::ToolRoundsExhausted { rounds, .. } if *rounds == MAX_TOOL_ROUNDS
        )),
        "{events:#?}"
    );
    assert_eq!(stub.request_count(), MAX_TOOL_ROUNDS as usize);
    let s = h.agent.status().unwrap();
    assert!(!s.needs_reply && s.reply_owed, "{s:?}");
    assert!(h.tick().await.is_none());
}

/// The messages of the `warning` events the host got so far.
fn warnings(h: &mut Driven) -> Vec<String> {
    h.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Warning { message, .. } => Some(message),
            _ => None,
        })
        .collect()
}

fn note(id: &str, content: &str) -> somna_core::ToolCall {
    somna_core::ToolCall {
        id: id.into(),
        name: "journal_add".into(),
        arguments: json!({ "content": content, "importance": 6 }).to_string(),
    }
}

/// A journal note is a claim the model makes, and notes become memory facts at the next sleep: a
/// note holding a value that nothing the agent was shown holds (not the turn, not its history,
/// not the memory facts and archived turns of its working context), or a rare word nothing there
/// says, or a name given what its speaker told of someone else, or what was said turned around
/// (a negation added or dropped), is not written, and the model
/// (in the tool result) and the host (a warning) hear which values; notes whose values the agent
/// was shown are written as before, and so is the agent's own account ("I told Aldric …", "Asked
/// Aldric for …"); each sentence of a note is read for itself.
#[actix::test]
async fn a_journal_note_with_values_nobody_said_is_not_written() {
    let stub = StubLlmServer::start();
    let (store, id) = new_agent("wren");
    fill(&store, &id, 10, Timestamp(0));
    // Marta tells of Aldric.
    let mut marta = Message::user("Aldric planted turnips along the mill race.").with_name("Marta");
    marta.created_at = Timestamp(20_000);
    marta.tokens = counter().count_message(&marta);
    store.append(&id, marta, Timestamp(20_000)).unwrap();
    // The agent's own claim about Aldric, which Aldric never made.
    let mut claim = Message::assistant("You owe me 500 gold for the harrow, Aldric.");
    claim.created_at = Timestamp(21_000);
    claim.tokens = counter().count_message(&claim);
    store.append(&id, claim, Timestamp(21_000)).unwrap();
    store
        .consolidate(
            &id,
            vec![somna_core::Fact::new(
                Timestamp(0),
                "Odo the tinker owes 75 copper for the kettle",
                vec![],
            )],
            &[],
        )
        .unwrap();
    let mut config = agent_config("wren", 8000);
    // A working context, so the memory fact about Odo is in the prompt.
    config.compaction.working_share = 0.3;
    let mut h = driven_by(&store, &stub, config);
    stub.push_all([
        Reply::ToolCalls(vec![
            // Said in this turn, by its speaker.
            note("n1", "Aldric will pay 40 silver for the saddle on Friday"),
            // Nowhere: a name, an amount and a ledger ID the model made up.
            note("n2", "Zorbath owes 9871 silver on ledger QX-5531"),
            // In the memory fact the working context showed.
            note("n3", "Odo still owes 75 copper for the kettle"),
            // No value, but a rare word nobody said.
            note("n4", "Aldric brews kombucha behind the saddle shop"),
            // What Marta said of Aldric, given to Marta.
            note("n5", "Marta planted turnips along the mill race"),
            // What this turn says, turned around.
            note("n6", "Aldric won't pay for the saddle"),
            // What only the agent said of Aldric, as a fact about him; then as the agent's own.
            note("n7", "Aldric owes 500 gold for the harrow"),
            note("n8", "I told Aldric he owes me 500 gold for the harrow"),
            // The agent's own account with its "I" left out, as notes are written.
            note("n9", "Asked Aldric for 500 gold for the harrow"),
            // Each sentence read for itself: the agent's account, then a claim about Aldric.
            note(
                "n10",
                "I saw Aldric at the forge. He owes 500 gold for the harrow.",
            ),
        ]),
        Reply::text("Noted, Aldric."),
    ]);
    h.say("I will pay 40 silver for the saddle on Friday. Does Odo still owe you for the kettle?");
    let out = h.tick().await.expect("a step");
    assert!(out.replied && out.error.is_none(), "{out:?}");

    let journal = store
        .query_journal(&id, &somna_core::JournalQuery::default())
        .unwrap();
    let written: Vec<&str> = journal.iter().map(|e| e.content.as_str()).collect();
    assert!(
        written.iter().any(|c| c.contains("saddle on Friday")),
        "{written:?}"
    );
    assert!(
        written.iter().any(|c| c.contains("Odo still owes")),
        "{written:?}"
    );
    assert!(
        written.iter().any(|c| c.starts_with("I told Aldric")),
        "{written:?}"
    );
    assert!(
        written.iter().any(|c| c.starts_with("Asked Aldric")),
        "{written:?}"
    );
    for invented in [
        "Zorbath",
        "9871",
        "QX-5531",
        "kombucha",
        "Marta planted",
        "won't pay",
        "Aldric owes",
        "He owes",
    ] {
        assert!(
            !written.iter().any(|c| c.contains(invented)),
            "{invented} was written: {written:?}"
        );
    }
    // The model was told, in the refused call's result, and answered after it.
    let history = store.history(&id).unwrap();
    let result = history
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some("n2"))
        .expect("the refused note's result");
    assert!(
        result.content.contains("not written") && result.content.contains("9871"),
        "{}",
        result.content
    );
    let yours = history
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some("n7"))
        .expect("the refused note's result");
    assert!(
        yours.content.contains("500 (only you said it)")
            && yours.content.contains("note it as what you said"),
        "{}",
        yours.content
    );
    let second = &stub.requests()[1];
    assert!(second.prompt_text().contains("not written"));
    // The host was told once per refused note, naming the values.
    let warnings = warnings(&mut h);
    assert_eq!(warnings.len(), 6, "{warnings:?}");
    assert!(
        warnings[4].contains("500 (only you said it)")
            && warnings[5].contains("500 (only you said it)"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("9871") && warnings[0].contains("qx5531"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains("kombucha"), "{warnings:?}");
    assert!(
        warnings[2].contains("that it was marta: marta told it of someone else"),
        "{warnings:?}"
    );
    assert!(
        warnings[3].contains("not saddle: what it rests on says saddle"),
        "{warnings:?}"
    );
}

/// The agent of `store`, driven by hand, its model the stub server (5 s timeouts, real clock).
fn driven_by(store: &Store, stub: &StubLlmServer, config: AgentConfig) -> Driven {
    let deps = agent_deps(
        store,
        stub_client(stub, Duration::from_secs(5)),
        Clock::real(),
    );
    Driven::load(config, deps)
}

/// A note resting on an archived turn that the prompt shows as a quote (`[day] Marta: …`, in the
/// context note's excerpts and the summary) is held to the same rule as one resting on a live
/// turn: Marta told of Aldric, so "Marta planted turnips" is not written, and "Aldric planted
/// turnips" is.
#[actix::test]
async fn a_note_over_an_archived_quote_does_not_credit_its_speaker() {
    let stub = StubLlmServer::start();
    let (store, id) = new_agent("wren");
    let mut marta = Message::user("Aldric planted turnips along the mill race.").with_name("Marta");
    marta.tokens = counter().count_message(&marta);
    store.append(&id, marta, Timestamp(0)).unwrap();
    fill(&store, &id, 30, Timestamp(1_000));
    let mut config = agent_config("wren", 8000);
    config.compaction.working_share = 0.3;
    // A manual compaction (the builtin summarizer) archives Marta's turn.
    let compactor = somna_runtime::Compactor::new(
        store.clone(),
        std::sync::Arc::new(somna_llm::BuiltinClient::new()),
    );
    let outcome = compactor
        .compact(somna_runtime::CompactRequest {
            agent: &id,
            config: &config,
            trigger: somna_core::Trigger::Manual,
            fixed_tokens: 0,
            now: Timestamp(100_000),
        })
        .await
        .unwrap();
    assert!(outcome.report().is_some(), "{outcome:?}");
    let archived = store.archive_range(&id, 0, usize::MAX).unwrap();
    assert!(archived.iter().any(|m| m.content.contains("turnips")));
    assert!(
        !store
            .history(&id)
            .unwrap()
            .iter()
            .any(|m| m.is_normal() && m.content.contains("Aldric planted turnips")),
        "Marta's turn is still live"
    );

    let mut h = driven_by(&store, &stub, config);
    stub.push_all([
        Reply::ToolCalls(vec![
            note("n1", "Marta planted turnips along the mill race"),
            note("n2", "Aldric planted turnips along the mill race"),
        ]),
        Reply::text("Noted."),
    ]);
    h.say("Who planted the turnips along the mill race?");
    let out = h.tick().await.expect("a step");
    assert!(out.replied && out.error.is_none(), "{out:?}");
    // The archived turn was in the prompt the model answered.
    assert!(
        stub.requests()[0]
            .prompt_text()
            .contains("Marta: Aldric planted turnips"),
        "{}",
        stub.requests()[0].prompt_text()
    );
    let journal = store
        .query_journal(&id, &somna_core::JournalQuery::default())
        .unwrap();
    let written: Vec<&str> = journal.iter().map(|e| e.content.as_str()).collect();
    assert!(
        written.iter().any(|c| c.starts_with("Aldric planted")),
        "{written:?}"
    );
    assert!(
        !written.iter().any(|c| c.starts_with("Marta planted")),
        "{written:?}"
    );
    let warnings = warnings(&mut h);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("that it was marta: marta told it of someone else"),
        "{warnings:?}"
    );
}
