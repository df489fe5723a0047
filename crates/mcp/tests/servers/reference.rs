//! The official "everything" server: tools listed with their annotations, calls answered as
//! text and structured content, progress routed to the call, secrets passed as environment,
//! and the same over Streamable HTTP.

use std::time::Duration;

use agent::ToolReturn;
use mcp::{HubEvent, Phase, TransportConfig};
use serde_json::{Value, json};

use super::*;

fn ctx(call_id: &str) -> agent::ToolContext {
    agent::ToolContext::new(
        agent::CallbackContext::new(
            "inv",
            "assistant",
            "session",
            Default::default(),
            Default::default(),
        ),
        call_id,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_lists_its_tools_and_answers_calls() {
    let (hub, conn) = one(node_server("everything", EVERYTHING, &["stdio"], &[]));
    assert_eq!(
        conn.status().phase,
        Phase::Idle,
        "not started before it is needed"
    );
    conn.start().await.unwrap();
    let status = conn.status();
    assert_eq!(status.phase, Phase::Running);
    assert!(status.server_info.unwrap().contains("everything"));
    let tools = conn.tools();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "echo",
        "get-sum",
        "get-structured-content",
        "trigger-long-running-operation",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let long = tools
        .iter()
        .find(|t| t.name == "trigger-long-running-operation")
        .unwrap();
    assert_eq!(long.read_only_hint, Some(true));
    assert_eq!(
        long.title.as_deref(),
        Some("Trigger Long Running Operation Tool")
    );

    let agent_tools = hub.tools();
    let sum = agent_tools
        .iter()
        .find(|t| t.name() == "mcp__everything__get-sum")
        .unwrap();
    assert_eq!(sum.parameters()["type"], "object");
    let out = sum.run(args(json!({"a": 2, "b": 3})), &mut ctx("c1")).await;
    match out {
        ToolReturn::Value(Value::String(s)) => assert!(s.contains('5'), "{s}"),
        other => panic!("{other:?}"),
    }
    let structured = agent_tools
        .iter()
        .find(|t| t.name() == "mcp__everything__get-structured-content")
        .unwrap()
        .run(args(json!({"location": "New York"})), &mut ctx("c2"))
        .await;
    match structured {
        ToolReturn::Value(v) => assert!(
            v["structured"]["temperature"].is_number() || v["temperature"].is_number(),
            "{v}"
        ),
        other => panic!("{other:?}"),
    }
    // A call the server refuses (arguments it cannot use) fails with its words, and the server
    // stays up.
    let refused = sum.run(args(json!({"a": "two"})), &mut ctx("c3")).await;
    let (text, is_error, _) = agent::coerce_tool_result(refused);
    assert!(is_error, "{text}");
    assert_eq!(conn.status().phase, Phase::Running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_the_hub_for_their_call() {
    let (hub, conn) = one(node_server("everything", EVERYTHING, &["stdio"], &[]));
    let mut events = hub.subscribe();
    let result = conn
        .call(
            "trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 4})),
            "call-7",
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HubEvent::Progress {
            call_id,
            progress,
            total,
            ..
        } = event
        {
            seen.push((call_id, progress, total));
        }
    }
    // In order, for this call. The last one may cross the answer on the way and is then
    // dropped with the finished call's route, so three of four must arrive.
    let expected: Vec<_> = (1..=4)
        .map(|i| ("call-7".to_owned(), f64::from(i), Some(4.0)))
        .collect();
    assert!(seen.len() >= 3, "{seen:?}");
    assert_eq!(seen[..], expected[..seen.len()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_secrets_reach_the_server_process() {
    let (_hub, conn) = one(node_server(
        "everything",
        EVERYTHING,
        &["stdio"],
        &[("COMPANION_PROBE_SECRET", "s3cret-value")],
    ));
    let result = conn.call("get-env", args(json!({})), "c").await.unwrap();
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(text.contains("s3cret-value"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http_answers_calls() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new("node")
        .arg(peers().join(EVERYTHING))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until(20, "the HTTP server to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    let mut resolved = node_server("remote", EVERYTHING, &[], &[]);
    resolved.config.transport = TransportConfig::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: vec!["X-Test".into()],
    };
    resolved.headers.insert("X-Test".into(), "yes".into());
    let (_hub, conn) = one(resolved);
    let result = conn
        .call("echo", args(json!({"message": "over http"})), "c")
        .await
        .unwrap();
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(text.contains("over http"), "{text}");
    assert_eq!(conn.status().phase, Phase::Running);
    child.kill().await.unwrap();
    // The server is gone: the next call says so instead of hanging.
    let gone = tokio::time::timeout(
        Duration::from_secs(40),
        conn.call("echo", args(json!({"message": "again"})), "c2"),
    )
    .await
    .expect("a call to a vanished server ends");
    assert!(gone.is_err(), "{gone:?}");
}
