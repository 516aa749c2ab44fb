//! The compaction engine: plan → extract → summarize → validate → commit, with the emergency
//! fallbacks, the stall guard and undo. A plain component: tests drive it without actors.
//!
//! - this file: [`Compactor`] (one compaction per agent at a time), [`Compactor::compact`] (the
//!   plan, then what follows from the summary), [`Compactor::uncompact`].
//! - `request.rs`: what goes in ([`CompactRequest`]) and the engine's one error
//!   ([`CompactError`]); what comes out ([`CompactionOutcome`], [`CompactionReport`]) is in
//!   [`crate::protocol`].
//! - `summarize.rs`: the LLM summary of a plan's body, in chunks and merges, and its validation.
//! - `commit.rs`: the summary message, the stall guard, the pre-compaction extraction and the
//!   one-transaction commit.
//! - `emergency.rs`: the emergency fallbacks (masking, the extractive summary, an archive marker)
//!   and why a prompt is still over the threshold ([`Compactor::over_threshold`]).

mod commit;
mod emergency;
mod request;
mod summarize;

pub use request::{CompactError, CompactRequest};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use somna_core::compaction::{PlanOutcome, PlanRequest, plan};
use somna_core::record::{CompactionMethod, EventRecord, Trigger};
use somna_core::tokens::TokenCounter;
use somna_core::usage::calibration_factor;
use somna_core::{AgentId, Timestamp};
use somna_llm::LlmClient;
use somna_store::{Store, UncompactOutcome};

use commit::Committed;

use crate::protocol::CompactionOutcome;

/// A compaction that saves less than this share of the live history's tokens is a stall: it is not
/// committed.
pub const STALL_REDUCTION_PCT: f64 = 5.0;

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
        let history = self.store.live_history_to_compact(req.agent)?;
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
                let stuck = if req.trigger == Trigger::Emergency {
                    self.over_threshold(req.agent, req.config, req.fixed_tokens)?
                } else {
                    None
                };
                return Ok(CompactionOutcome::Skipped {
                    reason: s.reason,
                    usage: s.usage,
                    stuck,
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
            Ok(summary) => {
                match self
                    .commit_summary(
                        &req,
                        &plan,
                        &history,
                        &counter,
                        summary,
                        CompactionMethod::Llm,
                        None,
                    )
                    .await?
                {
                    Committed::Done(mut report) => {
                        if req.trigger == Trigger::Emergency {
                            report.stuck =
                                self.over_threshold(req.agent, req.config, req.fixed_tokens)?;
                        }
                        return Ok(CompactionOutcome::Done(report));
                    }
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

    /// Indexes what a commit archived for search, off the compaction's path: on a blocking thread
    /// of the tokio runtime when there is one (the agent is free again meanwhile; a search that
    /// comes first catches up itself, under the same lock), else at once. A failure is logged:
    /// the commit stands and the next search catches up.
    pub(super) fn index_in_background(&self, agent: &AgentId) {
        let store = self.store.clone();
        let agent = agent.clone();
        let work = move || {
            if let Err(e) = store.index_archive(&agent) {
                tracing::warn!(agent = %agent, error = %e, "could not index the archive; the next search will");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(work)),
            Err(_) => work(),
        }
    }

    /// The agent's calibration factor for [`Usage`], from its stored record.
    pub(super) fn calibration(
        &self,
        agent: &AgentId,
        counter: &TokenCounter,
    ) -> Result<f64, CompactError> {
        if counter.is_exact() {
            return Ok(1.0);
        }
        Ok(self
            .store
            .agent(agent)?
            .map_or(1.0, |r| calibration_factor(counter, &r.calibration)))
    }

    pub(super) fn log_failure(
        &self,
        req: &CompactRequest<'_>,
        reason: String,
    ) -> Result<(), CompactError> {
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
}
