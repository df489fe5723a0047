//! The approval gate: every function call of a model response is classified *before* anything
//! runs — answered at once (the engine's own functions, an unknown tool, invalid arguments, a
//! never-allow rule), ready (reads, writes an always-allow rule approves) or held for the user
//! with a preview and an expiry — all in the same commit as the model's event. How each call is
//! judged is in `classify`; the standing rules and the audit trail they write to are managed
//! here as well.

use serde_json::{Map, Value, json};

use super::autonomy::{AUTONOMY_VARIABLE, Autonomy};
use super::classify::{Judge, Step};
use super::{Engine, EngineError, PREVIEW_TIMEOUT, SessionCache, Turn};
use crate::content::{Content, FunctionCall, Part, ROLE_MODEL};
use crate::llm::{LlmResponse, MalformedCall};
use crate::persist::{AuditEntry, AuditFilter, CallRecord, CallStatus, Commit, Rule, RuleEffect};
use crate::result::{ToolOutcome, ToolResult};
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
        let now = self.now();
        let judge = Judge {
            node,
            now,
            rules: self.inner.store.rules()?,
            mode: Autonomy::from_value(s.state.get(AUTONOMY_VARIABLE), now),
            session_id: s.id.clone(),
            invocation_id: turn.inv.id.clone(),
        };
        let (finish_reason, usage) = (response.finish_reason, response.usage_metadata);
        let mut step = Step::default();
        for part in response.content.parts {
            let Part::FunctionCall(call) = part else {
                step.parts.push(part);
                continue;
            };
            let record = judge.new_call(&call.name, call.args.clone());
            step.parts.push(Part::FunctionCall(FunctionCall {
                id: Some(record.call_id.clone()),
                ..call
            }));
            self.classify(s, &judge, record, &mut step)?;
        }
        for malformed in response.malformed_calls {
            self.answer_malformed(s, &judge, malformed, &mut step);
        }
        let had_calls = !step.calls.is_empty() || !step.answers.is_empty();
        let mut commit = Commit {
            audit: step.audit,
            ..Commit::default()
        };
        let mut model_event = self.agent_event(
            turn,
            Some(Content {
                parts: step.parts,
                role: Some(ROLE_MODEL.to_owned()),
            }),
        );
        model_event.actions.state_delta = delta;
        // Held calls are the model's long-running ones: the turn waits for their answers.
        model_event.long_running_tool_ids = step
            .calls
            .iter()
            .filter(|c| c.status == CallStatus::AwaitingApproval)
            .map(|c| c.call_id.clone())
            .collect();
        model_event.turn_complete = !had_calls;
        model_event.finish_reason = finish_reason;
        model_event.usage_metadata = usage;
        commit.events.push(model_event);
        for (mut record, result, actions) in step.answers {
            let (event, outcome) = self.response_event(turn, &record, result, actions, None);
            self.mark_done(&mut record, outcome);
            // Registered and answered in the same commit: this is the record's first version.
            record.version = 1;
            commit.events.push(event);
            commit.calls.push(record);
        }
        add_previews(&judge, &mut step.calls).await;
        commit.calls.extend(step.calls);
        commit.invocations.push(turn.inv.clone());
        self.commit(s, commit)?;
        Ok(had_calls)
    }

    /// A call whose arguments were not JSON still gets a record and an answer, like every call
    /// the model makes: it is shown its mistake and can call again.
    fn answer_malformed(
        &self,
        s: &SessionCache,
        judge: &Judge,
        malformed: MalformedCall,
        step: &mut Step,
    ) {
        let record = judge.new_call(&malformed.name, Map::new());
        step.parts.push(Part::FunctionCall(FunctionCall {
            id: Some(record.call_id.clone()),
            name: malformed.name.clone(),
            args: Map::new(),
        }));
        let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
            "The arguments of this call were not valid JSON ({}). Call the function again with a valid JSON object.",
            malformed.error
        ));
        let audit = self.audit(
            s,
            Some(&record),
            "call.malformed_arguments",
            &judge.agent_actor(),
            json!({"arguments": malformed.arguments, "error": malformed.error}),
        );
        step.refuse(record, (result, audit));
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

/// Works out the held calls' previews for their cards. A preview may look things up (a chat's
/// size, an event's current time); it must never hold the turn up for long, and the card works
/// without one.
async fn add_previews(judge: &Judge, calls: &mut [CallRecord]) {
    for call in calls
        .iter_mut()
        .filter(|c| c.status == CallStatus::AwaitingApproval)
    {
        if let Some(tool) = judge.node.agent.tool(&call.tool) {
            match tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await {
                Ok(preview) => call.preview = preview,
                Err(_) => {
                    tracing::warn!(tool = %call.tool, "the tool's preview took too long; showing arguments only")
                }
            }
        }
    }
}
