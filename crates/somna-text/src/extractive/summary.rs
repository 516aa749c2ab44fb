//! The extractive summary's result: [`StructuredSummary`], its five [`Section`]s, and its text
//! form (`## Heading` then `- item` bullets, or [`NONE`]), rendered and parsed back.

use somna_core::config::SectionCaps;

/// A summary in the five default sections. Items are plain text (rendered as `- item` bullets).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StructuredSummary {
    /// How the conversation went, in order.
    pub topic_arc: Vec<String>,
    /// What was decided or agreed.
    pub decisions: Vec<String>,
    /// Open tasks, commitments and unanswered questions.
    pub pending: Vec<String>,
    /// What users said about themselves.
    pub user_facts: Vec<String>,
    /// Files, URLs, codes and names of things referenced.
    pub artifacts: Vec<String>,
}

/// One section of a [`StructuredSummary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `## Topic arc`.
    TopicArc,
    /// `## Decisions`.
    Decisions,
    /// `## Pending`.
    Pending,
    /// `## User facts`.
    UserFacts,
    /// `## Artifacts`.
    Artifacts,
}

impl Section {
    /// Every section, in rendering order.
    pub const ALL: [Section; 5] = [
        Section::TopicArc,
        Section::Decisions,
        Section::Pending,
        Section::UserFacts,
        Section::Artifacts,
    ];

    /// The heading text (without `## `).
    pub fn title(self) -> &'static str {
        match self {
            Section::TopicArc => "Topic arc",
            Section::Decisions => "Decisions",
            Section::Pending => "Pending",
            Section::UserFacts => "User facts",
            Section::Artifacts => "Artifacts",
        }
    }

    /// This section's cap in `caps`.
    pub fn cap(self, caps: &SectionCaps) -> u32 {
        match self {
            Section::TopicArc => caps.topic_arc,
            Section::Decisions => caps.decisions,
            Section::Pending => caps.pending,
            Section::UserFacts => caps.user_facts,
            Section::Artifacts => caps.artifacts,
        }
    }

    fn from_title(title: &str) -> Option<Section> {
        let title = title.trim().trim_end_matches(':').to_lowercase();
        Section::ALL.into_iter().find(|s| {
            title == s.title().to_lowercase()
                || title.starts_with(&format!("{} (", s.title().to_lowercase()))
        })
    }
}

/// The text an empty section shows.
pub const NONE: &str = "(none)";

impl StructuredSummary {
    /// The items of one section.
    pub fn items(&self, section: Section) -> &[String] {
        match section {
            Section::TopicArc => &self.topic_arc,
            Section::Decisions => &self.decisions,
            Section::Pending => &self.pending,
            Section::UserFacts => &self.user_facts,
            Section::Artifacts => &self.artifacts,
        }
    }

    /// The items of `section`, to add to (somna-llm's reader of a structured answer fills them).
    pub fn items_mut(&mut self, section: Section) -> &mut Vec<String> {
        match section {
            Section::TopicArc => &mut self.topic_arc,
            Section::Decisions => &mut self.decisions,
            Section::Pending => &mut self.pending,
            Section::UserFacts => &mut self.user_facts,
            Section::Artifacts => &mut self.artifacts,
        }
    }

    /// One section's body as rendered: `- item` lines, or `(none)`.
    pub fn section_body(&self, section: Section) -> String {
        render_items(self.items(section))
    }

    /// True when every section is empty.
    pub fn is_empty(&self) -> bool {
        Section::ALL.iter().all(|s| self.items(*s).is_empty())
    }

    /// Markdown: `## Topic arc`, `## Decisions`, `## Pending`, `## User facts`, `## Artifacts`, each followed by
    /// its bullets or `(none)`, sections separated by a blank line.
    pub fn render(&self) -> String {
        Section::ALL
            .iter()
            .map(|s| format!("## {}\n{}", s.title(), self.section_body(*s)))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Reads a rendered summary back (also with a leading `[CONTEXT SUMMARY]`, other text before the first
    /// heading, `*` bullets, or headings with a suffix like `## Decisions (at most 300 tokens)`). Unknown
    /// headings are skipped; `(none)` is no item.
    pub fn parse(text: &str) -> StructuredSummary {
        let mut summary = StructuredSummary::default();
        let mut current: Option<Section> = None;
        let mut known_heading = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(title) = trimmed.strip_prefix('#') {
                let title = title.trim_start_matches('#').trim();
                current = Section::from_title(title);
                known_heading = current.is_some();
                continue;
            }
            let Some(section) = current.filter(|_| known_heading) else {
                continue;
            };
            let item = trimmed
                .strip_prefix("- ")
                .or_else(|| trimmed.strip_prefix("* "))
                .unwrap_or(trimmed)
                .trim();
            if item.is_empty() || item == NONE {
                continue;
            }
            summary.items_mut(section).push(item.to_string());
        }
        summary
    }
}

/// The day an item starts with, `2026-11-24` of `[2026-11-24] Mara: …`.
pub(super) fn day_of(item: &str) -> Option<&str> {
    let rest = item.strip_prefix('[')?;
    let day = rest.get(..10)?;
    let is_day = day.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    (is_day && rest[10..].starts_with("] ")).then_some(day)
}

/// Items as a section shows them: an item's day is written only when it differs from the day of
/// the item before (the items are chronological), which keeps dates at a few tokens a day.
pub(super) fn shown_days(items: &[String]) -> Vec<String> {
    let mut last: Option<&str> = None;
    items
        .iter()
        .map(|item| match day_of(item) {
            Some(day) if last == Some(day) => item[day.len() + 3..].to_string(),
            Some(day) => {
                last = Some(day);
                item.clone()
            }
            None => item.clone(),
        })
        .collect()
}

/// Items of an earlier summary with their days back: an item without a day was said on the day of
/// the dated item before it (see [`shown_days`]); the `Also mentioned:` line stays as it is.
pub(super) fn restore_days(items: &[String]) -> Vec<String> {
    let mut last: Option<&str> = None;
    items
        .iter()
        .map(|item| match (day_of(item), last) {
            (Some(day), _) => {
                last = Some(day);
                item.clone()
            }
            (None, Some(day)) if !item.starts_with(super::cues::ALSO_MENTIONED) => {
                format!("[{day}] {item}")
            }
            (None, _) => item.clone(),
        })
        .collect()
}

pub(super) fn render_items(items: &[String]) -> String {
    if items.is_empty() {
        NONE.to_string()
    } else {
        items
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
