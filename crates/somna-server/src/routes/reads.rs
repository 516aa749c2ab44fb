//! Reads answered straight from the store: history and archive (paged by seq), archive search,
//! journal queries (newest first, paged by entry id), facts and the event log. They work for any
//! agent the store knows, retired ones included.

use actix_web::HttpRequest;
use actix_web::http::{StatusCode, header};
use serde::Serialize;
use somna_core::{AgentId, Fact, JournalEntry, JournalQuery, Message, Seq, SourceType};
use somna_runtime::prompt::search_archive;
use somna_store::LoggedEvent;
use utoipa::ToSchema;

use super::{Reply, State, json, known_agent, no_params, path_agent, sse_response};
use crate::error::{ApiError, Denied, ErrorBody, ErrorCode, ReadErrors};
use crate::query::{Params, parse_time};
use crate::sse::log_stream;

/// Default and largest page of history or archive messages.
const MESSAGES_PAGE: (usize, usize) = (100, 1000);
/// Default and largest page of journal entries.
const JOURNAL_PAGE: (usize, usize) = (50, 1000);
/// Default and largest number of events.
const EVENTS_PAGE: (usize, usize) = (50, 1000);
/// Default and largest number of archive search hits.
const SEARCH_HITS: (usize, usize) = (10, 100);

/// A page of messages.
#[derive(Debug, Serialize, ToSchema)]
struct MessagePage {
    messages: Vec<Message>,
    /// Pass as `from_seq` for the next page; `null` on the last page.
    next_from_seq: Option<Seq>,
}

impl MessagePage {
    /// The agent (known), `from_seq` and `limit` a page of messages is asked for with.
    fn request(state: &State, req: &HttpRequest) -> Result<(AgentId, Seq, usize), ApiError> {
        let id = path_agent(req)?;
        let params = Params::parse(req.query_string(), &["from_seq", "limit"], &[])?;
        let from = params
            .parsed::<u64>("from_seq", "a sequence number")?
            .unwrap_or(0);
        let limit = params.limit(MESSAGES_PAGE.0, MESSAGES_PAGE.1)?;
        known_agent(state, &id)?;
        Ok((id, from, limit))
    }

    /// 200 with the page.
    fn reply(messages: Vec<Message>, next_from_seq: Option<Seq>) -> Reply {
        json(
            StatusCode::OK,
            &MessagePage {
                messages,
                next_from_seq,
            },
        )
    }
}

/// `GET /v1/agents/{id}/history?from_seq&limit`: live history in seq order.
#[utoipa::path(
    get,
    operation_id = "history",
    path = "/v1/agents/{id}/history",
    tag = "reads",
    summary = "An agent's history",
    description = "The live history (what the next prompt holds), in seq order, a page at a time.",
    params(
        ("id" = AgentId, Path, description = "The agent's id"),
        ("from_seq" = Option<u64>, Query, description = "The first seq (default 0); a page's `next_from_seq`"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many (default 100)"),
    ),
    responses(
        (status = 200, description = "A page of messages", body = MessagePage),
        ReadErrors,
        Denied,
    ),
)]
pub(crate) async fn history(state: State, req: HttpRequest) -> Reply {
    let (id, from, limit) = MessagePage::request(&state, &req)?;
    let mut messages = state.runtime.store().history_range(&id, from, limit + 1)?;
    let next_from_seq = if messages.len() > limit {
        messages.truncate(limit);
        messages.last().map(|m| m.seq + 1)
    } else {
        None
    };
    MessagePage::reply(messages, next_from_seq)
}

/// `GET /v1/agents/{id}/archive?from_seq&limit`: archived messages in seq order. A page never ends
/// in the middle of one seq (an original and the folded summaries that start at its seq), so it
/// may hold a few more than `limit`.
#[utoipa::path(
    get,
    operation_id = "archive",
    path = "/v1/agents/{id}/archive",
    tag = "reads",
    summary = "An agent's archive",
    description = "The originals compaction moved out of history, in seq order, a page at a time. \
A page never splits one seq, so it may hold a few more than `limit`.",
    params(
        ("id" = AgentId, Path, description = "The agent's id"),
        ("from_seq" = Option<u64>, Query, description = "The first seq (default 0); a page's `next_from_seq`"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many (default 100)"),
    ),
    responses(
        (status = 200, description = "A page of messages", body = MessagePage),
        ReadErrors,
        Denied,
    ),
)]
pub(crate) async fn archive(state: State, req: HttpRequest) -> Reply {
    let (id, from, limit) = MessagePage::request(&state, &req)?;
    let store = state.runtime.store();
    let mut messages = store.archive_range(&id, from, limit + 1)?;
    let mut next_from_seq = None;
    if messages.len() > limit {
        let extra = messages.pop();
        if let (Some(last), Some(extra)) = (messages.last().map(|m| m.seq), extra) {
            if extra.seq == last {
                // Complete the group of `last` and look past it.
                messages.retain(|m| m.seq != last);
                messages.extend(store.archived(&id, last, last)?);
                if last < u64::MAX && !store.archive_range(&id, last + 1, 1)?.is_empty() {
                    next_from_seq = Some(last + 1);
                }
            } else {
                next_from_seq = Some(last + 1);
            }
        }
    }
    MessagePage::reply(messages, next_from_seq)
}

/// `GET /v1/agents/{id}/archive/search?q&limit`: BM25 keyword search over the agent's recent
/// archive (the last `ARCHIVE_SEARCH_WINDOW` sequence numbers), best first.
#[utoipa::path(
    get,
    operation_id = "search_archive",
    path = "/v1/agents/{id}/archive/search",
    tag = "reads",
    summary = "Search an agent's archive",
    description = "BM25 keyword search over the agent's recent archive (the last 2,000 sequence \
numbers), best hits first.",
    params(
        ("id" = AgentId, Path, description = "The agent's id"),
        ("q" = String, Query, pattern = "\\S", description = "The search text (not blank)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "At most this many hits (default 10)"),
    ),
    responses(
        (status = 200, description = "The hits", body = SearchHits),
        (status = 400, description = "`invalid_agent_id`; `bad_request`: an unknown, repeated or bad query parameter; `q` missing or blank", body = ErrorBody),
        Denied,
        (status = 404, description = "`unknown_agent`: no agent with that id", body = ErrorBody),
        (status = 500, description = "`internal`: the store failed", body = ErrorBody),
    ),
)]
pub(crate) async fn search(state: State, req: HttpRequest) -> Reply {
    let id = path_agent(&req)?;
    let params = Params::parse(req.query_string(), &["q", "limit"], &[])?;
    let q = params.get("q").unwrap_or_default().trim().to_string();
    if q.is_empty() {
        return Err(ApiError::bad_param(
            "q",
            "the search text is missing or empty",
        ));
    }
    let limit = params.limit(SEARCH_HITS.0, SEARCH_HITS.1)?;
    known_agent(&state, &id)?;
    let hits = search_archive(state.runtime.store(), &id, &q, limit)?;
    json(
        StatusCode::OK,
        &SearchHits {
            query: &q,
            hits: &hits,
        },
    )
}

/// The answer of an archive search.
#[derive(Debug, Serialize, ToSchema)]
struct SearchHits<'a> {
    query: &'a str,
    /// Best first.
    hits: &'a [Message],
}

/// The memory facts of an agent.
#[derive(Debug, Serialize, ToSchema)]
struct Facts<'a> {
    facts: &'a [Fact],
}

/// The event log of an agent, newest first.
#[derive(Debug, Serialize, ToSchema)]
struct Events<'a> {
    events: &'a [LoggedEvent],
}

/// A page of journal entries.
#[derive(Debug, Serialize, ToSchema)]
struct JournalPage {
    entries: Vec<JournalEntry>,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    next_cursor: Option<u64>,
}

/// `GET /v1/agents/{id}/journal?source_type&tag&min_importance&since&until&limit&cursor`: entries
/// newest first. `tag` may repeat or hold a comma-separated list (every tag must match); `since`
/// and `until` take a duration meaning "that long ago" (`1d`) or an RFC 3339 time.
#[utoipa::path(
    get,
    operation_id = "journal",
    path = "/v1/agents/{id}/journal",
    tag = "reads",
    summary = "An agent's journal",
    description = "Journal entries, newest first, every filter optional.",
    params(
        ("id" = AgentId, Path, description = "The agent's id"),
        ("source_type" = Option<SourceType>, Query, description = "Entries from this source"),
        ("tag" = Option<Vec<String>>, Query, style = Form, explode = true, description = "Entries \
that have this tag; repeat it or list several with commas: all must match"),
        ("min_importance" = Option<u8>, Query, minimum = 1, maximum = 10, description = "Entries at least this important"),
        ("since" = Option<String>, Query, min_length = 1, description = "Entries at or after: a duration meaning \
that long ago (`1d`, `90m`) or an RFC 3339 time", example = "1d"),
        ("until" = Option<String>, Query, min_length = 1, description = "Entries before, same forms", example = "2026-11-21T10:00:00Z"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many (default 50)"),
        ("cursor" = Option<u64>, Query, description = "The previous page's `next_cursor`"),
    ),
    responses(
        (status = 200, description = "A page of entries", body = JournalPage),
        ReadErrors,
        Denied,
    ),
)]
pub(crate) async fn journal(state: State, req: HttpRequest) -> Reply {
    let id = path_agent(&req)?;
    let params = Params::parse(
        req.query_string(),
        &[
            "source_type",
            "tag",
            "min_importance",
            "since",
            "until",
            "limit",
            "cursor",
        ],
        &["tag"],
    )?;
    let source_type = params
        .get("source_type")
        .map(|s| s.trim().parse::<SourceType>())
        .transpose()
        .map_err(|e| ApiError::bad_param("source_type", e.to_string()))?;
    let tags: Vec<String> = params
        .all("tag")
        .flat_map(|t| t.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    let min_importance = match params.parsed::<u8>("min_importance", "a number from 1 to 10")? {
        Some(n) if !(1..=10).contains(&n) => {
            return Err(ApiError::bad_param(
                "min_importance",
                format!("must be between 1 and 10, got {n}"),
            ));
        }
        other => other,
    };
    let now = state.runtime.clock().now();
    let time = |name: &str| {
        params
            .get(name)
            .map(|v| parse_time(v, now).map_err(|e| ApiError::bad_param(name, e.to_string())))
            .transpose()
    };
    let since = time("since")?;
    let until = time("until")?;
    let limit = params.limit(JOURNAL_PAGE.0, JOURNAL_PAGE.1)?;
    let cursor = params.parsed::<u64>("cursor", "an entry id (a `next_cursor`)")?;
    known_agent(&state, &id)?;
    let query = JournalQuery {
        source_type,
        tags,
        min_importance,
        since,
        until,
        before_id: cursor,
        limit: Some(limit + 1),
    };
    let mut entries = state.runtime.store().query_journal(&id, &query)?;
    let next_cursor = if entries.len() > limit {
        entries.truncate(limit);
        entries.last().map(|e| e.id)
    } else {
        None
    };
    json(
        StatusCode::OK,
        &JournalPage {
            entries,
            next_cursor,
        },
    )
}

/// `GET /v1/agents/{id}/facts`: memory facts with their provenance, oldest first.
#[utoipa::path(
    get,
    operation_id = "facts",
    path = "/v1/agents/{id}/facts",
    tag = "reads",
    summary = "An agent's memory facts",
    description = "The durable facts sleep distilled from the journal, oldest first, with the \
journal entries each came from.",
    params(("id" = AgentId, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The facts", body = Facts),
        ReadErrors,
        Denied,
    ),
)]
pub(crate) async fn facts(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    known_agent(&state, &id)?;
    let facts = state.runtime.store().facts(&id)?;
    json(StatusCode::OK, &Facts { facts: &facts })
}

/// `GET /v1/agents/{id}/events?limit`: the agent's durable event log (compactions, undos,
/// maskings, failures, sleeps), newest first. With `Accept: text/event-stream`, the log as
/// Server-Sent Events instead (see [`follow_events`]).
#[utoipa::path(
    get,
    operation_id = "event_log",
    path = "/v1/agents/{id}/events",
    tag = "reads",
    summary = "An agent's event log",
    description = "The agent's durable event log (compactions, undos, maskings, failed \
compactions, notes, sleeps), newest first. With `Accept: text/event-stream` the log is streamed \
as Server-Sent Events instead (`id:` each event's seq, `data:` the logged event), starting after \
`Last-Event-ID` (else after `after`, else with the events logged from now on) and following it.",
    params(
        ("id" = AgentId, Path, description = "The agent's id"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many (default 50; JSON only)"),
        ("after" = Option<u64>, Query, description = "Stream only: start after this event seq"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Stream only: resume after this event seq (wins over `after`)"),
    ),
    responses(
        (status = 200, description = "The events (JSON), or the log as Server-Sent Events", content(
            (Events = "application/json"),
            (String = "text/event-stream"),
        )),
        ReadErrors,
        Denied,
    ),
)]
pub(crate) async fn events(state: State, req: HttpRequest) -> Reply {
    let id = path_agent(&req)?;
    if wants_event_stream(&req) {
        return follow_events(state, req, id);
    }
    let params = Params::parse(req.query_string(), &["limit"], &[])?;
    let limit = params.limit(EVENTS_PAGE.0, EVENTS_PAGE.1)?;
    known_agent(&state, &id)?;
    let events = state.runtime.store().events(&id, limit)?;
    json(StatusCode::OK, &Events { events: &events })
}

/// The request asks for Server-Sent Events.
fn wants_event_stream(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().starts_with("text/event-stream"))
        })
}

/// `GET /v1/agents/{id}/events?after=SEQ` with `Accept: text/event-stream`: the agent's event log
/// as it grows. It starts after `Last-Event-ID` (a reconnecting client's last `id:`), else after
/// `after`, else with the events logged from now on; each event is `id: <seq>` and `data:
/// <logged event>`, oldest first. Resumable on any node of a cluster: the log is the store's.
fn follow_events(state: State, req: HttpRequest, id: AgentId) -> Reply {
    let params = Params::parse(req.query_string(), &["after"], &[])?;
    known_agent(&state, &id)?;
    let resume = match req.headers().get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_param(
                        "Last-Event-ID",
                        format!("expected an event seq (a whole number), got {v:?}"),
                    )
                })?,
        ),
        None => params.parsed::<u64>("after", "an event seq (a whole number)")?,
    };
    let store = state.runtime.store().clone();
    let cursor = match resume {
        Some(seq) => Some(seq),
        // From now on: after the newest event logged so far (from the first when there is none).
        None => store.events(&id, 1)?.first().map(|e| e.seq),
    };
    if *state.shutdown.borrow() {
        return Err(ApiError::new(
            ErrorCode::ShuttingDown,
            "the server is shutting down",
        ));
    }
    let stream = log_stream(
        store,
        id,
        cursor,
        state.runtime.subscribe(),
        state.sse_keep_alive,
        state.shutdown.clone(),
        &state.metrics,
    );
    Ok(sse_response(stream))
}
