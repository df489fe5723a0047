//! One request of a connected agent, through the engine's own gate. The request becomes a turn
//! of the agent's *detached* engine agent in a session of its own: its model is a relay
//! ([`relay_model`]) that proposes exactly the call the client asked for, so classification,
//! rules, holding, expiry, sign-in, Feishu cards, dispatch and the audit are the very ones the
//! app's own assistant goes through. The request then waits for the call's end, reporting where
//! it stands; if the client goes away first, the turn is abandoned and the call never runs.

use std::sync::Arc;
use std::time::Duration;

use agent::persist::CallFilter;
use agent::{
    CallRecord, CallStatus, Content, EngineEvent, FunctionCall, LlmResponse, Part, ScriptedModel,
    ToolOutcome, Verdict,
};
use mcp::serve::{Caller, GatewayError, Progress};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::Agents;
use super::tools::{APPROVE, REQUEST_APPROVAL, flatten_permission, updated_input};

/// While a call waits, the client hears where it stands this often (and at every change).
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The marker the relay's request text starts with.
const RELAY_PREFIX: &str = "mcp-request ";

/// The model of every connected agent: proposes the call its request names, then ends the turn
/// without a word once the call is answered.
pub(crate) fn relay_model() -> Arc<dyn agent::Model> {
    Arc::new(ScriptedModel::from_fn(|request| {
        let last = request.contents.last();
        let answered = last.is_some_and(|c| c.function_responses().next().is_some());
        let asked = last
            .filter(|_| !answered)
            .map(Content::text)
            .and_then(|text| text.strip_prefix(RELAY_PREFIX).map(str::to_owned))
            .and_then(|json| serde_json::from_str::<Value>(&json).ok());
        let Some(asked) = asked else {
            return Ok(LlmResponse::from_parts(Vec::new()));
        };
        let name = asked["tool"].as_str().unwrap_or_default().to_owned();
        let args = asked["args"].as_object().cloned().unwrap_or_default();
        Ok(LlmResponse::from_parts(vec![Part::FunctionCall(
            FunctionCall {
                id: None,
                name,
                args,
            },
        )]))
    }))
}

/// The user message a request becomes: readable in the session, parsed by [`relay_model`].
fn relay_request(tool: &str, args: &Map<String, Value>) -> Content {
    Content::user_text(format!(
        "{RELAY_PREFIX}{}",
        json!({"tool": tool, "args": args})
    ))
}

fn internal(e: impl std::fmt::Display) -> GatewayError {
    GatewayError::Internal(e.to_string())
}

impl Agents {
    /// Runs one tool call of a connected agent through the gate and answers it.
    pub(crate) async fn agent_call(
        &self,
        caller: &Caller,
        tool: &str,
        args: Map<String, Value>,
        progress: Progress,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, GatewayError> {
        let client = self
            .agent_registry()
            .client(&caller.client_id)
            .filter(super::registry::ClientRecord::active)
            .ok_or_else(|| internal("this agent was revoked"))?;
        if !self.agent_tools(&client).iter().any(|t| t.name() == tool) {
            return Err(GatewayError::UnknownTool(tool.to_owned()));
        }
        let project = caller.project.as_deref();
        let args = match tool {
            APPROVE => flatten_permission(args, project),
            _ => match project {
                Some(p) if tool == REQUEST_APPROVAL => {
                    let mut args = args;
                    args.insert("project".to_owned(), json!(p));
                    args
                }
                _ => args,
            },
        };
        let engine = self.engine();
        let owner = self.agents_user_id();
        let session = engine
            .create_session(&owner, &Default::default())
            .map_err(internal)?;
        let events = engine.subscribe();
        let outcome = engine
            .send_message_as(&session, &client.id, relay_request(tool, &args))
            .await
            .map_err(internal)?;
        self.wait_for_answer(
            tool,
            &session,
            &outcome.invocation_id,
            events,
            progress,
            cancel,
        )
        .await
    }

    /// Waits for the call of `invocation` to end, telling the client where it stands, and
    /// answers it; abandons it when `cancel` fires first.
    async fn wait_for_answer(
        &self,
        tool: &str,
        session: &str,
        invocation: &str,
        mut events: Events,
        progress: Progress,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, GatewayError> {
        let engine = self.engine();
        let filter = CallFilter {
            invocation_id: Some(invocation.to_owned()),
            ..CallFilter::default()
        };
        let mut teller = Teller {
            progress,
            said: None,
        };
        let mut heard = Vec::new();
        loop {
            // What the engine said of the call since the last look, in order, so a call decided
            // the instant it was held still tells the client that it waited for the user.
            drain_changes(&mut events, session, &mut heard);
            for status in heard.drain(..) {
                teller.heard(status).await;
            }
            let call = engine
                .store()
                .calls(&filter)
                .map_err(internal)?
                .into_iter()
                .next();
            let Some(call) = call else {
                return Err(internal("the request made no call"));
            };
            if call.status == CallStatus::Done {
                return Ok(self.answer(tool, &call));
            }
            teller.tell(call.status).await;
            tokio::select! {
                () = cancel.cancelled() => {
                    // The client went away: the call is marked abandoned and never runs.
                    if let Err(e) = engine.abandon(session).await {
                        tracing::warn!(error = %e, "an abandoned request could not be closed");
                    }
                    return Err(internal("the request was cancelled"));
                }
                () = next_change(&mut events, session, &mut heard) => {}
                () = tokio::time::sleep(REPORT_EVERY) => teller.said = None,
            }
        }
    }

    /// What the client is told of a finished call.
    fn answer(&self, tool: &str, call: &CallRecord) -> CallToolResult {
        let verdict = call.decision.as_ref().map(|d| d.verdict);
        let ran = !matches!(
            verdict,
            Some(Verdict::Rejected | Verdict::Expired | Verdict::Superseded | Verdict::Cancelled)
        ) && call.outcome != Some(ToolOutcome::Cancelled);
        let why = refusal_reason(call);
        match tool {
            APPROVE if ran && call.outcome == Some(ToolOutcome::Completed) => text(
                json!({"behavior": "allow", "updatedInput": updated_input(&call.args)}),
                false,
            ),
            APPROVE => text(json!({"behavior": "deny", "message": why}), false),
            REQUEST_APPROVAL if ran && call.outcome == Some(ToolOutcome::Completed) => {
                text(json!({"approved": true}), false)
            }
            REQUEST_APPROVAL => text(json!({"approved": false, "reason": why}), false),
            _ if !ran => text(Value::String(why), true),
            _ => {
                let response = self.function_response(call).unwrap_or_default();
                let failed = call.outcome != Some(ToolOutcome::Completed)
                    && call.outcome != Some(ToolOutcome::Informational);
                text(Value::Object(response), failed)
            }
        }
    }

    /// The answer the engine stored for `call`.
    fn function_response(&self, call: &CallRecord) -> Option<Map<String, Value>> {
        let events = self.store().load_session(&call.session_id).ok()?.events;
        events.iter().rev().find_map(|event| {
            event
                .content
                .as_ref()?
                .function_responses()
                .find(|r| r.id.as_deref() == Some(&call.call_id))
                .map(|r| r.response.clone())
        })
    }
}

type Events = tokio::sync::broadcast::Receiver<EngineEvent>;

/// Tells a waiting client each status of its call once (again after [`REPORT_EVERY`]).
struct Teller {
    progress: Progress,
    said: Option<CallStatus>,
}

impl Teller {
    async fn tell(&mut self, status: CallStatus) {
        if self.said != Some(status) {
            self.progress.report(waiting_message(status)).await;
            self.said = Some(status);
        }
    }

    /// A status an engine event carried: told when the call waits or has waited (a read
    /// answered at once hears nothing but its answer), never `Done` (the answer says that).
    async fn heard(&mut self, status: CallStatus) {
        let waits = matches!(
            status,
            CallStatus::AwaitingApproval | CallStatus::AwaitingAuth | CallStatus::OutcomeUnknown
        );
        if (waits || self.said.is_some()) && status != CallStatus::Done {
            self.tell(status).await;
        }
    }
}

/// Whether `event` is of `session`, adding the call's status to `heard` when it is a call's.
fn of_session(event: &EngineEvent, session: &str, heard: &mut Vec<CallStatus>) -> bool {
    match event {
        EngineEvent::Call(call) if call.session_id == session => {
            heard.push(call.status);
            true
        }
        EngineEvent::Call(_) => false,
        EngineEvent::Invocation(inv) => inv.session_id == session,
        EngineEvent::Event { session_id, .. } => session_id == session,
    }
}

/// Waits for an engine event of `session` (or for events missed, which may have been one):
/// a thousand waiting requests must not each query the store at every other one's change.
async fn next_change(events: &mut Events, session: &str, heard: &mut Vec<CallStatus>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let ours = match events.recv().await {
            Ok(event) => of_session(&event, session, heard),
            Err(RecvError::Lagged(_)) => true,
            // The engine was replaced (settings changed): look again, then wait on the timer.
            Err(RecvError::Closed) => return std::future::pending().await,
        };
        if ours {
            return;
        }
    }
}

/// The statuses of `session`'s call in the events already received, without waiting.
fn drain_changes(events: &mut Events, session: &str, heard: &mut Vec<CallStatus>) {
    use tokio::sync::broadcast::error::TryRecvError;
    loop {
        match events.try_recv() {
            Ok(event) => {
                of_session(&event, session, heard);
            }
            Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => return,
        }
    }
}

/// What a waiting call tells the client (repeated every [`REPORT_EVERY`], so a client whose
/// request timeout resets on progress keeps waiting).
fn waiting_message(status: CallStatus) -> &'static str {
    match status {
        CallStatus::AwaitingApproval => {
            "Waiting for the user's approval in Feishu Companion (等待用户在飞书助手中审批)"
        }
        CallStatus::AwaitingAuth => {
            "Waiting for the user to sign in to Feishu in Feishu Companion (等待用户登录飞书授权)"
        }
        CallStatus::OutcomeUnknown => "Waiting for the user to say whether it happened",
        CallStatus::Approved | CallStatus::Dispatching | CallStatus::Done => "Running",
    }
}

/// Why a call did not run, in words the other agent can pass on.
fn refusal_reason(call: &CallRecord) -> String {
    let Some(decision) = &call.decision else {
        return "It did not run.".to_owned();
    };
    let reason = decision.reason.clone().filter(|r| !r.trim().is_empty());
    match (decision.verdict, reason) {
        (Verdict::Rejected, Some(r)) => format!("The user rejected this in Feishu Companion: {r}"),
        (Verdict::Rejected, None) => "The user rejected this in Feishu Companion.".to_owned(),
        (Verdict::Expired, _) => "No decision came before the approval expired.".to_owned(),
        (_, Some(r)) => format!("It did not run: {r}"),
        _ => "It did not run.".to_owned(),
    }
}

fn text(value: Value, is_error: bool) -> CallToolResult {
    let shown = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let content = vec![ContentBlock::text(shown)];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}
