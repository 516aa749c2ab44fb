//! Honest skips: a test that cannot run here (no real model, no python3, …) says so where people
//! look, instead of passing silently.
//!
//! [`skip`] writes `skipped: <test>: <why>` straight to standard error (not through `eprintln!`,
//! which the test harness captures and hides for a passing test), and, when the environment
//! variable [`SKIP_LOG_ENV`] names a file, appends the same line to it, so that a CI script can count
//! the skips and list them after the run (`.ci/run` does).

use std::io::Write;
use std::path::Path;

/// The environment variable naming a file that collects one line per skipped test.
pub const SKIP_LOG_ENV: &str = "SOMNA_SKIP_LOG";

/// Reports that the calling test did not run, and why. The caller returns right after.
pub fn skip(why: &str) {
    let line = skip_line(std::thread::current().name(), why);
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV)
        && let Err(e) = append_line(Path::new(&path), &line)
    {
        let _ = writeln!(
            std::io::stderr(),
            "cannot record the skip in {}: {e}",
            Path::new(&path).display()
        );
    }
}

/// `skipped: <test>: <why>` (the test harness names each test's thread after the test).
fn skip_line(test: Option<&str>, why: &str) -> String {
    match test {
        Some(name) if name != "main" => format!("skipped: {name}: {why}"),
        _ => format!("skipped: {why}"),
    }
}

/// Appends `line` to the file at `path` in one write (tests run in parallel threads and processes).
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_test_and_accumulate_in_the_log() {
        assert_eq!(
            skip_line(Some("real_llm::summary"), "set SOMNA_REAL_LLM=1"),
            "skipped: real_llm::summary: set SOMNA_REAL_LLM=1"
        );
        assert_eq!(skip_line(None, "no python3"), "skipped: no python3");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.log");
        append_line(&log, "skipped: a: why").unwrap();
        append_line(&log, "skipped: b: why").unwrap();
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "skipped: a: why\nskipped: b: why\n"
        );
    }
}
