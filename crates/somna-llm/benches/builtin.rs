//! Speed of the builtin provider and of the somna-text heuristics it answers with, on the 200-turn
//! fixture: the extractive summary, framing and parsing the
//! transcript, a scripted chat turn, and heuristic importance scores; and the grounding check of a
//! compaction's summary against its body (every item kept, and an answer full of invented values
//! with wrong citations, the check's worst case: each item is looked up in every turn).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use somna_core::config::SectionCaps;
use somna_llm::grounding::{self, Grounder};
use somna_llm::{BuiltinClient, ChatMessage, ChatRequest};
use somna_testkit::transcript_200;
use somna_text::extractive::summarize;
use somna_text::transcript::{self, Turn};
use somna_text::{cite, estimate_tokens, extract_facts, score_importance};

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

    // The grounding check, as a compaction runs it: the sources of the body, then every item.
    let summary = summarize(&turns, &caps, 1500, &estimate_tokens).render();
    c.bench_function("ground_summary_200_turns", |b| {
        b.iter(|| {
            let grounder = Grounder::from_turns(black_box(&turns), &["Wren"]);
            grounding::ground_summary(black_box(&summary), &grounder)
        })
    });
    let invented: String = (0..20)
        .map(|i| {
            format!(
                "- Zorbath{i} sold the ribbon for {} silver on 2031-03-{:02} [#{}]\n",
                9000 + i,
                i + 1,
                (i * 7) % 200
            )
        })
        .collect();
    let inventing = format!("## Topic arc\n{invented}## Decisions\n(none)");
    c.bench_function("ground_summary_200_turns_20_invented", |b| {
        b.iter(|| {
            let grounder = Grounder::from_turns(black_box(&turns), &["Wren"]);
            grounding::ground_summary(black_box(&inventing), &grounder)
        })
    });
    // A journal note checked as `journal_add` checks it: the sources of what the agent was shown
    // (here the 200 turns), then the note: one in the turns' words, one with common words nobody
    // said (weighed against the turn it would cite).
    c.bench_function("journal_notes_200_turns", |b| {
        b.iter(|| {
            let grounder = Grounder::from_turns(black_box(&turns), &["Wren"]);
            (
                grounder.unsupported(black_box("Mara asked who owns the empty lot")),
                grounder.unsupported(black_box("Mara collects fractured teapots by the chapel")),
            )
        })
    });
    // What every chat prompt does to a stored summary: its citations removed.
    c.bench_function("strip_summary_citations", |b| {
        b.iter(|| cite::strip_all(black_box(&summary)))
    });
    let long: Vec<Turn> = (0..3u64)
        .flat_map(|k| {
            turns.iter().map(move |t| Turn {
                seq: t.seq + k * 1_000,
                ..t.clone()
            })
        })
        .collect();
    c.bench_function("ground_summary_600_turns", |b| {
        b.iter(|| {
            let grounder = Grounder::from_turns(black_box(&long), &["Wren"]);
            grounding::ground_summary(black_box(&summary), &grounder)
        })
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
