//! The relay between a client speaking raw JSON-RPC lines and a real app server whose calls
//! report progress and answer at once: every call's progress must reach the client before its
//! answer, as the app sent them. (rmcp hands each notification to a task of its own; passed on
//! from there, a progress sent just before the answer came after it or was dropped.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{RelayTarget, serve_on};
use crate::serve::{Caller, Gateway, GatewayError, Progress, Refusal, http};

/// Calls one after another: enough that the old relay, on busy cores, lost some call's progress
/// in most runs.
const CALLS: u64 = 40;

/// Answers every call at once, right after one progress notification.
struct AnswersAtOnce;

#[async_trait]
impl Gateway for AnswersAtOnce {
    fn authenticate(&self, token: &str) -> Result<String, Refusal> {
        (token == "secret")
            .then(|| "client".to_owned())
            .ok_or(Refusal::Unknown)
    }

    async fn tools(&self, _caller: &Caller) -> Vec<Tool> {
        vec![Tool::new("wait", "Waits", Arc::new(JsonObject::new()))]
    }

    async fn call(
        &self,
        _caller: &Caller,
        _tool: &str,
        args: JsonObject,
        progress: Progress,
        _cancel: CancellationToken,
    ) -> Result<CallToolResult, GatewayError> {
        progress.report("Waiting for the user's approval").await;
        let n = args.get("n").cloned().unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(
            n.to_string(),
        )]))
    }
}

/// The client's side: newline-delimited JSON-RPC, read in the order the relay wrote it.
struct Client {
    to_relay: WriteHalf<DuplexStream>,
    from_relay: Lines<BufReader<ReadHalf<DuplexStream>>>,
}

impl Client {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.to_relay.write_all(line.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.from_relay.next_line())
            .await
            .expect("the relay answers within 30 s")
            .unwrap()
            .expect("the relay keeps its output open");
        serde_json::from_str(&line).unwrap()
    }

    /// The messages up to and including the answer to request `id`.
    async fn until_answer(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let done = message["id"] == json!(id);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_calls_progress_reaches_the_client_before_its_answer() {
    let cancel = CancellationToken::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let router = http::router(Arc::new(AnswersAtOnce), cancel.clone());
    tokio::spawn(http::serve(listener, router, cancel.clone()));

    let (client_end, relay_end) = tokio::io::duplex(64 * 1024);
    let (relay_in, relay_out) = tokio::io::split(relay_end);
    let target = RelayTarget {
        url,
        token: "secret".to_owned(),
        project: None,
    };
    let relay = std::thread::spawn(move || serve_on(target, relay_in, relay_out));
    let (from_relay, to_relay) = tokio::io::split(client_end);
    let mut client = Client {
        to_relay,
        from_relay: BufReader::new(from_relay).lines(),
    };

    client
        .send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            }}),
        )
        .await;
    let hello = client.until_answer(0).await;
    assert!(
        hello.last().unwrap()["result"]["serverInfo"].is_object(),
        "{hello:?}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let mut late = Vec::new();
    for id in 1..=CALLS {
        client
            .send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                    "name": "wait",
                    "arguments": {"n": id},
                    "_meta": {"progressToken": format!("p{id}")},
                }}),
            )
            .await;
        let seen = client.until_answer(id).await;
        let answer = seen.last().unwrap();
        assert_eq!(
            answer["result"]["content"][0]["text"],
            json!(id.to_string()),
            "{answer}"
        );
        let heard: Vec<&Value> = seen
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter(|m| m["params"]["progressToken"] == json!(format!("p{id}")))
            .collect();
        if heard.len() != 1 {
            late.push(id);
        }
        assert!(
            heard
                .iter()
                .all(|m| m["params"]["message"] == "Waiting for the user's approval"),
            "{heard:?}"
        );
    }
    assert_eq!(
        late,
        Vec::<u64>::new(),
        "calls whose one progress notification was not heard before their answer"
    );

    // Closing the client's end stops the relay.
    drop(client);
    relay.join().unwrap().unwrap();
    cancel.cancel();
}
