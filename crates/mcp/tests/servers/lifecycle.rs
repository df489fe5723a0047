//! What real servers do that reference servers never do: crash, hang, fail to start, notice a
//! cancellation, change their tools. Nothing of one server's trouble reaches another.

use std::time::{Duration, Instant};

use mcp::{CallError, HubEvent, Phase};
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_unfinished_is_cancelled_at_the_server() {
    let (_hub, conn) = one(node_server("probe", PROBE, &[], &[]));
    let dropped = tokio::time::timeout(
        Duration::from_millis(1500),
        conn.call("slow", args(json!({"seconds": 5})), "c1"),
    )
    .await;
    assert!(dropped.is_err(), "still running when dropped");
    until(10, "the server to notice the cancellation", || {
        conn.stderr().contains("cancelled")
    })
    .await;
    // The connection is fine for the next call.
    let next = conn
        .call("slow", args(json!({"seconds": 1})), "c2")
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&next.content)
            .unwrap()
            .contains("waited 1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_is_reported_with_the_servers_last_words_and_the_server_restarts() {
    let (hub, conn) = one(node_server("probe", PROBE, &[], &[]));
    let mut other = node_server("other", PROBE, &[], &[]);
    other.config.id = "other".into();
    hub.configure(
        vec![node_server("probe", PROBE, &[], &[]), other],
        &Default::default(),
    );
    let other = hub.connection("other").unwrap();
    other.start().await.unwrap();
    let err = conn.call("crash", args(json!({})), "c1").await.unwrap_err();
    match &err {
        CallError::Crashed(why) => assert!(why.contains("crashing on purpose"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(conn.status().phase, Phase::Failed);
    assert!(conn.stderr().contains("crashing on purpose"));
    // One crash restarts it at once, for the next call.
    let again = conn
        .call("write_note", args(json!({"text": "after"})), "c2")
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&again.content)
            .unwrap()
            .contains("noted: after")
    );
    assert_eq!(conn.status().starts, 2);
    // The other server never noticed.
    assert_eq!(other.status().phase, Phase::Running);
    assert_eq!(other.status().starts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_times_out_with_a_clear_error() {
    let mut resolved = node_server("probe", PROBE, &[], &[]);
    resolved.config.timeout_secs = 1;
    let (_hub, conn) = one(resolved);
    conn.start().await.unwrap();
    let started = Instant::now();
    let err = conn.call("hang", args(json!({})), "c1").await.unwrap_err();
    assert_eq!(err, CallError::Timeout(Duration::from_secs(1)));
    assert!(started.elapsed() < Duration::from_secs(5));
    let text = mcp::outcome::from_error("probe", &err);
    let (text, is_error, _) = agent::coerce_tool_result(text);
    assert!(is_error);
    assert_eq!(
        text,
        "MCP server probe gave no answer within 1 s; the call was cancelled"
    );
    // Still usable.
    conn.call("write_note", args(json!({"text": "x"})), "c2")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_waits_longer_before_each_new_try() {
    let mut resolved = node_server("broken", PROBE, &[], &[]);
    resolved.config.transport = mcp::TransportConfig::Stdio {
        command: "node".into(),
        args: vec![
            "-e".into(),
            "console.error('missing API key'); process.exit(1)".into(),
        ],
        env: vec![],
        cwd: None,
    };
    let (_hub, conn) = one(resolved);
    let first = conn.call("x", args(json!({})), "c1").await.unwrap_err();
    match &first {
        CallError::Start(why) => assert!(why.contains("missing API key"), "{why}"),
        other => panic!("{other:?}"),
    }
    // At once again: the pause holds, and says how long.
    match conn.call("x", args(json!({})), "c2").await.unwrap_err() {
        CallError::Waiting { error, retry_in } => {
            assert!(error.contains("missing API key"));
            assert!(retry_in <= Duration::from_secs(1));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(conn.status().starts, 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(matches!(
        conn.call("x", args(json!({})), "c3").await,
        Err(CallError::Start(_))
    ));
    assert_eq!(conn.status().starts, 2);
    match conn.call("x", args(json!({})), "c4").await.unwrap_err() {
        CallError::Waiting { retry_in, .. } => assert!(retry_in > Duration::from_secs(1)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again() {
    let (hub, conn) = one(node_server("probe", PROBE, &[], &[]));
    conn.start().await.unwrap();
    assert!(!conn.tools().iter().any(|t| t.name == "late"));
    let mut events = hub.subscribe();
    conn.call("add_tool", args(json!({})), "c1").await.unwrap();
    until(10, "the new tool", || {
        conn.tools().iter().any(|t| t.name == "late")
    })
    .await;
    let mut changed = false;
    while let Ok(e) = events.try_recv() {
        changed |= e
            == HubEvent::ToolsChanged {
                server_id: "probe".into(),
            };
    }
    assert!(changed, "the hub said the tools changed");
    assert!(hub.tools().iter().any(|t| t.name() == "mcp__probe__late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_in_a_row_wait_before_the_next_start() {
    let (_hub, conn) = one(node_server("probe", PROBE, &[], &[]));
    assert!(matches!(
        conn.call("crash", args(json!({})), "c1").await,
        Err(CallError::Crashed(_))
    ));
    assert!(matches!(
        conn.call("crash", args(json!({})), "c2").await,
        Err(CallError::Crashed(_))
    ));
    match conn
        .call("write_note", args(json!({"text": "x"})), "c3")
        .await
    {
        Err(CallError::Waiting { retry_in, .. }) => assert!(retry_in <= Duration::from_secs(1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(conn.status().starts, 2);
}
