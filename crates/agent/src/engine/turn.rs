//! The turn loop: once a message has opened an invocation (see `message`),
//! [`Engine::advance`] moves it on — running ready calls, suspending while any call is held,
//! calling the model again otherwise — until the model answers without calling functions.
//! Closing, cancelling and resuming a turn live here too, since every later act (a decision, a
//! sign-in, an expiry) re-enters the loop through [`Engine::resume`].

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::model_call::ModelOutcome;
use super::{
    Engine, EngineError, SESSION_ENDED_VARIABLE, SessionCache, Turn, TurnOutcome, lock, notice,
};
use crate::content::{Content, ROLE_MODEL};
use crate::event::{Event, EventActions};
use crate::model::ModelError;
use crate::persist::{
    ApprovalDecision, CallFilter, CallRecord, CallStatus, Commit, InvocationRecord,
    InvocationStatus, Verdict,
};
use crate::result::{ToolOutcome, ToolResult};
use crate::state::StateMap;

impl Engine {
    /// The session's turns that are still open (suspended, or running when the process died).
    pub(super) fn open_invocations(
        &self,
        session_id: &str,
    ) -> Result<Vec<InvocationRecord>, EngineError> {
        Ok(self
            .inner
            .store
            .invocations_with_status(&[InvocationStatus::Running, InvocationStatus::Suspended])?
            .into_iter()
            .filter(|inv| inv.session_id == session_id)
            .collect())
    }

    pub(super) fn open_calls(&self, invocation_id: &str) -> Result<Vec<CallRecord>, EngineError> {
        Ok(self.inner.store.calls(&CallFilter {
            invocation_id: Some(invocation_id.to_owned()),
            statuses: vec![
                CallStatus::AwaitingApproval,
                CallStatus::Approved,
                CallStatus::Dispatching,
                CallStatus::AwaitingAuth,
                CallStatus::OutcomeUnknown,
            ],
            ..CallFilter::default()
        })?)
    }

    /// Ends a turn: answers its open calls `CANCELLED` with `note` and records its new status.
    pub(super) fn close_invocation(
        &self,
        s: &mut SessionCache,
        mut inv: InvocationRecord,
        status: InvocationStatus,
        note: &str,
    ) -> Result<(), EngineError> {
        let verdict = if status == InvocationStatus::Superseded {
            Verdict::Superseded
        } else {
            Verdict::Cancelled
        };
        let turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        // Stop, and calling waiting approvals off with a new message, are the user's own acts.
        let by = if status == InvocationStatus::Cancelled {
            "user"
        } else {
            "engine"
        };
        let mut commit = Commit::default();
        for mut call in self.open_calls(&inv.id)? {
            if call.status == CallStatus::AwaitingApproval {
                call.decision = Some(ApprovalDecision {
                    verdict,
                    decided_by: by.to_owned(),
                    decided_at: self.now(),
                    reason: Some(note.to_owned()),
                    args_hash: None,
                });
            }
            let text = if call.status == CallStatus::OutcomeUnknown {
                commit
                    .journal
                    .extend(self.close_attempts(&call.call_id, None)?);
                format!("{note}{}", notice::OUTCOME_UNKNOWN_SUFFIX)
            } else {
                note.to_owned()
            };
            let result = ToolResult::new(ToolOutcome::Cancelled).with_content(text);
            let (event, _) =
                self.response_event(&turn, &call, result.into(), EventActions::default(), None);
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.cancelled",
                "engine",
                json!({ "reason": note }),
            ));
            self.mark_done(&mut call, ToolOutcome::Cancelled);
            commit.events.push(event);
            commit.calls.push(call);
        }
        let mut closing = self.agent_event(&turn, None);
        closing.interrupted = true;
        closing.turn_complete = true;
        closing.error_code = Some(notice::code_of(note).to_owned());
        closing.error_message = Some(note.to_owned());
        commit.events.push(closing);
        inv.status = status;
        inv.updated_at = self.now();
        commit.invocations.push(inv.clone());
        commit.audit.push(self.audit(
            s,
            None,
            "turn.closed",
            "engine",
            json!({ "invocation_id": inv.id, "status": status, "reason": note }),
        ));
        self.commit(s, commit)
    }

    pub(super) fn finish(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        status: InvocationStatus,
        mut events: Vec<Event>,
    ) -> Result<TurnOutcome, EngineError> {
        turn.inv.status = status;
        turn.inv.updated_at = self.now();
        if status == InvocationStatus::Completed {
            // after_agent: the first callback with content adds a closing message.
            let callbacks = self
                .node(&turn.inv.agent_name)
                .agent
                .callbacks
                .after_agent
                .clone();
            if !callbacks.is_empty() {
                let mut delta = StateMap::new();
                let mut ctx = self.callback_context(s, turn);
                let extra = callbacks.iter().find_map(|cb| cb(&mut ctx));
                Self::absorb(turn, &mut ctx, &mut delta);
                if extra.is_some() || !delta.is_empty() {
                    let mut event = self.agent_event(
                        turn,
                        extra.map(|c| Content {
                            role: Some(ROLE_MODEL.to_owned()),
                            ..c
                        }),
                    );
                    event.actions.state_delta = delta;
                    event.turn_complete = true;
                    events.push(event);
                }
            }
        }
        self.commit(
            s,
            Commit {
                events,
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )?;
        Ok(TurnOutcome {
            invocation_id: turn.inv.id.clone(),
            status,
        })
    }

    /// Moves a turn on as far as it can go: runs the calls that are ready, suspends while any is
    /// held, otherwise calls the model again — until the model answers without calling functions.
    pub(super) async fn advance(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<TurnOutcome, EngineError> {
        loop {
            if turn.cancel.is_cancelled() {
                return self.close_cancelled(s, turn);
            }
            self.run_approved(s, turn).await?;
            // A stop during those calls is honoured before anything else happens.
            if turn.cancel.is_cancelled() {
                continue;
            }
            if !self.open_calls(&turn.inv.id)?.is_empty() {
                self.set_status(s, turn, InvocationStatus::Suspended)?;
                return Ok(TurnOutcome {
                    invocation_id: turn.inv.id.clone(),
                    status: InvocationStatus::Suspended,
                });
            }
            self.set_status(s, turn, InvocationStatus::Running)?;
            if let Some(outcome) = self.follow_step_control(s, turn)? {
                return Ok(outcome);
            }
            if turn.inv.model_calls >= self.inner.config.max_model_calls {
                return self.stop_runaway(s, turn);
            }
            turn.inv.model_calls += 1;
            let (response, delta) = match self.call_model(s, turn).await {
                ModelOutcome::Response(response, delta) => (response, delta),
                ModelOutcome::Cancelled(partial) => {
                    // The loop then closes the turn as cancelled.
                    self.keep_stopped_text(s, turn, partial)?;
                    continue;
                }
                ModelOutcome::Failed(error, delta) => {
                    return self.fail_on_model_error(s, turn, &error, delta);
                }
            };
            if !self.register_step(s, turn, response, delta).await? {
                let events = Vec::new();
                return self.finish(s, turn, InvocationStatus::Completed, events);
            }
        }
    }

    /// Runs the turn's calls already approved. Every path into a turn starts here, so an
    /// approval is never left unrun whoever picks the turn up (the loop, a new message, a
    /// restart).
    pub(super) async fn run_approved(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<(), EngineError> {
        for call in self.open_calls(&turn.inv.id)? {
            if call.status == CallStatus::Approved {
                self.dispatch(s, turn, call).await?;
            }
        }
        Ok(())
    }

    /// Closes a turn the user stopped; its held calls are answered as cancelled, never run.
    fn close_cancelled(
        &self,
        s: &mut SessionCache,
        turn: &Turn,
    ) -> Result<TurnOutcome, EngineError> {
        let inv = turn.inv.clone();
        self.close_invocation(
            s,
            inv,
            InvocationStatus::Cancelled,
            notice::CANCELLED_BY_USER,
        )?;
        Ok(TurnOutcome {
            invocation_id: turn.inv.id.clone(),
            status: InvocationStatus::Cancelled,
        })
    }

    /// Does what the last step asked for: end, hand over, or go back to the parent. Returns the
    /// outcome when that ends the turn. A transfer to an agent that is gone (a swap removed it)
    /// is ignored, so the current agent carries on rather than the turn failing.
    fn follow_step_control(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<Option<TurnOutcome>, EngineError> {
        match self.step_control(s, &turn.inv.id) {
            StepControl::End => {
                return self
                    .finish(s, turn, InvocationStatus::Completed, Vec::new())
                    .map(Some);
            }
            StepControl::Transfer(target) if self.has_agent(&target) => {
                self.switch_agent(s, turn, target)?;
            }
            StepControl::Escalate => match self.node(&turn.inv.agent_name).parent.clone() {
                Some(parent) => self.switch_agent(s, turn, parent)?,
                None => {
                    return self
                        .finish(s, turn, InvocationStatus::Completed, Vec::new())
                        .map(Some);
                }
            },
            StepControl::Transfer(_) | StepControl::Continue => {}
        }
        Ok(None)
    }

    /// Fails a turn that has used its model calls: a model looping on its own calls would
    /// otherwise run (and cost) without end.
    fn stop_runaway(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<TurnOutcome, EngineError> {
        let mut event = self.agent_event(turn, None);
        event.error_code = Some(notice::TOO_MANY_STEPS.to_owned());
        event.error_message = Some(notice::too_many_steps(self.inner.config.max_model_calls));
        event.turn_complete = true;
        self.finish(s, turn, InvocationStatus::Failed, vec![event])
    }

    /// Keeps what the model had already written when the user stopped it, marked as stopped, so
    /// the conversation shows where it was cut off.
    fn keep_stopped_text(
        &self,
        s: &mut SessionCache,
        turn: &Turn,
        partial: Option<Content>,
    ) -> Result<(), EngineError> {
        if let Some(content) = partial {
            let mut event = self.agent_event(turn, Some(content));
            event.interrupted = true;
            event.error_code = Some(notice::STOPPED_CODE.to_owned());
            self.commit(
                s,
                Commit {
                    events: vec![event],
                    ..Commit::default()
                },
            )?;
        }
        Ok(())
    }

    /// Fails the turn with the model's error, keeping the state its callbacks changed and the
    /// wait it asked for, so the user sees why and when to try again.
    fn fail_on_model_error(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        error: &ModelError,
        delta: StateMap,
    ) -> Result<TurnOutcome, EngineError> {
        let mut event = self.agent_event(turn, None);
        event.error_code = Some(error.code.clone());
        event.error_message = Some(error.message.clone());
        event.retry_after_ms = error.retry_after_ms;
        event.actions.state_delta = delta;
        event.turn_complete = true;
        self.finish(s, turn, InvocationStatus::Failed, vec![event])
    }

    /// Records a turn's new status, when it changed.
    pub(super) fn set_status(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        status: InvocationStatus,
    ) -> Result<(), EngineError> {
        if turn.inv.status == status {
            return Ok(());
        }
        turn.inv.status = status;
        turn.inv.updated_at = self.now();
        self.commit(
            s,
            Commit {
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )
    }

    pub(super) fn switch_agent(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        agent: String,
    ) -> Result<(), EngineError> {
        turn.inv.agent_name = agent;
        turn.inv.updated_at = self.now();
        self.commit(
            s,
            Commit {
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )
    }

    /// Reads what the events since this turn's last model response ask the loop to do.
    pub(super) fn step_control(&self, s: &SessionCache, invocation_id: &str) -> StepControl {
        let mut control = StepControl::Continue;
        for event in s.events.iter().rev() {
            if event.invocation_id != invocation_id {
                break;
            }
            let is_model_turn = event.content.as_ref().is_some_and(Content::is_model);
            if event.actions.end_invocation || event.state_delta_ends_session() {
                return StepControl::End;
            }
            if let Some(target) = &event.actions.transfer_to_agent {
                control = StepControl::Transfer(target.clone());
            } else if event.actions.escalate && control == StepControl::Continue {
                control = StepControl::Escalate;
            }
            if is_model_turn || event.is_user() {
                break;
            }
        }
        control
    }

    /// Resumes a suspended turn after a change, unless another act already runs it.
    pub(super) async fn resume(
        &self,
        s: &mut SessionCache,
        inv: InvocationRecord,
    ) -> Result<TurnOutcome, EngineError> {
        if !inv.status.is_open() {
            return Ok(TurnOutcome {
                invocation_id: inv.id.clone(),
                status: inv.status,
            });
        }
        // Another act (a new message waiting for this lock) will take the turn from here.
        let Ok(token) = self.start_running(&s.id) else {
            return Ok(TurnOutcome {
                invocation_id: inv.id.clone(),
                status: inv.status,
            });
        };
        let mut turn = Turn {
            inv,
            temp: StateMap::new(),
            cancel: token,
        };
        let result = self.advance(s, &mut turn).await;
        self.stop_running(&s.id);
        result
    }

    /// Cancels the session's turn: a running one stops at its next step (a write already sent
    /// is waited for), a suspended one is closed. Held calls are answered `CANCELLED`.
    pub async fn cancel(&self, session_id: &str) -> Result<bool, EngineError> {
        self.cancel_noting(session_id, notice::CANCELLED_BY_USER)
            .await
    }

    /// Closes the session's waiting turn because whoever asked is gone (an MCP client that
    /// disconnected): held calls are answered `CANCELLED` with [`notice::ABANDONED`] and never
    /// run. A running turn stops at its next step, as with [`Engine::cancel`].
    pub async fn abandon(&self, session_id: &str) -> Result<bool, EngineError> {
        self.cancel_noting(session_id, notice::ABANDONED).await
    }

    async fn cancel_noting(&self, session_id: &str, note: &str) -> Result<bool, EngineError> {
        if let Some(token) = lock(&self.inner.running).get(session_id) {
            token.cancel();
            return Ok(true);
        }
        let mut guard = self.lock_session(session_id).await?;
        let s = guard.cache();
        let open = self.open_invocations(session_id)?;
        let any = !open.is_empty();
        for inv in open {
            self.close_invocation(s, inv, InvocationStatus::Cancelled, note)?;
        }
        Ok(any)
    }

    /// Whether a turn is running in the session right now.
    pub fn is_running(&self, session_id: &str) -> bool {
        lock(&self.inner.running).contains_key(session_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StepControl {
    Continue,
    End,
    Transfer(String),
    Escalate,
}

pub(super) trait EndsSession {
    fn state_delta_ends_session(&self) -> bool;
}

impl EndsSession for Event {
    fn state_delta_ends_session(&self) -> bool {
        self.actions
            .state_delta
            .contains_key(SESSION_ENDED_VARIABLE)
    }
}
