//! Where each key of a parsed file sits, so errors found after deserializing can name a line.

use std::collections::{BTreeMap, BTreeSet};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::ConfigError;
use super::validate::Finding;

/// Key paths (in index form, `agents[1].compaction.sleep_threshold`) mapped to 1-based lines, and
/// the paths whose value an override replaced (those have no line in the file).
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceMap {
    lines: BTreeMap<String, usize>,
    overridden: BTreeSet<String>,
}

/// Source positions are metadata: two configs with the same values are equal wherever their keys
/// sit in their files.
impl PartialEq for SourceMap {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl SourceMap {
    /// Indexes every key and array element of a parsed document.
    pub(crate) fn from_document(text: &str, document: &Spanned<DeTable<'_>>) -> Self {
        let mut map = SourceMap::default();
        map.index_table(&Lines::new(text), "", document.get_ref());
        map
    }

    fn index_table(&mut self, lines: &Lines, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = join_key(prefix, key.get_ref());
            self.lines
                .insert(path.clone(), lines.line(key.span().start));
            self.index_value(lines, &path, value);
        }
    }

    fn index_value(&mut self, lines: &Lines, path: &str, value: &Spanned<DeValue<'_>>) {
        match value.get_ref() {
            DeValue::Table(table) => self.index_table(lines, path, table),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    self.lines
                        .insert(item_path.clone(), lines.line(item.span().start));
                    self.index_value(lines, &item_path, item);
                }
            }
            _ => {}
        }
    }

    /// Records that an override replaced the value at `path`.
    pub(crate) fn mark_overridden(&mut self, path: String) {
        self.overridden.insert(path);
    }

    /// Whether the value at `path` came from an override: an override set it or one of its
    /// ancestors, or created it (an override set a key below it and the file does not have it).
    pub(crate) fn is_overridden(&self, path: &str) -> bool {
        self.overridden.contains(path)
            || ancestors(path).any(|a| self.overridden.contains(a))
            || (!self.lines.contains_key(path) && self.overridden.iter().any(|o| is_below(o, path)))
    }

    /// The line of `path`, or of its nearest ancestor in the file when the key itself is not
    /// written there; `None` when the value came from an override.
    pub(crate) fn line(&self, path: &str) -> Option<usize> {
        if self.is_overridden(path) {
            return None;
        }
        self.lines
            .get(path)
            .or_else(|| ancestors(path).find_map(|a| self.lines.get(a)))
            .copied()
    }
}

/// Collects errors for one file, placing each at its key's line.
#[derive(Debug)]
pub(crate) struct ErrorSink<'a> {
    file: &'a str,
    source: &'a SourceMap,
    errors: Vec<ConfigError>,
}

impl<'a> ErrorSink<'a> {
    /// A sink for errors in `file`, whose keys `source` locates.
    pub(crate) fn new(file: &'a str, source: &'a SourceMap) -> Self {
        ErrorSink {
            file,
            source,
            errors: Vec::new(),
        }
    }

    /// Records an error at the key `lookup` (index form, to find its line), shown as `display`
    /// (agents named by id).
    pub(crate) fn error(&mut self, lookup: &str, display: &str, mut message: String) {
        if self.source.is_overridden(lookup) {
            message.push_str(" (the value comes from an override)");
        }
        self.errors
            .push(ConfigError::new(self.file, display, message).at_line(self.source.line(lookup)));
    }

    /// Records findings whose keys are relative to the table at `lookup_prefix` / `display_prefix`.
    pub(crate) fn findings(
        &mut self,
        lookup_prefix: &str,
        display_prefix: &str,
        found: Vec<Finding>,
    ) {
        for finding in found {
            self.error(
                &concat_path(lookup_prefix, &finding.field),
                &concat_path(display_prefix, &finding.field),
                finding.message,
            );
        }
    }

    /// The errors recorded, in order.
    pub(crate) fn into_errors(self) -> Vec<ConfigError> {
        self.errors
    }
}

/// `prefix` followed by the relative path `relative` (`tools[0].name`, `[1]`, or empty).
pub(crate) fn concat_path(prefix: &str, relative: &str) -> String {
    if relative.is_empty() {
        prefix.to_string()
    } else if prefix.is_empty() || relative.starts_with('[') {
        format!("{prefix}{relative}")
    } else {
        format!("{prefix}.{relative}")
    }
}

/// Whether `path` lies strictly below `ancestor`.
fn is_below(path: &str, ancestor: &str) -> bool {
    path.strip_prefix(ancestor)
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// `prefix.key`, or `key` at the top.
pub(crate) fn join_key(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The proper ancestors of a key path, nearest first: `a[1].b.c` gives `a[1].b`, `a[1]`, `a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.char_indices()
        .rev()
        .filter(|&(i, c)| (c == '.' || c == '[') && i > 0)
        .map(move |(i, _)| &path[..i])
}

/// Where a text's lines start, to find the line of many offsets in O(log lines) each. (Counting
/// the newlines before each key made a config of 60,000 agents take minutes to load.)
struct Lines {
    /// Byte offsets of every `\n`.
    newlines: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Self {
        Lines {
            newlines: text.match_indices('\n').map(|(i, _)| i).collect(),
        }
    }

    /// The 1-based line of byte `offset` (as [`line_col`] counts it).
    fn line(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&nl| nl < offset) + 1
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_walk_up_keys_and_indices() {
        let found: Vec<&str> = ancestors("agents[1].compaction.sections.decisions").collect();
        assert_eq!(
            found,
            [
                "agents[1].compaction.sections",
                "agents[1].compaction",
                "agents[1]",
                "agents"
            ]
        );
        assert_eq!(ancestors("llm").count(), 0);
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        // "bé = " is 6 bytes but 5 characters.
        assert_eq!(line_col(text, 12), (2, 6));
        assert_eq!(line_col(text, 10_000), (3, 1));
        let lines = Lines::new(text);
        for offset in 0..=text.len() {
            assert_eq!(lines.line(offset), line_col(text, offset).0, "at {offset}");
        }
    }

    #[test]
    fn lines_of_keys_elements_and_missing_keys() {
        let text = "[llm]\nmodel = \"m\"\n\n[[agents]]\nid = \"a\"\n[agents.compaction]\nenabled = false\n";
        let document = DeTable::parse(text).unwrap();
        let mut map = SourceMap::from_document(text, &document);
        assert_eq!(map.line("llm.model"), Some(2));
        assert_eq!(map.line("agents[0]"), Some(4));
        assert_eq!(map.line("agents[0].id"), Some(5));
        assert_eq!(map.line("agents[0].compaction.enabled"), Some(7));
        // A key not written in the file points at its table.
        assert_eq!(map.line("agents[0].compaction.sleep_threshold"), Some(6));
        map.mark_overridden("agents[0].compaction".to_string());
        assert_eq!(map.line("agents[0].compaction.enabled"), None);
        assert_eq!(map.line("agents[0].id"), Some(5));
        // A table an override created below an existing one has no line either.
        map.mark_overridden("llm.extra.key".to_string());
        assert_eq!(map.line("llm.extra"), None);
        assert!(map.is_overridden("llm.extra"));
        assert!(!map.is_overridden("llm"));
        assert_eq!(map.line("llm"), Some(1));
    }

    #[test]
    fn concat_paths() {
        assert_eq!(
            concat_path("agents[smith]", "tools[0].name"),
            "agents[smith].tools[0].name"
        );
        assert_eq!(concat_path("agents", "[1]"), "agents[1]");
        assert_eq!(concat_path("", "llm"), "llm");
        assert_eq!(concat_path("llm", ""), "llm");
    }
}
