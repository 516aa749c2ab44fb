//! somna-text: Somna's text heuristics, the pure half of the builtin provider and of grounding.
//!
//! **Invariant:** pure and deterministic: the same input always gives the same output, byte for
//! byte, on every platform; no I/O, no async, no clock, no randomness; depends on somna-core only
//! (and serde for the turn type). Nothing here knows a provider or a request: callers (somna-llm's
//! builtin provider, prompts and grounding, the runtime's compactor and sleep) pass text and turns in.
//!
//! - [`words`]: sentences, normalized words, cue phrases, named entities, artifacts, and two
//!   measures: [`stable_hash`] (FNV-1a) and [`estimate_tokens`] (one token per four bytes).
//! - [`transcript`]: a conversation framed as data (`<transcript>` … `</transcript>`) and parsed
//!   back into [`Turn`](transcript::Turn)s.
//! - [`cite`]: citation markers (`[#12]`, `[#12, #15]`, `[#12-14]`): read, stripped, written.
//! - [`extractive`]: the extractive summarizer, [`extractive::summarize`]: turns into a
//!   [`StructuredSummary`](extractive::StructuredSummary) of sections within their caps, and the
//!   summary's text form.
//! - [`facts`]: fact extraction ([`extract_facts`]), consolidation of journal entries
//!   ([`consolidate`]), reflections ([`reflect`]) and heuristic importance scores
//!   ([`score_importance`], with the thresholds [`EXTRACT_MIN_IMPORTANCE`] and
//!   [`CONSOLIDATE_MIN_IMPORTANCE`]).

pub mod cite;
pub mod extractive;
pub mod facts;
pub mod transcript;
pub mod words;

pub use facts::{
    CONSOLIDATE_MIN_IMPORTANCE, EXTRACT_MIN_IMPORTANCE, consolidate, extract_facts, most_important,
    reflect, score_importance,
};
pub use words::{estimate_tokens, stable_hash};
