//! Rendering results as text tables or JSON (`--json`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;

use serde::{Deserialize, Serialize};
use somna_core::config::AgentConfig;
use somna_core::record::EventRecord;
use somna_core::{AgentId, AgentRecord, Fact, JournalEntry, Message, MessageKind, Timestamp};
use somna_runtime::eval::RecallReport;
use somna_runtime::prompt::{Prompt, WorkingContext};
use somna_runtime::protocol::{AgentState, AgentStatus, CompactionOutcome, SleepResult};

mod config;
mod tokens;

/// Totals over every agent of a database (`somna stats`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Totals {
    pub agents: u64,
    pub history_messages: u64,
    pub archive_messages: u64,
    pub history_tokens: u64,
    pub compactions: u64,
    pub size_on_disk_bytes: u64,
}

/// Where results go: text for people, JSON for scripts.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    json: bool,
}

impl Out {
    pub fn new(json: bool) -> Self {
        Out { json }
    }

    fn print_json<T: Serialize + ?Sized>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("error: cannot render JSON: {e}"),
        }
    }

    /// True with `--json`.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Any serializable result as JSON (callers print their text form themselves without
    /// `--json`).
    pub fn value<T: Serialize + ?Sized>(&self, value: &T) {
        self.print_json(value);
    }

    /// Prints `answer` as JSON with `--json`, else `none` when the list it holds is `empty`;
    /// true when either was printed, false when the caller is to print the list as text.
    fn json_or_none<T: Serialize + ?Sized>(&self, answer: &T, empty: bool, none: &str) -> bool {
        if self.json {
            self.print_json(answer);
        } else if empty {
            println!("{none}");
        } else {
            return false;
        }
        true
    }

    /// A one-line confirmation.
    pub fn done(&self, text: &str) {
        if self.json {
            self.print_json(&serde_json::json!({ "ok": true, "message": text }));
        } else {
            println!("{text}");
        }
    }

    pub fn status(&self, s: &AgentStatus) {
        if self.json {
            self.print_json(s);
            return;
        }
        self.status_text(s);
    }

    /// The text form of an agent's status (local or from a server).
    pub fn status_text(&self, s: &AgentStatus) {
        println!("agent        {}", s.id);
        println!("state        {}", s.state.as_str());
        if let Some(host) = &s.host {
            println!("host         {host}");
        }
        println!(
            "usage        {:.1}% ({} of {} tokens; sleep at {:.0}%, emergency at {:.0}%)",
            s.usage * 100.0,
            s.prompt_tokens,
            s.max_context_tokens,
            s.config.compaction.sleep_threshold * 100.0,
            s.config.compaction.emergency_threshold * 100.0
        );
        println!(
            "history      {} messages · archive {}",
            s.history_len, s.archive_len
        );
        println!(
            "compactions  {} · last {}",
            s.compaction_count,
            s.last_compaction
                .map_or_else(|| "never".to_string(), |t| t.to_string())
        );
        println!("model        {}", s.config.model);
        let g = &s.grounding;
        if g.total() > 0 {
            println!(
                "memory items {} kept · {} repaired · {} dropped (checked against their sources)",
                g.kept, g.repaired, g.dropped
            );
        }
        let u = &s.chat_usage;
        if u.calls > 0 {
            let cached = u.cached_prompt_tokens.map_or_else(
                || "cache not reported".to_string(),
                |c| {
                    format!(
                        "{c} cached ({:.0}%)",
                        100.0 * c as f64 / u.prompt_tokens.max(1) as f64
                    )
                },
            );
            println!(
                "llm prompts  {} calls · {} prompt tokens · {cached}",
                u.calls, u.prompt_tokens
            );
        }
        if s.needs_reply {
            println!("             a reply is owed");
        }
        for p in &s.pending_tools {
            println!(
                "waiting on   {} ({}) until {}",
                p.name, p.call_id, p.deadline
            );
        }
    }

    /// The agents a server hosts (`GET /v1/agents?include_retired=true`).
    pub fn hosted_agents(&self, list: &AgentListView) {
        if list.agents.is_empty() {
            println!("no agents hosted");
        } else {
            println!(
                "{:<16} {:<17} {:>6} {:>8} {:>8} {:>11}  last compaction",
                "agent", "state", "usage", "history", "archive", "compactions"
            );
        }
        for a in &list.agents {
            println!(
                "{:<16} {:<17} {:>5.1}% {:>8} {:>8} {:>11}  {}{}",
                a.id.as_str(),
                a.state.as_str(),
                a.usage * 100.0,
                a.history_len,
                a.archive_len,
                a.compaction_count,
                a.last_compaction
                    .map_or_else(|| "never".to_string(), |t| t.to_string()),
                match (a.needs_reply, a.pending_tools) {
                    (_, n) if n > 0 => format!(" (waiting on {n} tool call(s))"),
                    (true, _) => " (a reply is owed)".to_string(),
                    _ => String::new(),
                }
            );
        }
        if !list.unavailable.is_empty() {
            println!("not answering: {}", join_ids(&list.unavailable));
        }
        if !list.retired.is_empty() {
            println!("retired: {}", join_ids(&list.retired));
        }
    }

    /// A created agent: one line with the resolved config's main values.
    pub fn created(&self, config: &AgentConfig) {
        config_line("created", config);
    }

    /// A configured agent: its config as JSON (`--json`) or one line with the main values.
    pub fn configured<T: Serialize + ?Sized>(&self, answer: &T, config: &AgentConfig) {
        if self.json {
            self.print_json(answer);
        } else {
            config_line("configured", config);
        }
    }

    /// A compaction outcome.
    pub fn compaction(&self, outcome: &CompactionOutcome) {
        if self.json {
            self.print_json(outcome);
        } else {
            println!("{}", compaction_text(outcome));
        }
    }

    /// A sleep's result.
    pub fn slept(&self, result: &SleepResult) {
        if self.json {
            self.print_json(result);
            return;
        }
        let SleepResult::Slept {
            compaction,
            error,
            reflected,
            ..
        } = result
        else {
            println!("busy: the agent could not sleep; nothing ran");
            return;
        };
        println!("slept{}", if *reflected { " (and reflected)" } else { "" });
        match compaction {
            None => println!("  compaction: did not run"),
            Some(c) => println!("  compaction: {}", compaction_text(c)),
        }
        if let Some(error) = error {
            println!("  error: {error}");
        }
    }

    /// An undone compaction: `restored` messages are back in place of the summary at `seq`.
    pub fn uncompacted<T: Serialize + ?Sized>(&self, answer: &T, seq: u64, restored: u64) {
        if self.json {
            self.print_json(answer);
        } else {
            println!("restored {restored} messages in place of the summary at #{seq}");
        }
    }

    /// An agent's memory facts, oldest first, with the journal entries they came from.
    pub fn facts<T: Serialize + ?Sized>(&self, answer: &T, facts: &[Fact]) {
        if self.json_or_none(
            answer,
            facts.is_empty(),
            "no facts yet (sleep distills them from the journal)",
        ) {
            return;
        }
        for f in facts {
            let list = |ids: &[u64]| ids.iter().map(|e| format!("#{e}")).collect::<Vec<_>>();
            let mut from = Vec::new();
            if !f.source_entry_ids.is_empty() {
                from.push(format!("journal {}", list(&f.source_entry_ids).join(", ")));
            }
            if !f.source_seqs.is_empty() {
                from.push(format!("turns {}", list(&f.source_seqs).join(", ")));
            }
            println!(
                "#{:<5} {}  {}{}",
                f.id,
                f.at,
                f.text,
                if from.is_empty() {
                    String::new()
                } else {
                    format!("  (from {})", from.join("; "))
                }
            );
        }
    }

    /// An agent's event log, newest first.
    pub fn events<T: Serialize + ?Sized>(&self, answer: &T, events: &[EventRecord]) {
        if self.json_or_none(answer, events.is_empty(), "no events yet") {
            return;
        }
        for e in events {
            println!("{} {}", e.at(), event_text(e));
        }
    }

    /// Totals over every agent and the database size.
    pub fn stats(&self, totals: &Totals) {
        if self.json {
            self.print_json(totals);
            return;
        }
        println!("agents            {}", totals.agents);
        println!("history messages  {}", totals.history_messages);
        println!("archive messages  {}", totals.archive_messages);
        println!("history tokens    {}", totals.history_tokens);
        println!("compactions       {}", totals.compactions);
        println!(
            "size on disk      {:.1} MiB",
            totals.size_on_disk_bytes as f64 / (1024.0 * 1024.0)
        );
    }

    /// `somna cluster status`: one row per node, then the shards nobody holds.
    pub fn cluster_status(&self, status: &crate::store_at::ClusterStatus) {
        if self.json {
            self.print_json(status);
            return;
        }
        println!(
            "cluster at {} · {} shards · leases of {} ms",
            status.store, status.shards, status.lease_ttl_ms
        );
        println!(
            "{:<32} {:>10} {:>6} {:>8}",
            "node", "heartbeat", "shards", "lease"
        );
        for n in &status.nodes {
            println!(
                "{:<32} {:>8}ms {:>6} {:>8}{}",
                n.node,
                n.heartbeat_age_ms,
                n.shards,
                n.min_lease_left_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms}ms")),
                if n.live { "" } else { "  (silent: not live)" }
            );
        }
        println!(
            "unowned shards: {} of {} · highest epoch {} · inbox depth {}",
            status.unowned_shards, status.shards, status.max_epoch, status.inbox_depth
        );
    }

    /// The dry-run prompt: each message with its token count, then the totals.
    /// `somna eval recall`: one row per method and category, then the method's overall row.
    pub fn recall(&self, dataset: &Path, report: &RecallReport) {
        if self.json {
            self.print_json(report);
            return;
        }
        let compactions: usize = report.imports.iter().map(|i| i.compactions).sum();
        let fallbacks: usize = report.imports.iter().map(|i| i.fallbacks).sum();
        println!(
            "recall on {}: {} conversations, {} turns, {} questions",
            dataset.display(),
            report.conversations,
            report.turns,
            report.questions
        );
        println!(
            "model {} · embedder {} · max_context_tokens {} · budget {} tokens · imports {:.1} s \
({compactions} compactions, {fallbacks} by fallback)",
            report.model,
            report.embedder.as_deref().unwrap_or("none (BM25 alone)"),
            report.max_context_tokens,
            report.budget,
            report.import_ms / 1000.0
        );
        println!();
        println!(
            "{:<15} {:<12} {:>9} {:>7} {:>7} {:>7} {:>7} {:>6} {:>5} {:>8} {:>8}",
            "method",
            "category",
            "questions",
            "some %",
            "all %",
            "dated %",
            "tokens",
            "max",
            "over",
            "ms/q",
            "p95 ms"
        );
        for m in &report.methods {
            let rows = m
                .categories
                .iter()
                .map(|(c, s)| (c.as_str(), s))
                .chain(std::iter::once(("overall", &m.overall)));
            for (category, s) in rows {
                println!(
                    "{:<15} {:<12} {:>9} {:>7.1} {:>7.1} {:>7.1} {:>7.0} {:>6} {:>5} {:>8.2} {:>8.2}",
                    m.method,
                    category,
                    s.questions,
                    s.some_share * 100.0,
                    s.all_share * 100.0,
                    s.dated_share * 100.0,
                    s.tokens_mean,
                    s.tokens_max,
                    s.over_budget,
                    s.ms_mean,
                    s.ms_p95
                );
            }
        }
    }

    pub fn prompt(&self, config: &AgentConfig, prompt: &Prompt, working: &WorkingContext) {
        if self.json {
            self.print_json(&serde_json::json!({
                "model": config.model,
                "messages": prompt.messages,
                "message_tokens": prompt.message_tokens,
                "total_tokens": prompt.total_tokens(),
                "budget_tokens": prompt.budget,
                "reply_reserve_tokens": prompt.reply_reserve,
                "persona_tokens": prompt.persona_tokens,
                "summary_tokens": prompt.summary_tokens,
                "working_context_tokens": prompt.working_tokens,
                "history_tokens": prompt.history_tokens,
                "dropped_turns": prompt.dropped_turns,
                "working_context_index": prompt.note_index,
                "working_context": working,
            }));
            return;
        }
        for (i, (m, tokens)) in prompt
            .messages
            .iter()
            .zip(&prompt.message_tokens)
            .enumerate()
        {
            let who = m
                .name
                .as_deref()
                .map_or_else(|| m.role.to_string(), |n| format!("{} ({n})", m.role));
            println!("── [{i}] {who} · {tokens} tok");
            for call in &m.tool_calls {
                println!("   → {}({}) [{}]", call.name, call.arguments, call.id);
            }
            if let Some(id) = &m.tool_call_id {
                println!("   (result of {id})");
            }
            for line in m.content.lines() {
                println!("   {line}");
            }
        }
        let total = prompt.total_tokens();
        println!(
            "── {} messages · {} tokens of a {}-token budget ({} window − {} reserved for the reply): \
             persona {}, summary {}, working context {} ({} facts, {} archived turns), history {}",
            prompt.messages.len(),
            total,
            prompt.budget,
            config.compaction.max_context_tokens,
            prompt.reply_reserve,
            prompt.persona_tokens,
            prompt.summary_tokens,
            prompt.working_tokens,
            working.facts.len(),
            working.turns().count(),
            prompt.history_tokens,
        );
        if prompt.dropped_turns > 0 {
            println!(
                "── {} oldest live turn(s) left out to fit the budget (still in history; the next \
                 tick compacts)",
                prompt.dropped_turns
            );
        }
    }

    pub fn agents(&self, agents: &[AgentRecord]) {
        if self.json_or_none(agents, agents.is_empty(), "no agents") {
            return;
        }
        println!(
            "{:<16} {:>8} {:>8} {:>10} {:>11}  last compaction",
            "agent", "history", "archive", "tokens", "compactions"
        );
        for a in agents {
            println!(
                "{:<16} {:>8} {:>8} {:>10} {:>11}  {}{}",
                a.id.as_str(),
                a.history_len,
                a.archive_len,
                a.history_tokens,
                a.compaction_count,
                a.last_compaction
                    .map_or_else(|| "never".to_string(), |t| t.to_string()),
                if a.retired { " (retired)" } else { "" }
            );
        }
    }

    pub fn messages(&self, messages: &[Message]) {
        if self.json {
            self.print_json(messages);
            return;
        }
        for m in messages {
            let kind = match &m.kind {
                MessageKind::Normal => String::new(),
                MessageKind::Summary(s) => format!(
                    " [summary gen {} of #{}..#{}, {} msgs]",
                    s.generation, s.covers_from_seq, s.covers_through_seq, s.compacted_count
                ),
                MessageKind::Masked { original_tokens } => {
                    format!(" [masked, was {original_tokens} tok]")
                }
            };
            let who = m
                .name
                .as_deref()
                .map_or_else(|| m.role.to_string(), |n| format!("{} ({n})", m.role));
            println!(
                "#{:<6} {} {}{} · {} tok",
                m.seq, m.created_at, who, kind, m.tokens
            );
            for call in &m.tool_calls {
                println!("        → {}({}) [{}]", call.name, call.arguments, call.id);
            }
            for line in m.content.lines() {
                println!("        {line}");
            }
        }
    }

    pub fn journal(&self, entries: &[JournalEntry]) {
        if self.json_or_none(entries, entries.is_empty(), "no matching journal entries") {
            return;
        }
        for e in entries {
            println!(
                "#{:<5} {} {:<11} imp {:>2}{}{}",
                e.id,
                e.at,
                e.source_type.as_str(),
                e.importance,
                if e.tags.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", e.tags.join(", "))
                },
                e.covers
                    .map_or_else(String::new, |(a, b)| format!(" covers #{a}..#{b}"))
            );
            for line in e.content.lines() {
                println!("       {line}");
            }
        }
    }
}

/// `created smith: model builtin, tick every 1s, window 8000 tokens, sleep at 70%, emergency at 80%`.
fn config_line(verb: &str, config: &AgentConfig) {
    let c = &config.compaction;
    println!(
        "{verb} {}: model {}, tick every {}, window {} tokens, sleep at {:.0}%, emergency at {:.0}%",
        config.id,
        config.model,
        humantime::format_duration(config.tick_every),
        c.max_context_tokens,
        c.sleep_threshold * 100.0,
        c.emergency_threshold * 100.0
    );
}

/// The line that confirms a retirement.
pub fn retired_line(id: &AgentId) -> String {
    format!("retired {id}: no longer hosted; its history, archive, journal and facts stay readable")
}

/// Why a compaction outcome is a failure, or `None`.
pub fn compaction_failure(outcome: &CompactionOutcome) -> Option<String> {
    match outcome {
        CompactionOutcome::Failed { reason, .. } => Some(reason.clone()),
        _ => None,
    }
}

/// Why a sleep failed: a step reported an error, or its compaction failed; `None` when it did not.
pub fn sleep_failure(result: &SleepResult) -> Option<String> {
    match result {
        SleepResult::Busy => Some("the agent is busy; nothing ran".to_string()),
        SleepResult::Slept {
            error: Some(error), ..
        } => Some(error.clone()),
        SleepResult::Slept { compaction, .. } => compaction
            .as_ref()
            .and_then(compaction_failure)
            .map(|why| format!("compaction failed: {why}")),
    }
}

/// One line for a compaction outcome.
fn compaction_text(outcome: &CompactionOutcome) -> String {
    match outcome {
        CompactionOutcome::Done(r) => {
            let what = match r.summary_seq {
                Some(seq) => format!(
                    "{} messages → summary #{seq} (generation {})",
                    r.compacted, r.generation
                ),
                None => format!("{} messages masked", r.compacted),
            };
            let mut line = format!(
                "compacted ({}, {}): {what}, {} → {} tokens ({:.0}% reduction); {} kept verbatim, usage now {:.1}%",
                r.trigger,
                serde_name(&r.method),
                r.tokens_before,
                r.tokens_after,
                r.reduction_pct,
                r.preserved,
                r.usage_after * 100.0
            );
            for (key, text) in [
                ("fallback reason", &r.fallback_reason),
                ("warning", &r.warning),
            ] {
                if let Some(text) = text {
                    line.push_str(&format!("\n  {key}: {text}"));
                }
            }
            line
        }
        CompactionOutcome::Skipped { reason, usage, .. } => {
            format!("skipped: {reason} (usage {:.1}%)", usage * 100.0)
        }
        CompactionOutcome::Failed { reason, usage } => format!(
            "failed: {reason} (usage {:.1}%); nothing changed",
            usage * 100.0
        ),
        CompactionOutcome::Stalled {
            reduction_pct,
            usage,
        } => format!(
            "stalled: the summary would save only {reduction_pct:.1}%; nothing committed (usage {:.1}%)",
            usage * 100.0
        ),
        CompactionOutcome::Busy => {
            "busy: another compaction of this agent is in flight".to_string()
        }
    }
}

/// One line for a logged event (without its time).
fn event_text(e: &EventRecord) -> String {
    match e {
        EventRecord::Compaction(r) => format!(
            "compaction ({}, {}): #{}..#{} ({} messages) → summary #{} (generation {}), {} → {} tokens ({:.0}% reduction)",
            r.trigger,
            serde_name(&r.method),
            r.covers.0,
            r.covers.1,
            r.compacted,
            r.summary_seq,
            r.generation,
            r.tokens_before,
            r.tokens_after,
            r.reduction_pct()
        ),
        EventRecord::Uncompaction {
            summary_seq,
            restored,
            ..
        } => format!("uncompaction: summary #{summary_seq} undone, {restored} messages restored"),
        EventRecord::Masking {
            masked,
            tokens_before,
            tokens_after,
            ..
        } => format!(
            "masking: {masked} tool outputs masked, {tokens_before} → {tokens_after} tokens"
        ),
        EventRecord::CompactionFailed {
            trigger, reason, ..
        } => format!("compaction failed ({trigger}): {reason}"),
        EventRecord::Note { text, .. } => format!("note: {text}"),
        EventRecord::Sleep {
            due,
            next,
            entries,
            facts,
            reflections,
            failures,
            ..
        } => {
            let mut line = format!(
                "sleep: {entries} journal entries consolidated into {facts} facts, \
                 {reflections} reflections; next due {next}"
            );
            if let Some(due) = due {
                line.push_str(&format!(" (was due {due})"));
            }
            if !failures.is_empty() {
                line.push_str(&format!("; failed: {}", failures.join("; ")));
            }
            line
        }
        EventRecord::EmergencyFallback {
            reason,
            steps,
            tokens_before,
            tokens_after,
            stuck,
            ..
        } => {
            let steps: Vec<String> = steps.iter().map(serde_name).collect();
            let mut line = format!(
                "emergency fallback ({}): {tokens_before} → {tokens_after} tokens; why: {reason}",
                steps.join(" → ")
            );
            if let Some(why) = stuck {
                line.push_str(&format!("; still over the threshold: {why}"));
            }
            line
        }
    }
}

/// A unit enum's serde name (`summary`, `masking`, …).
fn serde_name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn join_ids(ids: &[AgentId]) -> String {
    ids.iter()
        .map(AgentId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The server's agent list.
#[derive(Debug, Deserialize)]
pub struct AgentListView {
    pub agents: Vec<AgentSummaryView>,
    #[serde(default)]
    pub unavailable: Vec<AgentId>,
    #[serde(default)]
    pub retired: Vec<AgentId>,
}

/// One hosted agent in the server's list.
#[derive(Debug, Deserialize)]
pub struct AgentSummaryView {
    pub id: AgentId,
    pub state: AgentState,
    pub usage: f64,
    pub history_len: u64,
    pub archive_len: u64,
    pub compaction_count: u32,
    pub last_compaction: Option<Timestamp>,
    pub needs_reply: bool,
    pub pending_tools: usize,
}
