//! What the tests of the `somna` binary share: the command with a clean environment, a command's
//! output as text, and [`Served`], a `somna run --serve` child and the address it printed.

// Each test binary (cli, crash, server) and the cluster bench uses its own part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variables `somna` reads; a test's command starts without any of them.
const ENV: [&str; 6] = [
    "SOMNA_CONFIG",
    "SOMNA_DB",
    "SOMNA_SERVER",
    "SOMNA_API_BIND",
    "SOMNA_API_TOKEN",
    "SOMNA_LOG",
];

/// The `somna` command in `dir` with a clean environment.
pub fn command(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_somna"));
    c.current_dir(dir);
    for var in ENV {
        c.env_remove(var);
    }
    c
}

/// Runs `somna args…` in `dir` (clean environment) to the end.
pub fn somna(dir: &Path, args: &[&str]) -> Output {
    command(dir).args(args).output().unwrap()
}

/// The runtime.toml of the smith tests: the store in `db` and Brenna the village smith's persona,
/// with the test's own lines: `store` in `[store]`, `defaults` in `[defaults]` and `compaction` in
/// `[defaults.compaction]` (each line ending in a line break); more tables may follow `compaction`.
pub fn smith_config(store: &str, defaults: &str, compaction: &str) -> String {
    format!(
        "[store]\npath = \"db\"\n{store}[defaults]\npersona = \"You are Brenna, the village smith.\"\n\
         {defaults}[defaults.compaction]\n{compaction}"
    )
}

/// `somna journal` of smith's compaction entries of the last day: the filters the local and the
/// served journal are both checked with.
pub const RECENT_COMPACTIONS: [&str; 6] = [
    "journal",
    "smith",
    "--source",
    "compaction",
    "--since",
    "1d",
];

/// A command's stdout then stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The JSON on stdout of a command that succeeded (panics with its output when it failed).
#[track_caller]
pub fn success_json<T: serde::de::DeserializeOwned>(o: &Output) -> T {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The string at `pointer` (a JSON pointer, `/method`) of each item of the array `list`.
pub fn strs<'a>(list: &'a serde_json::Value, pointer: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|item| {
            item.pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_else(|| panic!("no string at {pointer} in {item}"))
        })
        .collect()
}

/// Asserts that the command's output (stdout and stderr) says `expected`.
#[track_caller]
pub fn assert_says(o: &Output, expected: &str) {
    let t = text(o);
    assert!(t.contains(expected), "expected {expected:?} in:\n{t}");
}

/// A `somna run --serve` child; killed if a test ends before stopping it.
pub struct Served {
    pub child: Child,
    /// The API's base URL, as the run printed it (`http://127.0.0.1:<port>`).
    pub url: String,
    /// Every line the run printed so far.
    stdout: Arc<Mutex<Vec<String>>>,
    /// The thread that reads the child's stdout; it ends at the end of the pipe.
    reader: Option<JoinHandle<()>>,
}

impl Served {
    /// Spawns `command` (a `somna run --serve …`, stdout piped here, stderr dropped) and waits for
    /// the address it prints (30 s at most).
    pub fn start(command: Command) -> Served {
        Self::start_with_stderr(command, Stdio::null())
    }

    /// [`Served::start`] with the child's stderr (its log) going to `stderr`.
    pub fn start_with_stderr(mut command: Command, stderr: Stdio) -> Served {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let reader = {
            let lines = Arc::clone(&stdout);
            let out = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { return };
                    let _ = tx.send(line.clone());
                    lines.lock().unwrap().push(line);
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            else {
                let _ = child.kill();
                let _ = child.wait();
                panic!("somna run --serve printed no address");
            };
            if let Some(rest) = line.strip_prefix("somna: API on ") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        Served {
            child,
            url,
            stdout,
            reader: Some(reader),
        }
    }

    /// The API's `host:port`.
    pub fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// Stops the server as ctrl-c does and waits for the run to end; its exit status and output.
    pub fn stop(mut self) -> (bool, String) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "somna run did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends at the end of the pipe, once the process is gone: every line the
        // run printed is read.
        self.reader.take().unwrap().join().unwrap();
        let out = self.stdout.lock().unwrap().join("\n");
        (status.success(), out)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub use somna_testkit::pg_url_or_skip;

/// Drops a Postgres schema when the test ends, however it ends (once no `somna` holds it).
pub struct DropSchema {
    url: String,
    schema: String,
}

impl DropSchema {
    pub fn new(url: &str, schema: &str) -> Self {
        DropSchema {
            url: url.to_string(),
            schema: schema.to_string(),
        }
    }
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        // Opening it as a temporary schema and letting go drops it.
        let _ = somna_store::Store::temporary_postgres_in(&self.url, &self.schema);
    }
}

/// A scratch Postgres schema (dropped at the end) and a temporary directory for a test's config.
pub struct PgScratch {
    pub url: String,
    pub schema: String,
    dir: tempfile::TempDir,
    _drop: DropSchema,
}

impl PgScratch {
    /// `SOMNA_TEST_PG_URL` with a schema `<prefix>_<pid>`, or `None` after reporting the test as
    /// skipped; `config(url, schema)` is written to the directory's runtime.toml.
    pub fn new(prefix: &str, config: impl FnOnce(&str, &str) -> String) -> Option<PgScratch> {
        let url = pg_url_or_skip()?;
        let schema = format!("{prefix}_{}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("runtime.toml"), config(&url, &schema)).unwrap();
        Some(PgScratch {
            _drop: DropSchema::new(&url, &schema),
            url,
            schema,
            dir,
        })
    }

    /// The directory holding runtime.toml.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
