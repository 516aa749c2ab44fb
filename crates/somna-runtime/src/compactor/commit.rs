//! Committing a summary: the summary message over the plan's body, the stall guard, the
//! pre-compaction extraction into the journal, and the one-transaction commit with its report.

use somna_core::GroundingCounts;
use somna_core::compaction::{Plan, prompt};
use somna_core::config::Scorer;
use somna_core::message::{Message, MessageKind, Role, SummaryMeta};
use somna_core::record::{CompactionMethod, CompactionRecord, reduction_pct};
use somna_core::tokens::TokenCounter;
use somna_core::usage::Usage;
use somna_core::{JournalEntry, SourceType};
use somna_llm::grounding::{self, Checked};
use somna_llm::prompts::{self, MAX_EXTRACTED_FACTS};
use somna_store::{CommitOutcome, CompactionCommit};
use somna_text::cite;
use somna_text::transcript::Turn;

use super::summarize::{Summary, body_grounder};
use super::{CompactError, CompactRequest, Compactor, STALL_REDUCTION_PCT};
use crate::protocol::CompactionReport;

/// The outcome of trying to commit one summary.
pub(super) enum Committed {
    Done(CompactionReport),
    Stalled(f64),
    Conflict(String),
}

impl Compactor {
    /// Builds and commits the summary message for `plan`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn commit_summary(
        &self,
        req: &CompactRequest<'_>,
        plan: &Plan,
        history: &[Message],
        counter: &TokenCounter,
        summary: Summary,
        method: CompactionMethod,
        fallback_reason: Option<String>,
    ) -> Result<Committed, CompactError> {
        let Summary {
            text,
            grounding: summary_grounding,
        } = summary;
        let body = plan.body(history);
        let (Some(first), Some(last)) = (body.first(), body.last()) else {
            return Ok(Committed::Conflict("empty body".into()));
        };
        let covers_from = first.summary().map_or(first.seq, |s| s.covers_from_seq);
        // A body that ends with a summary (the marker replacing the extractive summary) covers
        // through what that summary covers, not through the summary's own seq.
        let covers_through = last.summary().map_or(last.seq, |s| s.covers_through_seq);
        let mut summary = Message::new(Role::System, prompt::summary_content(&text)).at(req.now);
        summary.seq = first.seq;
        // Counted as the chat prompt shows it: without the items' citations (crate::prompt).
        summary.tokens = counter.count_message(&Message::new(
            Role::System,
            cite::strip_all(&summary.content),
        ));
        summary.kind = MessageKind::Summary(SummaryMeta {
            covers_from_seq: covers_from,
            covers_through_seq: covers_through,
            compacted_count: body.len() as u32,
            original_tokens: plan.body_tokens.min(u64::from(u32::MAX)) as u32,
            summary_tokens: summary.tokens,
            generation: plan.generation,
            compacted_at: req.now,
        });
        let tokens_before = plan.tokens_before;
        let tokens_after =
            tokens_before.saturating_sub(plan.body_tokens) + u64::from(summary.tokens);
        // The stall guard weighs what compaction acts on, the live history: the fixed part of the
        // prompt (the persona, the working context's reserve) would hide a real saving.
        let pct = reduction_pct(
            tokens_before.saturating_sub(req.fixed_tokens),
            tokens_after.saturating_sub(req.fixed_tokens),
        );
        if pct < STALL_REDUCTION_PCT {
            tracing::warn!(agent = %req.agent, reduction = format!("{pct:.1}%"), "compaction stalled: not committed");
            return Ok(Committed::Stalled(pct));
        }

        let mut journal = vec![JournalEntry::synthesis(
            req.now,
            text.clone(),
            covers_from,
            covers_through,
        )];
        let (facts, extraction_grounding) = self.extract(req, plan, history, counter).await;
        journal.extend(
            facts
                .into_iter()
                .take(MAX_EXTRACTED_FACTS)
                .map(|(fact, importance)| {
                    JournalEntry::new(req.now, SourceType::Extraction, importance, fact.text)
                        .with_tags(["extraction"])
                        .covering(covers_from, covers_through)
                        .citing_turns(fact.cites)
                }),
        );
        // What the check did with everything this compaction writes: the summary's items and the
        // extracted facts. An archive marker is written by Somna, not by a model.
        let grounding = (method != CompactionMethod::ArchiveMarker).then(|| {
            let mut all = summary_grounding;
            all.add(extraction_grounding);
            all
        });
        // Usage as the thresholds compare it: calibrated by the factor applied now, kept in the
        // record so that what it shows later does not depend on a factor learned since.
        let factor = self.calibration(req.agent, counter)?;
        let window = req.config.compaction.max_context_tokens;
        let usage_after = Usage::new(tokens_after, 0, factor, window);
        let record = CompactionRecord {
            at: req.now,
            trigger: req.trigger,
            method,
            summary_seq: summary.seq,
            covers: (covers_from, covers_through),
            compacted: body.len() as u32,
            preserved: plan.tail.len() as u32,
            tokens_before,
            tokens_after,
            usage_before: Some(plan.usage),
            usage_after: Some(usage_after.fraction()),
            synthesis_entry: None,
            generation: plan.generation,
            grounding,
        };
        let commit = CompactionCommit {
            covered: body.into(),
            summary,
            journal,
            record: record.clone(),
        };
        match self.store.commit_compaction(req.agent, &commit)? {
            CommitOutcome::Conflict { seq, reason } => {
                Ok(Committed::Conflict(format!("message #{seq}: {reason}")))
            }
            CommitOutcome::Committed { .. } => {
                self.index_in_background(req.agent);
                let count = self
                    .store
                    .agent(req.agent)?
                    .map_or(0, |r| r.compaction_count);
                let warn_after = req.config.compaction.warn_after_compactions;
                // Warn once, at the first compaction past the limit.
                let warning = (warn_after > 0 && count == warn_after + 1).then(|| {
                    format!(
                        "{count} compactions so far (warn_after_compactions = {warn_after}): \
summaries of summaries may lose accuracy"
                    )
                });
                if let Some(w) = &warning {
                    tracing::warn!(agent = %req.agent, "{w}");
                }
                tracing::info!(
                    agent = %req.agent,
                    trigger = %req.trigger,
                    "Context compaction: {} messages → summary, {} → {} tokens ({:.0}% reduction)",
                    record.compacted,
                    tokens_before,
                    tokens_after,
                    pct
                );
                Ok(Committed::Done(CompactionReport {
                    preserved: record.preserved,
                    summary_seq: Some(record.summary_seq),
                    generation: plan.generation,
                    fallback_reason,
                    warning,
                    grounding,
                    ..CompactionReport::new(
                        req.trigger,
                        method,
                        record.compacted,
                        (tokens_before, tokens_after),
                        usage_after.fraction(),
                    )
                }))
            }
        }
    }

    /// Pre-compaction extraction: the body's notable facts, each checked against the turns it
    /// cites before it is kept in the journal ([`grounding`]), with what the check did.
    async fn extract(
        &self,
        req: &CompactRequest<'_>,
        plan: &Plan,
        history: &[Message],
        counter: &TokenCounter,
    ) -> (Vec<(Checked, u8)>, GroundingCounts) {
        let view = plan.summarizer_view(history, counter);
        let turns: Vec<Turn> = view.iter().map(|m| Turn::from(m.as_ref())).collect();
        let heuristic = || somna_text::extract_facts(&turns);
        let facts = if req.config.compaction.extraction != Scorer::Llm {
            heuristic()
        } else {
            let request = prompts::extract_request(&req.config.model, &view);
            match self.llm.chat(request).await {
                Ok(r) => {
                    let facts: Vec<(String, u8)> = prompts::parse_extraction(&r.text)
                        .into_iter()
                        .map(|fact| {
                            let importance = somna_text::score_importance(&cite::strip(&fact));
                            (fact, importance)
                        })
                        .collect();
                    if facts.is_empty() { heuristic() } else { facts }
                }
                Err(e) => {
                    tracing::warn!(agent = %req.agent, error = %e, "LLM extraction failed; using the heuristic");
                    heuristic()
                }
            }
        };
        let grounder = body_grounder(plan, history, req.config);
        let mut counts = GroundingCounts::default();
        let mut kept = Vec::new();
        for (fact, importance) in facts {
            let (checked, one, _) = grounding::ground_facts([fact.as_str()], &grounder);
            counts.add(one);
            kept.extend(checked.into_iter().map(|c| (c, importance)));
        }
        (kept, counts)
    }
}
