//! Events: the append-only record of a session. Every user message, model response, tool result
//! and state change is an [`Event`]; what it did besides its content is in [`EventActions`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::content::{Content, Part, ROLE_USER};
use crate::state::StateMap;

/// The author of events written by the user.
pub const USER_AUTHOR: &str = ROLE_USER;

/// What an event did besides carrying content.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventActions {
    /// Do not call the model to summarise this function response.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub skip_summarization: bool,
    /// The changes this event made to the variables; a `null` value removes the key.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "Map::is_empty"
    )]
    pub state_delta: StateMap,
    /// Artifacts changed by this event: file name → version.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub artifact_delta: BTreeMap<String, i64>,
    /// Hand the conversation to this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_to_agent: Option<String>,
    /// The agent escalates to a higher-level agent.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub escalate: bool,
    /// Sign-in requests of this event's tool responses: function-call id → the auth config.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub requested_auth_configs: BTreeMap<String, Map<String, Value>>,
    /// The agent loop stops after this event.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub end_invocation: bool,
}

impl EventActions {
    /// Whether the actions say nothing at all.
    pub fn is_empty(&self) -> bool {
        self == &EventActions::default()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One event in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// The event's id.
    pub id: String,
    /// The invocation (turn) this event belongs to.
    pub invocation_id: String,
    /// `user`, or the name of the agent that wrote it.
    pub author: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// The message carried, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// What the event did.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "EventActions::is_empty"
    )]
    pub actions: EventActions,
    /// Ids of long-running function calls.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "BTreeSet::is_empty"
    )]
    pub long_running_tool_ids: BTreeSet<String>,
    /// An incomplete chunk of a streamed model response.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub partial: bool,
    /// The current turn is complete.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub turn_complete: bool,
    /// An error code, when something went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// A readable error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The turn was interrupted.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub interrupted: bool,
    /// `agent_1.agent_2.agent_3`: the agent path, so sub-agents need not see their peers' history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Grounding metadata from the model, kept as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding_metadata: Option<Value>,
    /// Why the model stopped, on a model response (as in ADK, whose events carry the response's
    /// fields): what the user is told when an answer is cut off or withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<crate::llm::FinishReason>,
    /// The tokens the model call of this event cost, as the service reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<crate::llm::UsageMetadata>,
    /// How long the service asked to wait, on a `rate_limited` error event (milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// Milliseconds since the Unix epoch, now.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Event {
    /// A new event with a fresh id and the current time, and nothing else set.
    pub fn new(invocation_id: impl Into<String>, author: impl Into<String>) -> Self {
        Event {
            id: uuid::Uuid::new_v4().to_string(),
            invocation_id: invocation_id.into(),
            author: author.into(),
            timestamp: now_millis(),
            content: None,
            actions: EventActions::default(),
            long_running_tool_ids: BTreeSet::new(),
            partial: false,
            turn_complete: false,
            error_code: None,
            error_message: None,
            interrupted: false,
            branch: None,
            grounding_metadata: None,
            finish_reason: None,
            usage_metadata: None,
            retry_after_ms: None,
        }
    }

    /// Sets the content.
    #[must_use]
    pub fn with_content(mut self, content: Content) -> Self {
        self.content = Some(content);
        self
    }

    /// Sets the actions.
    #[must_use]
    pub fn with_actions(mut self, actions: EventActions) -> Self {
        self.actions = actions;
        self
    }

    /// Whether the user wrote this event.
    pub fn is_user(&self) -> bool {
        self.author == USER_AUTHOR
    }

    /// Whether an agent wrote this event; with a name, whether that agent did.
    pub fn is_agent(&self, agent_name: Option<&str>) -> bool {
        !self.is_user() && agent_name.is_none_or(|name| self.author == name)
    }

    /// Whether the event carries an error code.
    pub fn has_error(&self) -> bool {
        self.error_code.is_some()
    }

    /// The content's parts; empty when there is no content.
    pub fn parts(&self) -> &[Part] {
        self.content.as_ref().map_or(&[], |c| c.parts.as_slice())
    }

    /// Whether this event is final for its author's step: not a partial chunk, and not waiting on
    /// function calls that have not been answered.
    pub fn is_final_response(&self) -> bool {
        if self.actions.skip_summarization || !self.long_running_tool_ids.is_empty() {
            return true;
        }
        !self.partial
            && !self
                .parts()
                .iter()
                .any(|p| matches!(p, Part::FunctionCall(_) | Part::FunctionResponse(_)))
    }
}
