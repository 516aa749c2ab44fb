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
    BASELINES, BM25_IN_ROOM, BM25_NEIGHBOURS, BM25_PACKED, BM25_TOP5, ImportSummary, LAST_WINDOW,
    MethodReport, QuestionOutcome, RecallReport, SOMNA, SOMNA_CONSOLIDATED, SOMNA_RETRIEVED, Stats,
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
use crate::semantic::Semantic;

/// The id of the agent each conversation is imported into (one temporary store each).
pub const EVAL_AGENT: &str = "recall-eval";
/// Most sleeps `consolidate` runs after one import (each consolidates up to 50 journal entries).
pub const MAX_SLEEPS: usize = 100;
/// "Now" when a conversation carries no timestamps (2025-01-01T00:00:00Z).
const DEFAULT_NOW: Timestamp = Timestamp(1_735_689_600_000);

/// What a recall run does beyond the default (somna and both baselines over everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallOptions {
    /// Also measure the baselines (last-window, bm25-packed, bm25+nbrs, bm25+nbrs@room,
    /// bm25-top5) and Somna's working context alone (somna-note).
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
    #[error("conversation {conversation}: embedding failed: {message}")]
    Embed {
        conversation: String,
        message: String,
    },
}

/// The questions' vectors of one conversation and the model that made them (none without an
/// embedder).
struct Semantics<'a> {
    model: &'a str,
    vectors: &'a [Option<Vec<f32>>],
}

/// Runs the recall evaluation of `dataset` with the agent config `config.defaults` gives (the
/// file's `[[agents]]` are ignored), importing with `llm`.
pub async fn recall(
    dataset: &Dataset,
    config: &ResolvedConfig,
    llm: Arc<dyn LlmClient>,
    options: &RecallOptions,
) -> Result<RecallReport, EvalError> {
    recall_with_progress(dataset, config, llm, None, options, |_| {}).await
}

/// [`recall`] with semantic retrieval when `semantic` is set (each import's archive is
/// embedded, each question too), calling `progress` as it goes.
pub async fn recall_with_progress(
    dataset: &Dataset,
    config: &ResolvedConfig,
    llm: Arc<dyn LlmClient>,
    semantic: Option<Semantic>,
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
            details: options.details,
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
        // Vectors of the archive (as a sleep would make them) and of every question.
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; questions.len()];
        let mut model = String::new();
        if let Some(s) = &semantic {
            let embedder = s.embedder.as_ref();
            crate::semantic::embed_whole_archive(&store, &id, embedder, 1_024)
                .await
                .map_err(|e| EvalError::Embed {
                    conversation: conversation.name.clone(),
                    message: e.to_string(),
                })?;
            let texts: Vec<String> = questions.iter().map(|(_, q)| q.question.clone()).collect();
            let embedded = embedder.embed(texts).await.map_err(|e| EvalError::Embed {
                conversation: conversation.name.clone(),
                message: e.to_string(),
            })?;
            vectors = embedded.into_iter().map(Some).collect();
            model = embedder.model().to_string();
        }
        import_time += started.elapsed();
        turns += conversation.turns.len();
        let semantic_of = Semantics {
            model: &model,
            vectors: &vectors,
        };
        let (somna, rooms) = run.somna(
            SOMNA,
            &store,
            now,
            options.baselines,
            &semantic_of,
            &mut progress,
        )?;
        outcomes.extend(somna);
        // The turns the live history still holds are the transcript's last ones (the import
        // appends in order; compaction archives from the front): the rest is what retrieval
        // searches.
        let live = store
            .history(&id)
            .map_err(store_err)?
            .iter()
            .filter(|m| m.is_normal())
            .count();
        let archived = conversation.turns.len().saturating_sub(live);
        let mut facts = 0;
        if options.consolidate {
            let started = Instant::now();
            facts = consolidate(&config, &store, &id, &llm, now, &conversation.name).await?;
            import_time += started.elapsed();
            let (slept, _) = run.somna(
                SOMNA_CONSOLIDATED,
                &store,
                now,
                false,
                &semantic_of,
                &mut progress,
            )?;
            outcomes.extend(slept);
        }
        if options.baselines {
            outcomes.extend(run.baselines(&rooms, archived));
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
        methods.extend(BASELINES);
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
        embedder: semantic.as_ref().map(|s| s.embedder.model().to_owned()),
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

/// A prompt as the checks read it: each message's content whitespace-normalized, and all of
/// them joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptText {
    /// Every message's content, whitespace-normalized, in order.
    pub messages: Vec<String>,
    /// The messages joined by a space: what [`holds`] searches.
    pub joined: String,
}

impl PromptText {
    /// The text of a prompt made of `contents`.
    pub fn new<'s>(contents: impl IntoIterator<Item = &'s str>) -> Self {
        let messages: Vec<String> = contents.into_iter().map(normalize).collect();
        let joined = messages.join(" ");
        PromptText { messages, joined }
    }

    /// The prompt holds `turn` (whitespace-normalized containment).
    pub fn holds(&self, turn: &str) -> bool {
        holds(&self.joined, turn)
    }

    /// The prompt holds `turn` with its day (`rfc3339`) next to it: in some message holding the
    /// turn, the nearest ISO date (`2023-05-08`) before the turn is that day, or the turn itself
    /// shows it. A date elsewhere in the prompt does not count: a reader attributes a turn to the
    /// date that heads it.
    pub fn dated(&self, turn: &str, rfc3339: &str) -> bool {
        let needle = normalize(turn);
        if needle.is_empty() {
            return false;
        }
        let Some(day) = rfc3339.get(0..10) else {
            return false;
        };
        self.messages.iter().any(|m| {
            m.match_indices(needle.as_str())
                .any(|(at, _)| shows_date(&needle, rfc3339) || last_iso_date(&m[..at]) == Some(day))
        })
    }
}

/// The last `YYYY-MM-DD` in `text`.
fn last_iso_date(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9)).rev().find_map(|i| {
        let w = &bytes[i..i + 10];
        let shape = w.iter().enumerate().all(|(j, b)| match j {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
        let bounded = i.checked_sub(1).is_none_or(|p| !bytes[p].is_ascii_digit())
            && bytes.get(i + 10).is_none_or(|b| !b.is_ascii_digit());
        (shape && bounded).then(|| &text[i..i + 10])
    })
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
    /// Also find where each answer turn ranks ([`QuestionOutcome::rank`]).
    details: bool,
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
        text: &PromptText,
        tokens: u64,
        elapsed: Duration,
    ) -> QuestionOutcome {
        let held: Vec<usize> = q
            .answer_turns
            .iter()
            .copied()
            .filter(|&t| text.holds(&self.conversation.turns[t].content))
            .collect();
        QuestionOutcome {
            method: method.to_string(),
            conversation: self.conversation.name.clone(),
            question: index,
            category: q.category.clone(),
            answer_turns: q.answer_turns.clone(),
            dated: held.iter().any(|&t| {
                let turn = &self.conversation.turns[t];
                turn.created_at
                    .as_deref()
                    .is_some_and(|at| text.dated(&turn.content, at))
            }),
            held,
            tokens,
            ms: millis(elapsed),
            rank: None,
        }
    }

    /// Somna's prompt (`prompt::preview`) for every question, and with `note` its working
    /// context alone ([`SOMNA_RETRIEVED`]); also the room the working context took per question.
    fn somna(
        &self,
        method: &str,
        store: &Store,
        now: Timestamp,
        note: bool,
        semantic: &Semantics<'_>,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<(Vec<QuestionOutcome>, Vec<u64>), EvalError> {
        let mut out = Vec::with_capacity(self.questions.len());
        let mut rooms = Vec::with_capacity(self.questions.len());
        for (done, &(index, q)) in self.questions.iter().enumerate() {
            let started = Instant::now();
            let vector = semantic
                .vectors
                .get(done)
                .and_then(Option::as_deref)
                .map(|v| (semantic.model, v));
            let (built, _) =
                prompt::preview_with(store, self.agent, self.config, &q.question, vector, now)
                    .map_err(|source| EvalError::Store {
                        conversation: self.conversation.name.clone(),
                        source,
                    })?;
            let elapsed = started.elapsed();
            let text = PromptText::new(built.messages.iter().map(|m| m.content.as_str()));
            let mut outcome =
                self.outcome(method, (index, q), &text, built.total_tokens(), elapsed);
            if self.details {
                outcome.rank =
                    self.answer_rank(store, q, vector)
                        .map_err(|source| EvalError::Store {
                            conversation: self.conversation.name.clone(),
                            source,
                        })?;
            }
            out.push(outcome);
            rooms.push(built.working_tokens);
            if note {
                let note = built.note_index.map(|i| built.messages[i].content.as_str());
                let text = PromptText::new(note);
                out.push(self.outcome(
                    SOMNA_RETRIEVED,
                    (index, q),
                    &text,
                    built.working_tokens,
                    elapsed,
                ));
            }
            progress(Progress::Asking {
                conversation: &self.conversation.name,
                done: done + 1,
                total: self.questions.len(),
            });
        }
        Ok((out, rooms))
    }

    /// Where `q`'s best-ranked answer turn stands in the archive ranking the working context
    /// reads (1-based, within [`report::RANK_DEPTH`]).
    fn answer_rank(
        &self,
        store: &Store,
        q: &Question,
        vector: Option<(&str, &[f32])>,
    ) -> Result<Option<usize>, StoreError> {
        let ranked = store.rank_archive(self.agent, &q.question, vector, report::RANK_DEPTH)?;
        let seqs: Vec<u64> = ranked.iter().map(|d| d.id).collect();
        let answers: Vec<String> = q
            .answer_turns
            .iter()
            .map(|&t| normalize(&self.conversation.turns[t].content))
            .collect();
        Ok(store
            .archived_messages(self.agent, &seqs)?
            .iter()
            .position(|m| {
                m.as_ref()
                    .is_some_and(|m| answers.contains(&normalize(&m.content)))
            })
            .map(|i| i + 1))
    }

    /// Every baseline for every question, over the raw transcript; `rooms` are the tokens
    /// Somna's working context took per question and `archived` the turns its live history no
    /// longer holds (for [`BM25_IN_ROOM`]).
    fn baselines(&self, rooms: &[u64], archived: usize) -> Vec<QuestionOutcome> {
        let started = Instant::now();
        let transcript = baselines::Transcript::new(&self.conversation.turns, self.counter);
        // Counting and indexing the transcript is shared by every question: spread it over them.
        let setup = started.elapsed() / self.questions.len().max(1) as u32;
        let budget = prompt::budget(self.config);
        let persona = self.config.persona.as_str();
        let mut out = Vec::with_capacity(5 * self.questions.len());
        for (n, &(index, q)) in self.questions.iter().enumerate() {
            let question = q.question.as_str();
            let room = rooms.get(n).copied().unwrap_or(0);
            let methods: [(&str, &dyn Fn() -> BaselinePrompt); 5] = [
                (BM25_IN_ROOM, &|| {
                    transcript.bm25_in_room(question, room, archived)
                }),
                (BM25_NEIGHBOURS, &|| {
                    transcript.bm25_packed(persona, question, budget, true, self.counter)
                }),
                (BM25_PACKED, &|| {
                    transcript.bm25_packed(persona, question, budget, false, self.counter)
                }),
                (LAST_WINDOW, &|| {
                    transcript.last_window(persona, question, budget, self.counter)
                }),
                (BM25_TOP5, &|| {
                    transcript.bm25_top(persona, question, self.counter)
                }),
            ];
            for (method, build) in methods {
                let started = Instant::now();
                let p = build();
                let elapsed = started.elapsed() + setup;
                let text = PromptText::new(p.contents.iter().map(String::as_str));
                out.push(self.outcome(method, (index, q), &text, p.tokens, elapsed));
            }
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
        let Some(job) = agent.sleep(false) else {
            break;
        };
        let out = job.run().await;
        agent.finish(JobKind::Sleep { tired: false }, &out);
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
    fn a_turn_is_dated_by_the_nearest_date_before_it_in_its_message() {
        let text = PromptText::new([
            "[2023-05-08] Ana: we adopted a cat Ana: it is grey [2023-06-01] Ben: hello there",
            "[2023-05-08] nothing here",
            "Ben: we adopted a cat",
        ]);
        let at = "2023-05-08T13:56:00Z";
        assert!(text.dated("it is grey", at));
        assert!(text.dated("Ana: we adopted a cat", at));
        // The nearest date before it is another day's.
        assert!(!text.dated("hello there", at));
        assert!(text.dated("hello there", "2023-06-01T09:00:00Z"));
        // Held in a message without a date: a date elsewhere does not count.
        assert!(!text.dated("Ben: we adopted a cat", at));
        assert!(!text.dated("not in the prompt", at));
        assert_eq!(
            last_iso_date("a 2023-05-08 b 12023-05-09"),
            Some("2023-05-08")
        );
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
