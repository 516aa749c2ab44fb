//! Operations on a local database (no running server): each is a call into the library crates.
//! sled allows one process per database, so these run while `somna run` is not running; against a
//! running runtime use `--server URL`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufReader, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use somna_core::config::{AgentConfig, AgentOverrides, ResolvedConfig};
use somna_core::message::{Message, MessageKind};
use somna_core::record::EventRecord;
use somna_core::{AgentId, JournalQuery, Timestamp, interchange};
use somna_llm::LlmClient;
use somna_runtime::agent::{Agent, ConfigureError, Job, JobOutcome};
use somna_runtime::ops::{self, Offline, OpsError};
use somna_runtime::prompt;
use somna_runtime::protocol::{Inbound, InboundError};
use somna_runtime::{Clock, Compactor, Semantic, semantic};
use somna_server::{CreatedToken, TokenInfo, TokenList};
use somna_store::{Store, StoreError, TokenScope, UncompactOutcome};

use crate::Invalid;
use crate::backend::{Backend, JournalFilters};
use crate::cli::{parse_overrides, parse_time};
use crate::output::{self, Out, Totals};

/// An opened local database with its config.
pub struct Local {
    pub config: ResolvedConfig,
    pub store: Store,
    pub out: Out,
}

impl Local {
    /// Runs the job `start` gives agent `id` (`None`: it is busy, an error) to its end.
    fn run_job(
        &self,
        id: &AgentId,
        start: impl FnOnce(&mut Agent) -> Option<Job>,
    ) -> Result<JobOutcome> {
        self.require_hosted(id)?;
        let mut agent = self.agent(id)?;
        let job = start(&mut agent).context("the agent is busy")?;
        run_async(job.run())
    }

    /// The library's offline operations over this database (the runtime's own policy).
    fn ops(&self) -> Offline {
        Offline::new(self.config.clone(), self.store.clone(), Clock::real())
    }

    /// The agent's config: its runtime.toml entry (or the defaults) with its run-time overrides.
    pub fn agent_config(&self, id: &AgentId) -> Result<AgentConfig> {
        self.ops().agent_config(id).map_err(|e| ops_error(id, e))
    }

    fn llm(&self) -> Result<Arc<dyn LlmClient>> {
        somna_llm::build_client_from_env(&self.config.llm).context("cannot build the LLM client")
    }

    /// Semantic retrieval's embedder, when `[embedder]` sets one.
    fn semantic(&self) -> Result<Option<Semantic>> {
        crate::semantic_from(&self.config)
    }

    /// A plain `Agent` component over this database, wired by the library (no actor, no timers).
    fn agent(&self, id: &AgentId) -> Result<Agent> {
        self.agent_config(id)?;
        let llm = self.llm()?;
        self.ops()
            .with_semantic(self.semantic()?)
            .agent(id, llm)
            .map_err(|e| ops_error(id, e))
    }

    /// Refuses commands to a retired agent (its data stays readable).
    fn require_hosted(&self, id: &AgentId) -> Result<()> {
        ops::require_hosted(&self.store, id).map_err(|e| ops_error(id, e))
    }

    /// Refuses an id with no record (`history`, `journal`).
    fn require_agent(&self, id: &AgentId) -> Result<()> {
        if self.store.agent(id)?.is_none() {
            bail!("unknown agent \"{id}\" (see `somna agents`)");
        }
        Ok(())
    }
}

impl Backend for Local {
    fn agents(&self) -> Result<()> {
        self.out.agents(&self.store.agents()?);
        Ok(())
    }

    fn history(&self, id: &AgentId, limit: Option<usize>, archive: bool) -> Result<()> {
        self.require_agent(id)?;
        let messages = match (archive, limit) {
            (true, _) => self.store.archive_range(id, 0, usize::MAX)?,
            (false, Some(n)) => self.store.history_tail(id, n)?,
            (false, None) => self.store.history(id)?,
        };
        let skip = limit.map_or(0, |n| messages.len().saturating_sub(n));
        self.out.messages(&messages[skip..]);
        Ok(())
    }

    fn journal(&self, id: &AgentId, filters: &JournalFilters) -> Result<()> {
        self.require_agent(id)?;
        let now = now();
        let query = JournalQuery {
            source_type: flag_value("--source", filters.source.as_deref(), str::parse)?,
            tags: filters.tags.clone(),
            min_importance: filters.min_importance,
            since: flag_value("--since", filters.since.as_deref(), |s| parse_time(s, now))?,
            until: flag_value("--until", filters.until.as_deref(), |s| parse_time(s, now))?,
            before_id: None,
            limit: filters.limit,
        };
        self.out.journal(&self.store.query_journal(id, &query)?);
        Ok(())
    }

    /// Creates the agent's record with run-time `changes` over the config (validated first).
    fn create(&self, id: &AgentId, changes: &[String]) -> Result<()> {
        let overrides = parse_overrides(changes)?;
        let config = self.ops().create(id, overrides).map_err(|e| match e {
            OpsError::Retired(_) => {
                anyhow::anyhow!("agent \"{id}\" was retired; its id cannot be reused")
            }
            e => ops_error(id, e),
        })?;
        self.store.flush()?;
        if self.out.is_json() {
            self.out
                .value(&serde_json::json!({ "id": id, "config": config }));
        } else {
            self.out.created(&config);
        }
        Ok(())
    }

    /// Retires the agent: `somna run` no longer hosts it; nothing is deleted.
    fn delete(&self, id: &AgentId) -> Result<()> {
        self.ops().retire(id).map_err(|e| ops_error(id, e))?;
        self.store.flush()?;
        if self.out.is_json() {
            self.out
                .value(&serde_json::json!({ "id": id, "retired": true }));
        } else {
            println!("{}", output::retired_line(id));
        }
        Ok(())
    }

    fn status(&self, id: &AgentId) -> Result<()> {
        self.agent_config(id)?;
        let status = self.agent(id)?.status()?;
        self.out.status(&status);
        Ok(())
    }

    fn send(&self, id: &AgentId, input: Inbound) -> Result<()> {
        self.require_hosted(id)?;
        let mut agent = self.agent(id)?;
        agent.inbound(input).map_err(|e| match e {
            // Input the agent refuses is invalid input: exit 2, like the server's 413/422.
            InboundError::TooLarge { .. } | InboundError::Empty => {
                anyhow::Error::new(crate::Invalid(format!("agent {id}: {e}")))
            }
            e => anyhow::Error::new(e).context(format!("agent {id}")),
        })?;
        // `[store] durable_acks`: say "appended" only once it survives a kill.
        if self.config.store.durable_acks {
            self.store.flush()?;
        }
        self.out
            .done("appended; the agent answers when the runtime next runs (`somna run`)");
        Ok(())
    }

    /// Compacts now; an error (exit 1) after the outcome is printed when the compaction failed.
    fn compact(&self, id: &AgentId, force: bool) -> Result<()> {
        let outcome = self
            .run_job(id, |a| a.compact(force))?
            .into_compaction_outcome();
        self.out.compaction(&outcome);
        match output::compaction_failure(&outcome) {
            Some(why) => bail!("compaction failed: {why}"),
            None => Ok(()),
        }
    }

    /// Sleeps now; an error (exit 1) after the result is printed when any step failed.
    fn sleep(&self, id: &AgentId) -> Result<()> {
        let result = self.run_job(id, |a| a.sleep(false))?.into_sleep_result();
        self.out.slept(&result);
        match output::sleep_failure(&result) {
            Some(why) => bail!("sleep failed: {why}"),
            None => Ok(()),
        }
    }

    fn uncompact(&self, id: &AgentId, seq: u64) -> Result<()> {
        match self
            .ops()
            .uncompact(id, seq)
            .map_err(|e| ops_error(id, e))?
        {
            UncompactOutcome::Restored { restored } => {
                let answer = serde_json::json!({
                    "outcome": "restored",
                    "summary_seq": seq,
                    "restored": restored,
                });
                self.out.uncompacted(&answer, seq, u64::from(restored));
                Ok(())
            }
            UncompactOutcome::NotFound => bail!(
                "agent \"{id}\" has no summary with seq {seq} in its history (a summary folded into \
a later one must wait until that one is undone)"
            ),
        }
    }

    fn configure(&self, id: &AgentId, pairs: &[String]) -> Result<()> {
        let changes = parse_overrides(pairs)?;
        self.require_hosted(id)?;
        let mut agent = self.agent(id)?;
        let config = agent.configure(changes).map_err(|e| match e {
            ConfigureError::Invalid(errors) => anyhow::Error::new(Invalid(errors.to_string())),
            e => anyhow::Error::new(e),
        })?;
        self.out.configured(&config, &config);
        Ok(())
    }

    fn search(&self, id: &AgentId, query: &str, k: usize) -> Result<()> {
        self.agent_config(id)?;
        let vector = self.query_vector(id, query)?;
        let semantic = vector.as_ref().map(|(m, v)| (m.as_str(), v.as_slice()));
        let hits: Vec<Message> = self
            .store
            .search_archive_with(id, query, semantic, k)?
            .into_iter()
            .map(|h| h.message)
            .collect();
        self.out.messages(&hits);
        Ok(())
    }

    fn facts(&self, id: &AgentId) -> Result<()> {
        self.agent_config(id)?;
        let facts = self.store.facts(id)?;
        self.out.facts(&facts, &facts);
        Ok(())
    }

    fn events(&self, id: &AgentId, limit: usize) -> Result<()> {
        self.agent_config(id)?;
        let events: Vec<EventRecord> = self
            .store
            .events(id, limit)?
            .into_iter()
            .map(|e| e.event)
            .collect();
        self.out.events(&events, &events);
        Ok(())
    }

    fn create_token(&self, name: &str, scope: TokenScope) -> Result<()> {
        let (token, secret) = self
            .store
            .create_token(name, scope, now())
            .map_err(|e| match e {
                // A malformed name or prefix is invalid input: exit 2, like the server's 422.
                e @ StoreError::Invalid { .. } => anyhow::Error::new(Invalid(e.to_string())),
                e => e.into(),
            })?;
        self.out.token_created(&CreatedToken {
            token: secret,
            info: TokenInfo::from(&token),
        });
        Ok(())
    }

    fn tokens(&self) -> Result<()> {
        let tokens = self.store.tokens()?;
        self.out.tokens(&TokenList {
            tokens: tokens.iter().map(TokenInfo::from).collect(),
        });
        Ok(())
    }

    fn revoke_token(&self, name: &str) -> Result<()> {
        if !self.store.revoke_token(name)? {
            bail!("no token named {name:?}");
        }
        self.out.token_revoked(name);
        Ok(())
    }
}

impl Local {
    /// Prints exactly the messages the agent's next LLM call would receive for `input`.
    pub fn prompt(&self, id: &AgentId, input: &str) -> Result<()> {
        let config = self.agent_config(id)?;
        let vector = self.query_vector(id, input)?;
        let semantic = vector.as_ref().map(|(m, v)| (m.as_str(), v.as_slice()));
        let (built, working) =
            prompt::preview_with(&self.store, id, &config, input, semantic, now())?;
        self.out.prompt(&config, &built, &working);
        Ok(())
    }

    pub fn import(&self, id: &AgentId, file: &Path, quiet: bool) -> Result<()> {
        let config = match self.store.agent(id)? {
            Some(_) => self.agent_config(id)?,
            None => self.config.agent_config(id, &AgentOverrides::default())?,
        };
        let f =
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        let compactor = Compactor::new(self.store.clone(), self.llm()?);
        let bar = if quiet || self.out.is_json() {
            ProgressBar::hidden()
        } else {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template(
                    "importing [{bar:40}] {pos}/{len} messages · {elapsed_precise} · {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b
        };
        let started = std::time::Instant::now();
        let report = run_async(somna_runtime::import::import_jsonl(
            BufReader::new(f),
            id,
            &config,
            &self.store,
            &compactor,
            now(),
            |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        ))?
        .with_context(|| format!("{}", file.display()))?;
        bar.finish_and_clear();
        // What the import archived gets its vectors now, as a sleep would give them.
        let embedded = match self.semantic()? {
            Some(s) => {
                let batch = usize::try_from(self.config.embedder.batch.max(1) * 16).unwrap_or(1024);
                let r = run_async(semantic::embed_whole_archive(
                    &self.store,
                    id,
                    s.embedder.as_ref(),
                    batch,
                ))?
                .context("cannot embed the imported archive")?;
                Some(r)
            }
            None => None,
        };
        self.store.flush()?;
        if self.out.is_json() {
            self.out.value(&report);
        } else {
            println!(
                "imported {} messages into {id} in {:.2} s: {} compaction(s){}, history {} · archive {}",
                report.imported,
                started.elapsed().as_secs_f64(),
                report.compactions,
                if report.fallbacks > 0 {
                    format!(" ({} by fallback)", report.fallbacks)
                } else {
                    String::new()
                },
                report.history_len,
                report.archive_len
            );
            if report.over_input_limit > 0 {
                println!(
                    "{} message(s) were over the live input limit of {} tokens \
                     (compaction.max_input_tokens); imported as history",
                    report.over_input_limit,
                    config.compaction.input_limit()
                );
            }
            if let Some(r) = embedded {
                println!(
                    "embedded {} archived messages in {:.2} s",
                    r.embedded,
                    r.ms / 1000.0
                );
            }
        }
        Ok(())
    }

    /// `text`'s vector and the model that made it, when an embedder is configured (a failed
    /// embedding is logged and retrieval falls back to keywords).
    fn query_vector(&self, id: &AgentId, text: &str) -> Result<Option<(String, Vec<f32>)>> {
        let Some(s) = self.semantic()? else {
            return Ok(None);
        };
        let embedder = s.embedder.as_ref();
        let v = run_async(semantic::embed_query(embedder, id, text))?;
        Ok(v.map(|v| (embedder.model().to_string(), v)))
    }

    /// Writes the agent's messages as JSONL. `openai`: the original messages only (archive and
    /// history merged in seq order) in OpenAI's shape — what `import` reads. Otherwise: every
    /// history and archive entry (summaries and placeholders included), the journal and the facts,
    /// each line tagged with its `type`.
    pub fn export(&self, id: &AgentId, openai: Option<bool>, out: &mut dyn Write) -> Result<()> {
        self.agent_config(id)?;
        let history = self.store.history(id)?;
        let archive = self.store.archive_range(id, 0, usize::MAX)?;
        if let Some(times) = openai {
            let mut originals: Vec<&Message> = archive
                .iter()
                .filter(|m| !matches!(m.kind, MessageKind::Summary(_)))
                .chain(history.iter().filter(|m| m.is_normal()))
                .collect();
            originals.sort_by_key(|m| m.seq);
            for m in originals {
                writeln!(out, "{}", interchange::to_line_with(m, times))?;
            }
            return Ok(());
        }
        for (location, list) in [("archive", &archive), ("history", &history)] {
            for m in list {
                let mut v = serde_json::to_value(m)?;
                v["type"] = "message".into();
                v["location"] = location.into();
                writeln!(out, "{}", serde_json::to_string(&v)?)?;
            }
        }
        for e in self
            .store
            .query_journal(id, &JournalQuery::default())?
            .iter()
            .rev()
        {
            let mut v = serde_json::to_value(e)?;
            v["type"] = "journal".into();
            writeln!(out, "{}", serde_json::to_string(&v)?)?;
        }
        for f in self.store.facts(id)? {
            let mut v = serde_json::to_value(&f)?;
            v["type"] = "fact".into();
            writeln!(out, "{}", serde_json::to_string(&v)?)?;
        }
        Ok(())
    }

    /// Totals over every agent, and the database size.
    pub fn stats(&self) -> Result<()> {
        let agents = self.store.agents()?;
        let totals = Totals {
            agents: agents.len() as u64,
            history_messages: agents.iter().map(|a| a.history_len).sum(),
            archive_messages: agents.iter().map(|a| a.archive_len).sum(),
            history_tokens: agents.iter().map(|a| a.history_tokens).sum(),
            compactions: agents.iter().map(|a| u64::from(a.compaction_count)).sum(),
            size_on_disk_bytes: self.store.size_on_disk()?,
        };
        self.out.stats(&totals);
        Ok(())
    }

    /// Checks the storage invariants of every agent; an error if any is broken.
    pub fn check(&self) -> Result<()> {
        let mut broken = 0;
        for a in self.store.agents()? {
            let report = self.store.check_invariants(&a.id)?;
            if !report.is_ok() {
                broken += 1;
                eprintln!("{}: {report:?}", a.id);
            }
        }
        if broken > 0 {
            bail!("{broken} agent(s) have broken invariants");
        }
        self.out
            .done("every agent's history and archive are consistent");
        Ok(())
    }
}

/// The CLI's words for a refused operation (the policy itself is the library's).
fn ops_error(id: &AgentId, e: OpsError) -> anyhow::Error {
    match e {
        OpsError::UnknownAgent(_) => anyhow::anyhow!("unknown agent \"{id}\" (see `somna agents`)"),
        OpsError::Retired(_) => anyhow::anyhow!(
            "agent \"{id}\" was retired; its history, archive and journal can still be read"
        ),
        OpsError::Exists(_) => {
            anyhow::anyhow!("agent \"{id}\" already exists (change it with `somna configure`)")
        }
        // Exit 2, like the server's 422.
        e @ OpsError::Invalid(..) => anyhow::Error::new(Invalid(e.to_string())),
        OpsError::Load(_, e) => anyhow::Error::new(e),
        e => anyhow::Error::new(e),
    }
}

fn now() -> Timestamp {
    Timestamp::from_system_time(std::time::SystemTime::now())
}

/// Runs a future to completion on a fresh tokio runtime (LLM calls need one).
fn run_async<F: std::future::Future>(f: F) -> Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}

/// The value of the option `flag`, when given, read by `parse`; a bad one is [`Invalid`], named by
/// its flag.
fn flag_value<T, E: std::fmt::Display>(
    flag: &str,
    value: Option<&str>,
    parse: impl FnOnce(&str) -> std::result::Result<T, E>,
) -> std::result::Result<Option<T>, Invalid> {
    value
        .map(parse)
        .transpose()
        .map_err(|e| Invalid(format!("{flag}: {e}")))
}
