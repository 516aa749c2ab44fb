//! The agent lifecycle and commands: list, create, status, config, retire, input, compact, sleep,
//! uncompact. Each calls the runtime's operation, which decides how it runs.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, web};
use serde::{Deserialize, Serialize};
use somna_core::config::{AgentConfig, AgentOverrides};
use somna_core::{AgentId, Timestamp};
use somna_runtime::agent::ConfigureError;
use somna_runtime::protocol::SleepResult;
use somna_runtime::{AgentState, AgentStatus, CompactionOutcome, Inbound, RuntimeError};
use somna_store::UncompactOutcome;
use utoipa::ToSchema;

use super::{Reply, State, json, no_params, parse_agent_id, path_agent, runtime_error};
use crate::auth::Principal;
use crate::body::{BodyKind, parse_json, read_body};
use crate::error::{ApiError, Denied, ErrorBody, ErrorCode, StatusErrors};
use crate::query::Params;

/// One agent in the list.
#[derive(Debug, Serialize, ToSchema)]
struct AgentSummary<'a> {
    id: &'a AgentId,
    state: AgentState,
    /// The prompt's share of `max_context_tokens`, 0–1 (calibrated).
    usage: f64,
    /// `usage` in percent, with one decimal.
    usage_pct: f64,
    prompt_tokens: u64,
    max_context_tokens: u32,
    history_len: u64,
    archive_len: u64,
    compaction_count: u32,
    last_compaction: Option<Timestamp>,
    needs_reply: bool,
    /// How many host tool calls the agent waits on.
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
#[derive(Debug, Serialize, ToSchema)]
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
#[utoipa::path(
    get,
    operation_id = "list_agents",
    path = "/v1/agents",
    tag = "agents",
    summary = "List the agents",
    description = "Every hosted agent with a status summary.",
    params(("include_retired" = Option<bool>, Query, description = "Also list the ids of retired agents (`retired`)")),
    responses(
        (status = 200, description = "The agents", body = AgentList),
        (status = 400, description = "`bad_request`: an unknown, repeated or bad query parameter", body = ErrorBody),
        (status = 401, description = "`unauthorized`: the bearer token is missing or wrong", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`shutting_down`: the runtime is shutting down", body = ErrorBody),
    ),
)]
pub(crate) async fn list(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["include_retired"], &[])?;
    let include_retired = params
        .parsed::<bool>("include_retired", "true or false")?
        .unwrap_or(false);
    let principal = Principal::of(&req);
    let mut ids = state.runtime.agent_ids();
    ids.retain(|id| principal.reaches(id.as_str()));
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
            .filter(|r| r.retired && principal.reaches(r.id.as_str()))
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
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateAgent {
    /// The new agent's id (ids of retired agents are not reused).
    #[schema(value_type = AgentId)]
    id: String,
    /// Changes over runtime.toml's `[defaults]`.
    #[serde(default)]
    config: AgentOverrides,
}

/// An agent's id and resolved config.
#[derive(Debug, Serialize, ToSchema)]
struct IdAndConfig<'a> {
    id: &'a AgentId,
    config: &'a AgentConfig,
}

/// `POST /v1/agents` `{id, config}`: creates and starts an agent (201).
#[utoipa::path(
    post,
    operation_id = "create_agent",
    path = "/v1/agents",
    tag = "agents",
    summary = "Create an agent",
    description = "Creates and starts an agent; `config` takes the keys of an `[[agents]]` entry \
of runtime.toml but `id` (see docs/configuration.md), the rest comes from `[defaults]`.",
    request_body = CreateAgent,
    responses(
        (status = 201, description = "Created; `Location` is the agent's URL", body = IdAndConfig,
         headers(("Location" = String, description = "`/v1/agents/{id}`"))),
        (status = 400, description = "`bad_json`: the body is not JSON; `invalid_agent_id`; \
`bad_request`: a query parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 408, description = "`request_timeout`: the body did not arrive in time", body = ErrorBody),
        (status = 409, description = "`agent_exists`: the id is in use, or was (retired ids are not reused)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit", body = ErrorBody),
        (status = 422, description = "`invalid_body`: JSON of the wrong shape; `invalid_config`: a \
config that does not validate, each key at fault in `fields` (`config.compaction.…`)", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`shutting_down`: the runtime is shutting down", body = ErrorBody),
    ),
)]
pub(crate) async fn create(state: State, req: HttpRequest, payload: web::Payload) -> Reply {
    no_params(&req)?;
    let bytes = read_body(&req, payload, state.body).await?;
    let body: CreateAgent = parse_json(&bytes, BodyKind::Config { at: "config" }, None)?;
    let id = parse_agent_id(&body.id, "id")?;
    Principal::of(&req).check(id.as_str())?;
    let config = state
        .runtime
        .create_agent(id.clone(), body.config)
        .map_err(|e| match e {
            RuntimeError::Configure(_, ConfigureError::Invalid(errors)) => {
                ApiError::invalid_config(&errors, "config.")
            }
            e => runtime_error(&state, &id, e),
        })?;
    // Created is answered once it survives a kill, as every command is.
    state
        .runtime
        .durable_ack()
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
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
#[derive(Debug, Serialize, ToSchema)]
struct StatusBody<'a> {
    #[serde(flatten)]
    status: &'a AgentStatus,
    /// `usage` in percent, with one decimal.
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
#[utoipa::path(
    get,
    operation_id = "agent_status",
    path = "/v1/agents/{id}",
    tag = "agents",
    summary = "An agent's status",
    description = "State, usage, counts, the last compaction, the host tool calls it waits on, \
its config, and what the LLM server reported for its chat calls.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The status", body = StatusBody),
        StatusErrors,
        Denied,
    ),
)]
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
#[utoipa::path(
    get,
    operation_id = "agent_config",
    path = "/v1/agents/{id}/config",
    tag = "agents",
    summary = "An agent's config",
    description = "The resolved config the agent runs with.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The config", body = IdAndConfig),
        StatusErrors,
        Denied,
    ),
)]
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
#[utoipa::path(
    patch,
    operation_id = "configure_agent",
    path = "/v1/agents/{id}/config",
    tag = "agents",
    summary = "Change an agent's config",
    description = "Merged over earlier run-time changes, validated as a whole, applied at once and \
persisted. A change that does not validate changes nothing.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    request_body = AgentOverrides,
    responses(
        (status = 200, description = "The new config", body = IdAndConfig),
        (status = 400, description = "`bad_json`: the body is not JSON; `invalid_agent_id`; \
`bad_request`: a query parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`: no agent with that id", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive in time", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired", body = ErrorBody),
        (status = 422, description = "`invalid_config`: an unknown key, a wrong type or a change \
that does not validate; `fields` names every key at fault", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`unavailable`: the agent does not answer; `shutting_down`", body = ErrorBody),
    ),
)]
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

/// The answer of a retirement.
#[derive(Debug, Serialize, ToSchema)]
struct Retired<'a> {
    id: &'a AgentId,
    /// Always true.
    retired: bool,
}

/// `DELETE /v1/agents/{id}`: stops hosting the agent and marks it retired; nothing is deleted.
#[utoipa::path(
    delete,
    operation_id = "retire_agent",
    path = "/v1/agents/{id}",
    tag = "agents",
    summary = "Retire an agent",
    description = "The agent stops being hosted and is marked retired. Nothing is deleted: its \
history, archive, journal, facts and event log stay readable. The id cannot be reused.",
    params(("id" = AgentId, Path, description = "The agent's id", example = "wren")),
    responses(
        (status = 200, description = "Retired", body = Retired),
        StatusErrors,
        Denied,
    ),
)]
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
        &Retired {
            id: &id,
            retired: true,
        },
    )
}

/// The answer of an accepted input.
#[derive(Debug, Serialize, ToSchema)]
struct Accepted {
    /// Always true: the input is in the agent's history.
    accepted: bool,
}

/// `POST /v1/agents/{id}/input` (Inbound): a user event, an observation or a tool result (202).
#[utoipa::path(
    post,
    operation_id = "send_input",
    path = "/v1/agents/{id}/input",
    tag = "agents",
    summary = "Send an agent input",
    description = "A user speaking (a reply is owed, it comes as an `agent_replied` event), an \
observation, or the host's result of a tool call. Answered once the input is in the agent's \
history (with `[store] durable_acks`, flushed to disk).",
    params(("id" = AgentId, Path, description = "The agent's id")),
    request_body = Inbound,
    responses(
        (status = 202, description = "Accepted: the agent acts on it at its next tick", body = Accepted),
        (status = 400, description = "`bad_json`: the body is not JSON; `invalid_agent_id`; \
`bad_request`: a query parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`; `unknown_tool_call`: a tool result for a \
call the agent is not waiting on", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive in time", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit; \
`input_too_large`: the content is over the agent's `compaction.max_input_tokens`", body = ErrorBody),
        (status = 422, description = "`invalid_body`: an unknown `type`, a missing or unknown \
field; `invalid_input`: empty content", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`unavailable`: the agent does not answer; `shutting_down`", body = ErrorBody),
    ),
)]
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
    json(StatusCode::ACCEPTED, &Accepted { accepted: true })
}

/// The body of `POST /v1/agents/{id}/compact`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CompactBody {
    /// Ignore the thresholds (a manual compaction); default true.
    #[serde(default = "yes")]
    #[schema(default = true)]
    force: bool,
}

fn yes() -> bool {
    true
}

/// `POST /v1/agents/{id}/compact` `{force}`: compacts now, or after the job in flight; answers the
/// `CompactionOutcome`.
#[utoipa::path(
    post,
    operation_id = "compact",
    path = "/v1/agents/{id}/compact",
    tag = "commands",
    summary = "Compact an agent now",
    description = "A manual compaction (`force`, the default and the meaning of an empty body) \
ignores the thresholds; `{\"force\": false}` compacts only at the sleep threshold. Sent during a \
job, it runs after it. Answers the outcome, whatever it was (expected outcomes are values).",
    params(("id" = AgentId, Path, description = "The agent's id")),
    request_body(content = CompactBody, description = "Optional: no body means `{\"force\": true}`"),
    responses(
        (status = 200, description = "The outcome: `done`, `skipped`, `failed` or `stalled`", body = CompactionOutcome),
        (status = 400, description = "`bad_json`: the body is not JSON; `invalid_agent_id`; \
`bad_request`: a query parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`: no agent with that id", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive in time", body = ErrorBody),
        (status = 409, description = "`busy`: 8 commands already wait behind the agent's job, or it is stopping", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit", body = ErrorBody),
        (status = 422, description = "`invalid_body`: JSON of the wrong shape", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`unavailable`: the agent does not answer; `shutting_down`", body = ErrorBody),
    ),
)]
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
#[utoipa::path(
    post,
    operation_id = "sleep",
    path = "/v1/agents/{id}/sleep",
    tag = "commands",
    summary = "Put an agent to sleep now",
    description = "Consolidation (journal to memory facts), reflection, then compaction at the \
sleep threshold. Sent during a job, it runs after it. Takes no body.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "What the sleep did", body = SleepResult),
        (status = 400, description = "`invalid_agent_id`; `bad_request`: a query parameter (it takes none)", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`: no agent with that id", body = ErrorBody),
        (status = 409, description = "`busy`: 8 commands already wait, it waits on host tools, or it is stopping", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`unavailable`: the agent does not answer; `shutting_down`", body = ErrorBody),
    ),
)]
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
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UncompactBody {
    /// The seq of the summary to undo (a compaction's `summary_seq`).
    summary_seq: u64,
}

/// `POST /v1/agents/{id}/uncompact` `{summary_seq}`: puts the archived originals back in place of
/// that summary, atomically.
#[utoipa::path(
    post,
    operation_id = "uncompact",
    path = "/v1/agents/{id}/uncompact",
    tag = "commands",
    summary = "Undo a compaction",
    description = "Puts the originals back in place of the summary at `summary_seq`, in one \
transaction; the event log gets an `uncompaction` record. Works for retired agents too.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    request_body = UncompactBody,
    responses(
        (status = 200, description = "Restored", body = Restored),
        (status = 400, description = "`bad_json`: the body is not JSON; `invalid_agent_id`; \
`bad_request`: a query parameter (it takes none), an unreadable body", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`; `unknown_summary`: history has no summary \
at that seq", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive in time", body = ErrorBody),
        (status = 409, description = "`busy`: the agent compacts or sleeps, or is stopping", body = ErrorBody),
        (status = 410, description = "`agent_retired`: the agent was retired", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over the limit", body = ErrorBody),
        (status = 422, description = "`invalid_body`: JSON of the wrong shape", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
        (status = 503, description = "`unavailable`: the agent does not answer; `shutting_down`", body = ErrorBody),
    ),
)]
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
#[derive(Debug, Serialize, ToSchema)]
struct Restored {
    /// Always `restored`.
    #[schema(pattern = "^restored$")]
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
