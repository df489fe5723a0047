//! Expiry: an approval that waited past its time is answered `CANCELLED` ("expired") and its
//! turn moves on without it.

use super::{Engine, EngineError};
use crate::persist::{ApprovalDecision, CallFilter, CallRecord, CallStatus, Verdict};
use crate::result::{ToolOutcome, ToolResult};

impl Engine {
    /// Expires approvals that waited past their time: each is answered `CANCELLED` ("expired")
    /// and its turn moves on. Returns the expired call ids.
    pub async fn expire_due(&self) -> Result<Vec<String>, EngineError> {
        let now = self.now();
        let due: Vec<CallRecord> = self
            .inner
            .store
            .calls(&CallFilter {
                statuses: vec![CallStatus::AwaitingApproval],
                ..CallFilter::default()
            })?
            .into_iter()
            .filter(|c| c.expires_at.is_some_and(|at| at <= now))
            .collect();
        let mut expired = Vec::new();
        for call in due {
            let (mut guard, mut call, inv) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingApproval])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            let s = guard.cache();
            call.decision = Some(ApprovalDecision {
                verdict: Verdict::Expired,
                decided_by: "engine".to_owned(),
                decided_at: now,
                reason: Some("no decision before the approval expired".to_owned()),
                args_hash: None,
            });
            expired.push(call.call_id.clone());
            self.answer(
                s,
                &inv,
                call,
                ToolResult::new(ToolOutcome::Cancelled).with_content("The approval request expired before the user decided, so the call did not run."),
                "approval.expired",
                Vec::new(),
            )?;
            if let Err(e) = self.resume(s, inv).await {
                tracing::warn!(error = %e, "resuming a turn after an expiry failed");
            }
        }
        Ok(expired)
    }
}
