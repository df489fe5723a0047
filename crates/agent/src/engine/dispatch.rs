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
use crate::agent::LlmAgent;
use crate::content::{Content, FunctionResponse, Part, ROLE_USER};
use crate::context::ToolContext;
use crate::event::{Event, EventActions};
use crate::persist::{
    AuditEntry, CallRecord, CallStatus, Commit, InvocationRecord, JournalEntry, JournalOp, Verdict,
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
        // One agent for the whole call: a swap while the tool runs must not change whose
        // callbacks and scopes apply half-way.
        let agent = self.node(&call.agent_name).agent.clone();
        // The call runs as the agent that made it, even when the turn has since moved on to
        // another (a held call approved after a transfer).
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
        let (result, attempt) = self
            .call_tool(s, &turn.cancel, &agent, &mut call, &mut ctx, &mut args)
            .await?;
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
        let mut commit = Commit::default();
        // The journal row closes in the same commit as the answer, so a crash after this point
        // never makes recovery doubt a write that is already answered.
        if let Some(n) = attempt {
            commit.journal.push(JournalOp::Finish {
                call_id: call.call_id.clone(),
                attempt: n,
                finished_at: self.now(),
                outcome: Some(outcome),
            });
        }
        let (event, audit) = if outcome == ToolOutcome::NeedsUserAuth {
            let structured =
                structured.unwrap_or_else(|| ToolResult::new(ToolOutcome::NeedsUserAuth));
            self.park_for_sign_in(s, turn, &agent, &mut call, structured, actions)
        } else {
            self.answer_dispatched(s, turn, &mut call, result, actions)
        };
        commit.audit.push(audit);
        commit.events.push(event);
        commit.calls.push(call);
        self.commit(s, commit)
    }

    /// Runs the tool, or says why it may not run. A write runs only under an approval of exactly
    /// the arguments sent — checked again after the before_tool callbacks, which may change
    /// them — and is journalled before it is sent. Returns the result and, for a write, the
    /// journal attempt to close.
    async fn call_tool(
        &self,
        s: &mut SessionCache,
        cancel: &CancellationToken,
        agent: &LlmAgent,
        call: &mut CallRecord,
        ctx: &mut ToolContext,
        args: &mut Map<String, Value>,
    ) -> Result<(ToolReturn, Option<u32>), EngineError> {
        let approved_hash = approved_hash(call);
        let unapproved =
            |args: &Map<String, Value>| approved_hash.as_deref() != Some(args_hash(args).as_str());
        if approved_late(call) {
            let result = ToolResult::new(ToolOutcome::Cancelled).with_content(
                "Refused: the approval came after the request had expired, so the call was not sent.",
            );
            return Ok((result.into(), None));
        }
        if call.requires_approval && unapproved(args) {
            let result = ToolResult::new(ToolOutcome::Failed)
                .with_content("Refused: there is no approval for exactly these arguments.");
            return Ok((result.into(), None));
        }
        if let Some(short) = agent
            .callbacks
            .before_tool
            .iter()
            .find_map(|cb| cb(ctx, &call.tool, args))
        {
            return Ok((short, None));
        }
        if call.requires_approval && unapproved(args) {
            let result = ToolResult::new(ToolOutcome::Failed).with_content(
                "Refused: a callback changed the approved arguments, so the call was not sent.",
            );
            return Ok((result.into(), None));
        }
        let Some(tool) = agent.tool(&call.tool).cloned() else {
            let result = ToolResult::new(ToolOutcome::Failed)
                .with_content(format!("The tool {} is no longer available.", call.tool));
            return Ok((result.into(), None));
        };
        if call.requires_approval {
            let attempt = self.journal_start(s, call, args)?;
            // A write in flight is never abandoned half-way: cancellation waits for it.
            return Ok((
                run_guarded(tool.run(args.clone(), ctx)).await,
                Some(attempt),
            ));
        }
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => ToolResult::new(ToolOutcome::Cancelled).with_content("cancelled by the user").into(),
            result = run_guarded(tool.run(args.clone(), ctx)) => result,
        };
        Ok((result, None))
    }

    /// Journals a write as started, in its own commit before it is sent, so that a crash while
    /// it is in flight leaves a row recovery can act on. Returns the attempt's number.
    fn journal_start(
        &self,
        s: &mut SessionCache,
        call: &mut CallRecord,
        args: &Map<String, Value>,
    ) -> Result<u32, EngineError> {
        let n = self.inner.store.dispatches(&call.call_id)?.len() as u32 + 1;
        call.status = CallStatus::Dispatching;
        call.updated_at = self.now();
        call.version += 1;
        let entry = JournalEntry {
            call_id: call.call_id.clone(),
            attempt: n,
            session_id: s.id.clone(),
            tool: call.tool.clone(),
            idempotency_key: call.idempotency_key.clone(),
            args_hash: args_hash(args),
            started_at: self.now(),
            finished_at: None,
            outcome: None,
        };
        let audit = self.audit(
            s,
            Some(call),
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
        Ok(n)
    }

    /// A tool that needs the user's sign-in parks its call instead of answering it: the call
    /// runs again, with its approval, once the scopes are granted, so the model is not told of
    /// a failure the user can fix. The event carries what to ask for (scopes, sign-in link).
    fn park_for_sign_in(
        &self,
        s: &SessionCache,
        turn: &Turn,
        agent: &LlmAgent,
        call: &mut CallRecord,
        structured: ToolResult,
        mut actions: EventActions,
    ) -> (Event, AuditEntry) {
        // A result that names no scopes asks for the tool's own, which are what it runs with.
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
        let audit = self.audit(
            s,
            Some(call),
            "auth.requested",
            &format!("agent:{}", call.agent_name),
            json!({"scopes": call.auth_scopes}),
        );
        (event, audit)
    }

    /// Answers a call that ran (or was refused at dispatch) and marks it done.
    fn answer_dispatched(
        &self,
        s: &SessionCache,
        turn: &Turn,
        call: &mut CallRecord,
        result: ToolReturn,
        actions: EventActions,
    ) -> (Event, AuditEntry) {
        let (event, outcome) = self.response_event(turn, call, result, actions, None);
        let audit = self.audit(
            s,
            Some(call),
            "call.completed",
            &format!("agent:{}", call.agent_name),
            json!({"outcome": outcome}),
        );
        self.mark_done(call, outcome);
        (event, audit)
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

/// The argument hash an approval was given for; only an approval (as proposed or edited)
/// carries one.
fn approved_hash(call: &CallRecord) -> Option<String> {
    call.decision
        .as_ref()
        .filter(|d| matches!(d.verdict, Verdict::Approved | Verdict::ApprovedEdited))
        .and_then(|d| d.args_hash.clone())
}

/// An approval recorded after the request expired is no approval: whatever let it through, the
/// write is not sent.
fn approved_late(call: &CallRecord) -> bool {
    call.requires_approval
        && call.decision.as_ref().is_some_and(|d| {
            super::decided_by_user(&d.decided_by)
                && call.expires_at.is_some_and(|at| d.decided_at >= at)
        })
}
