//! somna-store's integration tests, one binary: every operation on both backends, the invariants
//! under random operation sequences (proptest), a crash test that SIGKILLs a writer process, and
//! what only one backend has (sled's files; Postgres's schemas, TLS, leases and fencing).
//!
//! The conformance tests are plain functions of their module, listed once in
//! `on_both_backends!` (tests/all/common.rs), which runs each as `<module>::sled::<name>` and
//! `<module>::postgres::<name>` against a temporary store of that backend. Postgres needs
//! `SOMNA_TEST_PG_URL` (e.g. `postgres://postgres@127.0.0.1:5432/test`); with it unset every
//! Postgres test reports the skip through `somna_testkit::skip` (stderr and `SOMNA_SKIP_LOG`) and
//! passes. `cargo test -p somna-store --test all postgres` runs every Postgres test, `sled` the
//! sled ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// First: its macros (`on_both_backends!`, `temporary_store!`, `store_with_agent!`) are used below.
mod common;

mod agents;
mod check;
mod compaction;
mod copy;
mod crash;
mod encoding;
mod events;
mod index;
mod journal;
mod layout;
mod live_cache;
mod messages;
mod postgres;
mod props;
mod tokens;
mod vectors;
