//! Configuration errors: each names the file, the key, the line when known, and why.

use std::fmt;

/// One problem in a configuration.
///
/// Displayed as `runtime.toml:12: agents[blacksmith].compaction.emergency_threshold: must be above
/// sleep_threshold (0.7), got 0.6`; the parts that are unknown (no file, no line, no key) are left
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's name as the caller gave it; empty for changes that come from no file (the API).
    pub file: String,
    /// The full key path, e.g. `agents[blacksmith].compaction.sleep_threshold`; agents are named by
    /// id once their id is known to be valid and unique, else by index. Empty for TOML syntax errors.
    pub key: String,
    /// What is wrong, without a trailing period.
    pub message: String,
    /// The 1-based line of the key in the file, when it is in the file.
    pub line: Option<usize>,
    /// The 1-based column, given for TOML syntax errors.
    pub column: Option<usize>,
}

impl ConfigError {
    /// An error about `key`, without a position.
    pub fn new(
        file: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.into(),
            key: key.into(),
            message: message.into(),
            line: None,
            column: None,
        }
    }

    /// The same error at `line`.
    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut located = false;
        if !self.file.is_empty() {
            f.write_str(&self.file)?;
            located = true;
        }
        if let Some(line) = self.line {
            if located {
                f.write_str(":")?;
            }
            write!(f, "{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
            located = true;
        }
        if located {
            f.write_str(": ")?;
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a configuration, in file order (errors without a line come last).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// The configuration module's result type.
pub type Result<T, E = ConfigErrors> = std::result::Result<T, E>;

impl ConfigErrors {
    /// The errors, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// How many errors there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none (a `ConfigErrors` returned as an `Err` is never empty).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sorts by line, keeping the order of errors on the same line and putting those without a
    /// line last.
    pub(crate) fn sort(&mut self) {
        self.0.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
    }

    /// `Ok(value)` when there are no errors, else `Err(self)` sorted.
    pub(crate) fn into_result<T>(mut self, value: T) -> Result<T> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            self.sort();
            Err(self)
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        ConfigErrors(vec![error])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
