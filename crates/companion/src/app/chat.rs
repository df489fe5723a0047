//! The facade of the conversation page: sessions, messages, autonomy, edits of a waiting call.

use super::Companion;
use crate::autonomy::{AutonomyInput, AutonomyView};
use crate::edit::EditCheckView;
use crate::error::CompanionError;
use crate::view::timeline::TurnView;
use serde_json::{Map, Value};

impl Companion {
    /// Sends a message; with `cancel_waiting` the approvals and sign-ins still waiting in the
    /// conversation are called off first, otherwise they keep waiting.
    pub async fn send_choosing(
        &self,
        session_id: &str,
        text: &str,
        cancel_waiting: bool,
    ) -> Result<TurnView, CompanionError> {
        crate::waiting::send_choosing(&self.ctx, session_id, text, cancel_waiting).await
    }

    /// A conversation's mode as it stands now (a lapsed one reads as `ask`).
    pub fn autonomy_of(&self, session_id: &str) -> Result<AutonomyView, CompanionError> {
        crate::autonomy::autonomy_of(&self.ctx, session_id)
    }

    /// Sets a conversation's mode; the engine audits the change.
    pub async fn set_autonomy(
        &self,
        session_id: &str,
        mode: AutonomyInput,
    ) -> Result<AutonomyView, CompanionError> {
        crate::autonomy::set_autonomy(&self.ctx, session_id, mode).await
    }

    /// Checks edited arguments for a held call and previews them; nothing is recorded.
    pub async fn check_edit(
        &self,
        call_id: &str,
        args: Map<String, Value>,
    ) -> Result<EditCheckView, CompanionError> {
        crate::edit::check_edit(&self.ctx, call_id, args).await
    }
}
