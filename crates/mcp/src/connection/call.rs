//! A call of a tool over a running connection: the credentials' headers, one retry when they
//! renewed themselves after a challenge, a progress route for the call's card, a timeout that
//! progress resets, and a guard that tells the server `notifications/cancelled` when the call
//! is dropped unfinished (a turn the user stopped). A refusal the credentials can cure becomes
//! their result.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Map, Value};

use super::{CallError, Connection, Live, Phase, State, backoff};
use crate::handler::{ProgressRoutes, token_key};

impl Connection {
    /// Calls `tool` with `args` for the engine's call `call_id`.
    pub async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        call_id: &str,
    ) -> Result<CallToolResult, CallError> {
        let mut retry = true;
        loop {
            let headers = self.changing_headers(tool).await?;
            match self.call_once(tool, args.clone(), call_id, &headers).await {
                Err(CallError::AuthRequired(challenge)) => {
                    self.challenged(tool, challenge, &headers, &mut retry)
                        .await?;
                }
                other => return other,
            }
        }
    }

    /// One try of [`Self::call`], with the credentials' `headers`.
    async fn call_once(
        &self,
        tool: &str,
        args: Map<String, Value>,
        call_id: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<CallToolResult, CallError> {
        let live = self.live(headers).await?;
        let timeout = Duration::from_secs(u64::from(self.resolved.config.timeout_secs));
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(args);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // Progress keeps a long call alive, up to ten timeouts in all.
        let options = PeerRequestOptions::with_timeout(timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(timeout * 10);
        let peer = live.service.peer().clone();
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(e) => return Err(self.failed_during_call(&live, e).await),
        };
        let key = token_key(&handle.progress_token);
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), call_id.to_owned());
        let mut guard = CancelOnDrop {
            peer,
            id: Some(handle.id.clone()),
            routes: self.routes.clone(),
            key,
        };
        let answer = handle.await_response().await;
        guard.id = None;
        drop(guard);
        let answer = match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(ServerResult::InputRequiredResult(_)) => Err(CallError::Unsupported(
                "it asked for more input during the call".to_owned(),
            )),
            Ok(ServerResult::CreateTaskResult(_)) => Err(CallError::Unsupported(
                "it answered with a task to poll".to_owned(),
            )),
            Ok(_) => Err(CallError::Unsupported(
                "an answer of another kind".to_owned(),
            )),
            Err(e) => Err(self.failed_during_call(&live, e).await),
        };
        match answer {
            Err(e) => Err(self.cure(tool, e).await),
            Ok(result) if result.is_error == Some(true) => match &self.resolved.credentials {
                Some(credentials) => {
                    let text = crate::outcome::text_of(&result);
                    match credentials.on_error_result(tool, &text).await {
                        Some(cured) => Err(CallError::NeedsAuth(cured)),
                        None => Ok(result),
                    }
                }
                None => Ok(result),
            },
            ok => ok,
        }
    }

    /// A refusal the credentials can cure becomes their result (sign in, then run again).
    async fn cure(&self, tool: &str, error: CallError) -> CallError {
        let (Some(credentials), CallError::Refused { code, message }) =
            (&self.resolved.credentials, &error)
        else {
            return error;
        };
        match credentials
            .on_refusal(tool, i64::from(*code), message)
            .await
        {
            Some(result) => CallError::NeedsAuth(result),
            None => error,
        }
    }

    /// Classifies a failed call, and forgets a connection that is gone.
    async fn failed_during_call(&self, live: &Arc<Live>, error: ServiceError) -> CallError {
        if let Some(challenge) = error.auth_challenge() {
            return CallError::AuthRequired(challenge.to_owned());
        }
        match error {
            ServiceError::McpError(e) => CallError::Refused {
                code: e.code.0,
                message: e.message.to_string(),
            },
            ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
            other => {
                let why = match self.stderr_tail() {
                    Some(line) => format!("{other}; its last words: {line}"),
                    None => other.to_string(),
                };
                let mut state = self.state.lock().await;
                if matches!(&*state, State::Live(l) if Arc::ptr_eq(l, live)) {
                    // One crash is restarted at once for the next call; crashes in a row
                    // wait longer each time.
                    let failures = live.failures_if_ended();
                    *state = State::Failed {
                        error: why.clone(),
                        next_try: Instant::now() + backoff(failures.saturating_sub(1)),
                        failures,
                    };
                    self.set_status(|s| {
                        s.phase = Phase::Failed;
                        s.error = Some(why.clone());
                    });
                }
                CallError::Crashed(why)
            }
        }
    }
}

/// Tells the server to stop a call that was dropped before its answer (a turn the user
/// stopped), and forgets the call's progress route either way.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    routes: ProgressRoutes,
    key: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            // Drop cannot wait: the notice goes from a task of its own. Outside a runtime
            // (only at shutdown) there is nobody to tell.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(id),
                            Some("cancelled by the user".to_owned()),
                        ))
                        .await;
                });
            }
        }
    }
}
