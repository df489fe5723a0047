//! A decision made the moment a connected agent's call is held must not be lost. It was: the
//! engine's `send_message_as` released the session's lock and only then marked the turn as no
//! longer running, so a decision waiting for that lock committed `Approved` and its `resume`
//! found the session "busy" and returned; no other act comes to a connected agent's
//! one-request session, so the call stayed `Approved`, never ran, and the client waited for
//! ever (5 of 300 calls, before the engine stopped the turn running before unlocking).

use std::time::Duration;

use agent::{CallStatus, Decision};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use super::user;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_decided_the_moment_it_is_held_still_runs_and_answers() {
    let demo = user::demo("Quick decider").await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(demo.url.clone())
        .auth_header(demo.token.clone());
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let client = ().serve(transport).await.unwrap();
    let mut seen = Vec::new();
    let mut stuck = Vec::new();
    for i in 0..300 {
        let peer = client.peer().clone();
        let args = json!({"summary": format!("Step {i}")});
        let request = CallToolRequestParams::new("request_approval")
            .with_arguments(args.as_object().cloned().unwrap());
        let asking = tokio::spawn(async move { peer.call_tool(request).await });
        let call = loop {
            let pending = demo.app.pending().unwrap();
            if let Some(c) = pending
                .into_iter()
                .find(|c| c.status == CallStatus::AwaitingApproval && !seen.contains(&c.call_id))
            {
                break c;
            }
            tokio::task::yield_now().await;
        };
        seen.push(call.call_id.clone());
        demo.app
            .decide(&call.call_id, Decision::Approve)
            .await
            .unwrap();
        if tokio::time::timeout(Duration::from_secs(3), asking)
            .await
            .is_err()
        {
            stuck.push(
                demo.app
                    .engine()
                    .store()
                    .call(&call.call_id)
                    .unwrap()
                    .unwrap()
                    .status,
            );
        }
    }
    assert!(
        stuck.is_empty(),
        "calls left unanswered, in these states: {stuck:?}"
    );
}
