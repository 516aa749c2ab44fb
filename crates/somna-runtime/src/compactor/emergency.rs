//! The emergency fallbacks, used when an emergency compaction's LLM summary fails or stalls:
//! masking old tool outputs, then the builtin extractive summary, then an archive marker, each
//! only while usage is still at or above the threshold (a bounded ladder); the `events` tree
//! records why and where it ended. [`Compactor::over_threshold`] says why a prompt is still over.

use somna_core::compaction::{MaskPolicy, PlanRequest, plan, plan_masking};
use somna_core::config::AgentConfig;
use somna_core::message::{Message, MessageKind};
use somna_core::record::{CompactionMethod, EventRecord, Trigger};
use somna_core::tokens::TokenCounter;
use somna_core::usage::Usage;
use somna_core::{AgentId, GroundingCounts};
use somna_store::{CommitOutcome, Store};
use somna_text::transcript::Turn;

use super::commit::Committed;
use super::summarize::Summary;
use super::{CompactError, CompactRequest, Compactor};
use crate::protocol::{CompactionOutcome, CompactionReport};

impl Compactor {
    /// Emergency fallback: masking, then the builtin extractive summary, then archiving the oldest
    /// turns behind a marker, each step only if usage is still at or above the emergency threshold.
    pub(super) async fn emergency_fallback(
        &self,
        req: &CompactRequest<'_>,
        counter: &TokenCounter,
        calibration: f64,
        tokens_before: u64,
        reason: String,
    ) -> Result<CompactionOutcome, CompactError> {
        let cfg = &req.config.compaction;
        let usage_of = |store: &Store| -> Result<Usage, CompactError> {
            Ok(Usage::new(
                req.fixed_tokens,
                store.usage_tokens(req.agent)?,
                calibration,
                cfg.max_context_tokens,
            ))
        };
        let fits = |usage: Usage| !usage.is_emergency(cfg);
        let mut last_report: Option<CompactionReport> = None;
        let mut steps = Vec::new();

        // Step 1: mask every old tool output outside the preserve window.
        let history = self.store.live_history(req.agent)?;
        let protect = MaskPolicy {
            keep_recent: cfg.preserve_messages as usize,
            exempt_tools: cfg.mask_exempt_tools.clone(),
        };
        let masks = plan_masking(&history, history.len(), &protect, counter);
        if !masks.is_empty() {
            let masked = masks.len() as u32;
            if let CommitOutcome::Committed { .. } =
                self.store.commit_masking(req.agent, masks, req.now)?
            {
                self.index_in_background(req.agent);
                let usage = usage_of(&self.store)?;
                let tokens_after = usage.tokens;
                tracing::info!(agent = %req.agent, masked, "emergency: masked old tool outputs");
                steps.push(CompactionMethod::MaskOnly);
                let report = CompactionReport {
                    fallback_reason: Some(reason.clone()),
                    ..CompactionReport::new(
                        req.trigger,
                        CompactionMethod::MaskOnly,
                        masked,
                        (tokens_before, tokens_after),
                        usage.fraction(),
                    )
                };
                if fits(usage) {
                    let report = report.measured_from(tokens_before);
                    self.log_fallback(req, &reason, steps, &report, None)?;
                    return Ok(CompactionOutcome::Done(report));
                }
                last_report = Some(report);
            }
        }

        // Step 2: the builtin extractive summary; step 3: a bare marker. Any body size will do here.
        let mut fallback_cfg = cfg.clone();
        fallback_cfg.min_compact_batch = 1;
        for method in [
            CompactionMethod::Extractive,
            CompactionMethod::ArchiveMarker,
        ] {
            let history = self.store.live_history_to_compact(req.agent)?;
            let planned = plan(
                &PlanRequest {
                    history: &history,
                    fixed_tokens: req.fixed_tokens,
                    trigger: Trigger::Emergency,
                    calibration,
                },
                &fallback_cfg,
                counter,
            );
            let Some(plan) = planned.into_plan() else {
                break;
            };
            let body = plan.body(&history);
            let summary = match method {
                CompactionMethod::Extractive => {
                    let view = plan.summarizer_view(&history, counter);
                    let turns: Vec<Turn> = view.iter().map(|m| Turn::from(m.as_ref())).collect();
                    let text = somna_text::extractive::summarize(
                        &turns,
                        &cfg.section_caps(),
                        cfg.summary_cap(),
                        &|s: &str| counter.count_text(s),
                    )
                    .render();
                    // Its items quote their turns; checked all the same, and counted.
                    let grounded = self.ground(&text, &plan, &history, req.config);
                    Summary {
                        text: grounded.text,
                        grounding: grounded.counts,
                    }
                }
                _ => Summary {
                    text: archive_marker_text(body),
                    grounding: GroundingCounts::default(),
                },
            };
            match self
                .commit_summary(
                    req,
                    &plan,
                    &history,
                    counter,
                    summary,
                    method,
                    Some(reason.clone()),
                )
                .await?
            {
                Committed::Done(report) => {
                    let usage = usage_of(&self.store)?;
                    steps.push(method);
                    if fits(usage) {
                        let report = report.measured_from(tokens_before);
                        self.log_fallback(req, &reason, steps, &report, None)?;
                        return Ok(CompactionOutcome::Done(report));
                    }
                    last_report = Some(report);
                }
                Committed::Stalled(pct) => {
                    tracing::debug!(agent = %req.agent, ?method, reduction = format!("{pct:.1}%"), "emergency step stalled");
                }
                Committed::Conflict(why) => {
                    tracing::debug!(agent = %req.agent, ?method, %why, "emergency step conflicted");
                }
            }
        }
        let usage = usage_of(&self.store)?.fraction();
        let stuck = self
            .over_threshold(req.agent, req.config, req.fixed_tokens)?
            .unwrap_or_else(|| format!("usage is {:.0}%", usage * 100.0));
        match last_report {
            Some(report) => {
                tracing::warn!(agent = %req.agent, %stuck, "emergency fallback could not reach the threshold");
                let mut report = report.measured_from(tokens_before);
                self.log_fallback(req, &reason, steps, &report, Some(stuck.clone()))?;
                report.stuck = Some(stuck);
                Ok(CompactionOutcome::Done(report))
            }
            None => {
                let why = format!("{reason}; no deterministic reduction was possible: {stuck}");
                self.log_failure(req, why.clone())?;
                Ok(CompactionOutcome::Failed { reason: why, usage })
            }
        }
    }

    /// Logs why an emergency fell back and where it ended, in the agent's durable event log.
    fn log_fallback(
        &self,
        req: &CompactRequest<'_>,
        reason: &str,
        steps: Vec<CompactionMethod>,
        report: &CompactionReport,
        stuck: Option<String>,
    ) -> Result<(), CompactError> {
        self.store.log_event(
            req.agent,
            EventRecord::EmergencyFallback {
                at: req.now,
                reason: reason.to_string(),
                steps,
                tokens_before: report.tokens_before,
                tokens_after: report.tokens_after,
                stuck,
            },
        )?;
        Ok(())
    }

    /// Why `agent`'s prompt is still at or above its emergency threshold, in numbers: what takes
    /// the room that no emergency compaction can free (the persona and working context, the
    /// summaries, and the recent messages it keeps verbatim). `None` when usage is below it.
    /// `fixed_tokens` are the prompt's tokens outside history, as in [`CompactRequest`].
    pub fn over_threshold(
        &self,
        agent: &AgentId,
        config: &AgentConfig,
        fixed_tokens: u64,
    ) -> Result<Option<String>, CompactError> {
        let cfg = &config.compaction;
        let counter = TokenCounter::for_model(&config.model);
        let calibration = self.calibration(agent, &counter)?;
        let history = self.store.live_history(agent)?;
        let measured = Usage::new(
            fixed_tokens,
            history.iter().map(|m| u64::from(m.tokens)).sum::<u64>(),
            calibration,
            cfg.max_context_tokens,
        );
        let (tokens, max, usage) = (measured.calibrated, measured.max, measured.fraction());
        if !measured.is_emergency(cfg) {
            return Ok(None);
        }
        let (summaries, kept): (Vec<&Message>, Vec<&Message>) = history
            .iter()
            .partition(|m| matches!(m.kind, MessageKind::Summary(_)));
        let summary_tokens: u64 = summaries.iter().map(|m| u64::from(m.tokens)).sum();
        let kept_tokens: u64 = kept.iter().map(|m| u64::from(m.tokens)).sum();
        let largest = kept
            .iter()
            .max_by_key(|m| m.tokens)
            .map(|m| format!(", the largest #{} with {} tokens", m.seq, m.tokens))
            .unwrap_or_default();
        let calibrated = if (calibration - 1.0).abs() > f64::EPSILON {
            format!(" (counts calibrated ×{calibration:.2})")
        } else {
            String::new()
        };
        Ok(Some(format!(
            "the prompt is still {tokens} tokens, {:.0}% of max_context_tokens {max} (emergency_threshold {:.0}%){calibrated}: the persona and working context take {fixed_tokens} tokens, {} summary or marker message(s) {summary_tokens}, and the {} messages kept verbatim {kept_tokens}{largest}; the threshold is {} tokens and an emergency never archives the messages it keeps (the preserve window, at most preserve_ratio {} of the window), so nothing more can be freed until the history changes",
            usage * 100.0,
            cfg.emergency_threshold * 100.0,
            summaries.len(),
            kept.len(),
            (cfg.emergency_threshold * max as f64).ceil() as u64,
            cfg.preserve_ratio,
        )))
    }
}

/// The text of an archive marker over `body`: what it stands for, where the originals are.
fn archive_marker_text(body: &[Message]) -> String {
    let from = body
        .first()
        .map_or(0, |m| m.summary().map_or(m.seq, |s| s.covers_from_seq));
    let through = body
        .last()
        .map_or(0, |m| m.summary().map_or(m.seq, |s| s.covers_through_seq));
    format!(
        "Earlier messages #{from}–#{through} were archived without a summary to keep the context \
within its window. They are kept in the archive: use `recall` to search them."
    )
}
