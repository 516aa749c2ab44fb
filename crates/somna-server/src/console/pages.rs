//! The console's HTML fragments (`/console/f/…`), rendered with `maud`.

use std::cmp::Ordering;

use actix_web::HttpRequest;
use maud::{Markup, PreEscaped, html};
use somna_core::{AgentId, EventRecord, JournalQuery, LoggedEvent, Message, SourceType, Trigger};
use somna_runtime::{AgentState, AgentStatus};

use super::chart::{self, Mark};
use super::{agent_of, html as fragment};
use crate::error::ApiError;
use crate::query::{Params, parse_time};
use crate::routes::prompt::{PromptParts, preview_input};
use crate::routes::{Reply, State, runtime_error};

/// Rows of the agents table per page.
const PAGE: usize = 50;
/// Newest events read for an agent's chart and its row's counts.
const EVENTS: usize = 1000;

/// The columns the agents table sorts by.
const SORTS: &[&str] = &["id", "state", "usage", "history", "archive", "compactions"];

/// `GET /console/f/agents?sort&dir&q&state&page`: one page of the hosted agents.
pub(super) async fn agents(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(
        req.query_string(),
        &["sort", "dir", "q", "state", "page"],
        &[],
    )?;
    let sort = params.get("sort").unwrap_or("id");
    if !SORTS.contains(&sort) {
        return Err(ApiError::bad_param(
            "sort",
            format!("expected one of: {}", SORTS.join(", ")),
        ));
    }
    let desc = match params.get("dir").unwrap_or("asc") {
        "asc" => false,
        "desc" => true,
        other => {
            return Err(ApiError::bad_param(
                "dir",
                format!("expected asc or desc, got {other:?}"),
            ));
        }
    };
    let query = params.get("q").unwrap_or("").trim().to_lowercase();
    let wanted_state = params.get("state").unwrap_or("").trim();
    if !wanted_state.is_empty() && !AgentState::ALL.iter().any(|s| s.as_str() == wanted_state) {
        let names: Vec<&str> = AgentState::ALL.iter().map(|s| s.as_str()).collect();
        return Err(ApiError::bad_param(
            "state",
            format!("expected one of: {}", names.join(", ")),
        ));
    }
    let page = params
        .parsed::<usize>("page", "a page number")?
        .unwrap_or(0);

    // A scoped token sees only the agents it reaches, in the count too.
    let principal = crate::auth::Principal::of(&req);
    let mut ids = state.runtime.agent_ids();
    ids.retain(|id| principal.reaches(id.as_str()));
    let total = ids.len();
    let mut ids: Vec<AgentId> = ids
        .into_iter()
        .filter(|id| query.is_empty() || id.as_str().to_lowercase().contains(&query))
        .collect();
    // Sorted by id with no state filter (the first view), only the page's agents are asked for
    // their status: the ids alone decide what is on it. Otherwise every matching agent is.
    let by_id_only = sort == "id" && wanted_state.is_empty();
    let id_matches = ids.len();
    if by_id_only {
        ids.sort();
        if desc {
            ids.reverse();
        }
        let pages = id_matches.div_ceil(PAGE).max(1);
        let first = page.min(pages - 1) * PAGE;
        ids = ids.into_iter().skip(first).take(PAGE).collect();
    }
    let statuses = futures::future::join_all(ids.iter().map(|id| state.runtime.status(id))).await;
    let mut rows: Vec<AgentStatus> = statuses
        .into_iter()
        .filter_map(Result::ok)
        .filter(|s| wanted_state.is_empty() || s.state.as_str() == wanted_state)
        .collect();
    rows.sort_by(|a, b| {
        let order = match sort {
            "state" => a.state.as_str().cmp(b.state.as_str()),
            "usage" => a.usage.partial_cmp(&b.usage).unwrap_or(Ordering::Equal),
            "history" => a.history_len.cmp(&b.history_len),
            "archive" => a.archive_len.cmp(&b.archive_len),
            "compactions" => a.compaction_count.cmp(&b.compaction_count),
            _ => Ordering::Equal,
        }
        .then_with(|| a.id.cmp(&b.id));
        if desc { order.reverse() } else { order }
    });
    let matching = if by_id_only { id_matches } else { rows.len() };
    let pages = matching.div_ceil(PAGE).max(1);
    let page = page.min(pages - 1);
    let skip = if by_id_only { 0 } else { page * PAGE };
    let store = state.runtime.store();
    let shown: Vec<(AgentStatus, RowLog)> = rows
        .into_iter()
        .skip(skip)
        .take(PAGE)
        .map(|s| {
            let log = RowLog::of(&store.events(&s.id, EVENTS).unwrap_or_default());
            (s, log)
        })
        .collect();
    let header = |key: &str, label: &str| {
        let active = key == sort;
        let arrow = match (active, desc) {
            (true, true) => " ▼",
            (true, false) => " ▲",
            _ => "",
        };
        html! { th data-sort=(key) class=[active.then_some("sorted")] { (label) (arrow) } }
    };
    fragment(html! {
        p #agents-total {
            (matching) " of " (total) " agents · page " (page + 1) " of " (pages)
        }
        table #agents-table data-page=(page) data-pages=(pages) data-matching=(matching) {
            thead { tr {
                (header("id", "agent")) (header("state", "state")) (header("usage", "usage"))
                (header("history", "live")) (header("archive", "archived"))
                (header("compactions", "compactions")) th { "last sleep" }
            } }
            tbody {
                @for (s, log) in &shown {
                    tr data-agent=(s.id.as_str()) data-usage=(format!("{:.4}", s.usage)) {
                        td { a href=(format!("#/agent/{}", s.id.as_str())) { (s.id.as_str()) } }
                        td.state { (s.state.as_str()) }
                        td { (usage_bar(s)) }
                        td.num { (s.history_len) }
                        td.num { (s.archive_len) }
                        td.num title="by trigger: sleep / emergency / manual" {
                            (s.compaction_count)
                            @if s.compaction_count > 0 {
                                " (" (log.sleep) " / " (log.emergency) " / " (log.manual) ")"
                            }
                        }
                        td { (log.last_sleep.map_or_else(|| "never".to_string(), |t| t.to_string())) }
                    }
                }
            }
        }
        p.pager {
            button #agents-prev type="button" data-page=(page.saturating_sub(1)) disabled[page == 0] { "← previous" }
            button #agents-next type="button" data-page=(page + 1) disabled[page + 1 >= pages] { "next →" }
        }
    })
}

/// What a row shows from the agent's log.
#[derive(Default)]
struct RowLog {
    sleep: u32,
    emergency: u32,
    manual: u32,
    last_sleep: Option<somna_core::Timestamp>,
}

impl RowLog {
    fn of(events: &[LoggedEvent]) -> RowLog {
        let mut row = RowLog::default();
        for e in events {
            match &e.event {
                EventRecord::Compaction(r) => match r.trigger {
                    Trigger::Sleep => row.sleep += 1,
                    Trigger::Emergency => row.emergency += 1,
                    _ => row.manual += 1,
                },
                EventRecord::Sleep { at, .. } => {
                    row.last_sleep = row.last_sleep.max(Some(*at));
                }
                _ => {}
            }
        }
        row
    }
}

/// Usage as a bar, with the sleep and emergency thresholds marked on it.
fn usage_bar(s: &AgentStatus) -> Markup {
    let c = &s.config.compaction;
    let pct = (s.usage * 100.0).clamp(0.0, 100.0);
    let level = if somna_core::usage::over_emergency(s.usage, c) {
        "over-emergency"
    } else if s.usage >= c.sleep_threshold {
        "over-sleep"
    } else {
        "ok"
    };
    html! {
        div.bar title=(format!("{:.1}% of {} tokens", s.usage * 100.0, s.max_context_tokens)) {
            span class=(level) style=(format!("width:{pct:.1}%")) {}
            i.sleep style=(format!("left:{:.1}%", c.sleep_threshold * 100.0)) {}
            i.emergency style=(format!("left:{:.1}%", c.emergency_threshold * 100.0)) {}
        }
        small { (format!("{:.1}%", s.usage * 100.0)) }
    }
}

/// The status of a fragment's agent.
async fn status_of(state: &State, id: &AgentId) -> Result<AgentStatus, ApiError> {
    state
        .runtime
        .status(id)
        .await
        .map_err(|e| runtime_error(state, id, e))
}

/// `GET /console/f/agents/{id}`: the agent's page.
pub(super) async fn agent(state: State, req: HttpRequest) -> Reply {
    Params::parse(req.query_string(), &[], &[])?;
    let id = agent_of(&state, &req)?;
    let s = status_of(&state, &id).await?;
    let c = &s.config.compaction;
    let messages = state.runtime.store().history(&id)?;
    let chart = chart_markup(&state, &s, &messages)?;
    let history = history_markup(&messages);
    fragment(html! {
        h2 #agent-title data-agent=(id.as_str()) { (id.as_str()) }
        section #agent-summary {
            (summary_markup(&s))
        }
        section #chart-section {
            h3 { "Context usage" }
            div #chart { (chart) }
        }
        section #actions {
            h3 { "Actions" }
            form #input-form {
                textarea #input-text name="content" rows="2" placeholder="Say something to the agent" {}
                input #input-name name="name" placeholder="from (optional)";
                button #input-send type="submit" { "Send" }
            }
            p {
                label { input #compact-force type="checkbox" checked; " force" }
                button #compact-now type="button" { "Compact" }
                button #sleep-now type="button" { "Sleep" }
            }
            p #action-result role="status" {}
        }
        section #config-section {
            h3 { "Config" }
            form #config-form {
                label { "sleep threshold " input name="sleep_threshold" type="number" step="0.01" min="0" max="1" value=(c.sleep_threshold); }
                label { "emergency threshold " input name="emergency_threshold" type="number" step="0.01" min="0" max="1" value=(c.emergency_threshold); }
                label { "preserve messages " input name="preserve_messages" type="number" step="1" min="0" value=(c.preserve_messages); }
                label { "max context tokens " input name="max_context_tokens" type="number" step="1" min="1" value=(c.max_context_tokens); }
                button #config-save type="submit" { "Save" }
            }
            p #config-status role="status" {}
        }
        (asking_section(&Asking {
            name: "prompt",
            title: "What the agent sees",
            note: Some("The prompt its next LLM call would get if this input arrived now (nothing is sent)."),
            input: ("prompt-input", "input"),
            placeholder: "the next input (empty: the prompt as it stands)",
            button: "Show",
        }))
        section #history-section {
            h3 { "Live history" }
            div #history { (history) }
        }
        (asking_section(&Asking {
            name: "archive",
            title: "Archive",
            note: None,
            input: ("archive-q", "q"),
            placeholder: "search the archive",
            button: "Search",
        }))
        section #journal-section {
            h3 { "Journal" }
            form #journal-form {
                select name="source" {
                    option value="" { "any source" }
                    @for source in SourceType::ALL {
                        option value=(source.as_str()) { (source.as_str()) }
                    }
                }
                input name="tag" placeholder="tag";
                input name="min_importance" type="number" min="1" max="10" placeholder="min importance";
                input name="since" placeholder="since (1d, 2h, RFC 3339)";
                button type="submit" { "Filter" }
            }
            div #journal {}
        }
        section #facts-section {
            h3 { "Memory facts" }
            div #facts {}
        }
    })
}

/// A section of the agent page that asks for one text and shows the answer below it.
struct Asking {
    /// The stem of the ids: `{name}-section`, `{name}-form`, and `{name}` for the answer.
    name: &'static str,
    /// The heading.
    title: &'static str,
    /// A line under the heading, when the section needs one.
    note: Option<&'static str>,
    /// The input's id and form name.
    input: (&'static str, &'static str),
    /// What the empty input says.
    placeholder: &'static str,
    /// The submit button's text.
    button: &'static str,
}

fn asking_section(a: &Asking) -> Markup {
    let (input_id, input_name) = a.input;
    html! {
        section id=(format!("{}-section", a.name)) {
            h3 { (a.title) }
            @if let Some(note) = a.note { p.note { (note) } }
            form id=(format!("{}-form", a.name)) {
                input id=(input_id) name=(input_name) placeholder=(a.placeholder);
                button type="submit" { (a.button) }
            }
            div id=(a.name) {}
        }
    }
}

fn summary_markup(s: &AgentStatus) -> Markup {
    html! {
        dl.summary {
            dt { "state" } dd #agent-state { (s.state.as_str()) }
            @if let Some(host) = &s.host { dt { "node" } dd { (host) } }
            dt { "usage" } dd #agent-usage { (usage_bar(s)) " " (s.prompt_tokens) " of " (s.max_context_tokens) " tokens" }
            dt { "messages" } dd { (s.history_len) " live · " (s.archive_len) " archived" }
            dt { "compactions" } dd #agent-compactions { (s.compaction_count) }
            dt { "memory items" } dd #agent-grounding {
                (s.grounding.kept) " kept · " (s.grounding.repaired) " repaired · "
                (s.grounding.dropped) " dropped"
            }
            @if s.calibration.samples > 0 {
                dt { "calibration" } dd #agent-calibration {
                    (format!("×{:.2} applied", s.calibration.applied))
                    " · the server counts " (format!("×{:.2}", s.calibration.learned))
                    " of Somna's estimate over " (s.calibration.samples) " reports"
                    @if s.calibration.held_back { strong { " · held back until more reports agree" } }
                }
            }
            dt { "model" } dd { (s.config.model) }
        }
    }
}

/// The chart and the list of what it marks.
fn chart_markup(state: &State, s: &AgentStatus, history: &[Message]) -> Result<Markup, ApiError> {
    let mut events = state.runtime.store().events(&s.id, EVENTS)?;
    events.reverse();
    let window = u64::from(s.max_context_tokens);
    let marks = chart::marks(&events, window, s.calibration.applied);
    let undo = chart::undoable(&events);
    // The compactions that can still be undone: their summaries are in the live history.
    let summaries: std::collections::HashSet<u64> = history
        .iter()
        .filter(|m| matches!(m.kind, somna_core::MessageKind::Summary(_)))
        .map(|m| m.seq)
        .collect();
    let c = &s.config.compaction;
    let now = state.runtime.clock().now();
    let svg = chart::svg(
        &marks,
        now,
        s.usage,
        c.sleep_threshold,
        c.emergency_threshold,
    );
    Ok(html! {
        div #usage-chart data-marks=(marks.len()) { (PreEscaped(svg)) }
        p.legend {
            @for mark in [Mark::Compaction, Mark::Emergency, Mark::Sleep, Mark::Masking] {
                span style=(format!("color:{}", mark.hex())) { "● " (mark.as_str()) " " }
            }
            span.threshold { "– – sleep and emergency thresholds" }
        }
        ol #chart-marks reversed {
            @for m in marks.iter().rev() {
                li data-mark=(m.mark.as_str()) data-seq=(m.seq) {
                    (m.at.to_string()) " · " (m.label)
                    @if let Some(seq) = m.summary_seq.filter(|s| undo == Some(m.seq) && summaries.contains(s)) {
                        " " button.uncompact type="button" data-seq=(seq) { "undo" }
                    }
                }
            }
        }
    })
}

/// `GET /console/f/agents/{id}/chart`: the usage chart and the agent's summary, refreshed live.
pub(super) async fn chart(state: State, req: HttpRequest) -> Reply {
    Params::parse(req.query_string(), &[], &[])?;
    let id = agent_of(&state, &req)?;
    let s = status_of(&state, &id).await?;
    let chart = chart_markup(&state, &s, &state.runtime.store().history(&id)?)?;
    fragment(html! {
        template #summary-update { (summary_markup(&s)) }
        (chart)
    })
}

fn history_markup(messages: &[Message]) -> Markup {
    let shown = &messages[messages.len().saturating_sub(100)..];
    html! {
        @if messages.len() > shown.len() {
            p.note { "the last " (shown.len()) " of " (messages.len()) " live messages" }
        }
        ol #history-list {
            @for m in shown {
                @let summary = matches!(m.kind, somna_core::MessageKind::Summary(_));
                li data-seq=(m.seq) data-role=(m.role.as_str()) class=[summary.then_some("summary")] {
                    span.meta { "#" (m.seq) " " (m.role.as_str()) @if let Some(n) = &m.name { " (" (n) ")" } " · " (m.tokens) " tokens" }
                    @if summary {
                        strong { " compaction summary " }
                        button.uncompact type="button" data-seq=(m.seq) { "undo this compaction" }
                    }
                    pre { (m.content) }
                }
            }
        }
    }
}

/// `GET /console/f/agents/{id}/history`: the live history (the last 100 messages).
pub(super) async fn history(state: State, req: HttpRequest) -> Reply {
    Params::parse(req.query_string(), &[], &[])?;
    let id = agent_of(&state, &req)?;
    fragment(history_markup(&state.runtime.store().history(&id)?))
}

fn messages_markup(list_id: &str, messages: &[Message]) -> Markup {
    html! {
        @if messages.is_empty() { p.note { "nothing" } }
        ol id=(list_id) {
            @for m in messages {
                li data-seq=(m.seq) {
                    span.meta { "#" (m.seq) " " (m.role.as_str()) " · " (m.created_at.to_string()) }
                    pre { (m.content) }
                }
            }
        }
    }
}

/// `GET /console/f/agents/{id}/archive?q`: archive search hits, or the oldest archived messages.
pub(super) async fn archive(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["q"], &[])?;
    let id = agent_of(&state, &req)?;
    let store = state.runtime.store();
    let q = params.get("q").unwrap_or("").trim();
    let messages = if q.is_empty() {
        store.archive_range(&id, 0, 50)?
    } else {
        somna_runtime::prompt::search_archive(store, &id, q, 20)?
    };
    fragment(messages_markup("archive-list", &messages))
}

/// `GET /console/f/agents/{id}/journal?source&tag&min_importance&since`: journal entries, newest
/// first (100), compactions' synthesis entries marked.
pub(super) async fn journal(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(
        req.query_string(),
        &["source", "tag", "min_importance", "since"],
        &[],
    )?;
    let id = agent_of(&state, &req)?;
    let filled = |name: &str| params.get(name).map(str::trim).filter(|v| !v.is_empty());
    let source_type = filled("source")
        .map(|s| {
            s.parse::<SourceType>()
                .map_err(|e| ApiError::bad_param("source", e.to_string()))
        })
        .transpose()?;
    let min_importance = filled("min_importance")
        .map(|v| {
            v.parse::<u8>()
                .map_err(|_| ApiError::bad_param("min_importance", "expected 1 to 10"))
        })
        .transpose()?;
    let now = state.runtime.clock().now();
    let since = filled("since")
        .map(|v| parse_time(v, now).map_err(|e| ApiError::bad_param("since", e.to_string())))
        .transpose()?;
    let query = JournalQuery {
        source_type,
        tags: filled("tag")
            .map(|t| vec![t.to_string()])
            .unwrap_or_default(),
        min_importance,
        since,
        limit: Some(100),
        ..Default::default()
    };
    let entries = state.runtime.store().query_journal(&id, &query)?;
    fragment(html! {
        @if entries.is_empty() { p.note { "no entries match" } }
        ol #journal-list {
            @for e in &entries {
                @let synthesis = e.source_type == SourceType::Compaction;
                li data-entry=(e.id) data-source=(e.source_type.as_str()) class=[synthesis.then_some("synthesis")] {
                    span.meta {
                        "#" (e.id) " · " (e.source_type.as_str()) " · importance " (e.importance)
                        " · " (e.at.to_string())
                        @if !e.tags.is_empty() { " · " (e.tags.join(", ")) }
                        @if synthesis { strong { " synthesis" } }
                        @if let Some((from, through)) = e.covers {
                            span.covers data-covers=(format!("{from}-{through}")) { " · covers turns #" (from) "–#" (through) }
                        }
                    }
                    pre { (e.content) }
                }
            }
        }
    })
}

/// `GET /console/f/agents/{id}/facts`: memory facts with the journal entries they came from.
pub(super) async fn facts(state: State, req: HttpRequest) -> Reply {
    Params::parse(req.query_string(), &[], &[])?;
    let id = agent_of(&state, &req)?;
    let store = state.runtime.store();
    let facts = store.facts(&id)?;
    let mut rows = Vec::with_capacity(facts.len());
    for f in facts {
        let mut sources = Vec::new();
        for entry in &f.source_entry_ids {
            sources.push((*entry, store.journal_entry(&id, *entry)?));
        }
        rows.push((f, sources));
    }
    fragment(html! {
        @if rows.is_empty() { p.note { "no facts yet (sleep distills them from the journal)" } }
        ol #facts-list {
            @for (f, sources) in &rows {
                li data-fact=(f.id) {
                    (f.text)
                    @if !f.source_seqs.is_empty() {
                        span.meta.turns data-turns=(f.source_seqs.iter().map(u64::to_string).collect::<Vec<_>>().join(",")) {
                            " · from turns "
                            (f.source_seqs.iter().map(|s| format!("#{s}")).collect::<Vec<_>>().join(", "))
                        }
                    }
                    ul.sources {
                        @for (entry, found) in sources {
                            li data-entry=(entry) {
                                "from entry #" (entry) ": "
                                @match found {
                                    Some(e) => { (e.content) }
                                    None => { em { "(gone)" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    })
}

/// `GET /console/f/agents/{id}/prompt?input`: what the agent sees — the prompt its next LLM call
/// would get for `input` (the API's `GET /v1/agents/{id}/prompt`): the window by part as a bar and
/// a table, then message by message with its part and tokens.
pub(super) async fn prompt(state: State, req: HttpRequest) -> Reply {
    let params = Params::parse(req.query_string(), &["input"], &[])?;
    let id = agent_of(&state, &req)?;
    let input = preview_input(&params)?;
    let s = status_of(&state, &id).await?;
    let (built, working) = state
        .runtime
        .preview(&id, &s.config, input)
        .await
        .map_err(|e| runtime_error(&state, &id, e))?;
    let window = s.config.compaction.max_context_tokens;
    let parts = PromptParts::of(&built, window).labelled();
    let used = u64::from(window) - parts[5].2;
    let share = |tokens: u64| tokens as f64 * 100.0 / f64::from(window.max(1));
    let part_of = |i: usize| {
        if i == 0 {
            ("system", "persona + summary")
        } else if built.note_index == Some(i) {
            ("working", "working context")
        } else {
            ("live", "live history")
        }
    };
    fragment(html! {
        div.window #prompt-window title=(format!("{used} of {window} tokens")) {
            @for (class, label, tokens) in &parts[..5] {
                @if *tokens > 0 {
                    span class=(class) style=(format!("width:{:.2}%", share(*tokens))) title=(format!("{label}: {tokens} tokens")) {}
                }
            }
        }
        table #prompt-parts {
            tr { th { "part" } th { "tokens" } th { "of the window" } }
            @for (class, label, tokens) in parts {
                tr data-part=(class) {
                    th { i class=(class) {} " " (label) }
                    td { (tokens) }
                    td { (format!("{:.1}%", share(tokens))) }
                }
            }
            tr { th { "prompt / budget" } td #prompt-total colspan="2" { (built.total_tokens()) " / " (built.budget) " (window " (window) ")" } }
        }
        @if built.dropped_turns > 0 {
            p.note { (built.dropped_turns) " oldest live turn(s) left out to fit the budget (the next tick compacts)" }
        }
        p.note #prompt-recalled {
            "recalled for this input: " (working.facts.len()) " memory facts, "
            (working.excerpts.len()) " archive excerpts ("
            (working.turns().count()) " archived turns)"
        }
        ol #prompt-messages {
            @for (i, (m, tokens)) in built.messages.iter().zip(&built.message_tokens).enumerate() {
                @let (class, label) = part_of(i);
                li data-role=(m.role.as_str()) data-part=(class) class=(class) {
                    span.meta { (label) " · " (m.role.as_str()) @if let Some(n) = &m.name { " (" (n) ")" } " · " (tokens) " tokens" }
                    pre { (m.content) }
                }
            }
        }
    })
}
