//! What a new message does to the approvals still waiting in its conversation. They survive it
//! by default (the model is told they still wait, and deciding them later still runs them); the
//! composer asks before sending, and only the user's explicit choice calls them off, recorded on
//! each card in the user's language ([`agent::engine::notice::CANCELLED_FOR_NEW_MESSAGE`]).

use std::collections::BTreeSet;

use agent::{CallRecord, Content, WaitingCalls};

use crate::agents::ConnectedAgents;
use crate::context::Context;
use crate::error::CompanionError;
use crate::view::timeline::TurnView;

/// Sends a message; with `cancel_waiting` the approvals and sign-ins still waiting in the
/// conversation are called off first, otherwise they keep waiting.
pub(crate) async fn send_message(
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

/// Everything waiting for the person, across conversations, oldest first: another person's
/// waiting approvals stay apart ([`crate::person`]).
pub(crate) fn pending(
    ctx: &Context,
    agents: &ConnectedAgents,
) -> Result<Vec<CallRecord>, CompanionError> {
    let users = users_calls(ctx, agents)?;
    Ok(ctx
        .engine()
        .pending_calls()?
        .into_iter()
        .filter(|c| users(c))
        .collect())
}

/// Which calls are the person's: those of their conversations, and their connected agents'
/// (which wait in the same inbox and on the same Feishu cards).
pub(crate) fn users_calls(
    ctx: &Context,
    agents: &ConnectedAgents,
) -> Result<impl Fn(&CallRecord) -> bool + use<>, CompanionError> {
    let owned = crate::person::owned_session_ids(ctx)?;
    let agents: BTreeSet<String> = agents
        .snapshot()
        .clients
        .into_iter()
        .map(|a| a.id)
        .collect();
    Ok(move |c: &CallRecord| owned.contains(&c.session_id) || agents.contains(&c.agent_name))
}
