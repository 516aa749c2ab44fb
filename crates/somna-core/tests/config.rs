#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
//! runtime.toml end to end: a corpus of malformed configs (each must fail with errors at the keys
//! it names), good configs resolved to the expected values, and the shipped runtime.toml.
//!
//! Fixture files carry their expectations in header comments:
//! - `# expect: KEY` — one line per error, in the order reported (file order): the error's key, or
//!   `LINE:COLUMN` for a TOML syntax error, which has no key.
//! - `# set: key.path=value` — CLI-style overrides applied while loading.

use std::path::{Path, PathBuf};

use somna_core::AgentId;
use somna_core::config::{
    AgentOverrides, CompactionOverrides, ConfigErrors, Provider, ResolvedConfig, RuntimeConfig,
};

/// The shipped default config, at the workspace root.
const SHIPPED: &str = include_str!("../../../runtime.toml");

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

/// The values of the `# {tag}: ` header lines of a fixture.
fn header(text: &str, tag: &str) -> Vec<String> {
    let prefix = format!("# {tag}: ");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().to_string())
        .collect()
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

fn load(path: &Path) -> (String, Result<ResolvedConfig, ConfigErrors>) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let sets = header(&text, "set");
    let result = ResolvedConfig::load(&text, &name, &sets);
    (text, result)
}

#[test]
fn bad_configs_fail_at_the_keys_they_name() {
    let files = fixtures("bad_configs");
    assert!(
        files.len() >= 18,
        "expected at least 18 bad configs, found {}",
        files.len()
    );
    let mut mismatches = Vec::new();
    for path in files {
        let name = stem(&path);
        let (text, result) = load(&path);
        let expected = header(&text, "expect");
        assert!(!expected.is_empty(), "{name}: no `# expect:` line");
        let errors = match result {
            Ok(_) => panic!("{name}: resolved, but it should fail"),
            Err(errors) => errors,
        };
        let found: Vec<String> = errors
            .iter()
            .map(|e| match (e.key.is_empty(), e.line, e.column) {
                (true, Some(line), Some(column)) => format!("{line}:{column}"),
                _ => e.key.clone(),
            })
            .collect();
        if found != expected {
            mismatches.push(format!(
                "{name}: expected errors at {expected:?}, found at {found:?}:\n{errors}"
            ));
        }
        for error in &errors {
            let rendered = error.to_string();
            assert!(
                rendered.starts_with(&format!("{name}.toml")),
                "{name}: error does not name the file: {rendered}"
            );
            assert!(
                rendered.contains(&error.key),
                "{name}: error does not name its key: {rendered}"
            );
            assert!(
                !error.message.ends_with('.'),
                "{name}: error message ends with a period: {rendered}"
            );
        }
        insta::with_settings!({ omit_expression => true, description => format!("errors of bad_configs/{name}.toml") }, {
            insta::assert_snapshot!(name, errors.to_string());
        });
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

#[test]
fn good_configs_resolve_to_the_expected_values() {
    let files = fixtures("good_configs");
    assert!(!files.is_empty());
    for path in files {
        let name = stem(&path);
        let (_, result) = load(&path);
        let resolved = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        for agent in &resolved.agents {
            assert!(
                !agent.compaction.compact_model.is_empty(),
                "{name}: agent {} has an empty compact_model",
                agent.id
            );
        }
        let rendered = toml::to_string_pretty(&resolved).unwrap();
        // The rendering reads back to the same config, so the snapshot shows exactly what resolved.
        let reread: ResolvedConfig = toml::from_str(&rendered).unwrap();
        assert_eq!(
            reread, resolved,
            "{name}: the TOML rendering does not round-trip"
        );
        insta::with_settings!({ omit_expression => true, description => format!("resolved good_configs/{name}.toml") }, {
            insta::assert_snapshot!(format!("resolved-{name}"), rendered);
        });
    }
}

#[test]
fn shipped_runtime_toml_parses_and_resolves() {
    let raw = RuntimeConfig::parse(SHIPPED, "runtime.toml").unwrap_or_else(|e| panic!("{e}"));
    let resolved = raw
        .resolve("runtime.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.store.path, Path::new("data"));
    assert_eq!(resolved.llm.provider, Provider::Builtin);
    let ids: Vec<&str> = resolved.agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["blacksmith", "innkeeper", "guard", "herbalist", "bard"]
    );
    for agent in &resolved.agents {
        assert!(
            agent.persona.len() > 80,
            "{}: the persona should be 2-3 sentences",
            agent.id
        );
        assert_ne!(agent.persona, resolved.defaults.persona);
    }
    // At least one agent declares a host-defined tool with an object schema.
    let tools: Vec<_> = resolved.agents.iter().flat_map(|a| &a.tools).collect();
    assert!(!tools.is_empty());
    for tool in tools {
        let schema: serde_json::Value = serde_json::from_str(&tool.parameters).unwrap();
        assert_eq!(schema["type"], "object", "{}", tool.name);
    }
    // Some agent overrides the compaction defaults (the demo's bard compacts earlier).
    assert!(
        resolved
            .agents
            .iter()
            .any(|a| a.compaction != resolved.defaults.agent(a.id.clone()).compaction),
        "no agent overrides [defaults.compaction]"
    );
    // A small demo window, so compaction shows up quickly.
    assert!(resolved.defaults.compaction.max_context_tokens <= 8192);
}

#[test]
fn every_toml_example_in_the_docs_resolves() {
    let docs = include_str!("../../../docs/configuration.md");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in docs.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), line) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(blocks.len() >= 3, "found {} toml blocks", blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        if let Err(e) = ResolvedConfig::load(block, "configuration.md", &[]) {
            panic!("toml block {i} of docs/configuration.md does not resolve:\n{e}\n{block}");
        }
    }
}

#[test]
fn shipped_runtime_toml_takes_overrides() {
    let overrides = [
        "llm.provider=openai".to_string(),
        "llm.base_url=http://127.0.0.1:8089/v1".to_string(),
        "llm.model=qwen2.5-7b-instruct".to_string(),
        "agents.bard.compaction.sleep_threshold=0.5".to_string(),
    ];
    let resolved = ResolvedConfig::load(SHIPPED, "runtime.toml", &overrides).unwrap();
    assert_eq!(resolved.llm.provider, Provider::Openai);
    let bard = resolved
        .agent(&AgentId::new("bard").unwrap())
        .expect("the shipped config has a bard");
    assert_eq!(bard.compaction.sleep_threshold, 0.5);
    assert_eq!(bard.model, "qwen2.5-7b-instruct");
    // Agents without a model of their own follow llm.model, and so do their summaries.
    assert_eq!(bard.compaction.compact_model, "qwen2.5-7b-instruct");
}

#[test]
fn run_time_changes_are_validated_against_the_resolved_agent() {
    let resolved = ResolvedConfig::load(SHIPPED, "runtime.toml", &[]).unwrap();
    let bard = AgentId::new("bard").unwrap();
    let emergency = resolved
        .agent(&bard)
        .unwrap()
        .compaction
        .emergency_threshold;
    // Raising the sleep threshold to the agent's own emergency threshold is refused...
    let change = AgentOverrides {
        compaction: CompactionOverrides {
            sleep_threshold: Some(emergency),
            ..Default::default()
        },
        ..Default::default()
    };
    let errors = resolved.agent_config(&bard, &change).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors.0[0].key, "compaction.sleep_threshold");
    // ...while the same change with a higher emergency threshold goes through.
    let mut both = change.clone();
    both.merge(AgentOverrides {
        compaction: CompactionOverrides {
            emergency_threshold: Some(0.95),
            ..Default::default()
        },
        ..Default::default()
    });
    let config = resolved.agent_config(&bard, &both).unwrap();
    assert_eq!(config.compaction.sleep_threshold, emergency);
    assert_eq!(config.compaction.emergency_threshold, 0.95);
}
