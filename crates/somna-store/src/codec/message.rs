//! Decoding a stored [`Message`] without serde: the history and archive reads of every turn and
//! every compaction decode hundreds of messages, and serde's generic path (a visitor per field,
//! each field's name matched as a string through `deserialize_identifier`) was about 40% of the
//! cost of a history read.
//!
//! [`fast`] reads exactly what [`super::encode`] writes for a message (named MessagePack: a map of
//! `seq`, `role`, `content`, the optional `name`, `tool_calls`, `tool_call_id`, then
//! `created_at`, `tokens` and the internally tagged `kind`). Anything else — a field it does not
//! know, a type it does not expect, a value written by another encoder — makes it give up
//! (`None`), and the caller decodes with serde as before, so a value is never read differently
//! from how serde reads it (a property test checks both agree).

use rmp::decode::{read_array_len, read_int, read_map_len, read_str_from_slice};
use somna_core::{Message, MessageKind, Role, SummaryMeta, Timestamp, ToolCall};

/// A message's fields by their stored names.
const FIELDS: [&str; 9] = [
    "seq",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "created_at",
    "tokens",
    "kind",
];

/// The message encoded in `body` (the value after its version byte), or `None` when the value is
/// not in the exact form this reads (the caller then decodes with serde).
pub(super) fn fast(body: &[u8]) -> Option<Message> {
    let mut rd = body;
    let fields = read_map_len(&mut rd).ok()?;
    let mut seq = None;
    let mut role = None;
    let mut content = None;
    let mut name = None;
    let mut tool_calls = Vec::new();
    let mut tool_call_id = None;
    let mut created_at = None;
    let mut tokens = None;
    let mut kind = MessageKind::Normal;
    // Fields met so far: serde refuses a value that names one twice, so this gives up on it.
    let mut seen = 0u16;
    for _ in 0..fields {
        let key = str(&mut rd)?;
        let bit = 1u16 << FIELDS.iter().position(|f| *f == key)?;
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match key {
            "seq" => seq = Some(read_int::<u64, _>(&mut rd).ok()?),
            "role" => role = Some(role_named(str(&mut rd)?)?),
            "content" => content = Some(str(&mut rd)?.to_owned()),
            "name" => name = optional_str(&mut rd)?,
            "tool_calls" => tool_calls = calls(&mut rd)?,
            "tool_call_id" => tool_call_id = optional_str(&mut rd)?,
            "created_at" => created_at = Some(Timestamp(read_int::<u64, _>(&mut rd).ok()?)),
            "tokens" => tokens = Some(read_int::<u32, _>(&mut rd).ok()?),
            "kind" => kind = message_kind(&mut rd)?,
            _ => return None,
        }
    }
    if !rd.is_empty() {
        return None;
    }
    Some(Message {
        seq: seq?,
        role: role?,
        content: content?,
        name,
        tool_calls,
        tool_call_id,
        created_at: created_at?,
        tokens: tokens?,
        kind,
    })
}

/// A string, borrowed from the value.
fn str<'a>(rd: &mut &'a [u8]) -> Option<&'a str> {
    let (s, rest) = read_str_from_slice(*rd).ok()?;
    *rd = rest;
    Some(s)
}

/// A string or nil.
fn optional_str(rd: &mut &[u8]) -> Option<Option<String>> {
    if rd.first() == Some(&0xc0) {
        *rd = &rd[1..];
        return Some(None);
    }
    Some(Some(str(rd)?.to_owned()))
}

/// A role by the name serde writes and reads for it (`as_str`; not `FromStr`, which also reads
/// `developer` as `system` where serde refuses it).
fn role_named(name: &str) -> Option<Role> {
    Role::ALL.into_iter().find(|r| r.as_str() == name)
}

fn calls(rd: &mut &[u8]) -> Option<Vec<ToolCall>> {
    let n = read_array_len(rd).ok()?;
    let mut out = Vec::with_capacity(n.min(64) as usize);
    for _ in 0..n {
        let fields = read_map_len(rd).ok()?;
        let (mut id, mut name, mut arguments) = (None, None, None);
        for _ in 0..fields {
            let slot = match str(rd)? {
                "id" => &mut id,
                "name" => &mut name,
                "arguments" => &mut arguments,
                _ => return None,
            };
            if slot.replace(str(rd)?.to_owned()).is_some() {
                return None;
            }
        }
        out.push(ToolCall {
            id: id?,
            name: name?,
            arguments: arguments?,
        });
    }
    Some(out)
}

/// The internally tagged kind: `{"type": "normal"}`, `{"type": "masked", "original_tokens": n}`
/// or `{"type": "summary", …SummaryMeta}`, the tag first as serde writes it.
fn message_kind(rd: &mut &[u8]) -> Option<MessageKind> {
    let fields = read_map_len(rd).ok()?;
    if fields == 0 || str(rd)? != "type" {
        return None;
    }
    match str(rd)? {
        "normal" if fields == 1 => Some(MessageKind::Normal),
        "masked" if fields == 2 => match str(rd)? {
            "original_tokens" => Some(MessageKind::Masked {
                original_tokens: read_int(rd).ok()?,
            }),
            _ => None,
        },
        "summary" => {
            let mut meta = [None::<u64>; 7];
            const NAMES: [&str; 7] = [
                "covers_from_seq",
                "covers_through_seq",
                "compacted_count",
                "original_tokens",
                "summary_tokens",
                "generation",
                "compacted_at",
            ];
            for _ in 1..fields {
                let key = str(rd)?;
                let at = NAMES.iter().position(|n| *n == key)?;
                if meta[at].replace(read_int(rd).ok()?).is_some() {
                    return None;
                }
            }
            let small = |i: usize| meta[i].and_then(|v| u32::try_from(v).ok());
            Some(MessageKind::Summary(SummaryMeta {
                covers_from_seq: meta[0]?,
                covers_through_seq: meta[1]?,
                compacted_count: small(2)?,
                original_tokens: small(3)?,
                summary_tokens: small(4)?,
                generation: small(5)?,
                compacted_at: Timestamp(meta[6]?),
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-z ]{0,40}",
            "\\PC{0,60}",
            Just("x".repeat(70_000)),
        ]
    }

    fn kind() -> impl Strategy<Value = MessageKind> {
        prop_oneof![
            Just(MessageKind::Normal),
            any::<u32>().prop_map(|original_tokens| MessageKind::Masked { original_tokens }),
            (any::<u64>(), any::<u64>(), any::<[u32; 4]>(), any::<u64>()).prop_map(
                |(from, through, n, at)| MessageKind::Summary(SummaryMeta {
                    covers_from_seq: from,
                    covers_through_seq: through,
                    compacted_count: n[0],
                    original_tokens: n[1],
                    summary_tokens: n[2],
                    generation: n[3],
                    compacted_at: Timestamp(at),
                })
            ),
        ]
    }

    fn message() -> impl Strategy<Value = Message> {
        let role = prop_oneof![
            Just(Role::System),
            Just(Role::User),
            Just(Role::Assistant),
            Just(Role::Tool),
        ];
        let call = (text(), text(), text()).prop_map(|(id, name, arguments)| ToolCall {
            id,
            name,
            arguments,
        });
        (
            (any::<u64>(), role, text(), proptest::option::of(text())),
            (
                proptest::collection::vec(call, 0..3),
                proptest::option::of(text()),
                any::<u64>(),
                any::<u32>(),
                kind(),
            ),
        )
            .prop_map(
                |((seq, role, content, name), (tool_calls, tool_call_id, at, tokens, kind))| {
                    Message {
                        seq,
                        role,
                        content,
                        name,
                        tool_calls,
                        tool_call_id,
                        created_at: Timestamp(at),
                        tokens,
                        kind,
                    }
                },
            )
    }

    proptest! {
        /// Every message the store writes is read back by the fast path, equal to what serde
        /// reads.
        #[test]
        fn the_fast_path_reads_every_stored_message_as_serde_does(m in message()) {
            let value = codec::encode("history", &m).unwrap();
            let by_serde: Message = codec::decode("history", b"k", &value).unwrap();
            prop_assert_eq!(&by_serde, &m);
            prop_assert_eq!(fast(&value[1..]), Some(m));
        }

        /// A value the fast path does not read exactly (cut short, or any byte changed) is either
        /// given up on or read as serde reads it: never read differently.
        #[test]
        fn a_damaged_value_is_never_read_differently(
            m in message(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let value = codec::encode("history", &m).unwrap();
            let body = &value[1..];
            let short = &body[..cut.index(body.len())];
            let mut changed = body.to_vec();
            let at = flip.0.index(changed.len());
            changed[at] ^= flip.1.max(1);
            for damaged in [short, &changed[..]] {
                if let Some(read) = fast(damaged) {
                    let by_serde: Result<Message, _> = rmp_serde::from_slice(damaged);
                    prop_assert_eq!(Some(read), by_serde.ok());
                }
            }
        }
    }

    /// A value that names a field twice, which serde refuses, is not read by the fast path
    /// either (it would otherwise keep the last value).
    #[test]
    fn a_field_named_twice_is_left_to_serde() {
        use rmp::encode::{write_map_len, write_str, write_uint};
        let mut body = Vec::new();
        write_map_len(&mut body, 6).unwrap();
        for (key, value) in [("seq", 1), ("seq", 2)] {
            write_str(&mut body, key).unwrap();
            write_uint(&mut body, value).unwrap();
        }
        for (key, value) in [("role", "user"), ("content", "hi")] {
            write_str(&mut body, key).unwrap();
            write_str(&mut body, value).unwrap();
        }
        for key in ["created_at", "tokens"] {
            write_str(&mut body, key).unwrap();
            write_uint(&mut body, 3).unwrap();
        }
        assert!(rmp_serde::from_slice::<Message>(&body).is_err());
        assert_eq!(fast(&body), None);
    }

    /// A role serde does not read (`developer`, which only `FromStr` reads) is left to serde.
    #[test]
    fn a_role_serde_refuses_is_left_to_serde() {
        let mut value = codec::encode("history", &Message::system("hi")).unwrap();
        let at = value.windows(7).position(|w| w == b"\xa6system").unwrap();
        value.splice(at..at + 7, *b"\xa9developer");
        assert!(codec::decode::<Message>("history", b"k", &value).is_err());
        assert_eq!(fast(&value[1..]), None);
    }

    /// A value with a field this does not know (a later version's optional field) is left to serde.
    #[test]
    fn an_unknown_field_is_left_to_serde() {
        #[derive(serde::Serialize)]
        struct Later<'a> {
            seq: u64,
            role: &'a str,
            content: &'a str,
            created_at: u64,
            tokens: u32,
            mood: &'a str,
        }
        let value = codec::encode(
            "history",
            &Later {
                seq: 3,
                role: "developer",
                content: "hi",
                created_at: 9,
                tokens: 2,
                mood: "wary",
            },
        )
        .unwrap();
        assert_eq!(fast(&value[1..]), None);
    }
}
