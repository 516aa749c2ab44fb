//! Operations on a running server (`--server URL`): each command is one request to the HTTP API
//! (docs/api.md), or a few for paged reads. Answers are rendered like the local commands' text, or
//! printed as the server's JSON with `--json` (pages merged into one answer). An error answer
//! becomes an [`ApiFailure`]: `error: <code>: <message>`, exit 2 for invalid input, else 1.

#![allow(clippy::print_stdout)]

use std::fmt;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use somna_core::config::AgentConfig;
use somna_core::record::EventRecord;
use somna_core::{AgentId, Fact, JournalEntry, Message};
use somna_runtime::protocol::{AgentStatus, CompactionOutcome, Inbound, SleepResult};
use somna_server::{CreatedToken, TokenList};
use somna_store::TokenScope;

use crate::Invalid;
use crate::backend::{Backend, JournalFilters};
use crate::output::{self, AgentListView, Out};

/// The largest page the API serves (history, archive, journal).
const PAGE: usize = 1000;
/// How long to wait for the server to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An error answer of the API: `{"error": {"code", "message", "fields"?}}`.
#[derive(Debug)]
pub struct ApiFailure {
    /// The HTTP status.
    pub status: u16,
    /// The stable error code (`unknown_agent`, `invalid_config`, …).
    pub code: String,
    pub message: String,
    /// `(field, message)` for every value at fault.
    pub fields: Vec<(String, String)>,
    /// The answer as the server sent it (printed with `--json`).
    pub body: Value,
}

impl ApiFailure {
    /// Reads an error answer; a body that is not the API's error shape (a proxy's page) becomes
    /// an `http_<status>` failure carrying the start of the text.
    pub fn from_answer(status: u16, bytes: &[u8]) -> ApiFailure {
        let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        let error = &body["error"];
        match (error["code"].as_str(), error["message"].as_str()) {
            (Some(code), Some(message)) => ApiFailure {
                status,
                code: code.to_string(),
                message: message.to_string(),
                fields: error["fields"]
                    .as_array()
                    .map(|fields| {
                        fields
                            .iter()
                            .map(|f| {
                                (
                                    f["field"].as_str().unwrap_or_default().to_string(),
                                    f["message"].as_str().unwrap_or_default().to_string(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                body,
            },
            _ => {
                let text = String::from_utf8_lossy(bytes);
                let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let message = if text.is_empty() {
                    "the server answered with no error body".to_string()
                } else {
                    text.chars().take(200).collect()
                };
                ApiFailure {
                    status,
                    code: format!("http_{status}"),
                    message: message.clone(),
                    fields: Vec::new(),
                    body: json!({ "error": { "code": format!("http_{status}"), "message": message } }),
                }
            }
        }
    }

    /// 2 for input the server refused as invalid (like a local invalid argument), else 1.
    pub fn exit_code(&self) -> u8 {
        match self.code.as_str() {
            "bad_request" | "bad_json" | "invalid_body" | "invalid_config" | "invalid_agent_id"
            | "invalid_input" | "input_too_large" => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if self.status == 401 {
            write!(
                f,
                " (set {} to the server's token)",
                somna_server::TOKEN_ENV
            )?;
        }
        for (field, message) in &self.fields {
            // A single field is usually the message itself; list only what it does not say.
            if !(self.message.contains(field.as_str()) && self.message.contains(message.as_str())) {
                write!(f, "\n  {field}: {message}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

/// A client of one server.
#[derive(Debug)]
pub struct Remote {
    /// The base URL without a trailing slash (`http://127.0.0.1:7878`).
    base: String,
    token: Option<String>,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
    out: Out,
}

impl Remote {
    /// A client of the server at `url` (`http://host:port`, or `host:port`), sending `token` as a
    /// bearer token when given.
    pub fn new(url: &str, token: Option<String>, out: Out) -> Result<Remote> {
        let with_scheme = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        let parsed = reqwest::Url::parse(&with_scheme)
            .map_err(|e| Invalid(format!("--server {url:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Invalid(format!(
                "--server {url:?} is not an http(s) URL with a host (like http://127.0.0.1:7878)"
            ))
            .into());
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(Invalid(format!("--server {url:?} must not have a query")).into());
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("cannot build the HTTP client")?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Remote {
            base: parsed.as_str().trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.trim().is_empty()),
            client,
            rt,
            out,
        })
    }

    /// One request; the answer's JSON (`null` for an empty body), or an [`ApiFailure`].
    fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.request(method, &url).query(query);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, bytes) = self
            .rt
            .block_on(async {
                let response = request.send().await?;
                let status = response.status();
                Ok::<_, reqwest::Error>((status, response.bytes().await?))
            })
            .with_context(|| format!("cannot reach the server at {}", self.base))?;
        if !status.is_success() {
            return Err(ApiFailure::from_answer(status.as_u16(), &bytes).into());
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{url} answered {status} with a body that is not JSON"))
    }

    fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value> {
        self.call(Method::GET, path, query, None)
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(Method::POST, path, &[], Some(body))
    }

    /// Prints `value` as it came (`--json`), else its text form by `text`.
    fn print<T: DeserializeOwned>(&self, value: &Value, text: impl FnOnce(T)) -> Result<()> {
        self.print_part(value, value, "the server's answer has", text)
    }

    /// Prints what several pages gathered as one page of the server's shape (`{key: list,
    /// next_key: next}`), else the list's text form by `text`.
    fn print_page<T: DeserializeOwned>(
        &self,
        (key, list): (&str, Vec<Value>),
        (next_key, next): (&str, Option<u64>),
        what: &str,
        text: impl FnOnce(T),
    ) -> Result<()> {
        let page = json!({ key: list, next_key: next });
        self.print_part(&page, &page[key], what, text)
    }

    /// Prints `shown` as it is (`--json`), else the text form of `part` (what of it the text
    /// shows) by `text`; `what` says whose shape is unexpected when `part` is not a `T`.
    fn print_part<T: DeserializeOwned>(
        &self,
        shown: &Value,
        part: &Value,
        what: &str,
        text: impl FnOnce(T),
    ) -> Result<()> {
        if self.out.is_json() {
            self.out.value(shown);
        } else {
            let typed =
                T::deserialize(part).with_context(|| format!("{what} an unexpected shape"))?;
            text(typed);
        }
        Ok(())
    }
}

impl Backend for Remote {
    /// `GET /v1/agents?include_retired=true`.
    fn agents(&self) -> Result<()> {
        let list = self.get("/v1/agents", &[("include_retired", "true".into())])?;
        self.print(&list, |l: AgentListView| self.out.hosted_agents(&l))
    }

    /// `POST /v1/agents` with the run-time changes.
    fn create(&self, id: &AgentId, changes: &[String]) -> Result<()> {
        let overrides = crate::cli::parse_overrides(changes)?;
        let body = json!({ "id": id, "config": compact_json(serde_json::to_value(&overrides)?) });
        let answer = self.post("/v1/agents", &body)?;
        self.print_part(
            &answer,
            &answer["config"],
            "the server's answer has",
            |config: AgentConfig| self.out.created(&config),
        )
    }

    /// `DELETE /v1/agents/{id}`.
    fn delete(&self, id: &AgentId) -> Result<()> {
        let answer = self.call(Method::DELETE, &agent_path(id, ""), &[], None)?;
        if self.out.is_json() {
            self.out.value(&answer);
        } else {
            println!("{}", output::retired_line(id));
        }
        Ok(())
    }

    /// `GET /v1/agents/{id}`.
    fn status(&self, id: &AgentId) -> Result<()> {
        let status = self.get(&agent_path(id, ""), &[])?;
        self.print(&status, |s: AgentStatus| self.out.status_text(&s))
    }

    /// `POST /v1/agents/{id}/input`.
    fn send(&self, id: &AgentId, input: Inbound) -> Result<()> {
        let answer = self.post(&agent_path(id, "/input"), &serde_json::to_value(&input)?)?;
        if self.out.is_json() {
            self.out.value(&answer);
        } else {
            println!("accepted; the agent acts on it at its next tick");
        }
        Ok(())
    }

    /// `POST /v1/agents/{id}/compact`; an error (exit 1) after the outcome when it failed.
    fn compact(&self, id: &AgentId, force: bool) -> Result<()> {
        let answer = self.post(&agent_path(id, "/compact"), &json!({ "force": force }))?;
        let outcome: CompactionOutcome = read_answer(answer, "compaction outcome")?;
        self.out.compaction(&outcome);
        match output::compaction_failure(&outcome) {
            Some(why) => Err(anyhow!("compaction failed: {why}")),
            None => Ok(()),
        }
    }

    /// `POST /v1/agents/{id}/sleep`; an error (exit 1) after the result when a step failed.
    fn sleep(&self, id: &AgentId) -> Result<()> {
        let answer = self.call(Method::POST, &agent_path(id, "/sleep"), &[], None)?;
        let result: SleepResult = read_answer(answer, "sleep result")?;
        self.out.slept(&result);
        match output::sleep_failure(&result) {
            Some(why) => Err(anyhow!("sleep failed: {why}")),
            None => Ok(()),
        }
    }

    /// `POST /v1/agents/{id}/uncompact`.
    fn uncompact(&self, id: &AgentId, seq: u64) -> Result<()> {
        let answer = self.post(
            &agent_path(id, "/uncompact"),
            &json!({ "summary_seq": seq }),
        )?;
        let restored = answer["restored"].as_u64().unwrap_or_default();
        self.out.uncompacted(&answer, seq, restored);
        Ok(())
    }

    /// `PATCH /v1/agents/{id}/config`.
    fn configure(&self, id: &AgentId, changes: &[String]) -> Result<()> {
        let overrides = crate::cli::parse_overrides(changes)?;
        let answer = self.call(
            Method::PATCH,
            &agent_path(id, "/config"),
            &[],
            Some(&compact_json(serde_json::to_value(&overrides)?)),
        )?;
        let config: AgentConfig = serde_json::from_value(answer["config"].clone())
            .context("the server's answer has an unexpected shape")?;
        self.out.configured(&answer, &config);
        Ok(())
    }

    /// Every page of `GET /v1/agents/{id}/history` (or `/archive`); the last `limit` messages.
    fn history(&self, id: &AgentId, limit: Option<usize>, archive: bool) -> Result<()> {
        let path = agent_path(id, if archive { "/archive" } else { "/history" });
        let mut messages: Vec<Value> = Vec::new();
        let mut from = 0u64;
        loop {
            let mut page = self.get(
                &path,
                &[("from_seq", from.to_string()), ("limit", PAGE.to_string())],
            )?;
            if let Value::Array(list) = page["messages"].take() {
                messages.extend(list);
            }
            match page["next_from_seq"].as_u64() {
                Some(next) if next > from => from = next,
                _ => break,
            }
        }
        if let Some(n) = limit {
            messages.drain(..messages.len().saturating_sub(n));
        }
        self.print_page(
            ("messages", messages),
            ("next_from_seq", None),
            "the server's messages have",
            |typed: Vec<Message>| self.out.messages(&typed),
        )
    }

    /// `GET /v1/agents/{id}/journal`, page after page until `limit` entries (or the last page).
    fn journal(&self, id: &AgentId, filters: &JournalFilters) -> Result<()> {
        let path = agent_path(id, "/journal");
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(s) = &filters.source {
            query.push(("source_type", s.clone()));
        }
        for t in &filters.tags {
            query.push(("tag", t.clone()));
        }
        if let Some(s) = &filters.since {
            query.push(("since", s.clone()));
        }
        if let Some(u) = &filters.until {
            query.push(("until", u.clone()));
        }
        if let Some(m) = filters.min_importance {
            query.push(("min_importance", m.to_string()));
        }
        let mut entries: Vec<Value> = Vec::new();
        let mut cursor: Option<u64> = None;
        loop {
            let want = filters
                .limit
                .map_or(PAGE, |n| n.saturating_sub(entries.len()).min(PAGE));
            if want == 0 {
                break;
            }
            let mut q = query.clone();
            q.push(("limit", want.to_string()));
            if let Some(c) = cursor {
                q.push(("cursor", c.to_string()));
            }
            let mut page = self.get(&path, &q)?;
            if let Value::Array(list) = page["entries"].take() {
                entries.extend(list);
            }
            cursor = page["next_cursor"].as_u64();
            if cursor.is_none() {
                break;
            }
        }
        self.print_page(
            ("entries", entries),
            ("next_cursor", cursor),
            "the server's journal entries have",
            |typed: Vec<JournalEntry>| self.out.journal(&typed),
        )
    }

    /// `GET /v1/agents/{id}/archive/search`.
    fn search(&self, id: &AgentId, query: &str, limit: usize) -> Result<()> {
        let answer = self.get(
            &agent_path(id, "/archive/search"),
            &[("q", query.to_string()), ("limit", limit.to_string())],
        )?;
        self.print_part(
            &answer,
            &answer["hits"],
            "the server's hits have",
            |hits: Vec<Message>| self.out.messages(&hits),
        )
    }

    /// `GET /v1/agents/{id}/facts`.
    fn facts(&self, id: &AgentId) -> Result<()> {
        let answer = self.get(&agent_path(id, "/facts"), &[])?;
        let facts: Vec<Fact> = serde_json::from_value(answer["facts"].clone())
            .context("the server's facts have an unexpected shape")?;
        self.out.facts(&answer, &facts);
        Ok(())
    }

    /// `GET /v1/agents/{id}/events`.
    fn events(&self, id: &AgentId, limit: usize) -> Result<()> {
        let answer = self.get(&agent_path(id, "/events"), &[("limit", limit.to_string())])?;
        let events: Vec<EventRecord> = answer["events"]
            .as_array()
            .map(|list| list.iter().map(|e| e["event"].clone()).collect::<Vec<_>>())
            .map(|list| serde_json::from_value(Value::Array(list)))
            .transpose()
            .context("the server's events have an unexpected shape")?
            .unwrap_or_default();
        self.out.events(&answer, &events);
        Ok(())
    }

    /// `POST /v1/tokens`.
    fn create_token(&self, name: &str, scope: TokenScope) -> Result<()> {
        let body = json!({ "name": name, "agents": scope.agents, "access": scope.access });
        let answer = self.post("/v1/tokens", &body)?;
        let created: CreatedToken = read_answer(answer, "new token")?;
        self.out.token_created(&created);
        Ok(())
    }

    /// `GET /v1/tokens`.
    fn tokens(&self) -> Result<()> {
        let list: TokenList = read_answer(self.get("/v1/tokens", &[])?, "token list")?;
        self.out.tokens(&list);
        Ok(())
    }

    /// `DELETE /v1/tokens/{name}`.
    fn revoke_token(&self, name: &str) -> Result<()> {
        self.call(Method::DELETE, &format!("/v1/tokens/{name}"), &[], None)?;
        self.out.token_revoked(name);
        Ok(())
    }
}

/// `/v1/agents/{id}{rest}`. Ids are `[A-Za-z0-9_.-]` and never `.` or `..`, so they need no
/// escaping.
fn agent_path(id: &AgentId, rest: &str) -> String {
    format!("/v1/agents/{id}{rest}")
}

/// The server's `answer` read as a `T` (its `what`, named when the shape is unexpected).
fn read_answer<T: DeserializeOwned>(answer: Value, what: &str) -> Result<T> {
    serde_json::from_value(answer)
        .with_context(|| format!("the server's {what} has an unexpected shape"))
}

/// `value` without `null`s and empty objects: the keys a change really sets.
fn compact_json(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, compact_json(v)))
                .filter(|(_, v)| match v {
                    Value::Null => false,
                    Value::Object(m) => !m.is_empty(),
                    _ => true,
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_answers_become_failures_with_exit_codes() {
        let body = br#"{"error": {"code": "invalid_config",
            "message": "compaction.emergency_threshold: must be above sleep_threshold (0.6), got 0.5",
            "fields": [{"field": "compaction.emergency_threshold",
                        "message": "must be above sleep_threshold (0.6), got 0.5"},
                       {"field": "compaction.sleep_threshold", "message": "must be at most 1, got 2"}]}}"#;
        let f = ApiFailure::from_answer(422, body);
        assert_eq!(f.code, "invalid_config");
        assert_eq!(f.exit_code(), 2);
        assert_eq!(f.fields.len(), 2);
        // The first field is the message itself; the second is listed below it.
        assert_eq!(
            f.to_string(),
            "invalid_config: compaction.emergency_threshold: must be above sleep_threshold (0.6), got 0.5\n  compaction.sleep_threshold: must be at most 1, got 2"
        );

        let f = ApiFailure::from_answer(
            404,
            br#"{"error": {"code": "unknown_agent", "message": "no agent with id \"ghost\""}}"#,
        );
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.to_string(), "unknown_agent: no agent with id \"ghost\"");

        let f = ApiFailure::from_answer(502, b"<html>\n  Bad   gateway</html>");
        assert_eq!(f.code, "http_502");
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.to_string(), "http_502: <html> Bad gateway</html>");
        assert_eq!(f.body["error"]["code"], "http_502");
    }

    #[test]
    fn server_urls_are_checked_and_normalized() {
        let out = Out::new(false);
        let r = Remote::new("http://127.0.0.1:7878/", None, out).unwrap();
        assert_eq!(r.base, "http://127.0.0.1:7878");
        let r = Remote::new("localhost:9000", Some(" ".into()), out).unwrap();
        assert_eq!(r.base, "http://localhost:9000");
        assert_eq!(r.token, None);
        let r = Remote::new("https://example.invalid/somna/", None, out).unwrap();
        assert_eq!(r.base, "https://example.invalid/somna");
        for bad in ["ftp://host", "http://", "http://h:1/?x=1"] {
            let e = Remote::new(bad, None, out).unwrap_err();
            assert!(e.downcast_ref::<Invalid>().is_some(), "{bad}: {e}");
        }
    }

    #[test]
    fn changes_are_sent_without_unset_keys() {
        let overrides = crate::cli::parse_overrides(&[
            "compaction.sleep_threshold=0.6".into(),
            "persona=You are Brannoc.".into(),
        ])
        .unwrap();
        assert_eq!(
            compact_json(serde_json::to_value(&overrides).unwrap()),
            json!({"persona": "You are Brannoc.", "compaction": {"sleep_threshold": 0.6}})
        );
        assert_eq!(
            agent_path(&AgentId::new("smith").unwrap(), "/input"),
            "/v1/agents/smith/input"
        );
    }
}
