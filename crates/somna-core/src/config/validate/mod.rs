//! The checks. Each returns every problem it finds as a [`Finding`] (a key relative to the checked
//! table, and why), never just the first; the caller adds the key prefix, the file and the line.
//!
//! Layered values are checked after layering, but a problem is reported at the layer that caused it:
//! a [`Reporter`] knows which keys the layer being checked sets, and a check that involves several
//! keys (emergency above sleep) blames the one this layer sets. An agent is thus only told about
//! what its own entry sets; `[defaults]` is told about everything else.

use std::time::Duration;

use crate::message::{Message, Role};
use crate::tokens::TokenCounter;

use super::{AgentDefaults, CompactionConfig, MIN_CONTEXT_TOKENS};

mod sections;
#[cfg(test)]
mod tests;

pub(crate) use sections::{
    check_cluster, check_embedder, check_llm, check_runtime, check_store, check_tools,
};

/// One problem: the key, relative to the checked table, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// Collects findings for one layer.
#[derive(Debug)]
pub(crate) struct Reporter<'a> {
    /// The keys (relative, e.g. `compaction.sleep_threshold`) this layer sets.
    set: &'a [String],
    /// Report problems in keys this layer does not set too (for the lowest checked layer).
    all: bool,
    findings: Vec<Finding>,
}

impl<'a> Reporter<'a> {
    /// A reporter for a layer that sets the keys in `set`; with `all`, problems in keys it does not
    /// set are reported too.
    pub(crate) fn new(set: &'a [String], all: bool) -> Self {
        Reporter {
            set,
            all,
            findings: Vec::new(),
        }
    }

    fn is_set(&self, field: &str) -> bool {
        self.set.iter().any(|s| s == field)
    }

    /// Reports a problem that each of `alternatives` (key, message) describes from its key's side:
    /// the first alternative whose key this layer sets is reported, or with `all` the first one.
    fn fail(&mut self, alternatives: &[(&str, String)]) {
        let chosen = alternatives
            .iter()
            .find(|(field, _)| self.is_set(field))
            .or_else(|| if self.all { alternatives.first() } else { None });
        if let Some((field, message)) = chosen {
            self.findings.push(Finding {
                field: (*field).to_string(),
                message: message.clone(),
            });
        }
    }

    /// Reports a problem only when this layer sets `field`.
    fn fail_if_set(&mut self, field: &str, message: String) {
        if self.is_set(field) {
            self.findings.push(Finding {
                field: field.to_string(),
                message,
            });
        }
    }

    /// The findings, in the order they were reported.
    pub(crate) fn into_findings(self) -> Vec<Finding> {
        self.findings
    }
}

/// Checks one agent's (or the defaults') layered values.
pub(crate) fn check_agent(values: &AgentDefaults, report: &mut Reporter<'_>) {
    if values.model.is_empty() {
        report.fail_if_set("model", "must not be empty".to_string());
    }
    for (field, value) in [
        ("tick_every", values.tick_every),
        ("sleep_every", values.sleep_every),
        ("tool_timeout", values.tool_timeout),
    ] {
        if value.is_zero() {
            report.fail(&[(field, "must be above zero".to_string())]);
        }
    }
    if !values.sleep_every.is_zero() && values.sleep_jitter > values.sleep_every {
        let (jitter, every) = (human(values.sleep_jitter), human(values.sleep_every));
        report.fail(&[
            (
                "sleep_jitter",
                format!("must not exceed sleep_every ({every}), got {jitter}"),
            ),
            (
                "sleep_every",
                format!("must be at least sleep_jitter ({jitter}), got {every}"),
            ),
        ]);
    }
    check_compaction(values, report);
    check_persona(values, report);
    let min_importance = values.memory.min_importance;
    if !(1..=10).contains(&min_importance) {
        report.fail(&[(
            "memory.min_importance",
            format!("must be between 1 and 10, got {min_importance}"),
        )]);
    }
}

fn check_compaction(values: &AgentDefaults, report: &mut Reporter<'_>) {
    let c = &values.compaction;
    let (sleep, emergency) = (c.sleep_threshold, c.emergency_threshold);
    let in_unit = |x: f64| x > 0.0 && x <= 1.0;
    for (field, value) in [
        ("compaction.sleep_threshold", sleep),
        ("compaction.emergency_threshold", emergency),
    ] {
        if !in_unit(value) {
            report.fail(&[(field, format!("must be in (0, 1], got {value}"))]);
        }
    }
    if in_unit(sleep) && in_unit(emergency) && emergency <= sleep {
        report.fail(&[
            (
                "compaction.emergency_threshold",
                format!("must be above sleep_threshold ({sleep}), got {emergency}"),
            ),
            (
                "compaction.sleep_threshold",
                format!("must be below emergency_threshold ({emergency}), got {sleep}"),
            ),
        ]);
    }
    if c.preserve_messages == 0 {
        report.fail(&[(
            "compaction.preserve_messages",
            "must be at least 1 (the latest turn is always kept)".to_string(),
        )]);
    }
    let ratio = c.preserve_ratio;
    if !(0.0..1.0).contains(&ratio) {
        report.fail(&[(
            "compaction.preserve_ratio",
            format!("must be in [0, 1), got {ratio}"),
        )]);
    }
    let share = c.working_share;
    if !(0.0..1.0).contains(&share) {
        report.fail(&[(
            "compaction.working_share",
            format!("must be in [0, 1), got {share}"),
        )]);
    }
    if c.max_reply_tokens == 0 {
        report.fail(&[(
            "compaction.max_reply_tokens",
            "must be at least 1 (the reply needs room)".to_string(),
        )]);
    } else if c.max_context_tokens >= MIN_CONTEXT_TOKENS
        && c.max_reply_tokens > c.max_context_tokens / 2
    {
        let half = c.max_context_tokens / 2;
        report.fail(&[
            (
                "compaction.max_reply_tokens",
                format!(
                    "must be at most half of max_context_tokens ({half}), got {}",
                    c.max_reply_tokens
                ),
            ),
            (
                "compaction.max_context_tokens",
                format!(
                    "must be at least twice max_reply_tokens ({}), got {}",
                    c.max_reply_tokens, c.max_context_tokens
                ),
            ),
        ]);
    }
    if c.min_compact_batch == 0 {
        report.fail(&[(
            "compaction.min_compact_batch",
            "must be at least 1".to_string(),
        )]);
    }
    if c.mask_after_messages == 0 {
        report.fail(&[(
            "compaction.mask_after_messages",
            "must be at least 1 (0 would mask the tool output the agent is about to read)"
                .to_string(),
        )]);
    }
    if c.mask_exempt_tools.iter().any(|t| t.trim().is_empty()) {
        report.fail(&[(
            "compaction.mask_exempt_tools",
            "tool names must not be empty".to_string(),
        )]);
    }

    let max = c.max_context_tokens;
    let summarizer = c.summarizer_context_tokens;
    // 0 means derived from the window (always below it).
    let summary = c.summary_cap();
    for (field, value) in [
        ("compaction.max_context_tokens", max),
        ("compaction.summarizer_context_tokens", summarizer),
    ] {
        if value < MIN_CONTEXT_TOKENS {
            report.fail(&[(
                field,
                format!("must be at least {MIN_CONTEXT_TOKENS}, got {value}"),
            )]);
        }
    }
    for (window_field, window) in [
        ("max_context_tokens", max),
        ("summarizer_context_tokens", summarizer),
    ] {
        if window >= MIN_CONTEXT_TOKENS && summary >= window {
            report.fail(&[
                (
                    "compaction.summary_max_tokens",
                    format!("must be below {window_field} ({window}), got {summary}"),
                ),
                (
                    if window_field == "max_context_tokens" {
                        "compaction.max_context_tokens"
                    } else {
                        "compaction.summarizer_context_tokens"
                    },
                    format!("must be above summary_max_tokens ({summary}), got {window}"),
                ),
            ]);
        }
    }
    check_input_limit(c, report);
    let sections = c.section_caps().total();
    if sections > u64::from(summary) {
        report.fail(&[
            (
                "compaction.sections",
                format!(
                    "the section caps sum to {sections} tokens, above summary_max_tokens ({summary})"
                ),
            ),
            (
                "compaction.summary_max_tokens",
                format!("must be at least the sum of the section caps ({sections}), got {summary}"),
            ),
        ]);
    }
}

/// Checks that input fits: an explicit `max_input_tokens` must not exceed what a compaction can
/// bring the prompt below ([`CompactionConfig::input_room`]), and the window must leave room for
/// some input at all. Called once the thresholds and the summary cap are known to be sane.
fn check_input_limit(c: &CompactionConfig, report: &mut Reporter<'_>) {
    let sane = c.emergency_threshold > 0.0
        && c.emergency_threshold <= 1.0
        && c.max_context_tokens >= MIN_CONTEXT_TOKENS
        && c.summary_cap() < c.max_context_tokens;
    if !sane {
        // The thresholds, the window or the summary cap are reported already.
        return;
    }
    let room = c.input_room();
    let formula = format!(
        "emergency_threshold × max_context_tokens − the summary's cap − the working context's \
         budget (working_share × max_context_tokens, at small windows at least 768 or half the \
         prompt budget) = {} × {} − {} − {}",
        c.emergency_threshold,
        c.max_context_tokens,
        c.summary_cap(),
        c.working_budget()
    );
    if c.max_input_tokens > room {
        report.fail(&[
            (
                "compaction.max_input_tokens",
                format!(
                    "must be at most {room} ({formula}: what a compaction can bring the prompt \
                     below), got {}",
                    c.max_input_tokens
                ),
            ),
            (
                "compaction.max_context_tokens",
                format!(
                    "is too small for max_input_tokens ({}): {formula} leaves {room}",
                    c.max_input_tokens
                ),
            ),
        ]);
    } else if c.input_limit() == 0 {
        report.fail(&[
            (
                "compaction.max_context_tokens",
                format!("leaves no room for input: {formula} leaves {room} tokens"),
            ),
            (
                "compaction.summary_max_tokens",
                format!("leaves no room for input: {formula} leaves {room} tokens"),
            ),
            (
                "compaction.emergency_threshold",
                format!("leaves no room for input: {formula} leaves {room} tokens"),
            ),
        ]);
    }
}

/// Checks that the persona leaves the window room: with the largest input the agent accepts it
/// must fit in what a compaction can bring the prompt below ([`CompactionConfig::input_room`]), as
/// the persona is in every prompt and compaction cannot shrink it. A persona that does not fit
/// would keep the agent above its emergency threshold whatever it compacted.
fn check_persona(values: &AgentDefaults, report: &mut Reporter<'_>) {
    let c = &values.compaction;
    let sane = c.emergency_threshold > 0.0
        && c.emergency_threshold <= 1.0
        && c.max_context_tokens >= MIN_CONTEXT_TOKENS
        && c.summary_cap() < c.max_context_tokens
        && c.max_input_tokens <= c.input_room()
        && c.input_limit() > 0;
    if !sane {
        // Reported by the compaction checks.
        return;
    }
    let counter = TokenCounter::for_model(&values.model);
    let persona = counter.count_message(&Message::new(Role::System, &values.persona));
    let (room, input) = (c.input_room(), c.input_limit());
    let left = room.saturating_sub(input);
    if persona <= left {
        return;
    }
    let why = format!(
        "{room} tokens of the window can be compacted below the emergency threshold \
         (emergency_threshold × max_context_tokens − the summary's cap − the working context's \
         budget); the largest input takes {input} of them (max_input_tokens), \
         leaving {left} for the persona"
    );
    report.fail(&[
        (
            "persona",
            format!(
                "is {persona} tokens ({} count for model `{}`), too long: {why}",
                counter.tokenizer().name(),
                values.model
            ),
        ),
        (
            "compaction.max_input_tokens",
            format!("leaves no room for the persona ({persona} tokens): {why}"),
        ),
        (
            "compaction.max_context_tokens",
            format!("is too small for the persona ({persona} tokens): {why}"),
        ),
    ]);
}

/// A duration as runtime.toml writes it (`10m`, `6h`, `1h 30m`).
pub(crate) fn human(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
