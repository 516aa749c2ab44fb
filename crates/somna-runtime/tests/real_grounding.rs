//! Opt-in (`SOMNA_REAL_LLM=1`, see docs/llm.md): issue 25 with a real small model. A 300-turn
//! village transcript with planted prices, dates, ledger IDs and names is compacted by force and
//! then slept on, with structured output off and on (`auto`: llama-cpp-python's server takes
//! `json_object`), through SmolLM2-135M (`scripts/local-llm.sh`). Prints, per mode, what the
//! grounding check did with the model's summary items, extracted facts, consolidated facts and
//! reflections (kept / repaired / dropped) and how the compaction committed; asserts that no value
//! in committed memory is missing from the transcript (0 invented values) and that the summary was
//! the model's (not a fallback). Never needed by CI.

use std::sync::Arc;
use std::time::Instant;

use somna_core::config::RuntimeConfig;
use somna_core::record::CompactionMethod;
use somna_core::{
    EventRecord, GroundingCounts, JournalQuery, Message, Role, SourceType, Timestamp,
};
use somna_llm::grounding::{Claim, Evidence, claims};
use somna_runtime::agent::JobKind;
use somna_runtime::{Clock, CompactionOutcome, Offline};
use somna_store::Store;
use somna_text::cite;

use crate::support::*;

const SELLERS: [&str; 5] = ["Mara", "Tobin", "Elsbeth", "Hale", "Bram"];
const GOODS: [&str; 6] = [
    "blue ribbon",
    "map of the marsh",
    "copper kettle",
    "iron plough",
    "wool cloak",
    "lantern",
];

/// 300 turns of village trade: who sells what for how much, which ledger it goes in, and when.
fn planted_village(n: usize) -> Vec<Message> {
    let start = Timestamp::parse_rfc3339("2026-05-04T08:00:00Z").unwrap();
    (0..n)
        .map(|i| {
            let seller = SELLERS[i % SELLERS.len()];
            let good = GOODS[(i / 2) % GOODS.len()];
            let price = 40 + (i * 37) % 460;
            let ledger = format!("LX-{}", 4000 + i * 7);
            let day = 4 + i / 40;
            let mut m = if i % 2 == 0 {
                Message::user(format!(
                    "I'll sell you the {good} for {price} silver. Write it in ledger {ledger}; \
I collect on May {}.",
                    day + 3
                ))
                .with_name(seller)
            } else {
                Message::assistant(format!(
                    "Agreed, {seller}: the {good} for {price} silver, ledger {ledger}, paid on May {}.",
                    day + 3
                ))
            };
            m.created_at = Timestamp(start.0 + i as u64 * 20 * 60_000);
            m
        })
        .collect()
}

/// The values of `line` that no turn of the village holds.
fn invented(
    line: &str,
    evidence: &Evidence,
    plain: &std::collections::HashSet<String>,
) -> Vec<String> {
    claims(&cite::strip(line))
        .into_iter()
        .filter(|c| match c {
            Claim::Lead(w) => !plain.contains(w) && !plain.contains(w.trim_end_matches('s')),
            _ => true,
        })
        .filter(|c| !evidence.supports(c))
        .map(|c| c.to_string())
        .collect()
}

#[tokio::test]
async fn real_grounding_on_a_planted_village() {
    let Some((base_url, model)) = somna_testkit::real_llm() else {
        return;
    };
    let village = planted_village(300);
    let persona = "You are Wren, the steward of Millbrook, who keeps the village ledgers.";
    let mut evidence = Evidence::new();
    let mut plain = std::collections::HashSet::new();
    for m in &village {
        evidence.add_text(&m.content);
        if let Some(n) = &m.name {
            evidence.add_name(n);
        }
        evidence.add_time(&m.created_at.minute_label());
        for w in m.content.split(|c: char| !c.is_alphanumeric()) {
            if w.starts_with(char::is_lowercase) {
                plain.insert(w.to_string());
            }
        }
    }
    evidence.add_text(persona);
    println!(
        "| mode | compaction | summary + extraction (kept / repaired / dropped) | sleep: facts + reflections | invented values committed | time |"
    );
    println!("|---|---|---|---|---|---|");
    let (mut invented_total, mut summaries) = (0, 0);
    for mode in ["auto", "off"] {
        let toml = format!(
            r#"
[llm]
provider = "openai"
base_url = "{base_url}"
model = "{model}"
structured_output = "{mode}"
timeout = "600s"
max_retries = 1

[defaults]
persona = "{persona}"
model = "{model}"

[defaults.compaction]
max_context_tokens = 8192
# The server's window is 8,192 tokens of its own tokenizer, which counts more than ours.
summarizer_context_tokens = 4000
extraction = "llm"

[defaults.memory]
reflection_threshold = 1

[[agents]]
id = "wren"
"#
        );
        let config = RuntimeConfig::parse_with_overrides(&toml, "real", &[])
            .unwrap()
            .resolve("real")
            .unwrap();
        let store = Store::temporary().unwrap();
        let wren = id("wren");
        let offline = Offline::new(config.clone(), store.clone(), Clock::real());
        offline.create(&wren, Default::default()).unwrap();
        let counter = counter();
        for m in &village {
            let mut m = m.clone();
            m.tokens = counter.count_message(&m);
            store.append(&wren, m, Timestamp(1)).unwrap();
        }
        let llm: Arc<dyn somna_llm::LlmClient> =
            somna_llm::build_client_from_env(&config.llm).unwrap();
        let mut agent = offline.agent(&wren, llm).unwrap();
        let started = Instant::now();
        let job = agent.compact(true).unwrap();
        let out = job.run().await;
        agent.finish(JobKind::Compact { force: true }, &out);
        let compaction = match &out.compaction {
            Some(CompactionOutcome::Done(r)) => {
                format!(
                    "{:?}, {} → {} tokens",
                    r.method, r.tokens_before, r.tokens_after
                )
            }
            Some(CompactionOutcome::Failed { reason, .. }) => {
                format!("failed: {}", somna_llm::prompts::clip(reason, 160))
            }
            other => format!("{other:?}"),
        };
        let llm_summary = matches!(&out.compaction, Some(CompactionOutcome::Done(r)) if r.method == CompactionMethod::Llm);
        let job = agent.sleep(false).unwrap();
        let out = job.run().await;
        agent.finish(JobKind::Sleep { tired: false }, &out);
        let elapsed = started.elapsed();

        let mut compacted = GroundingCounts::default();
        let mut slept = GroundingCounts::default();
        for e in store.events(&wren, 100).unwrap() {
            match e.event {
                EventRecord::Compaction(r) => compacted.add(r.grounding.unwrap_or_default()),
                EventRecord::Sleep { grounding, .. } => slept.add(grounding.unwrap_or_default()),
                _ => {}
            }
        }
        // Everything a model wrote that was committed: the live summaries, the journal entries
        // models wrote, the facts.
        let mut committed: Vec<String> = Vec::new();
        for m in store.history(&wren).unwrap() {
            if m.summary().is_some() {
                committed.extend(m.content.lines().map(str::to_string));
            }
        }
        for e in store
            .query_journal(&wren, &JournalQuery::default())
            .unwrap()
        {
            if matches!(
                e.source_type,
                SourceType::Compaction | SourceType::Extraction | SourceType::Reflection
            ) {
                committed.extend(e.content.lines().map(str::to_string));
            }
        }
        for f in store.facts(&wren).unwrap() {
            committed.push(f.text);
        }
        // Items only: not the headings, `(none)` or the summary's prefix, which Somna writes.
        committed.retain(|l| {
            let l = l.trim();
            !(l.is_empty() || l.starts_with('#') || l == "(none)" || l == Message::SUMMARY_PREFIX)
        });
        let bad: Vec<(String, Vec<String>)> = committed
            .iter()
            .map(|l| (l.clone(), invented(l, &evidence, &plain)))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        println!(
            "| {mode} | {compaction} | {compacted} | {slept} | {} | {:.0} s |",
            bad.len(),
            elapsed.as_secs_f64()
        );
        for (line, values) in &bad {
            println!("  invented {values:?} in {line:?}");
        }
        invented_total += bad.len();
        summaries += usize::from(llm_summary);
    }
    assert_eq!(invented_total, 0, "invented values committed");
    // Plain text is this model's weak form (docs/llm.md): the structured one must commit.
    assert!(summaries > 0, "no mode committed the model's summary");
}

/// Opt-in: what "user facts rest on the users' words" moves with a real small model. SmolLM2 chats
/// with villagers who state their own prices, days and kin (its replies invent more of them
/// freely), then summarizes each conversation with structured output (`auto`); every answer is
/// checked both ways: every item against what it cites (`Grounder::check`, the rule before stop
/// 52) and as Somna checks it now (`ground_summary`, user facts against the turns that are not the
/// agent's). Prints, per conversation, the user-fact items each way commits whose values only the
/// agent's turns hold; asserts the way Somna checks now commits none. Measures the model; never
/// needed by CI. `SOMNA_REAL_LLM_RUNS` conversations (default 4).
#[tokio::test]
async fn real_user_facts_rest_on_the_users_words() {
    use somna_core::config::{LlmConfig, Provider, StructuredOutput};
    use somna_llm::grounding::{self, Grounder};
    use somna_llm::{ChatMessage, ChatRequest, Purpose, build_client, prompts};
    use somna_text::transcript::Turn;

    let Some((base_url, model)) = somna_testkit::real_llm() else {
        return;
    };
    let runs: usize = std::env::var("SOMNA_REAL_LLM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let llm = build_client(
        &LlmConfig {
            provider: Provider::Openai,
            model: model.clone(),
            base_url: base_url.clone(),
            timeout: std::time::Duration::from_secs(600),
            max_retries: 0,
            max_concurrent: 1,
            structured_output: StructuredOutput::Auto,
            ..LlmConfig::default()
        },
        &|_| None,
    )
    .unwrap();
    let persona = "You are Wren, the innkeeper of Millbrook. Answer the villagers briefly.";
    let cfg = agent_config("wren", 8192).compaction;
    println!(
        "| conversation | user facts committed (before / now) | of them, values only the agent said (before / now) | examples |"
    );
    println!("|---|---|---|---|");
    let (mut before_total, mut now_total) = (0, 0);
    for run in 0..runs {
        let mut history: Vec<Message> = Vec::new();
        let start = Timestamp::parse_rfc3339("2026-05-04T08:00:00Z").unwrap();
        for i in 0..12 {
            let seller = SELLERS[(run + i) % SELLERS.len()];
            let good = GOODS[(run * 3 + i) % GOODS.len()];
            let price = 40 + (run * 131 + i * 37) % 460;
            let said = match i % 3 {
                0 => {
                    format!("I'm {seller}. I'll pay {price} silver for a room for the {good} fair.")
                }
                1 => format!("My brother arrives on May {}. Can he share my room?", 5 + i),
                _ => "What do I owe you so far, Wren?".to_string(),
            };
            let mut m = Message::user(said).with_name(seller);
            m.seq = history.len() as u64;
            m.created_at = Timestamp(start.0 + history.len() as u64 * 60_000);
            history.push(m);
            let mut messages = vec![ChatMessage::new(Role::System, persona)];
            messages.extend(history.iter().map(ChatMessage::from));
            let request = ChatRequest::new(model.clone(), messages)
                .with_purpose(Purpose::Chat)
                .with_max_tokens(60);
            let reply = llm
                .chat(request)
                .await
                .map_or_else(|e| format!("({e})"), |r| r.text);
            let mut m = Message::assistant(reply.trim());
            m.seq = history.len() as u64;
            m.created_at = Timestamp(start.0 + history.len() as u64 * 60_000);
            history.push(m);
        }
        let Ok(answer) = llm
            .chat(prompts::summary_request(&model, &cfg, &history))
            .await
        else {
            println!("| {run} | the summary request failed | | |");
            continue;
        };
        let text = prompts::read_summary(&answer.text);
        let turns: Vec<Turn> = history.iter().map(Turn::from).collect();
        let grounder = Grounder::from_turns(&turns, &["Wren"]);
        // The values of a committed user fact that no villager's turn holds.
        let mut users = Evidence::new();
        for m in history.iter().filter(|m| m.role == Role::User) {
            users.add_text(&m.content);
            users.add_name(m.name.as_deref().unwrap_or(""));
            users.add_time(&m.created_at.minute_label());
        }
        users.add_name("Wren");
        let only_agents = |item: &str| -> Vec<String> {
            claims(&cite::strip(item))
                .into_iter()
                .filter(|c| !matches!(c, Claim::Lead(_)) && !users.supports(c))
                .map(|c| c.to_string())
                .collect()
        };
        let user_facts = |summary: &str| -> Vec<String> {
            let mut inside = false;
            let mut out = Vec::new();
            for line in summary.lines() {
                let line = line.trim();
                if line.starts_with('#') {
                    inside = line.to_lowercase().contains("user facts");
                } else if inside && let Some(item) = line.strip_prefix("- ") {
                    out.push(item.to_string());
                }
            }
            out
        };
        // Before: every item checked against what it cites, the agent's turns included.
        let before: Vec<String> = user_facts(&text)
            .iter()
            .map(|i| grounder.check(i))
            .filter(|c| c.verdict != grounding::Verdict::Dropped)
            .map(|c| c.cited())
            .collect();
        let now = user_facts(&grounding::ground_summary(&text, &grounder).text);
        let bad_before: Vec<&String> = before
            .iter()
            .filter(|i| !only_agents(i).is_empty())
            .collect();
        let bad_now: Vec<&String> = now
            .iter()
            .filter(|i| !only_agents(i).is_empty() && !i.contains("assistant:"))
            .collect();
        before_total += bad_before.len();
        now_total += bad_now.len();
        println!(
            "| {run} | {} / {} | {} / {} | {} |",
            before.len(),
            now.len(),
            bad_before.len(),
            bad_now.len(),
            bad_before
                .iter()
                .take(2)
                .map(|s| s.replace('|', "/"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    println!(
        "user facts resting only on the agent's words: before {before_total}, now {now_total}"
    );
    assert_eq!(now_total, 0);
}
