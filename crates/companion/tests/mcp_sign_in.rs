//! A remote MCP server that asks for a sign-in, through the core: the official conformance
//! suite's OAuth-protected server (`auth/metadata-default`: protected resource metadata,
//! authorization server metadata, dynamic registration, PKCE) is added as an HTTP server; the
//! first start finds it asks to sign in; the sign-in the card (or Settings) starts goes through
//! the app's loopback listener; its tools then reach the agent and a call runs with the token,
//! which is kept in the vault, never in a file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use companion::mcp::view::McpServerInput;
use companion::{SignInStatus, UiEvent};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout);
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// A Node.js of 22 or newer, which the conformance suite needs (bootstrap's `tools/node22`).
fn node22() -> PathBuf {
    [
        repo().join("tools/node22/bin/node"),
        repo().join("tools/node/bin/node"),
        PathBuf::from("node"),
    ]
    .into_iter()
    .find(|n| node_major(n).is_some_and(|m| m >= 22))
    .expect("no Node.js 22 or newer: run scripts/bootstrap")
}

/// The suite's server for `scenario`, running until dropped, and its URL.
struct Suite {
    child: std::process::Child,
    url: String,
}

impl Drop for Suite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn suite(scenario: &str) -> Suite {
    let cli = repo().join("tests/mcp/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut child = Command::new(node22())
        .arg(cli)
        .args(["client", "--scenario", scenario])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the suite printed its server URL")
            .unwrap();
        if let Some(url) = line.strip_prefix("Server URL: ") {
            break url.trim().to_owned();
        }
    };
    Suite { child, url }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_that_asks_for_a_sign_in_gets_one_and_its_tools_run() {
    let server = suite("auth/metadata-default");
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let app = common::open(paths.clone()).await;
    let saved = app
        .save_mcp_server(McpServerInput {
            id: None,
            name: "Notes".into(),
            transport: "http".into(),
            command: String::new(),
            args: vec![],
            cwd: None,
            url: server.url.clone(),
            env: vec![],
            headers: vec![],
            enabled: true,
            trusted: false,
            timeout_secs: 30,
        })
        .await
        .unwrap();
    assert_eq!(saved.id, "notes");

    // Started in the background to list its tools, it asks to sign in: the page says so.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let view = app
            .mcp_servers()
            .into_iter()
            .find(|s| s.id == "notes")
            .unwrap();
        if view.needs_sign_in {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never asked to sign in: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The card's (or the page's) Sign in: the authorization server's page, then its redirect
    // to the app's listener, as the browser would follow it.
    let mut events = app.subscribe();
    let ticket = app.begin_sign_in(vec!["mcp:notes".into()]).await.unwrap();
    assert!(
        ticket.url.contains("code_challenge="),
        "PKCE: {}",
        ticket.url
    );
    assert!(ticket.redirect_uri.starts_with("http://127.0.0.1:"));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = client.get(&ticket.url).send().await.unwrap();
    let back = page.headers()["location"].to_str().unwrap().to_owned();
    assert!(back.starts_with(&ticket.redirect_uri), "{back}");
    assert!(
        client
            .get(&back)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let name = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match events.recv().await.unwrap() {
                UiEvent::SignIn(SignInStatus::SignedIn { name, .. }) => return name,
                UiEvent::SignIn(SignInStatus::Failed { message }) => panic!("{message}"),
                _ => {}
            }
        }
    })
    .await
    .expect("signed in");
    assert_eq!(name, "Notes");

    // Its tools reach the agent, and a call runs with the token.
    let deadline = Instant::now() + Duration::from_secs(20);
    let tool = loop {
        if let Some(tool) = app.engine().agent().tool("mcp__notes__test-tool").cloned() {
            break tool;
        }
        assert!(
            Instant::now() < deadline,
            "the tools never reached the agent"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let cb = agent::CallbackContext::new(
        "i",
        "assistant",
        "s",
        Default::default(),
        Default::default(),
    );
    let out = tool
        .run(
            serde_json::Map::new(),
            &mut agent::ToolContext::new(cb, "c1"),
        )
        .await;
    let (text, is_error, _) = agent::coerce_tool_result(out);
    assert!(!is_error, "{text}");
    assert_eq!(text, "test");
    // The token is in the vault, not in a file of the app's.
    for file in [paths.config_dir.join("mcp.json"), paths.settings_file()] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        assert!(!text.contains("test-token"), "{text}");
    }
}
