//! The inverted index: every message, journal entry and memory fact of an agent, by term, so that
//! searching an archive of 100,000 messages reads only the postings of the query's terms.
//!
//! Terms come from somna-core's analyzer (`retrieval::analyze`: stop words dropped, Snowball
//! stems, a message's speaker indexed with it); scores are BM25 (`retrieval::Collection`).
//!
//! The index is derived data, kept beside the content rather than inside its transactions: three
//! watermarks say what it holds (messages below seq `m`, journal entries below id `j`, facts below
//! id `f`), and [`Store::catch_up_index`](crate::Store::catch_up_index) adds whatever lies between the watermarks and the content
//! in one atomic batch on the `terms` tree (index writes and new watermarks together). Content
//! never changes once written (masking and compaction hide it, uncompaction shows it again), so
//! nothing is ever removed from the index. The catch-up runs, under the agent's lock, after every
//! compaction commit and masking (which move the message frontier: messages are indexed once they
//! are archived, so the live path's appends cost nothing) and before every search of a kind
//! (journal entries and facts are indexed by the first search that needs them) — so a crash
//! between a commit and its catch-up loses nothing, and a database written before the index
//! existed is indexed by its first search.
//!
//! Keys in the `terms` tree (`kind` is `m` message, `j` journal entry, `f` fact):
//!
//! | key | value |
//! |---|---|
//! | `agent ‖ 0x00 ‖ 0x00` | the watermarks and the layout version (an index of another version is rebuilt) |
//! | `agent ‖ 0x00 ‖ kind ‖ 0x00` | the collection: documents and their total length in terms |
//! | `agent ‖ 0x00 ‖ kind ‖ term ‖ 0x00` | the term's head: its document frequency and its newest postings (up to [`BLOCK`]) |
//! | `agent ‖ 0x00 ‖ kind ‖ term ‖ 0x00 ‖ first_id_be64` | a sealed block of [`BLOCK`] older postings |
//!
//! A posting is `(id, tf, len)`: the document's id (seq, entry id or fact id), how often the term
//! occurs in it, and the document's length in terms. Postings are varint-encoded, ids as deltas,
//! behind a format byte ([`POSTINGS_FORMAT`]). Adding to a term rewrites only its head (at most
//! [`BLOCK`] postings); a search reads each query term's head and blocks with one range scan.
//!
//! - `postings`: the `terms` tree's keys and values (postings, heads, blocks, collections,
//!   watermarks).
//! - `catch_up`: indexing what lies between the watermarks and the content, and checking it.
//! - `search`: BM25 scoring, the archive's search and ranking, and the hits' messages.
//! - `fusion`: BM25 fused with a vector search.

use somna_core::Message;

mod catch_up;
mod fusion;
mod postings;
mod search;

pub(crate) use catch_up::each_decoded;
pub(crate) use search::best_first;

/// The index layout this build writes and reads; an agent whose index has another version is
/// re-indexed from scratch by its next catch-up.
pub const INDEX_VERSION: u64 = 2;
/// Postings per sealed block (and at most in a head).
pub const BLOCK: usize = 128;
/// The first byte of every postings value.
pub const POSTINGS_FORMAT: u8 = 1;

/// What kind of document an index entry points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocKind {
    /// A message (its id is its seq).
    Message,
    /// A journal entry (its entry id).
    Journal,
    /// A memory fact (its fact id).
    Fact,
}

impl DocKind {
    fn byte(self) -> u8 {
        match self {
            DocKind::Message => b'm',
            DocKind::Journal => b'j',
            DocKind::Fact => b'f',
        }
    }
}

/// A document found by a search, with its score (BM25's, a vector's similarity, or both fused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoredDoc {
    /// The document's id: a message's seq, a journal entry's id, a fact's id.
    pub id: u64,
    pub score: f64,
}

/// A message of [`Store::rank_archive`](crate::Store::rank_archive)'s ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedDoc {
    /// The message's seq.
    pub id: u64,
    pub score: f64,
    /// The share of `score` the question's words gave: 1 for BM25 alone, 0 for a vector's
    /// similarity alone, between for a fused score (see [`fuse`]). A hit found by meaning
    /// rather than by words is likely the answer itself, not the turn next to it.
    pub words: f32,
}

/// [`Store::ranking`](crate::Store::ranking): the best messages for a question, read a few at a
/// time ([`Ranking::next_batch`]) and sorted only as far as they are read. A working context reads a
/// few dozen hits of a ranking of hundreds, and sorting all of them cost a turn's prompt ~7%
/// of its instructions (docs/benchmarks.md).
#[derive(Debug, Default)]
pub struct Ranking {
    /// The scored messages; `docs[..sorted]` in rank order, each above every one after it.
    docs: Vec<RankedDoc>,
    sorted: usize,
    /// How many of them have been read.
    read: usize,
    /// How many of them the ranking holds (its limit).
    len: usize,
}

/// An archived message found by [`Store::search_archive`](crate::Store::search_archive).
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveHit {
    /// The original message (never a summary or a masked placeholder).
    pub message: Message,
    pub score: f64,
}
