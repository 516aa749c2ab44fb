//! A bounded random run over the API with a real HTTP client: random methods, paths (real endpoints
//! with random ids and junk segments), query strings and bodies (random JSON built from the API's own
//! field names, mutated valid bodies, raw bytes). Every answer must be below 500, every error must
//! have the JSON error shape, and the server must still be healthy at the end.
//!
//! The inputs come from proptest strategies with a fixed seed (so a failure reproduces);
//! `SOMNA_FUZZ_CASES` changes how many run (default 3000).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::support::{FAST, TestServer, answer};

/// Names the API knows, so that random objects often reach the deeper checks.
const KEYS: &[&str] = &[
    "type",
    "content",
    "name",
    "call_id",
    "id",
    "config",
    "compaction",
    "memory",
    "sleep_threshold",
    "emergency_threshold",
    "max_context_tokens",
    "preserve_messages",
    "persona",
    "model",
    "tick_every",
    "tool_timeout",
    "force",
    "summary_seq",
    "min_importance",
    "sections",
    "topic_arc",
    "x",
];

const WORDS: &[&str] = &[
    "user",
    "observation",
    "tool_result",
    "wren",
    "fuzz",
    "1d",
    "20ms",
    "0s",
    "builtin",
    "",
    " ",
    "héllo",
    "\u{0}",
    "call_1",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-2.0f64..2.0).prop_map(|f| json!(f)),
        any::<u64>().prop_map(|n| json!(n)),
        prop::sample::select(WORDS).prop_map(|w| json!(w)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..5).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// Valid bodies, some mutated by a random cut.
fn known_body() -> impl Strategy<Value = String> {
    let bodies = prop::sample::select(vec![
        r#"{"type":"user","content":"Hello there, who are you?"}"#,
        r#"{"type":"observation","content":"A crow lands on the well."}"#,
        r#"{"type":"tool_result","call_id":"call_1","content":"{}"}"#,
        r#"{"force":true}"#,
        r#"{"summary_seq":0}"#,
        r#"{"compaction":{"sleep_threshold":0.6,"emergency_threshold":0.9}}"#,
        r#"{"id":"fuzz2","config":{"memory":{"working_facts":1}}}"#,
    ]);
    (bodies, any::<prop::sample::Index>(), any::<bool>()).prop_map(|(b, cut, whole)| {
        if whole {
            b.to_string()
        } else {
            let at = cut.index(b.len() + 1);
            b[..at].to_string()
        }
    })
}

fn body() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        2 => Just(None),
        4 => json_value().prop_map(|v| Some(v.to_string().into_bytes())),
        3 => known_body().prop_map(|b| Some(b.into_bytes())),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Some),
    ]
}

fn agent_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => Just("fuzz".to_string()),
        1 => Just("ghost".to_string()),
        1 => "[a-z0-9_.-]{1,8}",
        1 => "[%A-Za-z0-9 /?#&=.]{0,10}".prop_map(|s| s.replace(' ', "%20").replace('#', "%23")),
        1 => Just("x".repeat(70)),
    ]
}

/// Ids that DELETE may retire: not `fuzz`, so that the rest of the run has a live agent.
fn doomed_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("fuzz2".to_string()),
        Just("ghost".to_string()),
        "[a-z0-9_.-]{1,8}".prop_filter("not the live agent", |s| s != "fuzz"),
    ]
}

/// The endpoints, read from the server's own OpenAPI document (so a new one is fuzzed from the
/// day it exists): method, path (`{id}` and `{name}` are replaced), the query parameters it takes,
/// and a weight: more for more parameters, and for a body (the deeper checks).
fn endpoints() -> Vec<(&'static str, String, &'static [&'static str], u32)> {
    let doc = serde_json::to_value(somna_server::openapi::document()).unwrap();
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let names: Vec<&'static str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| &*p["name"].as_str().unwrap().to_string().leak())
                .collect();
            let body = if op.get("requestBody").is_some() {
                3
            } else {
                0
            };
            let weight = 1 + names.len() as u32 + body;
            let method: &'static str = method.to_uppercase().leak();
            all.push((method, path.clone(), &*names.leak(), weight));
        }
    }
    assert!(
        all.len() >= 20,
        "the document lists only {} operations",
        all.len()
    );
    all
}

/// A path that is no endpoint.
fn junk_path() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "/",
            "/v1",
            "/v2/agents",
            "/v1/agents/fuzz/nope",
            "/v1/agents/fuzz/history/x"
        ])
        .prop_map(str::to_string),
        "(/[a-z%0-9.]{0,6}){0,4}",
    ]
}

fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u32..1200).prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "1d",
            "2h 5m",
            "2026-11-21T10:00:00Z",
            "compaction",
            "synthesis",
            "observation",
            "compaction,synthesis",
            "true",
            "false",
            "yesterday",
            "",
            "%ZZ",
            "99999999999999999999999y",
            "fuzz",
            "agent_replied,error",
            "mill%20kettle",
        ])
        .prop_map(str::to_string),
        "[a-z0-9%+&=]{0,8}",
    ]
}

/// A plausible value for the parameter `name`.
fn valid_value(name: &'static str) -> BoxedStrategy<String> {
    let pick = |values: &[&'static str]| {
        prop::sample::select(values.to_vec())
            .prop_map(str::to_string)
            .boxed()
    };
    match name {
        "limit" | "from_seq" | "cursor" => (0u32..40).prop_map(|n| n.to_string()).boxed(),
        "min_importance" => (1u32..=10).prop_map(|n| n.to_string()).boxed(),
        "since" | "until" => pick(&[
            "1d",
            "2h 5m",
            "10m",
            "2026-11-21T10:00:00Z",
            "2000-01-01T00:00:00Z",
        ]),
        "source_type" => pick(&[
            "observation",
            "note",
            "reflection",
            "compaction",
            "extraction",
        ]),
        "tag" => pick(&[
            "compaction",
            "synthesis",
            "compaction,synthesis",
            "reflection",
        ]),
        "q" => pick(&["mill", "kettle%20Marta", "hello", "x"]),
        "agent" => pick(&["fuzz", "ghost"]),
        "types" => pick(&[
            "agent_replied",
            "agent_replied,tool_call_requested",
            "error",
        ]),
        "include_retired" => pick(&["true", "false"]),
        _ => query_value().boxed(),
    }
}

/// A query for an endpoint that takes `names`: often none, mostly its own names with plausible
/// values, sometimes junk.
fn query(names: &'static [&'static str]) -> impl Strategy<Value = String> {
    let junk = (
        prop::sample::select(vec!["zzz", "limit", "q", "tag"]),
        query_value(),
    )
        .prop_map(|(n, v)| format!("{n}={v}"));
    let pair = if names.is_empty() {
        junk.boxed()
    } else {
        let own = prop::sample::select(names.to_vec()).prop_flat_map(|n| {
            prop_oneof![7 => valid_value(n), 3 => query_value()]
                .prop_map(move |v| format!("{n}={v}"))
        });
        prop_oneof![9 => own, 1 => junk].boxed()
    };
    // Mostly each name once (a repeated name is refused, which the rest of the cases cover).
    let pairs = (prop::collection::vec(pair, 1..4), prop::bool::weighted(0.8)).prop_map(
        |(mut pairs, unique)| {
            if unique {
                let mut seen = std::collections::HashSet::new();
                pairs.retain(|p| seen.insert(p.split('=').next().unwrap_or_default().to_string()));
            }
            pairs.join("&")
        },
    );
    let empty_weight = if names.is_empty() { 12 } else { 3 };
    prop_oneof![empty_weight => Just(String::new()), 5 => pairs]
}

fn any_method() -> impl Strategy<Value = Method> {
    prop::sample::select(vec![
        Method::GET,
        Method::POST,
        Method::PATCH,
        Method::DELETE,
        Method::PUT,
        Method::HEAD,
    ])
}

/// One request: method, path, query and body.
type Request = (Method, String, String, Option<Vec<u8>>);

fn request() -> impl Strategy<Value = Request> {
    let mut all: Vec<(u32, BoxedStrategy<Request>)> = endpoints()
        .into_iter()
        .map(|(method, path, names, weight)| {
            let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
            let id = if method == Method::DELETE {
                doomed_segment().boxed()
            } else {
                agent_segment().boxed()
            };
            let strategy = (
                prop_oneof![9 => Just(method), 1 => any_method()],
                id,
                query(names),
                body(),
            )
                .prop_map(move |(m, id, q, b)| {
                    let path = path.replace("{id}", &id).replace("{name}", &id);
                    (m, path, q, b)
                })
                .boxed();
            (weight, strategy)
        })
        .collect();
    all.push((2, (any_method(), junk_path(), query(&[]), body()).boxed()));
    prop::strategy::Union::new_weighted(all).prop_filter("the live agent stays", |(m, p, _, _)| {
        !(*m == Method::DELETE && p == "/v1/agents/fuzz")
    })
}

#[actix_rt::test]
async fn random_requests_never_5xx() {
    let cases: usize = std::env::var("SOMNA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let s = TestServer::start_with(FAST, None, |o| o.max_body_bytes = 4096).await;
    s.create("fuzz").await;
    s.input("fuzz", json!({"type": "user", "content": "Hello!"}))
        .await;
    let strategy = request();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
    let mut by_code = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..cases {
        let (method, path, query, body) = strategy.new_tree(&mut runner).unwrap().current();
        let url = if query.is_empty() {
            format!("{}{path}", s.base)
        } else {
            format!("{}{path}?{query}", s.base)
        };
        let mut req = s.client.request(method.clone(), &url);
        if let Some(body) = body.clone() {
            req = req.body(body);
        }
        let response = match req.send().await {
            Ok(r) => r,
            // A URL reqwest itself refuses to send is not a server problem.
            Err(e) if e.is_builder() => continue,
            Err(e) => panic!("case {i}: {method} {url}: no response: {e}"),
        };
        let status = response.status().as_u16();
        *by_status.entry(status).or_default() += 1;
        let is_stream = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        assert!(
            status < 500,
            "case {i}: {method} {url} body {:?} → {status}",
            body.map(|b| String::from_utf8_lossy(&b).into_owned())
        );
        if is_stream {
            // An SSE stream never ends by itself: drop it.
            continue;
        }
        let a = answer(response).await;
        if status >= 400 && method != Method::HEAD {
            let v: Value = serde_json::from_str(&a.text)
                .unwrap_or_else(|e| panic!("case {i}: {method} {url}: {e}: {:?}", a.text));
            assert!(v["error"]["code"].is_string(), "case {i}: {}", a.text);
            *by_code
                .entry(v["error"]["code"].as_str().unwrap_or_default().to_string())
                .or_default() += 1;
            assert!(v["error"]["message"].is_string(), "case {i}: {}", a.text);
        }
    }
    s.get("/healthz").await.expect(200, None);
    let metrics = s.get("/metrics").await.text;
    assert!(metrics.contains("somna_http_responses_total{class=\"5xx\"} 0\n"));
    println!(
        "fuzz: {cases} random requests, answers by status: {by_status:?}, errors by code: {by_code:?}"
    );
    s.stop().await;
}
