//! somna-store's integration tests, one binary: every operation, the invariants under random
//! operation sequences (proptest), and a crash test that SIGKILLs a writer process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

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
