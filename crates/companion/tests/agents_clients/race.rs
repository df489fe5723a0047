//! A decision made the moment a connected agent's call is held must not be lost. It was: the
//! engine's `send_message_as` released the session's lock and only then marked the turn as no
//! longer running, so a decision waiting for that lock committed `Approved` and its `resume`
//! found the session "busy" and returned; no other act comes to a connected agent's
//! one-request session, so the call stayed `Approved`, never ran, and the client waited for
//! ever (5 of 300 calls, before the engine stopped the turn running before unlocking).
//!
//! Each of those calls also tells the client that it waited for the user's approval, however
//! soon the decision came: the app once looked at the call only after the engine had held it,
//! and a call already decided by then answered without a word of waiting (seen from the stdio
//! relay's client in CI).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::{CallStatus, Decision};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;

use super::user;

/// The progress messages the client heard, by progress token.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl Heard {
    fn of(&self, token: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .get(token)
            .cloned()
            .unwrap_or_default()
    }
}

impl ClientHandler for Heard {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let token = serde_json::to_string(&params.progress_token).unwrap();
        let message = params.message.unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .entry(token)
            .or_default()
            .push(message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_decided_the_moment_it_is_held_still_runs_and_answers() {
    let demo = user::demo("Quick decider").await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(demo.url.clone())
        .auth_header(demo.token.clone());
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let heard = Heard::default();
    let client = heard.clone().serve(transport).await.unwrap();
    let mut seen = Vec::new();
    let mut stuck = Vec::new();
    let mut tokens = Vec::new();
    for i in 0..300 {
        let peer = client.peer().clone();
        let args = json!({"summary": format!("Step {i}")});
        let request = CallToolRequestParams::new("request_approval")
            .with_arguments(args.as_object().cloned().unwrap());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(request));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .unwrap();
        tokens.push(serde_json::to_string(&handle.progress_token).unwrap());
        let asking = tokio::spawn(handle.await_response());
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
    // The client hands notifications to tasks of their own: give the last ones a moment.
    let silent = || {
        tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| !heard.of(t).iter().any(|m| m.contains("approval")))
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    for _ in 0..100 {
        if silent().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        silent(),
        Vec::<usize>::new(),
        "calls answered without telling the client they waited for approval"
    );
}
