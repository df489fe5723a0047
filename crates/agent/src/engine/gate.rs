//! The approval gate: every function call of a model response is classified *before* anything
//! runs — answered at once (the engine's own functions, an unknown tool, invalid arguments, a
//! never-allow rule), ready (reads, writes an always-allow rule approves) or held for the user
//! with a preview and an expiry — all in the same commit as the model's event. The standing rules
//! and the audit trail they write to are managed here as well.

use serde_json::{Map, Value, json};

use super::autonomy::{AUTONOMY_VARIABLE, Autonomy};
use super::{
    Engine, EngineError, PREVIEW_TIMEOUT, SESSION_ENDED_VARIABLE, SessionCache, Turn, args_hash,
    new_call_id, notice,
};
use crate::content::{
    CUSTOMIZED_RESPONSE, Content, END_SESSION, FunctionCall, Part, ROLE_MODEL, TRANSFER_TO_AGENT,
};
use crate::event::EventActions;
use crate::llm::LlmResponse;
use crate::persist::{
    ApprovalDecision, AuditEntry, AuditFilter, CallRecord, CallStatus, Commit, Rule, RuleEffect,
    Verdict,
};
use crate::result::{ToolOutcome, ToolResult, ToolReturn};
use crate::state::StateMap;

impl Engine {
    /// Registers the calls of a model response. Returns whether there were any.
    pub(super) async fn register_step(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        response: LlmResponse,
        delta: StateMap,
    ) -> Result<bool, EngineError> {
        let node = self.node(&turn.inv.agent_name);
        let agent = node.agent.clone();
        let now = self.now();
        let rules = self.inner.store.rules()?;
        let mode = Autonomy::from_value(s.state.get(AUTONOMY_VARIABLE), now);
        let (finish_reason, usage) = (response.finish_reason, response.usage_metadata);
        let mut content = response.content;
        content.role = Some(ROLE_MODEL.to_owned());
        let mut calls: Vec<CallRecord> = Vec::new();
        let mut answers: Vec<(CallRecord, ToolReturn, EventActions, Option<Value>)> = Vec::new();
        let mut held = Vec::new();
        let mut parts = Vec::with_capacity(content.parts.len() + response.malformed_calls.len());
        let mut commit = Commit::default();
        let new_call = |name: &str, args: Map<String, Value>| {
            let call_id = new_call_id();
            CallRecord {
                idempotency_key: call_id.trim_start_matches("fc_").to_owned(),
                call_id,
                session_id: s.id.clone(),
                invocation_id: turn.inv.id.clone(),
                agent_name: agent.name.clone(),
                branch: node.branch.clone(),
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
                created_at: now,
                expires_at: None,
                updated_at: now,
                version: 1,
            }
        };
        for part in content.parts {
            let Part::FunctionCall(call) = part else {
                parts.push(part);
                continue;
            };
            let mut record = new_call(&call.name, call.args.clone());
            parts.push(Part::FunctionCall(FunctionCall {
                id: Some(record.call_id.clone()),
                ..call
            }));
            match record.tool.as_str() {
                TRANSFER_TO_AGENT => {
                    let target = record
                        .args
                        .get("agent_name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if self.has_agent(&target) && target != agent.name {
                        let actions = EventActions {
                            transfer_to_agent: Some(target.clone()),
                            ..EventActions::default()
                        };
                        answers.push((
                            record,
                            ToolReturn::from(format!("Transferred to agent {target}.")),
                            actions,
                            None,
                        ));
                    } else {
                        let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                            "There is no agent named {target:?} to transfer to."
                        ));
                        answers.push((record, result.into(), EventActions::default(), None));
                    }
                    continue;
                }
                END_SESSION => {
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
                        json!({"reason": reason, "escalated": escalated, "at": now}),
                    );
                    answers.push((
                        record,
                        ToolReturn::from("The session has ended."),
                        actions,
                        None,
                    ));
                    continue;
                }
                CUSTOMIZED_RESPONSE => {
                    let actions = EventActions {
                        end_invocation: true,
                        ..EventActions::default()
                    };
                    answers.push((record, ToolReturn::from("Delivered."), actions, None));
                    continue;
                }
                _ => {}
            }
            let Some(tool) = agent.tool(&record.tool).cloned() else {
                let known: Vec<&str> = agent.tools().map(|t| t.name()).collect();
                let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                    "There is no tool named {:?}. Available tools: {}.",
                    record.tool,
                    known.join(", ")
                ));
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "call.unknown_tool",
                    &format!("agent:{}", agent.name),
                    json!({"args": record.args}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            };
            if let Err(message) = agent.validate_args(&record.tool, &record.args) {
                let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                    "The arguments do not match the tool's schema: {message}"
                ));
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "call.invalid_arguments",
                    &format!("agent:{}", agent.name),
                    json!({"args": record.args, "errors": message}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            }
            let live = |effect: RuleEffect, record: &CallRecord| {
                rules
                    .iter()
                    .find(|r| r.effect == effect && r.matches(&record.tool, &record.args, now))
                    .cloned()
            };
            if let Some(rule) = live(RuleEffect::NeverAllow, &record) {
                record.decision = Some(ApprovalDecision {
                    verdict: Verdict::Rejected,
                    decided_by: format!("rule:{}", rule.id),
                    decided_at: now,
                    reason: Some(notice::NEVER_ALLOWED.to_owned()),
                    args_hash: None,
                });
                let result = ToolResult::new(ToolOutcome::Blocked)
                    .with_content("The user does not allow this call (a standing rule blocks it). Do not retry it.");
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "approval.blocked_by_rule",
                    &format!("rule:{}", rule.id),
                    json!({"args": record.args}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            }
            record.requires_approval = tool.requires_approval(&record.args);
            if record.requires_approval && mode == Autonomy::ReadOnly {
                record.decision = Some(ApprovalDecision {
                    verdict: Verdict::Rejected,
                    decided_by: mode.actor().to_owned(),
                    decided_at: now,
                    reason: Some(notice::READ_ONLY.to_owned()),
                    args_hash: None,
                });
                let result = ToolResult::new(ToolOutcome::Blocked).with_content(
                    "The user made this conversation read-only: no writes run now. Do not retry; say what you would have done instead.",
                );
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "approval.blocked_by_mode",
                    mode.actor(),
                    json!({"args": record.args}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            }
            if record.requires_approval {
                let by_mode = matches!(mode, Autonomy::AllowTouched { .. })
                    && live(RuleEffect::AlwaysAllow, &record).is_none()
                    && self.touches_only_the_familiar(&record)?;
                if by_mode {
                    record.decision = Some(ApprovalDecision {
                        verdict: Verdict::Approved,
                        decided_by: mode.actor().to_owned(),
                        decided_at: now,
                        reason: None,
                        args_hash: Some(args_hash(&record.args)),
                    });
                    commit.audit.push(self.audit(
                        s,
                        Some(&record),
                        "approval.approved",
                        mode.actor(),
                        json!({"args": record.args, "allowed_by_mode": mode.actor()}),
                    ));
                } else if let Some(rule) = live(RuleEffect::AlwaysAllow, &record) {
                    record.decision = Some(ApprovalDecision {
                        verdict: Verdict::Approved,
                        decided_by: format!("rule:{}", rule.id),
                        decided_at: now,
                        reason: None,
                        args_hash: Some(args_hash(&record.args)),
                    });
                    commit.audit.push(self.audit(
                        s,
                        Some(&record),
                        "approval.approved",
                        &format!("rule:{}", rule.id),
                        json!({"args": record.args}),
                    ));
                } else {
                    record.status = CallStatus::AwaitingApproval;
                    record.expires_at = self.inner.config.approval_ttl_ms.map(|ttl| now + ttl);
                    held.push(record.call_id.clone());
                    commit.audit.push(self.audit(
                        s,
                        Some(&record),
                        "approval.requested",
                        &format!("agent:{}", agent.name),
                        json!({"args": record.args, "expires_at": record.expires_at}),
                    ));
                }
            }
            calls.push(record);
        }
        for malformed in response.malformed_calls {
            let record = new_call(&malformed.name, Map::new());
            parts.push(Part::FunctionCall(FunctionCall {
                id: Some(record.call_id.clone()),
                name: malformed.name.clone(),
                args: Map::new(),
            }));
            let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                "The arguments of this call were not valid JSON ({}). Call the function again with a valid JSON object.",
                malformed.error
            ));
            commit.audit.push(self.audit(
                s,
                Some(&record),
                "call.malformed_arguments",
                &format!("agent:{}", agent.name),
                json!({"arguments": malformed.arguments, "error": malformed.error}),
            ));
            answers.push((record, result.into(), EventActions::default(), None));
        }
        let had_calls = !calls.is_empty() || !answers.is_empty();
        let mut model_event = self.agent_event(
            turn,
            Some(Content {
                parts,
                role: content.role,
            }),
        );
        model_event.actions.state_delta = delta;
        model_event.long_running_tool_ids = held.into_iter().collect();
        model_event.turn_complete = !had_calls;
        model_event.finish_reason = finish_reason;
        model_event.usage_metadata = usage;
        commit.events.push(model_event);
        for (mut record, result, actions, note) in answers {
            let (event, outcome) = self.response_event(turn, &record, result, actions, note);
            self.mark_done(&mut record, outcome);
            record.version = 1;
            commit.events.push(event);
            commit.calls.push(record);
        }
        for call in calls
            .iter_mut()
            .filter(|c| c.status == CallStatus::AwaitingApproval)
        {
            if let Some(tool) = agent.tool(&call.tool) {
                // A preview may look things up (a chat's size, an event's current time); it must
                // never hold the turn up for long, and the card works without one.
                match tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await {
                    Ok(preview) => call.preview = preview,
                    Err(_) => {
                        tracing::warn!(tool = %call.tool, "the tool's preview took too long; showing arguments only")
                    }
                }
            }
        }
        commit.calls.extend(calls);
        commit.invocations.push(turn.inv.clone());
        self.commit(s, commit)?;
        Ok(had_calls)
    }

    /// Every rule, revoked ones included.
    pub fn rules(&self) -> Result<Vec<Rule>, EngineError> {
        Ok(self.inner.store.rules()?)
    }

    /// Adds a rule directly (from settings rather than an approval card).
    pub fn add_rule(
        &self,
        tool: &str,
        effect: RuleEffect,
        constraints: Map<String, Value>,
        expires_at: Option<i64>,
    ) -> Result<Rule, EngineError> {
        let rule = Rule {
            id: format!("rule_{}", uuid::Uuid::new_v4().simple()),
            tool: tool.to_owned(),
            effect,
            arg_constraints: constraints,
            expires_at,
            created_by: "user".to_owned(),
            from_call_id: None,
            created_at: self.now(),
            revoked_at: None,
        };
        self.inner.store.commit(&Commit {
            rules: vec![rule.clone()],
            audit: vec![AuditEntry {
                at: self.now(),
                session_id: None,
                call_id: None,
                tool: Some(tool.to_owned()),
                kind: "rule.created".to_owned(),
                actor: "user".to_owned(),
                detail: json!(rule),
            }],
            ..Commit::default()
        })?;
        Ok(rule)
    }

    /// Revokes a rule; it stays listed with its revocation time.
    pub fn revoke_rule(&self, rule_id: &str) -> Result<Rule, EngineError> {
        let mut rule = self
            .rules()?
            .into_iter()
            .find(|r| r.id == rule_id)
            .ok_or_else(|| EngineError::RuleNotFound(rule_id.to_owned()))?;
        rule.revoked_at = Some(self.now());
        self.inner.store.commit(&Commit {
            rules: vec![rule.clone()],
            audit: vec![AuditEntry {
                at: self.now(),
                session_id: None,
                call_id: None,
                tool: Some(rule.tool.clone()),
                kind: "rule.revoked".to_owned(),
                actor: "user".to_owned(),
                detail: json!({"rule_id": rule.id}),
            }],
            ..Commit::default()
        })?;
        Ok(rule)
    }

    /// The audit trail.
    pub fn audit_trail(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, EngineError> {
        Ok(self.inner.store.audit(filter)?)
    }
}
