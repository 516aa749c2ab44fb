//! The `somna` command: thin glue. It parses arguments, loads runtime.toml, and calls the library
//! crates; every operation it offers is a library function. The agent commands go through one
//! [`backend::Backend`]: the local database (`local`) or, with `--server URL`, a running server's
//! HTTP API (`remote`); `somna run --serve` runs that server.
//!
//! Exit codes: 0 success, 1 failure (a `compact` or `sleep` that failed included), 2 invalid
//! arguments or configuration (locally — a config file that is missing, unreadable or not UTF-8
//! included — or input the server refused as invalid: `bad_request`, `invalid_config`, …).

mod backend;
mod cli;
mod embed_cache;
mod eval;
mod local;
mod output;
mod remote;
mod run;
mod store_at;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use somna_core::AgentId;
use somna_core::config::{ResolvedConfig, RuntimeConfig};
use somna_store::Store;

use backend::{Backend, JournalFilters};
use cli::{AgentCommand, Cli, ClusterCommand, Command, EvalCommand, TokenCommand};
use local::Local;
use output::Out;
use remote::{ApiFailure, Remote};
use store_at::StoreAt;

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

/// jemalloc keeps RSS near live memory under many allocating threads (see the root Cargo.toml).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    let mut server = cli.server.as_deref();
    if server.is_some()
        && let Some(name) = local_only(&cli.command)
    {
        if server_explicit {
            return Err(local_only_error(name).into());
        }
        tracing::debug!("`somna {name}` works on a local database only; SOMNA_SERVER is ignored");
        server = None;
    }
    match &cli.command {
        Command::Run {
            scenario,
            for_real,
            quiet,
            serve,
            cluster,
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
            let at = StoreAt::from_config(&cli.config, cli.db.as_deref(), &config.store);
            let store = if *cluster {
                at.open_cluster(&config.cluster, &config.store)?
            } else {
                at.open(&config.store, true)?
            };
            run::run(run::RunArgs {
                config,
                store,
                scenario,
                for_real: *for_real,
                quiet: *quiet,
                store_label: at.label(),
                serve,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig { path } => {
            let path = path.clone().unwrap_or_else(|| cli.config.clone());
            check_config(&path, &cli.set, &out)
        }
        Command::Stats => {
            let (config, store) = open(&cli)?;
            Local { config, store, out }.stats()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let (config, store) = open(&cli)?;
            Local { config, store, out }.check()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster(ClusterCommand::Status) => {
            let config = load_or_defaults(&cli)?;
            let at = StoreAt::from_config(&cli.config, cli.db.as_deref(), &config.store);
            let status = store_at::cluster_status(&at, &config.cluster)?;
            out.cluster_status(&status);
            Ok(ExitCode::SUCCESS)
        }
        Command::MigrateStore { to, schema } => {
            let config = load_or_defaults(&cli)?;
            let from = StoreAt::from_config(&cli.config, cli.db.as_deref(), &config.store);
            let schema = schema.as_deref().unwrap_or(&config.store.schema);
            let to = StoreAt::target(to, schema, config.store.pool_size);
            let source = from.open(&config.store, false)?;
            store_at::migrate(&source, &from, &to, &config.store)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(EvalCommand::Recall {
            dataset,
            no_baselines,
            consolidate,
            limit_conversations,
            limit_questions,
            details,
            quiet,
            embed_cache,
        }) => {
            let config = match load_config(&cli.config, &cli.set) {
                Ok(c) => c,
                Err(LoadError::Invalid(errors)) => {
                    out.config_errors(&cli.config, &errors);
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
                Err(LoadError::Io(e)) => return Err(e),
            };
            let options = somna_runtime::eval::RecallOptions {
                baselines: !no_baselines,
                consolidate: *consolidate,
                limit_conversations: *limit_conversations,
                limit_questions: *limit_questions,
                details: *details,
            };
            eval::recall(
                dataset,
                &config,
                &options,
                embed_cache.as_deref(),
                *quiet,
                out,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Agent(AgentCommand::Prompt { agent, input }) => {
            let (config, store) = open(&cli)?;
            Local { config, store, out }.prompt(&agent_id(agent)?, input)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Agent(AgentCommand::Import { agent, file, quiet }) => {
            let (config, store) = open_or_create(&cli, true)?;
            Local { config, store, out }.import(&agent_id(agent)?, file, *quiet)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Agent(AgentCommand::Export {
            agent,
            openai,
            times,
            out: path,
        }) => {
            let (config, store) = open(&cli)?;
            export(
                &Local { config, store, out },
                &agent_id(agent)?,
                (*openai).then_some(*times),
                path.as_deref(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        command => {
            let backend: Box<dyn Backend> = match server {
                Some(url) => {
                    let token = std::env::var(somna_server::TOKEN_ENV).ok();
                    Box::new(Remote::new(url, token, out)?)
                }
                None => {
                    // Creating an agent or a token may create the database (tokens are made
                    // before the first `somna run --serve`).
                    let create = matches!(
                        command,
                        Command::Agent(AgentCommand::Create { .. })
                            | Command::Token(TokenCommand::Create { .. })
                    );
                    let (config, store) = open_or_create(&cli, create)?;
                    Box::new(Local { config, store, out })
                }
            };
            dispatch(backend.as_ref(), command)?;
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
        Command::MigrateStore { .. } => "migrate-store",
        Command::Cluster(_) => "cluster",
        Command::Eval(_) => "eval",
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

/// Runs an agent command on a backend, local or remote: the one dispatch of the agent commands.
fn dispatch(backend: &dyn Backend, command: &Command) -> Result<()> {
    match command {
        Command::Agents => backend.agents(),
        Command::History {
            agent,
            limit,
            archive,
        } => backend.history(&agent_id(agent)?, *limit, *archive),
        Command::Journal {
            agent,
            source,
            tag,
            since,
            until,
            min_importance,
            limit,
        } => backend.journal(
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
            AgentCommand::Create { agent, changes } => backend.create(&agent_id(agent)?, changes),
            AgentCommand::Delete { agent } => backend.delete(&agent_id(agent)?),
            AgentCommand::Status { agent } => backend.status(&agent_id(agent)?),
            AgentCommand::Send {
                agent,
                text,
                from,
                observation,
            } => backend.send(
                &agent_id(agent)?,
                cli::user_input(text.clone(), from.clone(), *observation),
            ),
            AgentCommand::Compact { agent, force } => backend.compact(&agent_id(agent)?, *force),
            AgentCommand::Sleep { agent } => backend.sleep(&agent_id(agent)?),
            AgentCommand::Uncompact { agent, seq } => backend.uncompact(&agent_id(agent)?, *seq),
            AgentCommand::Configure { agent, changes } => {
                backend.configure(&agent_id(agent)?, changes)
            }
            AgentCommand::Search {
                agent,
                query,
                limit,
            } => backend.search(&agent_id(agent)?, query, *limit),
            AgentCommand::Facts { agent } => backend.facts(&agent_id(agent)?),
            AgentCommand::Events { agent, limit } => backend.events(&agent_id(agent)?, *limit),
            AgentCommand::Prompt { .. }
            | AgentCommand::Import { .. }
            | AgentCommand::Export { .. } => {
                Err(local_only_error(local_only(command).unwrap_or("this command")).into())
            }
        },
        Command::Token(TokenCommand::Create {
            name,
            agents,
            read_only,
        }) => backend.create_token(
            name,
            somna_store::TokenScope {
                agents: agents.clone(),
                access: if *read_only {
                    somna_store::Access::Read
                } else {
                    somna_store::Access::ReadWrite
                },
            },
        ),
        Command::Token(TokenCommand::List) => backend.tokens(),
        Command::Token(TokenCommand::Revoke { name }) => backend.revoke_token(name),
        // Handled in `run` before a backend is chosen.
        Command::Run { .. }
        | Command::CheckConfig { .. }
        | Command::Stats
        | Command::Check
        | Command::MigrateStore { .. }
        | Command::Cluster(_)
        | Command::Eval(_) => {
            Err(local_only_error(local_only(command).unwrap_or("this command")).into())
        }
    }
}

/// `somna export`: to `path`, or to standard output. `openai`: OpenAI JSONL, with times or not.
fn export(local: &Local, id: &AgentId, openai: Option<bool>, path: Option<&Path>) -> Result<()> {
    match path {
        Some(path) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            );
            local.export(id, openai, &mut f)?;
            std::io::Write::flush(&mut f)?;
            Ok(())
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            local.export(id, openai, &mut lock)?;
            std::io::Write::flush(&mut lock)?;
            Ok(())
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
    let resolved = load_or_defaults(cli)?;
    let at = StoreAt::from_config(&cli.config, cli.db.as_deref(), &resolved.store);
    let store = at.open(&resolved.store, create)?;
    Ok((resolved, store))
}

/// The config (exits 2 on an invalid one); with --db and no readable config file, the defaults.
fn load_or_defaults(cli: &Cli) -> Result<ResolvedConfig> {
    match load_config(&cli.config, &cli.set) {
        Ok(r) => Ok(r),
        Err(LoadError::Invalid(errors)) => {
            Out::new(false).config_errors(&cli.config, &errors);
            std::process::exit(i32::from(EXIT_INVALID));
        }
        Err(LoadError::Io(e)) if cli.db.is_some() => {
            tracing::debug!("no usable config ({e:#}); using --db with defaults");
            // The defaults, with the command line's `--set` overrides all the same.
            let name = "(defaults)";
            match RuntimeConfig::parse_with_overrides("", name, &cli.set)
                .and_then(|raw| raw.resolve(name))
            {
                Ok(r) => Ok(r),
                Err(errors) => {
                    Out::new(false).config_errors(std::path::Path::new(name), &errors);
                    std::process::exit(i32::from(EXIT_INVALID));
                }
            }
        }
        Err(LoadError::Io(e)) => Err(e),
    }
}

/// Semantic retrieval's embedder, when `[embedder]` sets one (loading the in-process model, or
/// checking the server's config): `None` for `provider = "none"`.
fn semantic_from(config: &ResolvedConfig) -> Result<Option<somna_runtime::Semantic>> {
    somna_runtime::Semantic::from_config(&config.embedder)
        .map_err(anyhow::Error::new)
        .context("cannot build the embedder ([embedder])")
}

fn agent_id(s: &str) -> Result<AgentId> {
    AgentId::new(s).map_err(|e| Invalid(e.to_string()).into())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use clap::Parser;

    use super::*;
    use somna_runtime::protocol::Inbound;

    /// A backend that records which method ran with which arguments.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<String>>);

    impl Recorder {
        fn note(&self, call: String) -> Result<()> {
            self.0.borrow_mut().push(call);
            Ok(())
        }
    }

    impl Backend for Recorder {
        fn agents(&self) -> Result<()> {
            self.note("agents".into())
        }
        fn history(&self, id: &AgentId, limit: Option<usize>, archive: bool) -> Result<()> {
            self.note(format!("history {id} {limit:?} {archive}"))
        }
        fn journal(&self, id: &AgentId, f: &JournalFilters) -> Result<()> {
            self.note(format!(
                "journal {id} {:?} {:?} {:?} {:?} {:?} {:?}",
                f.source, f.tags, f.since, f.until, f.min_importance, f.limit
            ))
        }
        fn create(&self, id: &AgentId, changes: &[String]) -> Result<()> {
            self.note(format!("create {id} {changes:?}"))
        }
        fn delete(&self, id: &AgentId) -> Result<()> {
            self.note(format!("delete {id}"))
        }
        fn status(&self, id: &AgentId) -> Result<()> {
            self.note(format!("status {id}"))
        }
        fn send(&self, id: &AgentId, input: Inbound) -> Result<()> {
            self.note(format!("send {id} {}", serde_json::to_string(&input)?))
        }
        fn compact(&self, id: &AgentId, force: bool) -> Result<()> {
            self.note(format!("compact {id} {force}"))
        }
        fn sleep(&self, id: &AgentId) -> Result<()> {
            self.note(format!("sleep {id}"))
        }
        fn uncompact(&self, id: &AgentId, seq: u64) -> Result<()> {
            self.note(format!("uncompact {id} {seq}"))
        }
        fn configure(&self, id: &AgentId, changes: &[String]) -> Result<()> {
            self.note(format!("configure {id} {changes:?}"))
        }
        fn search(&self, id: &AgentId, query: &str, limit: usize) -> Result<()> {
            self.note(format!("search {id} {query} {limit}"))
        }
        fn facts(&self, id: &AgentId) -> Result<()> {
            self.note(format!("facts {id}"))
        }
        fn events(&self, id: &AgentId, limit: usize) -> Result<()> {
            self.note(format!("events {id} {limit}"))
        }
        fn create_token(&self, name: &str, scope: somna_store::TokenScope) -> Result<()> {
            self.note(format!(
                "token create {name} {} {}",
                scope.agents, scope.access
            ))
        }
        fn tokens(&self) -> Result<()> {
            self.note("token list".into())
        }
        fn revoke_token(&self, name: &str) -> Result<()> {
            self.note(format!("token revoke {name}"))
        }
    }

    fn dispatched(args: &[&str]) -> Result<Vec<String>> {
        let cli = Cli::try_parse_from(std::iter::once("somna").chain(args.iter().copied()))?;
        let recorder = Recorder::default();
        dispatch(&recorder, &cli.command)?;
        Ok(recorder.0.into_inner())
    }

    #[test]
    fn one_dispatch_passes_each_command_to_its_backend_method() -> Result<()> {
        assert_eq!(dispatched(&["agents"])?, ["agents"]);
        assert_eq!(
            dispatched(&["history", "ada", "--limit", "3", "--archive"])?,
            ["history ada Some(3) true"]
        );
        assert_eq!(
            dispatched(&[
                "journal", "ada", "--tag", "a", "--tag", "b", "--since", "1d"
            ])?,
            ["journal ada None [\"a\", \"b\"] Some(\"1d\") None None None"]
        );
        assert_eq!(
            dispatched(&["compact", "ada", "--force"])?,
            ["compact ada true"]
        );
        assert_eq!(dispatched(&["uncompact", "ada", "7"])?, ["uncompact ada 7"]);
        assert_eq!(
            dispatched(&["token", "create", "t1", "--agents", "a-", "--read-only"])?,
            ["token create t1 a- read"]
        );
        assert_eq!(
            dispatched(&["token", "create", "t2", "--agents", "b-"])?,
            ["token create t2 b- read_write"]
        );
        assert_eq!(dispatched(&["token", "list"])?, ["token list"]);
        assert_eq!(dispatched(&["token", "revoke", "t1"])?, ["token revoke t1"]);
        assert_eq!(
            dispatched(&["configure", "ada", "persona=hi"])?,
            ["configure ada [\"persona=hi\"]"]
        );
        let sent = dispatched(&["send", "ada", "hello", "--observation"])?;
        assert_eq!(sent.len(), 1);
        assert!(
            sent[0].starts_with("send ada ") && sent[0].contains("hello"),
            "{sent:?}"
        );
        Ok(())
    }

    #[test]
    fn bad_agent_ids_and_local_only_commands_are_invalid_without_a_backend_call() -> Result<()> {
        for args in [
            &["status", "no/slash"][..],
            &["stats"],
            &["prompt", "ada", "--input", "hi"],
            &["eval", "recall", "datasets/recall"],
        ] {
            let cli = Cli::try_parse_from(std::iter::once("somna").chain(args.iter().copied()))?;
            let recorder = Recorder::default();
            let err = dispatch(&recorder, &cli.command).expect_err("refused");
            assert!(err.downcast_ref::<Invalid>().is_some(), "{args:?}: {err:#}");
            assert!(recorder.0.borrow().is_empty(), "{args:?}");
        }
        Ok(())
    }
}
