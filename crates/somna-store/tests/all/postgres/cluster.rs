//! Cluster nodes on one Postgres schema: shard leases, fencing epochs, takeovers.
//!
//! Two stores opened with `Store::open_postgres_cluster` on the same schema stand for two nodes
//! (the fence is checked by the database, inside each write's transaction, so two handles in one
//! process exercise exactly what two processes would).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use somna_core::{AgentId, Message};
use somna_store::cluster::{ClusterOptions, shard_of};
use somna_store::{PostgresOptions, Store, StoreError};

use crate::common::*;

const SHARDS: u32 = 8;
const LONG: Duration = Duration::from_secs(3600);

/// Drops its schema when dropped (after the nodes: bind it first, `let (_guard, a, b)`).
struct DropSchemaAfter {
    url: String,
    schema: String,
}

impl Drop for DropSchemaAfter {
    fn drop(&mut self) {
        drop(Store::temporary_postgres_in(&self.url, &self.schema));
    }
}

/// Two nodes `a` and `b` on a fresh schema, dropped with the returned guard.
fn two_nodes(url: &str, what: &str) -> (DropSchemaAfter, Store, Store) {
    let schema = unique_schema(what);
    let node = |name: &str| {
        Store::open_postgres_cluster(
            url,
            PostgresOptions {
                schema: schema.clone(),
                pool_size: 2,
            },
            ClusterOptions {
                node: name.to_string(),
                shards: SHARDS,
                statement_timeout: Duration::from_secs(5),
            },
        )
        .unwrap()
    };
    let (a, b) = (node("node-a"), node("node-b"));
    let guard = DropSchemaAfter {
        url: url.to_string(),
        schema: schema.clone(),
    };
    (guard, a, b)
}

/// [`two_nodes`] with agent `npc` created by `a`, which holds its shard: (guard, a, b, id, shard,
/// a's epoch).
fn a_owns_npc(url: &str, what: &str) -> (DropSchemaAfter, Store, Store, AgentId, u32, u64) {
    let (guard, a, b) = two_nodes(url, what);
    let id = agent("npc");
    let shard = shard_of(&id, SHARDS);
    let epoch = a.cluster().unwrap().acquire(shard, LONG).unwrap().unwrap();
    a.create_agent(&id, NOW).unwrap();
    (guard, a, b, id, shard, epoch)
}

/// The contents of `id`'s live history, in order.
fn contents(store: &Store, id: &AgentId) -> Vec<String> {
    store
        .history(id)
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect()
}

/// Waits until the database's clock says `shard`'s lease has run out (a lease of 1 ms expires
/// soon after; how soon is the database's business, not a fixed sleep's).
fn wait_until_expired(store: &Store, shard: u32) {
    let view = store.cluster().unwrap();
    let started = std::time::Instant::now();
    loop {
        let lease = view
            .leases()
            .unwrap()
            .into_iter()
            .find(|l| l.shard == shard);
        if lease.as_ref().is_some_and(|l| l.remaining_ms < 0) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the lease of shard {shard} has not expired after 10 s: {lease:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn is_fenced(e: &StoreError, shard: u32, epoch: Option<u64>) -> bool {
    matches!(e, StoreError::Fenced { shard: s, epoch: ep, .. } if *s == shard && *ep == epoch)
}

/// The nodes of one cluster read the same identity, made once with the schema; another schema
/// (another cluster) has its own (issue 27: NATS subjects are named by it).
#[test]
fn nodes_of_a_cluster_share_its_identity_and_another_store_has_its_own() {
    let Some(url) = pg_url() else { return };
    let (_x, a, b) = two_nodes(&url, "identity_x");
    let (_y, c, _) = two_nodes(&url, "identity_y");
    let id = |s: &Store| s.cluster().unwrap().id().to_string();
    assert_eq!(id(&a), id(&b));
    assert_eq!(id(&a).len(), 36, "a UUID: {}", id(&a));
    assert_ne!(id(&a), id(&c));
}

#[test]
fn a_node_writes_only_the_agents_of_shards_it_holds() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b) = two_nodes(&url, "fence_own");
    let id = agent("npc");
    let shard = a.cluster().unwrap().shard_of(&id);

    let err = a.create_agent(&id, NOW).unwrap_err();
    assert!(is_fenced(&err, shard, None), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "agent npc refused: this node does not hold shard {shard}"
        )),
        "{err}"
    );

    assert_eq!(a.cluster().unwrap().acquire(shard, LONG).unwrap(), Some(1));
    a.create_agent(&id, NOW).unwrap();
    append_n(&a, &id, 3);
    // Held: nobody else takes it, and the other node's writes are refused.
    assert_eq!(b.cluster().unwrap().acquire(shard, LONG).unwrap(), None);
    let err = b.append(&id, Message::user("hi"), NOW).unwrap_err();
    assert!(is_fenced(&err, shard, None), "{err}");
    // Reads work from any node, and see what the owner wrote since.
    assert_eq!(b.history(&id).unwrap().len(), 3);
    append_n(&a, &id, 2);
    assert_eq!(b.history(&id).unwrap().len(), 5);
    assert_eq!(b.agent(&id).unwrap().unwrap().next_seq, 5);

    // Given back, the other node takes it with the next epoch and continues the history.
    assert!(a.cluster().unwrap().release(shard).unwrap());
    assert!(a.cluster().unwrap().held().is_empty());
    let err = a.append(&id, Message::user("late"), NOW).unwrap_err();
    assert!(is_fenced(&err, shard, None), "{err}");
    assert_eq!(b.cluster().unwrap().acquire(shard, LONG).unwrap(), Some(2));
    let appended = b.append(&id, Message::user("b's turn"), NOW).unwrap();
    assert_eq!(appended.seq, 5);
    assert!(b.check_invariants(&id).unwrap().is_ok());

    let leases = b.cluster().unwrap().leases().unwrap();
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].owner.as_deref(), Some("node-b"));
    assert_eq!(leases[0].epoch, 2);
    assert!(leases[0].remaining_ms > 3_000_000);
}

#[test]
fn an_expired_lease_fences_its_node_and_a_takeover_bumps_the_epoch() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b, id, shard, e) = a_owns_npc(&url, "fence_expiry");
    let ca = a.cluster().unwrap();
    append_n(&a, &id, 4);
    let note = |text: &str| somna_core::EventRecord::Note {
        at: NOW,
        text: text.into(),
    };
    assert_eq!(a.log_event(&id, note("by a")).unwrap(), 0);

    // The node stops renewing: its lease runs out (by the database's clock).
    assert_eq!(
        ca.renew(Duration::from_millis(1)).unwrap(),
        vec![(shard, e)]
    );
    wait_until_expired(&a, shard);
    let err = a
        .append(&id, Message::user("after expiry"), NOW)
        .unwrap_err();
    assert!(is_fenced(&err, shard, Some(e)), "{err}");
    // Renewing an expired lease does not bring it back.
    assert_eq!(ca.renew(LONG).unwrap(), vec![]);
    assert!(ca.held().is_empty());

    let cb = b.cluster().unwrap();
    assert_eq!(cb.acquire(shard, LONG).unwrap(), Some(e + 1));
    let m = b.append(&id, Message::user("new owner"), NOW).unwrap();
    assert_eq!(
        m.seq, 4,
        "the new owner continues after what the old one committed"
    );
    assert!(b.check_invariants(&id).unwrap().is_ok());
    assert_eq!(b.history(&id).unwrap().len(), 5);

    // The log names who wrote each event, under which lease; the fenced node's attempt is not in it.
    assert!(is_fenced(
        &a.log_event(&id, note("stale")).unwrap_err(),
        shard,
        None
    ));
    assert_eq!(b.log_event(&id, note("by b")).unwrap(), 1);
    let writers: Vec<_> = b
        .events_after(&id, None, 10)
        .unwrap()
        .into_iter()
        .map(|l| l.by.map(|w| (w.node, w.epoch)))
        .collect();
    assert_eq!(
        writers,
        [
            Some(("node-a".to_string(), e)),
            Some(("node-b".to_string(), e + 1))
        ]
    );
}

/// Negative control of the fencing tests: the same expiry and takeover as
/// `an_expired_lease_fences_its_node_and_a_takeover_bumps_the_epoch`, with the database's lease
/// check switched off (a test-only switch). The expired node's write then lands after its lease
/// ran out, before the new owner's, which is what the fencing tests assert cannot happen: without
/// the check they fail.
#[test]
fn without_the_lease_check_an_expired_node_still_writes() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b, id, shard, e) = a_owns_npc(&url, "fence_control");
    let ca = a.cluster().unwrap();
    ca.skip_lease_checks_for_negative_control();
    append_n(&a, &id, 2);
    assert_eq!(
        ca.renew(Duration::from_millis(1)).unwrap(),
        vec![(shard, e)]
    );
    wait_until_expired(&a, shard);
    a.append(&id, Message::user("after expiry"), NOW)
        .expect("without the check an expired lease does not fence");
    assert_eq!(
        b.cluster().unwrap().acquire(shard, LONG).unwrap(),
        Some(e + 1)
    );
    b.append(&id, Message::user("new owner"), NOW).unwrap();
    let said = contents(&b, &id);
    assert_eq!(
        said[said.len() - 2..],
        ["after expiry", "new owner"],
        "the expired node's write is in the history: {said:?}"
    );
    // Its next write is refused only because its cached record is stale (a conflict, which a
    // fresh read would get past), not as fenced.
    let e = a
        .append(&id, Message::user("old owner, still writing"), NOW)
        .unwrap_err();
    assert!(!matches!(e, StoreError::Fenced { .. }), "{e}");
}

/// A takeover while the old owner writes as fast as it can: each of its writes either commits
/// before the takeover or fails as fenced, nothing after; the new owner's history holds every
/// acknowledged write of both, once, in order.
#[test]
fn a_takeover_under_concurrent_writes_loses_and_duplicates_nothing() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b, id, shard, e) = a_owns_npc(&url, "fence_race");

    let taken = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (a, id, taken) = (a.clone(), id.clone(), Arc::clone(&taken));
        let written = Arc::clone(&written);
        std::thread::spawn(move || {
            let (mut acked, mut fenced_after_takeover) = (Vec::new(), 0);
            for i in 0..400 {
                let started_after_takeover = taken.load(Ordering::SeqCst);
                match a.append(&id, Message::user(format!("a{i}")), NOW) {
                    Ok(m) => {
                        assert!(!started_after_takeover, "a{i} committed after the takeover");
                        acked.push(m.content);
                        written.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(StoreError::Fenced { epoch, .. }) => {
                        assert_eq!(epoch, Some(e));
                        if started_after_takeover {
                            fenced_after_takeover += 1;
                            if fenced_after_takeover == 20 {
                                break;
                            }
                        }
                    }
                    Err(other) => panic!("a{i}: {other}"),
                }
            }
            (acked, fenced_after_takeover)
        })
    };
    // A is writing: wait for its first commits (bounded), then expire its lease and take the
    // shard over while it keeps writing.
    let started = std::time::Instant::now();
    while written.load(Ordering::SeqCst) < 10 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "A committed nothing in 30 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    a.cluster()
        .unwrap()
        .renew(Duration::from_millis(1))
        .unwrap();
    wait_until_expired(&a, shard);
    let cb = b.cluster().unwrap();
    let epoch = loop {
        if let Some(epoch) = cb.acquire(shard, LONG).unwrap() {
            break epoch;
        }
    };
    taken.store(true, Ordering::SeqCst);
    assert_eq!(epoch, e + 1);
    let mut b_acked = Vec::new();
    for i in 0..10 {
        b_acked.push(
            b.append(&id, Message::user(format!("b{i}")), NOW)
                .unwrap()
                .content,
        );
    }
    let (a_acked, fenced_after) = writer.join().unwrap();
    assert!(!a_acked.is_empty(), "A wrote before the takeover");
    assert_eq!(fenced_after, 20);

    let expected: Vec<String> = a_acked.iter().chain(&b_acked).cloned().collect();
    assert_eq!(contents(&b, &id), expected);
    let report = b.check_invariants(&id).unwrap();
    assert!(report.is_ok(), "{:?}", report.violations);
}

/// One step of two writers around a takeover.
#[derive(Debug, Clone, Copy)]
enum Step {
    AWrites,
    BWrites,
    /// A's lease runs out (it stopped renewing).
    AExpires,
    /// B tries to take the shard.
    BAcquires,
    ARenews,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::AWrites),
        4 => Just(Step::BWrites),
        1 => Just(Step::AExpires),
        2 => Just(Step::BAcquires),
        1 => Just(Step::ARenews),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(12), ..ProptestConfig::default() })]

    /// Writers with epochs e and e+1 interleaved at random: a write commits exactly when its node
    /// holds an unexpired lease at its epoch, so once e+1 exists only e+1 commits; the history is
    /// exactly the committed writes.
    #[test]
    fn only_the_current_epoch_commits(steps in prop::collection::vec(step(), 1..30)) {
        let Some(url) = pg_url() else { return Ok(()) };
        let (_guard, a, b, id, shard, e) = a_owns_npc(&url, "fence_prop");
        let (ca, cb) = (a.cluster().unwrap(), b.cluster().unwrap());
        // The model: whether A's lease is unexpired, whether A still believes it holds it (until
        // a renewal tells it otherwise), and B's epoch once it took the shard.
        let (mut a_live, mut a_believes, mut b_epoch) = (true, true, None::<u64>);
        let mut committed = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::AWrites => {
                    let r = a.append(&id, Message::user(format!("a{i}")), NOW);
                    if a_live {
                        committed.push(r.unwrap().content);
                    } else {
                        let err = r.unwrap_err();
                        let epoch = a_believes.then_some(e);
                        prop_assert!(is_fenced(&err, shard, epoch), "{err}");
                    }
                }
                Step::BWrites => {
                    let r = b.append(&id, Message::user(format!("b{i}")), NOW);
                    match b_epoch {
                        Some(_) => committed.push(r.unwrap().content),
                        None => prop_assert!(is_fenced(&r.unwrap_err(), shard, None)),
                    }
                }
                Step::AExpires => {
                    if a_live {
                        ca.renew(Duration::from_millis(1)).unwrap();
                        wait_until_expired(&a, shard);
                        a_live = false;
                    }
                }
                Step::BAcquires => {
                    let got = cb.acquire(shard, LONG).unwrap();
                    if b_epoch.is_some() || a_live {
                        prop_assert_eq!(got, None);
                    } else {
                        prop_assert_eq!(got, Some(e + 1));
                        b_epoch = got;
                    }
                }
                Step::ARenews => {
                    let held = ca.renew(LONG).unwrap();
                    prop_assert_eq!(held, if a_live { vec![(shard, e)] } else { vec![] });
                    a_believes = a_live;
                }
            }
        }
        prop_assert_eq!(contents(&b, &id), committed);
        prop_assert!(b.check_invariants(&id).unwrap().is_ok());
    }
}

#[test]
fn heartbeats_list_the_nodes_and_bad_options_are_named() {
    let Some(url) = pg_url() else { return };
    let (guard, a, b) = two_nodes(&url, "nodes");
    a.cluster().unwrap().heartbeat().unwrap();
    b.cluster().unwrap().heartbeat().unwrap();
    let nodes = a.cluster().unwrap().nodes().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, ["node-a", "node-b"]);
    assert!(
        nodes
            .iter()
            .all(|n| n.heartbeat_age < Duration::from_secs(60))
    );
    b.cluster().unwrap().leave().unwrap();
    assert_eq!(a.cluster().unwrap().nodes().unwrap().len(), 1);

    let err = a.cluster().unwrap().acquire(SHARDS, LONG).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid shard: shard 8 is out of range: the cluster has 8 shards"
    );
    let bad = |node: &str, shards: u32| {
        Store::open_postgres_cluster(
            &url,
            PostgresOptions {
                schema: unique_schema("bad"),
                pool_size: 1,
            },
            ClusterOptions {
                node: node.to_string(),
                shards,
                statement_timeout: Duration::from_secs(5),
            },
        )
        .unwrap_err()
        .to_string()
    };
    assert!(bad("", 8).contains("node name \"\" must be 1 to 200 characters"));
    assert!(bad("n", 0).contains("shards must be 1 to 1048576, not 0"));
    // A store opened alone is not a cluster node, and cannot open a schema nodes have open.
    assert!(Store::temporary().unwrap().cluster().is_none());
    let schema = guard.schema.clone();
    let options = PostgresOptions {
        schema: schema.clone(),
        pool_size: 1,
    };
    let err = Store::open_postgres(&url, options).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("Postgres schema {schema} at ")),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("is open in another process (or cluster nodes)"),
        "{err}"
    );
}

/// Any node enqueues input for an agent another node owns; the owner moves it into history once.
#[test]
fn the_inbox_delivers_each_input_once_through_the_owner() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b, id, shard, _) = a_owns_npc(&url, "inbox");
    // b does not own npc, but may enqueue for it (an unknown agent is refused).
    let k1 = b.enqueue(&id, b"first".to_vec(), NOW).unwrap();
    let k2 = b.enqueue(&id, b"second".to_vec(), NOW).unwrap();
    let err = b.enqueue(&agent("nobody"), b"x".to_vec(), NOW).unwrap_err();
    assert!(matches!(err, StoreError::UnknownAgent(_)), "{err}");
    let items = a.inbox(100).unwrap();
    assert_eq!(
        items
            .iter()
            .map(|i| i.payload.as_slice())
            .collect::<Vec<_>>(),
        [b"first".as_slice(), b"second"]
    );
    assert_eq!(
        (items[0].key.clone(), items[1].key.clone()),
        (k1.clone(), k2.clone())
    );
    assert_eq!(items[0].agent, id);

    // Only the owner delivers; once.
    let err = b
        .append_from_inbox(&id, &k1, Message::user("first"), NOW)
        .unwrap_err();
    assert!(is_fenced(&err, shard, None), "{err}");
    let m = a
        .append_from_inbox(&id, &k1, Message::user("first"), NOW)
        .unwrap()
        .unwrap();
    assert_eq!(m.seq, 0);
    assert_eq!(
        a.append_from_inbox(&id, &k1, Message::user("first"), NOW)
            .unwrap(),
        None
    );
    a.discard_from_inbox(&id, &k2).unwrap();
    assert_eq!(a.inbox_len().unwrap(), 0);
    assert_eq!(contents(&b, &id), ["first"]);
    assert!(a.check_invariants(&id).unwrap().is_ok());
}

/// Ends every session of the nodes on `schema` (as an operator's `pg_terminate_backend`, or a
/// server restart, would); returns how many.
fn terminate_node_sessions(url: &str, schema: &str) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let pids: Vec<i32> = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name IN ($1, $2)",
                &[
                    &format!("somna-node:{schema}"),
                    &format!("somna-lock:{schema}"),
                ],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        for pid in &pids {
            client
                .execute("SELECT pg_terminate_backend($1)", &[pid])
                .await
                .unwrap();
        }
        pids.len()
    })
}

/// A node whose database sessions are all terminated (its lock session included) reconnects and
/// keeps writing the shards it holds: its writes are fenced by the leases, not by that session.
#[test]
fn a_node_keeps_writing_after_its_sessions_are_terminated() {
    let Some(url) = pg_url() else { return };
    let (guard, a, _b, id, shard, e) = a_owns_npc(&url, "cut");
    append_n(&a, &id, 2);
    let ended = terminate_node_sessions(&url, &guard.schema);
    assert!(ended >= 2, "ended {ended} sessions");
    // A pooled connection that was cut fails the statement it was given; the next one reconnects.
    let mut appended = None;
    for _ in 0..20 {
        match a.append(&id, Message::user("after the cut"), NOW) {
            Ok(m) => {
                appended = Some(m);
                break;
            }
            Err(StoreError::Storage(_)) => std::thread::sleep(Duration::from_millis(50)),
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(appended.expect("the node never wrote again").seq, 2);
    let renewed = (0..20)
        .find_map(|_| a.cluster().unwrap().renew(LONG).ok())
        .unwrap();
    assert_eq!(renewed, vec![(shard, e)]);
    assert!(a.check_invariants(&id).unwrap().is_ok());
}

/// Any node may bring an agent's search index up to its content (a search on a node that does not
/// own the agent does), so two nodes may do it at once, from the same watermarks: only one of
/// them commits (the watermarks are swapped, not overwritten), or the documents between would be
/// indexed twice. Node b searches in a loop while node a, the owner, archives in rounds and
/// searches too; afterwards the index is exactly what indexing the content writes
/// (`check_invariants` compares them) and b finds every round.
#[test]
fn nodes_racing_to_catch_the_index_up_leave_it_exact() {
    let Some(url) = pg_url() else { return };
    let (_guard, a, b, id, _, _) = a_owns_npc(&url, "index_race");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for (node, query) in [(&a, "lantern"), (&b, "lantern"), (&b, "round")] {
            let (stop, id) = (&stop, &id);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    node.search_archive(id, query, 5).unwrap();
                }
            });
        }
        for round in 0..12 {
            let said: Vec<Message> = (0..6)
                .map(|i| Message::user(format!("round {round} line {i}: the lantern by the mill")))
                .collect();
            a.append_batch(&id, said, NOW).unwrap();
            let originals: Vec<Message> = a
                .history(&id)
                .unwrap()
                .into_iter()
                .filter(|m| m.is_normal())
                .collect();
            let covered = &originals[..originals.len() - 2];
            let outcome = a
                .commit_compaction(&id, &commit_for(covered, &format!("round {round}"), NOW))
                .unwrap();
            assert!(
                matches!(outcome, somna_store::CommitOutcome::Committed { .. }),
                "{outcome:?}"
            );
        }
        stop.store(true, Ordering::Relaxed);
    });
    let report = b.check_invariants(&id).unwrap();
    assert!(report.is_ok(), "{report:?}");
    for round in 0..11 {
        let hits = b
            .search_archive(&id, &format!("round {round} line 0"), 50)
            .unwrap();
        assert!(
            hits.iter()
                .any(|h| h.message.content
                    == format!("round {round} line 0: the lantern by the mill")),
            "round {round}: {:?}",
            hits.iter().map(|h| &h.message.content).collect::<Vec<_>>()
        );
    }
}
