//! Token-counting throughput: `count_text` with o200k, cl100k and the heuristic on ~100 KB of
//! English prose and of mixed text (MB/s), and `count_message` on a typical 200-byte message.
//!
//! Run with `cargo bench -p somna-core --bench tokens`; the texts come from
//! `somna_testkit::corpus`, the corpus the tests pin exact counts for.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use somna_core::message::Message;
use somna_core::tokens::{TokenCounter, Tokenizer};
use somna_testkit::corpus;

const TOKENIZERS: [Tokenizer; 3] = [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Heuristic];

fn count_text(c: &mut Criterion) {
    let texts = [
        ("english_100k", corpus::repeat_to(corpus::ENGLISH, 100_000)),
        ("mixed_100k", corpus::mixed_text(100_000)),
    ];
    let mut group = c.benchmark_group("count_text");
    for (name, text) in &texts {
        group.throughput(Throughput::Bytes(text.len() as u64));
        for tokenizer in TOKENIZERS {
            // Built outside the timed loop: the first use of a BPE builds its tables.
            let counter = TokenCounter::new(tokenizer);
            group.bench_with_input(BenchmarkId::new(tokenizer.name(), name), text, |b, text| {
                b.iter(|| counter.count_text(black_box(text)));
            });
        }
    }
    group.finish();
}

fn count_message(c: &mut Criterion) {
    let message = Message::user(corpus::CHAT_TURN).with_name("Tomas");
    let mut group = c.benchmark_group("count_message");
    group.throughput(Throughput::Bytes(message.content.len() as u64));
    for tokenizer in TOKENIZERS {
        let counter = TokenCounter::new(tokenizer);
        group.bench_with_input(
            BenchmarkId::new(tokenizer.name(), "chat_turn_190b"),
            &message,
            |b, message| b.iter(|| counter.count_message(black_box(message))),
        );
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = count_text, count_message
}
criterion_main!(benches);
