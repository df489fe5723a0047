//! The real clients' prerequisites, found or refused by name, and a child process the test can
//! watch, kill and read. Nothing is skipped: a missing prerequisite fails the test with the step
//! that installs it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/agents`, where the client scripts and their npm packages are.
pub fn agents_dir() -> PathBuf {
    repo().join("tests/agents")
}

fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// A Node.js 22 or newer (the SDK, the conformance suite and claude.mjs need it): bootstrap's
/// `tools/node22`, else `tools/node`, else the one on PATH.
pub fn node() -> PathBuf {
    [
        repo().join("tools/node22/bin/node"),
        repo().join("tools/node/bin/node"),
        PathBuf::from("node"),
    ]
    .into_iter()
    .find(|n| node_major(n).is_some_and(|major| major >= 22))
    .expect(
        "no Node.js 22 or newer: run scripts/bootstrap (it fetches one into tools/node22 with \
         NODE_TOOLS_DIR=tools/node22 scripts/node-lts ensure 22)",
    )
}

/// Fails unless `tests/agents`' npm packages are installed: the TypeScript SDK and, when
/// `claude` is asked for, the Claude Code CLI with its native binary.
pub fn require_agents_packages(claude: bool) {
    let modules = agents_dir().join("node_modules");
    let mut wanted = vec!["@modelcontextprotocol/sdk/package.json"];
    if claude {
        wanted.push("@anthropic-ai/claude-code/package.json");
    }
    for file in wanted {
        assert!(
            modules.join(file).is_file(),
            "{} is missing: run scripts/bootstrap (npm ci in tests/agents)",
            modules.join(file).display()
        );
    }
}

/// The Python with the official `mcp` SDK, installed by `tests/agents/install-python-sdk`.
pub fn python() -> PathBuf {
    let python = repo().join("tools/mcp-python/bin/python");
    let works = Command::new(&python)
        .args(["-c", "import mcp, httpx2"])
        .current_dir(agents_dir())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        works,
        "{} cannot import the MCP SDK: run tests/agents/install-python-sdk (scripts/bootstrap runs it)",
        python.display()
    );
    python
}

/// The conformance suite's CLI, installed in `tests/mcp`.
pub fn conformance_suite() -> PathBuf {
    let suite =
        repo().join("tests/mcp/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        suite.is_file(),
        "the MCP conformance suite is not installed: run scripts/bootstrap (npm ci in tests/mcp)"
    );
    suite
}

/// A child process whose stdout and stderr are kept as they arrive.
pub struct Peer {
    name: String,
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

fn collect(mut from: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let into = Arc::new(Mutex::new(String::new()));
    let kept = into.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    into
}

impl Peer {
    /// Starts `command` (stdin closed, stdout and stderr kept).
    pub fn spawn(name: &str, mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} did not start: {e}"));
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Peer {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
        }
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// What it printed, for a failure's message.
    pub fn log(&self) -> String {
        format!(
            "--- {} stdout:\n{}\n--- {} stderr:\n{}",
            self.name,
            self.stdout(),
            self.name,
            self.stderr.lock().unwrap()
        )
    }

    /// Its exit status, if it has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits up to `limit` for its first stdout line.
    pub async fn first_line(&mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self.stdout().split_inclusive('\n').next()
                && line.ends_with('\n')
            {
                return line.trim().to_owned();
            }
            assert!(
                self.exited().is_none(),
                "{} ended early\n{}",
                self.name,
                self.log()
            );
            assert!(
                Instant::now() < deadline,
                "{} printed no line\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits up to `limit` for it to end (killing it then), and returns its status.
    pub async fn finish(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                // The reader threads may still hold the last bytes.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("{} did not end within {limit:?}\n{}", self.name, self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its last stdout line, parsed as JSON (the scripts' reports).
    pub fn report(&self) -> serde_json::Value {
        let out = self.stdout();
        let line = out.lines().rev().find(|l| l.trim_start().starts_with('{'));
        line.and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("{} printed no JSON report\n{}", self.name, self.log()))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
