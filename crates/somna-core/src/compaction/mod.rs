//! Compaction planning and masking: the pure half of the compaction engine.
//!
//! - [`plan`](mod@plan): `plan(request, config, counter) -> PlanOutcome`: thresholds per trigger, head / body /
//!   tail, the preserve window, tool-call groups kept whole, the summarizer's chunks.
//! - [`mask`]: observation masking: old tool outputs replaced by a placeholder that keeps the tool name
//!   and the original size.
//! - [`prompt`]: the default summarization instructions and the summary message text.
//!
//! The engine that calls the LLM and commits through the store lives in `somna-runtime`.

pub mod mask;
pub mod plan;
pub mod prompt;

pub use mask::{MaskPolicy, mask_placeholder, plan_masking};
pub use plan::{Plan, PlanOutcome, PlanRequest, Skip, SkipReason, plan};
