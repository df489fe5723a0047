//! Recovery after a restart, from the database alone: writes in flight are retried with their
//! idempotency key where the service deduplicates and otherwise become "outcome unknown" for the
//! user; approved calls that never ran are run; running turns are marked interrupted; suspended
//! turns with nothing left to wait for are resumed.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError, RecoveryReport, Turn, notice};
use crate::persist::{
    CallStatus, Commit, InvocationRecord, InvocationStatus, JournalEntry, JournalOp,
};
use crate::state::StateMap;

impl Engine {
    /// Picks up after a restart: writes that were in flight are retried with their key where the
    /// service deduplicates and otherwise left for the user as "outcome unknown"; approved calls
    /// that never ran are run; turns that were running are marked interrupted; suspended turns
    /// with nothing left to wait for are resumed. Held calls stay held and listed.
    pub async fn recover(&self) -> Result<RecoveryReport, EngineError> {
        let mut report = RecoveryReport::default();
        // Writes first: a turn can only be judged once its interrupted writes are either back
        // in line (`Approved`) or waiting for the user.
        for entry in self.inner.store.unfinished_dispatches()? {
            self.recover_write(entry, &mut report).await?;
        }
        for inv in self
            .inner
            .store
            .invocations_with_status(&[InvocationStatus::Running, InvocationStatus::Suspended])?
        {
            self.recover_turn(inv, &mut report).await?;
        }
        Ok(report)
    }

    /// A write the crash caught in flight: sent again with the same key only where the service
    /// deduplicates, since elsewhere a second send could do it twice; otherwise the user says
    /// whether it happened.
    async fn recover_write(
        &self,
        entry: JournalEntry,
        report: &mut RecoveryReport,
    ) -> Result<(), EngineError> {
        let Some(mut call) = self.inner.store.call(&entry.call_id)? else {
            return Ok(());
        };
        // An earlier recovery already left this one to the user (outcome unknown keeps its row
        // open until they settle it): it is not in flight any more.
        if call.status != CallStatus::Dispatching {
            return Ok(());
        }
        let mut guard = self.lock_session(&call.session_id).await?;
        let s = guard.cache();
        let dedups = self
            .node(&call.agent_name)
            .agent
            .tool(&call.tool)
            .is_some_and(|t| t.deduplicates());
        let mut commit = Commit::default();
        if dedups {
            call.status = CallStatus::Approved;
            commit.journal.push(JournalOp::Finish {
                call_id: call.call_id.clone(),
                attempt: entry.attempt,
                finished_at: self.now(),
                // It may or may not have gone through; the retry with the same key settles it.
                outcome: None,
            });
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.retry_after_crash",
                "engine",
                json!({"idempotency_key": call.idempotency_key}),
            ));
            report.retried.push(call.call_id.clone());
        } else {
            call.status = CallStatus::OutcomeUnknown;
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.outcome_unknown",
                "engine",
                json!({"idempotency_key": call.idempotency_key}),
            ));
            report.outcome_unknown.push(call.call_id.clone());
        }
        call.updated_at = self.now();
        call.version += 1;
        commit.calls.push(call);
        self.commit(s, commit)
    }

    /// A turn that was open when the process died: what the user already approved runs; then it
    /// waits if anything still waits, goes on if it had only been waiting, and is otherwise
    /// closed as interrupted, since nobody is there to take the model's half-finished step on.
    async fn recover_turn(
        &self,
        inv: InvocationRecord,
        report: &mut RecoveryReport,
    ) -> Result<(), EngineError> {
        let mut guard = self.lock_session(&inv.session_id).await?;
        let s = guard.cache();
        let mut turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        // Approved calls never lost: run them now.
        self.run_approved(s, &mut turn).await?;
        let open = self.open_calls(&inv.id)?;
        if !open.is_empty() {
            report
                .pending
                .extend(open.iter().map(|c| c.call_id.clone()));
            self.set_status(s, &mut turn, InvocationStatus::Suspended)?;
        } else if inv.status == InvocationStatus::Suspended {
            report.resumed.push(inv.id.clone());
            drop(turn);
            self.resume(s, inv).await?;
        } else {
            let mut event = self.agent_event(&turn, None);
            event.interrupted = true;
            event.turn_complete = true;
            event.error_code = Some(notice::INTERRUPTED_CODE.to_owned());
            event.error_message = Some(notice::INTERRUPTED.to_owned());
            report.interrupted.push(inv.id.clone());
            self.finish(s, &mut turn, InvocationStatus::Interrupted, vec![event])?;
        }
        Ok(())
    }
}
