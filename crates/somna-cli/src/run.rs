//! `somna run`: the main job. Hosts runtime.toml's agents; with `--scenario`, plays a scripted
//! timeline in accelerated time, prints one line per event and a closing table. With `--serve`,
//! the HTTP API (somna-server) runs next to the runtime in the same actix System until the run
//! ends (ctrl-c, `--for`, or the scenario's end); then the runtime shuts down gracefully.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use somna_core::config::ResolvedConfig;
use somna_core::record::{EventRecord, Trigger};
use somna_core::{JournalQuery, Timestamp};
use somna_runtime::scenario::{self, EventKind, Scenario};
use somna_runtime::{AgentState, Clock, Event, Runtime, RuntimeOptions, Stamped};
use somna_server::{MeteredLlm, Server, ServerOptions};
use somna_store::Store;
use tokio::sync::{broadcast, oneshot};

/// How long to wait for agents to settle after a scenario ends.
const SETTLE: Duration = Duration::from_secs(15);

/// What `run` needs besides the config.
#[derive(Debug)]
pub struct RunArgs {
    pub config: ResolvedConfig,
    pub store: Store,
    pub scenario: Option<Scenario>,
    /// Stop after this much real time (none: until ctrl-c, or the scenario's end).
    pub for_real: Option<Duration>,
    pub quiet: bool,
    /// Where the store is (a directory, or a Postgres URL without its password).
    pub store_label: String,
    /// Serve the HTTP API with these options (already validated).
    pub serve: Option<ServerOptions>,
}

/// Runs the main job inside an actix System.
pub fn run(args: RunArgs) -> Result<()> {
    let llm = somna_llm::build_client_from_env(&args.config.llm)
        .context("cannot build the LLM client")?;
    let semantic = crate::semantic_from(&args.config)?;
    let system = actix::System::new();
    system.block_on(main_job(args, llm, semantic))
}

async fn main_job(
    mut args: RunArgs,
    llm: Arc<dyn somna_llm::LlmClient>,
    semantic: Option<somna_runtime::Semantic>,
) -> Result<()> {
    let serve = args.serve.take();
    // The API's /metrics show LLM latencies and errors when the client is wrapped before the start.
    let llm = match &serve {
        Some(options) => MeteredLlm::wrap(llm, &options.metrics),
        None => llm,
    };
    let clock = match &args.scenario {
        Some(s) => Clock::starting_at(s.start_time(), s.speed),
        None => Clock::real(),
    };
    let start = clock.now();
    let agents = args.config.agents.len();
    let embedder = semantic
        .as_ref()
        .map_or_else(|| "none".to_owned(), |s| s.embedder.model().to_owned());
    let runtime = Runtime::start(
        args.config,
        args.store.clone(),
        llm,
        RuntimeOptions {
            clock,
            // A scenario's scripted sleeps come from its events and its `sleep_every` may push
            // the periodic ones past its end; the scheduler still runs, so that an agent whose
            // usage passes its sleep threshold sleeps at once (`scheduler::Tired`), as it would
            // in production.
            schedule_sleeps: true,
            semantic,
            ..Default::default()
        },
    )
    .context("cannot start the runtime")?;
    println!(
        "somna: hosting {} agent(s) from the config ({} in all) · store {} · LLM {} · embedder {}",
        agents,
        runtime.agent_ids().len(),
        args.store_label,
        runtime.llm().provider(),
        embedder
    );
    let (stop_api, api_stopped) = oneshot::channel::<()>();
    let api = match serve {
        Some(options) => {
            let token = options.token.is_some();
            let server = match Server::bind(runtime.clone(), options) {
                Ok(server) => server,
                Err(e) => {
                    runtime
                        .shutdown(somna_runtime::runtime::DEFAULT_GRACE)
                        .await?;
                    return Err(anyhow::Error::new(e).context("cannot start the API server"));
                }
            };
            println!(
                "somna: API on http://{} ({})",
                server.local_addr(),
                if token {
                    "bearer token required"
                } else {
                    "no token"
                }
            );
            Some(actix::spawn(server.run(async move {
                let _ = api_stopped.await;
            })))
        }
        None => None,
    };

    let bar = progress_bar(args.scenario.as_ref(), args.quiet);
    let printer = {
        let rx = runtime.subscribe();
        let bar = bar.clone();
        let quiet = args.quiet;
        actix::spawn(print_events(rx, bar, start, quiet))
    };
    let ticker = {
        let bar = bar.clone();
        actix::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let elapsed = clock.now().0.saturating_sub(start.0) / 1000;
                bar.set_position(elapsed);
                bar.set_message(sim_time(clock.now(), start));
            }
        })
    };

    match &args.scenario {
        Some(s) => {
            println!(
                "scenario: {} — {} events over {} of simulated time at {}× speed",
                s.title,
                s.events.len(),
                humantime::format_duration(s.duration),
                s.speed
            );
            let quiet = args.quiet;
            let bar2 = bar.clone();
            let report = scenario::play(s, &runtime, |e| {
                if quiet || e.kind == EventKind::Sleep {
                    return;
                }
                let who = e.from.as_deref().unwrap_or("world");
                let line = match e.kind {
                    EventKind::User => format!("{} ← {who}: {}", e.agent, clip(&e.text, 100)),
                    _ => format!("{} ⚑ {}", e.agent, clip(&e.text, 100)),
                };
                say(
                    &bar2,
                    format!("[{}] {line}", sim_time(start.saturating_add(e.at), start)),
                );
            })
            .await?;
            settle(&runtime).await;
            if report.skipped > 0 {
                say(
                    &bar,
                    format!("{} scenario inputs were not delivered", report.skipped),
                );
            }
        }
        None => {
            let ctrl_c = async {
                // Without a handler, ctrl-c keeps its default effect (the process ends).
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            match args.for_real {
                Some(d) => {
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        () = ctrl_c => {}
                    }
                }
                None => ctrl_c.await,
            }
        }
    }

    ticker.abort();
    bar.finish_and_clear();
    if let Some(api) = api {
        // Stop serving before the runtime stops: requests in flight finish, streams end.
        let _ = stop_api.send(());
        match api.await {
            Ok(Ok(())) => println!("somna: API server stopped"),
            Ok(Err(e)) => eprintln!("warning: the API server failed: {e}"),
            Err(e) => eprintln!("warning: the API server task ended abnormally: {e}"),
        }
    }
    let ids = runtime.agent_ids();
    runtime
        .shutdown(somna_runtime::runtime::DEFAULT_GRACE)
        .await?;
    printer.abort();
    let ticks = runtime.tick_stats().summary();
    println!();
    print_table(&args.store, &ids)?;
    println!(
        "ticks: {} (lateness p50 {:?}, p99 {:?}) · database flushed to {}",
        ticks.ticks, ticks.p50, ticks.p99, args.store_label
    );
    Ok(())
}

/// Waits until every agent is idle with no reply owed (bounded).
async fn settle(runtime: &Runtime) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while tokio::time::Instant::now() < deadline {
        let mut busy = false;
        for id in runtime.agent_ids() {
            if let Ok(s) = runtime.status(&id).await {
                busy |= s.state != AgentState::Idle || s.needs_reply;
            }
        }
        if !busy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn progress_bar(scenario: Option<&Scenario>, quiet: bool) -> ProgressBar {
    let Some(s) = scenario.filter(|_| !quiet) else {
        return ProgressBar::hidden();
    };
    let bar = ProgressBar::new(s.duration.as_secs());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:40}] {msg} · {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Prints one readable line per runtime event.
async fn print_events(
    mut rx: broadcast::Receiver<Stamped>,
    bar: ProgressBar,
    start: Timestamp,
    quiet: bool,
) {
    loop {
        let stamped = match rx.recv().await {
            Ok(s) => s,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                say(&bar, format!("({n} events not shown)"));
                continue;
            }
            Err(_) => return,
        };
        if let Some(line) = describe(&stamped.event, quiet) {
            say(&bar, format!("[{}] {line}", sim_time(stamped.at, start)));
        }
    }
}

/// The line for an event, or `None` for events not worth a line.
fn describe(event: &Event, quiet: bool) -> Option<String> {
    let agent = event.agent();
    Some(match event {
        Event::AgentReplied { text, .. } if !quiet => format!("{agent} → {}", clip(text, 110)),
        Event::EmergencyTriggered { usage, .. } => {
            format!(
                "{agent} ⚠ emergency: context at {:.0}%, compacting now",
                usage * 100.0
            )
        }
        Event::CompactionCompleted { report, .. } => format!(
            "{agent} ✂ compaction ({}): {} messages → summary, {} → {} tokens ({:.0}% reduction){}",
            report.trigger,
            report.compacted,
            report.tokens_before,
            report.tokens_after,
            report.reduction_pct,
            report
                .fallback_reason
                .as_deref()
                .map_or_else(String::new, |r| format!(" [fallback: {}]", clip(r, 60)))
        ),
        Event::CompactionFailed {
            trigger, reason, ..
        } => {
            format!(
                "{agent} ✗ compaction ({trigger}) failed: {}",
                clip(reason, 90)
            )
        }
        Event::SleepStarted { tired: false, .. } => format!("{agent} 💤 sleeps"),
        Event::SleepStarted { tired: true, .. } => {
            format!(
                "{agent} 💤 sleeps early: tired, its next turn would reach the emergency threshold"
            )
        }
        Event::ConsolidationCompleted {
            entries,
            facts,
            reflections,
            ..
        } => format!(
            "{agent} 💤 consolidation: {entries} journal entries → {facts} memory facts{}",
            if *reflections > 0 {
                format!(", {reflections} reflections")
            } else {
                String::new()
            }
        ),
        Event::CompactionSkipped {
            trigger,
            reason,
            usage,
            ..
        } if *trigger != Trigger::Emergency => {
            format!(
                "{agent} 💤 no compaction needed at {:.0}% ({reason})",
                usage * 100.0
            )
        }
        Event::ToolCallRequested {
            name, arguments, ..
        } => {
            format!("{agent} ⚙ calls host tool {name}({})", clip(arguments, 60))
        }
        Event::ToolCallTimedOut { name, .. } => {
            format!("{agent} ⚙ {name}: the host did not answer")
        }
        Event::Warning { message, .. } => format!("{agent} ⚠ {}", clip(message, 100)),
        Event::Error { message, .. } => format!("{agent} ✗ {}", clip(message, 100)),
        Event::EmergencyStuck { usage, reason, .. } => format!(
            "{agent} ⚠ emergency stuck at {:.0}%: {}",
            usage * 100.0,
            clip(reason, 100)
        ),
        Event::ReplyTruncated { tokens, kept, .. } => {
            format!("{agent} ✂ reply cut at the cap: {tokens} → {kept} tokens")
        }
        Event::TurnFailed {
            attempts, reason, ..
        } => format!(
            "{agent} ✗ turn failed after {attempts} attempts: {}",
            clip(reason, 100)
        ),
        Event::ToolRoundsExhausted { rounds, .. } => {
            format!("{agent} ⚙ no reply after {rounds} tool rounds; the reply is owed")
        }
        _ => return None,
    })
}

/// Prints a line above the progress bar (or plainly when the bar is hidden, e.g. not a terminal).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

/// `day N HH:MM` relative to the start.
fn sim_time(at: Timestamp, start: Timestamp) -> String {
    let secs = at.0.saturating_sub(start.0) / 1000;
    let start_secs_of_day = (start.0 / 1000) % 86_400;
    let abs = start_secs_of_day + secs;
    format!(
        "day {} {:02}:{:02}",
        abs / 86_400 + 1,
        (abs % 86_400) / 3600,
        (abs % 3600) / 60
    )
}

fn clip(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

/// The closing table: per agent, messages, compactions by trigger, tokens, journal.
fn print_table(store: &Store, ids: &[somna_core::AgentId]) -> Result<()> {
    println!(
        "{:<12} {:>8} {:>7} {:>7} {:>17} {:>16} {:>7} {:>5}",
        "agent",
        "messages",
        "history",
        "archive",
        "compactions s/e/m",
        "tokens before→after",
        "journal",
        "facts"
    );
    let mut totals = (0u64, 0u64, 0u64, [0u32; 3], 0u64, 0u64, 0usize, 0usize);
    for id in ids {
        let Some(record) = store.agent(id)? else {
            continue;
        };
        let mut by_trigger = [0u32; 3];
        let (mut before, mut after) = (0u64, 0u64);
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for logged in store.events(id, usize::MAX)? {
            if let EventRecord::Compaction(r) = logged.event {
                let i = match r.trigger {
                    Trigger::Sleep => 0,
                    Trigger::Emergency => 1,
                    Trigger::Manual => 2,
                };
                by_trigger[i] += 1;
                before += r.tokens_before;
                after += r.tokens_after;
                *counts.entry(r.trigger.as_str()).or_default() += 1;
            }
        }
        let journal = store.query_journal(id, &JournalQuery::default())?.len();
        let facts = store.facts(id)?.len();
        let messages = record.history_len + record.archive_len;
        println!(
            "{:<12} {:>8} {:>7} {:>7} {:>17} {:>16} {:>7} {:>5}",
            id.as_str(),
            messages,
            record.history_len,
            record.archive_len,
            format!("{}/{}/{}", by_trigger[0], by_trigger[1], by_trigger[2]),
            format!("{before}→{after}"),
            journal,
            facts
        );
        totals.0 += messages;
        totals.1 += record.history_len;
        totals.2 += record.archive_len;
        for (t, b) in totals.3.iter_mut().zip(by_trigger) {
            *t += b;
        }
        totals.4 += before;
        totals.5 += after;
        totals.6 += journal;
        totals.7 += facts;
    }
    println!(
        "{:<12} {:>8} {:>7} {:>7} {:>17} {:>16} {:>7} {:>5}",
        "total",
        totals.0,
        totals.1,
        totals.2,
        format!("{}/{}/{}", totals.3[0], totals.3[1], totals.3[2]),
        format!("{}→{}", totals.4, totals.5),
        totals.6,
        totals.7
    );
    Ok(())
}
