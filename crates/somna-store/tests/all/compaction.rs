//! commit_compaction, commit_masking and uncompact: the atomic rewrites of history.

use somna_core::{AgentId, EventRecord, JournalQuery, MessageKind, SourceType, Timestamp};
use somna_store::{CommitOutcome, CompactionCommit, Store, StoreError, UncompactOutcome};

use crate::common::*;

on_both_backends!(
    commit_moves_covered_messages_to_the_archive,
    messages_appended_after_the_plan_survive,
    a_changed_covered_message_is_a_conflict_and_changes_nothing,
    a_gone_covered_message_is_a_conflict_and_changes_nothing,
    an_uncovered_message_inside_the_run_is_a_conflict,
    malformed_commits_are_errors,
    rolling_compaction_folds_and_uncompaction_unfolds,
    masking_archives_originals_and_rejects_non_normal_targets,
    a_compaction_over_masked_placeholders_restores_them_on_undo,
    uncompact_of_something_that_is_not_a_summary_is_not_found,
    a_commit_over_a_read_to_compact_checks_the_run_in_memory,
);

/// Commits `commit`, which must change nothing (a conflict leaves the agent exactly as it was);
/// returns the outcome for the caller to check.
fn refused(store: &Store, id: &AgentId, commit: &CompactionCommit<'_>) -> CommitOutcome {
    let before = snapshot(store, id);
    let outcome = store.commit_compaction(id, commit).unwrap();
    assert_eq!(snapshot(store, id), before, "{outcome:?} changed the agent");
    outcome
}

fn commit_moves_covered_messages_to_the_archive() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 40);
    let before = store.usage_tokens(&id).unwrap();
    let commit = commit_for(&all[..25], "the road to the smithy", NOW);
    let outcome = store.commit_compaction(&id, &commit).unwrap();
    let CommitOutcome::Committed {
        summary_seq,
        journal_ids,
        event_seq,
    } = outcome
    else {
        panic!("expected a commit, got {outcome:?}");
    };
    assert_eq!(
        (summary_seq, journal_ids.clone(), event_seq),
        (0, vec![0], 0)
    );

    let history = store.history(&id).unwrap();
    assert_eq!(history.len(), 16);
    assert_eq!(history[0], commit.summary);
    assert_eq!(history[1..], all[25..]);
    assert_eq!(
        store.archive_range(&id, 0, usize::MAX).unwrap(),
        all[..25].to_vec()
    );

    let covered_tokens: u64 = all[..25].iter().map(|m| u64::from(m.tokens)).sum();
    let after = before - covered_tokens + u64::from(commit.summary.tokens);
    assert_eq!(store.usage_tokens(&id).unwrap(), after);
    let record = store.agent(&id).unwrap().unwrap();
    assert_eq!(record.history_tokens, after);
    assert_eq!((record.history_len, record.archive_len), (16, 25));
    assert_eq!(
        (record.compaction_count, record.last_compaction),
        (1, Some(NOW))
    );

    // The synthesis entry and the log record point at each other.
    let synthesis = store
        .query_journal(
            &id,
            &JournalQuery {
                source_type: Some(SourceType::Compaction),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(synthesis.len(), 1);
    assert_eq!(synthesis[0].id, journal_ids[0]);
    assert_eq!(synthesis[0].covers, Some((0, 24)));
    let events = store.events(&id, 10).unwrap();
    let EventRecord::Compaction(logged) = &events[0].event else {
        panic!("expected a compaction event, got {:?}", events[0]);
    };
    assert_eq!(logged.synthesis_entry, Some(journal_ids[0]));
    assert_eq!(logged.summary_seq, 0);
    assert_eq!(logged.covers, (0, 24));
    assert_clean(&store, &id);
}

fn messages_appended_after_the_plan_survive() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    let commit = commit_for(&all[..20], "planned", NOW);
    // While the summary was being written, the agent kept talking.
    let late = append_n(&store, &id, 5);
    let outcome = store.commit_compaction(&id, &commit).unwrap();
    assert!(
        matches!(outcome, CommitOutcome::Committed { .. }),
        "{outcome:?}"
    );
    let history = store.history(&id).unwrap();
    assert_eq!(history[1..11], all[20..]);
    assert_eq!(history[11..], late[..]);
    assert_eq!(store.agent(&id).unwrap().unwrap().next_seq, 35);
    assert_clean(&store, &id);
}

fn a_changed_covered_message_is_a_conflict_and_changes_nothing() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    let mut covered = all[..20].to_vec();
    covered[7].content.push_str(" (edited)");
    let commit = commit_for(&covered, "stale", NOW);
    let outcome = refused(&store, &id, &commit);
    assert!(
        matches!(&outcome, CommitOutcome::Conflict { seq: 7, reason } if reason.contains("changed")),
        "{outcome:?}"
    );
    assert_clean(&store, &id);
}

fn a_gone_covered_message_is_a_conflict_and_changes_nothing() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    let plan = commit_for(&all[5..20], "planned before the masking", NOW);
    // Another writer masked message 12 after the plan was made.
    store
        .commit_masking(&id, vec![masked_of(&all[12])], NOW)
        .unwrap();
    let outcome = refused(&store, &id, &plan);
    assert!(
        matches!(outcome, CommitOutcome::Conflict { seq: 12, .. }),
        "{outcome:?}"
    );

    // An earlier compaction took messages 0..10: a plan covering 5..20 finds 5 gone.
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    let late_plan = commit_for(&all[5..20], "late", NOW);
    compact(&store, &id, &all[..10], "first");
    let outcome = refused(&store, &id, &late_plan);
    assert!(
        matches!(&outcome, CommitOutcome::Conflict { seq: 5, reason } if reason.contains("no longer")),
        "{outcome:?}"
    );
    assert_clean(&store, &id);
}

fn an_uncovered_message_inside_the_run_is_a_conflict() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    // The plan skips message 9: the summary would replace a run with a hole in it.
    let mut covered = all[..20].to_vec();
    covered.remove(9);
    let outcome = refused(&store, &id, &commit_for(&covered, "holey", NOW));
    assert!(
        matches!(outcome, CommitOutcome::Conflict { seq: 9, .. }),
        "{outcome:?}"
    );
}

fn malformed_commits_are_errors() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 10);
    let good = commit_for(&all[..5], "ok", NOW);

    let mut empty = good.clone();
    empty.covered.to_mut().clear();
    let mut wrong_seq = good.clone();
    wrong_seq.summary.seq = 1;
    let mut wrong_through = good.clone();
    if let MessageKind::Summary(meta) = &mut wrong_through.summary.kind {
        meta.covers_through_seq = 9;
    }
    let mut not_summary = good.clone();
    not_summary.summary.kind = MessageKind::Normal;
    let mut unordered = good.clone();
    unordered.covered.to_mut().swap(1, 2);
    let mut wrong_first_entry = good.clone();
    wrong_first_entry.journal[0].source_type = SourceType::Note;
    for bad in [
        empty,
        wrong_seq,
        wrong_through,
        not_summary,
        unordered,
        wrong_first_entry,
    ] {
        let result = store.commit_compaction(&id, &bad);
        assert!(
            matches!(
                result,
                Err(StoreError::Invalid {
                    what: "compaction commit",
                    ..
                })
            ),
            "{result:?}"
        );
    }
    // A folded summary must get a higher generation.
    store.commit_compaction(&id, &good).unwrap();
    let history = store.history(&id).unwrap();
    let mut same_generation = commit_for(&history[..3], "again", NOW);
    if let MessageKind::Summary(meta) = &mut same_generation.summary.kind {
        meta.generation = 1;
    }
    assert!(matches!(
        store.commit_compaction(&id, &same_generation),
        Err(StoreError::Invalid { .. })
    ));
    assert_clean(&store, &id);
}

fn rolling_compaction_folds_and_uncompaction_unfolds() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 50);
    let original_history = store.history(&id).unwrap();
    compact(&store, &id, &all[..20], "gen one");
    let after_first = store.history(&id).unwrap();
    let first_summary = after_first[0].clone();

    // The next compaction folds the first summary and ten more turns.
    let later = Timestamp(NOW.0 + 60_000);
    let second = commit_for(&after_first[..11], "gen two", later);
    assert_eq!(second.summary.summary().unwrap().generation, 2);
    assert_eq!(second.summary.summary().unwrap().covers_through_seq, 29);
    store.commit_compaction(&id, &second).unwrap();
    let history = store.history(&id).unwrap();
    assert_eq!(history[0], second.summary);
    assert_eq!(history[1..], all[30..]);
    // The first summary is archived under its summary key, after the original of seq 0.
    let archive = store.archived(&id, 0, 0).unwrap();
    assert_eq!(archive, vec![all[0].clone(), first_summary.clone()]);
    assert_eq!(store.agent(&id).unwrap().unwrap().archive_len, 31);
    assert_clean(&store, &id);

    // Undo the second: the first summary comes back, then undo the first.
    let outcome = store.uncompact(&id, 0, later).unwrap();
    assert_eq!(outcome, UncompactOutcome::Restored { restored: 11 });
    assert_eq!(store.history(&id).unwrap(), after_first);
    assert_clean(&store, &id);
    let outcome = store.uncompact(&id, 0, later).unwrap();
    assert_eq!(outcome, UncompactOutcome::Restored { restored: 20 });
    assert_eq!(store.history(&id).unwrap(), original_history);
    assert!(store.archive_range(&id, 0, usize::MAX).unwrap().is_empty());
    assert_eq!(
        store.usage_tokens(&id).unwrap(),
        original_history
            .iter()
            .map(|m| u64::from(m.tokens))
            .sum::<u64>()
    );
    assert_eq!(
        store.uncompact(&id, 0, later).unwrap(),
        UncompactOutcome::NotFound
    );

    // Both synthesis entries stay in the journal; the log tells the whole story.
    assert_eq!(
        store
            .query_journal(
                &id,
                &JournalQuery {
                    source_type: Some(SourceType::Compaction),
                    ..Default::default()
                }
            )
            .unwrap()
            .len(),
        2
    );
    let kinds: Vec<String> = store
        .events(&id, 10)
        .unwrap()
        .into_iter()
        .map(|e| match e.event {
            EventRecord::Compaction(r) => format!("compaction {}..={}", r.covers.0, r.covers.1),
            EventRecord::Uncompaction {
                summary, restored, ..
            } => format!("uncompaction of {summary:?}, {restored} back"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "uncompaction of \"[CONTEXT SUMMARY] gen one\", 20 back",
            "uncompaction of \"[CONTEXT SUMMARY] gen two\", 11 back",
            "compaction 0..=29",
            "compaction 0..=19",
        ]
    );
    let record = store.agent(&id).unwrap().unwrap();
    assert_eq!((record.history_len, record.archive_len), (50, 0));
    assert_clean(&store, &id);
}

fn masking_archives_originals_and_rejects_non_normal_targets() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 10);
    let before = store.usage_tokens(&id).unwrap();
    let placeholders = vec![masked_of(&all[6]), masked_of(&all[2])];
    let masked_at = Timestamp(NOW.0 + 5_000);
    let outcome = store
        .commit_masking(&id, placeholders.clone(), masked_at)
        .unwrap();
    assert!(
        matches!(outcome, CommitOutcome::Committed { summary_seq: 2, ref journal_ids, event_seq: 0 } if journal_ids.is_empty()),
        "{outcome:?}"
    );
    let history = store.history(&id).unwrap();
    assert_eq!(history[2], placeholders[1]);
    assert_eq!(history[6], placeholders[0]);
    assert_eq!(
        store.archive_range(&id, 0, 10).unwrap(),
        vec![all[2].clone(), all[6].clone()]
    );
    let saved: u64 = [2usize, 6]
        .iter()
        .map(|&i| u64::from(all[i].tokens) - u64::from(masked_of(&all[i]).tokens))
        .sum();
    assert_eq!(store.usage_tokens(&id).unwrap(), before - saved);
    let events = store.events(&id, 1).unwrap();
    assert!(
        matches!(events[0].event, EventRecord::Masking { at, masked: 2, tokens_before, tokens_after }
            if at == masked_at && tokens_before == before && tokens_after == before - saved),
        "the masking event is stamped with the caller's time: {:?}",
        events[0].event
    );
    assert_clean(&store, &id);

    // Masking a placeholder again, or a message that is gone, is a conflict.
    let snap = snapshot(&store, &id);
    let again = store
        .commit_masking(&id, vec![masked_of(&all[2])], NOW)
        .unwrap();
    assert!(
        matches!(&again, CommitOutcome::Conflict { seq: 2, reason } if reason.contains("not a normal")),
        "{again:?}"
    );
    let mut ghost = masked_of(&all[0]);
    ghost.seq = 99;
    let gone = store
        .commit_masking(&id, vec![masked_of(&all[3]), ghost], NOW)
        .unwrap();
    assert!(
        matches!(gone, CommitOutcome::Conflict { seq: 99, .. }),
        "{gone:?}"
    );
    assert_eq!(snapshot(&store, &id), snap);
    assert!(matches!(
        store.commit_masking(&id, Vec::new(), NOW),
        Err(StoreError::Invalid { .. })
    ));

    // A message under a summary is archived, not live: masking it is a conflict too.
    let history = store.history(&id).unwrap();
    store
        .commit_compaction(&id, &commit_for(&history[..5], "five", NOW))
        .unwrap();
    let snap = snapshot(&store, &id);
    let covered = store
        .commit_masking(&id, vec![masked_of(&all[4])], NOW)
        .unwrap();
    assert!(
        matches!(&covered, CommitOutcome::Conflict { seq: 4, reason } if reason.contains("covered by the summary at seq 0")),
        "{covered:?}"
    );
    assert_eq!(snapshot(&store, &id), snap);
    assert_clean(&store, &id);
    assert!(matches!(
        store.commit_masking(&id, vec![all[3].clone()], NOW),
        Err(StoreError::Invalid { .. })
    ));
}

fn a_compaction_over_masked_placeholders_restores_them_on_undo() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 20);
    store
        .commit_masking(&id, vec![masked_of(&all[0]), masked_of(&all[4])], NOW)
        .unwrap();
    let masked_history = store.history(&id).unwrap();
    let archive_before = store.archive_range(&id, 0, usize::MAX).unwrap();

    let commit = commit_for(&masked_history[..10], "starts with a placeholder", NOW);
    assert!(matches!(commit.covered[0].kind, MessageKind::Masked { .. }));
    store.commit_compaction(&id, &commit).unwrap();
    // The placeholders are gone from history; their originals were archived once, not twice.
    let archive = store.archive_range(&id, 0, usize::MAX).unwrap();
    assert_eq!(archive, all[..10].to_vec());
    assert_eq!(store.agent(&id).unwrap().unwrap().archive_len, 10);
    assert_clean(&store, &id);

    let outcome = store.uncompact(&id, 0, NOW).unwrap();
    assert_eq!(outcome, UncompactOutcome::Restored { restored: 10 });
    assert_eq!(store.history(&id).unwrap(), masked_history);
    assert_eq!(
        store.archive_range(&id, 0, usize::MAX).unwrap(),
        archive_before
    );
    assert_clean(&store, &id);
}

fn uncompact_of_something_that_is_not_a_summary_is_not_found() {
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 10);
    assert_eq!(
        store.uncompact(&id, 3, NOW).unwrap(),
        UncompactOutcome::NotFound
    );
    assert_eq!(
        store.uncompact(&id, 1_000, NOW).unwrap(),
        UncompactOutcome::NotFound
    );
    compact(&store, &id, &all[2..8], "middle");
    assert_eq!(
        store.uncompact(&id, 3, NOW).unwrap(),
        UncompactOutcome::NotFound
    );
    assert_eq!(
        store.uncompact(&id, 2, NOW).unwrap(),
        UncompactOutcome::Restored { restored: 6 }
    );
    assert_eq!(store.history(&id).unwrap(), all);
}

/// `live_history_to_compact` caches what it read, and the commit checks its covered run against
/// that copy: the same outcomes as a check against the trees, whichever way the run differs.
fn a_commit_over_a_read_to_compact_checks_the_run_in_memory() {
    // The run borrowed from the read itself commits; so does one the agent talked past (the
    // append extended the cached copy, so the run is compared by value).
    for talk_after_read in [false, true] {
        let (store, id) = store_with_agent!();
        let all = append_n(&store, &id, 30);
        let read = store.live_history_to_compact(&id).unwrap();
        assert!(
            store.cached_live_history(&id).is_some(),
            "the read is cached"
        );
        let mut commit = commit_for(&all[..20], "from the read", NOW);
        commit.covered = read[..20].into();
        let late = if talk_after_read {
            append_n(&store, &id, 3)
        } else {
            Vec::new()
        };
        let outcome = store.commit_compaction(&id, &commit).unwrap();
        assert!(
            matches!(outcome, CommitOutcome::Committed { .. }),
            "{outcome:?}"
        );
        let history = store.history(&id).unwrap();
        assert_eq!(history[0], commit.summary);
        assert_eq!(history[1..11], all[20..]);
        assert_eq!(history[11..], late[..]);
        assert_clean(&store, &id);
    }

    // With the history cached, a changed message, a hole in the run and a message masked since
    // the read are each a conflict that changes nothing.
    let (store, id) = store_with_agent!();
    let all = append_n(&store, &id, 30);
    store.live_history_to_compact(&id).unwrap();
    let mut changed = all[..20].to_vec();
    changed[7].content.push_str(" (edited)");
    let outcome = refused(&store, &id, &commit_for(&changed, "stale", NOW));
    assert!(
        matches!(&outcome, CommitOutcome::Conflict { seq: 7, reason } if reason.contains("changed")),
        "{outcome:?}"
    );
    let mut holey = all[..20].to_vec();
    holey.remove(9);
    assert!(store.cached_live_history(&id).is_some());
    let outcome = refused(&store, &id, &commit_for(&holey, "holey", NOW));
    assert!(
        matches!(outcome, CommitOutcome::Conflict { seq: 9, .. }),
        "{outcome:?}"
    );
    let read = store.live_history_to_compact(&id).unwrap();
    let mut plan = commit_for(&all[5..20], "planned before the masking", NOW);
    plan.covered = read[5..20].into();
    store
        .commit_masking(&id, vec![masked_of(&all[12])], NOW)
        .unwrap();
    store.live_history_to_compact(&id).unwrap();
    let outcome = refused(&store, &id, &plan);
    assert!(
        matches!(outcome, CommitOutcome::Conflict { seq: 12, .. }),
        "{outcome:?}"
    );
    assert_clean(&store, &id);
}
