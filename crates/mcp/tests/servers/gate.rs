//! The gate decides, not the server: the official filesystem server's writes wait for approval
//! and run once when approved; its reads (marked `readOnlyHint`) wait too until the user trusts
//! the server; the audit names the server and the tool.

use std::sync::Arc;

use agent::persist::AuditFilter;
use agent::{
    Content, Decision, Engine, EngineConfig, FunctionCall, LlmAgent, LlmResponse, Part,
    ScriptedModel,
};
use serde_json::{Value, json};

use super::*;

fn engine_with(hub: &Hub, script: Vec<LlmResponse>) -> (Engine, Arc<store::Store>, String) {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let mut builder = LlmAgent::builder("assistant", Arc::new(ScriptedModel::new(script)));
    for tool in hub.tools() {
        builder = builder.shared_tool(tool);
    }
    let engine = Engine::new(
        builder.build().unwrap(),
        store.clone(),
        EngineConfig::default(),
    )
    .unwrap();
    let session = engine
        .create_session("u1", &serde_json::Map::new())
        .unwrap();
    (engine, store, session)
}

fn call(name: &str, args: Value) -> LlmResponse {
    LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(
        name,
        args.as_object().cloned().unwrap(),
    ))])
}

fn say(text: &str) -> LlmResponse {
    LlmResponse::from_parts(vec![Part::from_text(text)])
}

fn filesystem(dir: &std::path::Path, trusted: bool) -> Hub {
    let mut resolved = node_server("fs", FILESYSTEM, &[&dir.to_string_lossy()], &[]);
    resolved.config.trusted = trusted;
    let (hub, _conn) = one(resolved);
    hub
}

async fn started(hub: &Hub) {
    hub.connection("fs").unwrap().start().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_for_approval_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("note.txt");
    let hub = filesystem(dir.path(), true);
    started(&hub).await;
    let (engine, _store, session) = engine_with(
        &hub,
        vec![
            call(
                "mcp__fs__write_file",
                json!({"path": target.to_string_lossy(), "content": "hello"}),
            ),
            say("written"),
        ],
    );
    engine
        .send_message(&session, Content::user_text("write it"))
        .await
        .unwrap();
    let pending = engine.pending_calls().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(!target.exists(), "nothing written before approval");
    let preview = pending[0].preview.clone().expect("a card");
    assert_eq!(
        preview.risk,
        agent::Risk::High,
        "destructiveHint shown as a risk"
    );
    assert!(
        preview.summary.en.contains("on the MCP server fs"),
        "{}",
        preview.summary.en
    );
    engine
        .decide(&pending[0].call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
    let audit = engine.audit_trail(&AuditFilter::default()).unwrap();
    let dispatched: Vec<_> = audit
        .iter()
        .filter(|a| a.kind == "call.dispatched")
        .collect();
    assert_eq!(dispatched.len(), 1, "ran once");
    let requested = audit
        .iter()
        .find(|a| a.kind == "approval.requested")
        .unwrap();
    assert_eq!(requested.detail["source"]["mcp_server"], "fs");
    assert_eq!(requested.detail["source"]["mcp_tool"], "write_file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_read_hint_counts_only_once_the_user_trusts_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "content of a").unwrap();
    let read = || {
        vec![
            call(
                "mcp__fs__read_text_file",
                json!({"path": file.to_string_lossy()}),
            ),
            say("read"),
        ]
    };
    let untrusted = filesystem(dir.path(), false);
    started(&untrusted).await;
    let (engine, _s, session) = engine_with(&untrusted, read());
    engine
        .send_message(&session, Content::user_text("read"))
        .await
        .unwrap();
    assert_eq!(
        engine.pending_calls().unwrap().len(),
        1,
        "held: the server is not trusted"
    );

    let trusted = filesystem(dir.path(), true);
    started(&trusted).await;
    let (engine, store, session) = engine_with(&trusted, read());
    engine
        .send_message(&session, Content::user_text("read"))
        .await
        .unwrap();
    assert!(engine.pending_calls().unwrap().is_empty(), "ran at once");
    let events = store.load_session(&session).unwrap().events;
    let answered = events.iter().any(|e| {
        serde_json::to_string(&e.content)
            .unwrap_or_default()
            .contains("content of a")
    });
    assert!(answered, "the file's text reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_the_schema_refuses_never_reach_a_card() {
    let dir = tempfile::tempdir().unwrap();
    let hub = filesystem(dir.path(), false);
    started(&hub).await;
    let (engine, _s, session) = engine_with(
        &hub,
        vec![
            call("mcp__fs__write_file", json!({"path": 7})),
            say("sorry"),
        ],
    );
    engine
        .send_message(&session, Content::user_text("write"))
        .await
        .unwrap();
    assert!(engine.pending_calls().unwrap().is_empty());
    let audit = engine.audit_trail(&AuditFilter::default()).unwrap();
    assert!(
        audit.iter().any(|a| a.kind.contains("invalid")),
        "{:?}",
        audit.iter().map(|a| &a.kind).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_turn_cancels_the_call_at_the_server() {
    let mut resolved = node_server("probe", PROBE, &[], &[]);
    resolved.config.trusted = true;
    let (hub, conn) = one(resolved);
    conn.start().await.unwrap();
    let (engine, _store, session) = engine_with(
        &hub,
        vec![
            call("mcp__probe__slow", json!({"seconds": 10})),
            say("done"),
        ],
    );
    let running = {
        let engine = engine.clone();
        let session = session.clone();
        tokio::spawn(async move {
            engine
                .send_message(&session, Content::user_text("wait"))
                .await
        })
    };
    until(10, "the call to reach the server", || {
        conn.status().phase == mcp::Phase::Running && !running.is_finished()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(engine.cancel(&session).await.unwrap(), "a turn was running");
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(5), running)
        .await
        .expect("the turn ends at once, not after the tool's 10 s")
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    until(10, "the server to hear of the cancellation", || {
        conn.stderr().contains("cancelled")
    })
    .await;
}
