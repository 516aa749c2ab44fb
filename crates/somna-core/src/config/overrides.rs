//! `key.path=value` overrides (from the CLI or the environment), merged into the parsed document
//! before it is deserialized.
//!
//! A key path is dotted keys, where an array (only `agents` in practice) is indexed by position or
//! by the `id` of its element: `agents.1.model`, `agents[1].model`, `agents.bard.model` and
//! `agents[bard].model` all name the same key when `bard` is the second agent. The value is read as
//! a TOML value (`0.6`, `true`, `"text"`, `["a", "b"]`, `{ a = 1 }`) and, when it is not one, taken
//! as a plain string (`openai`, `6h`, `gpt-4o-mini`).

use toml::{Table, Value};

use super::source::{SourceMap, join_key};

/// Environment variables starting with this prefix are read as overrides by
/// [`overrides_from_env`]: `SOMNA__LLM__PROVIDER=openai` is `llm.provider=openai`.
pub const ENV_PREFIX: &str = "SOMNA__";

/// Turns environment variables into `key.path=value` overrides: those named `SOMNA__…` are kept,
/// the rest of the name is lower-cased and `__` separates keys (`SOMNA__DEFAULTS__COMPACTION__
/// SLEEP_THRESHOLD=0.6` is `defaults.compaction.sleep_threshold=0.6`). The result is sorted by key
/// so that it does not depend on the environment's order.
///
/// The caller reads the environment (somna-core does no IO) and passes, for example,
/// `std::env::vars()`.
pub fn overrides_from_env<I, K, V>(vars: I) -> Vec<String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut found: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let rest = name.as_ref().strip_prefix(ENV_PREFIX)?;
            let parts: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            if parts.iter().any(String::is_empty) {
                return None;
            }
            Some((parts.join("."), value.as_ref().to_string()))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect()
}

/// Why an override could not be applied: the key as written and the reason.
#[derive(Debug)]
pub(crate) struct OverrideError {
    pub(crate) key: String,
    pub(crate) message: String,
}

/// Applies one `key.path=value` to `root` and records the key as overridden in `source`.
pub(crate) fn apply_override(
    root: &mut Table,
    spec: &str,
    source: &mut SourceMap,
) -> Result<(), OverrideError> {
    let fail = |key: &str, reason: String| OverrideError {
        key: key.to_string(),
        message: format!("cannot apply override `{spec}`: {reason}"),
    };
    let Some((key, raw)) = spec.split_once('=') else {
        return Err(fail(spec.trim(), "expected `key.path=value`".to_string()));
    };
    let key = key.trim();
    let Some(segments) = parse_key_path(key) else {
        return Err(fail(
            key,
            "the key path must be dotted keys, e.g. `defaults.compaction.sleep_threshold`"
                .to_string(),
        ));
    };
    let raw = raw.trim();
    let value = raw
        .parse::<Value>()
        .unwrap_or_else(|_| Value::String(raw.to_string()));
    let mut path = String::new();
    set_in_table(root, &segments, value, &mut path).map_err(|e| fail(key, e.to_string()))?;
    source.mark_overridden(path);
    Ok(())
}

/// Splits `a.b[c].d` into `["a", "b", "c", "d"]`; brackets may hold dots (`agents[npc.v2]`).
fn parse_key_path(key: &str) -> Option<Vec<String>> {
    let mut segments = Vec::new();
    let mut current = String::new();
    // Whether a segment just ended with `]`, so a `.` or `[` may follow without a name before it.
    let mut after_bracket = false;
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if current.is_empty() && !after_bracket {
                    return None;
                }
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
                after_bracket = false;
            }
            '[' => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                } else if segments.is_empty() {
                    return None;
                }
                let mut inner = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == ']' {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed || inner.trim().is_empty() {
                    return None;
                }
                segments.push(inner.trim().to_string());
                after_bracket = true;
            }
            ']' => return None,
            c if c.is_whitespace() => return None,
            c => {
                if after_bracket {
                    return None;
                }
                current.push(c);
            }
        }
    }
    if !current.is_empty() {
        segments.push(current);
    } else if !after_bracket {
        return None;
    }
    Some(segments)
}

/// Why a value could not be put at a key path; the path is as far as it resolved.
#[derive(Debug, thiserror::Error)]
enum PathError {
    #[error("empty key path")]
    Empty,
    #[error("`{path}` has {len} entries, there is no index {index}")]
    NoIndex {
        path: String,
        len: usize,
        index: usize,
    },
    #[error("`{path}` has no entry with id `{id}`")]
    NoId { path: String, id: String },
    #[error("`{path}` does not exist")]
    Missing { path: String },
    #[error("`{path}` is a {kind}, not a table")]
    NotATable { path: String, kind: &'static str },
}

fn set_in_table(
    table: &mut Table,
    segments: &[String],
    value: Value,
    path: &mut String,
) -> Result<(), PathError> {
    let Some((first, rest)) = segments.split_first() else {
        return Err(PathError::Empty);
    };
    *path = join_key(path, first);
    if rest.is_empty() {
        table.insert(first.clone(), value);
        return Ok(());
    }
    let child = table
        .entry(first.clone())
        .or_insert_with(|| Value::Table(Table::new()));
    set_in_value(child, rest, value, path)
}

fn set_in_value(
    node: &mut Value,
    segments: &[String],
    value: Value,
    path: &mut String,
) -> Result<(), PathError> {
    match node {
        Value::Table(table) => set_in_table(table, segments, value, path),
        Value::Array(items) => {
            let Some((first, rest)) = segments.split_first() else {
                return Err(PathError::Empty);
            };
            let index = match first.parse::<usize>() {
                Ok(i) if i < items.len() => i,
                Ok(i) => {
                    return Err(PathError::NoIndex {
                        path: path.clone(),
                        len: items.len(),
                        index: i,
                    });
                }
                Err(_) => items
                    .iter()
                    .position(|item| item.get("id").and_then(Value::as_str) == Some(first))
                    .ok_or_else(|| PathError::NoId {
                        path: path.clone(),
                        id: first.clone(),
                    })?,
            };
            path.push_str(&format!("[{index}]"));
            match (rest.is_empty(), items.get_mut(index)) {
                (true, Some(slot)) => {
                    *slot = value;
                    Ok(())
                }
                (false, Some(item)) => set_in_value(item, rest, value, path),
                (_, None) => Err(PathError::Missing { path: path.clone() }),
            }
        }
        other => Err(PathError::NotATable {
            path: path.clone(),
            kind: other.type_str(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, spec: &str) -> Result<(Table, SourceMap), OverrideError> {
        let mut table: Table = text.parse().unwrap();
        let mut source = SourceMap::default();
        apply_override(&mut table, spec, &mut source).map(|()| (table, source))
    }

    /// The error as `key: message`.
    fn failure(text: &str, spec: &str) -> String {
        let e = apply(text, spec).unwrap_err();
        format!("{}: {}", e.key, e.message)
    }

    #[test]
    fn key_paths() {
        let parse = |k: &str| parse_key_path(k);
        assert_eq!(parse("llm.provider").unwrap(), ["llm", "provider"]);
        assert_eq!(
            parse("agents[npc.v2].compaction.enabled").unwrap(),
            ["agents", "npc.v2", "compaction", "enabled"]
        );
        assert_eq!(parse("agents[1][2]").unwrap(), ["agents", "1", "2"]);
        for bad in [
            "", ".a", "a.", "a..b", "[a]", "a[]", "a[b", "a]b", "a[b]c", "a b",
        ] {
            assert_eq!(parse(bad), None, "{bad:?} should be rejected");
        }
    }

    #[test]
    fn values_are_toml_or_plain_strings() {
        let (table, _) = apply("", "defaults.compaction.sleep_threshold=0.6").unwrap();
        assert_eq!(
            table["defaults"]["compaction"]["sleep_threshold"].as_float(),
            Some(0.6)
        );
        let (table, _) = apply("", "llm.provider = openai").unwrap();
        assert_eq!(table["llm"]["provider"].as_str(), Some("openai"));
        let (table, _) = apply("", "defaults.persona=\"Hi = there\"").unwrap();
        assert_eq!(table["defaults"]["persona"].as_str(), Some("Hi = there"));
        let (table, _) = apply("", "defaults.compaction.mask_exempt_tools=[\"a\", \"b\"]").unwrap();
        assert_eq!(
            table["defaults"]["compaction"]["mask_exempt_tools"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        let (table, _) = apply("", "defaults.compaction.compact_model=").unwrap();
        assert_eq!(
            table["defaults"]["compaction"]["compact_model"].as_str(),
            Some("")
        );
    }

    #[test]
    fn agents_by_index_or_id() {
        let text = "[[agents]]\nid = \"smith\"\n[[agents]]\nid = \"bard\"\n";
        for spec in [
            "agents.1.model=m",
            "agents[1].model=m",
            "agents.bard.model=m",
            "agents[bard].model=m",
        ] {
            let (table, source) = apply(text, spec).unwrap();
            assert_eq!(table["agents"][1]["model"].as_str(), Some("m"), "{spec}");
            assert!(table["agents"][0].get("model").is_none(), "{spec}");
            assert!(source.is_overridden("agents[1].model"), "{spec}");
            assert!(!source.is_overridden("agents[0].model"), "{spec}");
        }
    }

    #[test]
    fn bad_targets_are_explained() {
        let text = "[llm]\nmodel = \"m\"\n[[agents]]\nid = \"smith\"\n";
        let err = failure(text, "llm.model.name=x");
        assert_eq!(
            err,
            "llm.model.name: cannot apply override `llm.model.name=x`: `llm.model` is a string, not a table"
        );
        let err = failure(text, "agents.bard.model=x");
        assert!(
            err.contains("`agents` has no entry with id `bard`"),
            "{err}"
        );
        let err = failure(text, "agents.3.model=x");
        assert!(
            err.contains("`agents` has 1 entries, there is no index 3"),
            "{err}"
        );
        let err = failure(text, "llm.provider");
        assert!(err.contains("expected `key.path=value`"), "{err}");
    }

    #[test]
    fn env_vars_become_overrides() {
        let vars = [
            ("PATH", "/bin"),
            ("SOMNA__LLM__PROVIDER", "openai"),
            ("SOMNA__DEFAULTS__COMPACTION__SLEEP_THRESHOLD", "0.6"),
            ("SOMNA__", "ignored"),
            ("SOMNA__LLM____X", "ignored"),
        ];
        assert_eq!(
            overrides_from_env(vars),
            [
                "defaults.compaction.sleep_threshold=0.6",
                "llm.provider=openai"
            ]
        );
    }
}

impl super::AgentOverrides {
    /// Run-time changes from `key.path=value` pairs relative to an agent
    /// (`compaction.sleep_threshold=0.6`, `model=gpt-4o`, `tick_every=500ms`). Values are TOML,
    /// falling back to a string. Errors name the key.
    pub fn from_pairs(pairs: &[String]) -> Result<Self, super::ConfigErrors> {
        let mut root = Table::new();
        let mut source = SourceMap::default();
        let mut errors = Vec::new();
        for pair in pairs {
            if let Err(e) = apply_override(&mut root, pair, &mut source) {
                errors.push(super::ConfigError {
                    file: String::new(),
                    key: e.key,
                    message: e.message,
                    line: None,
                    column: None,
                });
            }
        }
        if !errors.is_empty() {
            return Err(super::ConfigErrors(errors));
        }
        serde_path_to_error::deserialize(Value::Table(root)).map_err(|e| {
            super::ConfigErrors(vec![super::ConfigError {
                file: String::new(),
                key: e.path().to_string(),
                message: e.inner().message().to_string(),
                line: None,
                column: None,
            }])
        })
    }
}

#[cfg(test)]
mod from_pairs_tests {
    use super::super::{AgentConfig, AgentOverrides, ToolSpec};
    use crate::AgentId;

    #[test]
    fn run_time_tools_replace_the_list_and_are_checked() {
        let base = AgentConfig::with_builtin_defaults(AgentId::new("smith").unwrap());
        let tool = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: r#"{"type":"object"}"#.into(),
        };
        let changed = base
            .with_overrides(&AgentOverrides {
                tools: Some(vec![tool("give_item")]),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(changed.tools, vec![tool("give_item")]);
        let err = base
            .with_overrides(&AgentOverrides {
                tools: Some(vec![tool("recall")]),
                ..Default::default()
            })
            .unwrap_err();
        assert!(err.to_string().contains("tools[0]"), "{err}");
        // A change that does not name tools keeps them.
        let kept = changed
            .with_overrides(&AgentOverrides {
                model: Some("gpt-4o".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(kept.tools, changed.tools);
    }

    #[test]
    fn parses_pairs_and_names_bad_keys() {
        let o = AgentOverrides::from_pairs(&[
            "compaction.sleep_threshold=0.6".into(),
            "model=gpt-4o".into(),
            "tick_every=500ms".into(),
        ])
        .unwrap();
        assert_eq!(o.compaction.sleep_threshold, Some(0.6));
        assert_eq!(o.model.as_deref(), Some("gpt-4o"));
        assert_eq!(o.tick_every, Some(std::time::Duration::from_millis(500)));
        let e = AgentOverrides::from_pairs(&["compaction.sleep_treshold=0.6".into()]).unwrap_err();
        assert!(e.to_string().contains("sleep_treshold"), "{e}");
        let e =
            AgentOverrides::from_pairs(&["compaction.sleep_threshold=high".into()]).unwrap_err();
        assert!(e.to_string().contains("compaction.sleep_threshold"), "{e}");
    }
}
