//! Credentials that change while a server runs: asked before each call, given to a stdio
//! server as its environment (it is started again when they change), and an error result they
//! recognise held behind the app's authorization instead of passed to the model.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agent::{ToolOutcome, ToolResult, ToolReturn};
use async_trait::async_trait;
use mcp::{CallError, Credentials};
use serde_json::json;

use super::*;

#[derive(Debug)]
struct Token(Mutex<Option<String>>);

fn needs_auth() -> ToolReturn {
    ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_auth_scopes(["docx:document"])
        .into()
}

#[async_trait]
impl Credentials for Token {
    async fn headers(&self, _tool: &str) -> Result<BTreeMap<String, String>, ToolReturn> {
        match self.0.lock().unwrap().clone() {
            Some(t) => Ok(BTreeMap::from([("COMPANION_PROBE_TOKEN".to_owned(), t)])),
            None => Err(needs_auth()),
        }
    }

    async fn on_refusal(&self, _tool: &str, _code: i64, _message: &str) -> Option<ToolReturn> {
        None
    }

    async fn on_error_result(&self, _tool: &str, text: &str) -> Option<ToolReturn> {
        text.contains("99991679").then(needs_auth)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_token_restarts_a_stdio_server_with_it() {
    let token = Arc::new(Token(Mutex::new(None)));
    let mut resolved = node_server("everything", EVERYTHING, &["stdio"], &[]);
    resolved.credentials = Some(token.clone());
    let (_hub, conn) = one(resolved);
    // No token yet: the call is held, and the server is not even started.
    match conn.call("get-env", args(json!({})), "c1").await {
        Err(CallError::NeedsAuth(r)) => assert_eq!(r, needs_auth()),
        other => panic!("{other:?}"),
    }
    assert_eq!(conn.status().starts, 0);
    *token.0.lock().unwrap() = Some("first-token".into());
    let env = conn.call("get-env", args(json!({})), "c2").await.unwrap();
    assert!(
        serde_json::to_string(&env.content)
            .unwrap()
            .contains("first-token")
    );
    *token.0.lock().unwrap() = Some("second-token".into());
    let env = conn.call("get-env", args(json!({})), "c3").await.unwrap();
    let text = serde_json::to_string(&env.content).unwrap();
    assert!(
        text.contains("second-token") && !text.contains("first-token"),
        "{text}"
    );
    assert_eq!(conn.status().starts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_result_the_credentials_recognise_is_held_for_sign_in() {
    let token = Arc::new(Token(Mutex::new(Some("t".into()))));
    let mut resolved = node_server("probe", PROBE, &[], &[]);
    resolved.credentials = Some(token);
    let (_hub, conn) = one(resolved);
    let held = conn
        .call(
            "fail_with",
            args(json!({"text": "{\"code\":99991679,\"msg\":\"scope\"}"})),
            "c1",
        )
        .await;
    assert!(matches!(held, Err(CallError::NeedsAuth(_))), "{held:?}");
    // Another error result is the tool's own answer, passed on.
    let other = conn
        .call("fail_with", args(json!({"text": "no such record"})), "c2")
        .await
        .unwrap();
    assert_eq!(other.is_error, Some(true));
}
