//! somna-store: Somna's storage, the only crate that names sled or the Postgres client.
//!
//! One database holds every agent: an embedded sled database ([`Store::open`]) or a schema of a
//! PostgreSQL database ([`Store::open_postgres`]), behind one backend boundary. Trees are shared by
//! all agents and every key starts with the agent id and a 0x00 byte, so one agent's data is a
//! contiguous key range (see docs/storage.md).
//!
//! - [`store`]: [`Store`], [`StoreOptions`] and [`PostgresOptions`]: opening, flushing, agents and
//!   their records, the per-agent in-memory state that makes [`Store::usage_tokens`] O(1).
//! - [`durable`]: group commit, [`Store::durable`]: wait until every write so far survives a kill.
//! - [`messages`]: appending to history and reading history and the archive (views over the trees,
//!   built in a private `view` module: see docs/storage.md, "Layout 2").
//! - [`compaction`]: the atomic [`Store::commit_compaction`], [`Store::commit_masking`] and
//!   [`Store::uncompact`], with [`CompactionCommit`], [`CommitOutcome`] and [`UncompactOutcome`].
//! - [`index`]: the inverted index of messages, journal entries and facts, kept up to date in the
//!   writes that create them; [`Store::search`] and [`Store::search_archive`] (BM25, reading only
//!   the query terms' postings).
//! - [`vectors`]: embedding vectors of archived messages, quantized, written while agents sleep
//!   ([`Store::messages_to_embed`], [`Store::put_vectors`]) and searched by a flat scan
//!   ([`Store::search_vectors`]); [`Store::search_archive_with`] fuses them with BM25.
//! - [`tokens`]: the API's scoped bearer tokens, stored hashed ([`Store::create_token`],
//!   [`Store::tokens`], [`Store::revoke_token`]).
//! - [`inbox`]: inputs waiting for the node that owns their agent ([`Store::enqueue`],
//!   [`Store::append_from_inbox`], exactly once).
//! - [`journal`]: journal entries, their by-source index, queries, consolidation into memory facts.
//! - [`events`]: the per-agent event log (somna-core's [`LoggedEvent`], re-exported here).
//! - [`check`]: [`Store::check_invariants`] and its [`InvariantReport`].
//! - [`cluster`]: several nodes on one Postgres store: shard leases with fencing epochs
//!   ([`Store::open_postgres_cluster`], [`Store::cluster`]), rendezvous placement.
//! - [`copy`]: [`Store::copy_into`], a whole store into an empty one on any backend.
//! - [`codec`]: the versioned value encoding (a format-version byte, then named MessagePack).
//! - [`error`]: [`StoreError`] and the [`Result`] alias.
//!
//! Keys are built and parsed in a private `keys` module; values are only written through [`codec`].

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod backend;
pub mod check;
pub mod cluster;
pub mod codec;
pub mod compaction;
pub mod copy;
pub mod durable;
pub mod error;
pub mod events;
pub mod inbox;
pub mod index;
pub mod journal;
mod keys;
pub mod live;
pub mod messages;
pub mod store;
pub mod tokens;
mod varint;
pub mod vectors;
mod view;

pub use check::InvariantReport;
pub use cluster::{ClusterOptions, ClusterView, NodeInfo, ShardLease};
pub use compaction::{CommitOutcome, CompactionCommit, UncompactOutcome};
pub use copy::CopyReport;
pub use durable::GroupCommitStats;
pub use error::{Result, StorageError, StoreError};
pub use inbox::InboxItem;
pub use index::{ArchiveHit, DocKind, RankedDoc, Ranking, ScoredDoc};
pub use live::HistoryCacheStats;
pub use somna_core::LoggedEvent;
pub use store::{PostgresOptions, Store, StoreOptions};
pub use tokens::{Access, ApiToken, TokenScope};
pub use vectors::{ToEmbed, VectorsMeta};
