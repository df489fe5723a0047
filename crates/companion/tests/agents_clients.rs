//! Connected agents judged by real clients, each a child process of the test while the test
//! plays the user in the demo app's inbox: the official TypeScript SDK and Python SDK over
//! Streamable HTTP, the TypeScript SDK through the stdio relay (`companion-cli mcp`, the core
//! function `feishu-companion mcp` runs), the real Claude Code CLI with the companion as its
//! permission prompt ([`claude`]), and the official conformance suite's server scenarios
//! ([`conformance`]). [`race`] holds that a decision made the instant a call is held is not
//! lost, as these clients once found it was.
//!
//! Each client checks what it was answered and prints a JSON report; the test checks the report,
//! the cards the user saw and what the app recorded (verdicts, the audit naming `agent:<id>`).
//! Prerequisites (Node.js 22, `npm ci` in tests/agents and tests/mcp, the Python SDK's venv from
//! tests/agents/install-python-sdk) are never skipped: missing, the test fails naming the step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agents_clients/claude.rs"]
mod claude;
mod common;
#[path = "agents_clients/conformance.rs"]
mod conformance;
#[path = "agents_clients/peers.rs"]
mod peers;
#[path = "agents_clients/race.rs"]
mod race;
#[path = "agents_clients/user.rs"]
mod user;

use std::process::Command;
use std::time::Duration;

use agent::{Decision, Verdict};
use serde_json::{Value, json};

use peers::{Peer, agents_dir, node, python, require_agents_packages};
use user::Demo;

/// What the client scripts expect the user to do (ts-client.mjs and py_client.py say the same).
const EDITED: &str = "npm test -- --ci";
const REASON: &str = "not on a Friday";

/// How long one held call may take to appear (a client starting included).
const HELD: Duration = Duration::from_secs(60);

/// The relay as a client starts it: `companion-cli mcp --data-dir <the app's folder>`.
fn relay_args(demo: &Demo) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_companion-cli").to_owned(),
        "mcp".to_owned(),
        "--data-dir".to_owned(),
        demo.data_dir().display().to_string(),
    ]
}

fn ts_client(demo: &Demo, plan: &str, transport: &[String]) -> Peer {
    require_agents_packages(false);
    let mut command = Command::new(node());
    command
        .arg(agents_dir().join("ts-client.mjs"))
        .arg(plan)
        .args(transport)
        .env("FEISHU_COMPANION_TOKEN", &demo.token)
        .current_dir(agents_dir());
    Peer::spawn("ts-client.mjs", command)
}

/// Plays the user for a client's `full` plan: approves request_approval, approves the first
/// command with an edit and rejects the second, checking each card. `project`: the folder the
/// calls must say they come from (the relay's), if any.
async fn play_full_plan(demo: &Demo, peer: &mut Peer, project: Option<&str>) {
    let mut seen = Vec::new();
    let first = demo.held(peer, &seen, HELD).await;
    seen.push(first.call_id.clone());
    assert_eq!(first.tool, "request_approval");
    let card = demo.card(&first);
    let preview = card.preview.expect("a card");
    assert_eq!(preview.summary.en, "Publish the release notes");
    assert_eq!(first.args.get("project").and_then(Value::as_str), project);
    demo.app
        .decide(&first.call_id, Decision::Approve)
        .await
        .unwrap();

    let second = demo.held(peer, &seen, HELD).await;
    seen.push(second.call_id.clone());
    assert_eq!(second.tool, "approve");
    assert_eq!(second.args["tool_name"], "Bash");
    assert_eq!(second.args["command"], "npm test");
    let preview = demo.card(&second).preview.expect("a card");
    assert!(
        preview.summary.en.contains("npm test"),
        "{:?}",
        preview.summary
    );
    let mut edited = second.args.clone();
    edited.insert("command".into(), json!(EDITED));
    demo.app
        .decide(&second.call_id, Decision::ApproveEdited(edited))
        .await
        .unwrap();

    let third = demo.held(peer, &seen, HELD).await;
    assert_eq!(third.args["command"], "rm -rf build");
    assert_eq!(demo.card(&third).preview.expect("a card").risk, "high");
    let reject = Decision::Reject {
        reason: Some(REASON.into()),
    };
    demo.app.decide(&third.call_id, reject).await.unwrap();

    let status = peer.finish(Duration::from_secs(60)).await;
    assert!(status.success(), "{status}\n{}", peer.log());
    assert_full_report(&peer.report(), peer);
    demo.assert_recorded(&first, Verdict::Approved).await;
    demo.assert_recorded(&second, Verdict::ApprovedEdited).await;
    demo.assert_recorded(&third, Verdict::Rejected).await;
}

/// What a client of the `full` plan must have been answered and heard.
fn assert_full_report(report: &Value, peer: &Peer) {
    let why = || format!("{report:#}\n{}", peer.log());
    assert_eq!(report["problems"], json!([]), "{}", why());
    assert_eq!(report["server"]["name"], "feishu-companion", "{}", why());
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in ["approve", "request_approval", "list_calendar_events"] {
        assert!(tools.contains(&tool), "{tool}: {}", why());
    }
    let calls = report["calls"].as_array().unwrap();
    let answers: Vec<&Value> = calls.iter().map(|c| &c["answer"]).collect();
    assert_eq!(answers[0], &json!({"approved": true}), "{}", why());
    assert_eq!(
        answers[1],
        &json!({"behavior": "allow", "updatedInput": {"command": EDITED, "description": "Run the tests"}}),
        "{}",
        why()
    );
    assert_eq!(answers[2]["behavior"], "deny", "{}", why());
    let message = answers[2]["message"].as_str().unwrap_or_default();
    assert!(message.contains(REASON), "{}", why());
    for call in calls {
        let progress = call["progress"].as_array().unwrap();
        assert!(
            progress
                .iter()
                .any(|m| m.as_str().unwrap().contains("approval")),
            "{}",
            why()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_over_http_is_held_approved_edited_and_rejected_hearing_progress() {
    let demo = user::demo("TypeScript SDK client").await;
    let mut peer = ts_client(&demo, "full", &["http".to_owned(), demo.url.clone()]);
    play_full_plan(&demo, &mut peer, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_http_is_held_approved_edited_and_rejected_hearing_progress() {
    let demo = user::demo("Python SDK client").await;
    let mut command = Command::new(python());
    command
        .arg(agents_dir().join("py_client.py"))
        .arg(&demo.url)
        .env("FEISHU_COMPANION_TOKEN", &demo.token)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(agents_dir());
    let mut peer = Peer::spawn("py_client.py", command);
    play_full_plan(&demo, &mut peer, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_relay_passes_a_real_clients_calls_answers_and_progress() {
    let demo = user::demo("TypeScript SDK via the relay").await;
    let mut transport = vec!["stdio".to_owned()];
    transport.extend(relay_args(&demo));
    let mut peer = ts_client(&demo, "full", &transport);
    // The relay runs where its client started it (the SDK keeps its own folder), and says so.
    let project = std::fs::canonicalize(agents_dir()).unwrap();
    play_full_plan(&demo, &mut peer, Some(&project.display().to_string())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_exits_while_its_call_waits_in_the_relay_is_abandoned_never_run() {
    let demo = user::demo("A client that leaves").await;
    let mut transport = vec!["stdio".to_owned()];
    transport.extend(relay_args(&demo));
    let mut peer = ts_client(&demo, "leave", &transport);
    // It exits by itself at the first progress notification, so while its call is held.
    let status = peer.finish(HELD).await;
    assert!(status.success(), "{status}\n{}", peer.log());
    assert_eq!(peer.report(), json!({"left": true}), "{}", peer.log());
    let calls = demo.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    // At once: a call left open after its client went could still be approved and run. (rmcp
    // alone gives an in-flight handler 5 s after stdin closes; the relay does not wait.)
    let call = demo.done(&calls[0].call_id, Duration::from_secs(3)).await;
    let decision = call.decision.clone().unwrap();
    assert_eq!(decision.verdict, Verdict::Cancelled);
    assert_eq!(
        decision.reason.as_deref(),
        Some(agent::engine::notice::ABANDONED)
    );
    demo.assert_recorded(&call, Verdict::Cancelled).await;
    assert!(
        demo.app
            .decide(&call.call_id, Decision::Approve)
            .await
            .is_err()
    );
    assert!(demo.app.pending().unwrap().is_empty());
}
