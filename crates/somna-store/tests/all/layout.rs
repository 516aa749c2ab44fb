//! Databases written by earlier builds: a store-layout-1 database (originals moved into the
//! `archive` tree) must read and operate exactly like the same operations done by this build.

use somna_core::{AgentId, Timestamp};
use somna_store::{CommitOutcome, Store, UncompactOutcome};

use crate::common::*;

/// The operations the layout-1 fixture was made with: two agents, masking, a compaction, a second
/// compaction folding the first, and later appends.
pub fn scenario(store: &Store) -> (AgentId, AgentId) {
    let npc = agent("npc");
    store.create_agent(&npc, NOW).unwrap();
    let all = append_n(store, &npc, 30);
    store
        .commit_masking(&npc, vec![masked_of(&all[3])], NOW)
        .unwrap();
    let history = store.history(&npc).unwrap();
    committed(store.commit_compaction(&npc, &commit_for(&history[..10], "first ten", NOW)));
    let history = store.history(&npc).unwrap();
    committed(store.commit_compaction(
        &npc,
        &commit_for(&history[..6], "fifteen", Timestamp(NOW.0 + 1)),
    ));
    append_n(store, &npc, 5);

    let bard = agent("bard");
    store.create_agent(&bard, NOW).unwrap();
    let all = append_n(store, &bard, 12);
    committed(store.commit_compaction(&bard, &commit_for(&all[..6], "six songs", NOW)));
    (npc, bard)
}

fn committed(outcome: somna_store::Result<CommitOutcome>) {
    assert!(
        matches!(outcome, Ok(CommitOutcome::Committed { .. })),
        "{outcome:?}"
    );
}

#[test]
#[ignore = "writes the fixture; run by hand with SOMNA_FIXTURE_OUT set"]
fn make_fixture() {
    let out = std::env::var("SOMNA_FIXTURE_OUT").unwrap();
    let store = Store::open(&out, somna_store::StoreOptions::default()).unwrap();
    scenario(&store);
    store.flush().unwrap();
}

/// A copy of the layout-1 fixture in a temporary directory, opened.
fn open_fixture() -> (tempfile::TempDir, Store) {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layout-1");
    let dir = tempfile::tempdir().unwrap();
    for file in ["conf", "db"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    let store = Store::open(dir.path(), somna_store::StoreOptions::default()).unwrap();
    (dir, store)
}

/// What a reader sees of an agent: live history, the archive, a tail, a window of each, and the
/// record's counters.
#[derive(Debug, PartialEq)]
struct Views {
    history: Vec<somna_core::Message>,
    archive: Vec<somna_core::Message>,
    tail: Vec<somna_core::Message>,
    from_12: Vec<somna_core::Message>,
    archived_2_to_12: Vec<somna_core::Message>,
    counters: (u64, u64, u64, u64, u32),
}

fn views(store: &Store, id: &AgentId) -> Views {
    let record = store.agent(id).unwrap().unwrap();
    assert_clean(store, id);
    Views {
        history: store.history(id).unwrap(),
        archive: store.archive_range(id, 0, usize::MAX).unwrap(),
        tail: store.history_tail(id, 4).unwrap(),
        from_12: store.history_range(id, 12, 5).unwrap(),
        archived_2_to_12: store.archived(id, 2, 12).unwrap(),
        counters: (
            record.next_seq,
            record.history_len,
            record.history_tokens,
            record.archive_len,
            record.compaction_count,
        ),
    }
}

#[test]
fn a_layout_1_database_reads_like_this_build_wrote_it() {
    let (_dir, old) = open_fixture();
    let new = temporary_store!();
    let (npc, bard) = scenario(&new);
    for id in [&npc, &bard] {
        assert_eq!(views(&old, id), views(&new, id), "agent {id}");
        assert!(old.agent(id).unwrap().unwrap().covers.is_empty());
        assert!(!new.agent(id).unwrap().unwrap().covers.is_empty());
    }
    // The fixture really is layout 1: its archive tree holds the covered originals.
    let npc_view = views(&old, &npc);
    assert_eq!(npc_view.archive.len(), 16, "{:#?}", npc_view.archive);
}

#[test]
fn layout_1_summaries_fold_and_undo_like_layout_2_ones() {
    let (_dir, old) = open_fixture();
    let new = temporary_store!();
    let (npc, bard) = scenario(&new);
    let later = Timestamp(NOW.0 + 100);
    let mut step = 0;
    let mut both = |what: &str, op: &dyn Fn(&Store)| {
        step += 1;
        op(&old);
        op(&new);
        for id in [&npc, &bard] {
            assert_eq!(
                views(&old, id),
                views(&new, id),
                "step {step} ({what}), agent {id}"
            );
        }
    };
    // Fold the layout-1 summary into a layout-2 one, then undo that.
    both("fold", &|s| {
        let history = s.history(&npc).unwrap();
        committed(s.commit_compaction(&npc, &commit_for(&history[..3], "folded", later)));
    });
    both("undo the fold", &|s| {
        assert!(matches!(
            s.uncompact(&npc, 0, later).unwrap(),
            UncompactOutcome::Restored { restored: 3 }
        ));
    });
    // Undo both layout-1 summaries: the first puts back the summary it folded, the second the
    // originals and the masked placeholder.
    both("undo the second", &|s| {
        assert!(matches!(
            s.uncompact(&npc, 0, later).unwrap(),
            UncompactOutcome::Restored { restored: 6 }
        ));
    });
    both("undo the first", &|s| {
        assert!(matches!(
            s.uncompact(&npc, 0, later).unwrap(),
            UncompactOutcome::Restored { restored: 10 }
        ));
    });
    both("mask, compact, append", &|s| {
        let history = s.history(&npc).unwrap();
        committed(s.commit_masking(&npc, vec![masked_of(&history[7])], NOW));
        let history = s.history(&npc).unwrap();
        committed(s.commit_compaction(&npc, &commit_for(&history[2..20], "again", later)));
        append_n(s, &npc, 3);
    });
    both("undo the bard's layout-1 summary", &|s| {
        assert!(matches!(
            s.uncompact(&bard, 0, later).unwrap(),
            UncompactOutcome::Restored { restored: 6 }
        ));
        assert_eq!(s.history(&bard).unwrap().len(), 12);
        assert!(s.archive_range(&bard, 0, usize::MAX).unwrap().is_empty());
    });
}
