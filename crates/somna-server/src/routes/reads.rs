//! Reads answered straight from the store: history and archive (paged by seq), archive search,
//! journal queries (newest first, paged by entry id), facts and the event log. They work for any
//! agent the store knows, retired ones included.

use actix_web::HttpRequest;
use actix_web::http::StatusCode;
use serde::Serialize;
use somna_core::{AgentId, Fact, JournalEntry, JournalQuery, Message, Seq, SourceType};
use somna_runtime::prompt::search_archive;
use somna_store::LoggedEvent;

use super::{Reply, State, json, known_agent, no_params, path_agent};
use crate::error::ApiError;
use crate::query::{Params, parse_time};

/// Default and largest page of history or archive messages.
const MESSAGES_PAGE: (usize, usize) = (100, 1000);
/// Default and largest page of journal entries.
const JOURNAL_PAGE: (usize, usize) = (50, 1000);
/// Default and largest number of events.
const EVENTS_PAGE: (usize, usize) = (50, 1000);
/// Default and largest number of archive search hits.
const SEARCH_HITS: (usize, usize) = (10, 100);

/// A page of messages.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
struct SearchHits<'a> {
    query: &'a str,
    /// Best first.
    hits: &'a [Message],
}

/// The memory facts of an agent.
#[derive(Debug, Serialize)]
struct Facts<'a> {
    facts: &'a [Fact],
}

/// The event log of an agent, newest first.
#[derive(Debug, Serialize)]
struct Events<'a> {
    events: &'a [LoggedEvent],
}

/// A page of journal entries.
#[derive(Debug, Serialize)]
struct JournalPage {
    entries: Vec<JournalEntry>,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    next_cursor: Option<u64>,
}

/// `GET /v1/agents/{id}/journal?source_type&tag&min_importance&since&until&limit&cursor`: entries
/// newest first. `tag` may repeat or hold a comma-separated list (every tag must match); `since`
/// and `until` take a duration meaning "that long ago" (`1d`) or an RFC 3339 time.
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
pub(crate) async fn facts(state: State, req: HttpRequest) -> Reply {
    no_params(&req)?;
    let id = path_agent(&req)?;
    known_agent(&state, &id)?;
    let facts = state.runtime.store().facts(&id)?;
    json(StatusCode::OK, &Facts { facts: &facts })
}

/// `GET /v1/agents/{id}/events?limit`: the agent's durable event log (compactions, undos,
/// maskings, failures), newest first.
pub(crate) async fn events(state: State, req: HttpRequest) -> Reply {
    let id = path_agent(&req)?;
    let params = Params::parse(req.query_string(), &["limit"], &[])?;
    let limit = params.limit(EVENTS_PAGE.0, EVENTS_PAGE.1)?;
    known_agent(&state, &id)?;
    let events = state.runtime.store().events(&id, limit)?;
    json(StatusCode::OK, &Events { events: &events })
}
