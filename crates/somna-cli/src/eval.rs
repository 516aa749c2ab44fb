//! `somna eval recall`: loads the dataset, runs `somna_runtime::eval::recall` with the config's
//! LLM (the offline builtin provider in the default runtime.toml), and prints the table.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use somna_core::config::ResolvedConfig;
use somna_runtime::eval::{self, Dataset, Progress, RecallOptions};

use crate::Invalid;
use crate::output::Out;

/// Runs the recall evaluation of the dataset at `dir` and prints the report.
pub fn recall(
    dir: &Path,
    config: &ResolvedConfig,
    options: &RecallOptions,
    embed_cache: Option<&Path>,
    quiet: bool,
    out: Out,
) -> Result<()> {
    // A dataset that is missing or malformed is invalid input (exit 2).
    let dataset =
        Dataset::load(dir).map_err(|e| Invalid(format!("{:#}", anyhow::Error::new(e))))?;
    let llm =
        somna_llm::build_client_from_env(&config.llm).context("cannot build the LLM client")?;
    let semantic = match embed_cache {
        None => crate::semantic_from(config)?,
        Some(dir) => {
            let embedder = somna_llm::build_embedder_from_env(&config.embedder)
                .map_err(anyhow::Error::new)
                .context("cannot build the embedder ([embedder])")?;
            match embedder {
                Some(inner) => {
                    let cached = crate::embed_cache::CachedEmbedder::open(inner, dir)?;
                    Some(somna_runtime::Semantic::new(
                        Arc::new(cached),
                        &config.embedder,
                    ))
                }
                None => None,
            }
        }
    };
    let bar = if quiet || out.is_json() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(0);
        b.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} · {elapsed_precise}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt
        .block_on(eval::recall_with_progress(
            &dataset,
            config,
            llm,
            semantic,
            options,
            |p| match p {
                Progress::Importing {
                    conversation,
                    index,
                    total,
                } => {
                    bar.set_message(format!("importing {conversation} ({}/{total})", index + 1));
                    bar.set_length(0);
                    bar.set_position(0);
                }
                Progress::Asking {
                    conversation,
                    done,
                    total,
                } => {
                    bar.set_message(format!("asking {conversation}"));
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                }
            },
        ))
        .with_context(|| format!("recall evaluation of {}", dir.display()))?;
    bar.finish_and_clear();
    out.recall(dir, &report);
    Ok(())
}
