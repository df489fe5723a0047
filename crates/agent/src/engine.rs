//! The engine: runs turns, holds writes for approval *before* dispatch, suspends for sign-in, and
//! resumes — from memory or, after a crash, from the database.
//!
//! A turn (an *invocation*) alternates model calls and *steps*: every function call of one model
//! response is registered as a [`CallRecord`] in the same commit as the model's event, already
//! classified — answered at once (unknown tool, invalid arguments, a never-allow rule, the
//! engine's own functions), ready to run (reads, and writes an always-allow rule approves), or
//! held for the user's approval. [`Engine::advance`] then runs what is ready; if anything is still
//! held, the invocation is *suspended* and the call returns. Every later act — a decision, a
//! finished sign-in, an expiry, a restart — goes through `advance` again, which picks up exactly
//! where the database says the turn stands. Writes are journalled (`started` before, `finished`
//! after), so a write interrupted by a crash is retried with the same idempotency key only where
//! the service deduplicates, and is otherwise shown to the user as "outcome unknown".

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::{FutureExt as _, StreamExt as _};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::{OwnedMutexGuard, broadcast};
use tokio_util::sync::CancellationToken;

use crate::agent::LlmAgent;
use crate::clock::{Clock, SystemClock};
use crate::content::{
    CUSTOMIZED_RESPONSE, Content, END_SESSION, FunctionCall, FunctionResponse, Part, ROLE_MODEL,
    ROLE_USER, TRANSFER_TO_AGENT,
};
use crate::context::{CallbackContext, ToolContext};
use crate::event::{Event, EventActions};
use crate::llm::{FunctionDeclaration, LlmRequest, LlmResponse, ToolDeclaration};
use crate::model::ModelError;
use crate::persist::{
    ApprovalDecision, AuditEntry, AuditFilter, CallFilter, CallRecord, CallStatus, Commit,
    EngineStore, InvocationRecord, InvocationStatus, JournalEntry, JournalOp, PersistError, Rule,
    RuleEffect, Verdict,
};
use crate::result::{ToolOutcome, ToolResult, ToolReturn, coerce_tool_result};
use crate::state::{APP_PREFIX, StateMap, StateScope, USER_PREFIX, apply_delta, persisted_delta};

/// The longest a tool's preview may take before the card shows the arguments alone.
const PREVIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The session variable set when the session has ended (`Part::from_end_session`).
pub const SESSION_ENDED_VARIABLE: &str = "_session_ended";

/// Settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The app name sessions belong to (`app:` state is shared within it).
    pub app_name: String,
    /// How long an approval waits before it expires (milliseconds); `None`: never.
    pub approval_ttl_ms: Option<i64>,
    /// Model calls allowed in one turn before it is stopped as runaway.
    pub max_model_calls: u32,
    /// How many of the latest turns the model sees (older ones stay stored).
    pub history_turns: usize,
    /// How many engine events a slow subscriber may fall behind before it misses some.
    pub event_buffer: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            app_name: "feishu-companion".to_owned(),
            approval_ttl_ms: Some(24 * 60 * 60 * 1000),
            max_model_calls: 25,
            history_turns: 40,
            event_buffer: 4096,
        }
    }
}

/// What subscribers see, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// An event of a session: a streamed chunk (`partial`) or a stored event.
    Event {
        /// The session.
        session_id: String,
        /// The event.
        event: Event,
    },
    /// A call was registered or changed (held for approval, decided, waiting for sign-in, done).
    Call(CallRecord),
    /// A turn started, suspended, resumed or ended.
    Invocation(InvocationRecord),
}

/// The user's decision on a held call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it as proposed.
    Approve,
    /// Run it with these arguments instead (validated again).
    ApproveEdited(Map<String, Value>),
    /// Do not run it; the model is told, with the reason if one is given.
    Reject {
        /// Why, in the user's words.
        reason: Option<String>,
    },
    /// Run it, and from now on run this tool without asking when the arguments match.
    AlwaysAllow {
        /// Argument values a later call must have for the rule to apply; empty for any call.
        constraints: Map<String, Value>,
        /// When the rule lapses (milliseconds since the Unix epoch); `None`: never.
        expires_at: Option<i64>,
    },
}

/// The user's word on a write whose outcome a crash made unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// It happened (the user checked in Feishu).
    Happened,
    /// It did not happen; the model is told it failed.
    DidNotHappen,
    /// Send it again, with the same idempotency key.
    Retry,
}

/// Where a turn stands after an engine call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The turn.
    pub invocation_id: String,
    /// Completed, suspended, cancelled…
    pub status: InvocationStatus,
}

/// What [`Engine::recover`] found and did after a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Writes resent with their idempotency key (the service deduplicates them).
    pub retried: Vec<String>,
    /// Writes whose outcome is unknown, now waiting for the user.
    pub outcome_unknown: Vec<String>,
    /// Turns that were running and were marked interrupted.
    pub interrupted: Vec<String>,
    /// Turns resumed because nothing held them any more.
    pub resumed: Vec<String>,
    /// Calls still waiting for the user (approval, sign-in, or a settlement).
    pub pending: Vec<String>,
}

/// An engine failure.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The database failed.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// No session has this id.
    #[error("session {0} does not exist")]
    SessionNotFound(String),
    /// The session was ended and takes no more messages.
    #[error("session {0} has ended; start a new session")]
    SessionEnded(String),
    /// A turn is running in this session.
    #[error("a turn is already running in session {0}; wait for it or cancel it")]
    Busy(String),
    /// No call has this id.
    #[error("call {0} does not exist")]
    CallNotFound(String),
    /// The call is not waiting for this kind of decision.
    #[error("call {call_id} cannot take this decision: it is {status:?}")]
    NotPending {
        /// The call.
        call_id: String,
        /// Where it stands.
        status: CallStatus,
    },
    /// Edited arguments do not fit the tool's schema.
    #[error("the edited arguments of call {call_id} are invalid: {message}")]
    InvalidArguments {
        /// The call.
        call_id: String,
        /// What is wrong, by path.
        message: String,
    },
    /// No rule has this id.
    #[error("rule {0} does not exist")]
    RuleNotFound(String),
    /// Two agents in the tree share a name.
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
}

struct AgentNode {
    agent: Arc<LlmAgent>,
    parent: Option<String>,
    branch: Option<String>,
}

/// A session's events and state, kept in memory between steps so a turn never reloads history.
struct SessionCache {
    id: String,
    user_id: String,
    events: Arc<Vec<Event>>,
    /// Session-scope variables only; `user:` and `app:` live in [`Shared`] across sessions.
    state: StateMap,
    last_seq: u64,
    /// Index of each user event, where turns start; the model is shown the last few turns.
    turn_starts: Vec<usize>,
    /// A commit failed, so the cache may not match the database; reload before the next use.
    stale: bool,
}

#[derive(Default)]
struct Shared {
    user: HashMap<String, StateMap>,
    app: Option<StateMap>,
}

/// One turn in progress: its record, its `temp:` variables and the token that cancels it.
struct Turn {
    inv: InvocationRecord,
    temp: StateMap,
    cancel: CancellationToken,
}

struct Inner {
    root: String,
    agents: HashMap<String, AgentNode>,
    store: Arc<dyn EngineStore>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    events: broadcast::Sender<EngineEvent>,
    sessions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<SessionCache>>>>>,
    running: Mutex<HashMap<String, CancellationToken>>,
    shared: Mutex<Shared>,
}

/// The agent engine. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("root", &self.inner.root)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every value behind these locks is replaced whole, so a panic cannot leave one half-written.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SHA-256 of the arguments' canonical JSON (keys sorted at every level), so the same arguments
/// hash the same whatever order the model wrote them in.
pub fn args_hash(args: &Map<String, Value>) -> String {
    fn canonical(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let sorted: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, canonical(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let text = canonical(&Value::Object(args.clone())).to_string();
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn new_call_id() -> String {
    format!("fc_{}", uuid::Uuid::new_v4().simple())
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Engine {
    /// An engine for the agent tree rooted at `root`, persisting through `store`.
    pub fn new(
        root: LlmAgent,
        store: Arc<dyn EngineStore>,
        config: EngineConfig,
    ) -> Result<Engine, EngineError> {
        Engine::with_clock(root, store, config, Arc::new(SystemClock))
    }

    /// Like [`Engine::new`] with a clock of the caller's choosing (tests move time by hand).
    pub fn with_clock(
        root: LlmAgent,
        store: Arc<dyn EngineStore>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Engine, EngineError> {
        let mut agents = HashMap::new();
        fn add(
            agents: &mut HashMap<String, AgentNode>,
            agent: Arc<LlmAgent>,
            parent: Option<&AgentNode>,
            parent_name: Option<String>,
        ) -> Result<(), EngineError> {
            let branch = parent.map(|p| match &p.branch {
                Some(b) => format!("{b}.{}", agent.name),
                None => format!("{}.{}", p.agent.name, agent.name),
            });
            let name = agent.name.clone();
            if agents.contains_key(&name) {
                return Err(crate::agent::AgentError::DuplicateAgent(name).into());
            }
            let node = AgentNode {
                agent: agent.clone(),
                parent: parent_name,
                branch,
            };
            let children = agent.sub_agents.clone();
            agents.insert(name.clone(), node);
            for child in children {
                // Re-borrow the parent's node from the map for its branch.
                let parent_node = AgentNode {
                    agent: agent.clone(),
                    parent: None,
                    branch: agents.get(&name).and_then(|n| n.branch.clone()),
                };
                add(agents, child, Some(&parent_node), Some(name.clone()))?;
            }
            Ok(())
        }
        let root_name = root.name.clone();
        add(&mut agents, Arc::new(root), None, None)?;
        let (events, _) = broadcast::channel(config.event_buffer.max(16));
        Ok(Engine {
            inner: Arc::new(Inner {
                root: root_name,
                agents,
                store,
                clock,
                config,
                events,
                sessions: Mutex::new(HashMap::new()),
                running: Mutex::new(HashMap::new()),
                shared: Mutex::new(Shared::default()),
            }),
        })
    }

    /// Every engine event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.inner.events.subscribe()
    }

    /// The store the engine persists through.
    pub fn store(&self) -> &Arc<dyn EngineStore> {
        &self.inner.store
    }

    fn now(&self) -> i64 {
        self.inner.clock.now_millis()
    }

    fn node(&self, name: &str) -> &AgentNode {
        self.inner
            .agents
            .get(name)
            .or_else(|| self.inner.agents.get(&self.inner.root))
            .unwrap_or_else(|| unreachable!("the root agent is always registered"))
    }

    fn emit(&self, event: EngineEvent) {
        // No subscriber is not an error: the UI may not be open.
        let _ = self.inner.events.send(event);
    }

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

    async fn lock_session(&self, session_id: &str) -> Result<SessionGuard, EngineError> {
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
                stale: false,
            });
        }
        Ok(SessionGuard(guard))
    }

    /// Applies a commit to the store and, when it lands, to the cache and the subscribers.
    fn commit(&self, s: &mut SessionCache, mut commit: Commit) -> Result<(), EngineError> {
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
    fn visible_state(&self, s: &SessionCache, temp: &StateMap) -> StateMap {
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

    fn callback_context(&self, s: &SessionCache, turn: &Turn) -> CallbackContext {
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
    fn absorb(turn: &mut Turn, ctx: &mut CallbackContext, into: &mut StateMap) {
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

    fn agent_event(&self, turn: &Turn, content: Option<Content>) -> Event {
        let mut event = Event::new(turn.inv.id.clone(), turn.inv.agent_name.clone());
        event.timestamp = self.now();
        event.content = content;
        event.branch = self.node(&turn.inv.agent_name).branch.clone();
        event
    }

    fn audit(
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
            detail,
        }
    }

    fn start_running(&self, session_id: &str) -> Result<CancellationToken, EngineError> {
        let mut running = lock(&self.inner.running);
        if running.contains_key(session_id) {
            return Err(EngineError::Busy(session_id.to_owned()));
        }
        let token = CancellationToken::new();
        running.insert(session_id.to_owned(), token.clone());
        Ok(token)
    }

    fn stop_running(&self, session_id: &str) {
        lock(&self.inner.running).remove(session_id);
    }

    /// Sends a user message: starts a turn and runs it until it completes or suspends.
    ///
    /// A turn still suspended in this session is closed first: its held calls are answered
    /// `CANCELLED` ("superseded").
    pub async fn send_message(
        &self,
        session_id: &str,
        content: Content,
    ) -> Result<TurnOutcome, EngineError> {
        let token = self.start_running(session_id)?;
        let result = self.send_message_running(session_id, content, token).await;
        self.stop_running(session_id);
        result
    }

    async fn send_message_running(
        &self,
        session_id: &str,
        content: Content,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, EngineError> {
        let mut guard = self.lock_session(session_id).await?;
        let s = guard.cache();
        if s.state.contains_key(SESSION_ENDED_VARIABLE) {
            return Err(EngineError::SessionEnded(session_id.to_owned()));
        }
        for inv in self.open_invocations(&s.id)? {
            // What the user already approved still happens; only what is still held is dropped.
            let mut turn = Turn {
                inv: inv.clone(),
                temp: StateMap::new(),
                cancel: CancellationToken::new(),
            };
            for call in self.open_calls(&inv.id)? {
                if call.status == CallStatus::Approved {
                    self.dispatch(s, &mut turn, call).await?;
                }
            }
            self.close_invocation(
                s,
                inv,
                InvocationStatus::Superseded,
                "superseded by a newer message from the user",
            )?;
        }
        let now = self.now();
        let inv = InvocationRecord {
            id: format!("inv_{}", uuid::Uuid::new_v4().simple()),
            session_id: s.id.clone(),
            agent_name: self.inner.root.clone(),
            status: InvocationStatus::Running,
            model_calls: 0,
            started_at: now,
            updated_at: now,
        };
        let mut user_event = Event::new(inv.id.clone(), crate::event::USER_AUTHOR);
        user_event.timestamp = now;
        user_event.content = Some(Content {
            role: Some(ROLE_USER.to_owned()),
            ..content
        });
        self.commit(
            s,
            Commit {
                events: vec![user_event],
                invocations: vec![inv.clone()],
                ..Commit::default()
            },
        )?;
        let mut turn = Turn {
            inv,
            temp: StateMap::new(),
            cancel,
        };
        // before_agent: the first callback with content answers for the agent.
        let node = self.node(&turn.inv.agent_name);
        let callbacks = node.agent.callbacks.before_agent.clone();
        let mut delta = StateMap::new();
        let skip = if callbacks.is_empty() {
            None
        } else {
            let mut ctx = self.callback_context(s, &turn);
            let skip = callbacks.iter().find_map(|cb| cb(&mut ctx));
            Self::absorb(&mut turn, &mut ctx, &mut delta);
            skip
        };
        if let Some(content) = skip {
            let mut event = self.agent_event(
                &turn,
                Some(Content {
                    role: Some(ROLE_MODEL.to_owned()),
                    ..content
                }),
            );
            event.actions.state_delta = delta;
            event.turn_complete = true;
            // The agent did not run, so neither do its after_agent callbacks (as in ADK).
            turn.inv.status = InvocationStatus::Completed;
            turn.inv.updated_at = self.now();
            self.commit(
                s,
                Commit {
                    events: vec![event],
                    invocations: vec![turn.inv.clone()],
                    ..Commit::default()
                },
            )?;
            return Ok(TurnOutcome {
                invocation_id: turn.inv.id.clone(),
                status: InvocationStatus::Completed,
            });
        }
        if !delta.is_empty() {
            let mut event = self.agent_event(&turn, None);
            event.actions.state_delta = delta;
            self.commit(
                s,
                Commit {
                    events: vec![event],
                    ..Commit::default()
                },
            )?;
        }
        self.advance(s, &mut turn).await
    }

    /// The session's turns that are still open (suspended, or running when the process died).
    fn open_invocations(&self, session_id: &str) -> Result<Vec<InvocationRecord>, EngineError> {
        Ok(self
            .inner
            .store
            .invocations_with_status(&[InvocationStatus::Running, InvocationStatus::Suspended])?
            .into_iter()
            .filter(|inv| inv.session_id == session_id)
            .collect())
    }

    fn open_calls(&self, invocation_id: &str) -> Result<Vec<CallRecord>, EngineError> {
        Ok(self.inner.store.calls(&CallFilter {
            invocation_id: Some(invocation_id.to_owned()),
            statuses: vec![
                CallStatus::AwaitingApproval,
                CallStatus::Approved,
                CallStatus::Dispatching,
                CallStatus::AwaitingAuth,
                CallStatus::OutcomeUnknown,
            ],
            ..CallFilter::default()
        })?)
    }

    /// Ends a turn: answers its open calls `CANCELLED` with `note` and records its new status.
    fn close_invocation(
        &self,
        s: &mut SessionCache,
        mut inv: InvocationRecord,
        status: InvocationStatus,
        note: &str,
    ) -> Result<(), EngineError> {
        let verdict = if status == InvocationStatus::Superseded {
            Verdict::Superseded
        } else {
            Verdict::Cancelled
        };
        let turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        let mut commit = Commit::default();
        for mut call in self.open_calls(&inv.id)? {
            if call.status == CallStatus::AwaitingApproval {
                call.decision = Some(ApprovalDecision {
                    verdict,
                    decided_by: "engine".to_owned(),
                    decided_at: self.now(),
                    reason: Some(note.to_owned()),
                    args_hash: None,
                });
            }
            let text = if call.status == CallStatus::OutcomeUnknown {
                commit
                    .journal
                    .extend(self.close_attempts(&call.call_id, None)?);
                format!("{note}; whether this call took effect is unknown")
            } else {
                note.to_owned()
            };
            let result = ToolResult::new(ToolOutcome::Cancelled).with_content(text);
            let (event, _) =
                self.response_event(&turn, &call, result.into(), EventActions::default(), None);
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.cancelled",
                "engine",
                json!({ "reason": note }),
            ));
            self.mark_done(&mut call, ToolOutcome::Cancelled);
            commit.events.push(event);
            commit.calls.push(call);
        }
        let mut closing = self.agent_event(&turn, None);
        closing.interrupted = true;
        closing.turn_complete = true;
        closing.error_message = Some(note.to_owned());
        commit.events.push(closing);
        inv.status = status;
        inv.updated_at = self.now();
        commit.invocations.push(inv.clone());
        commit.audit.push(self.audit(
            s,
            None,
            "turn.closed",
            "engine",
            json!({ "invocation_id": inv.id, "status": status, "reason": note }),
        ));
        self.commit(s, commit)
    }

    fn mark_done(&self, call: &mut CallRecord, outcome: ToolOutcome) {
        call.status = CallStatus::Done;
        call.outcome = Some(outcome);
        call.updated_at = self.now();
        call.version += 1;
    }

    /// The function-response event for `call`, and the outcome it carries.
    fn response_event(
        &self,
        turn: &Turn,
        call: &CallRecord,
        result: ToolReturn,
        actions: EventActions,
        note: Option<Value>,
    ) -> (Event, ToolOutcome) {
        let (text, is_error, structured) = coerce_tool_result(result);
        let outcome = structured
            .as_ref()
            .map_or(ToolOutcome::Completed, |r| r.outcome);
        let mut response = Map::new();
        response.insert(
            (if is_error { "error" } else { "output" }).to_owned(),
            Value::String(text),
        );
        if outcome != ToolOutcome::Completed {
            response.insert("outcome".to_owned(), json!(outcome));
        }
        if let Some(original) = &call.original_args {
            response.insert("edited_args".to_owned(), Value::Object(call.args.clone()));
            response.insert("original_args".to_owned(), Value::Object(original.clone()));
            response.insert(
                "note".to_owned(),
                json!(
                    "The user edited the arguments before approving; the call ran with edited_args."
                ),
            );
        }
        if let Some(note) = note {
            response.insert("note".to_owned(), note);
        }
        let function_response = FunctionResponse {
            id: Some(call.call_id.clone()),
            name: call.tool.clone(),
            response,
        };
        let mut event = self.agent_event(
            turn,
            Some(Content::new(
                ROLE_USER,
                vec![Part::FunctionResponse(function_response)],
            )),
        );
        event.branch = call.branch.clone();
        event.author = call.agent_name.clone();
        event.actions = actions;
        (event, outcome)
    }

    fn finish(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        status: InvocationStatus,
        mut events: Vec<Event>,
    ) -> Result<TurnOutcome, EngineError> {
        turn.inv.status = status;
        turn.inv.updated_at = self.now();
        if status == InvocationStatus::Completed {
            // after_agent: the first callback with content adds a closing message.
            let callbacks = self
                .node(&turn.inv.agent_name)
                .agent
                .callbacks
                .after_agent
                .clone();
            if !callbacks.is_empty() {
                let mut delta = StateMap::new();
                let mut ctx = self.callback_context(s, turn);
                let extra = callbacks.iter().find_map(|cb| cb(&mut ctx));
                Self::absorb(turn, &mut ctx, &mut delta);
                if extra.is_some() || !delta.is_empty() {
                    let mut event = self.agent_event(
                        turn,
                        extra.map(|c| Content {
                            role: Some(ROLE_MODEL.to_owned()),
                            ..c
                        }),
                    );
                    event.actions.state_delta = delta;
                    event.turn_complete = true;
                    events.push(event);
                }
            }
        }
        self.commit(
            s,
            Commit {
                events,
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )?;
        Ok(TurnOutcome {
            invocation_id: turn.inv.id.clone(),
            status,
        })
    }

    /// Moves a turn on as far as it can go: runs the calls that are ready, suspends while any is
    /// held, otherwise calls the model again — until the model answers without calling functions.
    async fn advance(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<TurnOutcome, EngineError> {
        loop {
            if turn.cancel.is_cancelled() {
                let inv = turn.inv.clone();
                self.close_invocation(
                    s,
                    inv,
                    InvocationStatus::Cancelled,
                    "cancelled by the user",
                )?;
                return Ok(TurnOutcome {
                    invocation_id: turn.inv.id.clone(),
                    status: InvocationStatus::Cancelled,
                });
            }
            for call in self.open_calls(&turn.inv.id)? {
                if call.status == CallStatus::Approved {
                    self.dispatch(s, turn, call).await?;
                }
            }
            if turn.cancel.is_cancelled() {
                continue;
            }
            if !self.open_calls(&turn.inv.id)?.is_empty() {
                self.set_status(s, turn, InvocationStatus::Suspended)?;
                return Ok(TurnOutcome {
                    invocation_id: turn.inv.id.clone(),
                    status: InvocationStatus::Suspended,
                });
            }
            self.set_status(s, turn, InvocationStatus::Running)?;
            // What the last step asked for: end, hand over, or go back to the parent.
            match self.step_control(s, &turn.inv.id) {
                StepControl::End => {
                    return self.finish(s, turn, InvocationStatus::Completed, Vec::new());
                }
                StepControl::Transfer(target) if self.inner.agents.contains_key(&target) => {
                    self.switch_agent(s, turn, target)?;
                }
                StepControl::Escalate => match self.node(&turn.inv.agent_name).parent.clone() {
                    Some(parent) => self.switch_agent(s, turn, parent)?,
                    None => return self.finish(s, turn, InvocationStatus::Completed, Vec::new()),
                },
                StepControl::Transfer(_) | StepControl::Continue => {}
            }
            if turn.inv.model_calls >= self.inner.config.max_model_calls {
                let mut event = self.agent_event(turn, None);
                event.error_code = Some("too_many_steps".to_owned());
                event.error_message = Some(format!(
                    "stopped after {} model calls in one turn",
                    self.inner.config.max_model_calls
                ));
                event.turn_complete = true;
                return self.finish(s, turn, InvocationStatus::Failed, vec![event]);
            }
            turn.inv.model_calls += 1;
            let response = match self.call_model(s, turn).await {
                ModelOutcome::Response(response, delta) => (response, delta),
                ModelOutcome::Cancelled => continue,
                ModelOutcome::Failed(error, delta) => {
                    let mut event = self.agent_event(turn, None);
                    event.error_code = Some(error.code.clone());
                    event.error_message = Some(error.message.clone());
                    event.actions.state_delta = delta;
                    event.turn_complete = true;
                    return self.finish(s, turn, InvocationStatus::Failed, vec![event]);
                }
            };
            let (response, delta) = response;
            if !self.register_step(s, turn, response, delta).await? {
                let events = Vec::new();
                return self.finish(s, turn, InvocationStatus::Completed, events);
            }
        }
    }

    /// Records a turn's new status, when it changed.
    fn set_status(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        status: InvocationStatus,
    ) -> Result<(), EngineError> {
        if turn.inv.status == status {
            return Ok(());
        }
        turn.inv.status = status;
        turn.inv.updated_at = self.now();
        self.commit(
            s,
            Commit {
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )
    }

    fn switch_agent(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        agent: String,
    ) -> Result<(), EngineError> {
        turn.inv.agent_name = agent;
        turn.inv.updated_at = self.now();
        self.commit(
            s,
            Commit {
                invocations: vec![turn.inv.clone()],
                ..Commit::default()
            },
        )
    }

    /// Reads what the events since this turn's last model response ask the loop to do.
    fn step_control(&self, s: &SessionCache, invocation_id: &str) -> StepControl {
        let mut control = StepControl::Continue;
        for event in s.events.iter().rev() {
            if event.invocation_id != invocation_id {
                break;
            }
            let is_model_turn = event.content.as_ref().is_some_and(Content::is_model);
            if event.actions.end_invocation || event.state_delta_ends_session() {
                return StepControl::End;
            }
            if let Some(target) = &event.actions.transfer_to_agent {
                control = StepControl::Transfer(target.clone());
            } else if event.actions.escalate && control == StepControl::Continue {
                control = StepControl::Escalate;
            }
            if is_model_turn || event.is_user() {
                break;
            }
        }
        control
    }

    /// Builds the request, runs the model callbacks and streams the model's answer.
    async fn call_model(&self, s: &mut SessionCache, turn: &mut Turn) -> ModelOutcome {
        let node = self.node(&turn.inv.agent_name);
        let agent = node.agent.clone();
        let mut request = self.build_request(s, node);
        let mut delta = StateMap::new();
        let mut ctx = self.callback_context(s, turn);
        let mut response = agent
            .callbacks
            .before_model
            .iter()
            .find_map(|cb| cb(&mut ctx, &mut request));
        Self::absorb(turn, &mut ctx, &mut delta);
        if response.is_none() {
            let streamed = tokio::select! {
                biased;
                () = turn.cancel.cancelled() => return ModelOutcome::Cancelled,
                streamed = self.stream_model(s, turn, &agent, request) => streamed,
            };
            match streamed {
                Ok(r) => response = Some(r),
                Err(error) => return ModelOutcome::Failed(error, delta),
            }
        }
        let Some(mut response) = response else {
            return ModelOutcome::Failed(ModelError::new("incomplete", "no response"), delta);
        };
        let mut ctx = self.callback_context(s, turn);
        if let Some(replacement) = agent
            .callbacks
            .after_model
            .iter()
            .find_map(|cb| cb(&mut ctx, &response))
        {
            response = replacement;
        }
        Self::absorb(turn, &mut ctx, &mut delta);
        ModelOutcome::Response(response, delta)
    }

    async fn stream_model(
        &self,
        s: &SessionCache,
        turn: &Turn,
        agent: &LlmAgent,
        request: LlmRequest,
    ) -> Result<LlmResponse, ModelError> {
        let mut stream = agent.model.generate(request).await?;
        while let Some(item) = stream.next().await {
            let response = item?;
            if response.is_partial() {
                let mut event = self.agent_event(turn, Some(response.content));
                event.partial = true;
                self.emit(EngineEvent::Event {
                    session_id: s.id.clone(),
                    event,
                });
            } else {
                return Ok(response);
            }
        }
        Err(ModelError::new(
            "incomplete",
            "the model's stream ended before its complete response",
        ))
    }

    fn build_request(&self, s: &SessionCache, node: &AgentNode) -> LlmRequest {
        let agent = &node.agent;
        let first = s
            .turn_starts
            .len()
            .checked_sub(self.inner.config.history_turns)
            .and_then(|i| s.turn_starts.get(i).copied())
            .unwrap_or(0);
        let mut contents: Vec<Content> = Vec::new();
        for event in &s.events[first..] {
            if event.partial || !branch_visible(event.branch.as_deref(), node.branch.as_deref()) {
                continue;
            }
            let Some(content) = &event.content else {
                continue;
            };
            if content.parts.is_empty() {
                continue;
            }
            // Parallel function responses arrive as separate events; models want them together.
            match contents.last_mut() {
                Some(last)
                    if last.role == content.role
                        && content.function_responses().next().is_some()
                        && last.function_responses().next().is_some() =>
                {
                    last.parts.extend(content.parts.iter().cloned());
                }
                _ => contents.push(content.clone()),
            }
        }
        let mut config = agent.config.clone();
        if !agent.instruction.is_empty() {
            config.system_instruction = Some(Content::new(
                ROLE_USER,
                vec![Part::from_text(agent.instruction.clone())],
            ));
        }
        let mut declarations: Vec<FunctionDeclaration> =
            agent.tools().map(|t| t.declaration()).collect();
        let targets: Vec<String> = agent
            .sub_agents
            .iter()
            .map(|a| a.name.clone())
            .chain(node.parent.iter().cloned())
            .collect();
        if !targets.is_empty() {
            declarations.push(FunctionDeclaration::new(
                TRANSFER_TO_AGENT,
                "Hand the conversation to another agent better suited to the request.",
                json!({
                    "type": "object",
                    "properties": {"agent_name": {"type": "string", "enum": targets}},
                    "required": ["agent_name"]
                }),
            ));
        }
        config.tools = vec![ToolDeclaration {
            function_declarations: declarations
                .into_iter()
                .filter(|d| !agent.config.is_excluded(&d.name))
                .collect(),
        }];
        config.excluded_tools.clear();
        LlmRequest {
            model: Some(agent.model.name().to_owned()),
            contents,
            config: Some(config),
        }
    }

    /// Registers the calls of a model response. Returns whether there were any.
    async fn register_step(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        response: LlmResponse,
        delta: StateMap,
    ) -> Result<bool, EngineError> {
        let node = self.node(&turn.inv.agent_name);
        let agent = node.agent.clone();
        let now = self.now();
        let rules = self.inner.store.rules()?;
        let mut content = response.content;
        content.role = Some(ROLE_MODEL.to_owned());
        let mut calls: Vec<CallRecord> = Vec::new();
        let mut answers: Vec<(CallRecord, ToolReturn, EventActions, Option<Value>)> = Vec::new();
        let mut held = Vec::new();
        let mut parts = Vec::with_capacity(content.parts.len() + response.malformed_calls.len());
        let mut commit = Commit::default();
        let new_call = |name: &str, args: Map<String, Value>| {
            let call_id = new_call_id();
            CallRecord {
                idempotency_key: call_id.trim_start_matches("fc_").to_owned(),
                call_id,
                session_id: s.id.clone(),
                invocation_id: turn.inv.id.clone(),
                agent_name: agent.name.clone(),
                branch: node.branch.clone(),
                tool: name.to_owned(),
                args,
                original_args: None,
                status: CallStatus::Approved,
                requires_approval: false,
                decision: None,
                preview: None,
                auth_scopes: Vec::new(),
                authorize_url: None,
                outcome: None,
                created_at: now,
                expires_at: None,
                updated_at: now,
                version: 1,
            }
        };
        for part in content.parts {
            let Part::FunctionCall(call) = part else {
                parts.push(part);
                continue;
            };
            let mut record = new_call(&call.name, call.args.clone());
            parts.push(Part::FunctionCall(FunctionCall {
                id: Some(record.call_id.clone()),
                ..call
            }));
            match record.tool.as_str() {
                TRANSFER_TO_AGENT => {
                    let target = record
                        .args
                        .get("agent_name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if self.inner.agents.contains_key(&target) && target != agent.name {
                        let actions = EventActions {
                            transfer_to_agent: Some(target.clone()),
                            ..EventActions::default()
                        };
                        answers.push((
                            record,
                            ToolReturn::from(format!("Transferred to agent {target}.")),
                            actions,
                            None,
                        ));
                    } else {
                        let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                            "There is no agent named {target:?} to transfer to."
                        ));
                        answers.push((record, result.into(), EventActions::default(), None));
                    }
                    continue;
                }
                END_SESSION => {
                    let reason = record.args.get("reason").cloned().unwrap_or(Value::Null);
                    let escalated = record
                        .args
                        .get("session_escalated")
                        .cloned()
                        .unwrap_or(json!(false));
                    let mut actions = EventActions {
                        end_invocation: true,
                        escalate: escalated == json!(true),
                        ..EventActions::default()
                    };
                    actions.state_delta.insert(
                        SESSION_ENDED_VARIABLE.to_owned(),
                        json!({"reason": reason, "escalated": escalated, "at": now}),
                    );
                    answers.push((
                        record,
                        ToolReturn::from("The session has ended."),
                        actions,
                        None,
                    ));
                    continue;
                }
                CUSTOMIZED_RESPONSE => {
                    let actions = EventActions {
                        end_invocation: true,
                        ..EventActions::default()
                    };
                    answers.push((record, ToolReturn::from("Delivered."), actions, None));
                    continue;
                }
                _ => {}
            }
            let Some(tool) = agent.tool(&record.tool).cloned() else {
                let known: Vec<&str> = agent.tools().map(|t| t.name()).collect();
                let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                    "There is no tool named {:?}. Available tools: {}.",
                    record.tool,
                    known.join(", ")
                ));
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "call.unknown_tool",
                    &format!("agent:{}", agent.name),
                    json!({"args": record.args}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            };
            if let Err(message) = agent.validate_args(&record.tool, &record.args) {
                let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                    "The arguments do not match the tool's schema: {message}"
                ));
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "call.invalid_arguments",
                    &format!("agent:{}", agent.name),
                    json!({"args": record.args, "errors": message}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            }
            let live = |effect: RuleEffect, record: &CallRecord| {
                rules
                    .iter()
                    .find(|r| r.effect == effect && r.matches(&record.tool, &record.args, now))
                    .cloned()
            };
            if let Some(rule) = live(RuleEffect::NeverAllow, &record) {
                record.decision = Some(ApprovalDecision {
                    verdict: Verdict::Rejected,
                    decided_by: format!("rule:{}", rule.id),
                    decided_at: now,
                    reason: Some("a never-allow rule the user set".to_owned()),
                    args_hash: None,
                });
                let result = ToolResult::new(ToolOutcome::Blocked)
                    .with_content("The user does not allow this call (a standing rule blocks it). Do not retry it.");
                commit.audit.push(self.audit(
                    s,
                    Some(&record),
                    "approval.blocked_by_rule",
                    &format!("rule:{}", rule.id),
                    json!({"args": record.args}),
                ));
                answers.push((record, result.into(), EventActions::default(), None));
                continue;
            }
            record.requires_approval = tool.requires_approval(&record.args);
            if record.requires_approval {
                if let Some(rule) = live(RuleEffect::AlwaysAllow, &record) {
                    record.decision = Some(ApprovalDecision {
                        verdict: Verdict::Approved,
                        decided_by: format!("rule:{}", rule.id),
                        decided_at: now,
                        reason: None,
                        args_hash: Some(args_hash(&record.args)),
                    });
                    commit.audit.push(self.audit(
                        s,
                        Some(&record),
                        "approval.approved",
                        &format!("rule:{}", rule.id),
                        json!({"args": record.args}),
                    ));
                } else {
                    record.status = CallStatus::AwaitingApproval;
                    record.expires_at = self.inner.config.approval_ttl_ms.map(|ttl| now + ttl);
                    held.push(record.call_id.clone());
                    commit.audit.push(self.audit(
                        s,
                        Some(&record),
                        "approval.requested",
                        &format!("agent:{}", agent.name),
                        json!({"args": record.args, "expires_at": record.expires_at}),
                    ));
                }
            }
            calls.push(record);
        }
        for malformed in response.malformed_calls {
            let record = new_call(&malformed.name, Map::new());
            parts.push(Part::FunctionCall(FunctionCall {
                id: Some(record.call_id.clone()),
                name: malformed.name.clone(),
                args: Map::new(),
            }));
            let result = ToolResult::new(ToolOutcome::Failed).with_content(format!(
                "The arguments of this call were not valid JSON ({}). Call the function again with a valid JSON object.",
                malformed.error
            ));
            commit.audit.push(self.audit(
                s,
                Some(&record),
                "call.malformed_arguments",
                &format!("agent:{}", agent.name),
                json!({"arguments": malformed.arguments, "error": malformed.error}),
            ));
            answers.push((record, result.into(), EventActions::default(), None));
        }
        let had_calls = !calls.is_empty() || !answers.is_empty();
        let mut model_event = self.agent_event(
            turn,
            Some(Content {
                parts,
                role: content.role,
            }),
        );
        model_event.actions.state_delta = delta;
        model_event.long_running_tool_ids = held.into_iter().collect();
        model_event.turn_complete = !had_calls;
        commit.events.push(model_event);
        for (mut record, result, actions, note) in answers {
            let (event, outcome) = self.response_event(turn, &record, result, actions, note);
            self.mark_done(&mut record, outcome);
            record.version = 1;
            commit.events.push(event);
            commit.calls.push(record);
        }
        for call in calls
            .iter_mut()
            .filter(|c| c.status == CallStatus::AwaitingApproval)
        {
            if let Some(tool) = agent.tool(&call.tool) {
                // A preview may look things up (a chat's size, an event's current time); it must
                // never hold the turn up for long, and the card works without one.
                match tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await {
                    Ok(preview) => call.preview = preview,
                    Err(_) => {
                        tracing::warn!(tool = %call.tool, "the tool's preview took too long; showing arguments only")
                    }
                }
            }
        }
        commit.calls.extend(calls);
        commit.invocations.push(turn.inv.clone());
        self.commit(s, commit)?;
        Ok(had_calls)
    }

    /// Runs one ready call: callbacks, journal, the tool, and its answer.
    async fn dispatch(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
        mut call: CallRecord,
    ) -> Result<(), EngineError> {
        let node = self.node(&call.agent_name);
        let agent = node.agent.clone();
        let mut tool_turn_ctx = Turn {
            inv: InvocationRecord {
                agent_name: call.agent_name.clone(),
                ..turn.inv.clone()
            },
            temp: turn.temp.clone(),
            cancel: turn.cancel.clone(),
        };
        let ctx = self.callback_context(s, &tool_turn_ctx);
        let mut ctx = ToolContext::new(ctx, call.call_id.clone())
            .with_idempotency_key(call.idempotency_key.clone());
        let mut args = call.args.clone();
        let approved_hash = call
            .decision
            .as_ref()
            .filter(|d| matches!(d.verdict, Verdict::Approved | Verdict::ApprovedEdited))
            .and_then(|d| d.args_hash.clone());
        let mut commit = Commit::default();
        let mut attempt = None;
        let result: ToolReturn = if call.requires_approval
            && approved_hash.as_deref() != Some(args_hash(&args).as_str())
        {
            ToolResult::new(ToolOutcome::Failed)
                .with_content("Refused: there is no approval for exactly these arguments.")
                .into()
        } else if let Some(short) = agent
            .callbacks
            .before_tool
            .iter()
            .find_map(|cb| cb(&mut ctx, &call.tool, &mut args))
        {
            short
        } else if call.requires_approval
            && approved_hash.as_deref() != Some(args_hash(&args).as_str())
        {
            ToolResult::new(ToolOutcome::Failed)
                .with_content(
                    "Refused: a callback changed the approved arguments, so the call was not sent.",
                )
                .into()
        } else if let Some(tool) = agent.tool(&call.tool).cloned() {
            if call.requires_approval {
                let n = self.inner.store.dispatches(&call.call_id)?.len() as u32 + 1;
                attempt = Some(n);
                call.status = CallStatus::Dispatching;
                call.updated_at = self.now();
                call.version += 1;
                let entry = JournalEntry {
                    call_id: call.call_id.clone(),
                    attempt: n,
                    session_id: s.id.clone(),
                    tool: call.tool.clone(),
                    idempotency_key: call.idempotency_key.clone(),
                    args_hash: args_hash(&args),
                    started_at: self.now(),
                    finished_at: None,
                    outcome: None,
                };
                let audit = self.audit(
                    s,
                    Some(&call),
                    "call.dispatched",
                    &format!("agent:{}", call.agent_name),
                    json!({"args": args, "attempt": n, "idempotency_key": call.idempotency_key}),
                );
                self.commit(
                    s,
                    Commit {
                        calls: vec![call.clone()],
                        journal: vec![JournalOp::Start(entry)],
                        audit: vec![audit],
                        ..Commit::default()
                    },
                )?;
                // A write in flight is never abandoned half-way: cancellation waits for it.
                run_guarded(tool.run(args.clone(), &mut ctx)).await
            } else {
                let cancel = turn.cancel.clone();
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => ToolResult::new(ToolOutcome::Cancelled).with_content("cancelled by the user").into(),
                    result = run_guarded(tool.run(args.clone(), &mut ctx)) => result,
                }
            }
        } else {
            ToolResult::new(ToolOutcome::Failed)
                .with_content(format!("The tool {} is no longer available.", call.tool))
                .into()
        };
        let result = agent
            .callbacks
            .after_tool
            .iter()
            .find_map(|cb| cb(&mut ctx, &call.tool, &args, &result))
            .unwrap_or(result);
        let mut actions = std::mem::take(&mut ctx.actions);
        Self::absorb(&mut tool_turn_ctx, &mut ctx, &mut actions.state_delta);
        drop(ctx);
        turn.temp = tool_turn_ctx.temp;
        let structured = match &result {
            ToolReturn::Result(r) => Some(r.clone()),
            _ => None,
        };
        let outcome = structured
            .as_ref()
            .map_or(ToolOutcome::Completed, |r| r.outcome);
        if let Some(n) = attempt {
            commit.journal.push(JournalOp::Finish {
                call_id: call.call_id.clone(),
                attempt: n,
                finished_at: self.now(),
                outcome: Some(outcome),
            });
        }
        if outcome == ToolOutcome::NeedsUserAuth {
            let structured =
                structured.unwrap_or_else(|| ToolResult::new(ToolOutcome::NeedsUserAuth));
            let scopes = if structured.auth_scopes.is_empty() {
                agent
                    .tool(&call.tool)
                    .map(|t| t.scopes())
                    .unwrap_or_default()
            } else {
                structured.auth_scopes.clone()
            };
            call.status = CallStatus::AwaitingAuth;
            call.auth_scopes = scopes.clone();
            call.authorize_url = structured.authorize_url.clone();
            call.updated_at = self.now();
            call.version += 1;
            let mut event = self.agent_event(turn, None);
            event.author = call.agent_name.clone();
            event.branch = call.branch.clone();
            actions.requested_auth_configs.insert(
                call.call_id.clone(),
                object(json!({
                    "tool": call.tool,
                    "scopes": scopes,
                    "authorize_url": structured.authorize_url,
                    "message": coerce_tool_result(structured.clone()).0,
                })),
            );
            event.actions = actions;
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "auth.requested",
                &format!("agent:{}", call.agent_name),
                json!({"scopes": call.auth_scopes}),
            ));
            commit.events.push(event);
            commit.calls.push(call);
        } else {
            let (event, outcome) = self.response_event(turn, &call, result, actions, None);
            commit.audit.push(self.audit(
                s,
                Some(&call),
                "call.completed",
                &format!("agent:{}", call.agent_name),
                json!({"outcome": outcome}),
            ));
            self.mark_done(&mut call, outcome);
            commit.events.push(event);
            commit.calls.push(call);
        }
        self.commit(s, commit)
    }

    /// Loads a call and locks its session, checking it is in one of `states`.
    async fn held_call(
        &self,
        call_id: &str,
        states: &[CallStatus],
    ) -> Result<(SessionGuard, CallRecord, InvocationRecord), EngineError> {
        let call = self
            .inner
            .store
            .call(call_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        let guard = self.lock_session(&call.session_id).await?;
        // Read again under the lock: another decision may have landed while we waited.
        let call = self
            .inner
            .store
            .call(call_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        if !states.contains(&call.status) {
            return Err(EngineError::NotPending {
                call_id: call_id.to_owned(),
                status: call.status,
            });
        }
        let inv = self
            .inner
            .store
            .invocation(&call.invocation_id)?
            .ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))?;
        Ok((guard, call, inv))
    }

    /// Resumes a suspended turn after a change, unless another act already runs it.
    async fn resume(
        &self,
        s: &mut SessionCache,
        inv: InvocationRecord,
    ) -> Result<TurnOutcome, EngineError> {
        if !inv.status.is_open() {
            return Ok(TurnOutcome {
                invocation_id: inv.id.clone(),
                status: inv.status,
            });
        }
        // Another act (a new message waiting for this lock) will take the turn from here.
        let Ok(token) = self.start_running(&s.id) else {
            return Ok(TurnOutcome {
                invocation_id: inv.id.clone(),
                status: inv.status,
            });
        };
        let mut turn = Turn {
            inv,
            temp: StateMap::new(),
            cancel: token,
        };
        let result = self.advance(s, &mut turn).await;
        self.stop_running(&s.id);
        result
    }

    /// Decides a call held for approval and moves its turn on.
    pub async fn decide(
        &self,
        call_id: &str,
        decision: Decision,
    ) -> Result<TurnOutcome, EngineError> {
        let (mut guard, mut call, inv) = self
            .held_call(call_id, &[CallStatus::AwaitingApproval])
            .await?;
        let s = guard.cache();
        let now = self.now();
        let mut commit = Commit::default();
        let verdict = match &decision {
            Decision::Approve | Decision::AlwaysAllow { .. } => Verdict::Approved,
            Decision::ApproveEdited(_) => Verdict::ApprovedEdited,
            Decision::Reject { .. } => Verdict::Rejected,
        };
        if let Decision::ApproveEdited(args) = &decision {
            self.node(&call.agent_name)
                .agent
                .validate_args(&call.tool, args)
                .map_err(|message| EngineError::InvalidArguments {
                    call_id: call_id.to_owned(),
                    message,
                })?;
            call.original_args = Some(std::mem::replace(&mut call.args, args.clone()));
            // The record shows what ran: describe the edited call, not the model's.
            if let Some(tool) = self.node(&call.agent_name).agent.tool(&call.tool).cloned()
                && let Ok(preview) =
                    tokio::time::timeout(PREVIEW_TIMEOUT, tool.preview(&call.args)).await
            {
                call.preview = preview;
            }
        }
        if let Decision::AlwaysAllow {
            constraints,
            expires_at,
        } = &decision
        {
            let rule = Rule {
                id: format!("rule_{}", uuid::Uuid::new_v4().simple()),
                tool: call.tool.clone(),
                effect: RuleEffect::AlwaysAllow,
                arg_constraints: constraints.clone(),
                expires_at: *expires_at,
                created_by: "user".to_owned(),
                from_call_id: Some(call.call_id.clone()),
                created_at: now,
                revoked_at: None,
            };
            commit
                .audit
                .push(self.audit(s, Some(&call), "rule.created", "user", json!(rule)));
            commit.rules.push(rule);
        }
        let reason = match &decision {
            Decision::Reject { reason } => reason.clone().filter(|r| !r.trim().is_empty()),
            _ => None,
        };
        call.decision = Some(ApprovalDecision {
            verdict,
            decided_by: "user".to_owned(),
            decided_at: now,
            reason: reason.clone(),
            args_hash: (verdict != Verdict::Rejected).then(|| args_hash(&call.args)),
        });
        call.updated_at = now;
        let kind = match verdict {
            Verdict::Rejected => "approval.rejected",
            Verdict::ApprovedEdited => "approval.approved_edited",
            _ => "approval.approved",
        };
        commit.audit.push(self.audit(
            s,
            Some(&call),
            kind,
            "user",
            json!({"args": call.args, "original_args": call.original_args, "reason": reason}),
        ));
        if verdict == Verdict::Rejected {
            let text = match &reason {
                Some(reason) => format!("The user rejected this call. Their reason: {reason}"),
                None => "The user rejected this call.".to_owned(),
            };
            let turn = Turn {
                inv: inv.clone(),
                temp: StateMap::new(),
                cancel: CancellationToken::new(),
            };
            let result = ToolResult::new(ToolOutcome::Blocked).with_content(text);
            let (event, _) =
                self.response_event(&turn, &call, result.into(), EventActions::default(), None);
            self.mark_done(&mut call, ToolOutcome::Blocked);
            commit.events.push(event);
        } else {
            call.status = CallStatus::Approved;
            call.version += 1;
        }
        commit.calls.push(call);
        self.commit(s, commit)?;
        self.resume(s, inv).await
    }

    /// Decides several calls, in order; stops at the first failure.
    pub async fn decide_many(
        &self,
        decisions: Vec<(String, Decision)>,
    ) -> Result<Vec<TurnOutcome>, EngineError> {
        let mut outcomes = Vec::with_capacity(decisions.len());
        for (call_id, decision) in decisions {
            outcomes.push(self.decide(&call_id, decision).await?);
        }
        Ok(outcomes)
    }

    /// Tells the engine these scopes are now granted: every call waiting for no more than them
    /// runs again with its original arguments (an approval given before still holds).
    pub async fn auth_completed(
        &self,
        granted: &[String],
    ) -> Result<Vec<TurnOutcome>, EngineError> {
        let granted: HashSet<&str> = granted.iter().map(String::as_str).collect();
        let waiting = self.inner.store.calls(&CallFilter {
            statuses: vec![CallStatus::AwaitingAuth],
            ..CallFilter::default()
        })?;
        let mut outcomes = Vec::new();
        for call in waiting {
            if !call
                .auth_scopes
                .iter()
                .all(|scope| granted.contains(scope.as_str()))
            {
                continue;
            }
            let (mut guard, mut call, inv) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingAuth])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            let s = guard.cache();
            call.status = CallStatus::Approved;
            call.updated_at = self.now();
            call.version += 1;
            let audit = self.audit(
                s,
                Some(&call),
                "auth.granted",
                "user",
                json!({"scopes": call.auth_scopes}),
            );
            self.commit(
                s,
                Commit {
                    calls: vec![call],
                    audit: vec![audit],
                    ..Commit::default()
                },
            )?;
            outcomes.push(self.resume(s, inv).await?);
        }
        Ok(outcomes)
    }

    /// The user declined to sign in for this call: the model gets `CANCELLED`.
    pub async fn auth_declined(&self, call_id: &str) -> Result<TurnOutcome, EngineError> {
        let (mut guard, call, inv) = self.held_call(call_id, &[CallStatus::AwaitingAuth]).await?;
        let s = guard.cache();
        self.answer(
            s,
            &inv,
            call,
            ToolResult::new(ToolOutcome::Cancelled)
                .with_content("The user declined to sign in, so the call did not run."),
            "auth.declined",
            Vec::new(),
        )?;
        self.resume(s, inv).await
    }

    fn answer(
        &self,
        s: &mut SessionCache,
        inv: &InvocationRecord,
        mut call: CallRecord,
        result: ToolResult,
        kind: &str,
        journal: Vec<JournalOp>,
    ) -> Result<(), EngineError> {
        let turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        let outcome = result.outcome;

        let (event, _) =
            self.response_event(&turn, &call, result.into(), EventActions::default(), None);
        let audit = self.audit(s, Some(&call), kind, "user", json!({"outcome": outcome}));
        self.mark_done(&mut call, outcome);
        self.commit(
            s,
            Commit {
                events: vec![event],
                calls: vec![call],
                audit: vec![audit],
                journal,
                ..Commit::default()
            },
        )
    }

    /// Closes the journal rows of a call's attempts that never finished, with what is now known
    /// of them, so the journal says how every write ended and recovery stops rereading them.
    fn close_attempts(
        &self,
        call_id: &str,
        outcome: Option<ToolOutcome>,
    ) -> Result<Vec<JournalOp>, EngineError> {
        Ok(self
            .inner
            .store
            .dispatches(call_id)?
            .into_iter()
            .filter(|entry| entry.finished_at.is_none())
            .map(|entry| JournalOp::Finish {
                call_id: entry.call_id,
                attempt: entry.attempt,
                finished_at: self.now(),
                outcome,
            })
            .collect())
    }

    /// Settles a write whose outcome a crash made unknown.
    pub async fn settle(
        &self,
        call_id: &str,
        settlement: Settlement,
    ) -> Result<TurnOutcome, EngineError> {
        let (mut guard, mut call, inv) = self
            .held_call(call_id, &[CallStatus::OutcomeUnknown])
            .await?;
        let s = guard.cache();
        match settlement {
            Settlement::Happened => {
                let journal = self.close_attempts(call_id, Some(ToolOutcome::Completed))?;
                self.answer(
                    s,
                    &inv,
                    call,
                    ToolResult::new(ToolOutcome::Completed)
                        .with_content("The user confirmed that this call took effect."),
                    "call.settled",
                    journal,
                )?;
            }
            Settlement::DidNotHappen => {
                let journal = self.close_attempts(call_id, Some(ToolOutcome::Failed))?;
                self.answer(
                    s,
                    &inv,
                    call,
                    ToolResult::new(ToolOutcome::Failed)
                        .with_content("The call did not take effect (confirmed by the user)."),
                    "call.settled",
                    journal,
                )?;
            }
            Settlement::Retry => {
                let journal = self.close_attempts(call_id, None)?;
                call.status = CallStatus::Approved;
                call.updated_at = self.now();
                call.version += 1;
                let audit = self.audit(s, Some(&call), "call.retry", "user", json!({}));
                self.commit(
                    s,
                    Commit {
                        calls: vec![call],
                        audit: vec![audit],
                        journal,
                        ..Commit::default()
                    },
                )?;
            }
        }
        self.resume(s, inv).await
    }

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
            let (mut guard, mut call, inv) = match self
                .held_call(&call.call_id, &[CallStatus::AwaitingApproval])
                .await
            {
                Ok(found) => found,
                Err(EngineError::NotPending { .. }) => continue,
                Err(e) => return Err(e),
            };
            let s = guard.cache();
            call.decision = Some(ApprovalDecision {
                verdict: Verdict::Expired,
                decided_by: "engine".to_owned(),
                decided_at: now,
                reason: Some("no decision before the approval expired".to_owned()),
                args_hash: None,
            });
            expired.push(call.call_id.clone());
            self.answer(
                s,
                &inv,
                call,
                ToolResult::new(ToolOutcome::Cancelled).with_content("The approval request expired before the user decided, so the call did not run."),
                "approval.expired",
                Vec::new(),
            )?;
            if let Err(e) = self.resume(s, inv).await {
                tracing::warn!(error = %e, "resuming a turn after an expiry failed");
            }
        }
        Ok(expired)
    }

    /// Cancels the session's turn: a running one stops at its next step (a write already sent
    /// is waited for), a suspended one is closed. Held calls are answered `CANCELLED`.
    pub async fn cancel(&self, session_id: &str) -> Result<bool, EngineError> {
        if let Some(token) = lock(&self.inner.running).get(session_id) {
            token.cancel();
            return Ok(true);
        }
        let mut guard = self.lock_session(session_id).await?;
        let s = guard.cache();
        let open = self.open_invocations(session_id)?;
        let any = !open.is_empty();
        for inv in open {
            self.close_invocation(s, inv, InvocationStatus::Cancelled, "cancelled by the user")?;
        }
        Ok(any)
    }

    /// Whether a turn is running in the session right now.
    pub fn is_running(&self, session_id: &str) -> bool {
        lock(&self.inner.running).contains_key(session_id)
    }

    /// Calls waiting for the user across all sessions (approvals, sign-ins, unknown outcomes),
    /// oldest first.
    pub fn pending_calls(&self) -> Result<Vec<CallRecord>, EngineError> {
        Ok(self.inner.store.calls(&CallFilter {
            statuses: vec![
                CallStatus::AwaitingApproval,
                CallStatus::AwaitingAuth,
                CallStatus::OutcomeUnknown,
            ],
            ..CallFilter::default()
        })?)
    }

    /// Every rule, revoked ones included.
    pub fn rules(&self) -> Result<Vec<Rule>, EngineError> {
        Ok(self.inner.store.rules()?)
    }

    /// Adds a rule directly (from settings rather than an approval card).
    pub fn add_rule(
        &self,
        tool: &str,
        effect: RuleEffect,
        constraints: Map<String, Value>,
        expires_at: Option<i64>,
    ) -> Result<Rule, EngineError> {
        let rule = Rule {
            id: format!("rule_{}", uuid::Uuid::new_v4().simple()),
            tool: tool.to_owned(),
            effect,
            arg_constraints: constraints,
            expires_at,
            created_by: "user".to_owned(),
            from_call_id: None,
            created_at: self.now(),
            revoked_at: None,
        };
        self.inner.store.commit(&Commit {
            rules: vec![rule.clone()],
            audit: vec![AuditEntry {
                at: self.now(),
                session_id: None,
                call_id: None,
                tool: Some(tool.to_owned()),
                kind: "rule.created".to_owned(),
                actor: "user".to_owned(),
                detail: json!(rule),
            }],
            ..Commit::default()
        })?;
        Ok(rule)
    }

    /// Revokes a rule; it stays listed with its revocation time.
    pub fn revoke_rule(&self, rule_id: &str) -> Result<Rule, EngineError> {
        let mut rule = self
            .rules()?
            .into_iter()
            .find(|r| r.id == rule_id)
            .ok_or_else(|| EngineError::RuleNotFound(rule_id.to_owned()))?;
        rule.revoked_at = Some(self.now());
        self.inner.store.commit(&Commit {
            rules: vec![rule.clone()],
            audit: vec![AuditEntry {
                at: self.now(),
                session_id: None,
                call_id: None,
                tool: Some(rule.tool.clone()),
                kind: "rule.revoked".to_owned(),
                actor: "user".to_owned(),
                detail: json!({"rule_id": rule.id}),
            }],
            ..Commit::default()
        })?;
        Ok(rule)
    }

    /// The audit trail.
    pub fn audit_trail(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, EngineError> {
        Ok(self.inner.store.audit(filter)?)
    }

    /// Picks up after a restart: writes that were in flight are retried with their key where the
    /// service deduplicates and otherwise left for the user as "outcome unknown"; approved calls
    /// that never ran are run; turns that were running are marked interrupted; suspended turns
    /// with nothing left to wait for are resumed. Held calls stay held and listed.
    pub async fn recover(&self) -> Result<RecoveryReport, EngineError> {
        let mut report = RecoveryReport::default();
        for entry in self.inner.store.unfinished_dispatches()? {
            let Some(mut call) = self.inner.store.call(&entry.call_id)? else {
                continue;
            };
            if call.status != CallStatus::Dispatching {
                continue;
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
            self.commit(s, commit)?;
        }
        for inv in self
            .inner
            .store
            .invocations_with_status(&[InvocationStatus::Running, InvocationStatus::Suspended])?
        {
            let mut guard = self.lock_session(&inv.session_id).await?;
            let s = guard.cache();
            let mut turn = Turn {
                inv: inv.clone(),
                temp: StateMap::new(),
                cancel: CancellationToken::new(),
            };
            // Approved calls never lost: run them now.
            for call in self.open_calls(&inv.id)? {
                if call.status == CallStatus::Approved {
                    self.dispatch(s, &mut turn, call).await?;
                }
            }
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
                event.error_code = Some("interrupted".to_owned());
                event.error_message =
                    Some("the app stopped while this turn was running".to_owned());
                report.interrupted.push(inv.id.clone());
                self.finish(s, &mut turn, InvocationStatus::Interrupted, vec![event])?;
            }
        }
        Ok(report)
    }
}

/// Runs a tool, turning a panic into a `FAILED` result instead of taking the engine down.
async fn run_guarded<F: std::future::Future<Output = ToolReturn>>(future: F) -> ToolReturn {
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(_) => ToolResult::new(ToolOutcome::Failed)
            .with_content("The tool crashed.")
            .into(),
    }
}

fn branch_visible(event_branch: Option<&str>, agent_branch: Option<&str>) -> bool {
    match (event_branch, agent_branch) {
        (None, _) => true,
        // The root sees everything; sub-agents see their ancestors' and descendants' events, not
        // their peers'.
        (Some(_), None) => true,
        (Some(event), Some(agent)) => {
            agent == event
                || agent.starts_with(&format!("{event}."))
                || event.starts_with(&format!("{agent}."))
        }
    }
}

enum ModelOutcome {
    Response(LlmResponse, StateMap),
    Failed(ModelError, StateMap),
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum StepControl {
    Continue,
    End,
    Transfer(String),
    Escalate,
}

struct SessionGuard(OwnedMutexGuard<Option<SessionCache>>);

impl SessionGuard {
    fn cache(&mut self) -> &mut SessionCache {
        match self.0.as_mut() {
            Some(cache) => cache,
            // lock_session fills the slot before handing out a guard.
            None => unreachable!("a session guard always holds a loaded session"),
        }
    }
}

trait EndsSession {
    fn state_delta_ends_session(&self) -> bool;
}

impl EndsSession for Event {
    fn state_delta_ends_session(&self) -> bool {
        self.actions
            .state_delta
            .contains_key(SESSION_ENDED_VARIABLE)
    }
}
