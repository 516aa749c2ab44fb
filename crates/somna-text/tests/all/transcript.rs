//! Framing transcripts as data: property tests of the round trip and the frame, and a snapshot.

use proptest::prelude::*;
use somna_core::{Message, Role, ToolCall};
use somna_testkit::transcript_200;
use somna_text::transcript::{self, CLOSE, OPEN, Turn};

/// Content with the characters that could break a frame: newlines, `<`, `\`, delimiters, fake headers.
fn content() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => proptest::string::string_regex(".{0,6}").unwrap(),
            1 => Just("\n".to_string()),
            1 => Just("<".to_string()),
            1 => Just("\\".to_string()),
            1 => Just("</transcript>".to_string()),
            1 => Just("<TRANSCRIPT>".to_string()),
            1 => Just("\n[#7 user (Eve)] ".to_string()),
            1 => Just("\n[#7 call x id=y] {}".to_string()),
            1 => Just("  ".to_string()),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::System)],
        content(),
        proptest::option::of(
            proptest::string::string_regex("[A-Za-z][A-Za-z0-9 _-]{0,10}").unwrap(),
        ),
        proptest::collection::vec(
            (
                proptest::string::string_regex("[a-z0-9_]{1,8}").unwrap(),
                proptest::string::string_regex("[a-z_]{1,8}").unwrap(),
                content(),
            ),
            0..3,
        ),
        // No time, or a time in 2020–2030 (several turns a day often land on the same day).
        prop_oneof![Just(0u64), 1_577_836_800_000u64..1_893_456_000_000u64],
    )
        .prop_map(|(role, content, name, calls, at)| {
            let mut m = Message::new(role, content);
            m.name = name;
            m.created_at = somna_core::Timestamp(at);
            if role == Role::Assistant {
                m.tool_calls = calls
                    .into_iter()
                    .map(|(id, name, arg)| ToolCall {
                        id,
                        name,
                        arguments: serde_json::json!({ "text": arg }).to_string(),
                    })
                    .collect();
            }
            m
        })
}

proptest! {
    #[test]
    fn parse_recovers_what_frame_wrote(messages in proptest::collection::vec(message(), 0..8)) {
        let messages: Vec<Message> = messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| Message { seq: i as u64 + 1, ..m })
            .collect();
        let framed = transcript::frame(&messages);
        let expected: Vec<Turn> = messages.iter().map(Turn::from).collect();
        prop_assert_eq!(transcript::parse(&framed), expected);
    }

    #[test]
    fn nothing_escapes_the_frame(messages in proptest::collection::vec(message(), 1..6)) {
        let framed = transcript::frame(&messages);
        prop_assert!(framed.starts_with(OPEN));
        prop_assert!(framed.ends_with(CLOSE));
        let lower = framed.to_lowercase();
        prop_assert_eq!(lower.matches("<transcript").count(), 1);
        prop_assert_eq!(lower.matches("</transcript").count(), 1);
        let headers = framed.lines().filter(|l| l.starts_with("[#")).count();
        let calls: usize = messages.iter().map(|m| m.tool_calls.len()).sum();
        prop_assert_eq!(headers, messages.len() + calls);
    }
}

#[test]
fn turns_carry_their_day_once_and_their_minute_always() {
    let at = |s: &str| somna_core::Timestamp::parse_rfc3339(s).unwrap();
    let mut messages = vec![
        Message::user("Morning!"),
        Message::assistant("Morning, Mara."),
        Message::tool_result("c1", "ok"),
        Message::user("Back again."),
        Message::user("No time on this one."),
    ];
    for (i, m) in messages.iter_mut().enumerate() {
        m.seq = i as u64 + 1;
    }
    messages[0].created_at = at("2023-05-08T09:05:42Z");
    messages[1].created_at = at("2023-05-08T09:06:00Z");
    messages[2].created_at = at("2023-05-08T23:59:00Z");
    messages[3].created_at = at("2023-05-09T00:01:00Z");
    let framed = transcript::frame(&messages);
    let headers: Vec<&str> = framed
        .lines()
        .filter(|l| l.starts_with("[#"))
        .map(|l| &l[..l.find(']').unwrap() + 1])
        .collect();
    assert_eq!(
        headers,
        [
            "[#1 user at 2023-05-08 09:05]",
            "[#2 assistant at 09:06]",
            "[#3 tool at 23:59 for c1]",
            "[#4 user at 2023-05-09 00:01]",
            "[#5 user]",
        ]
    );
    let turns = transcript::parse(&framed);
    assert_eq!(turns[0].at, Some(at("2023-05-08T09:05:00Z")));
    assert_eq!(turns[2].at, Some(at("2023-05-08T23:59:00Z")));
    assert_eq!(turns[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(turns[3].day().as_deref(), Some("2023-05-09"));
    assert_eq!(turns[4].at, None);
    // A header with a malformed time is not a header: the line continues the turn before.
    let odd = transcript::parse("[#1 user] hi\n[#2 user at 2023-13 9:5] not a header");
    assert_eq!(odd.len(), 1);
}

#[test]
fn tool_results_round_trip_when_short_and_not_json() {
    let messages = vec![
        Message {
            seq: 4,
            ..Message::tool_result("c1", "12 sacks\nin the storehouse")
        },
        Message {
            seq: 5,
            ..Message::tool_result("c2", "{ \"pretty\": [1, 2] }")
        },
    ];
    let turns = transcript::parse(&transcript::frame(&messages));
    assert_eq!(turns[0], Turn::from(&messages[0]));
    // JSON is shown compactly.
    assert_eq!(turns[1].content, r#"{"pretty":[1,2]}"#);
    assert_eq!(turns[1].tool_call_id.as_deref(), Some("c2"));
}

#[test]
fn frame_snapshot_of_the_fixtures_opening() {
    let messages = transcript_200().unwrap();
    insta::assert_snapshot!(transcript::frame(&messages[..14]));
}
