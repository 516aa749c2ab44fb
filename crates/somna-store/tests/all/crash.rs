//! Crash test: a child process (this test binary, re-run in child mode) loops over appends,
//! compactions, maskings and uncompactions on one database directory while this process SIGKILLs it
//! at random moments. Some appends are acknowledged: the child waits for `Store::durable` and then
//! prints an `ACK seq content` line. After every kill the database must open, `check_invariants`
//! must be clean, and every message acknowledged so far must be there (in live history or the
//! archive) exactly once, with its content.
//!
//! `SOMNA_CRASH_KILLS` sets the number of kills (default 60 on sled, 100 on Postgres);
//! `SOMNA_CRASH_SEED` replays a run. On Postgres the child and the checks use a
//! fresh Postgres schema of `SOMNA_TEST_PG_URL` instead of a directory (the child is told its name).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use somna_core::{AgentId, JournalEntry, JournalQuery, Message, MessageKind, SourceType};
use somna_store::{CommitOutcome, PostgresOptions, Store, StoreOptions};

use crate::common::*;

on_both_backends!(sigkill_during_writes_never_breaks_invariants,);

/// Set in the child's environment: the database directory.
const CHILD_DIR: &str = "SOMNA_STORE_CRASH_CHILD_DIR";
/// Set in the child's environment instead of the directory: the Postgres schema (the URL is
/// `SOMNA_TEST_PG_URL`).
const CHILD_PG_SCHEMA: &str = "SOMNA_STORE_CRASH_CHILD_PG_SCHEMA";
/// Set in the child's environment: the child's random seed.
const CHILD_SEED: &str = "SOMNA_STORE_CRASH_CHILD_SEED";
/// The prefix of the child's stdout line for a durable (acknowledged) message: `ACK seq content`.
const ACK: &str = "ACK ";

/// Adds the child's `ACK seq content` lines to `acked` (a last line cut off by the kill is not an
/// acknowledgement). A seq acknowledged twice with different contents is an error.
fn read_acks(stdout: &str, acked: &mut BTreeMap<u64, String>) -> Result<usize, String> {
    let complete = stdout.rfind('\n').map_or("", |end| &stdout[..end]);
    let mut n = 0;
    for line in complete.lines() {
        let Some(rest) = line.strip_prefix(ACK) else {
            continue;
        };
        let (seq, content) = rest
            .split_once(' ')
            .ok_or_else(|| format!("malformed ack line {line:?}"))?;
        let seq: u64 = seq.parse().map_err(|e| format!("{line:?}: {e}"))?;
        if let Some(before) = acked.insert(seq, content.to_string())
            && before != content
        {
            return Err(format!(
                "seq {seq} was acknowledged as {before:?} and later as {content:?}: the first was lost"
            ));
        }
        n += 1;
    }
    Ok(n)
}

/// Every acknowledged message must be in live history or the archive exactly once, with its
/// content; returns what is wrong.
fn missing_acks(store: &Store, id: &AgentId, acked: &BTreeMap<u64, String>) -> Vec<String> {
    let mut found: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let history = store.history(id).unwrap();
    let archive = store.archive_range(id, 0, usize::MAX).unwrap();
    for m in history.iter().chain(&archive).filter(|m| m.is_normal()) {
        found.entry(m.seq).or_default().push(m.content.clone());
    }
    let mut problems = Vec::new();
    for (seq, content) in acked {
        match found.get(seq).map(Vec::as_slice) {
            Some([one]) if one == content => {}
            None | Some([]) => {
                problems.push(format!("acknowledged seq {seq} ({content:?}) is lost"))
            }
            Some(copies) => problems.push(format!(
                "acknowledged seq {seq} ({content:?}) is stored as {copies:?}"
            )),
        }
    }
    problems
}

fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The child's entry point. Run normally (without `SOMNA_STORE_CRASH_CHILD_DIR`) it returns at
/// once: it only does work as the child process of `sigkill_during_writes_never_breaks_invariants`.
#[test]
fn crash_child() {
    let seed = std::env::var(CHILD_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if let Ok(schema) = std::env::var(CHILD_PG_SCHEMA) {
        let url = std::env::var(PG_URL).unwrap();
        return child_loop(seed, |_| {
            Store::open_postgres(
                &url,
                PostgresOptions {
                    schema,
                    pool_size: 2,
                },
            )
        });
    }
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    child_loop(seed, |flush_every| {
        Store::open(
            Path::new(&dir),
            StoreOptions {
                flush_every,
                ..StoreOptions::default()
            },
        )
    });
}

/// Writes until killed.
fn child_loop(seed: u64, open: impl FnOnce(Duration) -> somna_store::Result<Store>) {
    let mut rng = rng(seed);
    let flush_every = Duration::from_millis([5, 50, 500][rng.random_range(0..3usize)]);
    let store = open(flush_every).unwrap();
    let id = agent("crash");
    store.ensure_agent(&id, NOW).unwrap();
    for op in 0u64.. {
        match rng.random_range(0..10u32) {
            0..=2 => {
                append_n(&store, &id, rng.random_range(1..8u64));
            }
            3 | 4 => {
                // An acknowledged append: report it only once it is durable.
                let batch: Vec<Message> = (0..rng.random_range(1..4u64))
                    .map(|i| with_tokens(Message::user(format!("acked {seed:x}-{op}-{i}")).at(NOW)))
                    .collect();
                let stored = store.append_batch(&id, batch, NOW).unwrap();
                futures::executor::block_on(store.durable()).unwrap();
                for m in stored {
                    println!("{ACK}{} {}", m.seq, m.content);
                }
            }
            5 | 6 => {
                let history = store.history(&id).unwrap();
                if history.len() > 12 {
                    let covered = &history[..history.len() - 8];
                    let outcome = store
                        .commit_compaction(&id, &commit_for(covered, "crash test", NOW))
                        .unwrap();
                    assert!(
                        matches!(outcome, CommitOutcome::Committed { .. }),
                        "{outcome:?}"
                    );
                }
            }
            7 => {
                let history = store.history(&id).unwrap();
                let normals: Vec<_> = history.iter().filter(|m| m.is_normal()).collect();
                if !normals.is_empty() {
                    let target = normals[rng.random_range(0..normals.len())];
                    store
                        .commit_masking(&id, vec![masked_of(target)], NOW)
                        .unwrap();
                }
            }
            8 => {
                let history = store.history(&id).unwrap();
                if let Some(summary) = history
                    .iter()
                    .find(|m| matches!(m.kind, MessageKind::Summary(_)))
                {
                    store.uncompact(&id, summary.seq, NOW).unwrap();
                }
            }
            _ => {
                store
                    .append_journal(
                        &id,
                        JournalEntry::new(NOW, SourceType::Note, 5, format!("op {op}")),
                    )
                    .unwrap();
            }
        }
        if op % 64 == 63 {
            store.flush().unwrap();
        }
    }
}

/// Where the crash test's database lives: a directory (sled) or a Postgres schema.
enum Target {
    Dir(tempfile::TempDir),
    /// A fresh schema, dropped by the last open after a successful run.
    Postgres {
        url: String,
        schema: String,
    },
}

impl Target {
    /// The target of the test's backend; `None` on Postgres without `SOMNA_TEST_PG_URL`.
    fn new() -> Option<Target> {
        Some(match backend() {
            Backend::Sled => Target::Dir(
                tempfile::Builder::new()
                    .prefix("somna-crash-")
                    .tempdir()
                    .unwrap(),
            ),
            Backend::Postgres => {
                let url = pg_url()?;
                Target::Postgres {
                    url,
                    schema: unique_schema("crash"),
                }
            }
        })
    }

    fn open(&self) -> somna_store::Result<Store> {
        match self {
            Target::Dir(dir) => Store::open(dir.path(), StoreOptions::default()),
            Target::Postgres { url, schema } => Store::open_postgres(
                url,
                PostgresOptions {
                    schema: schema.clone(),
                    pool_size: 2,
                },
            ),
        }
    }

    /// Tells the child where the database is.
    fn tell(&self, child: &mut Command) {
        match self {
            Target::Dir(dir) => child.env(CHILD_DIR, dir.path()),
            Target::Postgres { schema, .. } => child.env(CHILD_PG_SCHEMA, schema),
        };
    }

    /// The last open, after a successful run: a schema is dropped with this handle.
    fn open_last(&self) -> somna_store::Result<Store> {
        match self {
            Target::Dir(_) => self.open(),
            Target::Postgres { url, schema } => Store::temporary_postgres_in(url, schema),
        }
    }

    /// Keeps the database for inspection (after a failure); says where it is.
    fn keep(self) -> String {
        match self {
            Target::Dir(dir) => format!("the database is kept in {}", dir.keep().display()),
            Target::Postgres { schema, .. } => {
                format!("the database is kept in Postgres schema {schema}")
            }
        }
    }
}

fn sigkill_during_writes_never_breaks_invariants() {
    let Some(target) = Target::new() else {
        return;
    };
    let kills: u32 = std::env::var("SOMNA_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(match backend() {
            Backend::Sled => 60,
            Backend::Postgres => 100,
        });
    let seed: u64 = std::env::var("SOMNA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!(
        "crash test ({:?}): seed {seed} (SOMNA_CRASH_SEED replays it), {kills} kills",
        backend()
    );
    let mut rng = rng(seed);
    // On a failure the database is kept for inspection and its place printed.
    let fail = |target: Target, message: String| -> ! {
        let kept = target.keep();
        panic!("{message}\n({kept})");
    };
    let exe = std::env::current_exe().unwrap();
    let id = agent("crash");
    let started = Instant::now();
    let (mut progressed, mut last_next_seq, mut last_compactions) = (0u32, 0u64, 0u32);
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    let mut acks = 0usize;

    for round in 0..kills {
        let mut command = Command::new(&exe);
        target.tell(&mut command);
        let mut child = command
            .args([
                "crash::crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_SEED, rng.random::<u64>().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read the acks as they come so that a full pipe never slows the child down.
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            out.read_to_string(&mut text).map(|_| text)
        });
        // The kill lands at a random moment of the writes: this wait is what is tested, not a
        // synchronisation.
        std::thread::sleep(Duration::from_millis(rng.random_range(5..=150u64)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let stdout = reader.join().unwrap().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        if status.signal() != Some(9) {
            fail(
                target,
                format!(
                    "round {round}: the child ended on its own ({status}) before the kill:\n{stderr}"
                ),
            );
        }

        let store = match target.open() {
            Ok(store) => store,
            Err(e) => fail(
                target,
                format!(
                    "round {round} (seed {seed}): the database does not open after a kill: {e}"
                ),
            ),
        };
        match read_acks(&stdout, &mut acked) {
            Ok(n) => acks += n,
            Err(e) => {
                drop(store);
                fail(target, format!("round {round} (seed {seed}): {e}"));
            }
        }
        if let Some(record) = store.agent(&id).unwrap() {
            let report = store.check_invariants(&id).unwrap();
            if !report.is_ok() {
                drop(store);
                fail(target, format!("round {round} (seed {seed}): {report}"));
            }
            let problems = missing_acks(&store, &id, &acked);
            if !problems.is_empty() {
                drop(store);
                fail(
                    target,
                    format!(
                        "round {round} (seed {seed}): {} of {} acknowledged messages:\n{}",
                        problems.len(),
                        acked.len(),
                        problems.join("\n")
                    ),
                );
            }
            if record.next_seq > last_next_seq || record.compaction_count > last_compactions {
                progressed += 1;
            }
            if record.next_seq < last_next_seq {
                drop(store);
                fail(
                    target,
                    format!(
                        "round {round}: next_seq went back from {last_next_seq} to {} (a recovered write was lost)",
                        record.next_seq
                    ),
                );
            }
            last_next_seq = record.next_seq;
            last_compactions = record.compaction_count;
        }
    }

    let store = target.open_last().unwrap();
    let record = store
        .agent(&id)
        .unwrap()
        .expect("no child ever created the agent");
    let report = store.check_invariants(&id).unwrap();
    println!(
        "crash test: {kills} kills in {:.1} s, {progressed} rounds left durable progress, \
         {acks} acknowledged messages all present once; \
         final: next_seq {}, {} compactions, history {} messages, archive {}, journal {}, {} bytes on disk",
        started.elapsed().as_secs_f64(),
        record.next_seq,
        record.compaction_count,
        report.history_len,
        report.archive_len,
        report.journal_len,
        store.size_on_disk().unwrap()
    );
    assert!(
        progressed > 0,
        "no round made durable progress: the kills came too early"
    );
    assert!(acks > 0, "no child acknowledged a message before its kill");
}

// sled-specific: sled files, locks and flushes.
/// sled writes its snapshot to `snap.<lsn>.generating` and renames it once complete; a kill in
/// between leaves a partial file that sled 0.34 picks as the newest snapshot and reports as
/// corruption. `Store::open` removes such files and opens the database.
#[test]
fn a_half_written_snapshot_left_by_a_kill_does_not_block_opening() {
    let dir = tempfile::tempdir().unwrap();
    let id = agent("npc");
    let history = {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store.create_agent(&id, NOW).unwrap();
        append_n(&store, &id, 10);
        store.history(&id).unwrap()
    };
    let partial = dir.path().join("snap.7FFFFFFFFFFFFFFF.generating");
    std::fs::write(&partial, vec![0xAB; 100]).unwrap();
    let Err(err) = raw_sled_open(dir.path()) else {
        panic!("sled 0.34 should refuse the partial snapshot");
    };
    assert!(matches!(err, ::sled::Error::Corruption { .. }), "{err:?}");

    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert!(!partial.exists());
    assert_eq!(store.history(&id).unwrap(), history);
    assert_clean(&store, &id);
}

// sled-specific: sled files, locks and flushes.
/// Reopening right after dropping the last handle works even though sled releases its file lock
/// a moment after the drop.
#[test]
fn reopening_at_once_waits_for_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let id = agent("npc");
    for round in 0..20u64 {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store.ensure_agent(&id, NOW).unwrap();
        append_n(&store, &id, 50);
        assert_eq!(
            store.agent(&id).unwrap().unwrap().next_seq,
            50 * (round + 1)
        );
    }
}

// sled-specific: sled files, locks and flushes.
/// `flush_every` bounds what a kill can take of unacknowledged writes; zero (sled's "never") is
/// refused, as in runtime.toml.
#[test]
fn a_zero_flush_interval_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open(
        dir.path(),
        StoreOptions {
            flush_every: Duration::ZERO,
            ..StoreOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid store options: flush_every must be above zero"
    );
    let err = Store::open(
        dir.path(),
        StoreOptions {
            cache_bytes: 0,
            ..StoreOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid store options: cache_bytes must be above zero"
    );
}

// sled-specific: sled files, locks and flushes.
/// `Store::durable` on an idle store runs one flush for the one waiter.
#[test]
fn durable_on_a_store_on_disk_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let id = agent("npc");
    store.create_agent(&id, NOW).unwrap();
    append_n(&store, &id, 3);
    futures::executor::block_on(store.durable()).unwrap();
    let stats = store.group_commit_stats();
    assert_eq!((stats.flushes, stats.served), (1, 1));
}

// sled-specific: appends without a transaction.
/// On sled an append writes its messages, then the agent's record, without a transaction; a
/// crash in between leaves messages the record does not count. The next open counts them: the
/// record's `next_seq`, `history_len` and `history_tokens` match the history again, a journal
/// entry written without its by-source key and record update is counted and indexed, the
/// invariants hold and the next appends take the next ids.
#[test]
fn appends_whose_record_update_a_crash_lost_are_counted_at_open() {
    let (dir, id) = closed_sled_store(30, Some((10, "the first ten turns")));
    let before = {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let record = store.agent(&id).unwrap().unwrap();
        assert_eq!(record.next_seq, 30);
        (record, store.history(&id).unwrap())
    };
    // What a kill between an append's message writes and its record write leaves.
    let lost: Vec<Message> = (30..33)
        .map(|i| {
            let mut m = msg(i);
            m.seq = i;
            m
        })
        .collect();
    {
        let raw = raw_sled_open(dir.path()).unwrap();
        // A crash leaves no clean-close mark.
        assert!(raw.remove(b"somna/appends-recorded").unwrap().is_some());
        let history = raw.open_tree("history").unwrap();
        for m in &lost {
            let mut key = id.as_str().as_bytes().to_vec();
            key.push(0);
            key.extend_from_slice(&m.seq.to_be_bytes());
            let value = somna_store::codec::encode("history", m).unwrap();
            history.insert(key, value).unwrap();
        }
        // And a journal entry written without its by-source key or its record update.
        let mut key = id.as_str().as_bytes().to_vec();
        key.push(0);
        key.extend_from_slice(&before.0.next_entry_id.to_be_bytes());
        let mut entry =
            JournalEntry::new(NOW, SourceType::Note, 6, "the smith owes me a horseshoe");
        entry.id = before.0.next_entry_id;
        let value = somna_store::codec::encode("journal", &entry).unwrap();
        raw.open_tree("journal")
            .unwrap()
            .insert(key, value)
            .unwrap();
        raw.flush().unwrap();
    }

    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let record = store.agent(&id).unwrap().unwrap();
    let (old, old_history) = before;
    assert_eq!(record.next_seq, 33);
    assert_eq!(record.history_len, old.history_len + 3);
    assert_eq!(
        record.history_tokens,
        old.history_tokens + lost.iter().map(|m| u64::from(m.tokens)).sum::<u64>()
    );
    let mut expected = old_history;
    expected.extend(lost);
    assert_eq!(store.history(&id).unwrap(), expected);
    assert_eq!(store.usage_tokens(&id).unwrap(), record.history_tokens);
    assert_clean(&store, &id);
    assert_eq!(record.next_entry_id, old.next_entry_id + 1);
    let notes = store
        .query_journal(
            &id,
            &JournalQuery {
                source_type: Some(SourceType::Note),
                ..JournalQuery::default()
            },
        )
        .unwrap();
    assert_eq!(
        notes.len(),
        1,
        "the adopted entry is found through its by-source key"
    );
    assert_eq!(notes[0].content, "the smith owes me a horseshoe");
    assert_clean(&store, &id);
    let next = append_n(&store, &id, 1);
    assert_eq!(next[0].seq, 33);
    let entry = store
        .append_journal(
            &id,
            JournalEntry::new(NOW, SourceType::Note, 3, "a second note"),
        )
        .unwrap();
    assert_eq!(entry.id, old.next_entry_id + 1);
    assert_clean(&store, &id);
}
