//! The compaction engine: plan → extract → summarize → validate → commit, with the emergency
//! fallbacks, the stall guard and undo. A plain component: tests drive it without actors.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use somna_core::compaction::{
    MaskPolicy, Plan, PlanOutcome, PlanRequest, SkipReason, plan, plan_masking, prompt,
};
use somna_core::config::{AgentConfig, CompactionConfig, Scorer};
use somna_core::message::{Message, MessageKind, Role, SummaryMeta};
use somna_core::record::{CompactionMethod, CompactionRecord, EventRecord, Trigger, reduction_pct};
use somna_core::tokens::TokenCounter;
use somna_core::usage::{Usage, calibration_factor};
use somna_core::{AgentId, JournalEntry, SourceType, Timestamp};
use somna_llm::prompts::{self, MAX_EXTRACTED_FACTS};
use somna_llm::transcript::Turn;
use somna_llm::{LlmClient, LlmError, builtin};
use somna_store::{CommitOutcome, CompactionCommit, Store, StoreError, UncompactOutcome};

/// A compaction that saves less than this share of the prompt is a stall: it is not committed.
pub const STALL_REDUCTION_PCT: f64 = 5.0;
/// Most summaries merged in one request when a chunked body is merged.
const MERGE_FAN_IN: usize = 8;
/// Most rounds of merging (a bound, not a loop condition that can run forever).
const MAX_MERGE_ROUNDS: usize = 4;
/// Summaries may overshoot `summary_max_tokens` by this factor (tokenizers disagree slightly).
const SUMMARY_CAP_SLACK: f64 = 1.10;

/// What the engine needs to compact one agent.
#[derive(Debug, Clone, Copy)]
pub struct CompactRequest<'a> {
    pub agent: &'a AgentId,
    pub config: &'a AgentConfig,
    pub trigger: Trigger,
    /// Tokens of the prompt outside history: persona and working context.
    pub fixed_tokens: u64,
    pub now: Timestamp,
}

/// The result of one compaction attempt. Expected outcomes are values, not errors.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// Nothing to do.
    Skipped { reason: SkipReason, usage: f64 },
    /// A summary (or fallback) was committed.
    Done(CompactionReport),
    /// The attempt failed and changed nothing; a later trigger retries.
    Failed { reason: String, usage: f64 },
    /// The summary would save under 5%: not committed, no retry loop.
    Stalled { reduction_pct: f64, usage: f64 },
    /// Another compaction of this agent is in flight.
    Busy,
}

/// What a committed compaction did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionReport {
    pub trigger: Trigger,
    pub method: CompactionMethod,
    /// History messages replaced by the summary (or masked).
    pub compacted: u32,
    /// Messages kept verbatim after the summary.
    pub preserved: u32,
    /// Prompt tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub reduction_pct: f64,
    /// Usage after, 0–1.
    pub usage_after: f64,
    /// Seq of the summary message (None for masking only).
    pub summary_seq: Option<u64>,
    pub generation: u32,
    /// Set when the LLM failed and a fallback did the work.
    pub fallback_reason: Option<String>,
    /// Set past `warn_after_compactions`.
    pub warning: Option<String>,
}

impl CompactionOutcome {
    /// The report of a committed compaction.
    pub fn report(&self) -> Option<&CompactionReport> {
        match self {
            CompactionOutcome::Done(r) => Some(r),
            _ => None,
        }
    }
}

/// Errors the engine cannot turn into an outcome: the store failed.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The compaction engine. Cheap to clone; one compaction per agent at a time.
#[derive(Debug, Clone)]
pub struct Compactor {
    store: Store,
    llm: Arc<dyn LlmClient>,
    /// Agents with a compaction in flight.
    in_flight: Arc<Mutex<HashSet<AgentId>>>,
}

/// Releases an agent's in-flight mark when dropped.
struct FlightGuard {
    set: Arc<Mutex<HashSet<AgentId>>>,
    agent: AgentId,
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.agent);
        }
    }
}

/// Why an LLM summary could not be used.
#[derive(Debug)]
enum SummaryFailure {
    Llm(LlmError),
    Invalid(String),
}

impl std::fmt::Display for SummaryFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SummaryFailure::Llm(e) => write!(f, "the summarizer failed: {e}"),
            SummaryFailure::Invalid(why) => write!(f, "the summary was rejected: {why}"),
        }
    }
}

impl Compactor {
    /// An engine over `store` that summarizes with `llm`.
    pub fn new(store: Store, llm: Arc<dyn LlmClient>) -> Self {
        Compactor {
            store,
            llm,
            in_flight: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The store it commits to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// True while a compaction of `agent` is in flight.
    pub fn is_compacting(&self, agent: &AgentId) -> bool {
        self.in_flight
            .lock()
            .map(|s| s.contains(agent))
            .unwrap_or(false)
    }

    fn begin(&self, agent: &AgentId) -> Option<FlightGuard> {
        let mut set = self.in_flight.lock().ok()?;
        if !set.insert(agent.clone()) {
            return None;
        }
        Some(FlightGuard {
            set: Arc::clone(&self.in_flight),
            agent: agent.clone(),
        })
    }

    /// Runs one compaction of `req.agent` for `req.trigger`.
    pub async fn compact(
        &self,
        req: CompactRequest<'_>,
    ) -> Result<CompactionOutcome, CompactError> {
        let Some(_guard) = self.begin(req.agent) else {
            return Ok(CompactionOutcome::Busy);
        };
        let counter = TokenCounter::for_model(&req.config.model);
        let calibration = self.calibration(req.agent, &counter)?;
        let history = self.store.history(req.agent)?;
        let cfg = &req.config.compaction;
        let outcome = plan(
            &PlanRequest {
                history: &history,
                fixed_tokens: req.fixed_tokens,
                trigger: req.trigger,
                calibration,
            },
            cfg,
            &counter,
        );
        let plan = match outcome {
            PlanOutcome::Skip(s) => {
                tracing::debug!(agent = %req.agent, trigger = %req.trigger, reason = %s.reason, "compaction skipped");
                return Ok(CompactionOutcome::Skipped {
                    reason: s.reason,
                    usage: s.usage,
                });
            }
            PlanOutcome::Plan(p) => p,
        };
        tracing::info!(
            agent = %req.agent,
            trigger = %req.trigger,
            usage = format!("{:.0}%", plan.usage * 100.0),
            body = plan.body.len(),
            "compaction started"
        );

        let summary = self.summarize(&plan, &history, req.config, &counter).await;
        let failure = match summary {
            Ok(text) => {
                match self
                    .commit_summary(
                        &req,
                        &plan,
                        &history,
                        &counter,
                        text,
                        CompactionMethod::Llm,
                        None,
                    )
                    .await?
                {
                    Committed::Done(report) => return Ok(CompactionOutcome::Done(report)),
                    Committed::Stalled(pct) if req.trigger != Trigger::Emergency => {
                        self.log_failure(
                            &req,
                            format!("stalled: the summary saves only {pct:.1}%"),
                        )?;
                        return Ok(CompactionOutcome::Stalled {
                            reduction_pct: pct,
                            usage: plan.usage,
                        });
                    }
                    Committed::Stalled(pct) => format!("the summary saves only {pct:.1}%"),
                    Committed::Conflict(why) => {
                        self.log_failure(&req, format!("conflict: {why}"))?;
                        return Ok(CompactionOutcome::Failed {
                            reason: format!("conflict: {why}"),
                            usage: plan.usage,
                        });
                    }
                }
            }
            Err(failure) => failure.to_string(),
        };

        if req.trigger != Trigger::Emergency {
            tracing::warn!(agent = %req.agent, trigger = %req.trigger, reason = %failure, "compaction failed; history unchanged");
            self.log_failure(&req, failure.clone())?;
            return Ok(CompactionOutcome::Failed {
                reason: failure,
                usage: plan.usage,
            });
        }
        tracing::warn!(agent = %req.agent, reason = %failure, "emergency compaction falls back to deterministic reduction");
        self.emergency_fallback(&req, &counter, calibration, plan.tokens_before, failure)
            .await
    }

    /// Puts the archived originals back in place of the summary at `summary_seq`, atomically.
    pub fn uncompact(
        &self,
        agent: &AgentId,
        summary_seq: u64,
        now: Timestamp,
    ) -> Result<UncompactOutcome, CompactError> {
        let _guard = self.begin(agent);
        Ok(self.store.uncompact(agent, summary_seq, now)?)
    }

    /// The agent's calibration factor for [`Usage`], from its stored record.
    fn calibration(&self, agent: &AgentId, counter: &TokenCounter) -> Result<f64, CompactError> {
        if counter.is_exact() {
            return Ok(1.0);
        }
        Ok(self
            .store
            .agent(agent)?
            .map_or(1.0, |r| calibration_factor(counter, &r.calibration)))
    }

    fn log_failure(&self, req: &CompactRequest<'_>, reason: String) -> Result<(), CompactError> {
        self.store.log_event(
            req.agent,
            EventRecord::CompactionFailed {
                at: req.now,
                trigger: req.trigger,
                reason,
            },
        )?;
        Ok(())
    }

    /// Summarizes the plan's body with the LLM: one request per chunk, then merges.
    async fn summarize(
        &self,
        plan: &Plan,
        history: &[Message],
        config: &AgentConfig,
        counter: &TokenCounter,
    ) -> Result<String, SummaryFailure> {
        let cfg = &config.compaction;
        let model = if cfg.compact_model.is_empty() {
            config.model.clone()
        } else {
            cfg.compact_model.clone()
        };
        let mut parts = Vec::new();
        // The server's own count of the last answer's tokens, when it reports one.
        let mut server_tokens = None;
        for chunk in plan.summarizer_chunks(history, counter) {
            let (text, completion) = self
                .ask(prompts::summary_request(&model, cfg, &chunk))
                .await?;
            server_tokens = completion;
            parts.push(text);
        }
        let mut rounds = 0;
        while parts.len() > 1 {
            if rounds == MAX_MERGE_ROUNDS {
                return Err(SummaryFailure::Invalid(format!(
                    "still {} partial summaries after {MAX_MERGE_ROUNDS} merge rounds",
                    parts.len()
                )));
            }
            rounds += 1;
            let mut merged = Vec::new();
            for group in parts.chunks(MERGE_FAN_IN) {
                if group.len() == 1 {
                    merged.push(group[0].clone());
                    continue;
                }
                let (text, completion) =
                    self.ask(prompts::merge_request(&model, cfg, group)).await?;
                server_tokens = completion;
                merged.push(text);
            }
            parts = merged;
        }
        let text = parts.pop().unwrap_or_default();
        validate_summary(&text, plan, cfg, counter, server_tokens)?;
        Ok(text)
    }

    /// Sends one summary or merge request: the answer's text (a JSON answer rendered to sections)
    /// and the server's count of it.
    async fn ask(
        &self,
        request: somna_llm::ChatRequest,
    ) -> Result<(String, Option<u32>), SummaryFailure> {
        let response = self.llm.chat(request).await.map_err(SummaryFailure::Llm)?;
        let completion = response.usage.map(|u| u.completion_tokens);
        Ok((prompts::read_summary(&response.text), completion))
    }

    /// Builds and commits the summary message for `plan`.
    #[allow(clippy::too_many_arguments)]
    async fn commit_summary(
        &self,
        req: &CompactRequest<'_>,
        plan: &Plan,
        history: &[Message],
        counter: &TokenCounter,
        text: String,
        method: CompactionMethod,
        fallback_reason: Option<String>,
    ) -> Result<Committed, CompactError> {
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
        summary.tokens = counter.count_message(&summary);
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
        let pct = reduction_pct(tokens_before, tokens_after);
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
        journal.extend(
            self.extract(req, plan, history, counter)
                .await
                .into_iter()
                .take(MAX_EXTRACTED_FACTS)
                .map(|(fact, importance)| {
                    JournalEntry::new(req.now, SourceType::Extraction, importance, fact)
                        .with_tags(["extraction"])
                        .covering(covers_from, covers_through)
                }),
        );
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
            synthesis_entry: None,
            generation: plan.generation,
        };
        let commit = CompactionCommit {
            covered: body.to_vec(),
            summary,
            journal,
            record: record.clone(),
        };
        match self.store.commit_compaction(req.agent, &commit)? {
            CommitOutcome::Conflict { seq, reason } => {
                Ok(Committed::Conflict(format!("message #{seq}: {reason}")))
            }
            CommitOutcome::Committed { .. } => {
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
                let factor = self.calibration(req.agent, counter)?;
                let usage_after = Usage::new(
                    tokens_after,
                    0,
                    factor,
                    req.config.compaction.max_context_tokens,
                );
                Ok(Committed::Done(CompactionReport {
                    trigger: req.trigger,
                    method,
                    compacted: record.compacted,
                    preserved: record.preserved,
                    tokens_before,
                    tokens_after,
                    reduction_pct: pct,
                    usage_after: usage_after.fraction(),
                    summary_seq: Some(record.summary_seq),
                    generation: plan.generation,
                    fallback_reason,
                    warning,
                }))
            }
        }
    }

    /// Pre-compaction extraction: the body's notable facts, kept in the journal.
    async fn extract(
        &self,
        req: &CompactRequest<'_>,
        plan: &Plan,
        history: &[Message],
        counter: &TokenCounter,
    ) -> Vec<(String, u8)> {
        let view = plan.summarizer_view(history, counter);
        let turns: Vec<Turn> = view.iter().map(Turn::from).collect();
        let heuristic = || builtin::extract_facts(&turns);
        if req.config.compaction.extraction != Scorer::Llm {
            return heuristic();
        }
        let request = prompts::extract_request(&req.config.model, &view);
        match self.llm.chat(request).await {
            Ok(r) => {
                let facts: Vec<(String, u8)> = prompts::parse_extraction(&r.text)
                    .into_iter()
                    .map(|fact| {
                        let importance = builtin::score_importance(&fact);
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
    }

    /// Emergency fallback: masking, then the builtin extractive summary, then archiving the oldest
    /// turns behind a marker, each step only if usage is still at or above the emergency threshold.
    async fn emergency_fallback(
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
        let fits = |usage: Usage| usage.fraction() < cfg.emergency_threshold;
        let mut last_report: Option<CompactionReport> = None;
        let mut steps = Vec::new();

        // Step 1: mask every old tool output outside the preserve window.
        let history = self.store.history(req.agent)?;
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
                let usage = usage_of(&self.store)?;
                let tokens_after = usage.tokens;
                tracing::info!(agent = %req.agent, masked, "emergency: masked old tool outputs");
                steps.push(CompactionMethod::MaskOnly);
                last_report = Some(CompactionReport {
                    trigger: req.trigger,
                    method: CompactionMethod::MaskOnly,
                    compacted: masked,
                    preserved: 0,
                    tokens_before,
                    tokens_after,
                    reduction_pct: reduction_pct(tokens_before, tokens_after),
                    usage_after: usage.fraction(),
                    summary_seq: None,
                    generation: 0,
                    fallback_reason: Some(reason.clone()),
                    warning: None,
                });
                if fits(usage) {
                    let report = finish(last_report, tokens_before);
                    self.log_fallback(req, &reason, steps, &report, None)?;
                    return Ok(CompactionOutcome::Done(report));
                }
            }
        }

        // Step 2: the builtin extractive summary; step 3: a bare marker. Any body size will do here.
        let mut fallback_cfg = cfg.clone();
        fallback_cfg.min_compact_batch = 1;
        for method in [
            CompactionMethod::Extractive,
            CompactionMethod::ArchiveMarker,
        ] {
            let history = self.store.history(req.agent)?;
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
            let text = match method {
                CompactionMethod::Extractive => {
                    let view = plan.summarizer_view(&history, counter);
                    let turns: Vec<Turn> = view.iter().map(Turn::from).collect();
                    builtin::extractive::summarize(
                        &turns,
                        &cfg.sections,
                        cfg.summary_max_tokens,
                        &|s: &str| counter.count_text(s),
                    )
                    .render()
                }
                _ => archive_marker_text(body),
            };
            match self
                .commit_summary(
                    req,
                    &plan,
                    &history,
                    counter,
                    text,
                    method,
                    Some(reason.clone()),
                )
                .await?
            {
                Committed::Done(report) => {
                    let usage = usage_of(&self.store)?;
                    last_report = Some(report);
                    steps.push(method);
                    if fits(usage) {
                        let report = finish(last_report, tokens_before);
                        self.log_fallback(req, &reason, steps, &report, None)?;
                        return Ok(CompactionOutcome::Done(report));
                    }
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
                let report = finish(Some(report), tokens_before);
                self.log_fallback(req, &reason, steps, &report, Some(stuck))?;
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
        let history = self.store.history(agent)?;
        let measured = Usage::new(
            fixed_tokens,
            history.iter().map(|m| u64::from(m.tokens)).sum::<u64>(),
            calibration,
            cfg.max_context_tokens,
        );
        let (tokens, max, usage) = (measured.calibrated, measured.max, measured.fraction());
        if usage < cfg.emergency_threshold {
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

/// The outcome of trying to commit one summary.
enum Committed {
    Done(CompactionReport),
    Stalled(f64),
    Conflict(String),
}

/// The last report of a fallback sequence, with the totals measured from the very start.
fn finish(report: Option<CompactionReport>, tokens_before: u64) -> CompactionReport {
    let mut r = report.unwrap_or(CompactionReport {
        trigger: Trigger::Emergency,
        method: CompactionMethod::MaskOnly,
        compacted: 0,
        preserved: 0,
        tokens_before,
        tokens_after: tokens_before,
        reduction_pct: 0.0,
        usage_after: 0.0,
        summary_seq: None,
        generation: 0,
        fallback_reason: None,
        warning: None,
    });
    r.tokens_before = tokens_before;
    r.reduction_pct = reduction_pct(tokens_before, r.tokens_after);
    r
}

/// Rejects a summary that is empty, not shaped like a summary, larger than what it replaces, or
/// over its cap. The cap is checked with the server's count of the answer when it reported one
/// (it enforced `max_tokens` with its own tokenizer), else with ours.
fn validate_summary(
    text: &str,
    plan: &Plan,
    cfg: &CompactionConfig,
    counter: &TokenCounter,
    server_tokens: Option<u32>,
) -> Result<(), SummaryFailure> {
    if text.trim().is_empty() {
        return Err(SummaryFailure::Invalid("empty".into()));
    }
    let tokens = u64::from(counter.count_text(text));
    if tokens >= plan.body_tokens {
        return Err(SummaryFailure::Invalid(format!(
            "{tokens} tokens, not smaller than the {} tokens it replaces",
            plan.body_tokens
        )));
    }
    if let Some(why) = prompts::summary_shape_problem(text, cfg) {
        return Err(SummaryFailure::Invalid(why));
    }
    let cap = (f64::from(cfg.summary_max_tokens) * SUMMARY_CAP_SLACK) as u64;
    let measured = server_tokens.filter(|t| *t > 0).map_or(tokens, u64::from);
    if measured > cap {
        return Err(SummaryFailure::Invalid(format!(
            "{measured} tokens, over summary_max_tokens ({})",
            cfg.summary_max_tokens
        )));
    }
    Ok(())
}
