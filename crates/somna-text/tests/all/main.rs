//! Integration tests of somna-text, one binary: the extractive summarizer's acceptance test on the
//! 200-turn fixture, and framing transcripts as data (round-trip properties and a snapshot).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod summarizer;
mod transcript;
