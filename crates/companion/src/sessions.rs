//! The conversation list and a conversation's timeline as the UI shows them: each conversation
//! titled by the start of its first message (remembered once known, [`Context::titles`]), with
//! the number of calls waiting in it; a timeline with every call the engine tracks.

use std::collections::HashMap;

use agent::CallRecord;
use agent::persist::CallFilter;

use crate::context::Context;
use crate::error::CompanionError;
use crate::sync::lock;
use crate::text::cut;
use crate::view::build::{TimelineView, timeline};
use crate::view::call::CallView;
use crate::view::timeline::SessionView;

/// How much of the first message names a conversation.
const TITLE_CHARS: usize = 40;

/// The person's conversations, most recent first; `pending` is what waits for the person.
pub(crate) fn list(
    ctx: &Context,
    pending: &[CallRecord],
) -> Result<Vec<SessionView>, CompanionError> {
    let mut waiting: HashMap<&str, u32> = HashMap::new();
    for call in pending {
        *waiting.entry(call.session_id.as_str()).or_default() += 1;
    }
    let mut out = Vec::new();
    for meta in crate::person::owned_sessions(ctx)? {
        let title = title(ctx, &meta.id)?;
        out.push(SessionView {
            pending: waiting.get(meta.id.as_str()).copied().unwrap_or(0),
            id: meta.id,
            title,
            created_at: meta.created_at,
            updated_at: meta.updated_at,
        });
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
    Ok(out)
}

/// A conversation's stored events.
pub(crate) fn events(ctx: &Context, session_id: &str) -> Result<Vec<agent::Event>, CompanionError> {
    Ok(ctx.runtime().store.load_session(session_id)?.events)
}

/// A conversation's title: the start of its first message, remembered once known.
fn title(ctx: &Context, session_id: &str) -> Result<String, CompanionError> {
    if let Some(title) = lock(ctx.titles()).get(session_id) {
        return Ok(title.clone());
    }
    let events = events(ctx, session_id)?;
    let first = events.iter().find_map(|e| {
        e.content
            .as_ref()
            .filter(|c| c.is_user() && e.author == agent::USER_AUTHOR)
            .map(|c| c.text())
            .filter(|t| !t.trim().is_empty())
    });
    let Some(first) = first else {
        // No title yet: not remembered, so the first message names it.
        return Ok(String::new());
    };
    let title = cut(first.lines().next().unwrap_or_default().trim(), TITLE_CHARS);
    lock(ctx.titles()).insert(session_id.to_owned(), title.clone());
    Ok(title)
}

/// A conversation, whole: its entries and every call the engine tracks in it.
pub(crate) fn timeline_of(ctx: &Context, session_id: &str) -> Result<TimelineView, CompanionError> {
    let events = events(ctx, session_id)?;
    let calls = ctx
        .engine()
        .store()
        .calls(&CallFilter {
            session_id: Some(session_id.to_owned()),
            ..CallFilter::default()
        })
        .map_err(agent::EngineError::from)?;
    Ok(TimelineView {
        session_id: session_id.to_owned(),
        items: timeline(&events),
        calls: calls.iter().map(CallView::from).collect(),
        running: ctx.engine().is_running(session_id),
        autonomy: crate::autonomy::autonomy_of(ctx, session_id)?,
    })
}
