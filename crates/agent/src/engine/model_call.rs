//! One model call: the request built from the visible history (the last few turns, the agent's
//! branch, rendered by `history`), the model callbacks around it, and the streamed
//! answer, whose partial chunks reach subscribers as they come.

use futures::StreamExt as _;
use serde_json::json;

use super::{AgentNode, Engine, EngineEvent, SessionCache, Turn};
use crate::agent::LlmAgent;
use crate::content::{Content, Part, ROLE_MODEL, ROLE_USER, TRANSFER_TO_AGENT};
use crate::llm::{FinishReason, FunctionDeclaration, LlmRequest, LlmResponse, ToolDeclaration};
use crate::model::ModelError;
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

    pub(super) fn build_request(&self, s: &mut SessionCache, node: &AgentNode) -> LlmRequest {
        let agent = &node.agent;
        let first = s
            .turn_starts
            .len()
            .checked_sub(self.inner.config.history_turns)
            .and_then(|i| s.turn_starts.get(i).copied())
            .unwrap_or(0);
        let store = &self.inner.store;
        let status = |id: &str| store.call(id).ok().flatten().map(|record| record.status);
        let contents = s
            .history
            .contents(&s.events, first, node.branch.as_deref(), &status);
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
            contents,
            config: Some(config),
        }
    }
}

pub(super) enum ModelOutcome {
    Response(LlmResponse, StateMap),
    Failed(ModelError, StateMap),
    /// Stopped by the user, with what the model had written so far.
    Cancelled(Option<Content>),
}
