//! Ten connected agents with a hundred requests each in flight at once, all held for the user:
//! nothing is lost (every request is in the inbox, every one gets exactly its own answer),
//! nothing is decided twice (a second decision is refused, the audit has one decision per
//! call), and the inbox keeps answering while the thousand wait. How long a request costs is
//! measured by the `agents` benchmark, not here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use agent::persist::AuditFilter;
use agent::{CallStatus, Decision};
use companion::view::{BatchDecision, DecisionInput};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const AGENTS: usize = 10;
const REQUESTS: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_agents_with_a_hundred_requests_each_lose_nothing_and_are_decided_once() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let url = app.connected_agents().url.unwrap();
    let mut asking = Vec::new();
    for a in 0..AGENTS {
        let new = app.add_connected_agent(&format!("Agent {a}")).unwrap();
        let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
            .auth_header(new.token.clone())
            .max_concurrent_requests(REQUESTS);
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        let client = ().serve(transport).await.unwrap();
        for r in 0..REQUESTS {
            let peer = client.peer().clone();
            let summary = format!("agent {a} request {r}");
            asking.push(tokio::spawn(async move {
                let params = CallToolRequestParams::new("request_approval")
                    .with_arguments(json!({"summary": summary}).as_object().cloned().unwrap());
                let result = peer.call_tool(params).await.unwrap();
                let text = result.content[0].as_text().unwrap().text.clone();
                (summary, serde_json::from_str::<Value>(&text).unwrap())
            }));
        }
        // Kept alive until every answer is in.
        std::mem::forget(client);
    }

    // Every request reaches the inbox, and the inbox answers while they wait.
    let held = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let pending = app.pending_calls().unwrap();
            if pending.len() == AGENTS * REQUESTS {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every request is held in the inbox");
    assert!(held.iter().all(|c| c.status == "awaiting_approval"));
    assert!(held.iter().all(|c| {
        c.requester
            .as_deref()
            .is_some_and(|r| r.starts_with("Agent "))
    }));

    // The user approves the even requests and rejects the odd ones, all at once.
    let mut expected = HashMap::new();
    let decisions: Vec<BatchDecision> = held
        .iter()
        .map(|c| {
            let summary = c.args["summary"].as_str().unwrap().to_owned();
            let r: usize = summary.rsplit(' ').next().unwrap().parse().unwrap();
            let approve = r.is_multiple_of(2);
            expected.insert(summary, approve);
            let decision = if approve {
                DecisionInput::Approve
            } else {
                DecisionInput::Reject {
                    reason: Some(format!("no to {}", c.call_id)),
                }
            };
            BatchDecision {
                call_id: c.call_id.clone(),
                decision,
            }
        })
        .collect();
    app.decide_many(decisions.clone()).await.unwrap();

    // Each request gets its own answer, exactly once.
    let mut answered = 0;
    for task in asking {
        let (summary, answer) = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("every request is answered")
            .unwrap();
        assert_eq!(
            answer["approved"], expected[&summary],
            "{summary}: {answer}"
        );
        answered += 1;
    }
    assert_eq!(answered, AGENTS * REQUESTS);
    assert!(app.pending().unwrap().is_empty());

    // Nothing is decided twice.
    for d in decisions.iter().take(20) {
        assert!(app.decide(&d.call_id, Decision::Approve).await.is_err());
    }
    let audit = app
        .audit(&AuditFilter {
            kind_prefix: Some("approval.".into()),
            ..AuditFilter::default()
        })
        .unwrap();
    let mut decided: HashMap<&str, usize> = HashMap::new();
    for entry in audit.iter().filter(|e| e.kind != "approval.requested") {
        *decided
            .entry(entry.call_id.as_deref().unwrap())
            .or_default() += 1;
    }
    assert_eq!(decided.len(), AGENTS * REQUESTS);
    assert!(decided.values().all(|n| *n == 1), "a call decided twice");
    for d in &decisions {
        let call = app.engine().store().call(&d.call_id).unwrap().unwrap();
        assert_eq!(call.status, CallStatus::Done);
    }
}
