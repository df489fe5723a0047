//! One model call: the request built from the visible history (the last few turns, the agent's
//! branch, parallel function responses merged), the model callbacks around it, and the streamed
//! answer, whose partial chunks reach subscribers as they come.

use std::collections::{HashMap, HashSet};

use futures::StreamExt as _;
use serde_json::{Map, Value, json};

use super::{AgentNode, Engine, EngineEvent, SessionCache, Turn};
use crate::agent::LlmAgent;
use crate::content::{
    Content, FunctionCall, FunctionResponse, Part, ROLE_MODEL, ROLE_USER, TRANSFER_TO_AGENT,
};
use crate::event::Event;
use crate::llm::{FinishReason, FunctionDeclaration, LlmRequest, LlmResponse, ToolDeclaration};
use crate::model::ModelError;
use crate::persist::CallStatus;
use crate::state::StateMap;

/// What the model is told when its function call could not be read and it is asked again.
const RETRY_NOTE: &str = "(Note from the app, not the user: your previous reply ended in a function call that could not be read — it was malformed, or cut off at the output limit. Call the function again with complete, valid JSON arguments and keep them short, or answer in text.)";

/// Whether an answer ended in a function call the service could not read (Gemini's
/// `MALFORMED_FUNCTION_CALL`) or one cut off at the output limit: worth asking again once
/// before the user is told.
fn unreadable_call(response: &LlmResponse) -> bool {
    match response.finish_reason {
        Some(FinishReason::MalformedFunctionCall) => true,
        Some(FinishReason::MaxTokens) => !response.malformed_calls.is_empty(),
        _ => false,
    }
}

impl Engine {
    /// Builds the request, runs the model callbacks and streams the model's answer.
    pub(super) async fn call_model(&self, s: &mut SessionCache, turn: &mut Turn) -> ModelOutcome {
        let node = self.node(&turn.inv.agent_name);
        let agent = node.agent.clone();
        let mut request = self.build_request(s, &node);
        let mut delta = StateMap::new();
        let mut ctx = self.callback_context(s, turn);
        let mut response = agent
            .callbacks
            .before_model
            .iter()
            .find_map(|cb| cb(&mut ctx, &mut request));
        Self::absorb(turn, &mut ctx, &mut delta);
        if response.is_none() {
            let mut request = Some(request);
            let mut retried = false;
            while let Some(attempt) = request.take() {
                let mut written = String::new();
                let streamed = tokio::select! {
                    biased;
                    () = turn.cancel.cancelled() => None,
                    streamed = self.stream_model(s, turn, &agent, attempt, &mut written) => Some(streamed),
                };
                match streamed {
                    Some(Ok(r)) if !retried && unreadable_call(&r) => {
                        // Asked again once, with a note; the failed answer is not recorded.
                        tracing::info!(
                            finish_reason = ?r.finish_reason,
                            "the model's function call could not be read; asking again once"
                        );
                        retried = true;
                        let mut again = self.build_request(s, &node);
                        again
                            .contents
                            .push(Content::new(ROLE_USER, vec![Part::from_text(RETRY_NOTE)]));
                        request = Some(again);
                    }
                    Some(Ok(r)) => response = Some(r),
                    Some(Err(error)) => return ModelOutcome::Failed(error, delta),
                    None => {
                        let partial = (!written.trim().is_empty())
                            .then(|| Content::new(ROLE_MODEL, vec![Part::from_text(written)]));
                        return ModelOutcome::Cancelled(partial);
                    }
                }
            }
        }
        let Some(mut response) = response else {
            return ModelOutcome::Failed(ModelError::new("incomplete", "no response"), delta);
        };
        let mut ctx = self.callback_context(s, turn);
        if let Some(replacement) = agent
            .callbacks
            .after_model
            .iter()
            .find_map(|cb| cb(&mut ctx, &response))
        {
            response = replacement;
        }
        Self::absorb(turn, &mut ctx, &mut delta);
        ModelOutcome::Response(response, delta)
    }

    pub(super) async fn stream_model(
        &self,
        s: &SessionCache,
        turn: &Turn,
        agent: &LlmAgent,
        request: LlmRequest,
        written: &mut String,
    ) -> Result<LlmResponse, ModelError> {
        let mut stream = agent.model.generate(request).await?;
        while let Some(item) = stream.next().await {
            let response = item?;
            if response.is_partial() {
                written.push_str(&response.content.text());
                let mut event = self.agent_event(turn, Some(response.content));
                event.partial = true;
                self.emit(EngineEvent::Event {
                    session_id: s.id.clone(),
                    event,
                });
            } else {
                return Ok(response);
            }
        }
        Err(ModelError::new(
            "incomplete",
            "the model's stream ended before its complete response",
        ))
    }

    /// The contents the model is shown for `events`: every function call answered right after
    /// it, as models require. A call still waiting for the user (kept when the user wrote again)
    /// is answered with where it stands; a call answered only after a later message is shown as
    /// waiting at its place, and its result comes as a note where it happened.
    fn history(&self, events: &[Event], agent_branch: Option<&str>) -> Vec<Content> {
        let visible: Vec<&Content> = events
            .iter()
            .filter(|e| !e.partial && branch_visible(e.branch.as_deref(), agent_branch))
            .filter_map(|e| e.content.as_ref())
            .filter(|c| !c.parts.is_empty())
            .collect();
        // Which turn (counted by user messages) each call was made and answered in.
        let mut asked: HashMap<&str, usize> = HashMap::new();
        let mut answered: HashSet<&str> = HashSet::new();
        let mut on_time: HashSet<&str> = HashSet::new();
        let mut turn = 0;
        for content in &visible {
            if content.is_user() && content.function_responses().next().is_none() {
                turn += 1;
            }
            for part in &content.parts {
                match part {
                    Part::FunctionCall(FunctionCall { id: Some(id), .. }) => {
                        asked.insert(id, turn);
                    }
                    Part::FunctionResponse(FunctionResponse { id: Some(id), .. }) => {
                        answered.insert(id);
                        if asked.get(id.as_str()) == Some(&turn) {
                            on_time.insert(id);
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut contents: Vec<Content> = Vec::new();
        for content in visible {
            let mut content = content.clone();
            let mut notes = Vec::new();
            if content.function_responses().next().is_some() {
                content.parts.retain(|part| match part {
                    Part::FunctionResponse(r @ FunctionResponse { id: Some(id), .. })
                        if !on_time.contains(id.as_str()) =>
                    {
                        notes.push(late_result(r));
                        false
                    }
                    _ => true,
                });
            }
            if !content.parts.is_empty() {
                // Parallel function responses arrive as separate events; models want them together.
                match contents.last_mut() {
                    Some(last)
                        if last.role == content.role
                            && content.function_responses().next().is_some()
                            && last.function_responses().next().is_some() =>
                    {
                        last.parts.extend(content.parts);
                    }
                    _ => {
                        let waiting: Vec<Part> = content
                            .function_calls()
                            .filter_map(|call| {
                                let id = call.id.as_deref()?;
                                (!on_time.contains(id))
                                    .then(|| self.still_waiting(call, answered.contains(id)))
                            })
                            .collect();
                        contents.push(content);
                        if !waiting.is_empty() {
                            contents.push(Content::new(ROLE_USER, waiting));
                        }
                    }
                }
            }
            if !notes.is_empty() {
                contents.push(Content::new(
                    ROLE_USER,
                    notes.into_iter().map(Part::from_text).collect(),
                ));
            }
        }
        contents
    }

    /// The answer shown in place of a call that had no result at that point of the conversation.
    fn still_waiting(&self, call: &FunctionCall, answered_later: bool) -> Part {
        let status = call
            .id
            .as_deref()
            .and_then(|id| self.inner.store.call(id).ok().flatten())
            .map(|record| record.status);
        let text = if answered_later {
            "At this point the call was still waiting for the user's decision; its result is reported later in the conversation."
        } else {
            match status {
                Some(CallStatus::AwaitingApproval) => {
                    "Still waiting for the user's approval: it has not run. It runs only if the user approves it; do not propose it again unless the user asks."
                }
                Some(CallStatus::AwaitingAuth) => {
                    "Still waiting for the user to sign in to Feishu: it has not run yet."
                }
                Some(CallStatus::OutcomeUnknown) => {
                    "Its outcome is unknown; the user has been asked whether it took effect."
                }
                _ => "No result was recorded for this call.",
            }
        };
        let mut response = Map::new();
        response.insert("output".to_owned(), Value::String(text.to_owned()));
        if let Some(status) = status.filter(|_| !answered_later) {
            response.insert("status".to_owned(), json!(status));
        }
        Part::FunctionResponse(FunctionResponse {
            id: call.id.clone(),
            name: call.name.clone(),
            response,
        })
    }

    pub(super) fn build_request(&self, s: &SessionCache, node: &AgentNode) -> LlmRequest {
        let agent = &node.agent;
        let first = s
            .turn_starts
            .len()
            .checked_sub(self.inner.config.history_turns)
            .and_then(|i| s.turn_starts.get(i).copied())
            .unwrap_or(0);
        let contents = self.history(&s.events[first..], node.branch.as_deref());
        let mut config = agent.config.clone();
        if !agent.instruction.is_empty() {
            config.system_instruction = Some(Content::new(
                ROLE_USER,
                vec![Part::from_text(agent.instruction.clone())],
            ));
        }
        let mut declarations: Vec<FunctionDeclaration> =
            agent.tools().map(|t| t.declaration()).collect();
        let targets: Vec<String> = agent
            .sub_agents
            .iter()
            .map(|a| a.name.clone())
            .chain(node.parent.iter().cloned())
            .collect();
        if !targets.is_empty() {
            declarations.push(FunctionDeclaration::new(
                TRANSFER_TO_AGENT,
                "Hand the conversation to another agent better suited to the request.",
                json!({
                    "type": "object",
                    "properties": {"agent_name": {"type": "string", "enum": targets}},
                    "required": ["agent_name"]
                }),
            ));
        }
        config.tools = vec![ToolDeclaration {
            function_declarations: declarations
                .into_iter()
                .filter(|d| !agent.config.is_excluded(&d.name))
                .collect(),
        }];
        config.excluded_tools.clear();
        LlmRequest {
            model: Some(agent.model.name().to_owned()),
            contents: contents.into(),
            config: Some(config),
        }
    }
}

/// A result that arrived after a later message, as a note the model reads in order.
fn late_result(response: &FunctionResponse) -> String {
    format!(
        "Update on the earlier call {} ({}): the user has since decided it, and it answered: {}",
        response.name,
        response.id.as_deref().unwrap_or_default(),
        Value::Object(response.response.clone())
    )
}

pub(super) fn branch_visible(event_branch: Option<&str>, agent_branch: Option<&str>) -> bool {
    match (event_branch, agent_branch) {
        (None, _) => true,
        // The root sees everything; sub-agents see their ancestors' and descendants' events, not
        // their peers'.
        (Some(_), None) => true,
        (Some(event), Some(agent)) => {
            agent == event
                || agent.starts_with(&format!("{event}."))
                || event.starts_with(&format!("{agent}."))
        }
    }
}

pub(super) enum ModelOutcome {
    Response(LlmResponse, StateMap),
    Failed(ModelError, StateMap),
    /// Stopped by the user, with what the model had written so far.
    Cancelled(Option<Content>),
}
