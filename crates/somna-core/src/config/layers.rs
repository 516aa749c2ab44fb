//! The override types ([`AgentOverrides`], [`CompactionOverrides`], [`MemoryOverrides`]: every
//! field optional) and their layering: `merge` lays a later layer over an earlier one and `apply` lays
//! a layer over resolved values. In both, a field a layer sets wins and a field it leaves unset
//! keeps the value below.
//!
//! The functions destructure their structs completely, so a field added to a type fails to compile
//! here until it is layered too; the flat override types list their fields once, in
//! `flat_layer!`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use super::DurationSchema;
use super::{CompactionConfig, MemoryConfig, Scorer, SectionCaps, ToolSpec};

/// Config changes of one agent; every field optional. Used for `[defaults.compaction]`,
/// `[[agents]]` entries, CLI overrides and run-time changes (persisted in `AgentRecord`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct CompactionOverrides {
    /// See [`CompactionConfig::enabled`].
    pub enabled: Option<bool>,
    /// See [`CompactionConfig::sleep_threshold`].
    pub sleep_threshold: Option<f64>,
    /// See [`CompactionConfig::emergency_threshold`].
    pub emergency_threshold: Option<f64>,
    /// See [`CompactionConfig::max_context_tokens`].
    pub max_context_tokens: Option<u32>,
    /// See [`CompactionConfig::preserve_messages`].
    pub preserve_messages: Option<u32>,
    /// See [`CompactionConfig::preserve_ratio`].
    pub preserve_ratio: Option<f64>,
    /// See [`CompactionConfig::head_size`].
    pub head_size: Option<u32>,
    /// See [`CompactionConfig::min_compact_batch`].
    pub min_compact_batch: Option<u32>,
    /// See [`CompactionConfig::compact_model`]; `""` means the agent's model.
    pub compact_model: Option<String>,
    /// See [`CompactionConfig::compact_prompt`]; `""` means the built-in prompt.
    pub compact_prompt: Option<String>,
    /// See [`CompactionConfig::summary_max_tokens`].
    pub summary_max_tokens: Option<u32>,
    /// See [`CompactionConfig::sections`]; replaces the lower layer's caps as a whole.
    pub sections: Option<SectionCaps>,
    /// See [`CompactionConfig::summarizer_context_tokens`].
    pub summarizer_context_tokens: Option<u32>,
    /// See [`CompactionConfig::warn_after_compactions`].
    pub warn_after_compactions: Option<u32>,
    /// See [`CompactionConfig::mask_after_messages`].
    pub mask_after_messages: Option<u32>,
    /// See [`CompactionConfig::mask_exempt_tools`]; replaces the lower layer's list.
    pub mask_exempt_tools: Option<Vec<String>>,
    /// See [`CompactionConfig::extraction`].
    pub extraction: Option<Scorer>,
    /// See [`CompactionConfig::max_input_tokens`]; 0 means the default derived from the window.
    pub max_input_tokens: Option<u32>,
    /// See [`CompactionConfig::max_reply_tokens`].
    pub max_reply_tokens: Option<u32>,
    /// See [`CompactionConfig::working_share`].
    pub working_share: Option<f64>,
}

/// Memory overrides; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct MemoryOverrides {
    /// See [`MemoryConfig::min_importance`].
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10))]
    pub min_importance: Option<u8>,
    /// See [`MemoryConfig::importance`].
    pub importance: Option<Scorer>,
    /// See [`MemoryConfig::reflection_threshold`].
    pub reflection_threshold: Option<u32>,
    /// See [`MemoryConfig::working_facts`].
    pub working_facts: Option<u32>,
    /// See [`MemoryConfig::working_archive`].
    pub working_archive: Option<u32>,
}

/// Per-agent changes over the defaults; every field optional.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct AgentOverrides {
    /// See [`AgentConfig::persona`].
    pub persona: Option<String>,
    /// See [`AgentConfig::model`].
    pub model: Option<String>,
    /// See [`AgentConfig::tick_every`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub tick_every: Option<Duration>,
    /// See [`AgentConfig::sleep_every`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub sleep_every: Option<Duration>,
    /// See [`AgentConfig::sleep_jitter`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub sleep_jitter: Option<Duration>,
    /// See [`AgentConfig::tool_timeout`].
    #[serde(with = "humantime_serde")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DurationSchema>))]
    pub tool_timeout: Option<Duration>,
    /// Compaction changes.
    pub compaction: CompactionOverrides,
    /// Memory changes.
    pub memory: MemoryOverrides,
    /// Host-defined tools, replacing the agent's list (set at run time through the API; in
    /// runtime.toml, tools are declared with `[[defaults.tools]]` and `[[agents.tools]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

/// Replaces `low` by `high` when `high` is set.
fn lay<T>(low: &mut Option<T>, high: Option<T>) {
    if high.is_some() {
        *low = high;
    }
}

/// The value a layer gives a field: its own when it sets one, else `base`'s.
fn pick<T: Clone>(layer: &Option<T>, base: &T) -> T {
    layer.as_ref().unwrap_or(base).clone()
}

/// `merge`, `apply`, `is_empty` and `set_fields` of an override type whose fields are each an
/// `Option` of the resolved type's field of the same name, from one list of the fields (in
/// declaration order, which `set_fields` keeps). Every function destructures the whole struct.
macro_rules! flat_layer {
    ($overrides:ident over $config:ident, example $example:literal { $($field:ident),+ $(,)? }) => {
        impl $overrides {
            /// Lays `other` over `self`: every field `other` sets wins, the others are kept.
            pub fn merge(&mut self, other: $overrides) {
                let $overrides { $($field),+ } = other;
                $(lay(&mut self.$field, $field);)+
            }

            /// `base` with every field this layer sets replaced. Not validated: resolution
            /// validates.
            pub fn apply(&self, base: &$config) -> $config {
                let $overrides { $($field),+ } = self;
                $config {
                    $($field: pick($field, &base.$field),)+
                }
            }

            /// Whether this layer sets nothing.
            pub fn is_empty(&self) -> bool {
                self.set_fields().is_empty()
            }

            #[doc = concat!("The names of the fields this layer sets, e.g. `[\"", $example, "\"]`.")]
            pub fn set_fields(&self) -> Vec<&'static str> {
                let $overrides { $($field),+ } = self;
                [$((stringify!($field), $field.is_some())),+]
                    .into_iter()
                    .filter_map(|(name, set)| set.then_some(name))
                    .collect()
            }
        }
    };
}

flat_layer!(CompactionOverrides over CompactionConfig, example "sleep_threshold" {
    enabled,
    sleep_threshold,
    emergency_threshold,
    max_context_tokens,
    preserve_messages,
    preserve_ratio,
    head_size,
    min_compact_batch,
    compact_model,
    compact_prompt,
    summary_max_tokens,
    sections,
    summarizer_context_tokens,
    warn_after_compactions,
    mask_after_messages,
    mask_exempt_tools,
    extraction,
    max_input_tokens,
    max_reply_tokens,
    working_share,
});

flat_layer!(MemoryOverrides over MemoryConfig, example "min_importance" {
    min_importance,
    importance,
    reflection_threshold,
    working_facts,
    working_archive,
});

impl AgentOverrides {
    /// Lays `other` over `self` (a later layer over an earlier one): every field `other` sets wins,
    /// field by field, down into `compaction` and `memory`; the others are kept.
    pub fn merge(&mut self, other: AgentOverrides) {
        let AgentOverrides {
            persona,
            model,
            tick_every,
            sleep_every,
            sleep_jitter,
            tool_timeout,
            compaction,
            memory,
            tools,
        } = other;
        lay(&mut self.tools, tools);
        lay(&mut self.persona, persona);
        lay(&mut self.model, model);
        lay(&mut self.tick_every, tick_every);
        lay(&mut self.sleep_every, sleep_every);
        lay(&mut self.sleep_jitter, sleep_jitter);
        lay(&mut self.tool_timeout, tool_timeout);
        self.compaction.merge(compaction);
        self.memory.merge(memory);
    }

    /// Whether this layer sets nothing.
    pub fn is_empty(&self) -> bool {
        self.set_fields().is_empty()
    }

    /// The key paths, relative to the agent, of the fields this layer sets, e.g. `["model",
    /// "compaction.sleep_threshold"]`.
    pub fn set_fields(&self) -> Vec<String> {
        let AgentOverrides {
            persona,
            model,
            tick_every,
            sleep_every,
            sleep_jitter,
            tool_timeout,
            compaction,
            memory,
            tools,
        } = self;
        let top = [
            ("tools", tools.is_some()),
            ("persona", persona.is_some()),
            ("model", model.is_some()),
            ("tick_every", tick_every.is_some()),
            ("sleep_every", sleep_every.is_some()),
            ("sleep_jitter", sleep_jitter.is_some()),
            ("tool_timeout", tool_timeout.is_some()),
        ];
        top.into_iter()
            .filter(|&(_, set)| set)
            .map(|(name, _)| name.to_string())
            .chain(
                compaction
                    .set_fields()
                    .into_iter()
                    .map(|f| format!("compaction.{f}")),
            )
            .chain(
                memory
                    .set_fields()
                    .into_iter()
                    .map(|f| format!("memory.{f}")),
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::SectionCaps;
    use super::*;

    #[test]
    fn merge_later_layer_wins_field_by_field() {
        let mut low = AgentOverrides {
            persona: Some("low persona".into()),
            model: Some("low-model".into()),
            tick_every: Some(Duration::from_secs(2)),
            compaction: CompactionOverrides {
                sleep_threshold: Some(0.5),
                max_context_tokens: Some(4096),
                ..Default::default()
            },
            memory: MemoryOverrides {
                min_importance: Some(4),
                ..Default::default()
            },
            ..Default::default()
        };
        let high = AgentOverrides {
            model: Some("high-model".into()),
            sleep_every: Some(Duration::from_secs(60)),
            compaction: CompactionOverrides {
                sleep_threshold: Some(0.6),
                emergency_threshold: Some(0.9),
                ..Default::default()
            },
            memory: MemoryOverrides {
                working_facts: Some(9),
                ..Default::default()
            },
            ..Default::default()
        };
        low.merge(high);
        // Set by the higher layer: it wins.
        assert_eq!(low.model.as_deref(), Some("high-model"));
        assert_eq!(low.sleep_every, Some(Duration::from_secs(60)));
        assert_eq!(low.compaction.sleep_threshold, Some(0.6));
        assert_eq!(low.compaction.emergency_threshold, Some(0.9));
        assert_eq!(low.memory.working_facts, Some(9));
        // Left unset by the higher layer: the lower layer's value stays.
        assert_eq!(low.persona.as_deref(), Some("low persona"));
        assert_eq!(low.tick_every, Some(Duration::from_secs(2)));
        assert_eq!(low.compaction.max_context_tokens, Some(4096));
        assert_eq!(low.memory.min_importance, Some(4));
        // Unset in both: still unset.
        assert_eq!(low.tool_timeout, None);
        assert_eq!(low.compaction.head_size, None);
    }

    #[test]
    fn merging_an_empty_layer_changes_nothing() {
        let mut layer = AgentOverrides {
            persona: Some("p".into()),
            compaction: CompactionOverrides {
                sections: Some(SectionCaps::default()),
                ..Default::default()
            },
            ..Default::default()
        };
        let before = layer.clone();
        layer.merge(AgentOverrides::default());
        assert_eq!(layer, before);
        assert!(AgentOverrides::default().is_empty());
        assert!(!layer.is_empty());
    }

    #[test]
    fn apply_replaces_only_what_is_set() {
        let base = CompactionConfig::default();
        let layer = CompactionOverrides {
            enabled: Some(false),
            mask_exempt_tools: Some(vec!["give_item".into()]),
            compact_prompt: Some("Summarize.".into()),
            ..Default::default()
        };
        let applied = layer.apply(&base);
        assert_eq!(
            applied,
            CompactionConfig {
                enabled: false,
                mask_exempt_tools: vec!["give_item".into()],
                compact_prompt: "Summarize.".into(),
                ..base.clone()
            }
        );
        assert_eq!(CompactionOverrides::default().apply(&base), base);
        let memory = MemoryOverrides {
            reflection_threshold: Some(0),
            ..Default::default()
        }
        .apply(&MemoryConfig::default());
        assert_eq!(memory.reflection_threshold, 0);
        assert_eq!(
            memory.min_importance,
            MemoryConfig::default().min_importance
        );
    }

    #[test]
    fn set_fields_name_keys_relative_to_the_agent() {
        let layer = AgentOverrides {
            model: Some("m".into()),
            compaction: CompactionOverrides {
                sleep_threshold: Some(0.5),
                ..Default::default()
            },
            memory: MemoryOverrides {
                importance: Some(super::super::Scorer::Llm),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            layer.set_fields(),
            ["model", "compaction.sleep_threshold", "memory.importance"]
        );
    }
}
