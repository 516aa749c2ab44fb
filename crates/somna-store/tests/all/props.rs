//! Property test: random appends, compactions (of any contiguous run, built like the engine
//! builds them), maskings and uncompactions keep every invariant, and a commit followed by an
//! uncompact restores history exactly.

use proptest::prelude::*;
use somna_core::{Message, MessageKind};
use somna_store::{CommitOutcome, Store, UncompactOutcome};

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    /// Append this many messages in one batch.
    Append(u8),
    /// Compact the run starting at `start % len` of `1 + n % rest` messages.
    Compact { start: u16, n: u16 },
    /// Like `Compact`, then undo it at once and expect the exact previous state.
    CompactAndUndo { start: u16, n: u16 },
    /// Mask up to three normal messages picked by these numbers.
    Mask(Vec<u16>),
    /// Undo the summary picked by this number, if any.
    Uncompact(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..6).prop_map(Op::Append),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(start, n)| Op::Compact { start, n }),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(start, n)| Op::CompactAndUndo { start, n }),
        1 => prop::collection::vec(any::<u16>(), 1..4).prop_map(Op::Mask),
        1 => any::<u16>().prop_map(Op::Uncompact),
    ]
}

/// Everything observable about the agent's messages.
#[derive(Debug, PartialEq)]
struct State {
    history: Vec<Message>,
    archive: Vec<Message>,
    usage: u64,
    history_len: u64,
    archive_len: u64,
}

fn state(store: &Store, id: &somna_core::AgentId) -> State {
    let record = store.agent(id).unwrap().unwrap();
    State {
        history: store.history(id).unwrap(),
        archive: store.archive_range(id, 0, usize::MAX).unwrap(),
        usage: store.usage_tokens(id).unwrap(),
        history_len: record.history_len,
        archive_len: record.archive_len,
    }
}

/// The run of history an op picks, if history is not empty.
fn pick_run(history: &[Message], start: u16, n: u16) -> Option<Vec<Message>> {
    if history.is_empty() {
        return None;
    }
    let start = usize::from(start) % history.len();
    let n = 1 + usize::from(n) % (history.len() - start);
    Some(history[start..start + n].to_vec())
}

/// Checks the invariants against the model of every appended message.
fn check(
    store: &Store,
    id: &somna_core::AgentId,
    appended: &[Message],
) -> Result<(), TestCaseError> {
    let report = store.check_invariants(id).unwrap();
    prop_assert!(report.is_ok(), "{}", report);
    let s = state(store, id);
    // Every appended message is, unchanged, in history or in the archive, exactly once.
    let mut originals: Vec<&Message> = s
        .history
        .iter()
        .chain(s.archive.iter())
        .filter(|m| m.is_normal())
        .collect();
    originals.sort_by_key(|m| m.seq);
    prop_assert_eq!(originals.len(), appended.len());
    for (found, expected) in originals.iter().zip(appended) {
        prop_assert_eq!(*found, expected);
    }
    // History is in seq order and the running total equals a recount.
    prop_assert!(s.history.windows(2).all(|w| w[0].seq < w[1].seq));
    let recount: u64 = s.history.iter().map(|m| u64::from(m.tokens)).sum();
    prop_assert_eq!(s.usage, recount);
    prop_assert_eq!(s.history_len, s.history.len() as u64);
    prop_assert_eq!(s.archive_len, s.archive.len() as u64);
    Ok(())
}

/// One run of random operations on the current backend, checking every invariant after each.
fn random_operations_keep_the_invariants(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let Some((store, id)) = try_store_with_agent() else {
        return Ok(());
    };
    let mut appended: Vec<Message> = Vec::new();
    for op in ops {
        let history = store.history(&id).unwrap();
        match op {
            Op::Append(n) => {
                appended.extend(append_n(&store, &id, u64::from(n)));
            }
            Op::Compact { start, n } => {
                if let Some(run) = pick_run(&history, start, n) {
                    let outcome = store
                        .commit_compaction(&id, &commit_for(&run, "rolled up", NOW))
                        .unwrap();
                    prop_assert!(
                        matches!(outcome, CommitOutcome::Committed { .. }),
                        "{:?}",
                        outcome
                    );
                }
            }
            Op::CompactAndUndo { start, n } => {
                if let Some(run) = pick_run(&history, start, n) {
                    let before = state(&store, &id);
                    let outcome = store
                        .commit_compaction(&id, &commit_for(&run, "undone", NOW))
                        .unwrap();
                    let CommitOutcome::Committed { summary_seq, .. } = outcome else {
                        return Err(TestCaseError::fail(format!("{outcome:?}")));
                    };
                    check(&store, &id, &appended)?;
                    let undone = store.uncompact(&id, summary_seq, NOW).unwrap();
                    prop_assert_eq!(
                        undone,
                        UncompactOutcome::Restored {
                            restored: run.len() as u32
                        }
                    );
                    prop_assert_eq!(state(&store, &id), before);
                }
            }
            Op::Mask(picks) => {
                let normals: Vec<&Message> = history.iter().filter(|m| m.is_normal()).collect();
                if !normals.is_empty() {
                    let mut chosen: Vec<Message> = picks
                        .iter()
                        .map(|&p| masked_of(normals[usize::from(p) % normals.len()]))
                        .collect();
                    chosen.sort_by_key(|m| m.seq);
                    chosen.dedup_by_key(|m| m.seq);
                    let outcome = store.commit_masking(&id, chosen, NOW).unwrap();
                    prop_assert!(
                        matches!(outcome, CommitOutcome::Committed { .. }),
                        "{:?}",
                        outcome
                    );
                }
            }
            Op::Uncompact(pick) => {
                let summaries: Vec<&Message> = history
                    .iter()
                    .filter(|m| matches!(m.kind, MessageKind::Summary(_)))
                    .collect();
                if !summaries.is_empty() {
                    let seq = summaries[usize::from(pick) % summaries.len()].seq;
                    let outcome = store.uncompact(&id, seq, NOW).unwrap();
                    prop_assert!(
                        matches!(outcome, UncompactOutcome::Restored { .. }),
                        "{:?}",
                        outcome
                    );
                }
            }
        }
        check(&store, &id, &appended)?;
    }
    Ok(())
}

proptest! {
    // 48 cases per run and backend; PROPTEST_CASES=N runs more.
    #![proptest_config(ProptestConfig { cases: proptest_cases(48), ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_the_invariants_on_sled(ops in prop::collection::vec(op(), 1..40)) {
        on(Backend::Sled, || random_operations_keep_the_invariants(ops))?;
    }

    #[test]
    fn random_operations_keep_the_invariants_on_postgres(ops in prop::collection::vec(op(), 1..40)) {
        on(Backend::Postgres, || random_operations_keep_the_invariants(ops))?;
    }
}
