//! Postgres-only behaviour: reopening a schema, its size, the backend's name, and the time of a
//! large compaction commit.

use std::time::Instant;

use somna_store::{CommitOutcome, PostgresOptions, Store, UncompactOutcome};

use crate::common::*;

#[test]
fn reopening_a_schema_keeps_records_counters_and_data() {
    let Some(url) = pg_url() else { return };
    let options = PostgresOptions {
        schema: unique_schema("reopen"),
        pool_size: 2,
    };
    let id = agent("npc");
    let written = {
        let store = Store::open_postgres(&url, options.clone()).unwrap();
        assert_eq!(store.backend_name(), "postgres");
        let written = fill_for_reopen(&store, &id);
        assert_eq!(store.flush().unwrap(), 0);
        assert!(store.size_on_disk().unwrap() > 0);
        written
    };
    // The last handle drops the schema.
    let store = Store::temporary_postgres_in(&url, &options.schema).unwrap();
    assert_reopened(&store, &id, &written);
}

/// Two processes (here: threads) opening a new schema at once: the migrations run once, and the
/// second open waits for the first store's lock, then opens; while a store is open the schema is
/// locked for others.
#[test]
fn a_schema_is_open_in_one_store_at_a_time() {
    let Some(url) = pg_url() else { return };
    let schema = unique_schema("lock");
    let options = PostgresOptions {
        schema: schema.clone(),
        pool_size: 2,
    };
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let opens: Vec<_> = (0..2)
        .map(|i| {
            let (url, options, barrier) = (url.clone(), options.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let store = Store::open_postgres(&url, options).unwrap();
                let id = agent(&format!("a{i}"));
                store.create_agent(&id, NOW).unwrap();
                append_n(&store, &id, 5);
                std::thread::sleep(std::time::Duration::from_millis(200));
            })
        })
        .collect();
    for open in opens {
        open.join().unwrap();
    }
    let store = Store::temporary_postgres_in(&url, &schema).unwrap();
    assert_eq!(store.agents().unwrap().len(), 2);
    let err = Store::open_postgres(&url, options).unwrap_err();
    match &err {
        somna_store::StoreError::Storage(e) => assert!(e.is_locked(), "{err}"),
        other => panic!("{other:?}"),
    }
    // The refusal names the schema and says it waited for the lock (that a second open does
    // wait is what the two concurrent opens above show: both got in, one after the other).
    assert!(err.to_string().contains(&schema), "{err}");
    assert!(err.to_string().contains("waited 5s for its lock"), "{err}");
}

#[test]
fn invalid_options_are_refused_before_connecting() {
    for (schema, pool_size) in [("Somna", 8), ("", 8), ("pg_x", 8), ("a;b", 8), ("somna", 0)] {
        let err = Store::open_postgres(
            "postgres://nobody:pw@127.0.0.1:1/none",
            PostgresOptions {
                schema: schema.to_string(),
                pool_size,
            },
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("invalid postgres options"),
            "{err}"
        );
    }
}

#[test]
fn a_connection_failure_names_host_and_port_but_not_the_password() {
    let err = Store::open_postgres(
        "postgres://somna:hunter2secret@127.0.0.1:1/somna",
        PostgresOptions::default(),
    )
    .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("hunter2secret"), "{text}");
    assert!(
        matches!(err, somna_store::StoreError::Storage(_)),
        "{err:?}"
    );
}

/// A compaction commit covering 1,980 of 2,000 messages, and its undo, five times over on both
/// backends: each commits and restores all 1,980, and the store stays clean. The times are printed
/// (run with --nocapture) and never asserted: the store bench measures them (docs/benchmarks.md).
#[test]
fn a_commit_of_1980_messages_and_its_undo_round_trip() {
    let Some(url) = pg_url() else { return };
    for (name, store) in [
        ("sled", Store::temporary().unwrap()),
        ("postgres", Store::temporary_postgres(&url).unwrap()),
    ] {
        let id = agent("compacted");
        store.create_agent(&id, NOW).unwrap();
        for chunk in 0..20 {
            let start = chunk * 100;
            store
                .append_batch(&id, (start..start + 100).map(msg).collect(), NOW)
                .unwrap();
        }
        let history = store.history(&id).unwrap();
        let plan = commit_for(&history[..1_980], "nearly everything", NOW);
        let mut commits = Vec::new();
        let mut undos = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let outcome = store.commit_compaction(&id, &plan).unwrap();
            commits.push(start.elapsed());
            assert!(
                matches!(outcome, CommitOutcome::Committed { .. }),
                "{outcome:?}"
            );
            let start = Instant::now();
            let undone = store.uncompact(&id, 0, NOW).unwrap();
            undos.push(start.elapsed());
            assert_eq!(undone, UncompactOutcome::Restored { restored: 1_980 });
        }
        // Masking 1,980 messages: three writes each (take, archive, placeholder).
        let masked: Vec<_> = history[..1_980].iter().map(masked_of).collect();
        let start = Instant::now();
        store.commit_masking(&id, masked, NOW).unwrap();
        let masking = start.elapsed();
        commits.sort();
        undos.sort();
        println!(
            "{name}: commit_compaction of 1,980 of 2,000 messages: median {:?} (min {:?}); \
             uncompact: median {:?}; commit_masking of 1,980: {masking:?}",
            commits[2], commits[0], undos[2]
        );
        assert_clean(&store, &id);
    }
}

/// A write that waits on a lock (here: another session holding every table of the schema) is
/// cancelled by the server after the sessions' `statement_timeout` (the URL's `options`), and the
/// store says so, instead of holding the agent's job for as long as the lock is held.
#[test]
fn a_write_waiting_on_a_lock_ends_at_the_statement_timeout() {
    let Some(url) = pg_url() else { return };
    let separator = if url.contains('?') { '&' } else { '?' };
    let limited = format!("{url}{separator}options=-c%20statement_timeout%3D300ms");
    let schema = unique_schema("stmt_timeout");
    let options = PostgresOptions {
        schema: schema.clone(),
        pool_size: 1,
    };
    let store = Store::open_postgres(&limited, options).unwrap();
    let admin = super::admin::Admin::connect(&url);
    let tables = admin.value(&format!(
        "SELECT string_agg(format('%I.%I', schemaname, tablename), ', ') FROM pg_tables \
         WHERE schemaname = '{schema}'"
    ));
    admin.run(&[
        "BEGIN",
        &format!("LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE"),
    ]);
    // On its own thread, bounded: a write that is never cancelled fails the test instead of
    // hanging it (a hang guard far above the 300 ms limit, below the store's 30 s default).
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = store.clone();
    std::thread::spawn(move || {
        let _ = tx.send(writer.create_agent(&agent("late"), NOW).map(|_| ()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the write waited 20 s on the lock: no statement timeout cancelled it")
        .expect_err("a write went through a held lock")
        .to_string();
    assert!(e.contains("statement timeout"), "{e}");
    admin.run(&["ROLLBACK"]);
    // The lock gone, the same write goes through.
    store.create_agent(&agent("late"), NOW).unwrap();
    assert!(store.agent(&agent("late")).unwrap().is_some());
    drop(store);
    let _ = Store::temporary_postgres_in(&url, &schema).unwrap();
}

/// `options=-c statement_timeout=…` in the URL is read as the server reads it; a value it would
/// refuse is refused before connecting, naming it.
#[test]
fn a_bad_statement_timeout_in_the_url_is_refused_by_name() {
    let e = Store::open_postgres(
        "postgres://nobody@127.0.0.1:1/x?options=-c%20statement_timeout%3D5parsecs",
        PostgresOptions {
            schema: "somna".into(),
            pool_size: 1,
        },
    )
    .expect_err("a bad statement_timeout was taken")
    .to_string();
    assert!(e.contains("statement_timeout \"5parsecs\""), "{e}");
}
