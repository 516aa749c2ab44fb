//! Framing transcripts as data: property tests of the round trip and the frame, and a snapshot.

use proptest::prelude::*;
use somna_core::{Message, Role, ToolCall};
use somna_llm::transcript::{self, CLOSE, OPEN, Turn};
use somna_testkit::transcript_200;

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
    )
        .prop_map(|(role, content, name, calls)| {
            let mut m = Message::new(role, content);
            m.name = name;
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
