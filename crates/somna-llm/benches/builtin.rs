//! Speed of the builtin provider on the 200-turn fixture: the extractive summary, framing and parsing the
//! transcript, a scripted chat turn, and heuristic importance scores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use somna_core::config::SectionCaps;
use somna_llm::builtin::extractive::summarize;
use somna_llm::builtin::{estimate_tokens, extract_facts, score_importance};
use somna_llm::transcript::{self, Turn};
use somna_llm::{BuiltinClient, ChatMessage, ChatRequest};
use somna_testkit::transcript_200;

fn bench(c: &mut Criterion) {
    let messages = transcript_200().unwrap();
    let turns: Vec<Turn> = messages.iter().map(Turn::from).collect();
    let caps = SectionCaps::default();

    c.bench_function("summarize_200_turns", |b| {
        b.iter(|| summarize(black_box(&turns), &caps, 1500, &estimate_tokens))
    });
    c.bench_function("extract_facts_200_turns", |b| {
        b.iter(|| extract_facts(black_box(&turns)))
    });
    let framed = transcript::frame(&messages);
    c.bench_function("frame_200_turns", |b| {
        b.iter(|| transcript::frame(black_box(&messages)))
    });
    c.bench_function("parse_200_turns", |b| {
        b.iter(|| transcript::parse(black_box(&framed)))
    });

    let client = BuiltinClient::new();
    let mut chat = vec![ChatMessage::system(
        "You are Wren, the steward of Millbrook.",
    )];
    chat.extend(messages.iter().take(40).map(ChatMessage::from));
    chat.push(ChatMessage::user("Who owns the empty lot behind the chapel?").with_name("Mara"));
    let request = ChatRequest::new("builtin", chat);
    c.bench_function("chat_turn_40_messages", |b| {
        b.iter(|| client.respond(black_box(&request)))
    });

    let sentences: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    c.bench_function("score_importance_200_messages", |b| {
        b.iter(|| {
            sentences
                .iter()
                .map(|s| u32::from(score_importance(black_box(s))))
                .sum::<u32>()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
