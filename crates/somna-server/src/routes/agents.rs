//! The agent lifecycle and commands: list, create, status, config, retire, input, compact, sleep,
//! uncompact. Each calls the runtime's operation, which decides how it runs.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, web};
use serde::{Deserialize, Serialize};
use somna_core::config::{AgentConfig, AgentOverrides};
use somna_core::{AgentId, Timestamp};
use somna_runtime::actor::SleepResult;
use somna_runtime::agent::ConfigureError;
use somna_runtime::{AgentState, AgentStatus, CompactionOutcome, Inbound, RuntimeError};
use somna_store::UncompactOutcome;

use super::{Reply, State, json, no_params, parse_agent_id, path_agent, runtime_error};
use crate::body::{BodyKind, parse_json, read_body};
use crate::error::{ApiError, ErrorCode};
use crate::query::Params;

/// One agent in the list.
#[derive(Debug, Serialize)]
struct AgentSummary<'a> {
    id: &'a AgentId,
    state: AgentState,
    usage: f64,
    usage_pct: f64,
    prompt_tokens: u64,
    max_context_tokens: u32,
    history_len: u64,
    archive_len: u64,
    compaction_count: u32,
    last_compaction: Option<Timestamp>,
    needs_reply: bool,
    pending_tools: usize,
}

impl<'a> From<&'a AgentStatus> for AgentSummary<'a> {
    fn from(s: &'a AgentStatus) -> Self {
        AgentSummary {
            id: &s.id,
            state: s.state,
            usage: s.usage,
            usage_pct: pct(s.usage),
            prompt_tokens: s.prompt_tokens,
            max_context_tokens: s.max_context_tokens,
            history_len: s.history_len,
            archive_len: s.archive_len,
            compaction_count: s.compaction_count,
            last_compaction: s.last_compaction,
            needs_reply: s.needs_reply,
            pending_tools: s.pending_tools.len(),
        }
    }
}

/// The body of `GET /v1/agents`.
#[derive(Debug, Serialize)]
struct AgentList<'a> {
    agents: Vec<AgentSummary<'a>>,
    /// Agents whose actor did not answer (overloaded or stopping).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unavailable: Vec<AgentId>,
    /// With `include_retired=true`: the retired agents' ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    retired: Option<Vec<AgentId>>,
}

/// Usage as a percentage with one decimal.
fn pct(usage: f64) -> f64 {
    (usage * 1000.0).round() / 10.0
}

/// `GET /v1/agents[?include_retired=true]`: every hosted agent with a status summary.
pub(crate) async fn list(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["include_retired"], &[])?;
    let include_retired = params
        .parsed::<bool>("include_retired", "true or false")?
        .unwrap_or(false);
    let ids = state.runtime.agent_ids();
    let statuses = futures::future::join_all(ids.iter().map(|id| state.runtime.status(id))).await;
    let mut found = Vec::with_capacity(ids.len());
    let mut unavailable = Vec::new();
    for (id, status) in ids.iter().zip(statuses) {
        match status {
            Ok(s) => found.push(s),
            // Retired between the listing and the status: no longer hosted.
            Err(RuntimeError::UnknownAgent(_)) => {}
            Err(RuntimeError::Mailbox(_)) => unavailable.push(id.clone()),
            Err(e) => return Err(runtime_error(&state, id, e)),
        }
    }
    let retired = if include_retired {
        let ids: Vec<AgentId> = state
            .runtime
            .store()
            .agents()?
            .into_iter()
            .filter(|r| r.retired)
            .map(|r| r.id)
            .collect();
        Some(ids)
    } else {
        None
    };
    let body = AgentList {
        agents: found.iter().map(AgentSummary::from).collect(),
        unavailable,
        retired,
    };
    json(StatusCode::OK, &body)
}

/// The body of `POST /v1/agents`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateAgent {
    id: String,
    #[serde(default)]
    config: AgentOverrides,
}

/// An agent's id and resolved config.
#[derive(Debug, Serialize)]
struct IdAndConfig<'a> {
    id: &'a AgentId,
    config: &'a AgentConfig,
}

/// `POST /v1/agents` `{id, config}`: creates and starts an agent (201).
pub(crate) async fn create(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let body: CreateAgent = parse_json(&bytes, BodyKind::Config { at: "config" }, None)?;
    let id = parse_agent_id(&body.id, "id")?;
    let config = state
        .runtime
        .create_agent(id.clone(), body.config)
        .map_err(|e| match e {
            RuntimeError::Configure(_, ConfigureError::Invalid(errors)) => {
                ApiError::invalid_config(&errors, "config.")
            }
            e => runtime_error(&state, &id, e),
        })?;
    let mut response = json(
        StatusCode::CREATED,
        &IdAndConfig {
            id: &id,
            config: &config,
        },
    )?;
    if let Ok(location) = header::HeaderValue::from_str(&format!("/v1/agents/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// An agent's full status.
#[derive(Debug, Serialize)]
struct StatusBody<'a> {
    #[serde(flatten)]
    status: &'a AgentStatus,
    usage_pct: f64,
}

/// The status of the agent a parameterless request names.
async fn agent_status(
    state: &State,
    req: &HttpRequest,
) -> Result<(AgentId, AgentStatus), ApiError> {
    no_params(req)?;
    let id = path_agent(req)?;
    let status = state
        .runtime
        .status(&id)
        .await
        .map_err(|e| runtime_error(state, &id, e))?;
    Ok((id, status))
}

/// `GET /v1/agents/{id}`: state, usage, counts, last compaction, pending tool calls, config.
pub(crate) async fn status(state: State, req: HttpRequest) -> Reply {
    let (_, status) = agent_status(&state, &req).await?;
    json(
        StatusCode::OK,
        &StatusBody {
            status: &status,
            usage_pct: pct(status.usage),
        },
    )
}

/// `GET /v1/agents/{id}/config`: the config the agent runs with.
pub(crate) async fn get_config(state: State, req: HttpRequest) -> Reply {
    let (id, status) = agent_status(&state, &req).await?;
    json(
        StatusCode::OK,
        &IdAndConfig {
            id: &id,
            config: &status.config,
        },
    )
}

/// `PATCH /v1/agents/{id}/config` (AgentOverrides): changes the config at run time; persisted.
pub(crate) async fn configure(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let changes: AgentOverrides = parse_json(&bytes, BodyKind::Config { at: "" }, None)?;
    let config = state
        .runtime
        .configure(&id, changes)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    json(
        StatusCode::OK,
        &IdAndConfig {
            id: &id,
            config: &config,
        },
    )
}

/// `DELETE /v1/agents/{id}`: stops hosting the agent and marks it retired; nothing is deleted.
pub(crate) async fn retire(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    state
        .runtime
        .retire_agent(&id)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    json(
        StatusCode::OK,
        &serde_json::json!({ "id": id, "retired": true }),
    )
}

/// `POST /v1/agents/{id}/input` (Inbound): a user event, an observation or a tool result (202).
pub(crate) async fn input(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let inbound: Inbound = parse_json(&bytes, BodyKind::Plain, None)?;
    state
        .runtime
        .send(&id, inbound)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    json(
        StatusCode::ACCEPTED,
        &serde_json::json!({ "accepted": true }),
    )
}

/// The body of `POST /v1/agents/{id}/compact`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactBody {
    /// Ignore the thresholds (a manual compaction); default true.
    #[serde(default = "yes")]
    force: bool,
}

fn yes() -> bool {
    true
}

/// `POST /v1/agents/{id}/compact` `{force}`: compacts now, or after the job in flight; answers the
/// `CompactionOutcome`.
pub(crate) async fn compact(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let body: CompactBody = parse_json(&bytes, BodyKind::Plain, Some(CompactBody { force: true }))?;
    let outcome = state
        .runtime
        .compact(&id, body.force)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    answer_unless_busy(&id, &outcome, &CompactionOutcome::Busy)
}

/// `POST /v1/agents/{id}/sleep`: consolidation, reflection, then compaction at the sleep threshold
/// (now, or after the job in flight).
pub(crate) async fn sleep(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    let result = state
        .runtime
        .sleep(&id)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    answer_unless_busy(&id, &result, &SleepResult::Busy)
}

/// The body of `POST /v1/agents/{id}/uncompact`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UncompactBody {
    summary_seq: u64,
}

/// `POST /v1/agents/{id}/uncompact` `{summary_seq}`: puts the archived originals back in place of
/// that summary, atomically.
pub(crate) async fn uncompact(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let body: UncompactBody = parse_json(&bytes, BodyKind::Plain, None)?;
    // Where the undo runs (the agent's actor, or the store for a retired agent) is the
    // runtime's decision.
    let outcome = match state.runtime.uncompact(&id, body.summary_seq).await {
        Ok(outcome) => outcome,
        Err(RuntimeError::Busy(_)) => {
            return Err(busy(&id, "it is stopping or has too many requests queued"));
        }
        Err(e) => return Err(runtime_error(&state, &id, e)),
    };
    match outcome {
        UncompactOutcome::Restored { restored } => json(
            StatusCode::OK,
            &Restored {
                outcome: "restored",
                summary_seq: body.summary_seq,
                restored,
            },
        ),
        UncompactOutcome::NotFound => Err(ApiError::new(
            ErrorCode::UnknownSummary,
            format!(
                "agent {:?} has no summary with seq {} in its history (a summary folded into a \
later one must wait until that one is undone)",
                id.as_str(),
                body.summary_seq
            ),
        )),
    }
}

/// The answer of a successful uncompact.
#[derive(Debug, Serialize)]
struct Restored {
    outcome: &'static str,
    summary_seq: u64,
    /// Messages put back into history.
    restored: u32,
}

/// 200 with the command's answer, or 409 when the answer is the one that says the agent's queue
/// refused the command (`refused`).
fn answer_unless_busy<T: Serialize + PartialEq>(id: &AgentId, answer: &T, refused: &T) -> Reply {
    if answer == refused {
        return Err(busy(
            id,
            "too many commands are waiting for it, or it is stopping",
        ));
    }
    json(StatusCode::OK, answer)
}

fn busy(id: &AgentId, why: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Busy,
        format!("agent {:?} is busy: {why}; try again shortly", id.as_str()),
    )
}
