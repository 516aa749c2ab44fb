//! Sleep, run as a [`Job`](super::Job): consolidation of journal entries into facts, reflection,
//! then compaction at the sleep threshold.

use somna_core::record::Trigger;
use somna_core::{EventRecord, Fact, JournalEntry, JournalQuery, SourceType};
use somna_llm::grounding::{self, Grounder};
use somna_llm::prompts::{self, Consolidation};

use super::job::{JobContext, JobError, JobOutcome, SleepFailure};
use crate::protocol::{CompactionOutcome, Event};

/// Most journal entries one consolidation handles (the rest wait for the next sleep).
const CONSOLIDATION_BATCH: usize = 50;
/// Importance of reflection entries.
const REFLECTION_IMPORTANCE: u8 = 8;

impl JobContext {
    /// Sleep: consolidation, reflection, then compaction at the sleep threshold. A failed step
    /// does not stop the next one; every failure is reported in the job's error (the sleep's
    /// result), joined with "; ", and what failed is left for the next sleep to retry.
    pub(super) async fn sleep(&self, tired: bool, out: &mut JobOutcome) -> Result<(), JobError> {
        self.emit(Event::SleepStarted {
            agent: self.id.clone(),
            tired,
        });
        // The due time this sleep serves (the durable schedule's), recorded with its end.
        let due = self
            .deps
            .store
            .agent(&self.id)?
            .and_then(|r| r.next_sleep_at);
        let mut failures = Vec::new();
        let (entries, facts) = self.consolidate(tired, out).await.unwrap_or_else(|e| {
            failures.push(SleepFailure::Consolidation(e));
            (0, 0)
        });
        let reflections = self.reflect(out).await.unwrap_or_else(|e| {
            failures.push(SleepFailure::Reflection(e));
            0
        });
        // A tired sleep that left the journal for the scheduled one has nothing to report.
        if !(tired && entries == 0 && reflections == 0) {
            self.emit(Event::ConsolidationCompleted {
                agent: self.id.clone(),
                entries,
                facts,
                reflections,
                grounding: out.grounding,
            });
        }
        if let Err(e) = self.compact(Trigger::Sleep, out).await {
            failures.push(SleepFailure::Compaction(e));
        }
        if let Some(CompactionOutcome::Failed { reason, .. }) = &out.compaction {
            failures.push(SleepFailure::Compaction(JobError::CompactionFailed(
                reason.clone(),
            )));
        }
        // What was archived since the last sleep gets its vectors now, off the turns' path.
        if let Some(semantic) = &self.deps.semantic {
            match crate::semantic::embed_archive(
                &self.deps.store,
                &self.id,
                semantic.embedder.as_ref(),
                semantic.max_per_sleep,
            )
            .await
            {
                Ok(report) => out.embedded = report.embedded,
                Err(e) => failures.push(SleepFailure::Embedding(e.to_string())),
            }
        }
        // The next sleep's due time outlives this process (and, in a cluster, this node): it is
        // advanced in the transaction that logs this sleep. The steps above commit on their own
        // before it; a crash in between runs the sleep again (consolidation and a compaction at
        // the threshold are safe to repeat), never skips it, and only one run is logged.
        let now = self.now();
        // A tired sleep (brought forward) leaves the schedule as it was and serves no due time:
        // each due time is still served by exactly one logged sleep.
        let (served, next) = match due {
            Some(due) if tired && due > now => (None, due),
            _ => (due, now.saturating_add(self.config.sleep_every)),
        };
        let record = EventRecord::Sleep {
            at: now,
            due: served,
            next,
            entries: u32::try_from(entries).unwrap_or(u32::MAX),
            facts: u32::try_from(facts).unwrap_or(u32::MAX),
            reflections: u32::try_from(reflections).unwrap_or(u32::MAX),
            grounding: (out.grounding.total() > 0).then_some(out.grounding),
            failures: failures.iter().map(ToString::to_string).collect(),
        };
        match self.deps.store.finish_sleep(&self.id, record, next) {
            Ok(_) => out.next_sleep_at = Some(next),
            Err(e) => {
                tracing::warn!(agent = %self.id, error = %e, "cannot record the sleep and its next time");
            }
        }
        self.emit(Event::SleepCompleted {
            agent: self.id.clone(),
        });
        if failures.is_empty() {
            Ok(())
        } else {
            Err(JobError::Sleep(failures))
        }
    }

    /// Distills unconsolidated journal entries into memory facts with provenance. Entries are
    /// marked consolidated only when the reply lists facts or says [`NO_FACTS`](super::NO_FACTS)
    /// outright; an LLM error or a reply with neither leaves them for the next sleep and is an
    /// error. Every fact is checked against the entries it cites before it is committed
    /// ([`grounding`]); when none holds up, the builtin consolidation (which quotes the entries)
    /// takes their place.
    async fn consolidate(
        &self,
        tired: bool,
        out: &mut JobOutcome,
    ) -> Result<(usize, usize), JobError> {
        let store = &self.deps.store;
        let mut entries = store.unconsolidated(&self.id, self.config.memory.min_importance)?;
        entries.truncate(CONSOLIDATION_BATCH);
        // A tired sleep consolidates only a full batch: one LLM call per 50 entries, not one
        // per early sleep.
        if entries.is_empty() || (tired && entries.len() < CONSOLIDATION_BATCH) {
            return Ok((0, 0));
        }
        let request = prompts::consolidate_request(&self.config.model, &entries);
        let all_ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
        let reply = self
            .deps
            .llm
            .chat(request)
            .await
            .map_err(JobError::ConsolidationLlm)?;
        let now = self.now();
        let cited: Vec<String> = match prompts::parse_consolidation(&reply.text) {
            Consolidation::Facts(facts) => facts.iter().map(|f| f.cited()).collect(),
            Consolidation::Nothing => Vec::new(),
            Consolidation::Unreadable => {
                return Err(JobError::UnreadableConsolidation {
                    entries: entries.len(),
                    reply: prompts::clip(reply.text.trim(), 120),
                });
            }
        };
        let grounder = self.entry_grounder(&entries);
        let (mut checked, counts, examples) =
            grounding::ground_lines(cited.iter().map(String::as_str), &grounder);
        out.grounding.add(counts);
        if counts.kept < counts.total() {
            tracing::info!(agent = %self.id, %counts, examples = %examples.join("; "), "consolidated facts failed the grounding check");
        }
        if counts.total() > 0 && counts.committed() == 0 {
            let listed: Vec<(Option<u64>, String)> = entries
                .iter()
                .map(|e| (Some(e.id), e.content.clone()))
                .collect();
            let quotes = somna_text::consolidate(&listed);
            let (fallback, counts, _) =
                grounding::ground_lines(quotes.iter().map(String::as_str), &grounder);
            tracing::warn!(agent = %self.id, "no consolidated fact held up against its entries; the builtin consolidation quotes them instead");
            out.grounding.add(counts);
            checked = fallback;
        }
        let facts: Vec<Fact> = checked
            .into_iter()
            .map(|c| Fact {
                source_seqs: c.turns,
                ..Fact::new(now, c.text, c.cites)
            })
            .collect();
        let n = facts.len();
        store.consolidate(&self.id, facts, &all_ids)?;
        Ok((entries.len(), n))
    }

    /// What a fact or a reflection over `entries` may cite: the entries, and the persona's names
    /// (its other words are the model's to use, not to cite).
    fn entry_grounder(&self, entries: &[JournalEntry]) -> Grounder {
        let names = grounding::names_in(&self.config.persona);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Grounder::from_entries(entries, &names).knowing(&self.config.persona)
    }

    /// Writes a reflection when enough importance has accumulated since the last one: at most
    /// [`MAX_REFLECTION_LINES`](super::MAX_REFLECTION_LINES) entries of at most
    /// [`MAX_REFLECTION_CHARS`](super::MAX_REFLECTION_CHARS) characters each.
    async fn reflect(&self, out: &mut JobOutcome) -> Result<usize, JobError> {
        let accumulated = self.importance_since_reflection + out.importance_added;
        if accumulated < u64::from(self.config.memory.reflection_threshold) {
            return Ok(0);
        }
        let store = &self.deps.store;
        let recent = store.query_journal(
            &self.id,
            &JournalQuery {
                limit: Some(30),
                ..Default::default()
            },
        )?;
        let oldest_first: Vec<JournalEntry> = recent.into_iter().rev().collect();
        let request =
            prompts::reflect_request(&self.config.model, &self.config.persona, &oldest_first);
        let text = self.deps.llm.chat(request).await?.text;
        let lines = prompts::parse_reflection(&text);
        // Checked against the entries they cite, like facts.
        let grounder = self.entry_grounder(&oldest_first);
        let (checked, counts, examples) =
            grounding::ground_lines(lines.iter().map(String::as_str), &grounder);
        out.grounding.add(counts);
        if counts.kept < counts.total() {
            tracing::info!(agent = %self.id, %counts, examples = %examples.join("; "), "reflections failed the grounding check");
        }
        for c in &checked {
            store.append_journal(
                &self.id,
                JournalEntry::new(
                    self.now(),
                    SourceType::Reflection,
                    REFLECTION_IMPORTANCE,
                    c.text.as_str(),
                )
                .with_tags(["reflection"])
                .citing_entries(c.cites.clone()),
            )?;
        }
        // A reflection was attempted: whether or not a line held up, the importance that asked
        // for it is spent.
        out.reflected = !lines.is_empty();
        Ok(checked.len())
    }
}
