//! Fixtures shared by every test module: stores, agents, messages, and commits built the way the
//! compaction engine builds them.

use somna_core::{
    AgentId, CompactionMethod, CompactionRecord, JournalEntry, Message, MessageKind, Role,
    SummaryMeta, Timestamp, Trigger,
};
use somna_store::{CommitOutcome, CompactionCommit, Store};

/// A fixed "now" so stored values are reproducible.
pub const NOW: Timestamp = Timestamp(1_790_000_000_000);

/// A backend the conformance tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sled,
    Postgres,
}

std::thread_local! {
    /// The backend of the test running on this thread (set by [`on`]; sled-only tests leave it at
    /// sled).
    static BACKEND: std::cell::Cell<Backend> = const { std::cell::Cell::new(Backend::Sled) };
}

/// The backend of the test running on this thread.
pub fn backend() -> Backend {
    BACKEND.with(std::cell::Cell::get)
}

/// Runs `test` with `backend` as this thread's backend (libtest gives each test its own thread).
pub fn on<T>(backend: Backend, test: impl FnOnce() -> T) -> T {
    BACKEND.with(|current| current.set(backend));
    test()
}

/// Makes each listed function of the calling module (a plain `fn name()`, without `#[test]`) a
/// test on each backend: `<module>::sled::name` and `<module>::postgres::name`. A function left
/// out of the list is dead code, which clippy (`-D warnings`) refuses, so none is forgotten.
macro_rules! on_both_backends {
    ($($test:ident),+ $(,)?) => {
        mod sled {
            $(
                #[test]
                fn $test() {
                    $crate::common::on($crate::common::Backend::Sled, super::$test)
                }
            )+
        }

        mod postgres {
            $(
                #[test]
                fn $test() {
                    $crate::common::on($crate::common::Backend::Postgres, super::$test)
                }
            )+
        }
    };
}
pub(crate) use on_both_backends;

/// The variable naming the Postgres database of the Postgres tests, e.g.
/// `postgres://postgres@127.0.0.1:5432/test`; unset, they are skipped.
pub const PG_URL: &str = "SOMNA_TEST_PG_URL";

/// The Postgres URL of the tests, or `None` (after printing that the test is skipped).
pub fn pg_url() -> Option<String> {
    somna_testkit::pg_url_or_skip()
}

/// A schema name no other test uses (for tests that open a Postgres schema by name; the last
/// handle is opened with `Store::temporary_postgres_in`, which drops the schema).
pub fn unique_schema(what: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "somna_test_{what}_{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A temporary store on the test's backend; `None` when the backend is Postgres and
/// `SOMNA_TEST_PG_URL` is unset (use the `temporary_store!` macro, which returns from the test).
pub fn try_temporary_store() -> Option<Store> {
    match backend() {
        Backend::Sled => Some(Store::temporary().unwrap()),
        Backend::Postgres => Some(Store::temporary_postgres(&pg_url()?).unwrap()),
    }
}

/// A temporary store with one agent, `npc` (see [`try_temporary_store`]).
pub fn try_store_with_agent() -> Option<(Store, AgentId)> {
    let store = try_temporary_store()?;
    let id = agent("npc");
    store.create_agent(&id, NOW).unwrap();
    Some((store, id))
}

/// A temporary store on the test's backend, or a return from the test (skipped) when there is
/// none.
macro_rules! temporary_store {
    () => {
        match $crate::common::try_temporary_store() {
            Some(store) => store,
            None => return,
        }
    };
}
pub(crate) use temporary_store;

/// `(store, id)`: a temporary store with one agent, `npc`, or a return from the test (skipped).
macro_rules! store_with_agent {
    () => {
        match $crate::common::try_store_with_agent() {
            Some(pair) => pair,
            None => return,
        }
    };
}
pub(crate) use store_with_agent;

/// An agent id.
/// How many cases a property test runs: `PROPTEST_CASES` when set, else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

pub fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

/// The i-th message of a scripted conversation, with a token count derived from its length.
pub fn msg(i: u64) -> Message {
    let m = if i % 2 == 0 {
        Message::user(format!("user turn {i}: where is the smithy?"))
    } else {
        Message::assistant(format!(
            "assistant turn {i}: past the well, {}",
            "far ".repeat((i % 7) as usize)
        ))
    };
    with_tokens(m.at(Timestamp(NOW.0 + i)))
}

/// Sets `tokens` the way a caller would (any deterministic count will do for the store).
pub fn with_tokens(mut m: Message) -> Message {
    m.tokens = 4 + (m.content.len() as u32).div_ceil(4);
    m
}

/// Appends `n` scripted messages, returning them as stored.
pub fn append_n(store: &Store, id: &AgentId, n: u64) -> Vec<Message> {
    let start = store.agent(id).unwrap().unwrap().next_seq;
    store
        .append_batch(id, (start..start + n).map(msg).collect(), NOW)
        .unwrap()
}

/// What the reopen tests write into a new `store`: agent `id` with 25 messages, the first ten
/// compacted. Returns the usage and the live history they leave.
pub fn fill_for_reopen(store: &Store, id: &AgentId) -> (u64, Vec<Message>) {
    assert!(!store.was_recovered());
    store.create_agent(id, NOW).unwrap();
    append_n(store, id, 25);
    let history = store.history(id).unwrap();
    store
        .commit_compaction(id, &commit_for(&history[..10], "first ten turns", NOW))
        .unwrap();
    (store.usage_tokens(id).unwrap(), store.history(id).unwrap())
}

/// Asserts that a reopened `store` holds what [`fill_for_reopen`] wrote, as `written` left it.
pub fn assert_reopened(store: &Store, id: &AgentId, (usage, history): &(u64, Vec<Message>)) {
    assert!(store.was_recovered());
    assert_eq!(store.usage_tokens(id).unwrap(), *usage);
    assert_eq!(&store.history(id).unwrap(), history);
    let record = store.agent(id).unwrap().unwrap();
    assert_eq!(
        (record.next_seq, record.history_len, record.archive_len),
        (25, 16, 10)
    );
    assert_clean(store, id);
}

/// The last original seq a history message stands for.
pub fn through(m: &Message) -> u64 {
    m.summary().map_or(m.seq, |s| s.covers_through_seq)
}

/// The summary the engine would write for `covered`: it takes the first covered seq, folds in any
/// earlier summary (generation + 1) and is smaller than what it replaces.
pub fn summary_for(covered: &[Message], text: &str, at: Timestamp) -> Message {
    let first = &covered[0];
    let last = covered.last().unwrap();
    let generation = somna_core::compaction::next_generation(covered);
    let content = format!("{} {text}", Message::SUMMARY_PREFIX);
    let tokens = 4 + (content.len() as u32).div_ceil(4);
    Message {
        seq: first.seq,
        tokens,
        created_at: at,
        kind: MessageKind::Summary(SummaryMeta {
            covers_from_seq: first.seq,
            covers_through_seq: through(last),
            compacted_count: covered.len() as u32,
            original_tokens: covered.iter().map(|m| m.tokens).sum(),
            summary_tokens: tokens,
            generation,
            compacted_at: at,
        }),
        ..Message::new(Role::System, content)
    }
}

/// Commits the compaction of `covered` under a summary `text`, at [`NOW`] (see [`commit_for`]).
pub fn compact(store: &Store, id: &AgentId, covered: &[Message], text: &str) -> CommitOutcome {
    store
        .commit_compaction(id, &commit_for(covered, text, NOW))
        .unwrap()
}

/// A full compaction commit of `covered` with its synthesis entry and log record.
pub fn commit_for<'a>(covered: &'a [Message], text: &str, at: Timestamp) -> CompactionCommit<'a> {
    let summary = summary_for(covered, text, at);
    let meta = summary.summary().unwrap().clone();
    let before: u64 = covered.iter().map(|m| u64::from(m.tokens)).sum();
    CompactionCommit {
        covered: covered.into(),
        journal: vec![JournalEntry::synthesis(
            at,
            summary.content.clone(),
            meta.covers_from_seq,
            meta.covers_through_seq,
        )],
        record: CompactionRecord {
            summary_seq: 0,
            tokens_before: before,
            tokens_after: u64::from(summary.tokens),
            ..CompactionRecord::new(
                at,
                Trigger::Manual,
                CompactionMethod::Extractive,
                (meta.covers_from_seq, meta.covers_through_seq),
                covered.len() as u32,
                meta.generation,
            )
        },
        summary,
    }
}

/// The masked placeholder the engine would write for a normal message.
pub fn masked_of(original: &Message) -> Message {
    let content = format!("[tool output masked: {} tokens]", original.tokens);
    Message {
        tokens: 4 + (content.len() as u32).div_ceil(4),
        kind: MessageKind::Masked {
            original_tokens: original.tokens,
        },
        content,
        ..original.clone()
    }
}

/// Everything of one agent that a failed commit must leave unchanged.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub record: somna_core::AgentRecord,
    pub history: Vec<Message>,
    pub archive: Vec<Message>,
    pub journal: Vec<JournalEntry>,
    pub events: Vec<somna_store::LoggedEvent>,
    pub usage: u64,
}

/// Takes a [`Snapshot`].
pub fn snapshot(store: &Store, id: &AgentId) -> Snapshot {
    Snapshot {
        record: store.agent(id).unwrap().unwrap(),
        history: store.history(id).unwrap(),
        archive: store.archive_range(id, 0, usize::MAX).unwrap(),
        journal: store
            .query_journal(id, &somna_core::JournalQuery::default())
            .unwrap(),
        events: store.events(id, usize::MAX).unwrap(),
        usage: store.usage_tokens(id).unwrap(),
    }
}

/// Asserts that `check_invariants` finds nothing.
pub fn assert_clean(store: &Store, id: &AgentId) {
    let report = store.check_invariants(id).unwrap();
    assert!(report.is_ok(), "{report}");
}

/// A sled database in a new directory, written, flushed and closed: agent `npc` with `n` messages,
/// the first `count` of them compacted into a summary saying `text` when `compacted` is
/// `Some((count, text))`. Returns the directory and the agent.
pub fn closed_sled_store(n: u64, compacted: Option<(usize, &str)>) -> (tempfile::TempDir, AgentId) {
    let dir = tempfile::tempdir().unwrap();
    let id = agent("npc");
    let store = Store::open(dir.path(), somna_store::StoreOptions::default()).unwrap();
    store.create_agent(&id, NOW).unwrap();
    let all = append_n(&store, &id, n);
    if let Some((count, text)) = compacted {
        compact(&store, &id, &all[..count], text);
        // The search index over what it archived, as the runtime builds it after a commit.
        store.index_archive(&id).unwrap();
    }
    store.flush().unwrap();
    assert_clean(&store, &id);
    (dir, id)
}

/// Opens the database with sled directly (to damage it on purpose). sled releases its file lock a
/// moment after the last handle drops, so a lock error is retried for up to 2 s, as
/// `Store::open` does; any other result is returned as is.
pub fn raw_sled_open(path: &std::path::Path) -> sled::Result<sled::Db> {
    let mut last = sled::open(path);
    for _ in 0..100 {
        match &last {
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("lock") =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
                last = sled::open(path);
            }
            _ => break,
        }
    }
    last
}
