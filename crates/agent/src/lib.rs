//! The agent engine of Feishu Companion.
//!
//! This crate holds the engine's vocabulary, taken from the two seed documents: the tool-outcome
//! contract ([`result`]: [`ToolOutcome`], [`ToolResult`], [`coerce_tool_result`]) and the runtime
//! data model ([`Content`], [`Part`], [`Event`], [`EventActions`], [`CallbackContext`], …) with the
//! seed's field names, so that stored sessions, user-written Python code and the engine all speak
//! one language. Terms: a *session* is one conversation; an *invocation* (turn) is everything that
//! follows one user message; an *event* is one appended record of a session; *state* is the JSON
//! map folded from the events' `state_delta`s, scoped by key prefix ([`StateScope`]).
//!
//! It knows nothing of Feishu, HTTP servers, SQLite or Tauri: those depend on it, never the reverse.
//!
//! Imports: no crate of this workspace — the engine is the bottom layer; stores, models and tools
//! plug in through its traits ([`persist::EngineStore`], [`Model`], [`AgentTool`]).

pub mod agent;
pub mod clock;
pub mod content;
pub mod context;
pub mod engine;
pub mod event;
pub mod http;
pub mod json;
pub mod llm;
pub mod model;
pub mod persist;
pub mod result;
pub mod state;
pub mod tool;

pub use agent::{AgentError, Callbacks, LlmAgent, LlmAgentBuilder};
pub use clock::{Clock, ManualClock, SystemClock};
pub use content::{
    Blob, Content, CustomizedResponse, FunctionCall, FunctionResponse, Part, ROLE_MODEL, ROLE_USER,
    Reasoning,
};
pub use context::{CallbackContext, ToolContext};
pub use engine::autonomy::Autonomy;
pub use engine::{
    Decision, DecisionSource, Engine, EngineConfig, EngineError, EngineEvent, RecoveryReport,
    Settlement, TurnOutcome, WaitingCalls, args_hash, decided_by_user,
};
pub use event::{Event, EventActions, USER_AUTHOR, now_millis};
pub use http::{ExternalResponse, HttpMethod, StatusError};
pub use json::DataError;
pub use llm::{
    Contents, FinishReason, FunctionDeclaration, GenerateContentConfig, LlmRequest, LlmResponse,
    MalformedCall, Tool, ToolDeclaration, UsageMetadata,
};
pub use model::{Model, ModelError, ModelStream, RecordingModel, ScriptedModel};
pub use persist::{
    CallRecord, CallStatus, EngineStore, InvocationRecord, InvocationStatus, Rule, RuleEffect,
    Verdict,
};
pub use result::{ToolOutcome, ToolResult, ToolReturn, coerce_tool_result};
pub use state::{SessionInfo, StateMap, StateScope};
pub use tool::{
    AgentTool, Approval, FunctionTool, Localized, Preview, PreviewChange, PreviewField, Risk,
};
