//! The `somna` command: thin glue. It parses arguments, loads runtime.toml, and calls the library
//! crates; every operation it offers is a library function.

mod cli;
mod local;
mod output;
mod run;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use somna_core::config::{ResolvedConfig, RuntimeConfig};
use somna_core::{AgentId, JournalQuery, Timestamp};
use somna_store::{Store, StoreOptions};

use cli::{AgentCommand, Cli, Command};
use output::Out;

/// Exit code for invalid configuration or arguments.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    // `somna history x | head` should end quietly, not panic on a closed pipe.
    sigpipe::reset();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info,somna=info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SOMNA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run(cli: Cli) -> Result<ExitCode> {
    let out = Out::new(cli.json);
    match &cli.command {
        Command::Run {
            scenario,
            for_real,
            quiet,
        } => {
            let scenario = scenario
                .as_deref()
                .map(|p| -> Result<somna_runtime::scenario::Scenario> {
                    let text = std::fs::read_to_string(p)
                        .with_context(|| format!("cannot read scenario {}", p.display()))?;
                    Ok(somna_runtime::scenario::Scenario::parse(
                        &text,
                        &p.display().to_string(),
                    )?)
                })
                .transpose()?;
            let mut sets = scenario.as_ref().map(|s| s.set.clone()).unwrap_or_default();
            sets.extend(cli.set.iter().cloned());
            let config = match load_config(&cli.config, &sets) {
                Ok(c) => c,
                Err(LoadError::Invalid(errors)) => {
                    out.config_errors(&cli.config, &errors);
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
                Err(LoadError::Io(e)) => return Err(e),
            };
            let path = cli
                .db
                .clone()
                .unwrap_or_else(|| store_path(&cli.config, &config.store.path));
            std::fs::create_dir_all(&path).with_context(|| {
                format!("cannot create the database directory {}", path.display())
            })?;
            let store = Store::open(
                &path,
                StoreOptions {
                    flush_every: config.store.flush_every,
                },
            )
            .with_context(|| format!("cannot open the database at {}", path.display()))?;
            run::run(run::RunArgs {
                config,
                store,
                scenario,
                for_real: *for_real,
                quiet: *quiet,
                store_path: &path,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig { path } => {
            let path = path.clone().unwrap_or_else(|| cli.config.clone());
            check_config(&path, &cli.set, &out)
        }
        Command::Agent(op) => {
            let (config, store) = open_or_create(&cli, matches!(op, AgentCommand::Import { .. }))?;
            let local = local::Local { config, store, out };
            agent_op(&local, op)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats => {
            let (config, store) = open(&cli)?;
            local::Local { config, store, out }.stats()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let (config, store) = open(&cli)?;
            local::Local { config, store, out }.check()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Agents => {
            let (_, store) = open(&cli)?;
            out.agents(&store.agents()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::History {
            agent,
            limit,
            archive,
        } => {
            let (_, store) = open(&cli)?;
            let id = agent_id(agent)?;
            require_agent(&store, &id)?;
            let messages = if *archive {
                store.archive_range(&id, 0, usize::MAX)?
            } else {
                store.history(&id)?
            };
            let skip = limit.map_or(0, |n| messages.len().saturating_sub(n));
            out.messages(&messages[skip..]);
            Ok(ExitCode::SUCCESS)
        }
        Command::Journal {
            agent,
            source,
            tag,
            since,
            until,
            min_importance,
            limit,
        } => {
            let (_, store) = open(&cli)?;
            let id = agent_id(agent)?;
            require_agent(&store, &id)?;
            let now = Timestamp::from_system_time(std::time::SystemTime::now());
            let query = JournalQuery {
                source_type: source
                    .as_deref()
                    .map(str::parse)
                    .transpose()
                    .map_err(anyhow::Error::msg)
                    .context("--source")?,
                tags: tag.clone(),
                min_importance: *min_importance,
                since: since
                    .as_deref()
                    .map(|s| cli::parse_time(s, now))
                    .transpose()
                    .context("--since")?,
                until: until
                    .as_deref()
                    .map(|s| cli::parse_time(s, now))
                    .transpose()
                    .context("--until")?,
                before_id: None,
                limit: *limit,
            };
            out.journal(&store.query_journal(&id, &query)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs one agent operation on the local database.
fn agent_op(local: &local::Local, op: &AgentCommand) -> Result<()> {
    match op {
        AgentCommand::Status { agent } => local.status(&agent_id(agent)?),
        AgentCommand::Send {
            agent,
            text,
            from,
            observation,
        } => local.send(
            &agent_id(agent)?,
            local::user_input(text.clone(), from.clone(), *observation),
        ),
        AgentCommand::Compact { agent, force } => local.compact(&agent_id(agent)?, *force),
        AgentCommand::Sleep { agent } => local.sleep(&agent_id(agent)?),
        AgentCommand::Uncompact { agent, seq } => local.uncompact(&agent_id(agent)?, *seq),
        AgentCommand::Configure { agent, changes } => local.configure(&agent_id(agent)?, changes),
        AgentCommand::Search {
            agent,
            query,
            limit,
        } => local.search(&agent_id(agent)?, query, *limit),
        AgentCommand::Facts { agent } => local.facts(&agent_id(agent)?),
        AgentCommand::Events { agent, limit } => local.events(&agent_id(agent)?, *limit),
        AgentCommand::Prompt { agent, input } => local.prompt(&agent_id(agent)?, input),
        AgentCommand::Import { agent, file, quiet } => {
            local.import(&agent_id(agent)?, file, *quiet)
        }
        AgentCommand::Export { agent, openai, out } => {
            let id = agent_id(agent)?;
            match out {
                Some(path) => {
                    let mut f = std::io::BufWriter::new(
                        std::fs::File::create(path)
                            .with_context(|| format!("cannot create {}", path.display()))?,
                    );
                    local.export(&id, *openai, &mut f)?;
                    std::io::Write::flush(&mut f)?;
                    Ok(())
                }
                None => {
                    let stdout = std::io::stdout();
                    let mut lock = std::io::BufWriter::new(stdout.lock());
                    local.export(&id, *openai, &mut lock)?;
                    std::io::Write::flush(&mut lock)?;
                    Ok(())
                }
            }
        }
    }
}

/// Parses and validates a config file; prints every error and exits 2 when it is invalid.
fn check_config(path: &Path, sets: &[String], out: &Out) -> Result<ExitCode> {
    match load_config(path, sets) {
        Ok(resolved) => {
            out.config_ok(path, &resolved);
            Ok(ExitCode::SUCCESS)
        }
        Err(LoadError::Invalid(errors)) => {
            out.config_errors(path, &errors);
            Ok(ExitCode::from(EXIT_INVALID))
        }
        Err(LoadError::Io(e)) => Err(e),
    }
}

enum LoadError {
    Invalid(somna_core::config::ConfigErrors),
    Io(anyhow::Error),
}

fn load_config(path: &Path, sets: &[String]) -> Result<ResolvedConfig, LoadError> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))
        .map_err(LoadError::Io)?;
    let name = path.display().to_string();
    let raw =
        RuntimeConfig::parse_with_overrides(&text, &name, sets).map_err(LoadError::Invalid)?;
    raw.resolve(&name).map_err(LoadError::Invalid)
}

/// Loads the config (exits 2 on invalid config) and opens the store it names (or `--db`).
fn open(cli: &Cli) -> Result<(ResolvedConfig, Store)> {
    open_or_create(cli, false)
}

/// [`open`], creating the database when `create` is set and it does not exist yet.
fn open_or_create(cli: &Cli, create: bool) -> Result<(ResolvedConfig, Store)> {
    let resolved = match load_config(&cli.config, &cli.set) {
        Ok(r) => r,
        Err(LoadError::Invalid(errors)) => {
            Out::new(false).config_errors(&cli.config, &errors);
            std::process::exit(i32::from(EXIT_INVALID));
        }
        Err(LoadError::Io(e)) if cli.db.is_some() => {
            tracing::debug!("no usable config ({e:#}); using --db with defaults");
            RuntimeConfig::default()
                .resolve("(defaults)")
                .map_err(|e| anyhow::anyhow!("{e}"))?
        }
        Err(LoadError::Io(e)) => return Err(e),
    };
    let path = match &cli.db {
        Some(p) => p.clone(),
        None => store_path(&cli.config, &resolved.store.path),
    };
    if create {
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create the database directory {}", path.display()))?;
    }
    if !path.exists() {
        bail!(
            "no database at {} (run `somna run` first, or pass --db PATH)",
            path.display()
        );
    }
    let store = Store::open(
        &path,
        StoreOptions {
            flush_every: resolved.store.flush_every,
        },
    )
    .with_context(|| format!("cannot open the database at {}", path.display()))?;
    Ok((resolved, store))
}

/// The store path: relative paths are relative to the config file's directory.
fn store_path(config: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match config.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

fn agent_id(s: &str) -> Result<AgentId> {
    AgentId::new(s).map_err(|e| anyhow::anyhow!("{e}"))
}

fn require_agent(store: &Store, id: &AgentId) -> Result<()> {
    if store.agent(id)?.is_none() {
        bail!("unknown agent \"{id}\" (see `somna agents`)");
    }
    Ok(())
}
