//! Auth suspension: a call whose tool needs a permission the user has not granted waits as
//! `AwaitingAuth`; when a sign-in grants its scopes it runs again with its original arguments (an
//! approval given before still holds), and when the user declines the model is told `CANCELLED`.

use std::collections::HashSet;

use serde_json::json;

use super::{Engine, EngineError, TurnOutcome};
use crate::persist::{CallFilter, CallStatus, Commit};
use crate::result::{ToolOutcome, ToolResult};

impl Engine {
    /// Tells the engine these scopes are now granted: every call waiting for no more than them
    /// runs again with its original arguments (an approval given before still holds).
    pub async fn auth_completed(
        &self,
        granted: &[String],
    ) -> Result<Vec<TurnOutcome>, EngineError> {
        let granted: HashSet<&str> = granted.iter().map(String::as_str).collect();
        let waiting = self.inner.store.calls(&CallFilter {
            statuses: vec![CallStatus::AwaitingAuth],
            ..CallFilter::default()
        })?;
        let mut outcomes = Vec::new();
        for call in waiting {
            if !call
                .auth_scopes
                .iter()
                .all(|scope| granted.contains(scope.as_str()))
            {
                continue;
            }
            let (mut guard, mut call, inv) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingAuth])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            let s = guard.cache();
            call.status = CallStatus::Approved;
            call.updated_at = self.now();
            call.version += 1;
            let audit = self.audit(
                s,
                Some(&call),
                "auth.granted",
                "user",
                json!({"scopes": call.auth_scopes}),
            );
            self.commit(
                s,
                Commit {
                    calls: vec![call],
                    audit: vec![audit],
                    ..Commit::default()
                },
            )?;
            outcomes.push(self.resume(s, inv).await?);
        }
        Ok(outcomes)
    }

    /// The user declined to sign in for this call: the model gets `CANCELLED`.
    pub async fn auth_declined(&self, call_id: &str) -> Result<TurnOutcome, EngineError> {
        let (mut guard, call, inv) = self.held_call(call_id, &[CallStatus::AwaitingAuth]).await?;
        let s = guard.cache();
        self.answer(
            s,
            &inv,
            call,
            ToolResult::new(ToolOutcome::Cancelled)
                .with_content("The user declined to sign in, so the call did not run."),
            "auth.declined",
            Vec::new(),
        )?;
        self.resume(s, inv).await
    }
}
