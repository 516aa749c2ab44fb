use super::*;
use crate::config::{CacheHint, LlmConfig, Provider, StructuredOutput, ToolSpec};

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
    let err = crate::config::RuntimeConfig::parse("[llm]\nstructured_output = \"yes\"\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("llm.structured_output"), "{err}");
    assert!(err.contains("json_schema"), "{err}");
}
