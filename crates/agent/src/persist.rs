//! What the engine persists, and the trait a store implements to persist it.
//!
//! Suspension lives in the database, not in memory: every function call the engine holds (for an
//! approval or a sign-in) is a [`CallRecord`], every turn an [`InvocationRecord`], every write's
//! dispatch a [`JournalEntry`], every always/never rule a [`Rule`], and everything that happened an
//! [`AuditEntry`]. The engine changes them only through [`EngineStore::commit`], which applies a
//! [`Commit`] — events, records, journal and audit lines together — in one transaction, so a
//! process killed at any instant leaves either all of a step or none of it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::Event;
use crate::result::ToolOutcome;
use crate::state::StateMap;

/// Where a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvocationStatus {
    /// The engine is working on it (model or tools).
    Running,
    /// Suspended until every held call is decided (approval) or signed in (auth).
    Suspended,
    /// Finished normally.
    Completed,
    /// Stopped by the user.
    Cancelled,
    /// Replaced by a newer user message while suspended.
    Superseded,
    /// Ended by an error; the error is in the last event.
    Failed,
    /// The process stopped while it was running; found so at the next start.
    Interrupted,
}

impl InvocationStatus {
    /// Whether the turn can still move on.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            InvocationStatus::Running | InvocationStatus::Suspended
        )
    }
}

/// One turn: everything that follows one user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationRecord {
    /// The invocation id (shared by its events).
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// The agent currently answering (a sub-agent after a transfer).
    pub agent_name: String,
    /// Where it stands.
    pub status: InvocationStatus,
    /// How many model calls it has made, to bound runaway loops.
    pub model_calls: u32,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    /// Milliseconds since the Unix epoch of the last change.
    pub updated_at: i64,
}

/// Why a call is held, or what became of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Waiting for the user's approval.
    AwaitingApproval,
    /// Approved (by the user or a rule) and not yet dispatched.
    Approved,
    /// Dispatched: the journal has a `started` row and the result is not yet recorded.
    Dispatching,
    /// The tool needs a Feishu permission; waiting for the user to sign in.
    AwaitingAuth,
    /// The process died while a write that Feishu does not deduplicate was in flight: whether it
    /// happened is unknown, and only the user can settle it.
    OutcomeUnknown,
    /// Answered: the function response is in the session's events.
    Done,
}

impl CallStatus {
    /// Whether the call still keeps its turn suspended.
    pub fn is_open(self) -> bool {
        self != CallStatus::Done
    }
}

/// The user's (or a rule's) word on a held call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// What was decided.
    pub verdict: Verdict,
    /// Who decided: `user`, or `rule:<id>`.
    pub decided_by: String,
    /// Milliseconds since the Unix epoch.
    pub decided_at: i64,
    /// The reason given (rejections), or the note of an expiry or supersession.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// SHA-256 of the canonical JSON of the arguments approved; dispatch refuses any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_hash: Option<String>,
}

/// What was decided about a held call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Run it as proposed.
    Approved,
    /// Run it with arguments the user edited.
    ApprovedEdited,
    /// Do not run it.
    Rejected,
    /// Nobody decided in time.
    Expired,
    /// A newer user message replaced the turn.
    Superseded,
    /// The user cancelled the turn.
    Cancelled,
}

/// A function call the engine knows about beyond its event: held, approved, dispatched or done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The function call's id; unique across sessions.
    pub call_id: String,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub invocation_id: String,
    /// The agent whose model made the call.
    pub agent_name: String,
    /// The agent path of the call's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The arguments that will be (or were) dispatched: the edited ones after an edit.
    pub args: Map<String, Value>,
    /// The model's arguments, kept when the user edited them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_args: Option<Map<String, Value>>,
    /// The key the write carries to Feishu (`uuid`, `idempotency_key`, `client_token`).
    pub idempotency_key: String,
    /// Where the call stands.
    pub status: CallStatus,
    /// Whether the tool needed approval for these arguments.
    pub requires_approval: bool,
    /// The decision, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// What the call will do, in words, for the approval card (from the tool, when it was held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<crate::tool::Preview>,
    /// Feishu scopes the call waits for (`AwaitingAuth`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_scopes: Vec<String>,
    /// The fallback sign-in link the tool gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorize_url: Option<String>,
    /// The final outcome (`Done`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolOutcome>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// When a pending approval expires (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Milliseconds since the Unix epoch of the last change.
    pub updated_at: i64,
    /// Bumped by every write; a commit carrying a stale version is refused (optimistic locking).
    pub version: u64,
}

/// A standing decision for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleEffect {
    /// Run matching calls without asking.
    AlwaysAllow,
    /// Refuse matching calls without asking (`BLOCKED`).
    NeverAllow,
}

/// An always-allow or never-allow rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// The rule's id.
    pub id: String,
    /// The tool it applies to.
    pub tool: String,
    /// Allow or refuse.
    pub effect: RuleEffect,
    /// Argument values a call must have for the rule to apply (each key equal); empty = any call.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub arg_constraints: Map<String, Value>,
    /// When the rule stops applying (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Who created it (`user`, or a settings import).
    pub created_by: String,
    /// The approval card it was created from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_call_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// When it was revoked, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<i64>,
}

impl Rule {
    /// Whether the rule applies to a call of `tool` with `args` at time `now`.
    pub fn matches(&self, tool: &str, args: &Map<String, Value>, now: i64) -> bool {
        self.tool == tool
            && self.revoked_at.is_none()
            && self.expires_at.is_none_or(|at| now < at)
            && self
                .arg_constraints
                .iter()
                .all(|(k, v)| args.get(k) == Some(v))
    }
}

/// One dispatch of a write, recorded before it runs and after it returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The function call.
    pub call_id: String,
    /// 1 for the first dispatch; a retry after sign-in or recovery is the next number.
    pub attempt: u32,
    /// The session.
    pub session_id: String,
    /// The tool.
    pub tool: String,
    /// The key the write carried.
    pub idempotency_key: String,
    /// SHA-256 of the canonical JSON of the dispatched arguments.
    pub args_hash: String,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    /// When the tool returned; `None` while (or if forever) in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// The outcome the tool returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolOutcome>,
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Milliseconds since the Unix epoch.
    pub at: i64,
    /// The session, if the entry belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The function call, if the entry is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What happened, e.g. `approval.requested`, `approval.approved`, `call.dispatched`.
    pub kind: String,
    /// Who did it: `user`, `agent:<name>`, `rule:<id>`, `engine`.
    pub actor: String,
    /// The particulars (arguments, reason, outcome…).
    #[serde(default)]
    pub detail: Value,
}

/// Which audit entries to read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only kinds starting with this (e.g. `approval.`).
    pub kind_prefix: Option<String>,
    /// Only entries at or after this time.
    pub since: Option<i64>,
    /// At most this many, newest first; `None` for all.
    pub limit: Option<usize>,
}

/// Which calls to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallFilter {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only this turn's.
    pub invocation_id: Option<String>,
    /// Only calls in one of these states; empty for all.
    pub statuses: Vec<CallStatus>,
}

/// A change to the journal inside a [`Commit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JournalOp {
    /// Insert a `started` row.
    Start(JournalEntry),
    /// Mark `(call_id, attempt)` finished.
    Finish {
        /// The call.
        call_id: String,
        /// The attempt.
        attempt: u32,
        /// When.
        finished_at: i64,
        /// What the tool returned; `None` when the attempt was abandoned without ever learning
        /// its outcome (a crash mid-write, later retried, settled by the user or superseded).
        outcome: Option<ToolOutcome>,
    },
}

/// Everything one engine step changes, applied atomically by [`EngineStore::commit`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Commit {
    /// The session the events are appended to.
    pub session_id: String,
    /// The last sequence the engine saw (checked when `events` is not empty).
    pub expected_seq: u64,
    /// Events to append, in order.
    pub events: Vec<Event>,
    /// Invocations to insert or replace.
    pub invocations: Vec<InvocationRecord>,
    /// Calls to insert (version 1) or replace (version = stored version + 1).
    pub calls: Vec<CallRecord>,
    /// Rules to insert or replace.
    pub rules: Vec<Rule>,
    /// Journal changes.
    pub journal: Vec<JournalOp>,
    /// Audit lines to append.
    pub audit: Vec<AuditEntry>,
}

/// A session as the engine reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    /// The session's id.
    pub id: String,
    /// Its app.
    pub app_name: String,
    /// Its user.
    pub user_id: String,
    /// Its events in order.
    pub events: Vec<Event>,
    /// Its state in all persisted scopes.
    pub state: StateMap,
    /// The sequence of its last event.
    pub last_seq: u64,
}

/// A persistence failure, as the engine needs to tell them apart.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// Someone else appended to the session, or changed a call, since the engine read it.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The session, call or rule does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Anything else; the message names the database and what to do.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// The engine's persistence. Implemented over SQLite by the `store` crate.
///
/// All methods are synchronous: each is one short SQLite transaction, cheaper than a hop to a
/// blocking thread pool.
pub trait EngineStore: Send + Sync + std::fmt::Debug {
    /// Creates a session and returns its id.
    fn create_session(
        &self,
        app_name: &str,
        user_id: &str,
        session_id: Option<&str>,
        state: &StateMap,
    ) -> Result<String, PersistError>;

    /// Reads a session whole.
    fn load_session(&self, session_id: &str) -> Result<SessionSnapshot, PersistError>;

    /// Applies a step atomically; returns the session's new last sequence.
    ///
    /// Fails with [`PersistError::Conflict`] (and changes nothing) when `expected_seq` is stale or a
    /// call's version is not the stored version + 1 (or 1 for a new call).
    fn commit(&self, commit: &Commit) -> Result<u64, PersistError>;

    /// One invocation.
    fn invocation(&self, invocation_id: &str) -> Result<Option<InvocationRecord>, PersistError>;

    /// Invocations in any of these states, oldest first.
    fn invocations_with_status(
        &self,
        statuses: &[InvocationStatus],
    ) -> Result<Vec<InvocationRecord>, PersistError>;

    /// One call.
    fn call(&self, call_id: &str) -> Result<Option<CallRecord>, PersistError>;

    /// Calls matching the filter, oldest first.
    fn calls(&self, filter: &CallFilter) -> Result<Vec<CallRecord>, PersistError>;

    /// Every rule, revoked ones included, oldest first.
    fn rules(&self) -> Result<Vec<Rule>, PersistError>;

    /// Journal rows with no `finished`, oldest first.
    fn unfinished_dispatches(&self) -> Result<Vec<JournalEntry>, PersistError>;

    /// All journal rows of one call, by attempt.
    fn dispatches(&self, call_id: &str) -> Result<Vec<JournalEntry>, PersistError>;

    /// Audit entries matching the filter, newest first.
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, PersistError>;
}
