//! The resolved compaction settings ([`CompactionConfig`]): the summary's section caps, the scorer
//! of notable facts, and the working context's and live tail's room.

use serde::{Deserialize, Serialize};

/// Caps, in tokens, of each section of a compaction summary.
///
/// In a file, a `sections` table replaces the lower layer's caps as a whole; caps it does not name
/// take their built-in defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct SectionCaps {
    /// What the conversation was about and how it moved.
    pub topic_arc: u32,
    /// What was decided or agreed.
    pub decisions: u32,
    /// What is still open: promises, questions, tasks.
    pub pending: u32,
    /// What the agent learned about the people it talks to.
    pub user_facts: u32,
    /// Items, places, documents and other things referred to.
    pub artifacts: u32,
}

impl SectionCaps {
    /// The sum of the caps, which must not exceed `summary_max_tokens`.
    pub fn total(&self) -> u64 {
        u64::from(self.topic_arc)
            + u64::from(self.decisions)
            + u64::from(self.pending)
            + u64::from(self.user_facts)
            + u64::from(self.artifacts)
    }
}

impl Default for SectionCaps {
    fn default() -> Self {
        SectionCaps {
            topic_arc: 400,
            decisions: 300,
            pending: 300,
            user_facts: 300,
            artifacts: 200,
        }
    }
}

/// How notable facts and importance scores are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scorer {
    /// Deterministic keyword/shape heuristics, no LLM call.
    #[default]
    Heuristic,
    /// Ask the LLM.
    Llm,
}

/// The resolved compaction settings of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionConfig {
    /// `false` turns off sleep and emergency compaction; manual still works.
    pub enabled: bool,
    /// Usage (0–1] at or above which a Sleep compacts.
    pub sleep_threshold: f64,
    /// Usage (0–1] at or above which a tick compacts at once; above `sleep_threshold`.
    pub emergency_threshold: f64,
    /// The model's context window, in tokens.
    pub max_context_tokens: u32,
    /// Keep at least this many recent messages verbatim.
    pub preserve_messages: u32,
    /// Keep at least this fraction of `max_context_tokens` of recent messages verbatim.
    pub preserve_ratio: f64,
    /// The first `head_size` messages are pinned and never compacted.
    pub head_size: u32,
    /// Skip a compaction whose body has fewer messages than this, unless forced.
    pub min_compact_batch: u32,
    /// The summarizer's model; empty means the agent's model (an [`AgentConfig`] never holds an
    /// empty one: resolution fills in the agent's model).
    pub compact_model: String,
    /// The summarizer's instructions; empty means the engine's built-in default prompt.
    pub compact_prompt: String,
    /// Cap on the whole summary, in tokens.
    pub summary_max_tokens: u32,
    /// Cap on each summary section.
    pub sections: SectionCaps,
    /// The summarizer's context window, in tokens (the request must fit in it).
    pub summarizer_context_tokens: u32,
    /// After this many compactions, warn that accuracy may degrade.
    pub warn_after_compactions: u32,
    /// Tool outputs older than this many messages (counted from the end) are masked.
    pub mask_after_messages: u32,
    /// Tool outputs of these tools are never masked.
    pub mask_exempt_tools: Vec<String>,
    /// How pre-compaction extraction finds notable facts.
    pub extraction: Scorer,
    /// The largest single input (a user message, an observation, a tool result) the agent
    /// accepts, in tokens; larger input is refused. 0 means the default derived from the window,
    /// [`CompactionConfig::input_limit`] gives the value in force.
    pub max_input_tokens: u32,
    /// Tokens reserved in the window for the agent's reply (and the most it may write): a prompt
    /// never takes more than `max_context_tokens − max_reply_tokens`.
    pub max_reply_tokens: u32,
    /// The share of the window the working context (memory facts and archive excerpts recalled
    /// for the latest input) may fill, most relevant first; 0 turns it off. Counted in every
    /// usage check whether or not it is filled, so that what compaction frees stays free.
    pub working_share: f64,
}

/// The working context's reserved room at small windows: at least this many tokens, or half the
/// prompt budget when that is less (see [`CompactionConfig::working_budget`]).
pub const WORKING_FLOOR_TOKENS: u64 = 768;
/// A compaction keeps at least this many of the latest messages verbatim, whatever
/// [`CompactionConfig::tail_cap`] allows: the live tail's floor.
pub const MIN_TAIL_MESSAGES: usize = 4;

impl CompactionConfig {
    /// The most tokens a prompt may take: the window minus the reply's reserve.
    pub fn prompt_budget(&self) -> u64 {
        u64::from(
            self.max_context_tokens
                .saturating_sub(self.max_reply_tokens),
        )
    }

    /// The summary's cap in tokens: `summary_max_tokens`, or when that is 0 (the default) 15% of
    /// the window, at least 200 and at most 1,500 (614 in a 4,096-token window, 1,228 in 8,192),
    /// and at least the sum of `sections` when they were set by hand.
    pub fn summary_cap(&self) -> u32 {
        if self.summary_max_tokens > 0 {
            return self.summary_max_tokens;
        }
        let derived = (self.max_context_tokens.saturating_mul(3) / 20).clamp(200, 1_500);
        if self.sections == SectionCaps::default() {
            derived
        } else {
            derived.max(u32::try_from(self.sections.total()).unwrap_or(u32::MAX))
        }
    }

    /// The section caps in force: `sections`, except that the built-in default caps (which sum to
    /// 1,500) shrink in proportion when the summary's cap is smaller, so they always fit it.
    pub fn section_caps(&self) -> SectionCaps {
        let cap = u64::from(self.summary_cap());
        if self.sections != SectionCaps::default() || self.sections.total() <= cap {
            return self.sections;
        }
        let total = self.sections.total();
        let scale = |n: u32| u32::try_from(u64::from(n) * cap / total).unwrap_or(n);
        let s = self.sections;
        SectionCaps {
            topic_arc: scale(s.topic_arc),
            decisions: scale(s.decisions),
            pending: scale(s.pending),
            user_facts: scale(s.user_facts),
            artifacts: scale(s.artifacts),
        }
    }

    /// The working context's budget in tokens: `working_share` of the window, and at small
    /// windows at least [`WORKING_FLOOR_TOKENS`] or half the prompt budget, whichever is less
    /// (0 when `working_share` is 0). Below 3,840 tokens a fifth of the window leaves retrieval
    /// a few hundred tokens beside the summary and the live tail, less than a keyword search
    /// needs to find what a question asks about (docs/prompt.md, "How the room is split").
    pub fn working_budget(&self) -> u64 {
        let share = if self.working_share.is_finite() {
            self.working_share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if share == 0.0 {
            return 0;
        }
        let by_share = (share * f64::from(self.max_context_tokens)).floor() as u64;
        by_share.max(WORKING_FLOOR_TOKENS.min(self.prompt_budget() / 2))
    }

    /// The most tokens a compaction keeps in the live tail when the agent's fixed prompt
    /// (persona and working budget) takes `fixed_tokens`: half of the room the tail has below
    /// the sleep threshold beside a full-size summary, so that a compaction always frees at
    /// least half of what the tail may grow to before the next one. The preserve window
    /// (`preserve_messages`, `preserve_ratio`) is cut to it, never below the latest
    /// [`MIN_TAIL_MESSAGES`] messages. With the defaults it binds at every window, most at small
    /// ones: ~1,300 tokens at 8,192 (the preserve window's 20% is 1,638), a few messages at 2,000.
    pub fn tail_cap(&self, fixed_tokens: u64) -> u64 {
        let threshold = self.sleep_threshold.min(self.emergency_threshold);
        let below = if threshold.is_finite() && threshold > 0.0 {
            (threshold * f64::from(self.max_context_tokens)).floor() as u64
        } else {
            0
        };
        below
            .saturating_sub(fixed_tokens)
            .saturating_sub(u64::from(self.summary_cap()))
            / 2
    }

    /// The largest input the agent accepts, in tokens: `max_input_tokens`, or when that is 0 the
    /// default derived from the window, half of what a compaction can bring the prompt down to
    /// (`(emergency_threshold × max_context_tokens − summary_max_tokens) / 2`). The other half is
    /// left to the persona, the working context and the recent turns, so whatever is accepted can
    /// always be compacted below the emergency threshold.
    pub fn input_limit(&self) -> u32 {
        if self.max_input_tokens > 0 {
            self.max_input_tokens
        } else {
            self.input_room() / 2
        }
    }

    /// What a compaction can bring the prompt below, in tokens: the emergency threshold's share
    /// of the window minus a full-size summary and the working context's budget. An explicit
    /// `max_input_tokens` may not exceed it.
    pub fn input_room(&self) -> u32 {
        let threshold = (self.emergency_threshold * f64::from(self.max_context_tokens)).floor();
        let threshold = if threshold.is_finite() && threshold > 0.0 {
            threshold.min(f64::from(u32::MAX)) as u32
        } else {
            0
        };
        let working = u32::try_from(self.working_budget()).unwrap_or(u32::MAX);
        threshold
            .saturating_sub(self.summary_cap())
            .saturating_sub(working)
    }
}

impl Default for CompactionConfig {
    /// The built-in defaults (see docs/configuration.md).
    fn default() -> Self {
        CompactionConfig {
            enabled: true,
            sleep_threshold: 0.70,
            emergency_threshold: 0.80,
            max_context_tokens: 8192,
            preserve_messages: 20,
            preserve_ratio: 0.20,
            head_size: 0,
            min_compact_batch: 5,
            compact_model: String::new(),
            compact_prompt: String::new(),
            summary_max_tokens: 0,
            sections: SectionCaps::default(),
            summarizer_context_tokens: 8192,
            warn_after_compactions: 3,
            mask_after_messages: 10,
            mask_exempt_tools: Vec::new(),
            extraction: Scorer::Heuristic,
            max_input_tokens: 0,
            max_reply_tokens: 512,
            working_share: 0.2,
        }
    }
}
