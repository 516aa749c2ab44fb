//! Table-driven tests of compaction planning: one line per case, a snapshot of the plan.
//! Update the snapshots with `UPDATE_EXPECT=1 cargo test -p somna-core --test plan` and review the diff.

#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use expect_test::{Expect, expect};
use somna_core::compaction::{PlanOutcome, PlanRequest, plan};
use somna_core::config::CompactionConfig;
use somna_core::message::{Message, MessageKind, Role, SummaryMeta, ToolCall};
use somna_core::record::Trigger;
use somna_core::time::Timestamp;
use somna_core::tokens::TokenCounter;

/// A small config so cases stay short: a 1,000-token window, 4 preserved messages or 20%.
fn cfg() -> CompactionConfig {
    let mut c = CompactionConfig::default();
    c.max_context_tokens = 1000;
    c.sleep_threshold = 0.7;
    c.emergency_threshold = 0.8;
    c.preserve_messages = 4;
    c.preserve_ratio = 0.2;
    c.head_size = 0;
    c.min_compact_batch = 3;
    c.summary_max_tokens = 100;
    c.summarizer_context_tokens = 4000;
    c.mask_after_messages = 6;
    c.mask_exempt_tools = vec!["keep".into()];
    c
}

/// Parses a history spec: `u50` user, `a50` assistant, `s50` system, `A50:c1=search,c2` assistant
/// calling tools (name defaults to `lookup`), `t50:c1` tool result, `S50:2` summary of generation 2;
/// `x*N` repeats a message N times. The number is the message's token count.
fn history(spec: &str) -> Vec<Message> {
    let mut out = Vec::new();
    for word in spec.split_whitespace() {
        let (word, times) = match word.split_once('*') {
            Some((w, n)) => (w, n.parse::<usize>().unwrap()),
            None => (word, 1),
        };
        for _ in 0..times {
            let (head, arg) = word.split_once(':').unwrap_or((word, ""));
            let tokens: u32 = head[1..].parse().unwrap();
            let mut m = match &head[..1] {
                "u" => Message::user("hello"),
                "a" => Message::assistant("hi"),
                "s" => Message::new(Role::System, "rules"),
                "A" => Message::assistant_calls(
                    "",
                    arg.split(',')
                        .map(|c| {
                            let (id, name) = c.split_once('=').unwrap_or((c, "lookup"));
                            ToolCall {
                                id: id.into(),
                                name: name.into(),
                                arguments: "{}".into(),
                            }
                        })
                        .collect(),
                ),
                "t" => Message::tool_result(arg, "result"),
                "S" => {
                    let mut m = Message::assistant("[CONTEXT SUMMARY]\nearlier");
                    m.kind = MessageKind::Summary(SummaryMeta {
                        covers_from_seq: 0,
                        covers_through_seq: 0,
                        compacted_count: 10,
                        original_tokens: 1000,
                        summary_tokens: tokens,
                        generation: arg.parse().unwrap_or(1),
                        compacted_at: Timestamp(0),
                    });
                    m
                }
                other => panic!("unknown message kind {other}"),
            };
            m.seq = out.len() as u64;
            m.tokens = tokens;
            out.push(m);
        }
    }
    out
}

fn check(spec: &str, trigger: Trigger, tweak: fn(&mut CompactionConfig), expected: Expect) {
    let history = history(spec);
    let mut c = cfg();
    tweak(&mut c);
    let counter = TokenCounter::for_model("gpt-4o");
    let outcome = plan(
        &PlanRequest {
            history: &history,
            fixed_tokens: 0,
            trigger,
            calibration: 1.0,
        },
        &c,
        &counter,
    );
    if let PlanOutcome::Plan(p) = &outcome {
        assert_tool_groups_whole(&history, p.body.clone());
    }
    expected.assert_eq(&outcome.describe(&history));
}

/// No tool call in the live history (head + tail) lacks its results, and no result lacks its call.
fn assert_tool_groups_whole(history: &[Message], body: std::ops::Range<usize>) {
    let live: Vec<&Message> = history
        .iter()
        .enumerate()
        .filter(|(i, _)| !body.contains(i))
        .map(|(_, m)| m)
        .collect();
    let calls: Vec<&str> = live
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    let results: Vec<&str> = live
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    for r in &results {
        assert!(calls.contains(r), "tool result {r} lost its call");
    }
    for c in &calls {
        assert!(results.contains(c), "tool call {c} lost its result");
    }
}

fn none(_: &mut CompactionConfig) {}

#[test]
fn below_threshold() {
    check(
        "u50*13",
        Trigger::Sleep,
        none,
        expect!["skip usage=0.650: below the threshold (0.70)"],
    );
}

#[test]
fn exactly_at_threshold_compacts() {
    check(
        "u50*14",
        Trigger::Sleep,
        none,
        expect![[r#"
        sleep usage=0.700 tokens=700
        head none (0 msgs, 0 tok)
        body #0..#9 (10 msgs, 500 tok) gen=1
        tail #10..#13 (4 msgs, 200 tok)
        summarizer 580 tok in 1 chunk(s) [#0..#9]"#]],
    );
}

#[test]
fn emergency_threshold_is_its_own() {
    check(
        "u50*14",
        Trigger::Emergency,
        none,
        expect!["skip usage=0.700: below the threshold (0.80)"],
    );
    check(
        "u50*16",
        Trigger::Emergency,
        none,
        expect![[r#"
        emergency usage=0.800 tokens=800
        head none (0 msgs, 0 tok)
        body #0..#11 (12 msgs, 600 tok) gen=1
        tail #12..#15 (4 msgs, 200 tok)
        summarizer 696 tok in 1 chunk(s) [#0..#11]"#]],
    );
}

#[test]
fn disabled_skips_sleep_but_manual_runs() {
    check(
        "u50*16",
        Trigger::Sleep,
        |c| c.enabled = false,
        expect!["skip usage=0.800: compaction is disabled"],
    );
    check(
        "u50*16",
        Trigger::Manual,
        |c| c.enabled = false,
        expect![[r#"
            manual usage=0.800 tokens=800
            head none (0 msgs, 0 tok)
            body #0..#11 (12 msgs, 600 tok) gen=1
            tail #12..#15 (4 msgs, 200 tok)
            summarizer 696 tok in 1 chunk(s) [#0..#11]"#]],
    );
}

#[test]
fn manual_ignores_threshold_and_batch_size() {
    check(
        "u10*6",
        Trigger::Manual,
        |c| c.preserve_ratio = 0.0,
        expect![[r#"
        manual usage=0.060 tokens=60
        head none (0 msgs, 0 tok)
        body #0..#1 (2 msgs, 20 tok) gen=1
        tail #2..#5 (4 msgs, 40 tok)
        summarizer 36 tok in 1 chunk(s) [#0..#1]"#]],
    );
}

#[test]
fn empty_history() {
    check(
        "",
        Trigger::Manual,
        none,
        expect!["skip usage=0.000: the history is empty"],
    );
}

#[test]
fn within_preserve_window() {
    check(
        "u400 a400",
        Trigger::Manual,
        none,
        expect![
            "skip usage=0.800: everything is within the pinned head (0) and the preserve window (2)"
        ],
    );
}

#[test]
fn batch_too_small() {
    check(
        "u300 a300 u40 a40 u40 a40",
        Trigger::Sleep,
        none,
        expect!["skip usage=0.760: the body has 2 messages, fewer than min_compact_batch (3)"],
    );
}

#[test]
fn preserve_by_count_holds_more() {
    // 20% of 1,000 tokens holds 2 messages of 80; 4 by count wins.
    check(
        "u80*10",
        Trigger::Sleep,
        none,
        expect![[r#"
        sleep usage=0.800 tokens=800
        head none (0 msgs, 0 tok)
        body #0..#5 (6 msgs, 480 tok) gen=1
        tail #6..#9 (4 msgs, 320 tok)
        summarizer 528 tok in 1 chunk(s) [#0..#5]"#]],
    );
}

#[test]
fn preserve_by_ratio_holds_more() {
    // 20% of 1,000 tokens holds 10 messages of 20; more than 4 by count.
    check(
        "u100*6 u20*10",
        Trigger::Sleep,
        none,
        expect![[r#"
        sleep usage=0.800 tokens=800
        head none (0 msgs, 0 tok)
        body #0..#5 (6 msgs, 600 tok) gen=1
        tail #6..#15 (10 msgs, 200 tok)
        summarizer 648 tok in 1 chunk(s) [#0..#5]"#]],
    );
}

#[test]
fn pinned_head() {
    check(
        "s100 u60*12",
        Trigger::Sleep,
        |c| c.head_size = 1,
        expect![[r#"
            sleep usage=0.820 tokens=820
            head #0..#0 (1 msgs, 100 tok)
            body #1..#8 (8 msgs, 480 tok) gen=1
            tail #9..#12 (4 msgs, 240 tok)
            summarizer 544 tok in 1 chunk(s) [#1..#8]"#]],
    );
}

#[test]
fn head_never_splits_a_tool_group() {
    check(
        "A50:h1 t50:h1 u60*12",
        Trigger::Sleep,
        |c| c.head_size = 1,
        expect![[r#"
            sleep usage=0.820 tokens=820
            head #0..#1 (2 msgs, 100 tok)
            body #2..#9 (8 msgs, 480 tok) gen=1
            tail #10..#13 (4 msgs, 240 tok)
            summarizer 544 tok in 1 chunk(s) [#2..#9]"#]],
    );
}

#[test]
fn tool_pair_at_the_cut_single_call() {
    // The count window starts at the tool result; the cut moves back to keep the call with it.
    check(
        "u100*6 A50:c1 t50:c1 u50 a50 u50",
        Trigger::Sleep,
        none,
        expect![[r#"
            sleep usage=0.850 tokens=850
            head none (0 msgs, 0 tok)
            body #0..#5 (6 msgs, 600 tok) gen=1
            tail #6..#10 (5 msgs, 250 tok)
            summarizer 648 tok in 1 chunk(s) [#0..#5]"#]],
    );
}

#[test]
fn tool_group_at_the_cut_parallel_calls() {
    check(
        "u100*6 A40:c1,c2,c3 t40:c1 t40:c2 t40:c3 u40",
        Trigger::Sleep,
        none,
        expect![[r#"
            sleep usage=0.800 tokens=800
            head none (0 msgs, 0 tok)
            body #0..#5 (6 msgs, 600 tok) gen=1
            tail #6..#10 (5 msgs, 200 tok)
            summarizer 648 tok in 1 chunk(s) [#0..#5]"#]],
    );
}

#[test]
fn previous_summary_folded_in() {
    check(
        "S150:2 u60*12",
        Trigger::Sleep,
        none,
        expect![[r#"
        sleep usage=0.870 tokens=870
        head none (0 msgs, 0 tok)
        body #0..#8 (9 msgs, 630 tok) folds summary #0 gen=3
        tail #9..#12 (4 msgs, 240 tok)
        summarizer 702 tok in 1 chunk(s) [#0..#8]"#]],
    );
}

#[test]
fn old_tool_outputs_masked_for_the_summarizer() {
    check(
        "u50 A20:c1 t200:c1 A20:c2=keep t200:c2 u50*8",
        Trigger::Sleep,
        none,
        expect![[r#"
            sleep usage=0.890 tokens=890
            head none (0 msgs, 0 tok)
            body #0..#8 (9 msgs, 690 tok) gen=1
            tail #9..#12 (4 msgs, 200 tok)
            summarizer 600 tok in 1 chunk(s) [#0..#8] masked [#2]"#]],
    );
}

#[test]
fn one_message_larger_than_the_window() {
    check(
        "u50 a2000 u50*5",
        Trigger::Emergency,
        |c| c.summarizer_context_tokens = 1000,
        expect![[r#"
            emergency usage=2.300 tokens=2300
            head none (0 msgs, 0 tok)
            body #0..#2 (3 msgs, 2100 tok) gen=1
            tail #3..#6 (4 msgs, 200 tok)
            summarizer 161 tok in 1 chunk(s) [#0..#2] masked [#1]"#]],
    );
}

#[test]
fn body_larger_than_the_summarizer_window_is_chunked() {
    check(
        "u100*20",
        Trigger::Sleep,
        |c| {
            c.max_context_tokens = 2500;
            c.summarizer_context_tokens = 1000;
        },
        expect![[r#"
            sleep usage=0.800 tokens=2000
            head none (0 msgs, 0 tok)
            body #0..#14 (15 msgs, 1500 tok) gen=1
            tail #15..#19 (5 msgs, 500 tok)
            summarizer 1620 tok in 8 chunk(s) [#0..#1, #2..#3, #4..#5, #6..#7, #8..#9, #10..#11, #12..#13, #14..#14]"#]],
    );
}

#[test]
fn emergency_shrinks_an_oversized_preserve_window() {
    // Four 190-token messages fill the count window; with a full summary the prompt would still be
    // over 80%, so emergency keeps only the 20% token share.
    check(
        "u20*10 u190*4",
        Trigger::Emergency,
        none,
        expect![[r#"
        emergency usage=0.960 tokens=960
        head none (0 msgs, 0 tok)
        body #0..#12 (13 msgs, 770 tok) gen=1
        tail #13..#13 (1 msgs, 190 tok) shrunk
        summarizer 874 tok in 1 chunk(s) [#0..#12]"#]],
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// One step of a random conversation: a plain message, or a tool group of 1–3 parallel calls.
    #[derive(Debug, Clone)]
    enum Step {
        User(u32),
        Assistant(u32),
        Tools(u32, Vec<u32>),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1u32..300).prop_map(Step::User),
            (1u32..300).prop_map(Step::Assistant),
            (1u32..100, prop::collection::vec(1u32..400, 1..4))
                .prop_map(|(a, r)| Step::Tools(a, r)),
        ]
    }

    fn build(steps: &[Step]) -> Vec<Message> {
        let mut out: Vec<Message> = Vec::new();
        let push = |mut m: Message, tokens: u32, out: &mut Vec<Message>| {
            m.seq = out.len() as u64;
            m.tokens = tokens;
            out.push(m);
        };
        for (n, s) in steps.iter().enumerate() {
            match s {
                Step::User(t) => push(Message::user("u"), *t, &mut out),
                Step::Assistant(t) => push(Message::assistant("a"), *t, &mut out),
                Step::Tools(a, results) => {
                    let calls = (0..results.len())
                        .map(|k| ToolCall {
                            id: format!("c{n}_{k}"),
                            name: "lookup".into(),
                            arguments: "{}".into(),
                        })
                        .collect();
                    push(Message::assistant_calls("", calls), *a, &mut out);
                    for (k, t) in results.iter().enumerate() {
                        push(Message::tool_result(format!("c{n}_{k}"), "r"), *t, &mut out);
                    }
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// No plan leaves a tool result without its call (or a call without its results) in the
        /// live history, whatever the window, head and trigger.
        #[test]
        fn tool_groups_stay_whole(
            steps in prop::collection::vec(step(), 0..60),
            preserve_messages in 1u32..12,
            preserve_ratio in 0.0f64..0.6,
            head_size in 0u32..6,
            trigger in prop_oneof![Just(Trigger::Sleep), Just(Trigger::Emergency), Just(Trigger::Manual)],
        ) {
            let history = build(&steps);
            let mut c = cfg();
            c.preserve_messages = preserve_messages;
            c.preserve_ratio = preserve_ratio;
            c.head_size = head_size;
            let counter = TokenCounter::for_model("gpt-4o");
            let outcome = plan(
                &PlanRequest { history: &history, fixed_tokens: 0, trigger, calibration: 1.0 },
                &c,
                &counter,
            );
            if let PlanOutcome::Plan(p) = outcome {
                prop_assert!(p.head.end <= p.body.start && p.body.end == p.tail.start);
                prop_assert_eq!(p.tail.end, history.len());
                prop_assert!(!p.body.is_empty());
                // Chunks tile the body exactly.
                prop_assert_eq!(p.chunks.first().map(|r| r.start), Some(p.body.start));
                prop_assert_eq!(p.chunks.last().map(|r| r.end), Some(p.body.end));
                for w in p.chunks.windows(2) {
                    prop_assert_eq!(w[0].end, w[1].start);
                }
                assert_tool_groups_whole(&history, p.body.clone());
            }
        }
    }
}

/// The tail a compaction keeps is at most half the room it has below the sleep threshold (beside
/// the fixed prompt and a full summary), never fewer than the latest 4 messages; at small windows
/// the working context's budget has a floor.
#[test]
fn the_tail_is_cut_to_half_its_room_and_the_note_keeps_a_floor() {
    let counter = TokenCounter::for_model("gpt-4o");
    let tail_of = |spec: &str, fixed_tokens: u64, preserve_messages: u32| {
        let history = history(spec);
        let mut c = cfg();
        c.preserve_messages = preserve_messages;
        let outcome = plan(
            &PlanRequest {
                history: &history,
                fixed_tokens,
                trigger: Trigger::Sleep,
                calibration: 1.0,
            },
            &c,
            &counter,
        );
        match outcome {
            PlanOutcome::Plan(p) => (p.tail.len(), p.tail_tokens),
            other => panic!("{}", other.describe(&history)),
        }
    };
    // (0.7 × 1,000 − 400 − 100) / 2 = 100 tokens: 5 of the 10 messages the ratio (200) would keep.
    assert_eq!(cfg().tail_cap(400), 100);
    assert_eq!(tail_of("u20*30", 400, 4), (5, 100));
    // Nothing fixed: the cap (300) is above the preserve window, which keeps its 10 messages.
    assert_eq!(tail_of("u20*40", 0, 4), (10, 200));
    // A cap of one message: the floor keeps the latest 4, though 6 were asked for by count.
    assert_eq!(tail_of("u60*12", 400, 6), (4, 240));

    let mut c = CompactionConfig::default();
    c.max_context_tokens = 2000;
    // 20% of 2,000 is 400; half the prompt budget (2,000 − 512) is 744.
    assert_eq!(c.working_budget(), 744);
    c.max_context_tokens = 8192;
    assert_eq!(c.working_budget(), 1638);
    c.max_context_tokens = 3840;
    assert_eq!(c.working_budget(), 768);
    c.working_share = 0.0;
    assert_eq!(c.working_budget(), 0, "0 turns the working context off");
}
