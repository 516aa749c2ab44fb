//! The Grafana dashboard (`docs/grafana/somna-dashboard.json`) against a real server's `/metrics`:
//! every metric a panel or a template variable queries is one the server exposes, with the labels
//! it filters and groups by; histograms are queried through their `_bucket`/`_sum`/`_count`
//! series; and the dashboard imports cleanly (one datasource input that every panel uses, unique
//! panel ids, a query in every panel).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};
use somna_testkit::{CacheReport, Reply};

use crate::support::{FAST, PATIENCE, TestServer, stub_llm, summarizing_stub};

/// The dashboard, read at compile time so that editing it rebuilds the test.
const DASHBOARD: &str = include_str!("../../../docs/grafana/somna-dashboard.json");

/// The datasource every query must go through: the import's `__inputs` entry.
const DATASOURCE: &str = "${DS_PROMETHEUS}";

/// Labels Prometheus adds to every scraped series, which `/metrics` itself never shows.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// Metrics of Prometheus itself that a query may use instead of a `somna_` one.
const PROMETHEUS_OWN: [&str; 1] = ["up"];

/// Metrics the dashboard must chart (issue 16): agents by state, the context usage distribution,
/// compactions and failures by trigger, LLM latency and tokens (cached, not cached, completion),
/// tick lateness (over time windows, from the histogram).
const REQUIRED: [&str; 12] = [
    "somna_agents",
    "somna_agents_by_state",
    "somna_agent_usage_bucket",
    "somna_compactions_total",
    "somna_events_total",
    "somna_llm_request_duration_seconds_bucket",
    "somna_llm_requests_total",
    "somna_llm_prompt_tokens_total",
    "somna_llm_cached_prompt_tokens_total",
    "somna_llm_completion_tokens_total",
    "somna_tick_lateness_seconds",
    "somna_tick_lateness_histogram_seconds_bucket",
];

#[actix_rt::test]
async fn every_dashboard_query_uses_metrics_the_server_exposes() {
    let exposition = Exposition::parse(&metrics_after_traffic().await);
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is not JSON");
    check_import(&dashboard);

    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    for (place, expr) in queries(&dashboard) {
        for problem in exposition.check(&expr) {
            problems.push(format!("{place}: {problem}\n    in {expr}"));
        }
        used.extend(selectors(&expr).into_iter().map(|s| s.metric));
    }
    assert!(
        problems.is_empty(),
        "the dashboard queries what /metrics does not expose:\n{}",
        problems.join("\n")
    );
    let missing: Vec<&str> = REQUIRED
        .into_iter()
        .filter(|m| !used.contains(*m))
        .collect();
    assert!(missing.is_empty(), "no panel charts {missing:?}");
}

/// Starts a server over the stub LLM, makes it count something in the families of metrics the
/// dashboard charts (a failed and successful chat turns with cached tokens, a forced compaction,
/// an API error, an open event stream), and returns its `/metrics` while the stream is still open.
/// Every label value of a closed set is exposed from the start; the traffic shows the values move.
async fn metrics_after_traffic() -> String {
    let stub = summarizing_stub("Good day to you, Tobias.");
    stub.set_cache_report(CacheReport::CommonPrefix);
    // The first chat turn fails: an LLM error of kind `server`.
    stub.push(Reply::error(500, "the model is loading"));
    let config = format!("{}{FAST}", stub_llm(&stub));
    let s = TestServer::start_served(&config, |_| {}).await;
    s.create("wren").await;
    let mut stream = s
        .sse("/v1/events?agent=wren&types=agent_replied,turn_failed")
        .await;
    let mut replies = 0;
    let mut line = 0;
    while replies < 6 {
        line += 1;
        s.input(
            "wren",
            json!({"type": "user", "name": "Tobias", "content": format!("Line {line}: the rye at the north field looks thin, and the miller wants silver.")}),
        )
        .await;
        let event = stream.next_event().await.expect("the stream ended");
        if event["type"] == "agent_replied" {
            replies += 1;
        }
    }
    let outcome = s.compact("wren").await;
    assert_eq!(outcome["outcome"], "done", "{outcome}");
    s.get("/v1/agents/nobody").await.expect(404, None);

    // Events reach the counters asynchronously: wait (a while, without failing here) until the
    // compaction's is counted, so that the checks below see every family at work.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let text = loop {
        let answer = s.get("/metrics").await;
        assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
        let counted = !answer
            .text
            .contains("somna_events_total{type=\"compaction_completed\"} 0\n");
        if counted || tokio::time::Instant::now() > deadline {
            break answer.text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    drop(stream);
    s.stop().await;
    text
}

/// What `/metrics` exposes: each `# TYPE`'s kind, and the labels seen on each sample name.
#[derive(Debug, Default)]
struct Exposition {
    types: BTreeMap<String, String>,
    /// Sample name → label name → the values seen.
    samples: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Exposition {
    fn parse(text: &str) -> Exposition {
        let mut e = Exposition::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("a TYPE line without a kind");
                e.types.insert(name.to_string(), kind.to_string());
            } else if !line.starts_with('#') && !line.is_empty() {
                let (name, labels) = parse_sample(line);
                let seen = e.samples.entry(name).or_default();
                for (label, value) in labels {
                    seen.entry(label).or_default().insert(value);
                }
            }
        }
        assert!(
            e.types.len() > 10 && e.samples.len() > 10,
            "too little in /metrics:\n{text}"
        );
        e
    }

    /// The labels of `metric`'s samples (empty when it has none yet).
    fn labels(&self, metric: &str) -> BTreeMap<String, BTreeSet<String>> {
        self.samples.get(metric).cloned().unwrap_or_default()
    }

    /// Whether a query for `metric` finds series: a sample name, or a declared counter or gauge
    /// that has no samples yet; a histogram only through its `_bucket`, `_sum` and `_count` series.
    fn exposes(&self, metric: &str) -> Result<(), String> {
        if let Some(kind) = self.types.get(metric)
            && (kind == "histogram" || kind == "summary")
        {
            return Err(format!(
                "{metric} is a {kind}: query its _bucket, _sum or _count series"
            ));
        }
        if self.samples.contains_key(metric) || self.types.contains_key(metric) {
            return Ok(());
        }
        let histogram = ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            metric
                .strip_suffix(suffix)
                .is_some_and(|base| self.types.get(base).is_some_and(|k| k == "histogram"))
        });
        if histogram {
            Ok(())
        } else {
            Err(format!("{metric} is not in /metrics"))
        }
    }

    /// Everything wrong with one query.
    fn check(&self, expr: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let found = selectors(expr);
        let prometheus_own = PROMETHEUS_OWN
            .iter()
            .any(|m| expr.contains(&format!("{m}{{")));
        if found.is_empty() && !prometheus_own {
            problems.push("no somna_ metric".to_string());
        }
        let mut labels_in_scope: BTreeSet<String> =
            TARGET_LABELS.iter().map(|l| l.to_string()).collect();
        for selector in &found {
            if let Err(e) = self.exposes(&selector.metric) {
                problems.push(e);
                continue;
            }
            let labels = self.labels(&selector.metric);
            labels_in_scope.extend(labels.keys().cloned());
            for m in &selector.matchers {
                if TARGET_LABELS.contains(&m.label.as_str()) {
                    continue;
                }
                let Some(values) = labels.get(&m.label) else {
                    problems.push(if labels.is_empty() {
                        format!(
                            "{} has no samples after the test's traffic to check {:?} against",
                            selector.metric, m.label
                        )
                    } else {
                        format!("{} has no label {:?}", selector.metric, m.label)
                    });
                    continue;
                };
                if m.op == "=" && !values.contains(&m.value) {
                    problems.push(format!(
                        "{}{{{}}} is never {:?} (seen: {values:?})",
                        selector.metric, m.label, m.value
                    ));
                }
            }
        }
        for label in grouping_labels(expr) {
            if !labels_in_scope.contains(&label) {
                problems.push(format!(
                    "groups by {label:?}, which no sample of its metrics carries"
                ));
            }
        }
        if expr.contains("histogram_quantile(")
            && !(expr.contains("_bucket") && grouping_labels(expr).contains("le"))
        {
            problems.push("histogram_quantile over something other than _bucket by le".into());
        }
        problems
    }
}

/// `name{a="x",b="y"} value` → the name and its labels.
fn parse_sample(line: &str) -> (String, Vec<(String, String)>) {
    let Some(open) = line.find('{') else {
        let name = line.split_whitespace().next().unwrap_or_default();
        return (name.to_string(), Vec::new());
    };
    let (name, rest) = line.split_at(open);
    let (matchers, _) = parse_matchers(&rest[1..]);
    let labels = matchers.into_iter().map(|m| (m.label, m.value)).collect();
    (name.to_string(), labels)
}

/// One `label op "value"` inside braces.
#[derive(Debug)]
struct Matcher {
    label: String,
    op: String,
    value: String,
}

/// A metric name in a query and the matchers in braces right after it.
#[derive(Debug)]
struct Selector {
    metric: String,
    matchers: Vec<Matcher>,
}

/// Parses matchers up to the closing `}`; returns them and what follows the brace.
fn parse_matchers(s: &str) -> (Vec<Matcher>, &str) {
    let mut matchers = Vec::new();
    let mut rest = s.trim_start();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if let Some(after) = rest.strip_prefix('}') {
            return (matchers, after);
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or_else(|| panic!("unterminated matchers: {s:?}"));
        let label = rest[..end].to_string();
        rest = rest[end..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .unwrap_or_else(|| panic!("no operator after {label:?} in {s:?}"));
        rest = rest[op.len()..].trim_start();
        rest = rest
            .strip_prefix('"')
            .unwrap_or_else(|| panic!("unquoted value of {label:?} in {s:?}"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let close = loop {
            match chars.next() {
                Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated value of {label:?} in {s:?}"),
            }
        };
        rest = &rest[close + 1..];
        matchers.push(Matcher {
            label,
            op: op.to_string(),
            value,
        });
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Every `somna_…` metric name in `expr` (identifiers matching `somna_[a-z0-9_]+`), with the
/// matchers that follow it.
fn selectors(expr: &str) -> Vec<Selector> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = expr[from..].find("somna_").map(|i| from + i) {
        let starts_word = !expr[..at].ends_with(is_ident);
        let len = expr[at..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(expr.len() - at);
        from = at + len;
        if !starts_word {
            continue;
        }
        let metric = expr[at..at + len].to_string();
        let matchers = match expr[from..].strip_prefix('{') {
            Some(inside) => parse_matchers(inside).0,
            None => Vec::new(),
        };
        found.push(Selector { metric, matchers });
    }
    found
}

/// The labels of every `by (…)` and `without (…)` clause in `expr`.
fn grouping_labels(expr: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    for keyword in ["by", "without"] {
        let mut from = 0;
        while let Some(at) = expr[from..].find(keyword).map(|i| from + i) {
            from = at + keyword.len();
            if expr[..at].ends_with(is_ident) || expr[from..].starts_with(is_ident) {
                continue;
            }
            let Some(list) = expr[from..].trim_start().strip_prefix('(') else {
                continue;
            };
            let list = &list[..list.find(')').expect("an unclosed grouping")];
            labels.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
        }
    }
    labels
}

/// Every PromQL query of the dashboard, named by where it is: panel targets and template
/// variables.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            found.push((
                format!(
                    "panel {} ({}) target {}",
                    panel["id"], panel["title"], target["refId"]
                ),
                expr.to_string(),
            ));
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = var["query"]["query"]
            .as_str()
            .or_else(|| var["query"].as_str())
            .unwrap_or_else(|| panic!("variable {} has no query", var["name"]));
        found.push((format!("variable {}", var["name"]), query.to_string()));
    }
    found
}

/// Every panel, rows and the panels of collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let top = dashboard["panels"].as_array().expect("no panels");
    let nested = top
        .iter()
        .flat_map(|p| p["panels"].as_array().into_iter().flatten());
    top.iter().chain(nested).collect()
}

/// Checks what an import needs: one Prometheus datasource input, used by every panel, target and
/// variable (no datasource of the machine it was exported from), unique panel ids, a query in every
/// panel but the rows, the `job` and `instance` variables.
fn check_import(dashboard: &Value) {
    let inputs = dashboard["__inputs"].as_array().expect("no __inputs");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["name"], "DS_PROMETHEUS");
    assert_eq!(inputs[0]["type"], "datasource");
    assert_eq!(inputs[0]["pluginId"], "prometheus");
    assert_eq!(dashboard["schemaVersion"], 39);

    let mut datasources = Vec::new();
    collect_datasources(dashboard, &mut datasources);
    for ds in datasources {
        let builtin = ds["uid"] == "-- Grafana --" && ds["type"] == "grafana";
        let input = ds["uid"] == DATASOURCE && ds["type"] == "prometheus";
        assert!(builtin || input, "a datasource not from the input: {ds}");
    }

    let mut ids = BTreeSet::new();
    let mut charts = 0;
    for panel in panels(dashboard) {
        let id = panel["id"].as_u64().expect("a panel without a numeric id");
        assert!(ids.insert(id), "panel id {id} twice");
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(x + w <= 24, "panel {id} is wider than the grid");
        if panel["type"] == "row" {
            assert!(panel.get("targets").is_none(), "row {id} has targets");
            continue;
        }
        charts += 1;
        assert_eq!(panel["datasource"]["uid"], DATASOURCE, "panel {id}");
        if panel["type"] == "heatmap" {
            // Grafana turns cumulative `le` buckets into cells only from the heatmap format.
            for t in panel["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or_default();
                assert_eq!(t["format"], "heatmap", "heatmap {id}: {t}");
                assert!(
                    expr.contains("_bucket")
                        && grouping_labels(expr) == BTreeSet::from(["le".into()]),
                    "heatmap {id} does not chart buckets by le: {expr}"
                );
            }
        }
        let targets = panel["targets"]
            .as_array()
            .expect("a panel without targets");
        assert!(!targets.is_empty(), "panel {id} has no target");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert_eq!(t["datasource"]["uid"], DATASOURCE, "panel {id}: {t}");
            assert!(
                refs.insert(t["refId"].to_string()),
                "panel {id}: refId twice"
            );
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "panel {id}: a target without a query"
            );
        }
    }
    assert!(charts >= 10, "only {charts} panels");

    let names: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("no template variables")
        .iter()
        .map(|v| {
            assert_eq!(v["datasource"]["uid"], DATASOURCE, "variable {}", v["name"]);
            v["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(names, ["job", "instance"]);
    // The placeholders of an import are only the declared input's.
    let unknown: Vec<&str> = DASHBOARD
        .match_indices("${DS_")
        .map(|(i, _)| &DASHBOARD[i..i + DASHBOARD[i..].find('}').unwrap_or(0) + 1])
        .filter(|p| *p != DATASOURCE)
        .collect();
    assert!(unknown.is_empty(), "undeclared inputs: {unknown:?}");
}

/// Every `datasource` object anywhere in `v`.
fn collect_datasources<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "datasource" {
                    assert!(
                        value.is_object(),
                        "a datasource by name, not by uid: {value}"
                    );
                    out.push(value);
                }
                collect_datasources(value, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_datasources(i, out)),
        _ => {}
    }
}

#[test]
fn the_query_parser_finds_names_matchers_and_groupings() {
    let expr = r#"histogram_quantile(0.99, sum by (le, purpose) (rate(somna_llm_request_duration_seconds_bucket{job=~"$job", purpose="chat"}[5m]))) / xsomna_not_a_name"#;
    let found = selectors(expr);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].metric, "somna_llm_request_duration_seconds_bucket");
    let matchers: Vec<(&str, &str, &str)> = found[0]
        .matchers
        .iter()
        .map(|m| (m.label.as_str(), m.op.as_str(), m.value.as_str()))
        .collect();
    assert_eq!(matchers, [("job", "=~", "$job"), ("purpose", "=", "chat")]);
    assert_eq!(
        grouping_labels(expr),
        BTreeSet::from(["le".to_string(), "purpose".to_string()])
    );
    assert_eq!(
        parse_sample(r#"somna_x{a="1",b="q\"v"} 3"#),
        (
            "somna_x".to_string(),
            vec![("a".into(), "1".into()), ("b".into(), "q\"v".into())]
        )
    );

    let exposition = Exposition::parse(
        &(0..11)
            .map(|i| format!("# TYPE somna_c{i} counter\nsomna_c{i}{{k=\"v\"}} 1\n"))
            .chain(["# TYPE somna_h histogram\nsomna_h_bucket{le=\"+Inf\"} 1\n".to_string()])
            .collect::<String>(),
    );
    let check = |e: &str| exposition.check(e);
    assert!(check(r#"sum by (k) (rate(somna_c1{k="v"}[5m]))"#).is_empty());
    assert!(check("histogram_quantile(0.5, sum by (le) (rate(somna_h_bucket[5m])))").is_empty());
    assert!(check("rate(somna_h_count[5m])").is_empty());
    for (bad, why) in [
        ("rate(somna_gone[5m])", "not in /metrics"),
        ("rate(somna_h[5m])", "query its _bucket"),
        (r#"somna_c1{other="v"}"#, "no label"),
        (r#"somna_c1{k="w"}"#, "is never"),
        ("sum by (other) (somna_c1)", "groups by"),
        ("up", "no somna_ metric"),
    ] {
        let problems = check(bad);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{bad}: {problems:?}"
        );
    }
}
