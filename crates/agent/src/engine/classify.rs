//! How the gate judges one call of a model response (see `gate`, which registers the whole
//! response): the engine's own functions are answered at once; a call that cannot run (unknown
//! tool, arguments that do not fit) or that the user refuses outright (a never-allow rule, a
//! read-only conversation) is answered without running; a write is approved by the user's
//! standing word (the mode, an always-allow rule) or held for them.

use serde_json::{Map, Value, json};

use super::autonomy::Autonomy;
use super::{
    AgentNode, Engine, EngineError, SESSION_ENDED_VARIABLE, SessionCache, args_hash, new_call_id,
    notice,
};
use crate::content::{CUSTOMIZED_RESPONSE, END_SESSION, Part, TRANSFER_TO_AGENT};
use crate::event::EventActions;
use crate::persist::{
    ApprovalDecision, AuditEntry, CallRecord, CallStatus, Rule, RuleEffect, Verdict,
};
use crate::result::{ToolOutcome, ToolResult, ToolReturn};

/// What every call of one model response is judged by, read once so that all the calls of a
/// step meet the same rules, the same mode and the same time.
pub(super) struct Judge {
    pub(super) node: AgentNode,
    pub(super) now: i64,
    pub(super) rules: Vec<Rule>,
    pub(super) mode: Autonomy,
    pub(super) session_id: String,
    pub(super) invocation_id: String,
}

impl Judge {
    /// A call's record before it is judged: approved and needing no approval until a check
    /// says otherwise. Its id also replaces the model's in the stored part, so a call and its
    /// answer pair up even when the model sent no id.
    pub(super) fn new_call(&self, name: &str, args: Map<String, Value>) -> CallRecord {
        let call_id = new_call_id();
        CallRecord {
            idempotency_key: call_id.trim_start_matches("fc_").to_owned(),
            call_id,
            session_id: self.session_id.clone(),
            invocation_id: self.invocation_id.clone(),
            agent_name: self.node.agent.name.clone(),
            branch: self.node.branch.clone(),
            tool: name.to_owned(),
            args,
            original_args: None,
            status: CallStatus::Approved,
            requires_approval: false,
            decision: None,
            preview: None,
            auth_scopes: Vec::new(),
            authorize_url: None,
            outcome: None,
            created_at: self.now,
            expires_at: None,
            updated_at: self.now,
            version: 1,
        }
    }

    /// The first standing rule of that effect that applies to the call now.
    fn live(&self, effect: RuleEffect, record: &CallRecord) -> Option<Rule> {
        self.rules
            .iter()
            .find(|r| r.effect == effect && r.matches(&record.tool, &record.args, self.now))
            .cloned()
    }

    /// Who an answer from the gate itself is credited to in the audit.
    pub(super) fn agent_actor(&self) -> String {
        format!("agent:{}", self.node.agent.name)
    }
}

/// What a response's calls came to, gathered so that all of it lands in one commit with the
/// model's event: a crash never leaves a call the model made without its record.
#[derive(Default)]
pub(super) struct Step {
    /// The model's parts, its calls now carrying their ids.
    pub(super) parts: Vec<Part>,
    /// Calls that will run (ready) or wait for the user (held), in the model's order.
    pub(super) calls: Vec<CallRecord>,
    /// Calls answered without running, with their answer.
    pub(super) answers: Vec<(CallRecord, ToolReturn, EventActions)>,
    pub(super) audit: Vec<AuditEntry>,
}

impl Step {
    pub(super) fn refuse(&mut self, record: CallRecord, (result, audit): Refusal) {
        self.audit.push(audit);
        self.answers
            .push((record, result.into(), EventActions::default()));
    }
}

/// A call answered without running, and the audit entry that says why.
pub(super) type Refusal = (ToolResult, AuditEntry);

impl Engine {
    /// Judges one call. The order matters: a call that cannot run at all (no such tool,
    /// arguments that do not fit) is answered before any rule is consulted, so rules and the
    /// mode only ever judge well-formed calls; and the user's refusals (never-allow, read-only)
    /// come before anything that could approve.
    pub(super) fn classify(
        &self,
        s: &SessionCache,
        judge: &Judge,
        mut record: CallRecord,
        step: &mut Step,
    ) -> Result<(), EngineError> {
        if let Some((result, actions)) = self.answer_own_function(judge, &record) {
            step.answers.push((record, result, actions));
            return Ok(());
        }
        let Some(tool) = judge.node.agent.tool(&record.tool).cloned() else {
            let refusal = self.refuse_unknown_tool(s, judge, &record);
            step.refuse(record, refusal);
            return Ok(());
        };
        if let Some(refusal) = self.refuse_invalid_arguments(s, judge, &record) {
            step.refuse(record, refusal);
            return Ok(());
        }
        if let Some(refusal) = self.refuse_never_allowed(s, judge, &mut record) {
            step.refuse(record, refusal);
            return Ok(());
        }
        record.requires_approval = tool.requires_approval(&record.args);
        if let Some(refusal) = self.refuse_read_only(s, judge, &mut record) {
            step.refuse(record, refusal);
            return Ok(());
        }
        if record.requires_approval {
            let audit = self.approve_or_hold(s, judge, &mut record)?;
            step.audit.push(audit);
        }
        step.calls.push(record);
        Ok(())
    }

    /// The engine's own functions (transfer, end the session, a customized response) are
    /// answered here and never reach a tool: what they do is a change to the turn itself,
    /// carried by the answer's actions.
    fn answer_own_function(
        &self,
        judge: &Judge,
        record: &CallRecord,
    ) -> Option<(ToolReturn, EventActions)> {
        match record.tool.as_str() {
            TRANSFER_TO_AGENT => Some(self.answer_transfer(judge, record)),
            END_SESSION => Some(answer_end_session(judge, record)),
            CUSTOMIZED_RESPONSE => {
                let actions = EventActions {
                    end_invocation: true,
                    ..EventActions::default()
                };
                Some((ToolReturn::from("Delivered."), actions))
            }
            _ => None,
        }
    }

    /// A transfer goes through only to another agent the tree knows; anything else is told to
    /// the model as a failure, so it can pick a real one instead of the turn stalling.
    fn answer_transfer(&self, judge: &Judge, record: &CallRecord) -> (ToolReturn, EventActions) {
        let target = record
            .args
            .get("agent_name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if self.has_agent(&target) && target != judge.node.agent.name {
            let actions = EventActions {
                transfer_to_agent: Some(target.clone()),
                ..EventActions::default()
            };
            (
                ToolReturn::from(format!("Transferred to agent {target}.")),
                actions,
            )
        } else {
            let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                "There is no agent named {target:?} to transfer to."
            ));
            (result.into(), EventActions::default())
        }
    }

    /// A call of a tool the agent does not have: the model is given the names that exist, so
    /// it can call one of them instead.
    fn refuse_unknown_tool(&self, s: &SessionCache, judge: &Judge, record: &CallRecord) -> Refusal {
        let known: Vec<&str> = judge.node.agent.tools().map(|t| t.name()).collect();
        let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
            "There is no tool named {:?}. Available tools: {}.",
            record.tool,
            known.join(", ")
        ));
        let audit = self.audit(
            s,
            Some(record),
            "call.unknown_tool",
            &judge.agent_actor(),
            json!({"args": record.args}),
        );
        (result, audit)
    }

    /// Arguments that do not fit the tool's schema never reach the tool (nor the user's card):
    /// the model is told what is wrong so it can call again.
    fn refuse_invalid_arguments(
        &self,
        s: &SessionCache,
        judge: &Judge,
        record: &CallRecord,
    ) -> Option<Refusal> {
        let message = judge
            .node
            .agent
            .validate_args(&record.tool, &record.args)
            .err()?;
        let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
            "The arguments do not match the tool's schema: {message}"
        ));
        let audit = self.audit(
            s,
            Some(record),
            "call.invalid_arguments",
            &judge.agent_actor(),
            json!({"args": record.args, "errors": message}),
        );
        Some((result, audit))
    }

    /// A never-allow rule refuses the call before anything else about it is weighed: it is the
    /// user's standing word, and the model is told not to try again.
    fn refuse_never_allowed(
        &self,
        s: &SessionCache,
        judge: &Judge,
        record: &mut CallRecord,
    ) -> Option<Refusal> {
        let rule = judge.live(RuleEffect::NeverAllow, record)?;
        record.decision = Some(ApprovalDecision {
            verdict: Verdict::Rejected,
            decided_by: format!("rule:{}", rule.id),
            decided_at: judge.now,
            reason: Some(notice::NEVER_ALLOWED.to_owned()),
            args_hash: None,
        });
        let result = ToolResult::new(ToolOutcome::Blocked).with_content(
            "The user does not allow this call (a standing rule blocks it). Do not retry it.",
        );
        let audit = self.audit(
            s,
            Some(record),
            "approval.blocked_by_rule",
            &format!("rule:{}", rule.id),
            json!({"args": record.args}),
        );
        Some((result, audit))
    }

    /// In a read-only conversation a write is refused outright rather than held: the user
    /// asked for no writes now, so there is nothing to ask them.
    fn refuse_read_only(
        &self,
        s: &SessionCache,
        judge: &Judge,
        record: &mut CallRecord,
    ) -> Option<Refusal> {
        let mode = judge.mode;
        if !(record.requires_approval && mode == Autonomy::ReadOnly) {
            return None;
        }
        record.decision = Some(ApprovalDecision {
            verdict: Verdict::Rejected,
            decided_by: mode.actor().to_owned(),
            decided_at: judge.now,
            reason: Some(notice::READ_ONLY.to_owned()),
            args_hash: None,
        });
        let result = ToolResult::new(ToolOutcome::Blocked).with_content(
            "The user made this conversation read-only: no writes run now. Do not retry; say what you would have done instead.",
        );
        let audit = self.audit(
            s,
            Some(record),
            "approval.blocked_by_mode",
            mode.actor(),
            json!({"args": record.args}),
        );
        Some((result, audit))
    }

    /// A write runs at once only on the user's standing word — the conversation's mode, when it
    /// touches only what the conversation already touched, or an always-allow rule; otherwise
    /// it is held for them until it expires. Returns the audit entry of what was decided.
    fn approve_or_hold(
        &self,
        s: &SessionCache,
        judge: &Judge,
        record: &mut CallRecord,
    ) -> Result<AuditEntry, EngineError> {
        let mode = judge.mode;
        // Where a rule covers the call too, the approval is credited to the rule.
        let by_mode = matches!(mode, Autonomy::AllowTouched { .. })
            && judge.live(RuleEffect::AlwaysAllow, record).is_none()
            && self.touches_only_the_familiar(record)?;
        if by_mode {
            record.decision = Some(approval(mode.actor().to_owned(), judge.now, &record.args));
            return Ok(self.audit(
                s,
                Some(record),
                "approval.approved",
                mode.actor(),
                json!({"args": record.args, "allowed_by_mode": mode.actor()}),
            ));
        }
        if let Some(rule) = judge.live(RuleEffect::AlwaysAllow, record) {
            let by = format!("rule:{}", rule.id);
            record.decision = Some(approval(by.clone(), judge.now, &record.args));
            return Ok(self.audit(
                s,
                Some(record),
                "approval.approved",
                &by,
                json!({"args": record.args}),
            ));
        }
        record.status = CallStatus::AwaitingApproval;
        record.expires_at = self.inner.config.approval_ttl_ms.map(|ttl| judge.now + ttl);
        Ok(self.audit(
            s,
            Some(record),
            "approval.requested",
            &judge.agent_actor(),
            json!({"args": record.args, "expires_at": record.expires_at}),
        ))
    }
}

/// The answer to `end_session`: the turn ends, and the session is marked ended (with the
/// model's reason and whether it escalated) so no later message opens a turn in it.
fn answer_end_session(judge: &Judge, record: &CallRecord) -> (ToolReturn, EventActions) {
    let reason = record.args.get("reason").cloned().unwrap_or(Value::Null);
    let escalated = record
        .args
        .get("session_escalated")
        .cloned()
        .unwrap_or(json!(false));
    let mut actions = EventActions {
        end_invocation: true,
        escalate: escalated == json!(true),
        ..EventActions::default()
    };
    actions.state_delta.insert(
        SESSION_ENDED_VARIABLE.to_owned(),
        json!({"reason": reason, "escalated": escalated, "at": judge.now}),
    );
    (ToolReturn::from("The session has ended."), actions)
}

/// An approval by the user's standing word, bound to the arguments' hash so dispatch sends
/// nothing else under it.
fn approval(decided_by: String, now: i64, args: &Map<String, Value>) -> ApprovalDecision {
    ApprovalDecision {
        verdict: Verdict::Approved,
        decided_by,
        decided_at: now,
        reason: None,
        args_hash: Some(args_hash(args)),
    }
}
