//! Session autonomy: per conversation, how the approval gate treats writes. *Ask* (the default)
//! holds every write for the user. *Allow touched* lets a write through without asking when it
//! only touches what the user already approved writes to in this conversation (the same chat,
//! calendar, event, task or document ids), for a bounded time. *Read only* refuses every write.
//! The mode lives in the session's state (`_autonomy`), so it survives a restart and is the
//! session's own; every change and every call a mode decides is audited with the mode as actor.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Engine, EngineError};
use crate::event::{Event, EventActions};
use crate::persist::{CallFilter, CallRecord, CallStatus, Commit, Verdict};
use crate::result::ToolOutcome;

/// The session variable holding the mode.
pub const AUTONOMY_VARIABLE: &str = "_autonomy";

/// The longest an *allow touched* mode may last (30 minutes).
pub const MAX_TOUCHED_MS: i64 = 30 * 60 * 1000;

/// How the approval gate treats writes in one conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Autonomy {
    /// Every write waits for the user.
    #[default]
    Ask,
    /// Writes to what this conversation already touched run without asking, until `until`.
    AllowTouched {
        /// When the mode ends by itself (milliseconds since the Unix epoch).
        until: i64,
    },
    /// Every write is refused.
    ReadOnly,
}

impl Autonomy {
    /// The mode as stored: `null` for [`Autonomy::Ask`].
    fn to_value(self) -> Value {
        match self {
            Autonomy::Ask => Value::Null,
            Autonomy::AllowTouched { until } => json!({"mode": "allow_touched", "until": until}),
            Autonomy::ReadOnly => json!({"mode": "read_only"}),
        }
    }

    /// The mode stored in `value`, as it stands at `now` (a lapsed one is *ask*).
    pub fn from_value(value: Option<&Value>, now: i64) -> Autonomy {
        let Some(value) = value else {
            return Autonomy::Ask;
        };
        match value.get("mode").and_then(Value::as_str) {
            Some("read_only") => Autonomy::ReadOnly,
            Some("allow_touched") => match value.get("until").and_then(Value::as_i64) {
                Some(until) if until > now => Autonomy::AllowTouched { until },
                _ => Autonomy::Ask,
            },
            _ => Autonomy::Ask,
        }
    }

    /// The actor name audit rows give the mode.
    pub fn actor(self) -> &'static str {
        match self {
            Autonomy::Ask => "user",
            Autonomy::AllowTouched { .. } => "mode:allow_touched",
            Autonomy::ReadOnly => "mode:read_only",
        }
    }
}

/// The id-like arguments of a call (`chat_id`, `event_ids`…): what it touches.
fn targets(args: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, value) in args {
        if !(key.ends_with("_id") || key.ends_with("_ids")) {
            continue;
        }
        match value {
            Value::String(s) if !s.is_empty() => out.push((key.clone(), s.clone())),
            Value::Array(items) => out.extend(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| (key.clone(), s.to_owned())),
            ),
            _ => {}
        }
    }
    out
}

impl Engine {
    /// The conversation's mode now.
    pub async fn autonomy(&self, session_id: &str) -> Result<Autonomy, EngineError> {
        let mut guard = self.lock_session(session_id).await?;
        let s = guard.cache();
        Ok(Autonomy::from_value(
            s.state.get(AUTONOMY_VARIABLE),
            self.now(),
        ))
    }

    /// Sets the conversation's mode (an *allow touched* mode is cut to at most 30 minutes) and
    /// audits the change; answers the mode as it now stands.
    pub async fn set_autonomy(
        &self,
        session_id: &str,
        mode: Autonomy,
    ) -> Result<Autonomy, EngineError> {
        let now = self.now();
        let mode = match mode {
            Autonomy::AllowTouched { until } => Autonomy::AllowTouched {
                until: until.min(now + MAX_TOUCHED_MS),
            },
            other => other,
        };
        let mut guard = self.lock_session(session_id).await?;
        let s = guard.cache();
        // A state change of the session, outside any turn; authored by the engine's root agent
        // so it never reads as a user message that starts a turn.
        let mut event = Event::new(
            format!("inv_{}", uuid::Uuid::new_v4().simple()),
            self.root_name(),
        );
        event.timestamp = now;
        event.actions = EventActions::default();
        event
            .actions
            .state_delta
            .insert(AUTONOMY_VARIABLE.to_owned(), mode.to_value());
        let audit = self.audit(
            s,
            None,
            "autonomy.set",
            "user",
            json!({"mode": mode.to_value()}),
        );
        self.commit(
            s,
            Commit {
                events: vec![event],
                audit: vec![audit],
                ..Commit::default()
            },
        )?;
        Ok(Autonomy::from_value(
            s.state.get(AUTONOMY_VARIABLE),
            self.now(),
        ))
    }

    /// Whether `call` only touches what the user already approved writes to in its session.
    pub(super) fn touches_only_the_familiar(&self, call: &CallRecord) -> Result<bool, EngineError> {
        let wanted = targets(&call.args);
        if wanted.is_empty() {
            return Ok(false);
        }
        let done = self.inner.store.calls(&CallFilter {
            session_id: Some(call.session_id.clone()),
            statuses: vec![CallStatus::Done],
            ..CallFilter::default()
        })?;
        let familiar: HashSet<(String, String)> = done
            .iter()
            .filter(|c| {
                c.requires_approval
                    && c.outcome == Some(ToolOutcome::Completed)
                    && c.decision.as_ref().is_some_and(|d| {
                        super::decided_by_user(&d.decided_by)
                            && matches!(d.verdict, Verdict::Approved | Verdict::ApprovedEdited)
                    })
            })
            .flat_map(|c| targets(&c.args))
            .collect();
        Ok(wanted.iter().all(|t| familiar.contains(t)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_or_unknown_mode_reads_as_ask() {
        let now = 1_000;
        let touched = Autonomy::AllowTouched { until: 2_000 };
        assert_eq!(
            Autonomy::from_value(Some(&touched.to_value()), now),
            touched
        );
        assert_eq!(
            Autonomy::from_value(Some(&touched.to_value()), 2_000),
            Autonomy::Ask
        );
        assert_eq!(
            Autonomy::from_value(Some(&Autonomy::ReadOnly.to_value()), now),
            Autonomy::ReadOnly
        );
        assert_eq!(Autonomy::from_value(Some(&Value::Null), now), Autonomy::Ask);
        assert_eq!(Autonomy::from_value(None, now), Autonomy::Ask);
        assert_eq!(
            Autonomy::from_value(Some(&json!({"mode": "yolo"})), now),
            Autonomy::Ask
        );
    }

    #[test]
    fn targets_are_the_id_arguments() {
        let args =
            json!({"chat_id": "oc_1", "text": "hi", "attendee_ids": ["ou_1", "ou_2"], "n_id": 3});
        let mut t = targets(args.as_object().unwrap());
        t.sort();
        assert_eq!(
            t,
            [
                ("attendee_ids".to_owned(), "ou_1".to_owned()),
                ("attendee_ids".to_owned(), "ou_2".to_owned()),
                ("chat_id".to_owned(), "oc_1".to_owned()),
            ]
        );
    }
}
