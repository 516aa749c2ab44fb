//! The job runner: [`Job`]s are the work that waits on the LLM (the step, compactions, sleep),
//! run as spawned futures with their own copies of what they need (`JobContext`), reporting
//! back a [`JobOutcome`]. Sleep's steps are in `sleep.rs`.

use std::sync::Arc;

use somna_core::compaction::{PlanOutcome, PlanRequest, plan};
use somna_core::config::AgentConfig;
use somna_core::message::{Message, Role};
use somna_core::record::Trigger;
use somna_core::tokens::{Calibration, Observation, TokenCounter};
use somna_core::usage::{Usage, calibration_factor};
use somna_core::{AgentId, GroundingCounts, JournalEntry, SourceType, Timestamp, ToolCall};
use somna_llm::grounding::{self, Grounder};
use somna_llm::prompts;
use somna_llm::{ChatRequest, LlmError, Purpose};
use somna_store::StoreError;
use somna_text::transcript::Turn;

use super::{AgentDeps, MAX_TOOL_ROUNDS};
use crate::compactor::{CompactError, CompactRequest};
use crate::prompt;
use crate::protocol::{ChatUsage, CompactionOutcome, Event, SleepResult};
use crate::tools;

/// Work that waits on the LLM; runs as a spawned future.
#[derive(Debug)]
pub struct Job {
    pub kind: JobKind,
    pub(super) ctx: JobContext,
}

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// The tick's emergency compaction, then the step if a reply is owed.
    Emergency { then_step: bool },
    /// Score observations, then reply if a reply is owed.
    Step,
    /// Consolidation, reflection, then compaction at the sleep threshold. `tired`: brought
    /// forward by the scheduler because a turn left the agent near its emergency threshold; it
    /// consolidates only a full batch of journal entries (the scheduled sleep does the rest).
    Sleep { tired: bool },
    /// A compaction asked for through the API (`force` = manual, ignoring thresholds).
    Compact { force: bool },
}

/// A job's own copies of what it needs, so it runs without borrowing the agent.
#[derive(Debug, Clone)]
pub(super) struct JobContext {
    pub(super) id: AgentId,
    pub(super) config: Arc<AgentConfig>,
    pub(super) counter: TokenCounter,
    pub(super) deps: AgentDeps,
    pub(super) calibration: Calibration,
    pub(super) importance_since_reflection: u64,
    pub(super) observations: Vec<String>,
    pub(super) needs_reply: bool,
    /// Prompt tokens outside history (persona + working context), as the usage check counts them.
    pub(super) fixed_tokens: u64,
}

/// Why a job failed. Reported as text (its `Display`) in the outcome's `error`, which becomes an
/// `Event::Error` and, for a sleep, the `SleepResult`.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chat call of a step failed. The cause is in the message and is not also a `source`
    /// (`{e:#}` would print it twice).
    #[error("LLM: {0}")]
    Llm(LlmError),
    /// The compaction engine failed (not a failed compaction, which is an outcome).
    #[error(transparent)]
    Compact(#[from] CompactError),
    /// A compaction ran and failed; the reason is the outcome's.
    #[error("{0}")]
    CompactionFailed(String),
    /// The model answered with neither text nor tool calls.
    #[error("LLM: the reply was empty")]
    EmptyReply,
    /// The model's tool-call arguments are larger than the reply cap.
    #[error(
        "LLM: the tool calls' arguments take {tokens} tokens, over the reply cap of {cap} \
         (max_tokens)"
    )]
    ArgumentsTooLarge { tokens: u64, cap: u32 },
    /// The consolidation's LLM call failed; the entries are left for the next sleep.
    #[error("LLM: {0}; the entries stay for the next sleep")]
    ConsolidationLlm(LlmError),
    /// The consolidation's reply could not be read; the entries are left for the next sleep.
    #[error(
        "the reply has no `- fact` lines and is not {no_facts}; {entries} entries stay for the \
         next sleep (reply: {reply:?})",
        no_facts = super::NO_FACTS
    )]
    UnreadableConsolidation {
        /// Entries left unconsolidated.
        entries: usize,
        /// The start of the reply.
        reply: String,
    },
    /// Steps of a sleep failed (each was tried; what failed is left for the next sleep).
    #[error("{}", join_failures(.0))]
    Sleep(Vec<SleepFailure>),
}

impl From<LlmError> for JobError {
    fn from(e: LlmError) -> Self {
        JobError::Llm(e)
    }
}

impl JobError {
    /// Retrying cannot fix it (a permanent LLM error of the step's chat call).
    pub fn is_permanent(&self) -> bool {
        matches!(self, JobError::Llm(e) if e.is_permanent())
    }
}

/// One failed step of a sleep.
#[derive(Debug, thiserror::Error)]
pub enum SleepFailure {
    #[error("consolidation failed: {0}")]
    Consolidation(JobError),
    #[error("reflection failed: {0}")]
    Reflection(JobError),
    #[error("compaction failed: {0}")]
    Compaction(JobError),
    /// Embedding the archive failed; it is tried again at the next sleep.
    #[error("embedding the archive failed: {0}")]
    Embedding(String),
}

/// What a report changed in the calibration that an operator should hear of: the server's counts
/// began to run past [`Calibration::TRUSTED`] (held back until corroborated), or they were
/// corroborated and are applied in full. `None` for anything else.
fn calibration_news(before: &Calibration, after: &Calibration) -> Option<String> {
    if after.held_back() && !before.held_back() {
        return Some(format!(
            "the LLM server reports {:.2}× the prompt tokens Somna counts; usage is calibrated by at \
             most {:.1}× until {} reports agree ({} so far)",
            after.factor,
            Calibration::TRUSTED,
            Calibration::CORROBORATION,
            after.samples
        ));
    }
    if before.held_back() && !after.held_back() && after.effective_factor() > Calibration::TRUSTED {
        return Some(format!(
            "{} reports agree that the LLM server counts {:.2}× the prompt tokens Somna counts; \
             usage is now calibrated by that factor",
            after.samples,
            after.effective_factor()
        ));
    }
    None
}

fn join_failures(failures: &[SleepFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a job did, handed back to the agent.
#[derive(Debug, Default)]
pub struct JobOutcome {
    pub compaction: Option<CompactionOutcome>,
    pub replied: bool,
    /// Host tool calls to hand over: (call id, name, arguments). The agent registers them, then
    /// emits the events, so a host that answers at once finds the call pending.
    pub pending_tools: Vec<(String, String, String)>,
    pub error: Option<String>,
    pub calibration: Option<Calibration>,
    pub importance_added: u64,
    pub reflected: bool,
    /// `error` is one that retrying cannot fix (a permanent LLM error): the turn fails at once.
    pub permanent: bool,
    /// The step used all of [`MAX_TOOL_ROUNDS`] without a final reply.
    pub tool_rounds_exhausted: bool,
    /// The server's usage reports of the step's chat calls.
    pub chat_usage: ChatUsage,
    /// Archived messages a sleep embedded (semantic retrieval).
    pub embedded: usize,
    /// What the grounding check did with a sleep's consolidated facts and reflections.
    pub grounding: GroundingCounts,
    /// After a sleep: the next due time it recorded in the durable schedule.
    pub next_sleep_at: Option<Timestamp>,
    /// After a turn: a sleep now would compact (usage at or above the sleep threshold and a body
    /// to summarize), so the scheduler may bring the sleep forward (`scheduler::Tired`).
    pub tired: bool,
}

impl JobOutcome {
    /// A sleep job's outcome as the answer to a sleep (the actor's, and the CLI's when it runs
    /// the job itself).
    pub fn into_sleep_result(self) -> SleepResult {
        SleepResult::Slept {
            compaction: self.compaction,
            error: self.error,
            reflected: self.reflected,
            next_sleep_at: self.next_sleep_at,
        }
    }

    /// A compaction job's outcome as the answer to a compaction: the outcome it came to, or,
    /// when none was reached (the engine failed), `Failed` with the job's error.
    pub fn into_compaction_outcome(self) -> CompactionOutcome {
        match (self.compaction, self.error) {
            (Some(c), _) => c,
            (None, error) => CompactionOutcome::Failed {
                reason: error.unwrap_or_else(|| "no compaction ran".into()),
                usage: 0.0,
            },
        }
    }
}

impl Job {
    /// Runs the job to completion. Store errors are reported in the outcome, never panics.
    pub async fn run(self) -> JobOutcome {
        let mut out = JobOutcome::default();
        let ctx = self.ctx;
        // The live history the step replied over, its reply included (the tiredness check's).
        let mut replied_over = None;
        let result = match self.kind {
            JobKind::Emergency { then_step } => {
                let r = ctx.compact(Trigger::Emergency, &mut out).await;
                if r.is_ok() && then_step {
                    ctx.step(&mut out).await.map(|h| replied_over = h)
                } else {
                    r
                }
            }
            JobKind::Step => ctx.step(&mut out).await.map(|h| replied_over = h),
            JobKind::Sleep { tired } => ctx.sleep(tired, &mut out).await,
            JobKind::Compact { force } => {
                let trigger = if force {
                    Trigger::Manual
                } else {
                    Trigger::Sleep
                };
                ctx.compact(trigger, &mut out).await
            }
        };
        if matches!(
            self.kind,
            JobKind::Step | JobKind::Emergency { then_step: true }
        ) {
            out.tired = ctx.tired(out.calibration.as_ref(), replied_over);
        }
        if let Err(e) = result {
            // The one place a job's error becomes text (for `Event::Error` and `SleepResult`).
            out.permanent = e.is_permanent();
            out.error = Some(e.to_string());
        }
        out
    }
}

impl JobContext {
    /// True when the agent should sleep before its next turn: usage (O(1)) is at or above the
    /// sleep threshold; another exchange like the last one (the turns since the reply before
    /// this one) would take it to the emergency threshold, so waiting for the scheduled sleep
    /// risks an emergency compaction in the middle of the conversation; and the plan a sleep
    /// would make has a body, so that a sleep brought forward never only consolidates. Coming
    /// as late as that, a sleep's compaction frees about what an emergency one would, so the
    /// agent does not compact more often. `calibration`: the step's new one, if any;
    /// `history`: the live history the step replied over with its reply, read again when `None`
    /// (an input that arrived during the step is not in it: the check is a forecast either way).
    fn tired(&self, calibration: Option<&Calibration>, history: Option<Arc<Vec<Message>>>) -> bool {
        let cfg = &self.config.compaction;
        if !cfg.enabled {
            return false;
        }
        let factor = calibration_factor(&self.counter, calibration.unwrap_or(&self.calibration));
        let Ok(history_tokens) = self.deps.store.usage_tokens(&self.id) else {
            return false;
        };
        let usage = Usage::new(
            self.fixed_tokens,
            history_tokens,
            factor,
            cfg.max_context_tokens,
        );
        if usage.fraction() < cfg.sleep_threshold {
            return false;
        }
        let history = match history {
            Some(history) => history,
            None => match self.deps.store.live_history(&self.id) {
                Ok(history) => history,
                Err(_) => return false,
            },
        };
        // A mean exchange: the live turns' tokens over the replies among them.
        let (turns, replies) =
            history
                .iter()
                .filter(|m| m.summary().is_none())
                .fold((0u64, 0u64), |(t, r), m| {
                    (
                        t + u64::from(m.tokens),
                        r + u64::from(m.role == Role::Assistant),
                    )
                });
        let exchange = turns / replies.max(1);
        let next = Usage::new(
            self.fixed_tokens,
            history_tokens + exchange,
            factor,
            cfg.max_context_tokens,
        );
        if !next.is_emergency(cfg) {
            return false;
        }
        let request = PlanRequest {
            history: &history,
            fixed_tokens: self.fixed_tokens,
            trigger: Trigger::Sleep,
            calibration: factor,
        };
        matches!(plan(&request, cfg, &self.counter), PlanOutcome::Plan(_))
    }

    /// The agent's prompt over `history`, retrieving by meaning too when the input's vector is
    /// `query` (the embedder's model, the vector).
    fn prompt(
        &self,
        history: &[Message],
        query: Option<&(String, Vec<f32>)>,
    ) -> Result<prompt::Prompt, StoreError> {
        let semantic = query.map(|(m, v)| (m.as_str(), v.as_slice()));
        let (built, _) = prompt::assemble_with(
            &self.deps.store,
            &self.id,
            &self.config,
            history,
            semantic,
            &self.counter,
        )?;
        Ok(built)
    }

    /// What the agent was shown this round, as the sources a journal note may rest on: the
    /// prompt the model answered (persona, summary, memory facts and archived excerpts of the
    /// working context, the live history with its speakers and times, tool results), the
    /// model's own text of this round, and the time now. A note's own arguments are no source
    /// (`Grounder::from_turns` leaves `journal_add` calls out). Built only when the model writes
    /// a note, by assembling the prompt again over the history as it is now.
    fn seen(&self, query: Option<&(String, Vec<f32>)>) -> Result<Grounder, StoreError> {
        let history = self.deps.store.live_history_again(&self.id)?;
        let built = self.prompt(&history, query)?;
        let mut turns: Vec<Turn> = history.iter().map(Turn::from).collect();
        // The prompt's other parts, numbered past the history (nothing cites them).
        let next = history.last().map_or(0, |m| m.seq + 1);
        turns.extend(
            built
                .messages
                .iter()
                .zip(next..)
                .map(|(m, seq)| Turn::new(seq, m.role, m.content.as_str())),
        );
        turns.push(Turn::new(next + turns.len() as u64, Role::System, "").at(self.now()));
        let names = grounding::names_in(&self.config.persona);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Ok(Grounder::from_turns(&turns, &names))
    }

    pub(super) fn now(&self) -> Timestamp {
        self.deps.clock.now()
    }

    pub(super) fn emit(&self, event: Event) {
        self.deps.events.emit(self.now(), event);
    }

    fn append(&self, mut m: Message) -> Result<Message, StoreError> {
        m.tokens = self.counter.count_message(&m);
        self.deps.store.append(&self.id, m, self.now())
    }

    /// Runs one compaction and reports it as events.
    pub(super) async fn compact(
        &self,
        trigger: Trigger,
        out: &mut JobOutcome,
    ) -> Result<(), JobError> {
        let fixed = self.fixed_tokens;
        let usage_before = self
            .deps
            .store
            .usage_tokens(&self.id)
            .map(|t| {
                Usage::new(
                    fixed,
                    t,
                    calibration_factor(&self.counter, &self.calibration),
                    self.config.compaction.max_context_tokens,
                )
                .fraction()
            })
            .unwrap_or(0.0);
        self.emit(Event::CompactionStarted {
            agent: self.id.clone(),
            trigger,
            usage: usage_before,
        });
        let outcome = self
            .deps
            .compactor
            .compact(CompactRequest {
                agent: &self.id,
                config: &self.config,
                trigger,
                fixed_tokens: fixed,
                now: self.now(),
            })
            .await?;
        match &outcome {
            CompactionOutcome::Done(report) => self.emit(Event::CompactionCompleted {
                agent: self.id.clone(),
                report: report.clone(),
            }),
            CompactionOutcome::Skipped { reason, usage, .. } => {
                self.emit(Event::CompactionSkipped {
                    agent: self.id.clone(),
                    trigger,
                    reason: reason.to_string(),
                    usage: *usage,
                })
            }
            CompactionOutcome::Failed { reason, .. } => self.emit(Event::CompactionFailed {
                agent: self.id.clone(),
                trigger,
                reason: reason.clone(),
            }),
            CompactionOutcome::Stalled { reduction_pct, .. } => {
                self.emit(Event::CompactionFailed {
                    agent: self.id.clone(),
                    trigger,
                    reason: format!("stalled: the summary would save only {reduction_pct:.1}%"),
                })
            }
            CompactionOutcome::Busy => self.emit(Event::CompactionSkipped {
                agent: self.id.clone(),
                trigger,
                reason: "another compaction is in flight".into(),
                usage: usage_before,
            }),
        }
        if let Some(w) = outcome.report().and_then(|r| r.warning.clone()) {
            self.emit(Event::Warning {
                agent: self.id.clone(),
                message: w,
            });
        }
        out.compaction = Some(outcome);
        Ok(())
    }

    /// Journals pending observations with their importance.
    async fn score_observations(&self, out: &mut JobOutcome) -> Result<(), JobError> {
        for text in &self.observations {
            let importance = match self.config.memory.importance {
                somna_core::config::Scorer::Llm => self.llm_importance(text).await,
                somna_core::config::Scorer::Heuristic => somna_text::score_importance(text),
            };
            self.deps.store.append_journal(
                &self.id,
                JournalEntry::new(
                    self.now(),
                    SourceType::Observation,
                    importance,
                    text.clone(),
                ),
            )?;
            out.importance_added += u64::from(importance);
        }
        Ok(())
    }

    async fn llm_importance(&self, text: &str) -> u8 {
        let request = prompts::score_request(&self.config.model, text);
        match self.deps.llm.chat(request).await {
            Ok(r) => {
                prompts::parse_score(&r.text).unwrap_or_else(|| somna_text::score_importance(text))
            }
            Err(e) => {
                tracing::warn!(agent = %self.id, error = %e, "LLM importance scoring failed; using the heuristic");
                somna_text::score_importance(text)
            }
        }
    }

    /// Scores observations, then (if a reply is owed) calls the LLM, runs built-in tools, hands
    /// host tool calls to the host, and appends the reply. Returns the live history with the
    /// reply at its end, when the step ended in one.
    async fn step(&self, out: &mut JobOutcome) -> Result<Option<Arc<Vec<Message>>>, JobError> {
        self.score_observations(out).await?;
        if !self.needs_reply {
            return Ok(None);
        }
        let store = &self.deps.store;
        let specs = tools::all_specs(&self.config);
        let mut calibration = self.calibration;
        // The input's vector, once per turn (the tool rounds after it retrieve for the same input).
        let mut query: Option<(String, Vec<f32>)> = None;
        // The turn's first read of the history counts towards its admission to the store's cache;
        // the others are the same turn's (see `Store::live_history_again`).
        let mut read_before = false;
        if let Some(semantic) = &self.deps.semantic {
            let history = store.live_history(&self.id)?;
            read_before = true;
            let input = prompt::latest_input(&history);
            let embedder = semantic.embedder.as_ref();
            if let Some(v) = crate::semantic::embed_query(embedder, &self.id, input).await {
                query = Some((embedder.model().to_string(), v));
            }
        }
        for _ in 0..MAX_TOOL_ROUNDS {
            // Shared with the store's live-history cache (a tool round's results are in it), and
            // dropped with the prompt's assembly: held across the reply's append, it would make
            // that append copy the cached history.
            let history = if std::mem::replace(&mut read_before, true) {
                store.live_history_again(&self.id)?
            } else {
                store.live_history(&self.id)?
            };
            let built = self.prompt(&history, query.as_ref())?;
            drop(history);
            let estimate = built.total_tokens();
            let request = ChatRequest::new(self.config.model.clone(), built.messages)
                .with_purpose(Purpose::Chat)
                .with_max_tokens(self.config.compaction.max_reply_tokens)
                .with_tools(specs.clone())
                .with_cache_key(self.id.as_str());
            let response = self.deps.llm.chat(request).await?;
            out.chat_usage.add(response.usage.as_ref());
            if let Some(u) = &response.usage {
                if !self.counter.is_exact() {
                    let before = calibration;
                    match calibration.observe(estimate, u64::from(u.prompt_tokens)) {
                        Observation::Accepted { .. } => {
                            out.calibration = Some(calibration);
                            let _ = store.update_calibration(&self.id, calibration);
                            if let Some(message) = calibration_news(&before, &calibration) {
                                self.emit(Event::Warning {
                                    agent: self.id.clone(),
                                    message,
                                });
                            }
                        }
                        Observation::Rejected(why) => {
                            tracing::warn!(agent = %self.id, %why, "ignored the server's usage report");
                        }
                    }
                }
            }
            if response.text.trim().is_empty() && response.tool_calls.is_empty() {
                return Err(JobError::EmptyReply);
            }
            let limit = reply_limit(&self.counter, self.config.compaction.max_reply_tokens);
            let arguments: u64 = response
                .tool_calls
                .iter()
                .map(|c| u64::from(self.counter.count_text(&c.arguments)))
                .sum();
            if arguments > limit {
                return Err(JobError::ArgumentsTooLarge {
                    tokens: arguments,
                    cap: self.config.compaction.max_reply_tokens,
                });
            }
            let capped = cap_reply(&self.counter, response.text.trim(), limit);
            let reply = self.append(
                Message::assistant_calls(capped.text.as_str(), response.tool_calls.clone())
                    .at(self.now()),
            )?;
            if let Some(tokens) = capped.cut_from {
                self.emit(Event::ReplyTruncated {
                    agent: self.id.clone(),
                    seq: reply.seq,
                    tokens,
                    kept: u64::from(self.counter.count_text(&reply.content)),
                });
            }
            if response.tool_calls.is_empty() {
                out.replied = true;
                self.emit(Event::AgentReplied {
                    agent: self.id.clone(),
                    seq: reply.seq,
                    text: reply.content.clone(),
                    usage: out.chat_usage,
                });
                // The history with the reply (and any input that came during the step) when the
                // cache holds it (the append extended it); else the tiredness check reads it if
                // it needs it.
                return Ok(store.cached_live_history(&self.id));
            }
            let mut waiting = Vec::new();
            // What the agent was shown, for its notes: built for the round's first note only.
            let mut seen: Option<Arc<Grounder>> = None;
            for call in &response.tool_calls {
                if tools::is_builtin(&call.name) {
                    let ran = tools::run_builtin(
                        store,
                        &self.id,
                        call,
                        self.now(),
                        somna_text::score_importance,
                        || {
                            let g = match &seen {
                                Some(g) => Arc::clone(g),
                                None => Arc::new(self.seen(query.as_ref())?),
                            };
                            seen = Some(Arc::clone(&g));
                            Ok(g)
                        },
                    )?;
                    if !ran.refused.is_empty() {
                        tracing::info!(agent = %self.id, missing = %ran.refused.join(", "), "a journal note was not written: values nothing the agent was shown holds");
                        self.emit(Event::Warning {
                            agent: self.id.clone(),
                            message: format!(
                                "a journal note was not written: nothing the agent was shown \
                                 says {}",
                                ran.refused.join(", ")
                            ),
                        });
                    } else if call.name == tools::JOURNAL_ADD {
                        out.importance_added += journal_importance(call);
                    }
                    self.append(Message::tool_result(call.id.clone(), ran.result).at(self.now()))?;
                } else if self.config.tools.iter().any(|t| t.name == call.name) {
                    waiting.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                } else {
                    self.append(
                        Message::tool_result(
                            call.id.clone(),
                            tools::error_result(&format!("there is no tool named {}", call.name)),
                        )
                        .at(self.now()),
                    )?;
                }
            }
            if !waiting.is_empty() {
                out.pending_tools = waiting;
                return Ok(None);
            }
        }
        // Never silently: the host hears that the turn ended without a reply, and the status shows
        // the reply as owed.
        out.tool_rounds_exhausted = true;
        self.emit(Event::ToolRoundsExhausted {
            agent: self.id.clone(),
            rounds: MAX_TOOL_ROUNDS,
        });
        Ok(None)
    }
}

/// The most tokens, by the local count, a reply may take when `cap` was asked for as `max_tokens`.
/// Exact tokenizers count what the server counts; the heuristic overestimates by up to about a
/// quarter, so it gets that much slack before a reply the model kept within `cap` is cut.
fn reply_limit(counter: &TokenCounter, cap: u32) -> u64 {
    let cap = u64::from(cap);
    if counter.is_exact() {
        cap
    } else {
        cap + cap / 4
    }
}

/// A reply after [`cap_reply`].
#[derive(Debug, Clone, PartialEq)]
struct CappedReply {
    /// The text to append: whole, or cut and ended with `…`.
    text: String,
    /// The local count of the whole text, when it was cut.
    cut_from: Option<u64>,
}

/// `text` when it fits in `limit` tokens; otherwise its longest prefix that fits together with a
/// closing `…`, ended at a word boundary when one lies in the last quarter of that prefix.
fn cap_reply(counter: &TokenCounter, text: &str, limit: u64) -> CappedReply {
    let total = u64::from(counter.count_text(text));
    if total <= limit {
        return CappedReply {
            text: text.to_string(),
            cut_from: None,
        };
    }
    const ELLIPSIS: &str = "…";
    let budget = limit.saturating_sub(u64::from(counter.count_text(ELLIPSIS)));
    let fits = |end: usize| u64::from(counter.count_text(&text[..end])) <= budget;
    // Binary search over char boundaries for the longest prefix within the budget (a prefix never
    // counts fewer tokens than a shorter one, closely enough for a cut).
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let fitting = bounds.partition_point(|&end| fits(end));
    let lo = bounds[fitting.saturating_sub(1)];
    let mut end = lo;
    if let Some(space) = text[..end].rfind(char::is_whitespace) {
        if space >= end - end / 4 {
            end = space;
        }
    }
    CappedReply {
        text: format!("{}{ELLIPSIS}", text[..end].trim_end()),
        cut_from: Some(total),
    }
}

/// The importance a `journal_add` call asked for (for the reflection counter).
fn journal_importance(call: &ToolCall) -> u64 {
    serde_json::from_str::<serde_json::Value>(&call.arguments)
        .ok()
        .and_then(|v| v.get("importance").and_then(serde_json::Value::as_u64))
        .unwrap_or(5)
        .clamp(1, 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(status: u16) -> LlmError {
        LlmError::Server {
            status,
            url: String::new(),
            excerpt: String::new(),
            attempts: 1,
        }
    }

    #[test]
    fn an_llm_failure_names_its_cause_once_in_a_chain() {
        let err = JobError::from(server_error(503));
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            chain.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        assert_eq!(chain.matches("HTTP 503").count(), 1, "{chain}");
        assert!(
            chain.starts_with("LLM: LLM server answered HTTP 503"),
            "{chain}"
        );
    }

    #[test]
    fn a_sleep_reports_every_failed_step_in_order() {
        let id = AgentId::new("ada").unwrap();
        let err = JobError::Sleep(vec![
            SleepFailure::Consolidation(JobError::ConsolidationLlm(LlmError::EmptyResponse)),
            SleepFailure::Reflection(JobError::Store(StoreError::UnknownAgent(id))),
            SleepFailure::Compaction(JobError::CompactionFailed("stalled".into())),
        ]);
        assert_eq!(
            err.to_string(),
            format!(
                "consolidation failed: LLM: {}; the entries stay for the next sleep; \
                 reflection failed: unknown agent ada; compaction failed: stalled",
                LlmError::EmptyResponse
            )
        );
    }

    #[test]
    fn only_a_permanent_llm_error_of_the_step_is_permanent() {
        assert!(JobError::Llm(server_error(401)).is_permanent());
        assert!(!JobError::Llm(server_error(503)).is_permanent());
        assert!(!JobError::ConsolidationLlm(server_error(401)).is_permanent());
        assert!(!JobError::EmptyReply.is_permanent());
        assert!(
            !JobError::Sleep(vec![SleepFailure::Reflection(JobError::Llm(server_error(
                401
            )))])
            .is_permanent()
        );
    }

    #[test]
    fn a_store_error_in_a_job_is_named_once() {
        let id = AgentId::new("ada").unwrap();
        let err = JobError::from(StoreError::UnknownAgent(id));
        assert_eq!(err.to_string(), "unknown agent ada");
        assert!(std::error::Error::source(&err).is_none());
    }

    #[test]
    fn a_reply_within_the_limit_is_kept_whole() {
        let counter = TokenCounter::heuristic();
        let capped = cap_reply(&counter, "Here is your sword.", 640);
        assert_eq!(capped.text, "Here is your sword.");
        assert_eq!(capped.cut_from, None);
    }

    #[test]
    fn an_oversize_reply_is_cut_within_the_limit_at_a_word() {
        for counter in [TokenCounter::heuristic(), TokenCounter::for_model("gpt-4o")] {
            let limit = reply_limit(
                &counter,
                somna_core::config::CompactionConfig::default().max_reply_tokens,
            );
            let text = "the mill wheel turns and the river runs ".repeat(5000);
            let capped = cap_reply(&counter, &text, limit);
            let kept = u64::from(counter.count_text(&capped.text));
            assert!(kept <= limit, "{kept} > {limit}");
            // Not cut far short: at most a word and the ellipsis below the limit.
            assert!(kept + 4 >= limit, "{kept} ≪ {limit}");
            assert!(capped.text.ends_with("…"));
            assert!(text.starts_with(capped.text.trim_end_matches('…')));
            assert_eq!(capped.cut_from, Some(u64::from(counter.count_text(&text))));
        }
        // Multi-byte text without spaces is cut on a char boundary.
        let counter = TokenCounter::heuristic();
        let capped = cap_reply(&counter, &"日本語".repeat(1000), 10);
        assert_eq!(capped.text, format!("{}…", "日本語".repeat(3)));
    }
}
