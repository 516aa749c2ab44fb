//! Shared fixtures: configs, a stub-backed LLM client, histories, journals, and an `Agent` driven
//! by hand.

use std::sync::Arc;
use std::time::Duration;

use somna_core::config::{AgentConfig, AgentOverrides, LlmConfig, Provider, ResolvedConfig};
use somna_core::message::{Message, ToolCall};
use somna_core::tokens::TokenCounter;
use somna_core::{AgentId, JournalEntry, JournalQuery, SourceType, Timestamp};
use somna_llm::{LlmClient, build_client};
use somna_runtime::agent::{AgentDeps, Job, JobOutcome};
use somna_runtime::{
    Agent, Clock, Compactor, Event, EventBus, Inbound, Runtime, RuntimeOptions, Stamped,
};
use somna_store::Store;
use somna_testkit::StubLlmServer;
use tokio::sync::broadcast;

/// The model name tests use: unknown to tiktoken, so counts are the heuristic's.
pub const MODEL: &str = "stub-model";

pub fn id(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

/// A run-time config change from `key=value` pairs, as `somna configure` takes them.
pub fn overrides(pairs: &[&str]) -> AgentOverrides {
    let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
    AgentOverrides::from_pairs(&pairs).unwrap()
}

/// An agent config with a small window so a few dozen messages fill it.
pub fn agent_config(agent: &str, max_context_tokens: u32) -> AgentConfig {
    let mut c = AgentConfig::with_builtin_defaults(id(agent));
    c.model = MODEL.into();
    c.compaction.compact_model = MODEL.into();
    c.compaction.max_context_tokens = max_context_tokens;
    c.compaction.preserve_messages = 6;
    c.compaction.preserve_ratio = 0.1;
    c.compaction.min_compact_batch = 4;
    c.compaction.summary_max_tokens = 300;
    // Tests put the history at exact shares of the window: no working context budget unless a
    // test asks for one.
    c.compaction.working_share = 0.0;
    c.compaction.sections = somna_core::config::SectionCaps {
        topic_arc: 80,
        decisions: 60,
        pending: 60,
        user_facts: 50,
        artifacts: 40,
    };
    c.compaction.summarizer_context_tokens = 8192;
    c
}

/// The persona of the agents of [`runtime_config`].
pub const PERSONA: &str = "You are Brannoc, the village smith.";

/// Extra lines for the sections of [`runtime_config`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Extra<'a> {
    /// `[runtime]` lines.
    pub runtime: &'a str,
    /// `[defaults]` lines (`sleep_every`, `tool_timeout`…).
    pub defaults: &'a str,
    /// `[defaults.memory]` lines.
    pub memory: &'a str,
}

/// A config for a running runtime: [`PERSONA`], the stub model, 20 ms ticks, no sleep jitter, the
/// compaction settings of [`agent_config`], the `extra` lines, and one `[[agents]]` entry per (id,
/// max_context_tokens, extra TOML lines).
pub fn runtime_config(extra: Extra<'_>, agents: &[(&str, u32, &str)]) -> ResolvedConfig {
    let Extra {
        runtime,
        defaults,
        memory,
    } = extra;
    let mut text = format!(
        r#"
[runtime]
{runtime}
[defaults]
persona = "{PERSONA}"
model = "{MODEL}"
tick_every = "20ms"
sleep_jitter = "0s"
{defaults}
[defaults.memory]
{memory}
[defaults.compaction]
preserve_messages = 6
preserve_ratio = 0.1
min_compact_batch = 4
summary_max_tokens = 300
sections = {{ topic_arc = 80, decisions = 60, pending = 60, user_facts = 50, artifacts = 40 }}
# These tests put the history at exact shares of the window; no working context budget.
working_share = 0.0
"#
    );
    for (id, max, extra) in agents {
        text.push_str(&format!(
            "[[agents]]\nid = \"{id}\"\n{extra}\ncompaction.max_context_tokens = {max}\n"
        ));
    }
    ResolvedConfig::load(&text, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runtime options for tests: two Arbiters; the scheduler sends sleeps only if `schedule_sleeps`.
pub fn options(schedule_sleeps: bool) -> RuntimeOptions {
    RuntimeOptions {
        arbiters: 2,
        schedule_sleeps,
        ..Default::default()
    }
}

/// A runtime hosting the agents of `cfg` over `store` and `llm`, with [`options`]`(false)`.
pub fn start(cfg: ResolvedConfig, store: &Store, llm: Arc<dyn LlmClient>) -> Runtime {
    Runtime::start(cfg, store.clone(), llm, options(false)).unwrap()
}

/// Starts a runtime (no scheduled sleeps) over `store` whose LLM is `stub`, 5 s a request.
pub fn start_stubbed(cfg: ResolvedConfig, store: &Store, stub: &StubLlmServer) -> Runtime {
    start(cfg, store, stub_client(stub, Duration::from_secs(5)))
}

/// A temporary store where `agent` exists (created at time 0), with no history yet.
pub fn new_agent(agent: &str) -> (Store, AgentId) {
    let store = Store::temporary().unwrap();
    let agent = id(agent);
    store.create_agent(&agent, Timestamp(0)).unwrap();
    (store, agent)
}

/// A temporary store where `agent` exists with `n` turns of history (see [`fill`]).
pub fn with_history(agent: &str, n: usize) -> (Store, AgentId) {
    let (store, agent) = new_agent(agent);
    fill(&store, &agent, n, Timestamp(0));
    (store, agent)
}

/// An OpenAI-compatible client pointed at `stub`, with no retries.
pub fn stub_client(stub: &StubLlmServer, timeout: Duration) -> Arc<dyn LlmClient> {
    let cfg = LlmConfig {
        provider: Provider::Openai,
        model: MODEL.into(),
        base_url: stub.base_url(),
        api_key_env: String::new(),
        timeout,
        max_retries: 0,
        max_concurrent: 4,
        ..LlmConfig::default()
    };
    build_client(&cfg, &|_| None).unwrap()
}

/// The handles an `Agent` runs with: `store`, `llm` (and a compactor over both), a fresh event
/// bus (subscribe through `deps.events` before the agent takes them), `clock`.
pub fn agent_deps(store: &Store, llm: Arc<dyn LlmClient>, clock: Clock) -> AgentDeps {
    AgentDeps {
        store: store.clone(),
        compactor: Compactor::new(store.clone(), Arc::clone(&llm)),
        llm,
        events: EventBus::default(),
        clock,
        gauges: Default::default(),
        semantic: None,
    }
}

pub fn counter() -> TokenCounter {
    TokenCounter::for_model(MODEL)
}

/// A line of village talk that varies with `i` (names, numbers, decisions).
pub fn line(i: usize) -> String {
    const NAMES: [&str; 5] = ["Aldric", "Marta", "Brannoc", "Elowen", "Tobias"];
    const THINGS: [&str; 5] = ["sword", "horseshoe", "lantern", "plough", "kettle"];
    let name = NAMES[i % NAMES.len()];
    let thing = THINGS[(i / 5) % THINGS.len()];
    format!(
        "{name} asks about the {thing} for the mill near Millbrook; it costs {} silver and should be \
ready by day {}. We agreed to deliver it to the north gate, and {name} will pay half up front.",
        10 + i * 3,
        1 + i % 7
    )
}

/// Appends `n` alternating user/assistant messages with token counts; returns them as stored.
pub fn fill(store: &Store, agent: &AgentId, n: usize, start: Timestamp) -> Vec<Message> {
    let counter = counter();
    (0..n)
        .map(|i| {
            let mut m = if i % 2 == 0 {
                Message::user(line(i)).with_name("Aldric")
            } else {
                Message::assistant(format!("Noted: {}", line(i)))
            };
            m.created_at = Timestamp(start.0 + i as u64 * 1000);
            m.tokens = counter.count_message(&m);
            store.append(agent, m, start).unwrap()
        })
        .collect()
}

/// Journals `notes` for `agent` as `note` entries of importance 6, stamped 0, 1, 2…
pub fn notes(store: &Store, agent: &AgentId, notes: &[&str]) {
    for (i, note) in notes.iter().enumerate() {
        store
            .append_journal(
                agent,
                JournalEntry::new(Timestamp(i as u64), SourceType::Note, 6, *note),
            )
            .unwrap();
    }
}

/// The agent's synthesis entries: source type `compaction`, tag `synthesis`.
pub fn synthesis_entries(store: &Store, agent: &AgentId) -> Vec<JournalEntry> {
    journal_of(store, agent, SourceType::Compaction, &["synthesis"])
}

/// The agent's journal entries of `source`, filtered by `tags` as a [`JournalQuery`] filters.
pub fn journal_of(
    store: &Store,
    agent: &AgentId,
    source: SourceType,
    tags: &[&str],
) -> Vec<JournalEntry> {
    let query = JournalQuery {
        source_type: Some(source),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    };
    store.query_journal(agent, &query).unwrap()
}

/// Appends a tool call with a large result.
pub fn tool_exchange(store: &Store, agent: &AgentId, call_id: &str, result_chars: usize) {
    let counter = counter();
    let mut call = Message::assistant_calls(
        "",
        vec![ToolCall {
            id: call_id.into(),
            name: "inventory".into(),
            arguments: "{}".into(),
        }],
    );
    call.tokens = counter.count_message(&call);
    store.append(agent, call, Timestamp(0)).unwrap();
    let mut result = Message::tool_result(call_id, "iron ingot x4; ".repeat(result_chars / 15 + 1));
    result.tokens = counter.count_message(&result);
    store.append(agent, result, Timestamp(0)).unwrap();
}

/// The whole live history as one comparable value.
pub fn snapshot(store: &Store, agent: &AgentId) -> Vec<Message> {
    store.history(agent).unwrap()
}

/// Asserts the store's invariants hold for `agent`.
pub fn assert_invariants(store: &Store, agent: &AgentId) {
    let report = store.check_invariants(agent).unwrap();
    assert!(report.is_ok(), "invariants broken: {report:?}");
}

/// One `Agent` driven by hand the way its actor drives it (input, tick, the job the tick starts,
/// finish), with its store and its event stream.
pub struct Driven {
    pub agent: Agent,
    pub store: Store,
    pub id: AgentId,
    rx: broadcast::Receiver<Stamped>,
}

impl Driven {
    /// Loads the agent of `config` over `deps`, listening to its events from the start.
    pub fn load(config: AgentConfig, deps: AgentDeps) -> Driven {
        let (store, id) = (deps.store.clone(), config.id.clone());
        let rx = deps.events.subscribe();
        Driven {
            agent: Agent::load(config, deps).unwrap(),
            store,
            id,
            rx,
        }
    }

    /// Aldric says `text`.
    pub fn say(&mut self, text: &str) {
        self.agent
            .inbound(Inbound::User {
                content: text.into(),
                name: Some("Aldric".into()),
            })
            .unwrap();
    }

    /// Runs a started job to its end and hands the outcome back.
    pub async fn run(&mut self, job: Job) -> JobOutcome {
        let kind = job.kind;
        let out = job.run().await;
        self.agent.finish(kind, &out);
        out
    }

    /// One tick; runs and finishes its job. `None` when the tick started none.
    pub async fn tick(&mut self) -> Option<JobOutcome> {
        let job = self.agent.tick().unwrap()?;
        Some(self.run(job).await)
    }

    /// Every event since the last call.
    pub fn events(&mut self) -> Vec<Event> {
        let mut seen = Vec::new();
        while let Ok(s) = self.rx.try_recv() {
            seen.push(s.event);
        }
        seen
    }

    /// The kinds of the events since the last call.
    pub fn kinds(&mut self) -> Vec<&'static str> {
        self.events().iter().map(Event::kind).collect()
    }
}
