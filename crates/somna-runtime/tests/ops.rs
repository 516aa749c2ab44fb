//! `somna_runtime::ops`: the agent operations the runtime and the offline path share, tested
//! without an actix System.

use somna_core::Timestamp;
use somna_core::config::{AgentOverrides, ResolvedConfig};
use somna_llm::LlmClient;
use somna_runtime::{Clock, Offline, OpsError, Runtime, RuntimeError, RuntimeOptions};
use somna_store::Store;

use crate::support::*;

fn config() -> ResolvedConfig {
    ResolvedConfig::load(
        "[[agents]]\nid = \"smith\"\npersona = \"You are Brannoc.\"\n",
        "test.toml",
        &[],
    )
    .unwrap()
}

fn builtin() -> std::sync::Arc<dyn LlmClient> {
    somna_llm::build_client_from_env(&config().llm).unwrap()
}

#[test]
fn offline_create_retire_and_load_follow_one_policy() {
    let offline = Offline::new(config(), Store::temporary().unwrap(), Clock::real());
    let smith = id("smith");
    assert!(matches!(
        offline.agent_config(&smith),
        Err(OpsError::UnknownAgent(_))
    ));
    // The file's entry with the overrides on top.
    let created = offline
        .create(&smith, overrides(&["compaction.sleep_threshold=0.6"]))
        .unwrap();
    assert_eq!(created.persona, "You are Brannoc.");
    assert_eq!(created.compaction.sleep_threshold, 0.6);
    assert_eq!(offline.agent_config(&smith).unwrap(), created);
    assert!(matches!(
        offline.create(&smith, AgentOverrides::default()),
        Err(OpsError::Exists(_))
    ));
    // The plain Agent runs with the persisted overrides, like the runtime's actor.
    let agent = offline.agent(&smith, builtin()).unwrap();
    assert_eq!(agent.config(), &created);
    // An invalid change writes nothing.
    let clerk = id("clerk");
    assert!(matches!(
        offline.create(&clerk, overrides(&["compaction.sleep_threshold=2"])),
        Err(OpsError::Invalid(..))
    ));
    assert!(offline.store().agent(&clerk).unwrap().is_none());
    offline.retire(&smith).unwrap();
    assert!(matches!(offline.retire(&smith), Err(OpsError::Retired(_))));
    assert!(matches!(
        offline.create(&smith, AgentOverrides::default()),
        Err(OpsError::Retired(_))
    ));
    // Data stays readable: the config still resolves.
    assert_eq!(offline.agent_config(&smith).unwrap(), created);
}

/// The runtime refuses the ids the offline path refuses, with the config it would resolve.
#[actix::test]
async fn the_runtime_and_the_offline_path_create_alike() {
    let store = Store::temporary().unwrap();
    let offline = Offline::new(config(), store.clone(), Clock::real());
    let retired = id("old");
    offline.create(&retired, AgentOverrides::default()).unwrap();
    offline.retire(&retired).unwrap();
    let runtime = Runtime::start(
        config(),
        store.clone(),
        builtin(),
        RuntimeOptions {
            arbiters: 1,
            schedule_sleeps: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(matches!(
        runtime.create_agent(retired.clone(), AgentOverrides::default()),
        Err(RuntimeError::AgentExists(_))
    ));
    let change = overrides(&["model=gpt-4o-mini"]);
    let clerk = id("clerk");
    let expected = somna_runtime::ops::check_create(&config(), &store, &clerk, &change).unwrap();
    assert_eq!(
        runtime.create_agent(clerk.clone(), change).unwrap(),
        expected
    );
    assert_eq!(offline.agent_config(&clerk).unwrap(), expected);
    assert!(store.agent(&clerk).unwrap().unwrap().created_at > Timestamp(0));
    runtime
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .unwrap();
}
