//! The checks of host-defined tools and of the runtime-wide sections (`[store]`, `[llm]`,
//! `[cluster]`, `[embedder]`, `[runtime]`): each returns every finding of its table.

use std::time::Duration;

use super::Finding;
use crate::config::{
    BUILTIN_TOOLS, CacheHint, ClusterSection, EmbedderProvider, EmbedderSection, LlmConfig,
    Provider, RuntimeSection, StoreBackend, StoreConfig, ToolSpec,
};

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
        EmbedderProvider::None | EmbedderProvider::Builtin => {}
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
