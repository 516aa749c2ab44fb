//! The value encoding: the version byte, named MessagePack, and typed errors for unreadable values.

use std::fmt::Write as _;

use somna_core::{JournalEntry, Message, Timestamp, ToolCall};
use somna_store::codec::{self, FORMAT_VERSION};
use somna_store::{Store, StoreError, StoreOptions};

use crate::common::*;

/// A hex dump, 16 bytes a line, with the printable bytes beside it.
fn hexdump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        writeln!(out, "{:04x}  {:<47}  {text}", i * 16, hex.join(" ")).unwrap();
    }
    out
}

#[test]
fn encoded_values_start_with_the_version_byte_and_name_their_fields() {
    let message = Message::assistant_calls(
        "checking",
        vec![ToolCall {
            id: "c1".into(),
            name: "look".into(),
            arguments: "{}".into(),
        }],
    )
    .at(Timestamp(1_790_000_000_000));
    let message = Message {
        seq: 3,
        tokens: 12,
        ..message
    };
    let bytes = codec::encode("history", &message).unwrap();
    assert_eq!(bytes[0], FORMAT_VERSION);
    let back: Message = codec::decode("history", b"npc\0key", &bytes).unwrap();
    assert_eq!(back, message);
    insta::assert_snapshot!("message_v1", hexdump(&bytes));

    let second = Message { seq: 1, ..msg(1) };
    let summary = summary_for(&[msg(0), second], "two turns", NOW);
    let bytes = codec::encode("history", &summary).unwrap();
    assert_eq!(
        codec::decode::<Message>("history", b"k", &bytes).unwrap(),
        summary
    );
    insta::assert_snapshot!("summary_v1", hexdump(&bytes));

    let entry = JournalEntry::synthesis(NOW, "two turns", 0, 1);
    let bytes = codec::encode("journal", &entry).unwrap();
    assert_eq!(
        codec::decode::<JournalEntry>("journal", b"k", &bytes).unwrap(),
        entry
    );
}

#[test]
fn decoding_checks_the_version_and_names_tree_and_key() {
    let good = codec::encode("history", &msg(0)).unwrap();
    let mut future = good.clone();
    future[0] = 2;
    let err = codec::decode::<Message>("history", b"npc\0\0\0\0\0\0\0\0\x05", &future).unwrap_err();
    assert!(matches!(
        err,
        StoreError::UnsupportedVersion {
            tree: "history",
            version: 2,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "value of history key npc/5 has format version 2, this build reads version 1"
    );
    let err =
        codec::decode::<Message>("archive", b"npc\0\0\0\0\0\0\0\0\x05\0\0\0\x02", &[]).unwrap_err();
    assert_eq!(err.to_string(), "value of archive key npc/5.2 is empty");
    let err = codec::decode::<Message>(
        "history",
        b"npc\0\0\0\0\0\0\0\0\x05",
        &good[..good.len() / 2],
    )
    .unwrap_err();
    assert!(
        matches!(err, StoreError::Decode { tree: "history", ref key, .. } if key == "npc/5"),
        "{err}"
    );
    // The decoder's error is named once, in the message, and is not repeated as a source (a
    // `{e:#}` chain would print it twice).
    assert!(
        err.to_string()
            .starts_with("cannot decode the value of history key npc/5: "),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_none(), "{err}");
}

#[test]
fn an_unreadable_value_on_disk_is_a_typed_error_from_reads() {
    let (dir, id) = closed_sled_store(3, None);
    {
        // Rewrite message 1 as if a newer Somna had written it.
        let db = raw_sled_open(dir.path()).unwrap();
        let history = db.open_tree("history").unwrap();
        let key = [b"npc\0".as_slice(), &1u64.to_be_bytes()].concat();
        let mut value = history.get(&key).unwrap().unwrap().to_vec();
        value[0] = 9;
        history.insert(key, value).unwrap();
        db.flush().unwrap();
    }
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let err = store.history(&id).unwrap_err();
    assert_eq!(
        err.to_string(),
        "value of history key npc/1 has format version 9, this build reads version 1"
    );
    let report = store.check_invariants(&id).unwrap();
    assert!(!report.is_ok());
    assert!(
        report.violations[0].contains("format version 9"),
        "{report}"
    );
}
