//! What callbacks and tools see of the session: [`CallbackContext`] and [`ToolContext`].
//!
//! The seed's `variables` and `state` are one map. Every change goes through
//! [`CallbackContext::set_variable`] / [`CallbackContext::remove_variable`], which keep the view up
//! to date *and* record the change, so the engine can write it as the event's
//! `actions.state_delta` and the stored state stays the fold of the deltas.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde_json::Value;

use crate::content::{Content, Part};
use crate::event::{Event, EventActions};
use crate::state::{SESSION_VARIABLE, SessionInfo, StateMap, apply_delta};

/// Session information available while a callback runs.
#[derive(Debug, Clone)]
pub struct CallbackContext {
    /// The user's most recent input.
    pub user_content: Option<Content>,
    /// The invocation's id, for debugging.
    pub invocation_id: String,
    /// The agent the callback belongs to.
    pub agent_name: String,
    /// The session's id.
    pub session_id: String,
    /// The session's events so far (shared, never copied per callback).
    pub events: Arc<Vec<Event>>,
    state: StateMap,
    state_delta: StateMap,
}

impl CallbackContext {
    /// A context over this state and these events; `user_content` is the last user message.
    pub fn new(
        invocation_id: impl Into<String>,
        agent_name: impl Into<String>,
        session_id: impl Into<String>,
        state: StateMap,
        events: Arc<Vec<Event>>,
    ) -> Self {
        let user_content = events
            .iter()
            .rev()
            .find(|e| e.is_user() && e.content.is_some())
            .and_then(|e| e.content.clone());
        CallbackContext {
            user_content,
            invocation_id: invocation_id.into(),
            agent_name: agent_name.into(),
            session_id: session_id.into(),
            events,
            state,
            state_delta: StateMap::new(),
        }
    }

    /// The variables as they are now, changes made through this context included.
    pub fn variables(&self) -> &StateMap {
        &self.state
    }

    /// The same map as [`CallbackContext::variables`]; kept for ADK-style code.
    pub fn state(&self) -> &StateMap {
        &self.state
    }

    /// The changes made through this context, in the form of an event's `state_delta`
    /// (`null` marks a removal).
    pub fn state_delta(&self) -> &StateMap {
        &self.state_delta
    }

    /// Takes the recorded changes, leaving none; the view keeps them.
    pub fn take_state_delta(&mut self) -> StateMap {
        std::mem::take(&mut self.state_delta)
    }

    /// A variable's value, or `default` when it is not set.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent::CallbackContext;
    /// use serde_json::json;
    ///
    /// let mut ctx = CallbackContext::new("inv", "assistant", "s1", Default::default(), Arc::default());
    /// ctx.set_variable("my_key", json!(10));
    /// assert_eq!(ctx.get_variable("my_key", json!(0)), json!(10));
    /// ctx.remove_variable("my_key");
    /// assert_eq!(ctx.get_variable("my_key", json!(0)), json!(0));
    /// assert_eq!(ctx.state_delta()["my_key"], json!(null));
    /// ```
    pub fn get_variable(&self, key: &str, default: Value) -> Value {
        self.state.get(key).cloned().unwrap_or(default)
    }

    /// Sets a variable, creating or replacing it. Setting `null` removes it, as a `null` in a
    /// delta means removal.
    pub fn set_variable(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        let mut change = StateMap::new();
        change.insert(key.clone(), value.clone());
        apply_delta(&mut self.state, &change);
        self.state_delta.insert(key, value);
    }

    /// Removes a variable (no error when it is not set).
    pub fn remove_variable(&mut self, key: &str) {
        self.set_variable(key, Value::Null);
    }

    /// The `_session` variable, with the seed's defaults for whatever is missing.
    pub fn session_info(&self) -> SessionInfo {
        let session = self.state.get(SESSION_VARIABLE);
        let field = |name: &str| {
            session
                .and_then(|s| s.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let defaults = SessionInfo::default();
        SessionInfo {
            modality: field("modality").unwrap_or(defaults.modality),
            channel: field("channel").unwrap_or(defaults.channel),
        }
    }

    /// All parts of the last block of consecutive user events.
    pub fn get_last_user_input(&self) -> Vec<Part> {
        self.last_block(Event::is_user)
    }

    /// All parts of the last block of consecutive agent events.
    pub fn get_last_agent_output(&self) -> Vec<Part> {
        self.last_block(|e| e.is_agent(None))
    }

    /// Every part of the conversation, in order.
    pub fn parts(&self) -> Vec<Part> {
        self.complete_events()
            .flat_map(|e| e.parts().iter().cloned())
            .collect()
    }

    /// Streamed chunks are previews of a later complete event; counting them would repeat text.
    fn complete_events(&self) -> impl DoubleEndedIterator<Item = &Event> {
        self.events.iter().filter(|e| !e.partial)
    }

    fn last_block(&self, belongs: impl Fn(&Event) -> bool) -> Vec<Part> {
        let mut block: Vec<&Event> = self
            .complete_events()
            .rev()
            .skip_while(|e| !belongs(e))
            .take_while(|e| belongs(e))
            .collect();
        block.reverse();
        block
            .into_iter()
            .flat_map(|e| e.parts().iter().cloned())
            .collect()
    }
}

/// Session information available while a tool runs: a [`CallbackContext`] plus the call's id.
#[derive(Debug, Clone)]
pub struct ToolContext {
    context: CallbackContext,
    /// The id of the function call being executed.
    pub function_call_id: String,
    /// The key a write must pass to the service (Feishu's `uuid`, `idempotency_key` or
    /// `client_token`), the same on every retry of this call.
    pub idempotency_key: String,
    /// Actions the tool asks for (escalate, transfer, end the invocation, skip summarisation);
    /// they go on the function response's event with the state changes.
    pub actions: EventActions,
}

impl ToolContext {
    /// The context of the call `function_call_id`; its idempotency key is the call id until set.
    pub fn new(context: CallbackContext, function_call_id: impl Into<String>) -> Self {
        let function_call_id = function_call_id.into();
        ToolContext {
            context,
            idempotency_key: function_call_id.clone(),
            function_call_id,
            actions: EventActions::default(),
        }
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = key.into();
        self
    }

    /// The callback context this tool context extends.
    pub fn into_callback_context(self) -> CallbackContext {
        self.context
    }
}

impl Deref for ToolContext {
    type Target = CallbackContext;

    fn deref(&self) -> &CallbackContext {
        &self.context
    }
}

impl DerefMut for ToolContext {
    fn deref_mut(&mut self) -> &mut CallbackContext {
        &mut self.context
    }
}
