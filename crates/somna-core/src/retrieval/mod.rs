//! Keyword retrieval for the working context, the `recall` tool and archive search.
//!
//! - [`analyze`]: text → terms (lower-cased, stop words and question words dropped, Snowball
//!   English stems; a message's speaker is indexed with it). Documents and queries share it.
//! - [`when`]: the period a question names or implies ("in May 2023", "two weeks ago"),
//!   which retrieval puts first.
//! - [`bm25`]: the scoring formula (Okapi BM25) and an in-memory [`top_k`] for small collections.
//!
//! The store keeps an inverted index of every message, journal entry and fact built with the same
//! analyzer (somna-store's `index` module), so searching an archive of 100,000 messages reads only
//! the postings of the query's terms.

pub mod analyze;
pub mod bm25;
pub mod when;

pub use analyze::{
    Analyzer, SPEAKER_MARK, document_terms, is_stop_word, lowercase_into, speaker_term, terms,
    visit_terms,
};
pub use bm25::{Collection, Hit, top_k};
pub use when::{Period, period_in};
