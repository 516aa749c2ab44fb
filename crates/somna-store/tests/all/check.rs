//! check_invariants on a deliberately damaged database.

use somna_store::{Store, StoreOptions};

use crate::common::*;

on_both_backends!(a_clean_agent_reports_its_counts,);

fn key(seq: u64) -> Vec<u8> {
    [b"npc\0".as_slice(), &seq.to_be_bytes()].concat()
}

fn a_clean_agent_reports_its_counts() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 12);
    compact(&store, &id, &all[..6], "six");
    let report = store.check_invariants(&id).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        (report.history_len, report.archive_len, report.journal_len),
        (7, 6, 1)
    );
    assert_eq!(report.history_tokens, store.usage_tokens(&id).unwrap());
    assert_eq!(
        report.to_string(),
        format!(
            "agent npc: 7 history messages ({} tokens), 6 archived, 1 journal entries; ok",
            report.history_tokens
        )
    );
}

// Damages sled files directly.
#[test]
fn damage_is_reported() {
    let (dir, id) = closed_sled_store(12, Some((6, "six")));
    {
        let db = raw_sled_open(dir.path()).unwrap();
        let history = db.open_tree("history").unwrap();
        let archive = db.open_tree("archive").unwrap();
        // An archived original lost (hidden under the summary's cover in the history tree), a
        // live one archived twice (copied to the archive tree), a history message lost, the
        // summary's undo record and an index key deleted.
        history.remove(key(2)).unwrap();
        let eight = history.get(key(8)).unwrap().unwrap();
        archive.insert(key(8), eight).unwrap();
        history.remove(key(10)).unwrap();
        history.remove(key(11)).unwrap();
        let summary_key = [key(0), 1u32.to_be_bytes().to_vec()].concat();
        db.open_tree("undo").unwrap().remove(summary_key).unwrap();
        let index = db.open_tree("journal_by_source").unwrap();
        let index_key = index.scan_prefix(b"npc\0").next().unwrap().unwrap().0;
        index.remove(index_key).unwrap();
        db.flush().unwrap();
    }
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let report = store.check_invariants(&id).unwrap();
    insta::assert_snapshot!(report.to_string());
}
