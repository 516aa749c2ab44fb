//! Somna measures its own recall (`somna eval recall`): for each conversation of a [`Dataset`],
//! import it into a fresh temporary store (compacting as the live runtime would, with the given
//! LLM), then for each question build the prompt the agent would send
//! ([`prompt::preview`](crate::prompt::preview)) and check which answer turns it holds. Two
//! baselines (`baselines.rs`) get the same questions, the same budget and the same check, so the
//! rows of the report compare.
//!
//! - `dataset.rs`: the dataset format on disk ([`Dataset::load`]).
//! - `baselines.rs`: last-window and a frozen plain BM25 top-5 over the raw transcript.
//! - `report.rs`: [`RecallReport`] and its per-method, per-category [`Stats`].
//!
//! **Held** is text containment, independent of how retrieval works: an answer turn is held when
//! its content, whitespace-normalized, is a substring of the whitespace-normalized concatenation
//! of every prompt message's content. Retrieval is never re-implemented here: whatever
//! `prompt::preview` assembles is what is measured.

mod baselines;
mod dataset;
mod report;

pub use baselines::{BM25_TOP, BaselinePrompt};
pub use dataset::{Conversation, Dataset, DatasetError, Question, Turn};
pub use report::{
    BM25_TOP5, ImportSummary, LAST_WINDOW, MethodReport, QuestionOutcome, RecallReport, SOMNA,
    SOMNA_CONSOLIDATED, Stats,
};

use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_core::config::{AgentConfig, ConfigErrors, ResolvedConfig};
use somna_core::id::AgentIdError;
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, Timestamp};
use somna_llm::LlmClient;
use somna_store::{Store, StoreError};

use crate::agent::JobKind;
use crate::clock::Clock;
use crate::compactor::Compactor;
use crate::import::{ImportError, import_jsonl};
use crate::ops::{Offline, OpsError};
use crate::prompt;

/// The id of the agent each conversation is imported into (one temporary store each).
pub const EVAL_AGENT: &str = "recall-eval";
/// Most sleeps `consolidate` runs after one import (each consolidates up to 50 journal entries).
pub const MAX_SLEEPS: usize = 100;
/// "Now" when a conversation carries no timestamps (2025-01-01T00:00:00Z).
const DEFAULT_NOW: Timestamp = Timestamp(1_735_689_600_000);

/// What a recall run does beyond the default (somna and both baselines over everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallOptions {
    /// Also measure the two baselines (last-window, bm25-top5).
    pub baselines: bool,
    /// After each import, sleep (consolidation into memory facts, then compaction at the sleep
    /// threshold) until no journal entry waits, and measure Somna again (`somna+sleep`).
    pub consolidate: bool,
    /// Only the first N conversations (by name).
    pub limit_conversations: Option<usize>,
    /// Only the first N questions of each conversation (in file order).
    pub limit_questions: Option<usize>,
    /// Keep every question's outcome in [`RecallReport::details`].
    pub details: bool,
}

impl Default for RecallOptions {
    fn default() -> Self {
        RecallOptions {
            baselines: true,
            consolidate: false,
            limit_conversations: None,
            limit_questions: None,
            details: false,
        }
    }
}

/// Where a recall run is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// Importing conversation `index` of `total`.
    Importing {
        conversation: &'a str,
        index: usize,
        total: usize,
    },
    /// `done` of `total` questions of the conversation asked.
    Asking {
        conversation: &'a str,
        done: usize,
        total: usize,
    },
}

/// Why a recall run stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("the agent config is invalid")]
    Config(#[source] ConfigErrors),
    #[error(transparent)]
    AgentId(#[from] AgentIdError),
    #[error("conversation {conversation}: the import failed")]
    Import {
        conversation: String,
        #[source]
        source: ImportError,
    },
    #[error("conversation {conversation}")]
    Store {
        conversation: String,
        #[source]
        source: StoreError,
    },
    #[error("conversation {conversation}: loading the agent for its sleep")]
    Agent {
        conversation: String,
        #[source]
        source: OpsError,
    },
    #[error("conversation {conversation}: the sleep after the import failed: {message}")]
    Sleep {
        conversation: String,
        message: String,
    },
}

/// Runs the recall evaluation of `dataset` with the agent config `config.defaults` gives (the
/// file's `[[agents]]` are ignored), importing with `llm`.
pub async fn recall(
    dataset: &Dataset,
    config: &ResolvedConfig,
    llm: Arc<dyn LlmClient>,
    options: &RecallOptions,
) -> Result<RecallReport, EvalError> {
    recall_with_progress(dataset, config, llm, options, |_| {}).await
}

/// [`recall`], calling `progress` as it goes.
pub async fn recall_with_progress(
    dataset: &Dataset,
    config: &ResolvedConfig,
    llm: Arc<dyn LlmClient>,
    options: &RecallOptions,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<RecallReport, EvalError> {
    let id = AgentId::new(EVAL_AGENT)?;
    // Only the defaults: a listed agent of the same id must not change what is measured.
    let mut config = config.clone();
    config.agents.clear();
    let agent_config = config.defaults.agent(id.clone());
    // The defaults resolved, but check them as an agent of their own, like `somna create` does.
    let agent_config = agent_config
        .with_overrides(&Default::default())
        .map_err(EvalError::Config)?;
    let counter = TokenCounter::for_model(&agent_config.model);
    let budget = prompt::budget(&agent_config);
    let by_conversation = dataset.questions_by_conversation();
    let conversations: Vec<&Conversation> = dataset
        .conversations
        .iter()
        .take(options.limit_conversations.unwrap_or(usize::MAX))
        .collect();
    let mut outcomes: Vec<QuestionOutcome> = Vec::new();
    let mut imports = Vec::with_capacity(conversations.len());
    let mut import_time = Duration::ZERO;
    let mut turns = 0;
    for (index, conversation) in conversations.iter().enumerate() {
        progress(Progress::Importing {
            conversation: &conversation.name,
            index,
            total: conversations.len(),
        });
        let questions: Vec<(usize, &Question)> = by_conversation
            .get(conversation.name.as_str())
            .map(|qs| {
                qs.iter()
                    .take(options.limit_questions.unwrap_or(usize::MAX))
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let run = ConversationRun {
            conversation,
            questions: &questions,
            agent: &id,
            config: &agent_config,
            counter: &counter,
        };
        let store_err = |source| EvalError::Store {
            conversation: conversation.name.clone(),
            source,
        };
        let store = Store::temporary().map_err(store_err)?;
        let now = run.now();
        let started = Instant::now();
        let report = import_jsonl(
            conversation.jsonl.as_bytes(),
            &id,
            &agent_config,
            &store,
            &Compactor::new(store.clone(), Arc::clone(&llm)),
            now,
            |_, _| {},
        )
        .await
        .map_err(|source| EvalError::Import {
            conversation: conversation.name.clone(),
            source,
        })?;
        import_time += started.elapsed();
        turns += conversation.turns.len();
        outcomes.extend(run.somna(SOMNA, &store, now, &mut progress)?);
        let mut facts = 0;
        if options.consolidate {
            let started = Instant::now();
            facts = consolidate(&config, &store, &id, &llm, now, &conversation.name).await?;
            import_time += started.elapsed();
            outcomes.extend(run.somna(SOMNA_CONSOLIDATED, &store, now, &mut progress)?);
        }
        if options.baselines {
            outcomes.extend(run.baselines());
        }
        imports.push(ImportSummary {
            conversation: conversation.name.clone(),
            turns: conversation.turns.len(),
            compactions: report.compactions,
            fallbacks: report.fallbacks,
            archive_len: report.archive_len,
            facts,
            ms: millis(started.elapsed()),
        });
    }
    let mut methods = vec![SOMNA];
    if options.consolidate {
        methods.push(SOMNA_CONSOLIDATED);
    }
    if options.baselines {
        methods.extend([LAST_WINDOW, BM25_TOP5]);
    }
    let methods = methods
        .into_iter()
        .map(|m| {
            let of_method: Vec<&QuestionOutcome> =
                outcomes.iter().filter(|o| o.method == m).collect();
            report::method_report(m, &of_method, budget)
        })
        .collect::<Vec<_>>();
    Ok(RecallReport {
        model: agent_config.model.clone(),
        max_context_tokens: agent_config.compaction.max_context_tokens,
        budget,
        conversations: conversations.len(),
        turns,
        questions: methods.first().map_or(0, |m| m.overall.questions),
        imports,
        import_ms: millis(import_time),
        methods,
        details: if options.details {
            outcomes
        } else {
            Vec::new()
        },
    })
}

/// Does the prompt made of `contents` hold `turn`? Whitespace-normalized text containment.
pub fn holds(haystack: &str, turn: &str) -> bool {
    let needle = normalize(turn);
    !needle.is_empty() && haystack.contains(&needle)
}

/// The whitespace-normalized concatenation of a prompt's message contents: what [`holds`]
/// searches.
pub fn haystack<'s>(contents: impl IntoIterator<Item = &'s str>) -> String {
    let joined: Vec<&str> = contents.into_iter().collect();
    normalize(&joined.join(" "))
}

/// Does `haystack` show the day of `rfc3339` (`2023-05-08T13:56:00Z`) as 2023-05-08, 8 May 2023
/// or May 8, 2023? (Month names in English, full or abbreviated to three letters.)
pub fn shows_date(haystack: &str, rfc3339: &str) -> bool {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let (Some(iso), Some(month), Some(day)) = (
        rfc3339.get(0..10),
        rfc3339.get(5..7).and_then(|m| m.parse::<usize>().ok()),
        rfc3339.get(8..10).and_then(|d| d.parse::<u32>().ok()),
    ) else {
        return false;
    };
    if haystack.contains(iso) {
        return true;
    }
    let Some(name) = month.checked_sub(1).and_then(|m| MONTHS.get(m)) else {
        return false;
    };
    let year = &iso[0..4];
    [*name, &name[..3]].iter().any(|m| {
        contains_number(haystack, &format!("{day} {m} {year}"))
            || haystack.contains(&format!("{m} {day}, {year}"))
    })
}

/// `haystack` contains `needle` (which starts with a number) not preceded by a digit.
fn contains_number(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(i, _)| {
        !haystack[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One conversation's questions, asked of each method.
struct ConversationRun<'a> {
    conversation: &'a Conversation,
    questions: &'a [(usize, &'a Question)],
    agent: &'a AgentId,
    config: &'a AgentConfig,
    counter: &'a TokenCounter,
}

impl ConversationRun<'_> {
    /// "Now" for the import and the questions: a day after the conversation's last timestamp.
    fn now(&self) -> Timestamp {
        self.conversation
            .turns
            .iter()
            .filter_map(|t| t.created_at.as_deref())
            .filter_map(|s| Timestamp::parse_rfc3339(s).ok())
            .max()
            .map_or(DEFAULT_NOW, |t| {
                t.saturating_add(Duration::from_secs(24 * 3600))
            })
    }

    fn outcome(
        &self,
        method: &str,
        (index, q): (usize, &Question),
        haystack: &str,
        tokens: u64,
        elapsed: Duration,
    ) -> QuestionOutcome {
        let held: Vec<usize> = q
            .answer_turns
            .iter()
            .copied()
            .filter(|&t| holds(haystack, &self.conversation.turns[t].content))
            .collect();
        QuestionOutcome {
            method: method.to_string(),
            conversation: self.conversation.name.clone(),
            question: index,
            category: q.category.clone(),
            answer_turns: q.answer_turns.clone(),
            dated: held.iter().any(|&t| {
                self.conversation.turns[t]
                    .created_at
                    .as_deref()
                    .is_some_and(|at| shows_date(haystack, at))
            }),
            held,
            tokens,
            ms: millis(elapsed),
        }
    }

    /// Somna's prompt (`prompt::preview`) for every question.
    fn somna(
        &self,
        method: &str,
        store: &Store,
        now: Timestamp,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<Vec<QuestionOutcome>, EvalError> {
        let mut out = Vec::with_capacity(self.questions.len());
        for (done, &(index, q)) in self.questions.iter().enumerate() {
            let started = Instant::now();
            let (built, _) = prompt::preview(store, self.agent, self.config, &q.question, now)
                .map_err(|source| EvalError::Store {
                    conversation: self.conversation.name.clone(),
                    source,
                })?;
            let elapsed = started.elapsed();
            let hay = haystack(built.messages.iter().map(|m| m.content.as_str()));
            out.push(self.outcome(method, (index, q), &hay, built.total_tokens(), elapsed));
            progress(Progress::Asking {
                conversation: &self.conversation.name,
                done: done + 1,
                total: self.questions.len(),
            });
        }
        Ok(out)
    }

    /// Both baselines for every question, over the raw transcript.
    fn baselines(&self) -> Vec<QuestionOutcome> {
        let started = Instant::now();
        let transcript = baselines::Transcript::new(&self.conversation.turns, self.counter);
        // Counting and indexing the transcript is shared by every question: spread it over them.
        let setup = started.elapsed() / self.questions.len().max(1) as u32;
        let budget = prompt::budget(self.config);
        let persona = self.config.persona.as_str();
        let mut out = Vec::with_capacity(2 * self.questions.len());
        for &(index, q) in self.questions {
            let started = Instant::now();
            let p = transcript.last_window(persona, &q.question, budget, self.counter);
            let elapsed = started.elapsed() + setup;
            let hay = haystack(p.contents.iter().map(String::as_str));
            out.push(self.outcome(LAST_WINDOW, (index, q), &hay, p.tokens, elapsed));
            let started = Instant::now();
            let p = transcript.bm25_top(persona, &q.question, self.counter);
            let elapsed = started.elapsed() + setup;
            let hay = haystack(p.contents.iter().map(String::as_str));
            out.push(self.outcome(BM25_TOP5, (index, q), &hay, p.tokens, elapsed));
        }
        out
    }
}

/// Sleeps until no journal entry waits for consolidation (at most [`MAX_SLEEPS`] times); returns
/// the number of memory facts.
async fn consolidate(
    config: &ResolvedConfig,
    store: &Store,
    id: &AgentId,
    llm: &Arc<dyn LlmClient>,
    now: Timestamp,
    conversation: &str,
) -> Result<usize, EvalError> {
    let store_err = |source| EvalError::Store {
        conversation: conversation.to_string(),
        source,
    };
    let offline = Offline::new(config.clone(), store.clone(), Clock::starting_at(now, 1.0));
    let mut agent = offline
        .agent(id, Arc::clone(llm))
        .map_err(|source| EvalError::Agent {
            conversation: conversation.to_string(),
            source,
        })?;
    let min_importance = agent.config().memory.min_importance;
    for _ in 0..MAX_SLEEPS {
        if store
            .unconsolidated(id, min_importance)
            .map_err(store_err)?
            .is_empty()
        {
            break;
        }
        let Some(job) = agent.sleep() else {
            break;
        };
        let out = job.run().await;
        agent.finish(JobKind::Sleep, &out);
        if let Some(message) = out.error {
            return Err(EvalError::Sleep {
                conversation: conversation.to_string(),
                message,
            });
        }
    }
    Ok(store.facts(id).map_err(store_err)?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_is_whitespace_normalized_containment() {
        let hay = haystack([
            "You are kind.\n\nArchive:\n- [#4 user]  We went with\nBiscuit!",
            "q",
        ]);
        assert!(holds(&hay, "We went with   Biscuit!"));
        assert!(holds(&hay, "We went\twith Biscuit!\n"));
        assert!(!holds(&hay, "We went with Pepper!"));
        assert!(!holds(&hay, "   "));
    }

    #[test]
    fn a_date_shows_in_iso_or_long_form() {
        let at = "2023-05-08T13:56:00Z";
        assert!(shows_date("[2023-05-08 14:00] Priya: hi", at));
        assert!(shows_date("on 8 May 2023 Priya said", at));
        assert!(shows_date("on Sep 8, 2023", "2023-09-08T00:00:00Z"));
        assert!(!shows_date("on 18 May 2023", at));
        assert!(!shows_date("2023-05-09", at));
        assert!(!shows_date("anything", "not a date"));
    }
}
