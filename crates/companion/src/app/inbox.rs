//! The facade of the inbox: what waits for the user, and deciding it.

use agent::{CallRecord, CallStatus, Decision};

use super::Companion;
use crate::error::CompanionError;
use crate::view::call::CallView;
use crate::view::decide::{BatchDecision, SettlementInput};
use crate::view::timeline::TurnView;

impl Companion {
    /// Everything waiting for the person, across conversations, oldest first (the engine's
    /// records; [`Companion::pending_calls`] is the inbox's view of them).
    pub fn pending(&self) -> Result<Vec<CallRecord>, CompanionError> {
        crate::waiting::pending(&self.ctx, self.agent_registry())
    }

    /// What the inbox shows: the calls waiting for an approval, a sign-in, or a word on a
    /// write whose outcome a crash made unknown.
    pub fn pending_calls(&self) -> Result<Vec<CallView>, CompanionError> {
        Ok(self
            .pending()?
            .iter()
            .filter(|c| {
                matches!(
                    c.status,
                    CallStatus::AwaitingApproval
                        | CallStatus::AwaitingAuth
                        | CallStatus::OutcomeUnknown
                )
            })
            .map(CallView::from)
            .collect())
    }

    /// Approves, edits and approves, rejects, or always-allows a held call.
    pub async fn decide(
        &self,
        call_id: &str,
        decision: impl Into<Decision>,
    ) -> Result<TurnView, CompanionError> {
        Ok(self.engine().decide(call_id, decision.into()).await?.into())
    }

    /// Decides many held calls at once (the inbox's multi-select).
    pub async fn decide_many(
        &self,
        decisions: Vec<BatchDecision>,
    ) -> Result<Vec<TurnView>, CompanionError> {
        let decisions = decisions
            .into_iter()
            .map(|d| (d.call_id, d.decision.into()))
            .collect();
        let outcomes = self.engine().decide_many(decisions).await?;
        Ok(outcomes.into_iter().map(TurnView::from).collect())
    }

    /// Settles a write whose outcome a crash made unknown.
    pub async fn settle(
        &self,
        call_id: &str,
        settlement: SettlementInput,
    ) -> Result<TurnView, CompanionError> {
        let outcome = self.engine().settle(call_id, settlement.into()).await?;
        Ok(outcome.into())
    }
}
