//! Dispatch and its journal: a ready call runs through the tool callbacks and the tool; a write
//! runs only with an approval whose argument hash equals what is sent, and is journalled
//! (`started` in its own commit before it is sent, `finished` with its answer), so a crash leaves
//! a trace recovery can act on. A tool asking for sign-in parks the call instead of answering it.
//! Settling a write whose outcome a crash made unknown closes its journal rows.

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError, SessionCache, Settlement, Turn, TurnOutcome, args_hash, object};
use crate::content::{Content, FunctionResponse, Part, ROLE_USER};
use crate::context::ToolContext;
use crate::event::{Event, EventActions};
use crate::persist::{
    CallRecord, CallStatus, Commit, InvocationRecord, JournalEntry, JournalOp, Verdict,
};
use crate::result::{ToolOutcome, ToolResult, ToolReturn, coerce_tool_result};
use crate::state::StateMap;

impl Engine {
    pub(super) fn mark_done(&self, call: &mut CallRecord, outcome: ToolOutcome) {
        call.status = CallStatus::Done;
        call.outcome = Some(outcome);
        call.updated_at = self.now();
        call.version += 1;
    }

    /// The function-response event for `call`, and the outcome it carries.
    pub(super) fn response_event(
        &self,
        turn: &Turn,
        call: &CallRecord,
        result: ToolReturn,
        actions: EventActions,
        note: Option<Value>,
    ) -> (Event, ToolOutcome) {
        let (text, is_error, structured) = coerce_tool_result(result);
        let outcome = structured
            .as_ref()
            .map_or(ToolOutcome::Completed, |r| r.outcome);
        let mut response = Map::new();
        response.insert(
            (if is_error { "error" } else { "output" }).to_owned(),
            Value::String(text),
        );
        if outcome != ToolOutcome::Completed {
            response.insert("outcome".to_owned(), json!(outcome));
        }
        if let Some(original) = &call.original_args {
            response.insert("edited_args".to_owned(), Value::Object(call.args.clone()));
            response.insert("original_args".to_owned(), Value::Object(original.clone()));
            response.insert(
                "note".to_owned(),
                json!(
                    "The user edited the arguments before approving; the call ran with edited_args."
                ),
            );
        }
        if let Some(note) = note {
            response.insert("note".to_owned(), note);
        }
        let function_response = FunctionResponse {
            id: Some(call.call_id.clone()),
            name: call.tool.clone(),
            response,
        };
        let mut event = self.agent_event(
            turn,
            Some(Content::new(
                ROLE_USER,
                vec![Part::FunctionResponse(function_response)],
            )),
        );
        event.branch = call.branch.clone();
        event.author = call.agent_name.clone();
        event.actions = actions;
        (event, outcome)
    }

    /// Runs one ready call: callbacks, journal, the tool, and its answer.
    pub(super) async fn dispatch(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        mut call: CallRecord,
    ) -> Result<(), EngineError> {
        let node = self.node(&call.agent_name);
        let agent = node.agent.clone();
        let mut tool_turn_ctx = Turn {
            inv: InvocationRecord {
                agent_name: call.agent_name.clone(),
                ..turn.inv.clone()
            },
            temp: turn.temp.clone(),
            cancel: turn.cancel.clone(),
        };
        let ctx = self.callback_context(s, &tool_turn_ctx);
        let mut ctx = ToolContext::new(ctx, call.call_id.clone())
            .with_idempotency_key(call.idempotency_key.clone());
        let mut args = call.args.clone();
        let approved_hash = call
            .decision
            .as_ref()
            .filter(|d| matches!(d.verdict, Verdict::Approved | Verdict::ApprovedEdited))
            .and_then(|d| d.args_hash.clone());
        let mut commit = Commit::default();
        let mut attempt = None;
        // An approval recorded after the request expired is no approval: whatever let it
        // through, the write is not sent.
        let approved_late = call.requires_approval
            && call.decision.as_ref().is_some_and(|d| {
                super::decided_by_user(&d.decided_by)
                    && call.expires_at.is_some_and(|at| d.decided_at >= at)
            });
        let result: ToolReturn = if approved_late {
            ToolResult::new(ToolOutcome::Cancelled)
                .with_content(
                    "Refused: the approval came after the request had expired, so the call was not sent.",
                )
                .into()
        } else if call.requires_approval
            && approved_hash.as_deref() != Some(args_hash(&args).as_str())
        {
            ToolResult::new(ToolOutcome::Failed)
                .with_content("Refused: there is no approval for exactly these arguments.")
                .into()
        } else if let Some(short) = agent
            .callbacks
            .before_tool
            .iter()
            .find_map(|cb| cb(&mut ctx, &call.tool, &mut args))
        {
            short
        } else if call.requires_approval
            && approved_hash.as_deref() != Some(args_hash(&args).as_str())
        {
            ToolResult::new(ToolOutcome::Failed)
                .with_content(
                    "Refused: a callback changed the approved arguments, so the call was not sent.",
                )
                .into()
        } else if let Some(tool) = agent.tool(&call.tool).cloned() {
            if call.requires_approval {
                let n = self.inner.store.dispatches(&call.call_id)?.len() as u32 + 1;
                attempt = Some(n);
                call.status = CallStatus::Dispatching;
                call.updated_at = self.now();
                call.version += 1;
                let entry = JournalEntry {
                    call_id: call.call_id.clone(),
                    attempt: n,
                    session_id: s.id.clone(),
                    tool: call.tool.clone(),
                    idempotency_key: call.idempotency_key.clone(),
                    args_hash: args_hash(&args),
                    started_at: self.now(),
                    finished_at: None,
                    outcome: None,
                };
                let audit = self.audit(
                    s,
                    Some(&call),
                    "call.dispatched",
                    &format!("agent:{}", call.agent_name),
                    json!({"args": args, "attempt": n, "idempotency_key": call.idempotency_key}),
                );
                self.commit(
                    s,
                    Commit {
                        calls: vec![call.clone()],
                        journal: vec![JournalOp::Start(entry)],
                        audit: vec![audit],
                        ..Commit::default()
                    },
                )?;
                // A write in flight is never abandoned half-way: cancellation waits for it.
                run_guarded(tool.run(args.clone(), &mut ctx)).await
            } else {
                let cancel = turn.cancel.clone();
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => ToolResult::new(ToolOutcome::Cancelled).with_content("cancelled by the user").into(),
                    result = run_guarded(tool.run(args.clone(), &mut ctx)) => result,
                }
            }
        } else {
            ToolResult::new(ToolOutcome::Failed)
                .with_content(format!("The tool {} is no longer available.", call.tool))
                .into()
        };
        let result = agent
            .callbacks
            .after_tool
            .iter()
            .find_map(|cb| cb(&mut ctx, &call.tool, &args, &result))
            .unwrap_or(result);
        let mut actions = std::mem::take(&mut ctx.actions);
        Self::absorb(&mut tool_turn_ctx, &mut ctx, &mut actions.state_delta);
        drop(ctx);
        turn.temp = tool_turn_ctx.temp;
        let structured = match &result {
            ToolReturn::Result(r) => Some(r.clone()),
            _ => None,
        };
        let outcome = structured
            .as_ref()
            .map_or(ToolOutcome::Completed, |r| r.outcome);
        if let Some(n) = attempt {
            commit.journal.push(JournalOp::Finish {
                call_id: call.call_id.clone(),
                attempt: n,
                finished_at: self.now(),
                outcome: Some(outcome),
            });
        }
        if outcome == ToolOutcome::NeedsUserAuth {
            let structured =
                structured.unwrap_or_else(|| ToolResult::new(ToolOutcome::NeedsUserAuth));
            let scopes = if structured.auth_scopes.is_empty() {
                agent
                    .tool(&call.tool)
                    .map(|t| t.scopes())
                    .unwrap_or_default()
            } else {
                structured.auth_scopes.clone()
            };
            call.status = CallStatus::AwaitingAuth;
            call.auth_scopes = scopes.clone();
            call.authorize_url = structured.authorize_url.clone();
            call.updated_at = self.now();
            call.version += 1;
            let mut event = self.agent_event(turn, None);
            event.author = call.agent_name.clone();
            event.branch = call.branch.clone();
            actions.requested_auth_configs.insert(
                call.call_id.clone(),
                object(json!({
                    "tool": call.tool,
                    "scopes": scopes,
                    "authorize_url": structured.authorize_url,
                    "message": coerce_tool_result(structured.clone()).0,
                })),
            );
            event.actions = actions;
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "auth.requested",
                &format!("agent:{}", call.agent_name),
                json!({"scopes": call.auth_scopes}),
            ));
            commit.events.push(event);
            commit.calls.push(call);
        } else {
            let (event, outcome) = self.response_event(turn, &call, result, actions, None);
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.completed",
                &format!("agent:{}", call.agent_name),
                json!({"outcome": outcome}),
            ));
            self.mark_done(&mut call, outcome);
            commit.events.push(event);
            commit.calls.push(call);
        }
        self.commit(s, commit)
    }

    pub(super) fn answer(
        &self,
        s: &mut SessionCache,
        inv: &InvocationRecord,
        mut call: CallRecord,
        result: ToolResult,
        kind: &str,
        journal: Vec<JournalOp>,
    ) -> Result<(), EngineError> {
        let turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        let outcome = result.outcome;

        let (event, _) =
            self.response_event(&turn, &call, result.into(), EventActions::default(), None);
        let audit = self.audit(s, Some(&call), kind, "user", json!({"outcome": outcome}));
        self.mark_done(&mut call, outcome);
        self.commit(
            s,
            Commit {
                events: vec![event],
                calls: vec![call],
                audit: vec![audit],
                journal,
                ..Commit::default()
            },
        )
    }

    /// Closes the journal rows of a call's attempts that never finished, with what is now known
    /// of them, so the journal says how every write ended and recovery stops rereading them.
    pub(super) fn close_attempts(
        &self,
        call_id: &str,
        outcome: Option<ToolOutcome>,
    ) -> Result<Vec<JournalOp>, EngineError> {
        Ok(self
            .inner
            .store
            .dispatches(call_id)?
            .into_iter()
            .filter(|entry| entry.finished_at.is_none())
            .map(|entry| JournalOp::Finish {
                call_id: entry.call_id,
                attempt: entry.attempt,
                finished_at: self.now(),
                outcome,
            })
            .collect())
    }

    /// Settles a write whose outcome a crash made unknown.
    pub async fn settle(
        &self,
        call_id: &str,
        settlement: Settlement,
    ) -> Result<TurnOutcome, EngineError> {
        let (mut guard, mut call, inv) = self
            .held_call(call_id, &[CallStatus::OutcomeUnknown])
            .await?;
        let s = guard.cache();
        match settlement {
            Settlement::Happened => {
                let journal = self.close_attempts(call_id, Some(ToolOutcome::Completed))?;
                self.answer(
                    s,
                    &inv,
                    call,
                    ToolResult::new(ToolOutcome::Completed)
                        .with_content("The user confirmed that this call took effect."),
                    "call.settled",
                    journal,
                )?;
            }
            Settlement::DidNotHappen => {
                let journal = self.close_attempts(call_id, Some(ToolOutcome::Failed))?;
                self.answer(
                    s,
                    &inv,
                    call,
                    ToolResult::new(ToolOutcome::Failed)
                        .with_content("The call did not take effect (confirmed by the user)."),
                    "call.settled",
                    journal,
                )?;
            }
            Settlement::Retry => {
                let journal = self.close_attempts(call_id, None)?;
                call.status = CallStatus::Approved;
                call.updated_at = self.now();
                call.version += 1;
                let audit = self.audit(s, Some(&call), "call.retry", "user", json!({}));
                self.commit(
                    s,
                    Commit {
                        calls: vec![call],
                        audit: vec![audit],
                        journal,
                        ..Commit::default()
                    },
                )?;
            }
        }
        self.resume(s, inv).await
    }
}

/// Runs a tool, turning a panic into a `FAILED` result instead of taking the engine down.
pub(super) async fn run_guarded<F: std::future::Future<Output = ToolReturn>>(
    future: F,
) -> ToolReturn {
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(_) => ToolResult::new(ToolOutcome::Failed)
            .with_content("The tool crashed.")
            .into(),
    }
}
