//! Knobs that tests and benches read from the environment.

/// The variable `name` parsed as a `T`, or `default` when it is unset or does not parse.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The PostgreSQL database a benchmark may also run on: `SOMNA_BENCH_PG_URL`, else the tests'
/// `SOMNA_TEST_PG_URL`; `None` when neither is set (the benchmark runs on sled alone).
pub fn bench_pg_url() -> Option<String> {
    std::env::var("SOMNA_BENCH_PG_URL")
        .or_else(|_| std::env::var("SOMNA_TEST_PG_URL"))
        .ok()
}

/// The PostgreSQL database of the tests that need one: `SOMNA_TEST_PG_URL`, or `None` (unset or
/// empty) after reporting the calling test as skipped (`.ci/run` sets it, and fails on such a skip).
pub fn pg_url_or_skip() -> Option<String> {
    match std::env::var("SOMNA_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            crate::skip(
                "SOMNA_TEST_PG_URL is unset (a PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/test)",
            );
            None
        }
    }
}

/// The real OpenAI-compatible server of the opt-in tests (`SOMNA_REAL_LLM=1`, docs/llm.md): its
/// base URL (`SOMNA_REAL_LLM_URL`, default `http://127.0.0.1:8089/v1`) and model
/// (`SOMNA_REAL_LLM_MODEL`, default `smollm2`); `None`, after reporting the skip, when not asked for.
pub fn real_llm() -> Option<(String, String)> {
    if std::env::var("SOMNA_REAL_LLM").as_deref() != Ok("1") {
        crate::skip("set SOMNA_REAL_LLM=1 to run the real-model tests (see docs/llm.md)");
        return None;
    }
    let base_url =
        std::env::var("SOMNA_REAL_LLM_URL").unwrap_or_else(|_| "http://127.0.0.1:8089/v1".into());
    let model = std::env::var("SOMNA_REAL_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
    Some((base_url, model))
}
