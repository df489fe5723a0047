//! Whose conversations these are: the *person* (the Feishu user) the app last signed in as, not
//! the sign-in itself. A sign-in ends for ordinary reasons — signing out, a refresh token that
//! lapses, a restart of demo mode, whose emulator forgets every token — and none of them may hide
//! the person's conversations, waiting approvals or titles. So the person is remembered (in the
//! encrypted vault) at each sign-in and stays the owner until a *different* user signs in: then
//! the first person's data is kept apart, out of the lists, until they sign in again, and the
//! sign-in says so. Conversations started before anyone signed in (`local`) become the first
//! person's when they sign in.

use std::collections::HashSet;

use agent::EngineConfig;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::CompanionError;

/// The vault entry holding the person of the real Feishu app; demo mode keeps its own, so the
/// demo's 林晓 never owns the user's real conversations.
const PERSON: &str = "companion.person";
const DEMO_PERSON: &str = "companion.person.demo";

/// The user id of conversations started before any sign-in.
pub const LOCAL: &str = "local";

/// A Feishu user the app has signed in as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    /// Their open_id, which conversations are kept under.
    pub open_id: String,
    /// Their name.
    pub name: String,
}

/// The person the app last signed in as, whether or not the sign-in still holds.
pub(crate) fn person(ctx: &Context) -> Result<Option<Person>, CompanionError> {
    Ok(ctx.vault().get_json(person_entry(ctx))?)
}

fn person_entry(ctx: &Context) -> &'static str {
    if ctx.is_demo() { DEMO_PERSON } else { PERSON }
}

/// Records who just signed in. Returns the previous person when it was someone else: their
/// data is now kept apart.
pub(crate) fn remember_person(
    ctx: &Context,
    person: Person,
) -> Result<Option<Person>, CompanionError> {
    let previous = self::person(ctx)?;
    if previous.as_ref() != Some(&person) {
        ctx.vault().put_json(person_entry(ctx), &person)?;
    }
    if previous.is_none() {
        // The first person to sign in is the one who used the app before: what they wrote
        // then is theirs, and a later, different person does not see it.
        ctx.store()
            .reassign_sessions(&EngineConfig::default().app_name, LOCAL, &person.open_id)?;
    }
    Ok(previous.filter(|p| p.open_id != person.open_id))
}

/// The user id conversations are kept under now: the person's, or [`LOCAL`] before anyone
/// signed in. A damaged vault entry reads as no person rather than hiding everything.
pub(crate) fn owner_id(ctx: &Context) -> String {
    match person(ctx) {
        Ok(Some(person)) => person.open_id,
        Ok(None) => LOCAL.to_owned(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read who the conversations belong to");
            LOCAL.to_owned()
        }
    }
}

/// The conversations the person sees: theirs and those started before any sign-in.
pub(crate) fn owned_sessions(ctx: &Context) -> Result<Vec<store::SessionMeta>, CompanionError> {
    let app = EngineConfig::default().app_name;
    let owner = owner_id(ctx);
    let mut sessions = ctx.store().list_sessions(&app, &owner)?;
    if owner != LOCAL {
        sessions.extend(ctx.store().list_sessions(&app, LOCAL)?);
    }
    Ok(sessions)
}

/// The ids of [`Companion::owned_sessions`].
pub(crate) fn owned_session_ids(ctx: &Context) -> Result<HashSet<String>, CompanionError> {
    Ok(owned_sessions(ctx)?.into_iter().map(|s| s.id).collect())
}
