//! A demo API server for trying the HTTP API (and examples/python_host.py) without a model.
//!
//! ```text
//! cargo run -p somna-server --example serve                      # 127.0.0.1:7878, no token
//! SOMNA_API_TOKEN=s3cret cargo run -p somna-server --example serve -- --bind 127.0.0.1:8080
//! cargo run -p somna-server --example serve -- --config runtime.toml --data /tmp/somna-demo
//! ```
//!
//! It starts the runtime with the offline builtin LLM over a temporary database (or `--data DIR`)
//! and the config of `--config FILE` (by default a small built-in one with a gatekeeper NPC,
//! `keeper`, whose host tool `open_door` the host must answer). Because the builtin brain never calls
//! host tools, the demo wraps it: a user message that mentions a door makes the model call
//! `open_door`; the tool result then gets a reply. A real model decides that by itself.
//! Stop it with Ctrl-C.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use somna_core::config::ResolvedConfig;
use somna_core::{Role, ToolCall};
use somna_llm::{BuiltinClient, ChatRequest, ChatResponse, LlmClient, Purpose};
use somna_runtime::{Runtime, RuntimeOptions};
use somna_server::{MeteredLlm, ServerOptions};
use somna_store::{Store, StoreOptions};

/// The demo's runtime.toml, before its one agent ([`somna_testkit::KEEPER`]).
const DEMO_DEFAULTS: &str = r#"
[defaults]
tick_every = "100ms"
sleep_every = "1h"
sleep_jitter = "1m"
tool_timeout = "60s"
"#;

/// The builtin provider, plus: calls `open_door` when a user message mentions a door and the tool is
/// offered, and answers a tool result in words.
#[derive(Debug)]
struct DoorKeeper {
    builtin: BuiltinClient,
}

impl DoorKeeper {
    fn scripted(&self, request: &ChatRequest) -> Option<ChatResponse> {
        if request.purpose != Purpose::Chat || !request.offers_tool("open_door") {
            return None;
        }
        let last = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role != Role::System)?;
        let (text, tool_calls) = match last.role {
            Role::Tool => (
                format!(
                    "Done: the door is open (the keep reports {}).",
                    last.content
                ),
                Vec::new(),
            ),
            Role::User if last.content.to_lowercase().contains("door") => {
                let door = ["north", "south", "east", "west"]
                    .into_iter()
                    .find(|d| last.content.to_lowercase().contains(d))
                    .unwrap_or("main");
                let id = format!("call_door_{}", request.messages.len());
                let arguments = serde_json::json!({ "door": door }).to_string();
                (
                    String::new(),
                    vec![ToolCall {
                        id,
                        name: "open_door".into(),
                        arguments,
                    }],
                )
            }
            _ => return None,
        };
        Some(ChatResponse {
            text,
            tool_calls,
            usage: None,
            latency: Duration::ZERO,
            attempts: 1,
            model: request.model.clone(),
            structured_fallbacks: 0,
        })
    }
}

impl LlmClient for DoorKeeper {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, somna_llm::Result<ChatResponse>> {
        match self.scripted(&request) {
            Some(response) => Box::pin(async move { Ok(response) }),
            None => self.builtin.chat(request),
        }
    }

    fn provider(&self) -> &str {
        "builtin"
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sled=warn".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = ServerOptions::from_env()?;
    if let Some(bind) = flag(&args, "--bind") {
        options.bind = bind.parse()?;
    }
    let (text, file) = match flag(&args, "--config") {
        Some(path) => (std::fs::read_to_string(&path)?, path),
        None => (
            format!("{DEMO_DEFAULTS}{}", somna_testkit::KEEPER),
            "demo.toml".to_string(),
        ),
    };
    let config = ResolvedConfig::load(&text, &file, &[]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let store = match flag(&args, "--data") {
        Some(dir) => Store::open(dir, StoreOptions::default())?,
        None => Store::temporary()?,
    };
    actix::System::new().block_on(async move {
        let llm: Arc<dyn LlmClient> = Arc::new(DoorKeeper {
            builtin: BuiltinClient::new(),
        });
        let llm = MeteredLlm::wrap(llm, &options.metrics);
        let runtime = Runtime::start(
            config,
            store,
            llm,
            RuntimeOptions {
                schedule_sleeps: false,
                ..Default::default()
            },
        )?;
        let server = somna_server::Server::bind(runtime.clone(), options)?;
        println!("somna API on http://{}", server.local_addr());
        println!("agents: {:?}", runtime.agent_ids());
        server
            .run(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        runtime.shutdown(Duration::from_secs(5)).await?;
        Ok(())
    })
}
