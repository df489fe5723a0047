//! Connected agents through the real server: an rmcp client over Streamable HTTP asks the demo
//! app, and its writes wait in the same inbox as the assistant's — approved (with the user's
//! edit), rejected with a reason, abandoned when the client goes away, held for sign-in and
//! resumed — while requests without a valid token, from another host or a foreign page are
//! refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::persist::AuditFilter;
use agent::{CallStatus, Decision, Verdict};
use companion::Companion;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value, json};

/// A client that keeps the progress messages it hears.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Heard {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }
}

async fn connect(url: &str, token: &str) -> (RunningService<RoleClient, Heard>, Heard) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let heard = Heard::default();
    (heard.clone().serve(transport).await.unwrap(), heard)
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments))
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

/// The app's pending call of `agent`, once it is held.
async fn held(app: &Companion, agent: &str, status: CallStatus) -> agent::CallRecord {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(c) = app
                .pending()
                .unwrap()
                .into_iter()
                .find(|c| c.agent_name == agent && c.status == status)
            {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the call is held")
}

fn week() -> Value {
    json!({"start": "2026-12-01", "end": "2026-12-08"})
}

async fn demo_with_agent() -> (tempfile::TempDir, Companion, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let new = app.add_connected_agent("Claude Code").unwrap();
    let url = app.connected_agents().url.unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (dir, app, url, new.token, new.agent.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_waits_in_the_inbox_and_returns_the_users_edit() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    let (client, heard) = connect(&url, &token).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "approve",
        "request_approval",
        "list_calendar_events",
        "create_calendar_event",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let approve = tools.iter().find(|t| t.name == "approve").unwrap();
    assert_eq!(
        approve.annotations.as_ref().unwrap().read_only_hint,
        Some(false)
    );

    let peer = client.peer().clone();
    let asking = tokio::spawn(async move {
        peer.call_tool(call(
            "approve",
            json!({"tool_name": "Bash", "input": {"command": "npm test", "description": "Run the tests"}}),
        ))
        .await
    });
    let record = held(&app, &id, CallStatus::AwaitingApproval).await;
    let view = app
        .pending_calls()
        .unwrap()
        .into_iter()
        .find(|c| c.call_id == record.call_id)
        .unwrap();
    assert_eq!(view.requester.as_deref(), Some("Claude Code"));
    let preview = view.preview.unwrap();
    assert!(
        preview.summary.en.contains("npm test"),
        "{:?}",
        preview.summary
    );
    assert_eq!(record.args["command"], "npm test");

    let mut edited = record.args.clone();
    edited.insert("command".into(), json!("npm test -- --ci"));
    app.decide(&record.call_id, Decision::ApproveEdited(edited))
        .await
        .unwrap();
    let result = asking.await.unwrap().unwrap();
    let answer: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(
        answer,
        json!({"behavior": "allow", "updatedInput": {"command": "npm test -- --ci", "description": "Run the tests"}})
    );
    assert!(
        heard
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.contains("approval")),
        "{:?}",
        heard.0.lock().unwrap()
    );
    // The audit names the agent.
    let audit = app
        .audit(&AuditFilter {
            session_id: Some(record.session_id.clone()),
            ..AuditFilter::default()
        })
        .unwrap();
    assert!(
        audit.iter().any(|e| e.actor == format!("agent:{id}")),
        "{audit:?}"
    );
    assert!(
        audit.iter().any(|e| e.kind == "approval.approved_edited"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_and_its_reason_reach_the_agent() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    let (client, _) = connect(&url, &token).await;
    for (tool, arguments) in [
        (
            "approve",
            json!({"tool_name": "Bash", "input": {"command": "rm -rf build"}}),
        ),
        (
            "request_approval",
            json!({"summary": "Deploy to production", "risk": "high"}),
        ),
    ] {
        let peer = client.peer().clone();
        let asking = tokio::spawn(async move { peer.call_tool(call(tool, arguments)).await });
        let record = held(&app, &id, CallStatus::AwaitingApproval).await;
        assert_eq!(
            record.preview.as_ref().unwrap().risk,
            agent::Risk::High,
            "{tool}"
        );
        app.decide(
            &record.call_id,
            Decision::Reject {
                reason: Some("not on a Friday".into()),
            },
        )
        .await
        .unwrap();
        let answer: Value = serde_json::from_str(&text(&asking.await.unwrap().unwrap())).unwrap();
        let said = answer.to_string();
        assert!(said.contains("not on a Friday"), "{said}");
        match tool {
            "approve" => assert_eq!(answer["behavior"], "deny"),
            _ => assert_eq!(answer["approved"], false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_agent_went_away_is_abandoned_not_run() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    let (client, _) = connect(&url, &token).await;
    let peer = client.peer().clone();
    let asking = tokio::spawn(async move {
        peer.call_tool(call(
            "request_approval",
            json!({"summary": "Merge the branch"}),
        ))
        .await
    });
    let record = held(&app, &id, CallStatus::AwaitingApproval).await;
    // The client goes away: its request's stream closes.
    asking.abort();
    client.cancel().await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let now = app.engine().store().call(&record.call_id).unwrap().unwrap();
            if now.status == CallStatus::Done {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the abandoned call is closed");
    let decision = closed.decision.unwrap();
    assert_eq!(decision.verdict, Verdict::Cancelled);
    assert_eq!(
        decision.reason.as_deref(),
        Some(agent::engine::notice::ABANDONED)
    );
    assert!(
        app.decide(&record.call_id, Decision::Approve)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_needs_a_permission_waits_for_sign_in_and_then_answers() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    let (client, heard) = connect(&url, &token).await;
    let peer = client.peer().clone();
    let asking =
        tokio::spawn(async move { peer.call_tool(call("list_calendar_events", week())).await });
    let record = held(&app, &id, CallStatus::AwaitingAuth).await;
    assert!(!record.auth_scopes.is_empty());
    common::sign_in_for(&app, record.auth_scopes.clone()).await;
    let result = tokio::time::timeout(Duration::from_secs(20), asking)
        .await
        .expect("the read answers after sign-in")
        .unwrap()
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert!(text(&result).contains("events"), "{}", text(&result));
    assert!(
        heard
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.contains("sign in")),
        "{:?}",
        heard.0.lock().unwrap()
    );
    // Signed in now, a read answers at once.
    let again = client
        .peer()
        .call_tool(call("list_calendar_events", week()))
        .await
        .unwrap();
    assert_ne!(again.is_error, Some(true));
    // Arguments the tool refuses come back as the tool's error, and nothing waits.
    let invalid = client
        .peer()
        .call_tool(call("list_calendar_events", json!({})))
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert!(text(&invalid).contains("start"), "{}", text(&invalid));
    assert!(app.pending().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_sees_and_calls_only_the_tools_chosen_for_it() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    app.set_connected_agent_tools(companion::agents::view::AgentToolsInput {
        id: id.clone(),
        tools: Some(vec!["list_calendar_events".into()]),
    })
    .unwrap();
    let (client, _) = connect(&url, &token).await;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["approve", "list_calendar_events", "request_approval"]
    );
    let refused = client
        .peer()
        .call_tool(call("create_calendar_event", json!({"summary": "x"})))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("create_calendar_event"), "{refused}");
    assert!(app.pending().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_token_from_another_host_or_a_foreign_page_are_refused() {
    let (_dir, app, url, token, id) = demo_with_agent().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |headers: Vec<(&'static str, String)>| {
        let mut request = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let bearer = format!("Bearer {token}");
    assert_eq!(post(vec![]).await.unwrap().status(), 401);
    assert_eq!(
        post(vec![("authorization", "Bearer fca_not_a_token".into())])
            .await
            .unwrap()
            .status(),
        401
    );
    assert!(
        post(vec![("authorization", bearer.clone())])
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let foreign_page = post(vec![
        ("authorization", bearer.clone()),
        ("origin", "https://evil.example".into()),
    ])
    .await
    .unwrap();
    assert_eq!(foreign_page.status(), 403);
    let rebinding = post(vec![
        ("authorization", bearer.clone()),
        ("host", "evil.example".into()),
    ])
    .await
    .unwrap();
    assert!(
        rebinding.status().is_client_error(),
        "{}",
        rebinding.status()
    );

    app.set_connected_agent_paused(&id, true).unwrap();
    assert_eq!(
        post(vec![("authorization", bearer.clone())])
            .await
            .unwrap()
            .status(),
        403
    );
    app.set_connected_agent_paused(&id, false).unwrap();
    app.revoke_connected_agent(&id).await.unwrap();
    assert_eq!(
        post(vec![("authorization", bearer)])
            .await
            .unwrap()
            .status(),
        401
    );
    // The token itself was never kept.
    let file = std::fs::read_to_string(app.paths().config_dir.join("agents.json")).unwrap();
    assert!(!file.contains(&token[4..]), "{file}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_left_waiting_by_a_closed_app_is_abandoned_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let (record, token) = {
        let app = common::open(paths.clone()).await;
        let new = app.add_connected_agent("Codex").unwrap();
        let url = app.connected_agents().url.unwrap();
        let (client, _) = connect(&url, &new.token).await;
        let peer = client.peer().clone();
        let _asking = tokio::spawn(async move {
            peer.call_tool(call(
                "request_approval",
                json!({"summary": "Tag a release"}),
            ))
            .await
        });
        let record = held(&app, &new.agent.id, CallStatus::AwaitingApproval).await;
        // The app stops without the client ever leaving (a crash, a quit); the relay no longer
        // finds it.
        let discovery = companion::agents::discovery_file(app.paths());
        assert!(discovery.exists());
        app.stop_agent_server();
        assert!(!discovery.exists());
        (record, new.token)
    };
    let app = common::open(paths).await;
    let call = app.engine().store().call(&record.call_id).unwrap().unwrap();
    assert_eq!(
        call.status,
        CallStatus::Done,
        "nobody is left to receive its answer"
    );
    assert_eq!(call.decision.unwrap().verdict, Verdict::Cancelled);
    assert!(app.pending().unwrap().is_empty());
    // The agent and its token survive the restart.
    let url = app.connected_agents().url.unwrap();
    let (client, _) = connect(&url, &token).await;
    assert!(!client.list_all_tools().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nameless_agent_or_a_relay_without_a_token_is_refused_with_what_to_do() {
    let (dir, app, _url, _token, _id) = demo_with_agent().await;
    let before = app.connected_agents().agents.len();
    for name in ["", "   ", &"x".repeat(61)] {
        let e = app.add_connected_agent(name).unwrap_err().to_string();
        assert!(e.contains("1 to 60 characters"), "{e}");
    }
    assert_eq!(
        app.connected_agents().agents.len(),
        before,
        "nothing was added"
    );
    let paths = companion::AppPaths::under(dir.path());
    let e = companion::agents::relay::relay(&paths, " ".into(), None, || {
        panic!("no app is started without a token")
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("FEISHU_COMPANION_TOKEN"), "{e}");
}
