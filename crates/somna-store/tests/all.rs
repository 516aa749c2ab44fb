//! somna-store's integration tests, one binary: every operation, the invariants under random
//! operation sequences (proptest), and a crash test that SIGKILLs a writer process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

/// The backend the shared modules run against (tests/postgres.rs runs them on Postgres).
const BACKEND: common::Backend = common::Backend::Sled;

/// Tests that only make sense on sled (they open directories, damage sled files, test sled's
/// flushing): compiled here, left out of tests/postgres.rs.
macro_rules! sled_only {
    ($($item:item)*) => { $($item)* };
}

// The modules live in tests/all/ so that Cargo does not build each one as its own test binary.

#[path = "all/agents.rs"]
mod agents;
#[path = "all/check.rs"]
mod check;
#[path = "all/common.rs"]
mod common;
#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/copy.rs"]
mod copy;
#[path = "all/crash.rs"]
mod crash;
#[path = "all/encoding.rs"]
mod encoding;
#[path = "all/events.rs"]
mod events;
#[path = "all/index.rs"]
mod index;
#[path = "all/journal.rs"]
mod journal;
#[path = "all/layout.rs"]
mod layout;
#[path = "all/messages.rs"]
mod messages;
#[path = "all/props.rs"]
mod props;
#[path = "all/vectors.rs"]
mod vectors;
