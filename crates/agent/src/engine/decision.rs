//! The user's decisions on held calls: approve (as proposed or edited, validated again and
//! re-previewed), reject with a reason the model is told, or always allow (which also writes a
//! rule). A decision is taken under the session's lock after re-reading the call, so two surfaces
//! deciding at once cannot both win.

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Decision, DecisionSource, Engine, EngineError, PREVIEW_TIMEOUT, SessionGuard, Turn,
    TurnOutcome, args_hash,
};
use crate::event::{Event, EventActions};
use crate::persist::{
    ApprovalDecision, CallFilter, CallRecord, CallStatus, Commit, InvocationRecord, Rule,
    RuleEffect, Verdict,
};
use crate::result::{ToolOutcome, ToolResult};
use crate::state::StateMap;
use crate::tool::Preview;

impl Engine {
    /// Loads a call and locks its session, checking it is in one of `states`.
    pub(super) async fn held_call(
        &self,
        call_id: &str,
        states: &[CallStatus],
    ) -> Result<(SessionGuard, CallRecord, InvocationRecord), EngineError> {
        let call = self
            .inner
            .store
            .call(call_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        let guard = self.lock_session(&call.session_id).await?;
        // Read again under the lock: another decision may have landed while we waited.
        let call = self
            .inner
            .store
            .call(call_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        if !states.contains(&call.status) {
            return Err(EngineError::NotPending {
                call_id: call_id.to_owned(),
                status: call.status,
            });
        }
        let inv = self
            .inner
            .store
            .invocation(&call.invocation_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        Ok((guard, call, inv))
    }

    /// Decides a call held for approval, in the app, and moves its turn on.
    pub async fn decide(
        &self,
        call_id: &str,
        decision: Decision,
    ) -> Result<TurnOutcome, EngineError> {
        self.decide_from(call_id, decision, DecisionSource::App)
            .await
    }

    /// Decides a call held for approval from `source` and moves its turn on. Whichever surface
    /// comes first wins: the call is read again under its session's lock, and a call no longer
    /// waiting is [`EngineError::NotPending`].
    pub async fn decide_from(
        &self,
        call_id: &str,
        decision: Decision,
        source: DecisionSource,
    ) -> Result<TurnOutcome, EngineError> {
        let (mut guard, mut call, inv) = self
            .held_call(call_id, &[CallStatus::AwaitingApproval])
            .await?;
        let s = guard.cache();
        // The sweep may not have come round yet: time is checked here, at the decision, from
        // whichever surface it comes.
        if self.is_expired(&call) {
            self.expire(s, &inv, call)?;
            if let Err(e) = self.resume(s, inv).await {
                tracing::warn!(error = %e, "resuming a turn after an expiry failed");
            }
            return Err(EngineError::Expired {
                call_ids: vec![call_id.to_owned()],
            });
        }
        let now = self.now();
        let mut commit = Commit::default();
        let verdict = verdict_of(&decision);
        if let Decision::ApproveEdited(args) = &decision {
            self.apply_edit(&mut call, args).await?;
        }
        if let Decision::AlwaysAllow {
            constraints,
            expires_at,
        } = &decision
        {
            let rule = always_allow_rule(&call, constraints, *expires_at, now);
            commit
                .audit
                .push(self.audit(s, Some(&call), "rule.created", "user", json!(rule)));
            commit.rules.push(rule);
        }
        let reason = match &decision {
            Decision::Reject { reason } => reason.clone().filter(|r| !r.trim().is_empty()),
            _ => None,
        };
        let actor = source.actor();
        call.decision = Some(ApprovalDecision {
            verdict,
            decided_by: actor.to_owned(),
            decided_at: now,
            reason: reason.clone(),
            args_hash: (verdict != Verdict::Rejected).then(|| args_hash(&call.args)),
        });
        call.updated_at = now;
        commit.audit.push(self.audit(
            s,
            Some(&call),
            decision_kind(verdict),
            actor,
            json!({"args": call.args, "original_args": call.original_args, "reason": reason, "via": source.name()}),
        ));
        if verdict == Verdict::Rejected {
            let event = self.answer_rejected(&inv, &mut call, reason);
            commit.events.push(event);
        } else {
            call.status = CallStatus::Approved;
            call.version += 1;
        }
        commit.calls.push(call);
        self.commit(s, commit)?;
        self.resume(s, inv).await
    }

    /// Puts the user's arguments in place of the model's. They are checked like the model's
    /// were (schema, then the service's ids), since the approval covers exactly what runs; the
    /// model's stay as `original_args` so the model is told its call was changed.
    async fn apply_edit(
        &self,
        call: &mut CallRecord,
        args: &Map<String, Value>,
    ) -> Result<(), EngineError> {
        self.node(&call.agent_name)
            .agent
            .validate_args(&call.tool, args)
            .map_err(|message| EngineError::InvalidArguments {
                call_id: call.call_id.clone(),
                message,
            })?;
        self.verify_edit(call, args).await?;
        call.original_args = Some(std::mem::replace(&mut call.args, args.clone()));
        // The record shows what ran: describe the edited call, not the model's.
        if let Some(tool) = self.node(&call.agent_name).agent.tool(&call.tool).cloned()
            && let Ok(preview) =
                tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await
        {
            call.preview = preview;
        }
        Ok(())
    }

    /// Answers a rejected call at once: it never runs, and the model hears the user's reason so
    /// it can change course instead of asking again.
    fn answer_rejected(
        &self,
        inv: &InvocationRecord,
        call: &mut CallRecord,
        reason: Option<String>,
    ) -> Event {
        let text = match &reason {
            Some(reason) => format!("The user rejected this call. Their reason: {reason}"),
            None => "The user rejected this call.".to_owned(),
        };
        let turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        let result = ToolResult::new(ToolOutcome::Blocked).with_content(text);
        let (event, _) =
            self.response_event(&turn, call, result.into(), EventActions::default(), None);
        self.mark_done(call, ToolOutcome::Blocked);
        event
    }

    /// What a held call would do with `args` instead of its own: the arguments are checked
    /// against the tool's schema ([`EngineError::InvalidArguments`] when they do not fit) and the
    /// tool's preview is worked out from them, so the card can show what will really happen
    /// before the user approves an edit. Nothing is recorded.
    pub async fn preview_edit(
        &self,
        call_id: &str,
        args: &Map<String, Value>,
    ) -> Result<Option<Preview>, EngineError> {
        let call = self
            .inner
            .store
            .call(call_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        if call.status != CallStatus::AwaitingApproval {
            return Err(EngineError::NotPending {
                call_id: call_id.to_owned(),
                status: call.status,
            });
        }
        let agent = &self.node(&call.agent_name).agent;
        agent
            .validate_args(&call.tool, args)
            .map_err(|message| EngineError::InvalidArguments {
                call_id: call_id.to_owned(),
                message,
            })?;
        self.verify_edit(&call, args).await?;
        let Some(tool) = agent.tool(&call.tool).cloned() else {
            return Ok(None);
        };
        Ok(tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(args))
            .await
            .ok()
            .flatten())
    }

    /// Asks the tool whether the service knows the ids in edited arguments. A check that does
    /// not answer in time refuses nothing: the call's own run still meets the service's answer.
    async fn verify_edit(
        &self,
        call: &CallRecord,
        args: &Map<String, Value>,
    ) -> Result<(), EngineError> {
        let Some(tool) = self.node(&call.agent_name).agent.tool(&call.tool).cloned() else {
            return Ok(());
        };
        match tokio::time::timeout(PREVIEW_TIMEOUT, tool.verify(args)).await {
            Ok(Err(reason)) => Err(EngineError::EditRefused {
                call_id: call.call_id.clone(),
                reason,
            }),
            _ => Ok(()),
        }
    }

    /// Works out again the previews of every call waiting for approval (after a sign-in, names
    /// that could not be looked up before can be now). Returns the calls whose preview changed.
    pub async fn refresh_previews(&self) -> Result<Vec<String>, EngineError> {
        let waiting = self.inner.store.calls(&CallFilter {
            statuses: vec![CallStatus::AwaitingApproval],
            ..CallFilter::default()
        })?;
        let mut changed = Vec::new();
        for call in waiting {
            let Some(tool) = self.node(&call.agent_name).agent.tool(&call.tool).cloned() else {
                continue;
            };
            let Ok(Some(preview)) =
                tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await
            else {
                continue;
            };
            let (mut guard, mut call, _) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingApproval])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            if call.preview.as_ref() == Some(&preview) {
                continue;
            }
            let s = guard.cache();
            call.preview = Some(preview);
            call.updated_at = self.now();
            call.version += 1;
            changed.push(call.call_id.clone());
            self.commit(
                s,
                Commit {
                    calls: vec![call],
                    ..Commit::default()
                },
            )?;
        }
        Ok(changed)
    }

    /// Decides several calls, in order; stops at the first failure. A call whose approval has
    /// expired does not stop the others: it is expired, and once the rest are decided the
    /// answer is [`EngineError::Expired`] naming every such call.
    pub async fn decide_many(
        &self,
        decisions: Vec<(String, Decision)>,
    ) -> Result<Vec<TurnOutcome>, EngineError> {
        let mut outcomes = Vec::with_capacity(decisions.len());
        let mut expired = Vec::new();
        for (call_id, decision) in decisions {
            match self.decide(&call_id, decision).await {
                Ok(outcome) => outcomes.push(outcome),
                Err(EngineError::Expired { call_ids }) => expired.extend(call_ids),
                Err(e) => return Err(e),
            }
        }
        if expired.is_empty() {
            Ok(outcomes)
        } else {
            Err(EngineError::Expired { call_ids: expired })
        }
    }

    /// Calls waiting for the user across all sessions (approvals, sign-ins, unknown outcomes),
    /// oldest first.
    pub fn pending_calls(&self) -> Result<Vec<CallRecord>, EngineError> {
        Ok(self.inner.store.calls(&CallFilter {
            statuses: vec![
                CallStatus::AwaitingApproval,
                CallStatus::AwaitingAuth,
                CallStatus::OutcomeUnknown,
            ],
            ..CallFilter::default()
        })?)
    }
}

/// The verdict a decision records: "always allow" approves this call like a plain approval;
/// the rule it adds is recorded beside it.
fn verdict_of(decision: &Decision) -> Verdict {
    match decision {
        Decision::Approve | Decision::AlwaysAllow { .. } => Verdict::Approved,
        Decision::ApproveEdited(_) => Verdict::ApprovedEdited,
        Decision::Reject { .. } => Verdict::Rejected,
    }
}

/// The audit kind of a decision, so the trail tells an edited approval from a plain one.
fn decision_kind(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Rejected => "approval.rejected",
        Verdict::ApprovedEdited => "approval.approved_edited",
        _ => "approval.approved",
    }
}

/// The standing rule an "always allow" decision writes, linked to the call it came from so a
/// rule can always be traced to the approval that made it.
fn always_allow_rule(
    call: &CallRecord,
    constraints: &Map<String, Value>,
    expires_at: Option<i64>,
    now: i64,
) -> Rule {
    Rule {
        id: format!("rule_{}", uuid::Uuid::new_v4().simple()),
        tool: call.tool.clone(),
        effect: RuleEffect::AlwaysAllow,
        arg_constraints: constraints.clone(),
        expires_at,
        created_by: "user".to_owned(),
        from_call_id: Some(call.call_id.clone()),
        created_at: now,
        revoked_at: None,
    }
}
