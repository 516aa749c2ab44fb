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

use super::{
    AgentDefaults, BUILTIN_TOOLS, CacheHint, ClusterSection, CompactionConfig, EmbedderProvider,
    EmbedderSection, LlmConfig, MIN_CONTEXT_TOKENS, Provider, RuntimeSection, StoreBackend,
    StoreConfig, ToolSpec,
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

/// Checks one list of host-defined tools (`[defaults] tools` or an agent's `tools`).
pub(crate) fn check_tools(tools: &[ToolSpec]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut fail = |field: String, message: String| findings.push(Finding { field, message });
    for (i, tool) in tools.iter().enumerate() {
        let name = &tool.name;
        if !is_tool_name(name) {
            fail(
                format!("tools[{i}].name"),
                format!("must be 1 to 64 characters from [A-Za-z0-9_-], got {name:?}"),
            );
        } else if BUILTIN_TOOLS.contains(&name.as_str()) {
            fail(
                format!("tools[{i}].name"),
                format!("`{name}` is a builtin tool; give the host's tool another name"),
            );
        } else if let Some(first) = tools[..i].iter().position(|t| &t.name == name) {
            fail(
                format!("tools[{i}].name"),
                format!("duplicate tool name `{name}` (also tools[{first}])"),
            );
        }
        match serde_json::from_str::<serde_json::Value>(&tool.parameters) {
            Err(e) => fail(
                format!("tools[{i}].parameters"),
                format!("is not valid JSON: {e}"),
            ),
            Ok(serde_json::Value::Object(schema)) => match schema.get("type") {
                Some(serde_json::Value::String(t)) if t == "object" => {}
                None => {}
                Some(other) => fail(
                    format!("tools[{i}].parameters"),
                    format!("must be a JSON Schema of \"type\": \"object\", got \"type\": {other}"),
                ),
            },
            Ok(other) => fail(
                format!("tools[{i}].parameters"),
                format!(
                    "must be a JSON object (a JSON Schema with \"type\": \"object\"), got {}",
                    json_kind(&other)
                ),
            ),
        }
    }
    findings
}

/// Checks `[store]`.
pub(crate) fn check_store(store: &StoreConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    if store.path.as_os_str().is_empty() {
        findings.push(finding("path", "must not be empty"));
    }
    if store.flush_every.is_zero() {
        findings.push(finding("flush_every", "must be above zero"));
    }
    if store.cache_mb == 0 {
        findings.push(finding("cache_mb", "must be above zero"));
    }
    if store.pool_size == 0 {
        findings.push(finding("pool_size", "must be at least 1"));
    }
    let schema_ok = store
        .schema
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && store.schema.len() <= 63
        && !store.schema.starts_with("pg_")
        && store
            .schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !schema_ok {
        findings.push(finding(
            "schema",
            &format!(
                "must be a plain Postgres identifier (lower-case letters, digits and _, not \
                 starting with a digit or pg_, at most 63 characters), got {:?}",
                store.schema
            ),
        ));
    }
    match store.backend {
        StoreBackend::Postgres if store.url.is_empty() => findings.push(finding(
            "url",
            "must be set when backend = \"postgres\" (postgres://user@host:5432/database)",
        )),
        StoreBackend::Postgres
            if !(store.url.expose().starts_with("postgres://")
                || store.url.expose().starts_with("postgresql://")) =>
        {
            findings.push(finding(
                "url",
                &format!(
                    "must start with postgres:// or postgresql://, got {}",
                    store.url.redacted()
                ),
            ))
        }
        _ => {}
    }
    findings
}

/// Checks `[llm]`.
pub(crate) fn check_llm(llm: &LlmConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    if llm.model.is_empty() {
        findings.push(finding("model", "must not be empty"));
    }
    if llm.timeout.is_zero() {
        findings.push(finding("timeout", "must be above zero"));
    }
    if llm.max_concurrent == 0 {
        findings.push(finding("max_concurrent", "must be at least 1"));
    }
    if !llm.api_key_env.is_empty() && !is_env_var_name(&llm.api_key_env) {
        findings.push(finding(
            "api_key_env",
            "must be the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*) that holds \
             the key, never the key itself",
        ));
    }
    if llm.cache_slots > 0 && llm.cache_hint != CacheHint::LlamaCpp {
        findings.push(finding(
            "cache_slots",
            &format!(
                "is only used with cache_hint = \"llama_cpp\" (slot affinity), but cache_hint is \
                 \"{}\"; set cache_hint = \"llama_cpp\" or remove cache_slots",
                llm.cache_hint.as_str()
            ),
        ));
    }
    if llm.provider == Provider::Openai {
        if llm.model == "builtin" {
            findings.push(finding(
                "model",
                "provider \"openai\" needs the name of a model the server serves; \"builtin\" \
                 names the offline provider's model",
            ));
        }
        if let Some(problem) = base_url_problem(&llm.base_url) {
            findings.push(Finding {
                field: "base_url".to_string(),
                message: problem,
            });
        }
    }
    findings
}

/// Checks `[cluster]`.
pub(crate) fn check_cluster(cluster: &ClusterSection) -> Vec<Finding> {
    let mut findings = Vec::new();
    if cluster.node.len() > 200 || cluster.node.chars().any(char::is_control) {
        findings.push(finding(
            "node",
            "must be at most 200 characters without control characters",
        ));
    }
    if cluster.shards == 0 || cluster.shards > 1 << 20 {
        findings.push(finding("shards", "must be 1 to 1048576"));
    }
    if cluster.lease_ttl < Duration::from_millis(100) {
        findings.push(finding("lease_ttl", "must be at least 100ms"));
    }
    if cluster.renew_every.is_zero() || cluster.renew_every.saturating_mul(3) > cluster.lease_ttl {
        findings.push(finding(
            "renew_every",
            "must be above zero and at most a third of lease_ttl",
        ));
    }
    if cluster.acquire_per_round == 0 {
        findings.push(finding("acquire_per_round", "must be at least 1"));
    }
    if cluster.poll_every.is_zero() {
        findings.push(finding("poll_every", "must be above zero"));
    }
    if !cluster.nats_url.is_empty() && !cluster.nats_url.expose().starts_with("nats://") {
        findings.push(finding(
            "nats_url",
            "must start with nats:// (e.g. \"nats://127.0.0.1:4222\"), or be empty for none",
        ));
    }
    findings
}

/// Checks `[embedder]`: what the provider needs is set.
pub(crate) fn check_embedder(embedder: &EmbedderSection) -> Vec<Finding> {
    let mut findings = Vec::new();
    match embedder.provider {
        EmbedderProvider::None => {}
        EmbedderProvider::Openai => {
            if !(embedder.base_url.starts_with("http://")
                || embedder.base_url.starts_with("https://"))
            {
                findings.push(finding(
                    "base_url",
                    "must be an http:// or https:// URL (e.g. \"http://127.0.0.1:8090/v1\") with \
                     provider = \"openai\"",
                ));
            }
            if embedder.model.trim().is_empty() {
                findings.push(finding(
                    "model",
                    "must name the embedding model with provider = \"openai\"",
                ));
            }
        }
        EmbedderProvider::Local => {
            if embedder.path.trim().is_empty() {
                findings.push(finding(
                    "path",
                    "must name the model directory with provider = \"local\" \
                     (scripts/local-embedder.sh prints it)",
                ));
            }
        }
    }
    if embedder.timeout.is_zero() {
        findings.push(finding("timeout", "must be above zero"));
    }
    if embedder.batch == 0 || embedder.batch > 2_048 {
        findings.push(finding("batch", "must be 1 to 2048"));
    }
    findings
}

/// Checks `[runtime]`.
pub(crate) fn check_runtime(runtime: &RuntimeSection) -> Vec<Finding> {
    let mut findings = Vec::new();
    if runtime.max_concurrent_sleeps == 0 {
        findings.push(finding("max_concurrent_sleeps", "must be at least 1"));
    }
    findings
}

fn finding(field: &str, message: &str) -> Finding {
    Finding {
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// Why `base_url` cannot serve as an OpenAI-compatible server's address, if it cannot.
fn base_url_problem(base_url: &str) -> Option<String> {
    if base_url.trim().is_empty() {
        return Some(
            "is required when provider is \"openai\" (e.g. \"http://127.0.0.1:8089/v1\")"
                .to_string(),
        );
    }
    match url::Url::parse(base_url) {
        Err(e) => Some(format!("is not a URL ({e}): {base_url:?}")),
        Ok(url) if !matches!(url.scheme(), "http" | "https") => Some(format!(
            "must be an http or https URL, got scheme {:?}",
            url.scheme()
        )),
        Ok(url) if url.host_str().is_none_or(str::is_empty) => {
            Some(format!("must name a host, got {base_url:?}"))
        }
        Ok(_) => None,
    }
}

/// Whether `name` is acceptable to OpenAI-compatible servers as a function name.
fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_env_var_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A duration as runtime.toml writes it (`10m`, `6h`, `1h 30m`).
pub(crate) fn human(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StructuredOutput;

    fn check(values: &AgentDefaults, set: &[&str], all: bool) -> Vec<(String, String)> {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let mut report = Reporter::new(&set, all);
        check_agent(values, &mut report);
        report
            .into_findings()
            .into_iter()
            .map(|f| (f.field, f.message))
            .collect()
    }

    #[test]
    fn builtin_defaults_pass() {
        assert_eq!(check(&AgentDefaults::builtin("m"), &[], true), []);
    }

    #[test]
    fn a_cross_check_blames_the_key_the_layer_sets() {
        let mut values = AgentDefaults::builtin("m");
        values.compaction.sleep_threshold = 0.9;
        // The layer set sleep_threshold; emergency_threshold stayed at its 0.8.
        assert_eq!(
            check(&values, &["compaction.sleep_threshold"], false),
            [(
                "compaction.sleep_threshold".to_string(),
                "must be below emergency_threshold (0.8), got 0.9".to_string()
            )]
        );
        // The layer set both: the emergency threshold is blamed.
        assert_eq!(
            check(
                &values,
                &[
                    "compaction.sleep_threshold",
                    "compaction.emergency_threshold"
                ],
                false
            ),
            [(
                "compaction.emergency_threshold".to_string(),
                "must be above sleep_threshold (0.9), got 0.8".to_string()
            )]
        );
        // The layer set neither: not its problem, unless it is the lowest layer checked.
        assert_eq!(check(&values, &["model"], false), []);
        assert_eq!(check(&values, &[], true).len(), 1);
    }

    #[test]
    fn every_problem_is_reported() {
        let mut values = AgentDefaults::builtin("m");
        values.tick_every = Duration::ZERO;
        values.sleep_jitter = Duration::from_secs(7 * 3600);
        values.compaction.preserve_messages = 0;
        values.compaction.preserve_ratio = 1.0;
        values.compaction.max_context_tokens = 100;
        values.compaction.min_compact_batch = 0;
        values.compaction.emergency_threshold = f64::NAN;
        values.memory.min_importance = 11;
        let fields: Vec<String> = check(&values, &[], true)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "tick_every",
                "sleep_jitter",
                "compaction.emergency_threshold",
                "compaction.preserve_messages",
                "compaction.preserve_ratio",
                "compaction.min_compact_batch",
                "compaction.max_context_tokens",
                "memory.min_importance",
            ]
        );
    }

    #[test]
    fn summary_caps_against_windows_and_sections() {
        let mut values = AgentDefaults::builtin("m");
        values.compaction.summary_max_tokens = 1000;
        values.compaction.summarizer_context_tokens = 1000;
        let found = check(
            &values,
            &[
                "compaction.summary_max_tokens",
                "compaction.summarizer_context_tokens",
            ],
            false,
        );
        // The built-in section caps shrink to fit a smaller summary cap.
        assert_eq!(
            found,
            [(
                "compaction.summary_max_tokens".to_string(),
                "must be below summarizer_context_tokens (1000), got 1000".to_string()
            )]
        );
        assert_eq!(values.compaction.section_caps().total(), 999);
        // Caps set by hand must fit.
        let mut values = AgentDefaults::builtin("m");
        values.compaction.summary_max_tokens = 600;
        values.compaction.sections.topic_arc = 401;
        let found = check(&values, &["compaction.sections"], false);
        assert_eq!(
            found,
            [(
                "compaction.sections".to_string(),
                "the section caps sum to 1501 tokens, above summary_max_tokens (600)".to_string()
            )]
        );
    }

    #[test]
    fn tools() {
        let tool = |name: &str, parameters: &str| ToolSpec {
            name: name.to_string(),
            description: String::new(),
            parameters: parameters.to_string(),
        };
        let object = r#"{"type":"object"}"#;
        let found: Vec<(String, String)> = check_tools(&[
            tool("give_item", object),
            tool("give_item", "[1]"),
            tool("recall", "{"),
            tool("has space", r#"{"type":"string"}"#),
            tool("ok-tool_2", "{}"),
        ])
        .into_iter()
        .map(|f| (f.field, f.message))
        .collect();
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "tools[1].name",
                "tools[1].parameters",
                "tools[2].name",
                "tools[2].parameters",
                "tools[3].name",
                "tools[3].parameters",
            ]
        );
        assert!(
            found[0]
                .1
                .contains("duplicate tool name `give_item` (also tools[0])")
        );
        assert!(found[1].1.contains("got an array"));
        assert!(found[2].1.contains("`recall` is a builtin tool"));
        assert!(found[3].1.starts_with("is not valid JSON"));
    }

    #[test]
    fn llm_section() {
        let openai = |base_url: &str| LlmConfig {
            provider: Provider::Openai,
            model: "gpt-4o-mini".to_string(),
            base_url: base_url.to_string(),
            ..LlmConfig::default()
        };
        assert_eq!(check_llm(&openai("http://127.0.0.1:8089/v1")), []);
        assert_eq!(check_llm(&openai("https://api.openai.com/v1")), []);
        for bad in [
            "",
            "localhost:8089",
            "ftp://example.com",
            "http://",
            "not a url",
        ] {
            let found = check_llm(&openai(bad));
            assert_eq!(found.len(), 1, "{bad:?}: {found:?}");
            assert_eq!(found[0].field, "base_url");
        }
        let found = check_llm(&LlmConfig {
            api_key_env: "sk-123".to_string(),
            max_concurrent: 0,
            timeout: Duration::ZERO,
            ..LlmConfig::default()
        });
        let fields: Vec<&str> = found.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["timeout", "max_concurrent", "api_key_env"]);
        // The builtin provider ignores base_url.
        assert_eq!(check_llm(&LlmConfig::default()), []);
        // A slot count means nothing without llama.cpp's hint.
        let slots = |cache_hint| LlmConfig {
            cache_hint,
            cache_slots: 4,
            ..LlmConfig::default()
        };
        assert_eq!(check_llm(&slots(CacheHint::LlamaCpp)), []);
        let found = check_llm(&slots(CacheHint::PromptCacheKey));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, "cache_slots");
        assert!(
            found[0]
                .message
                .contains("cache_hint is \"prompt_cache_key\""),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn llm_modes_parse_from_toml() {
        let config = crate::config::RuntimeConfig::parse(
            "[llm]\nstructured_output = \"json_object\"\ncache_hint = \"llama_cpp\"\ncache_slots = 4\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(config.llm.structured_output, StructuredOutput::JsonObject);
        assert_eq!(config.llm.cache_hint, CacheHint::LlamaCpp);
        assert_eq!(config.llm.cache_slots, 4);
        let err =
            crate::config::RuntimeConfig::parse("[llm]\nstructured_output = \"yes\"\n", "t.toml")
                .unwrap_err()
                .to_string();
        assert!(err.contains("llm.structured_output"), "{err}");
        assert!(err.contains("json_schema"), "{err}");
    }
}
