//! `somna check-config`: a valid config's summary, or every error.

use std::path::Path;

use somna_core::config::{ConfigErrors, ResolvedConfig};

use super::Out;

impl Out {
    pub fn config_ok(&self, path: &Path, cfg: &ResolvedConfig) {
        if self.json {
            self.print_json(cfg);
            return;
        }
        println!(
            "{}: ok — provider {}, model {}, store {}, {} agent(s)",
            path.display(),
            serde_json::to_value(cfg.llm.provider)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            cfg.llm.model,
            match cfg.store.backend {
                somna_core::config::StoreBackend::Sled => cfg.store.path.display().to_string(),
                somna_core::config::StoreBackend::Postgres =>
                    format!("{} (schema {})", cfg.store.url, cfg.store.schema),
            },
            cfg.agents.len()
        );
        for a in &cfg.agents {
            let c = &a.compaction;
            println!(
                "  {:<12} model {:<10} tick {:<5} sleep every {:<4} window {:>6} tok, sleep at {:.0}%, emergency at {:.0}%{}",
                a.id.as_str(),
                a.model,
                humantime::format_duration(a.tick_every).to_string(),
                humantime::format_duration(a.sleep_every).to_string(),
                c.max_context_tokens,
                c.sleep_threshold * 100.0,
                c.emergency_threshold * 100.0,
                if c.enabled { "" } else { " (compaction off)" }
            );
        }
    }

    pub fn config_errors(&self, path: &Path, errors: &ConfigErrors) {
        if self.json {
            let list: Vec<String> = errors.to_string().lines().map(str::to_string).collect();
            self.print_json(
                &serde_json::json!({ "file": path.display().to_string(), "errors": list }),
            );
            return;
        }
        eprintln!("{}: invalid configuration", path.display());
        for line in errors.to_string().lines() {
            eprintln!("  {line}");
        }
    }
}
