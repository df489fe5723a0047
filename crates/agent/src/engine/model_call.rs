//! One model call: the request built from the visible history (the last few turns, the agent's
//! branch, parallel function responses merged), the model callbacks around it, and the streamed
//! answer, whose partial chunks reach subscribers as they come.

use futures::StreamExt as _;
use serde_json::json;

use super::{AgentNode, Engine, EngineEvent, SessionCache, Turn};
use crate::agent::LlmAgent;
use crate::content::{Content, Part, ROLE_USER, TRANSFER_TO_AGENT};
use crate::llm::{FunctionDeclaration, LlmRequest, LlmResponse, ToolDeclaration};
use crate::model::ModelError;
use crate::state::StateMap;

impl Engine {
    /// Builds the request, runs the model callbacks and streams the model's answer.
    pub(super) async fn call_model(&self, s: &mut SessionCache, turn: &mut Turn) -> ModelOutcome {
        let node = self.node(&turn.inv.agent_name);
        let agent = node.agent.clone();
        let mut request = self.build_request(s, node);
        let mut delta = StateMap::new();
        let mut ctx = self.callback_context(s, turn);
        let mut response = agent
            .callbacks
            .before_model
            .iter()
            .find_map(|cb| cb(&mut ctx, &mut request));
        Self::absorb(turn, &mut ctx, &mut delta);
        if response.is_none() {
            let streamed = tokio::select! {
                biased;
                () = turn.cancel.cancelled() => return ModelOutcome::Cancelled,
                streamed = self.stream_model(s, turn, &agent, request) => streamed,
            };
            match streamed {
                Ok(r) => response = Some(r),
                Err(error) => return ModelOutcome::Failed(error, delta),
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
    ) -> Result<LlmResponse, ModelError> {
        let mut stream = agent.model.generate(request).await?;
        while let Some(item) = stream.next().await {
            let response = item?;
            if response.is_partial() {
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

    pub(super) fn build_request(&self, s: &SessionCache, node: &AgentNode) -> LlmRequest {
        let agent = &node.agent;
        let first = s
            .turn_starts
            .len()
            .checked_sub(self.inner.config.history_turns)
            .and_then(|i| s.turn_starts.get(i).copied())
            .unwrap_or(0);
        let mut contents: Vec<Content> = Vec::new();
        for event in &s.events[first..] {
            if event.partial || !branch_visible(event.branch.as_deref(), node.branch.as_deref()) {
                continue;
            }
            let Some(content) = &event.content else {
                continue;
            };
            if content.parts.is_empty() {
                continue;
            }
            // Parallel function responses arrive as separate events; models want them together.
            match contents.last_mut() {
                Some(last)
                    if last.role == content.role
                        && content.function_responses().next().is_some()
                        && last.function_responses().next().is_some() =>
                {
                    last.parts.extend(content.parts.iter().cloned());
                }
                _ => contents.push(content.clone()),
            }
        }
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
    Cancelled,
}
