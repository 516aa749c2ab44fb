//! The `somna` command: thin glue. It parses arguments, loads runtime.toml, and calls the library
//! crates; every operation it offers is a library function. With `--server URL` the agent commands
//! go to a running server's HTTP API instead (`remote`); `somna run --serve` runs that server.
//!
//! Exit codes: 0 success, 1 failure (a `compact` or `sleep` that failed included), 2 invalid
//! arguments or configuration (locally — a config file that is missing, unreadable or not UTF-8
//! included — or input the server refused as invalid: `bad_request`, `invalid_config`, …).

mod cli;
mod local;
mod output;
mod remote;
mod run;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use somna_core::config::{ResolvedConfig, RuntimeConfig};
use somna_core::{AgentId, JournalQuery, Timestamp};
use somna_store::{Store, StoreError, StoreOptions};

use cli::{AgentCommand, Cli, Command};
use output::Out;
use remote::{ApiFailure, JournalFilters, Remote};

/// Exit code for invalid configuration or arguments.
const EXIT_INVALID: u8 = 2;

/// An error that exits with [`EXIT_INVALID`]: invalid arguments or configuration.
#[derive(Debug)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

fn main() -> ExitCode {
    // `somna history x | head` should end quietly, not panic on a closed pipe.
    sigpipe::reset();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // `--server` on the command line, rather than SOMNA_SERVER from the environment.
    let server_explicit = matches.value_source("server") == Some(ValueSource::CommandLine);
    init_tracing(cli.verbose);
    let json = cli.json;
    match run(cli, server_explicit) {
        Ok(code) => code,
        Err(e) => report(&e, json),
    }
}

/// Prints an error and picks the exit code: 2 for invalid input (local or refused by the server),
/// else 1. With `--json`, a server's error answer is printed on standard output too.
#[allow(clippy::print_stderr, clippy::print_stdout)]
fn report(e: &anyhow::Error, json: bool) -> ExitCode {
    eprintln!("error: {e:#}");
    if let Some(failure) = e.downcast_ref::<ApiFailure>() {
        if json && let Ok(body) = serde_json::to_string_pretty(&failure.body) {
            println!("{body}");
        }
        return ExitCode::from(failure.exit_code());
    }
    if e.downcast_ref::<Invalid>().is_some() {
        return ExitCode::from(EXIT_INVALID);
    }
    ExitCode::FAILURE
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info,somna=info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SOMNA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour codes only for a person at a terminal, never into a file or a pipe.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn run(cli: Cli, server_explicit: bool) -> Result<ExitCode> {
    let out = Out::new(cli.json);
    if let Some(url) = cli.server.as_deref() {
        match local_only(&cli.command) {
            None => {
                let token = std::env::var(somna_server::TOKEN_ENV).ok();
                remote_op(&Remote::new(url, token, out)?, &cli.command)?;
                return Ok(ExitCode::SUCCESS);
            }
            Some(name) if server_explicit => return Err(local_only_error(name).into()),
            Some(name) => {
                tracing::debug!(
                    "`somna {name}` works on a local database only; SOMNA_SERVER is ignored"
                );
            }
        }
    }
    match &cli.command {
        Command::Run {
            scenario,
            for_real,
            quiet,
            serve,
        } => {
            // Read and check the server's options before anything starts.
            let serve = serve
                .map(|addr| -> Result<somna_server::ServerOptions> {
                    let mut options = somna_server::ServerOptions::from_env()
                        .map_err(|e| Invalid(e.to_string()))?;
                    if let Some(addr) = addr {
                        options.bind = addr;
                    }
                    options.validate().map_err(|e| Invalid(e.to_string()))?;
                    Ok(options)
                })
                .transpose()?;
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
            let store = open_store(&path, config.store.flush_every)?;
            run::run(run::RunArgs {
                config,
                store,
                scenario,
                for_real: *for_real,
                quiet: *quiet,
                store_path: &path,
                serve,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig { path } => {
            let path = path.clone().unwrap_or_else(|| cli.config.clone());
            check_config(&path, &cli.set, &out)
        }
        Command::Agent(op) => {
            let create = matches!(
                op,
                AgentCommand::Import { .. } | AgentCommand::Create { .. }
            );
            let (config, store) = open_or_create(&cli, create)?;
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
            let messages = match (*archive, *limit) {
                (true, _) => store.archive_range(&id, 0, usize::MAX)?,
                (false, Some(n)) => store.history_tail(&id, n)?,
                (false, None) => store.history(&id)?,
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
                    .map_err(|e| Invalid(format!("--source: {e}")))?,
                tags: tag.clone(),
                min_importance: *min_importance,
                since: since
                    .as_deref()
                    .map(|s| cli::parse_time(s, now))
                    .transpose()
                    .map_err(|e| Invalid(format!("--since: {e}")))?,
                until: until
                    .as_deref()
                    .map(|s| cli::parse_time(s, now))
                    .transpose()
                    .map_err(|e| Invalid(format!("--until: {e}")))?,
                before_id: None,
                limit: *limit,
            };
            out.journal(&store.query_journal(&id, &query)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The name of a command that works on a local database only (no `--server` form), or `None`.
fn local_only(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Run { .. } => "run",
        Command::CheckConfig { .. } => "check-config",
        Command::Stats => "stats",
        Command::Check => "check",
        Command::Agent(AgentCommand::Prompt { .. }) => "prompt",
        Command::Agent(AgentCommand::Import { .. }) => "import",
        Command::Agent(AgentCommand::Export { .. }) => "export",
        _ => return None,
    })
}

fn local_only_error(name: &str) -> Invalid {
    Invalid(format!(
        "`somna {name}` works on a local database only and has no --server form (drop --server; \
a database a server holds open can be used locally once the server stops)"
    ))
}

/// Runs a command against a server.
fn remote_op(remote: &Remote, command: &Command) -> Result<()> {
    match command {
        Command::Agents => remote.agents(),
        Command::History {
            agent,
            limit,
            archive,
        } => remote.history(&agent_id(agent)?, *limit, *archive),
        Command::Journal {
            agent,
            source,
            tag,
            since,
            until,
            min_importance,
            limit,
        } => remote.journal(
            &agent_id(agent)?,
            &JournalFilters {
                source: source.clone(),
                tags: tag.clone(),
                since: since.clone(),
                until: until.clone(),
                min_importance: *min_importance,
                limit: *limit,
            },
        ),
        Command::Agent(op) => match op {
            AgentCommand::Create { agent, changes } => remote.create(&agent_id(agent)?, changes),
            AgentCommand::Delete { agent } => remote.delete(&agent_id(agent)?),
            AgentCommand::Status { agent } => remote.status(&agent_id(agent)?),
            AgentCommand::Send {
                agent,
                text,
                from,
                observation,
            } => remote.send(
                &agent_id(agent)?,
                &cli::user_input(text.clone(), from.clone(), *observation),
            ),
            AgentCommand::Compact { agent, force } => remote.compact(&agent_id(agent)?, *force),
            AgentCommand::Sleep { agent } => remote.sleep(&agent_id(agent)?),
            AgentCommand::Uncompact { agent, seq } => remote.uncompact(&agent_id(agent)?, *seq),
            AgentCommand::Configure { agent, changes } => {
                remote.configure(&agent_id(agent)?, changes)
            }
            AgentCommand::Search {
                agent,
                query,
                limit,
            } => remote.search(&agent_id(agent)?, query, *limit),
            AgentCommand::Facts { agent } => remote.facts(&agent_id(agent)?),
            AgentCommand::Events { agent, limit } => remote.events(&agent_id(agent)?, *limit),
            AgentCommand::Prompt { .. } => Err(local_only_error("prompt").into()),
            AgentCommand::Import { .. } => Err(local_only_error("import").into()),
            AgentCommand::Export { .. } => Err(local_only_error("export").into()),
        },
        Command::Run { .. } => Err(local_only_error("run").into()),
        Command::CheckConfig { .. } => Err(local_only_error("check-config").into()),
        Command::Stats => Err(local_only_error("stats").into()),
        Command::Check => Err(local_only_error("check").into()),
    }
}

/// Runs one agent operation on the local database.
fn agent_op(local: &local::Local, op: &AgentCommand) -> Result<()> {
    match op {
        AgentCommand::Create { agent, changes } => local.create(&agent_id(agent)?, changes),
        AgentCommand::Delete { agent } => local.delete(&agent_id(agent)?),
        AgentCommand::Status { agent } => local.status(&agent_id(agent)?),
        AgentCommand::Send {
            agent,
            text,
            from,
            observation,
        } => local.send(
            &agent_id(agent)?,
            cli::user_input(text.clone(), from.clone(), *observation),
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
        // A file that cannot be read is an invalid configuration too.
        Err(LoadError::Io(e)) => Err(Invalid(format!("{e:#}")).into()),
    }
}

enum LoadError {
    Invalid(somna_core::config::ConfigErrors),
    Io(anyhow::Error),
}

fn load_config(path: &Path, sets: &[String]) -> Result<ResolvedConfig, LoadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => {
                anyhow::anyhow!("config file {} is not UTF-8 text", path.display())
            }
            _ => {
                anyhow::Error::new(e).context(format!("cannot read config file {}", path.display()))
            }
        })
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
    let store = open_store(&path, resolved.store.flush_every)?;
    Ok((resolved, store))
}

/// Opens the database at `path`, with one clear message when another process holds it.
fn open_store(path: &Path, flush_every: std::time::Duration) -> Result<Store> {
    Store::open(path, StoreOptions { flush_every }).map_err(|e| match &e {
        StoreError::Storage(s) if s.is_locked() => anyhow::anyhow!(
            "the database at {} is in use by another process (a running `somna run`?); send the \
command to its API with --server URL (`somna run --serve`), or stop it first",
            path.display()
        ),
        // The error's own text only: its source repeats it.
        e => anyhow::anyhow!("cannot open the database at {}: {e}", path.display()),
    })
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
    AgentId::new(s).map_err(|e| Invalid(e.to_string()).into())
}

fn require_agent(store: &Store, id: &AgentId) -> Result<()> {
    if store.agent(id)?.is_none() {
        bail!("unknown agent \"{id}\" (see `somna agents`)");
    }
    Ok(())
}
