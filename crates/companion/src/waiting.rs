//! What a new message does to the approvals still waiting in its conversation. They survive it
//! by default (the model is told they still wait, and deciding them later still runs them); the
//! composer asks before sending, and only the user's explicit choice calls them off, recorded on
//! each card in the user's language ([`agent::engine::notice::CANCELLED_FOR_NEW_MESSAGE`]).

use agent::{Content, WaitingCalls};

use crate::context::Context;
use crate::error::CompanionError;
use crate::view::timeline::TurnView;

/// Sends a message; with `cancel_waiting` the approvals and sign-ins still waiting in the
/// conversation are called off first, otherwise they keep waiting.
pub(crate) async fn send_choosing(
    ctx: &Context,
    session_id: &str,
    text: &str,
    cancel_waiting: bool,
) -> Result<TurnView, CompanionError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(CompanionError::Other("the message is empty".to_owned()));
    }
    let waiting = if cancel_waiting {
        WaitingCalls::Cancel
    } else {
        WaitingCalls::Keep
    };
    Ok(ctx
        .engine()
        .send_message_with(session_id, Content::user_text(text), waiting)
        .await?
        .into())
}
