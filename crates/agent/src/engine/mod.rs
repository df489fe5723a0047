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
//!
//! The code is split by concern: `session` (the in-memory session and the commit every change
//! goes through), `message` (a new message opening a turn), `turn` (the loop), `model_call`,
//! `history` (the contents the model is shown), `gate` (registering a response's calls, rules),
//! `classify` (judging each call), `decision`, `dispatch` (and its journal), `auth` (suspension
//! for sign-in), `expiry` and `recovery`.

mod auth;
pub mod autonomy;
mod classify;
mod decision;
mod dispatch;
mod expiry;
mod gate;
mod history;
mod message;
mod model_call;
pub mod notice;
mod recovery;
mod session;
mod turn;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use tokio::sync::{OwnedMutexGuard, broadcast};
use tokio_util::sync::CancellationToken;

use crate::agent::LlmAgent;
use crate::clock::{Clock, SystemClock};
use crate::event::Event;
use crate::persist::{
    CallRecord, CallStatus, EngineStore, InvocationRecord, InvocationStatus, PersistError,
};
use crate::state::StateMap;

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

/// Where the user decided a held call: the audit and the call's `decided_by` say so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DecisionSource {
    /// In the app's window (or its CLI): `decided_by` is `user`.
    #[default]
    App,
    /// On the app's card in Feishu, over the long connection: `decided_by` is `user:feishu`.
    Feishu,
}

impl DecisionSource {
    /// The call's `decided_by` and the audit entry's actor.
    pub fn actor(self) -> &'static str {
        match self {
            DecisionSource::App => "user",
            DecisionSource::Feishu => "user:feishu",
        }
    }

    /// The audit detail's `via`.
    pub fn name(self) -> &'static str {
        match self {
            DecisionSource::App => "app",
            DecisionSource::Feishu => "feishu",
        }
    }
}

/// Whether `decided_by` names the user, wherever they decided (`user`, `user:feishu`).
pub fn decided_by_user(decided_by: &str) -> bool {
    decided_by == "user" || decided_by.starts_with("user:")
}

/// What a new message does to the approvals (and sign-ins) still waiting in its conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WaitingCalls {
    /// They keep waiting; the model is told so, and a later decision still runs them.
    #[default]
    Keep,
    /// The user chose to call them off: each is answered `CANCELLED`, with the reason
    /// [`notice::CANCELLED_FOR_NEW_MESSAGE`].
    Cancel,
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
    /// No detached agent has this name (see [`Engine::set_detached_agents`]).
    #[error("there is no agent named {0}")]
    AgentNotFound(String),
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
    /// The approval's time ran out before this decision: the call was answered as expired and
    /// did not run.
    #[error("the approval expired before the decision, so the call did not run ({})", call_ids.join(", "))]
    Expired {
        /// The calls whose approval had expired.
        call_ids: Vec<String>,
    },
    /// Edited arguments do not fit the tool's schema.
    #[error("the edited arguments of call {call_id} are invalid: {message}")]
    InvalidArguments {
        /// The call.
        call_id: String,
        /// What is wrong, by path.
        message: String,
    },
    /// The service does not know an id in the edited arguments (an invited person who does
    /// not exist): the edit cannot be approved.
    #[error("the edited arguments of call {call_id} name something Feishu does not know: {}", reason.en)]
    EditRefused {
        /// The call.
        call_id: String,
        /// What was not found, in both languages.
        reason: crate::tool::Localized,
    },
    /// No rule has this id.
    #[error("rule {0} does not exist")]
    RuleNotFound(String),
    /// Two agents in the tree share a name.
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
}

#[derive(Clone)]
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
    /// The rendered settled part of the model's window, so a request does not walk all of it.
    history: history::HistoryCache,
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

/// The agent tree by name, replaced whole by [`Engine::set_agent`].
struct Agents {
    root: String,
    nodes: HashMap<String, AgentNode>,
}

impl Agents {
    fn of(root: LlmAgent) -> Result<Agents, EngineError> {
        let mut nodes = HashMap::new();
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
        add(&mut nodes, Arc::new(root), None, None)?;
        Ok(Agents {
            root: root_name,
            nodes,
        })
    }
}

struct Inner {
    /// Read at every step, so a swap applies from the next step on (see [`Engine::set_agent`]).
    agents: RwLock<Arc<Agents>>,
    /// Agents outside the tree (see [`Engine::set_detached_agents`]), by name.
    detached: RwLock<Arc<HashMap<String, AgentNode>>>,
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
            .field("root", &self.agents().root)
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
        let agents = Agents::of(root)?;
        let (events, _) = broadcast::channel(config.event_buffer.max(16));
        Ok(Engine {
            inner: Arc::new(Inner {
                agents: RwLock::new(Arc::new(agents)),
                detached: RwLock::new(Arc::default()),
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

    /// Replaces the agent tree (instruction, tools, callbacks, sub-agents) without a restart.
    ///
    /// Sessions, their state, pending approvals, rules and the audit trail stay: they live in
    /// the store and the session caches, not in the agent. Every step reads the tree afresh, so
    /// the next model call (in a new turn, or the next step of a running one) uses the new
    /// agent; a held call is dispatched with the new agent's tool of the same name when it is
    /// approved, and answered "no longer available" if the new agent has none.
    pub fn set_agent(&self, root: LlmAgent) -> Result<(), EngineError> {
        let agents = Agents::of(root)?;
        *self
            .inner
            .agents
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(agents);
        Ok(())
    }

    /// The root agent now.
    pub fn agent(&self) -> Arc<LlmAgent> {
        self.node(&self.agents().root).agent
    }

    fn agents(&self) -> Arc<Agents> {
        self.inner
            .agents
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn root_name(&self) -> String {
        self.agents().root.clone()
    }

    fn has_agent(&self, name: &str) -> bool {
        self.agents().nodes.contains_key(name)
    }

    /// Replaces the *detached* agents: agents outside the root's tree that no model can
    /// transfer to, whose turns start only through [`Engine::send_message_as`]. The app gives
    /// each of the user's other agents (an MCP client) one, so their calls pass the very same
    /// gate — rules, holds, expiry, sign-in, audit — under their own name. A name the tree
    /// already uses is refused.
    pub fn set_detached_agents(&self, agents: Vec<LlmAgent>) -> Result<(), EngineError> {
        let tree = self.agents();
        let mut nodes = HashMap::new();
        for agent in agents {
            let name = agent.name.clone();
            if tree.nodes.contains_key(&name) || nodes.contains_key(&name) {
                return Err(crate::agent::AgentError::DuplicateAgent(name).into());
            }
            let node = AgentNode {
                agent: Arc::new(agent),
                parent: None,
                branch: None,
            };
            nodes.insert(name, node);
        }
        *self
            .inner
            .detached
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(nodes);
        Ok(())
    }

    fn is_detached(&self, name: &str) -> bool {
        self.inner
            .detached
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(name)
    }

    /// The agent of that name, or the root when neither the tree nor the detached agents have
    /// it any more (a swap renamed it).
    fn node(&self, name: &str) -> AgentNode {
        let agents = self.agents();
        if !agents.nodes.contains_key(name) {
            let detached = self
                .inner
                .detached
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(name)
                .cloned();
            if let Some(node) = detached {
                return node;
            }
        }
        agents
            .nodes
            .get(name)
            .or_else(|| agents.nodes.get(&agents.root))
            .cloned()
            .unwrap_or_else(|| unreachable!("the root agent is always registered"))
    }

    fn emit(&self, event: EngineEvent) {
        // No subscriber is not an error: the UI may not be open.
        let _ = self.inner.events.send(event);
    }
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
