//! Sessions in memory and the one way state changes: [`Engine::commit`]. A session's events and
//! state are loaded once under its lock and kept in step with the database by applying each
//! commit to the cache only after the store accepted it; a failed commit marks the cache stale so
//! the next lock reloads it. Also the small builders every step uses (contexts, events, audit rows)
//! and the per-session "a turn is running" token.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::history::HistoryCache;
use super::{Engine, EngineError, EngineEvent, SessionCache, SessionGuard, Turn, lock};
use crate::content::Content;
use crate::context::CallbackContext;
use crate::event::Event;
use crate::persist::{AuditEntry, CallRecord, Commit, PersistError};
use crate::state::{APP_PREFIX, StateMap, StateScope, USER_PREFIX, apply_delta, persisted_delta};

impl Engine {
    /// Creates a session for `user_id` and returns its id.
    pub fn create_session(&self, user_id: &str, state: &StateMap) -> Result<String, EngineError> {
        Ok(self
            .inner
            .store
            .create_session(&self.inner.config.app_name, user_id, None, state)?)
    }

    /// Loads a session into memory ahead of its next turn (the app does this when the user opens
    /// it, so the first message does not pay for reading the history).
    pub async fn open_session(&self, session_id: &str) -> Result<(), EngineError> {
        self.lock_session(session_id).await.map(drop)
    }

    pub(super) async fn lock_session(&self, session_id: &str) -> Result<SessionGuard, EngineError> {
        let slot = lock(&self.inner.sessions)
            .entry(session_id.to_owned())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(None)))
            .clone();
        let mut guard = slot.lock_owned().await;
        if guard.as_ref().is_none_or(|cache| cache.stale) {
            let snapshot = self
                .inner
                .store
                .load_session(session_id)
                .map_err(|e| match e {
                    PersistError::NotFound(_) => {
                        EngineError::SessionNotFound(session_id.to_owned())
                    }
                    other => other.into(),
                })?;
            let mut session_state = StateMap::new();
            let mut user_state = StateMap::new();
            let mut app_state = StateMap::new();
            for (key, value) in snapshot.state {
                match StateScope::of(&key) {
                    StateScope::User => user_state.insert(key, value),
                    StateScope::App => app_state.insert(key, value),
                    _ => session_state.insert(key, value),
                };
            }
            {
                let mut shared = lock(&self.inner.shared);
                shared
                    .user
                    .entry(snapshot.user_id.clone())
                    .or_insert(user_state);
                if shared.app.is_none() {
                    shared.app = Some(app_state);
                }
            }
            let turn_starts = snapshot
                .events
                .iter()
                .enumerate()
                .filter(|(_, e)| e.is_user())
                .map(|(i, _)| i)
                .collect();
            *guard = Some(SessionCache {
                id: snapshot.id,
                user_id: snapshot.user_id,
                events: Arc::new(snapshot.events),
                state: session_state,
                last_seq: snapshot.last_seq,
                turn_starts,
                history: HistoryCache::default(),
                stale: false,
            });
        }
        Ok(SessionGuard(guard))
    }

    /// Applies a commit to the store and, when it lands, to the cache and the subscribers.
    pub(super) fn commit(
        &self,
        s: &mut SessionCache,
        mut commit: Commit,
    ) -> Result<(), EngineError> {
        commit.session_id = s.id.clone();
        commit.expected_seq = s.last_seq;
        for event in &mut commit.events {
            event.actions.state_delta = persisted_delta(&event.actions.state_delta);
        }
        match self.inner.store.commit(&commit) {
            Ok(last_seq) => s.last_seq = last_seq,
            Err(e) => {
                s.stale = true;
                return Err(e.into());
            }
        }
        if !commit.events.is_empty() {
            // Contexts handed to callbacks share this vector; they must be gone by now, or this
            // copies the whole history (see the callers, which drop them before committing).
            let events = Arc::make_mut(&mut s.events);
            let mut shared = lock(&self.inner.shared);
            for event in &commit.events {
                if event.is_user() {
                    s.turn_starts.push(events.len());
                }
                for (key, value) in &event.actions.state_delta {
                    let mut one = StateMap::new();
                    one.insert(key.clone(), value.clone());
                    match StateScope::of(key) {
                        StateScope::User => {
                            apply_delta(shared.user.entry(s.user_id.clone()).or_default(), &one)
                        }
                        StateScope::App => {
                            apply_delta(shared.app.get_or_insert_with(StateMap::new), &one)
                        }
                        StateScope::Session => apply_delta(&mut s.state, &one),
                        StateScope::Temp => {}
                    }
                }
                events.push(event.clone());
            }
        }
        for event in commit.events {
            self.emit(EngineEvent::Event {
                session_id: s.id.clone(),
                event,
            });
        }
        for call in commit.calls {
            self.emit(EngineEvent::Call(call));
        }
        for invocation in commit.invocations {
            self.emit(EngineEvent::Invocation(invocation));
        }
        Ok(())
    }

    /// Every variable visible to a turn: session, this user's, the app's and the turn's `temp:`.
    pub(super) fn visible_state(&self, s: &SessionCache, temp: &StateMap) -> StateMap {
        let mut state = StateMap::new();
        {
            let shared = lock(&self.inner.shared);
            if let Some(app) = &shared.app {
                state.extend(
                    app.iter()
                        .filter(|(k, _)| k.starts_with(APP_PREFIX))
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
            if let Some(user) = shared.user.get(&s.user_id) {
                state.extend(
                    user.iter()
                        .filter(|(k, _)| k.starts_with(USER_PREFIX))
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
        }
        state.extend(s.state.iter().map(|(k, v)| (k.clone(), v.clone())));
        state.extend(temp.iter().map(|(k, v)| (k.clone(), v.clone())));
        state
    }

    pub(super) fn callback_context(&self, s: &SessionCache, turn: &Turn) -> CallbackContext {
        CallbackContext::new(
            turn.inv.id.clone(),
            turn.inv.agent_name.clone(),
            s.id.clone(),
            self.visible_state(s, &turn.temp),
            s.events.clone(),
        )
    }

    /// Takes the changes a callback made: `temp:` ones stay with the turn, the rest go on the
    /// next event.
    pub(super) fn absorb(turn: &mut Turn, ctx: &mut CallbackContext, into: &mut StateMap) {
        for (key, value) in ctx.take_state_delta() {
            if StateScope::of(&key) == StateScope::Temp {
                let mut one = StateMap::new();
                one.insert(key, value);
                apply_delta(&mut turn.temp, &one);
            } else {
                into.insert(key, value);
            }
        }
    }

    pub(super) fn agent_event(&self, turn: &Turn, content: Option<Content>) -> Event {
        let mut event = Event::new(turn.inv.id.clone(), turn.inv.agent_name.clone());
        event.timestamp = self.now();
        event.content = content;
        event.branch = self.node(&turn.inv.agent_name).branch.clone();
        event
    }

    pub(super) fn audit(
        &self,
        s: &SessionCache,
        call: Option<&CallRecord>,
        kind: &str,
        actor: &str,
        detail: Value,
    ) -> AuditEntry {
        AuditEntry {
            at: self.now(),
            session_id: Some(s.id.clone()),
            call_id: call.map(|c| c.call_id.clone()),
            tool: call.map(|c| c.tool.clone()),
            kind: kind.to_owned(),
            actor: actor.to_owned(),
            detail: match call {
                Some(call) => self.with_source(call, detail),
                None => detail,
            },
        }
    }

    /// Adds the tool's `source` (a user's Python file and function) to the detail of a call's
    /// audit row. Done here, for every row of a call, so that none of them — held, decided,
    /// sent, answered, failed, cancelled — names only the tool while the others name the file;
    /// the app's own tools have no source and add nothing.
    fn with_source(&self, call: &CallRecord, mut detail: Value) -> Value {
        if let Value::Object(map) = &mut detail
            && !map.contains_key("source")
            && let Some(source) = self
                .node(&call.agent_name)
                .agent
                .tool(&call.tool)
                .and_then(|tool| tool.source())
        {
            map.insert("source".to_owned(), source);
        }
        detail
    }

    pub(super) fn start_running(&self, session_id: &str) -> Result<CancellationToken, EngineError> {
        let mut running = lock(&self.inner.running);
        if running.contains_key(session_id) {
            return Err(EngineError::Busy(session_id.to_owned()));
        }
        let token = CancellationToken::new();
        running.insert(session_id.to_owned(), token.clone());
        Ok(token)
    }

    pub(super) fn stop_running(&self, session_id: &str) {
        lock(&self.inner.running).remove(session_id);
    }
}
