//! Expiry: an approval that waited past its time is answered `CANCELLED` ("expired") and its
//! turn moves on without it. The periodic sweep ([`Engine::expire_due`]) is only one of the
//! places that enforce it: every decision checks the time under the session's lock (a late
//! Approve expires the call instead of running it), and dispatch refuses a write whose approval
//! was recorded after the request had expired.

use super::{Engine, EngineError, SessionCache, notice};
use crate::persist::{
    ApprovalDecision, CallFilter, CallRecord, CallStatus, InvocationRecord, Verdict,
};
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
            let (mut guard, call, inv) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingApproval])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            let s = guard.cache();
            expired.push(call.call_id.clone());
            self.expire(s, &inv, call)?;
            if let Err(e) = self.resume(s, inv).await {
                tracing::warn!(error = %e, "resuming a turn after an expiry failed");
            }
        }
        Ok(expired)
    }

    /// Whether `call`'s approval has run out of time.
    pub(super) fn is_expired(&self, call: &CallRecord) -> bool {
        call.expires_at.is_some_and(|at| at <= self.now())
    }

    /// Answers a held call as expired (the model is told it did not run); the caller moves its
    /// turn on.
    pub(super) fn expire(
        &self,
        s: &mut SessionCache,
        inv: &InvocationRecord,
        mut call: CallRecord,
    ) -> Result<(), EngineError> {
        call.decision = Some(ApprovalDecision {
            verdict: Verdict::Expired,
            decided_by: "engine".to_owned(),
            decided_at: self.now(),
            reason: Some(notice::EXPIRED.to_owned()),
            args_hash: None,
        });
        self.answer(
            s,
            inv,
            call,
            ToolResult::new(ToolOutcome::Cancelled).with_content(
                "The approval request expired before the user decided, so the call did not run.",
            ),
            "approval.expired",
            Vec::new(),
        )
    }
}
