//! Resolution: built-in defaults → `[defaults]` → each `[[agents]]` entry → run-time
//! [`AgentOverrides`], validated, into [`ResolvedConfig`] and [`AgentConfig`]s with no `Option` left.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{ConfigError, ConfigErrors, Result};
use super::file::{RuntimeConfig, agent_labels};
use super::source::ErrorSink;
use super::validate::{
    Reporter, check_agent, check_cluster, check_embedder, check_llm, check_runtime, check_store,
    check_tools,
};
use super::{
    AgentConfig, AgentOverrides, ClusterSection, CompactionConfig, DEFAULT_PERSONA,
    EmbedderSection, LlmConfig, MemoryConfig, RuntimeSection, StoreConfig, ToolSpec,
};
use crate::id::AgentId;

/// A whole runtime's resolved, validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedConfig {
    /// `[store]`.
    pub store: StoreConfig,
    /// `[llm]`.
    pub llm: LlmConfig,
    /// `[runtime]`.
    pub runtime: RuntimeSection,
    /// `[cluster]` (used by `somna run --cluster`).
    pub cluster: ClusterSection,
    /// `[embedder]`: semantic retrieval's embedder, if any.
    pub embedder: EmbedderSection,
    /// What an agent that the file does not list (one created through the API) starts from.
    pub defaults: AgentDefaults,
    /// The agents of the file, in file order.
    pub agents: Vec<AgentConfig>,
}

/// Every setting of an agent but its id: the built-in defaults under `[defaults]`.
///
/// `compaction.compact_model` may be empty here, meaning "the agent's model";
/// [`AgentDefaults::agent`] fills it in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentDefaults {
    /// See [`AgentConfig::persona`].
    pub persona: String,
    /// See [`AgentConfig::model`].
    pub model: String,
    /// See [`AgentConfig::tick_every`].
    #[serde(with = "humantime_serde")]
    pub tick_every: Duration,
    /// See [`AgentConfig::sleep_every`].
    #[serde(with = "humantime_serde")]
    pub sleep_every: Duration,
    /// See [`AgentConfig::sleep_jitter`].
    #[serde(with = "humantime_serde")]
    pub sleep_jitter: Duration,
    /// See [`AgentConfig::tool_timeout`].
    #[serde(with = "humantime_serde")]
    pub tool_timeout: Duration,
    /// See [`AgentConfig::compaction`].
    pub compaction: CompactionConfig,
    /// See [`AgentConfig::memory`].
    pub memory: MemoryConfig,
    /// See [`AgentConfig::tools`].
    pub tools: Vec<ToolSpec>,
}

impl AgentDefaults {
    /// The built-in defaults, with `model` as the model (normally `[llm] model`).
    pub fn builtin(model: impl Into<String>) -> Self {
        AgentDefaults {
            persona: DEFAULT_PERSONA.to_string(),
            model: model.into(),
            tick_every: Duration::from_secs(1),
            sleep_every: Duration::from_secs(6 * 3600),
            sleep_jitter: Duration::from_secs(10 * 60),
            tool_timeout: Duration::from_secs(30),
            compaction: CompactionConfig::default(),
            memory: MemoryConfig::default(),
            tools: Vec::new(),
        }
    }

    /// The config of agent `id` with these settings; an empty `compact_model` becomes the model.
    pub fn agent(&self, id: AgentId) -> AgentConfig {
        let mut compaction = self.compaction.clone();
        if compaction.compact_model.is_empty() {
            compaction.compact_model = self.model.clone();
        }
        AgentConfig {
            id,
            persona: self.persona.clone(),
            model: self.model.clone(),
            tick_every: self.tick_every,
            sleep_every: self.sleep_every,
            sleep_jitter: self.sleep_jitter,
            tool_timeout: self.tool_timeout,
            compaction,
            memory: self.memory.clone(),
            tools: self.tools.clone(),
        }
    }

    /// These settings with `layer` laid over them (not validated).
    pub(crate) fn layered(&self, layer: &AgentOverrides) -> AgentDefaults {
        AgentDefaults {
            persona: layer
                .persona
                .clone()
                .unwrap_or_else(|| self.persona.clone()),
            model: layer.model.clone().unwrap_or_else(|| self.model.clone()),
            tick_every: layer.tick_every.unwrap_or(self.tick_every),
            sleep_every: layer.sleep_every.unwrap_or(self.sleep_every),
            sleep_jitter: layer.sleep_jitter.unwrap_or(self.sleep_jitter),
            tool_timeout: layer.tool_timeout.unwrap_or(self.tool_timeout),
            compaction: layer.compaction.apply(&self.compaction),
            memory: layer.memory.apply(&self.memory),
            tools: layer.tools.clone().unwrap_or_else(|| self.tools.clone()),
        }
    }

    /// The settings of a resolved agent; a `compact_model` equal to the model goes back to empty
    /// ("the agent's model"), so it follows a later change of model.
    fn from_agent(config: &AgentConfig) -> AgentDefaults {
        let mut compaction = config.compaction.clone();
        if compaction.compact_model == config.model {
            compaction.compact_model.clear();
        }
        AgentDefaults {
            persona: config.persona.clone(),
            model: config.model.clone(),
            tick_every: config.tick_every,
            sleep_every: config.sleep_every,
            sleep_jitter: config.sleep_jitter,
            tool_timeout: config.tool_timeout,
            compaction,
            memory: config.memory.clone(),
            tools: config.tools.clone(),
        }
    }
}

impl Default for ResolvedConfig {
    /// What an empty runtime.toml resolves to: the built-in defaults and no agents.
    fn default() -> Self {
        let llm = LlmConfig::default();
        ResolvedConfig {
            store: StoreConfig::default(),
            defaults: AgentDefaults::builtin(llm.model.clone()),
            llm,
            runtime: RuntimeSection::default(),
            cluster: ClusterSection::default(),
            embedder: EmbedderSection::default(),
            agents: Vec::new(),
        }
    }
}

impl ResolvedConfig {
    /// Parses `text` with `overrides` (see [`RuntimeConfig::parse_with_overrides`]) and resolves
    /// it: the whole path from runtime.toml's text to a validated config.
    pub fn load(text: &str, file: &str, overrides: &[String]) -> Result<ResolvedConfig> {
        RuntimeConfig::parse_with_overrides(text, file, overrides)?.resolve(file)
    }

    /// The resolved config of the file's agent `id`, if the file lists it.
    pub fn agent(&self, id: &AgentId) -> Option<&AgentConfig> {
        self.agents.iter().find(|a| &a.id == id)
    }

    /// The config of agent `id` with its run-time `overrides` (from its `AgentRecord`) laid over
    /// the file's entry for it, or over [`ResolvedConfig::defaults`] for an agent the file does not
    /// list. Validated like [`AgentConfig::with_overrides`].
    pub fn agent_config(&self, id: &AgentId, overrides: &AgentOverrides) -> Result<AgentConfig> {
        match self.agent(id) {
            Some(config) => config.with_overrides(overrides),
            None => self.defaults.agent(id.clone()).with_overrides(overrides),
        }
    }
}

impl AgentConfig {
    /// An agent with the built-in defaults and the builtin provider's model; handy in tests.
    pub fn with_builtin_defaults(id: AgentId) -> AgentConfig {
        AgentDefaults::builtin(LlmConfig::default().model).agent(id)
    }

    /// This config with `overrides` laid over it (the API's `configure`), validated.
    ///
    /// Errors name keys relative to the agent (`compaction.sleep_threshold`) and have no file; only
    /// problems that involve a key `overrides` sets are reported. A `compact_model` that was the
    /// agent's model follows a new `model`.
    pub fn with_overrides(&self, overrides: &AgentOverrides) -> Result<AgentConfig> {
        let values = AgentDefaults::from_agent(self).layered(overrides);
        let set = overrides.set_fields();
        let mut report = Reporter::new(&set, false);
        check_agent(&values, &mut report);
        let mut errors: Vec<ConfigError> = report
            .into_findings()
            .into_iter()
            .map(|f| ConfigError::new("", f.field, f.message))
            .collect();
        if overrides.tools.is_some() {
            errors.extend(
                check_tools(&values.tools)
                    .into_iter()
                    .map(|f| ConfigError::new("", f.field, f.message)),
            );
        }
        ConfigErrors(errors).into_result(values.agent(self.id.clone()))
    }
}

impl RuntimeConfig {
    /// Layers and validates the parsed file into a [`ResolvedConfig`], reporting every problem;
    /// `file` names the file in the errors.
    pub fn resolve(&self, file: &str) -> Result<ResolvedConfig> {
        let mut sink = ErrorSink::new(file, &self.source);
        sink.findings("store", "store", check_store(&self.store));
        sink.findings("llm", "llm", check_llm(&self.llm));
        sink.findings("runtime", "runtime", check_runtime(&self.runtime));
        sink.findings("cluster", "cluster", check_cluster(&self.cluster));
        sink.findings("embedder", "embedder", check_embedder(&self.embedder));

        let defaults_layer = self.defaults.overrides();
        let mut defaults = AgentDefaults::builtin(self.llm.model.clone()).layered(&defaults_layer);
        defaults.tools = self.defaults.tools.clone();
        let set = defaults_layer.set_fields();
        let mut report = Reporter::new(&set, true);
        check_agent(&defaults, &mut report);
        sink.findings("defaults", "defaults", report.into_findings());
        sink.findings("defaults", "defaults", check_tools(&self.defaults.tools));

        let ids: Vec<Option<&str>> = self.agents.iter().map(|a| Some(a.id.as_str())).collect();
        let labels = agent_labels(&ids);
        let mut first_use: BTreeMap<&str, usize> = BTreeMap::new();
        let mut agents = Vec::with_capacity(self.agents.len());
        for (i, (entry, label)) in self.agents.iter().zip(&labels).enumerate() {
            let lookup = format!("agents[{i}]");
            let display = format!("agents[{label}]");
            let id = match AgentId::new(entry.id.as_str()) {
                Ok(id) => match first_use.get(entry.id.as_str()) {
                    Some(&first) => {
                        let at = self
                            .source
                            .line(&format!("agents[{first}].id"))
                            .map(|line| format!(", line {line}"))
                            .unwrap_or_default();
                        sink.error(
                            &format!("{lookup}.id"),
                            &format!("{display}.id"),
                            format!(
                                "duplicate agent id {:?} (first used by agents[{first}]{at})",
                                entry.id
                            ),
                        );
                        None
                    }
                    None => {
                        first_use.insert(entry.id.as_str(), i);
                        Some(id)
                    }
                },
                Err(e) => {
                    sink.error(
                        &format!("{lookup}.id"),
                        &format!("{display}.id"),
                        e.to_string(),
                    );
                    None
                }
            };

            let layer = entry.overrides();
            let mut values = defaults.layered(&layer);
            values.tools = merge_tools(&defaults.tools, &entry.tools);
            let set = layer.set_fields();
            let mut report = Reporter::new(&set, false);
            check_agent(&values, &mut report);
            sink.findings(&lookup, &display, report.into_findings());
            sink.findings(&lookup, &display, check_tools(&entry.tools));
            if let Some(id) = id {
                agents.push(values.agent(id));
            }
        }

        ConfigErrors(sink.into_errors()).into_result(ResolvedConfig {
            store: self.store.clone(),
            llm: self.llm.clone(),
            runtime: self.runtime.clone(),
            cluster: self.cluster.clone(),
            embedder: self.embedder.clone(),
            defaults,
            agents,
        })
    }
}

/// The defaults' tools with an agent's added; an agent's tool replaces a default of the same name.
fn merge_tools(defaults: &[ToolSpec], own: &[ToolSpec]) -> Vec<ToolSpec> {
    let mut tools = defaults.to_vec();
    for tool in own {
        match tools.iter_mut().find(|t| t.name == tool.name) {
            Some(slot) => *slot = tool.clone(),
            None => tools.push(tool.clone()),
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::super::{CompactionOverrides, MemoryOverrides, Scorer};
    use super::*;

    fn id(s: &str) -> AgentId {
        AgentId::new(s).unwrap()
    }

    fn resolve(text: &str) -> ResolvedConfig {
        match ResolvedConfig::load(text, "t.toml", &[]) {
            Ok(config) => config,
            Err(e) => panic!("{e}"),
        }
    }

    fn resolve_err(text: &str) -> String {
        ResolvedConfig::load(text, "t.toml", &[])
            .unwrap_err()
            .to_string()
    }

    /// Each layer, from the built-in defaults up, sets some keys and leaves the rest.
    const LAYERED: &str = r#"
[llm]
model = "llm-model"

[defaults]
persona = "Defaults persona."
tick_every = "2s"

[defaults.compaction]
sleep_threshold = 0.6
emergency_threshold = 0.75
max_context_tokens = 4096

[defaults.memory]
min_importance = 4

[[agents]]
id = "plain"

[[agents]]
id = "custom"
model = "agent-model"
sleep_every = "1h"

[agents.compaction]
sleep_threshold = 0.5
preserve_messages = 8

[agents.memory]
importance = "llm"
"#;

    #[test]
    fn empty_file_resolves_to_the_builtin_defaults() {
        let resolved = resolve("");
        assert_eq!(resolved, ResolvedConfig::default());
        let d = &resolved.defaults;
        assert_eq!(d.persona, DEFAULT_PERSONA);
        assert_eq!(d.model, "builtin");
        assert_eq!(d.tick_every, Duration::from_secs(1));
        assert_eq!(d.sleep_every, Duration::from_secs(6 * 3600));
        assert_eq!(d.sleep_jitter, Duration::from_secs(600));
        assert_eq!(d.tool_timeout, Duration::from_secs(30));
        assert_eq!(d.compaction.sleep_threshold, 0.70);
        assert_eq!(d.compaction.emergency_threshold, 0.80);
        assert_eq!(d.compaction.max_context_tokens, 8192);
        assert_eq!(d.compaction.preserve_messages, 20);
        assert_eq!(d.compaction.preserve_ratio, 0.20);
        // 0: derived from the window (15%, 200 to 1,500 tokens).
        assert_eq!(d.compaction.summary_max_tokens, 0);
        assert_eq!(d.compaction.summary_cap(), 1_228);
        assert_eq!(d.memory.min_importance, 3);
        assert_eq!(resolved.store.flush_every, Duration::from_millis(500));
        assert_eq!(resolved.store.history_cache_mb, 8);
        assert_eq!(resolved.llm.timeout, Duration::from_secs(60));
        assert_eq!(resolved.runtime.max_concurrent_sleeps, 4);
        assert!(resolved.agents.is_empty());
    }

    #[test]
    fn defaults_win_over_builtins_field_by_field() {
        let resolved = resolve(LAYERED);
        let plain = resolved.agent(&id("plain")).unwrap();
        // Set by [defaults].
        assert_eq!(plain.persona, "Defaults persona.");
        assert_eq!(plain.tick_every, Duration::from_secs(2));
        assert_eq!(plain.compaction.sleep_threshold, 0.6);
        assert_eq!(plain.compaction.emergency_threshold, 0.75);
        assert_eq!(plain.compaction.max_context_tokens, 4096);
        assert_eq!(plain.memory.min_importance, 4);
        // Not set by [defaults]: built in, or [llm]'s model.
        assert_eq!(plain.model, "llm-model");
        assert_eq!(plain.compaction.compact_model, "llm-model");
        assert_eq!(plain.sleep_every, Duration::from_secs(6 * 3600));
        assert_eq!(plain.compaction.preserve_messages, 20);
        assert_eq!(plain.memory.importance, Scorer::Heuristic);
        // An agent with an empty entry is exactly the defaults.
        assert_eq!(*plain, resolved.defaults.agent(id("plain")));
    }

    #[test]
    fn an_agent_entry_wins_over_defaults_field_by_field() {
        let resolved = resolve(LAYERED);
        let custom = resolved.agent(&id("custom")).unwrap();
        // Set by the entry.
        assert_eq!(custom.model, "agent-model");
        assert_eq!(custom.compaction.compact_model, "agent-model");
        assert_eq!(custom.sleep_every, Duration::from_secs(3600));
        assert_eq!(custom.compaction.sleep_threshold, 0.5);
        assert_eq!(custom.compaction.preserve_messages, 8);
        assert_eq!(custom.memory.importance, Scorer::Llm);
        // Not set by the entry: [defaults], then built in.
        assert_eq!(custom.persona, "Defaults persona.");
        assert_eq!(custom.compaction.emergency_threshold, 0.75);
        assert_eq!(custom.compaction.max_context_tokens, 4096);
        assert_eq!(custom.memory.min_importance, 4);
        assert_eq!(custom.compaction.min_compact_batch, 5);
        assert_eq!(custom.tool_timeout, Duration::from_secs(30));
    }

    #[test]
    fn run_time_overrides_win_over_the_entry_field_by_field() {
        let resolved = resolve(LAYERED);
        let overrides = AgentOverrides {
            persona: Some("Changed at run time.".into()),
            compaction: CompactionOverrides {
                emergency_threshold: Some(0.9),
                ..Default::default()
            },
            memory: MemoryOverrides {
                working_facts: Some(12),
                ..Default::default()
            },
            ..Default::default()
        };
        let custom = resolved.agent_config(&id("custom"), &overrides).unwrap();
        let file = resolved.agent(&id("custom")).unwrap();
        assert_eq!(
            custom,
            AgentConfig {
                persona: "Changed at run time.".into(),
                compaction: CompactionConfig {
                    emergency_threshold: 0.9,
                    ..file.compaction.clone()
                },
                memory: MemoryConfig {
                    working_facts: 12,
                    ..file.memory.clone()
                },
                ..file.clone()
            }
        );
        // No overrides: the file's config, unchanged.
        assert_eq!(
            resolved
                .agent_config(&id("custom"), &AgentOverrides::default())
                .unwrap(),
            *file
        );
    }

    #[test]
    fn an_agent_the_file_does_not_list_starts_from_the_defaults() {
        let resolved = resolve(LAYERED);
        let overrides = AgentOverrides {
            model: Some("own-model".into()),
            ..Default::default()
        };
        let config = resolved.agent_config(&id("newcomer"), &overrides).unwrap();
        assert_eq!(config.id.as_str(), "newcomer");
        assert_eq!(config.persona, "Defaults persona.");
        assert_eq!(config.compaction.sleep_threshold, 0.6);
        assert_eq!(config.model, "own-model");
        assert_eq!(config.compaction.compact_model, "own-model");
    }

    #[test]
    fn compact_model_is_never_empty_and_follows_the_model() {
        let resolved = resolve(
            "[defaults.compaction]\ncompact_model = \"\"\n[[agents]]\nid = \"a\"\n\
             [[agents]]\nid = \"b\"\n[agents.compaction]\ncompact_model = \"small\"\n",
        );
        let a = resolved.agent(&id("a")).unwrap();
        let b = resolved.agent(&id("b")).unwrap();
        assert_eq!(a.compaction.compact_model, "builtin");
        assert_eq!(b.compaction.compact_model, "small");
        let new_model = AgentOverrides {
            model: Some("big".into()),
            ..Default::default()
        };
        // Following the model, it changes with it; set on its own, it stays.
        assert_eq!(
            a.with_overrides(&new_model)
                .unwrap()
                .compaction
                .compact_model,
            "big"
        );
        assert_eq!(
            b.with_overrides(&new_model)
                .unwrap()
                .compaction
                .compact_model,
            "small"
        );
        let back_to_model = AgentOverrides {
            compaction: CompactionOverrides {
                compact_model: Some(String::new()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            b.with_overrides(&back_to_model)
                .unwrap()
                .compaction
                .compact_model,
            "builtin"
        );
    }

    #[test]
    fn with_overrides_validates_what_it_changes() {
        let config = AgentConfig::with_builtin_defaults(id("a"));
        let bad = AgentOverrides {
            sleep_jitter: Some(Duration::from_secs(7 * 3600)),
            compaction: CompactionOverrides {
                sleep_threshold: Some(0.95),
                preserve_messages: Some(0),
                ..Default::default()
            },
            memory: MemoryOverrides {
                min_importance: Some(0),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            config.with_overrides(&bad).unwrap_err().to_string(),
            "sleep_jitter: must not exceed sleep_every (6h), got 7h\n\
             compaction.sleep_threshold: must be below emergency_threshold (0.8), got 0.95\n\
             compaction.preserve_messages: must be at least 1 (the latest turn is always kept)\n\
             memory.min_importance: must be between 1 and 10, got 0"
        );
    }

    #[test]
    fn tools_add_up_and_an_agent_tool_replaces_a_default_of_its_name() {
        let resolved = resolve(
            r#"
[[defaults.tools]]
name = "look"
description = "Look around."

[[defaults.tools]]
name = "give_item"
description = "Default giving."

[[agents]]
id = "smith"

[[agents.tools]]
name = "give_item"
description = "Smith's giving."

[[agents.tools]]
name = "forge"
"#,
        );
        let smith = resolved.agent(&id("smith")).unwrap();
        let tools: Vec<(&str, &str)> = smith
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.description.as_str()))
            .collect();
        assert_eq!(
            tools,
            [
                ("look", "Look around."),
                ("give_item", "Smith's giving."),
                ("forge", "")
            ]
        );
        assert_eq!(resolved.defaults.tools.len(), 2);
    }

    #[test]
    fn a_problem_in_defaults_is_reported_once_not_per_agent() {
        let text = "[defaults.compaction]\nsleep_threshold = 0.9\n\n[[agents]]\nid = \"a\"\n\
                    [[agents]]\nid = \"b\"\n";
        assert_eq!(
            resolve_err(text),
            "t.toml:2: defaults.compaction.sleep_threshold: must be below emergency_threshold \
             (0.8), got 0.9"
        );
    }

    #[test]
    fn agents_are_named_by_id_once_known() {
        let text = "[[agents]]\nid = \"smith\"\ntick_every = \"0s\"\n\n\
                    [[agents]]\nid = \"bad id\"\ntick_every = \"0s\"\n\n\
                    [[agents]]\nid = \"smith\"\n";
        assert_eq!(
            resolve_err(text),
            "t.toml:3: agents[0].tick_every: must be above zero\n\
             t.toml:6: agents[1].id: agent id \"bad id\" has characters outside [A-Za-z0-9_.-]\n\
             t.toml:7: agents[1].tick_every: must be above zero\n\
             t.toml:10: agents[2].id: duplicate agent id \"smith\" (first used by agents[0], line 2)"
        );
        let text = "[[agents]]\nid = \"smith\"\ntick_every = \"0s\"\n";
        assert_eq!(
            resolve_err(text),
            "t.toml:3: agents[smith].tick_every: must be above zero"
        );
    }

    #[test]
    fn input_limit_is_derived_from_the_window_unless_set() {
        let resolved = resolve(
            "[defaults.compaction]\nmax_context_tokens = 4096\n\n[[agents]]\nid = \"plain\"\n\n\
             [[agents]]\nid = \"set\"\ncompaction.max_input_tokens = 700\n",
        );
        // The summary's cap is 15% of the window and the working context a quarter of it:
        // (0.8 × 4096 − 614 − 819) / 2 = 921; the default window:
        // (0.8 × 8192 − 1228 − 1638) / 2 = 1843.
        let plain = resolved.agent(&id("plain")).unwrap();
        assert_eq!(plain.compaction.max_input_tokens, 0);
        assert_eq!(plain.compaction.summary_cap(), 614);
        assert_eq!(plain.compaction.input_room(), 1843);
        assert_eq!(plain.compaction.input_limit(), 921);
        let set = resolved.agent(&id("set")).unwrap();
        assert_eq!(set.compaction.input_limit(), 700);
        assert_eq!(CompactionConfig::default().input_limit(), 1843);
        // The derived limit follows a run-time change of the window.
        let wider = plain
            .with_overrides(&AgentOverrides {
                compaction: CompactionOverrides {
                    max_context_tokens: Some(8192),
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap();
        assert_eq!(wider.compaction.input_limit(), 1843);
        // A run-time limit above what compaction frees is refused, naming the key.
        let err = plain
            .with_overrides(&AgentOverrides {
                compaction: CompactionOverrides {
                    max_input_tokens: Some(5000),
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("compaction.max_input_tokens: must be at most 1843"),
            "{err}"
        );
    }
}
