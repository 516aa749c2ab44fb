//! The store's conformance suite on Postgres: the modules of tests/all/ (those that are not about
//! sled's files), run against `Store::temporary_postgres` of `SOMNA_TEST_PG_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432/test`), plus Postgres-only tests. With the variable unset
//! every test reports the skip through `somna_testkit::skip` (stderr and `SOMNA_SKIP_LOG`) and passes.
//!
//! Left out: tests/all/encoding.rs (the codec, which no backend touches, and a value damaged in a
//! sled file), tests/all/layout.rs (its fixture is a sled database written by an older build), and
//! the tests wrapped in `sled_only!` (reopening a directory, damaging sled files, sled's snapshot
//! files, file lock and flush interval).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Imports and helpers used only by the sled-only tests.
#![allow(unused_imports, dead_code)]

/// The backend the shared modules run against.
const BACKEND: common::Backend = common::Backend::Postgres;

/// Sled-only tests: left out of this binary.
macro_rules! sled_only {
    ($($item:item)*) => {};
}

#[path = "postgres/admin.rs"]
mod admin;
#[path = "all/agents.rs"]
mod agents;
#[path = "postgres/backend.rs"]
mod backend;
#[path = "all/check.rs"]
mod check;
#[path = "postgres/cluster.rs"]
mod cluster;
#[path = "all/common.rs"]
mod common;
#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/copy.rs"]
mod copy;
#[path = "all/crash.rs"]
mod crash;
#[path = "all/events.rs"]
mod events;
#[path = "all/index.rs"]
mod index;
#[path = "all/journal.rs"]
mod journal;
#[path = "all/messages.rs"]
mod messages;
#[path = "all/props.rs"]
mod props;
#[path = "postgres/tls.rs"]
mod tls;
#[path = "all/vectors.rs"]
mod vectors;
