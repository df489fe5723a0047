//! Session state: a JSON map folded from the `state_delta` of every event.
//!
//! Keys carry their scope in a prefix, as in ADK: no prefix is this session only, `user:` is shared
//! by all of this user's sessions, `app:` by everyone, and `temp:` lives for one invocation and is
//! never persisted. In a delta a `null` value removes the key, so folding deltas in order always
//! rebuilds the state exactly.

use serde_json::{Map, Value};

/// Variables: name → JSON value.
pub type StateMap = Map<String, Value>;

/// Prefix of keys shared by all of one user's sessions.
pub const USER_PREFIX: &str = "user:";
/// Prefix of keys shared by every user of the app.
pub const APP_PREFIX: &str = "app:";
/// Prefix of keys that live for one invocation and are never persisted.
pub const TEMP_PREFIX: &str = "temp:";

/// Where a variable lives, decided by its key's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateScope {
    /// This session only (no prefix).
    Session,
    /// All sessions of this user (`user:`).
    User,
    /// Every user of the app (`app:`).
    App,
    /// This invocation only, never persisted (`temp:`).
    Temp,
}

impl StateScope {
    /// The scope of `key`.
    ///
    /// ```
    /// use agent::StateScope;
    /// assert_eq!(StateScope::of("user:lang"), StateScope::User);
    /// assert_eq!(StateScope::of("lang"), StateScope::Session);
    /// ```
    pub fn of(key: &str) -> Self {
        if key.starts_with(USER_PREFIX) {
            StateScope::User
        } else if key.starts_with(APP_PREFIX) {
            StateScope::App
        } else if key.starts_with(TEMP_PREFIX) {
            StateScope::Temp
        } else {
            StateScope::Session
        }
    }

    /// Whether variables of this scope are stored.
    pub fn is_persisted(self) -> bool {
        self != StateScope::Temp
    }
}

/// Applies one delta to `state`: `null` removes the key, any other value sets it.
pub fn apply_delta(state: &mut StateMap, delta: &StateMap) {
    for (key, value) in delta {
        if value.is_null() {
            // `remove` would be `swap_remove` under serde_json's `preserve_order`, moving the last
            // key into the hole; the state keeps its keys in the order they were first set.
            state.shift_remove(key);
        } else {
            state.insert(key.clone(), value.clone());
        }
    }
}

/// The part of `delta` that is stored: everything but `temp:` keys.
pub fn persisted_delta(delta: &StateMap) -> StateMap {
    delta
        .iter()
        .filter(|(key, _)| StateScope::of(key).is_persisted())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// The name of the variable holding the conversation's modality and channel.
pub const SESSION_VARIABLE: &str = "_session";

/// The `_session` variable: how the user is talking to the agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionInfo {
    /// `TEXT` or `VOICE`.
    pub modality: String,
    /// Where the conversation happens, such as `API` or `DESKTOP`.
    pub channel: String,
}

impl Default for SessionInfo {
    /// The seed's defaults: text over the API.
    fn default() -> Self {
        SessionInfo {
            modality: "TEXT".to_owned(),
            channel: "API".to_owned(),
        }
    }
}

impl SessionInfo {
    /// The value to store under [`SESSION_VARIABLE`].
    pub fn to_value(&self) -> Value {
        serde_json::json!({ "modality": self.modality, "channel": self.channel })
    }
}
