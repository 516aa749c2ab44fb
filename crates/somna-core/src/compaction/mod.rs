//! Compaction planning and masking: the pure half of the compaction engine.
//!
//! - [`plan`](mod@plan): `plan(request, config, counter) -> PlanOutcome`: thresholds per trigger, head / body /
//!   tail, the preserve window, tool-call groups kept whole, the summarizer's chunks.
//! - [`mask`]: observation masking: old tool outputs replaced by a placeholder that keeps the tool name
//!   and the original size.
//! - [`prompt`]: the summary message text (the summarizer's prompts are in `somna_llm::prompts`).
//!
//! The engine that calls the LLM and commits through the store lives in `somna-runtime`.

pub mod mask;
pub mod plan;
pub mod prompt;

pub use mask::{MaskPolicy, mask_placeholder, plan_masking};
pub use plan::{Plan, PlanOutcome, PlanRequest, Skip, SkipReason, next_generation, plan};
