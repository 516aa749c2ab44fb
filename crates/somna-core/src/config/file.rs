//! [`RuntimeConfig`]: runtime.toml as written, its parsing, and its deserialization errors.
//!
//! Parsing goes: TOML syntax (the first syntax error, with line and column) → `key.path=value`
//! overrides merged into the document → each section, and each `[[agents]]` entry, deserialized on
//! its own with `serde_path_to_error`. When a key fails (wrong type, unknown key, bad duration), the
//! error is recorded, the key is removed and the section is read again, so one pass reports every
//! such error in the file, each with its full key path and line.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_path_to_error::Segment;
use toml::Value;
use toml::de::DeTable;

use super::error::{ConfigError, ConfigErrors, Result};
use super::overrides::apply_override;
use super::source::{ErrorSink, SourceMap, concat_path, join_key, line_col};
use super::{
    AgentOverrides, ClusterSection, CompactionOverrides, EmbedderSection, LlmConfig,
    MemoryOverrides, RuntimeSection, StoreConfig, ToolSpec,
};
use crate::id::AgentId;

/// runtime.toml as written: every section optional, unknown keys rejected.
///
/// [`RuntimeConfig::parse`] reads it; [`RuntimeConfig::resolve`](RuntimeConfig::resolve) layers
/// and validates it into a [`ResolvedConfig`](super::ResolvedConfig). A parsed config remembers
/// the line of each key, so resolution errors can name it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// `[store]`: where the sled database lives.
    pub store: StoreConfig,
    /// `[llm]`: the provider and the default model.
    pub llm: LlmConfig,
    /// `[runtime]`: threads and the sleep cap.
    pub runtime: RuntimeSection,
    /// `[cluster]`: node name, shards and leases for `somna run --cluster`.
    pub cluster: ClusterSection,
    /// `[embedder]`: the embedder of semantic retrieval (none by default: BM25 alone).
    pub embedder: EmbedderSection,
    /// `[defaults]`: what every agent gets unless its entry says otherwise.
    pub defaults: DefaultsSection,
    /// `[[agents]]`: the agents the runtime hosts from the start.
    pub agents: Vec<AgentEntry>,
    /// The line of each key in the parsed text.
    #[serde(skip)]
    pub(crate) source: SourceMap,
}

/// The overrides that a `[defaults]` section or an `[[agents]]` entry lays over the layer below:
/// its fields of the agent layer, which both name as [`AgentOverrides`] does (`tools` is not
/// laid: entries add their tools to the defaults' instead).
macro_rules! layer_of {
    ($section:expr) => {
        AgentOverrides {
            persona: $section.persona.clone(),
            model: $section.model.clone(),
            tick_every: $section.tick_every,
            sleep_every: $section.sleep_every,
            sleep_jitter: $section.sleep_jitter,
            tool_timeout: $section.tool_timeout,
            compaction: $section.compaction.clone(),
            memory: $section.memory.clone(),
            tools: None,
        }
    };
}

/// `[defaults]`: the layer between the built-in defaults and each agent's entry.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DefaultsSection {
    /// Every agent's persona unless its entry sets one.
    pub persona: Option<String>,
    /// Every agent's model unless its entry sets one; `[llm] model` when unset.
    pub model: Option<String>,
    /// See [`AgentConfig::tick_every`](super::AgentConfig::tick_every).
    #[serde(with = "humantime_serde")]
    pub tick_every: Option<Duration>,
    /// See [`AgentConfig::sleep_every`](super::AgentConfig::sleep_every).
    #[serde(with = "humantime_serde")]
    pub sleep_every: Option<Duration>,
    /// See [`AgentConfig::sleep_jitter`](super::AgentConfig::sleep_jitter).
    #[serde(with = "humantime_serde")]
    pub sleep_jitter: Option<Duration>,
    /// See [`AgentConfig::tool_timeout`](super::AgentConfig::tool_timeout).
    #[serde(with = "humantime_serde")]
    pub tool_timeout: Option<Duration>,
    /// `[defaults.compaction]`.
    pub compaction: CompactionOverrides,
    /// `[defaults.memory]`.
    pub memory: MemoryOverrides,
    /// Host-defined tools every agent gets (`[[defaults.tools]]`).
    pub tools: Vec<ToolSpec>,
}

impl DefaultsSection {
    /// The section as a layer of overrides (everything but `tools`).
    pub fn overrides(&self) -> AgentOverrides {
        layer_of!(self)
    }
}

/// One `[[agents]]` entry: an id and the agent's own layer over `[defaults]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// The agent's id (checked with [`AgentId::new`] during resolution).
    pub id: String,
    /// The agent's system prompt.
    #[serde(default)]
    pub persona: Option<String>,
    /// The agent's model.
    #[serde(default)]
    pub model: Option<String>,
    /// See [`AgentConfig::tick_every`](super::AgentConfig::tick_every).
    #[serde(default, with = "humantime_serde")]
    pub tick_every: Option<Duration>,
    /// See [`AgentConfig::sleep_every`](super::AgentConfig::sleep_every).
    #[serde(default, with = "humantime_serde")]
    pub sleep_every: Option<Duration>,
    /// See [`AgentConfig::sleep_jitter`](super::AgentConfig::sleep_jitter).
    #[serde(default, with = "humantime_serde")]
    pub sleep_jitter: Option<Duration>,
    /// See [`AgentConfig::tool_timeout`](super::AgentConfig::tool_timeout).
    #[serde(default, with = "humantime_serde")]
    pub tool_timeout: Option<Duration>,
    /// `[agents.compaction]`: this agent's compaction changes.
    #[serde(default)]
    pub compaction: CompactionOverrides,
    /// `[agents.memory]`: this agent's memory changes.
    #[serde(default)]
    pub memory: MemoryOverrides,
    /// Host-defined tools for this agent, added to `[defaults]`'s (a tool of the same name
    /// replaces the default one for this agent).
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

impl AgentEntry {
    /// An entry with only an id: the agent gets the defaults.
    pub fn new(id: impl Into<String>) -> Self {
        AgentEntry {
            id: id.into(),
            persona: None,
            model: None,
            tick_every: None,
            sleep_every: None,
            sleep_jitter: None,
            tool_timeout: None,
            compaction: CompactionOverrides::default(),
            memory: MemoryOverrides::default(),
            tools: Vec::new(),
        }
    }

    /// The entry as a layer of overrides (everything but `id` and `tools`).
    pub fn overrides(&self) -> AgentOverrides {
        layer_of!(self)
    }
}

/// The top-level tables of runtime.toml.
const SECTIONS: &[&str] = &[
    "store", "llm", "runtime", "cluster", "embedder", "defaults", "agents",
];

/// How many keys one section may lose to errors before reading it stops (a bound on the re-reads;
/// real files never come close).
const MAX_ERRORS_PER_SECTION: usize = 100;

impl RuntimeConfig {
    /// Parses runtime.toml's text; `file` names it in error messages.
    ///
    /// Reports the first TOML syntax error, or else every unknown key, wrong type and bad duration
    /// at once. Semantic checks (ranges, thresholds, ids) are [`RuntimeConfig::resolve`]'s.
    pub fn parse(text: &str, file: &str) -> Result<RuntimeConfig> {
        Self::parse_with_overrides(text, file, &[])
    }

    /// Like [`RuntimeConfig::parse`], with `key.path=value` overrides (from the CLI or
    /// [`overrides_from_env`](super::overrides_from_env)) merged into the document first, in
    /// order, so a later one wins. Errors about a key an override set carry no line.
    pub fn parse_with_overrides(
        text: &str,
        file: &str,
        overrides: &[String],
    ) -> Result<RuntimeConfig> {
        let document = DeTable::parse(text).map_err(|e| syntax_error(file, text, &e))?;
        let mut source = SourceMap::from_document(text, &document);
        let mut root: toml::Table = text.parse().map_err(|e| syntax_error(file, text, &e))?;

        let mut errors = ConfigErrors::default();
        for spec in overrides {
            if let Err(e) = apply_override(&mut root, spec, &mut source) {
                errors.0.push(ConfigError::new(file, e.key, e.message));
            }
        }

        let mut sink = ErrorSink::new(file, &source);
        for key in root.keys() {
            if !SECTIONS.contains(&key.as_str()) {
                sink.error(key, key, unknown_key_message(key, SECTIONS));
            }
        }
        let store = read_section(&mut sink, &root, "store");
        let llm = read_section(&mut sink, &root, "llm");
        let runtime = read_section(&mut sink, &root, "runtime");
        let cluster = read_section(&mut sink, &root, "cluster");
        let embedder = read_section(&mut sink, &root, "embedder");
        let defaults = read_section(&mut sink, &root, "defaults");
        let agents = read_agents(&mut sink, root.get("agents"));
        errors.0.extend(sink.into_errors());

        errors.into_result(RuntimeConfig {
            store,
            llm,
            runtime,
            cluster,
            embedder,
            defaults,
            agents,
            source,
        })
    }
}

/// The labels agents are named by in errors: the id when it is valid and unique, else the index.
/// (Counted once per id: comparing every id with every other made 100,000 agents take seconds.)
pub(crate) fn agent_labels(ids: &[Option<&str>]) -> Vec<String> {
    let mut counts: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(ids.len());
    for id in ids.iter().flatten() {
        *counts.entry(*id).or_default() += 1;
    }
    ids.iter()
        .enumerate()
        .map(|(i, id)| match id {
            Some(id) if AgentId::new(*id).is_ok() && counts.get(*id) == Some(&1) => {
                (*id).to_string()
            }
            _ => i.to_string(),
        })
        .collect()
}

fn syntax_error(file: &str, text: &str, error: &toml::de::Error) -> ConfigErrors {
    let mut config_error = ConfigError::new(file, "", format!("invalid TOML: {}", error.message()));
    if let Some(span) = error.span() {
        let (line, column) = line_col(text, span.start);
        config_error.line = Some(line);
        config_error.column = Some(column);
    }
    config_error.into()
}

/// Reads the top-level table `key`, or its default when the file has none.
fn read_section<T: DeserializeOwned + Default>(
    sink: &mut ErrorSink<'_>,
    root: &toml::Table,
    key: &str,
) -> T {
    match root.get(key) {
        None => T::default(),
        Some(value) => read_value(sink, value.clone(), key, key).unwrap_or_default(),
    }
}

/// Reads `[[agents]]`, each entry on its own so that one bad entry does not hide the others.
fn read_agents(sink: &mut ErrorSink<'_>, agents: Option<&Value>) -> Vec<AgentEntry> {
    let items = match agents {
        None => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            sink.error(
                "agents",
                "agents",
                format!(
                    "must be an array of tables (write each agent as [[agents]]), got a {}",
                    other.type_str()
                ),
            );
            return Vec::new();
        }
    };
    let ids: Vec<Option<&str>> = items
        .iter()
        .map(|item| item.get("id").and_then(Value::as_str))
        .collect();
    let labels = agent_labels(&ids);
    items
        .iter()
        .zip(&labels)
        .enumerate()
        .filter_map(|(i, (item, label))| {
            read_value(
                sink,
                item.clone(),
                &format!("agents[{i}]"),
                &format!("agents[{label}]"),
            )
        })
        .collect()
}

/// Deserializes `value`; on an error, records it, removes the offending key and tries again, so
/// every error of the value is recorded. `None` when there was any error.
fn read_value<T: DeserializeOwned>(
    sink: &mut ErrorSink<'_>,
    mut value: Value,
    lookup_prefix: &str,
    display_prefix: &str,
) -> Option<T> {
    let mut failed = false;
    for _ in 0..MAX_ERRORS_PER_SECTION {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(read) => return (!failed).then_some(read),
            Err(error) => {
                failed = true;
                let segments: Vec<Segment> = error.path().iter().cloned().collect();
                record_serde_error(
                    sink,
                    lookup_prefix,
                    display_prefix,
                    &segments,
                    error.inner().message(),
                );
                if !remove_at(&mut value, &segments) {
                    return None;
                }
            }
        }
    }
    None
}

fn record_serde_error(
    sink: &mut ErrorSink<'_>,
    lookup_prefix: &str,
    display_prefix: &str,
    segments: &[Segment],
    message: &str,
) {
    let mut relative = String::new();
    for segment in segments {
        match segment {
            Segment::Map { key } | Segment::Enum { variant: key } => {
                relative = join_key(&relative, key);
            }
            Segment::Seq { index } => relative.push_str(&format!("[{index}]")),
            Segment::Unknown => relative = join_key(&relative, "?"),
        }
    }
    let mut lookup = concat_path(lookup_prefix, &relative);
    let mut display = concat_path(display_prefix, &relative);
    let message = if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        unknown_key_message(key, &known)
    } else if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.trim_end_matches('`');
        lookup = join_key(&lookup, key);
        display = join_key(&display, key);
        "is required".to_string()
    } else {
        plain_type_names(message)
    };
    sink.error(&lookup, &display, message);
}

/// Rewrites serde's Rust-flavoured words into TOML's: `struct LlmConfig` and `map` are tables,
/// `sequence` is an array; a bad duration gets examples.
fn plain_type_names(message: &str) -> String {
    let mut out = message
        .replace("invalid type: map", "invalid type: table")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("expected a sequence", "expected an array");
    if let Some(at) = out.find("expected struct ") {
        let name_end = out[at + "expected struct ".len()..]
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .map_or(out.len(), |i| at + "expected struct ".len() + i);
        out.replace_range(at..name_end, "expected a table");
    }
    if out.ends_with("expected a duration") {
        out.push_str(" such as \"1s\", \"10m\" or \"6h\"");
    }
    for (rust, plain) in [
        ("expected u8", "expected an integer from 0 to 255"),
        ("expected u32", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected f64", "expected a number"),
    ] {
        if let Some(head) = out.strip_suffix(rust) {
            out = format!("{head}{plain}");
        }
    }
    out
}

/// "unknown key", with the closest known key when one is close, else the known keys.
pub(crate) fn unknown_key_message(key: &str, known: &[&str]) -> String {
    let close = known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .min()
        .filter(|&(distance, _)| distance <= 2.max(key.chars().count() / 3))
        .map(|(_, k)| k);
    // A key written short (`head` for `head_size`) is close too, when only one key starts so.
    let starts: Vec<&str> = known
        .iter()
        .copied()
        .filter(|k| key.len() >= 3 && k.starts_with(key))
        .collect();
    let suggestion = close.or(match starts.as_slice() {
        [only] => Some(*only),
        _ => None,
    });
    match suggestion {
        Some(suggestion) => format!("unknown key; did you mean `{suggestion}`?"),
        None if known.is_empty() => "unknown key".to_string(),
        None => {
            let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            format!("unknown key; expected one of {}", list.join(", "))
        }
    }
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// Removes the key an error points at so the value can be read again: the last table key on the
/// path (an array's element is never removed, which would renumber the ones after it: the whole
/// array goes). Returns whether something was removed.
fn remove_at(root: &mut Value, segments: &[Segment]) -> bool {
    let Some(last_key) = segments
        .iter()
        .rposition(|s| matches!(s, Segment::Map { .. }))
    else {
        return false;
    };
    let mut node = root;
    for segment in &segments[..last_key] {
        let next = match (segment, node) {
            (Segment::Map { key }, Value::Table(table)) => table.get_mut(key),
            (Segment::Seq { index }, Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    match (&segments[last_key], node) {
        (Segment::Map { key }, Value::Table(table)) => table.remove(key).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        match RuntimeConfig::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn empty_file_is_all_defaults() {
        let config = RuntimeConfig::parse("", "t.toml").unwrap();
        assert_eq!(config, RuntimeConfig::default());
        assert_eq!(config.llm.model, "builtin");
        assert!(config.agents.is_empty());
    }

    #[test]
    fn syntax_error_names_line_and_column() {
        assert_eq!(
            errors("[llm]\nmodel = gpt\n"),
            ["t.toml:2:9: invalid TOML: string values must be quoted, expected literal string"]
        );
    }

    #[test]
    fn every_serde_error_is_reported_with_its_path() {
        let text = "\
[llm]
timeout = 5
providr = \"openai\"

[defaults.compaction]
sleep_threshold = \"high\"
max_context_tokens = 4096

[[agents]]
id = \"smith\"
tick_every = \"soon\"

[[agents]]
model = \"m\"
";
        assert_eq!(
            errors(text),
            [
                "t.toml:2: llm.timeout: invalid type: integer `5`, expected a duration such as \"1s\", \"10m\" or \"6h\"",
                "t.toml:3: llm.providr: unknown key; did you mean `provider`?",
                "t.toml:6: defaults.compaction.sleep_threshold: invalid type: string \"high\", expected a number",
                "t.toml:11: agents[smith].tick_every: invalid value: string \"soon\", expected a duration such as \"1s\", \"10m\" or \"6h\"",
                "t.toml:13: agents[1].id: is required",
            ]
        );
    }

    #[test]
    fn unknown_sections_and_non_tables() {
        assert_eq!(
            errors("[agent]\nid = \"x\"\n"),
            ["t.toml:1: agent: unknown key; did you mean `agents`?"]
        );
        assert_eq!(
            errors("llm = 5\n[agents]\nid = \"x\"\n"),
            [
                "t.toml:1: llm: invalid type: integer `5`, expected a table",
                "t.toml:2: agents: must be an array of tables (write each agent as [[agents]]), got a table",
            ]
        );
    }

    #[test]
    fn tool_parameters_may_be_a_table() {
        let text = "\
[[defaults.tools]]
name = \"give_item\"
parameters = { type = \"object\", properties = { item = { type = \"string\" } } }

[[defaults.tools]]
name = \"wave\"
parameters = '{\"type\":\"object\"}'

[[defaults.tools]]
name = \"bow\"
";
        let config = RuntimeConfig::parse(text, "t.toml").unwrap();
        let parameters: Vec<serde_json::Value> = config
            .defaults
            .tools
            .iter()
            .map(|t| serde_json::from_str(&t.parameters).unwrap())
            .collect();
        assert_eq!(
            parameters,
            [
                serde_json::json!({"type": "object", "properties": {"item": {"type": "string"}}}),
                serde_json::json!({"type": "object"}),
                serde_json::json!({"type": "object", "properties": {}}),
            ]
        );
    }

    #[test]
    fn overrides_are_merged_before_reading() {
        let text = "[llm]\nmodel = \"m\"\n\n[[agents]]\nid = \"smith\"\n";
        let config = RuntimeConfig::parse_with_overrides(
            text,
            "t.toml",
            &[
                "llm.provider=openai".to_string(),
                "llm.base_url=http://127.0.0.1:8089/v1".to_string(),
                "agents.smith.compaction.sleep_threshold=0.5".to_string(),
                "llm.model=first".to_string(),
                "llm.model=second".to_string(),
            ],
        )
        .unwrap();
        assert_eq!(config.llm.provider, super::super::Provider::Openai);
        assert_eq!(config.llm.base_url, "http://127.0.0.1:8089/v1");
        assert_eq!(config.llm.model, "second");
        assert_eq!(config.agents[0].compaction.sleep_threshold, Some(0.5));
    }

    #[test]
    fn errors_in_overridden_values_have_no_line() {
        let err = RuntimeConfig::parse_with_overrides(
            "[llm]\nmax_retries = 2\n",
            "t.toml",
            &["llm.max_retries=lots".to_string(), "llm.x.y=1".to_string()],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "t.toml: llm.max_retries: invalid type: string \"lots\", expected a non-negative integer \
             (the value comes from an override)\n\
             t.toml: llm.x: unknown key; expected one of `provider`, `model`, `base_url`, \
             `api_key_env`, `timeout`, `max_retries`, `max_concurrent`, `structured_output`, \
             `cache_hint`, `cache_slots` (the value comes from an override)"
        );
    }

    #[test]
    fn closest_key() {
        assert_eq!(edit_distance("sleep_treshold", "sleep_threshold"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        for (key, known, message) in [
            (
                "tick_evry",
                ["tick_every", "sleep_every"],
                "unknown key; did you mean `tick_every`?",
            ),
            (
                "head",
                ["head_size", "sleep_every"],
                "unknown key; did you mean `head_size`?",
            ),
            (
                "sleep",
                ["sleep_every", "sleep_jitter"],
                "unknown key; expected one of `sleep_every`, `sleep_jitter`",
            ),
            (
                "colour",
                ["a", "b"],
                "unknown key; expected one of `a`, `b`",
            ),
        ] {
            assert_eq!(unknown_key_message(key, &known), message, "{key}");
        }
    }

    #[test]
    fn agent_labels_prefer_valid_unique_ids() {
        assert_eq!(
            agent_labels(&[Some("smith"), Some("a b"), None, Some("dup"), Some("dup")]),
            ["smith", "1", "2", "3", "4"]
        );
    }
}
