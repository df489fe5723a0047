//! The facade of the conversation page: sessions, messages, autonomy, edits of a waiting call.

use serde_json::{Map, Value};

use super::Companion;
use crate::autonomy::{AutonomyInput, AutonomyView};
use crate::edit::EditCheckView;
use crate::error::CompanionError;
use crate::view::build::TimelineView;
use crate::view::timeline::{SessionView, TurnView};

impl Companion {
    /// Starts a new conversation.
    pub async fn create_session(&self) -> Result<String, CompanionError> {
        // The person last signed in, or `local` before any sign-in (crate::person).
        let user = crate::person::owner_id(&self.ctx);
        Ok(self.engine().create_session(&user, &Default::default())?)
    }

    /// The person's conversations, most recent first, each with its title and what waits in it.
    pub async fn list_sessions(&self) -> Result<Vec<SessionView>, CompanionError> {
        crate::sessions::list(&self.ctx, &self.pending()?)
    }

    /// A conversation's stored events.
    pub fn session_events(&self, session_id: &str) -> Result<Vec<agent::Event>, CompanionError> {
        crate::sessions::events(&self.ctx, session_id)
    }

    /// A conversation, whole: its entries and every call the engine tracks in it.
    pub fn timeline(&self, session_id: &str) -> Result<TimelineView, CompanionError> {
        crate::sessions::timeline_of(&self.ctx, session_id)
    }

    /// Sends a message and runs the turn until it completes or waits for the user. With
    /// `cancel_waiting` the approvals and sign-ins still waiting in the conversation are called
    /// off first; otherwise they keep waiting.
    pub async fn send_message(
        &self,
        session_id: &str,
        text: &str,
        cancel_waiting: bool,
    ) -> Result<TurnView, CompanionError> {
        crate::waiting::send_message(&self.ctx, session_id, text, cancel_waiting).await
    }

    /// Stops the running or waiting turn of a conversation.
    pub async fn cancel_turn(&self, session_id: &str) -> Result<bool, CompanionError> {
        Ok(self.engine().cancel(session_id).await?)
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
