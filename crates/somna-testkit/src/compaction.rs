//! A compaction built by hand, as the engine would write it, for the benchmarks and tests that
//! need a compacted history without running the engine.

use somna_core::{
    CompactionMethod, CompactionRecord, JournalEntry, Message, MessageKind, Role, SummaryMeta,
    Timestamp, Trigger,
};

/// What a plain compaction writes besides the originals it covers: the summary, its synthesis
/// journal entry and the log record.
#[derive(Debug, Clone)]
pub struct PlainCompaction {
    /// The summary message (first generation), at the seq of the first original covered.
    pub summary: Message,
    /// The synthesis entry holding the summary's text, covering the same seqs.
    pub synthesis: JournalEntry,
    /// The log record: a sleep's compaction by the LLM, nothing preserved.
    pub record: CompactionRecord,
}

/// A plain compaction of `covered` (a contiguous run of history, not empty) into one summary of
/// `content` counted as `tokens` tokens, made at `at`.
///
/// # Panics
/// When `covered` is empty.
pub fn plain_compaction(
    covered: &[Message],
    content: String,
    tokens: u32,
    at: Timestamp,
) -> PlainCompaction {
    let (Some(first), Some(last)) = (covered.first(), covered.last()) else {
        panic!("a compaction covers at least one message");
    };
    let (from, through) = (first.seq, last.seq);
    let compacted = u32::try_from(covered.len()).unwrap_or(u32::MAX);
    let summary = Message {
        seq: from,
        tokens,
        kind: MessageKind::Summary(SummaryMeta {
            covers_from_seq: from,
            covers_through_seq: through,
            compacted_count: compacted,
            original_tokens: covered.iter().map(|m| m.tokens).sum(),
            summary_tokens: tokens,
            generation: 1,
            compacted_at: at,
        }),
        ..Message::new(Role::System, content)
    };
    PlainCompaction {
        synthesis: JournalEntry::synthesis(at, summary.content.clone(), from, through),
        record: CompactionRecord::new(
            at,
            Trigger::Sleep,
            CompactionMethod::Llm,
            (from, through),
            compacted,
            1,
        ),
        summary,
    }
}
