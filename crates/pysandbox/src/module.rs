//! One user file: its source, and what running its top level declared (tools and callbacks).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use agent::{CallbackContext, StateMap};

use crate::error::SandboxError;
use crate::host::{HostCall, NoHost};
use crate::layout::Declared;
use crate::protocol::{Answer, Describe, Description, ToolSpec};
use crate::runtime::{CallEnv, Sandbox, encode};

/// The six callback kinds of the seed, named as the Python functions that implement them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallbackKind {
    /// `before_agent_callback(callback_context)`: returning content skips the agent.
    BeforeAgent,
    /// `after_agent_callback(callback_context)`: returning content adds a closing message.
    AfterAgent,
    /// `before_model_callback(callback_context, llm_request)`: may edit the request; returning an
    /// `LlmResponse` replaces the model call.
    BeforeModel,
    /// `after_model_callback(callback_context, llm_response)`: returning an `LlmResponse`
    /// replaces what the model said.
    AfterModel,
    /// `before_tool_callback(tool, input, callback_context)`: may edit the arguments; returning
    /// a dict replaces the tool's result.
    BeforeTool,
    /// `after_tool_callback(tool, input, callback_context, tool_response)`: returning a dict
    /// replaces the tool's result.
    AfterTool,
}

impl CallbackKind {
    /// Every kind, in the order a turn meets them.
    pub const ALL: [CallbackKind; 6] = [
        CallbackKind::BeforeAgent,
        CallbackKind::AfterAgent,
        CallbackKind::BeforeModel,
        CallbackKind::AfterModel,
        CallbackKind::BeforeTool,
        CallbackKind::AfterTool,
    ];

    /// The Python function's name, such as `before_model_callback`.
    pub const fn function_name(self) -> &'static str {
        match self {
            CallbackKind::BeforeAgent => "before_agent_callback",
            CallbackKind::AfterAgent => "after_agent_callback",
            CallbackKind::BeforeModel => "before_model_callback",
            CallbackKind::AfterModel => "after_model_callback",
            CallbackKind::BeforeTool => "before_tool_callback",
            CallbackKind::AfterTool => "after_tool_callback",
        }
    }
}

impl fmt::Display for CallbackKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.function_name())
    }
}

/// A name that is not a callback kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a callback kind")]
pub struct UnknownCallback(pub String);

impl FromStr for CallbackKind {
    type Err = UnknownCallback;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CallbackKind::ALL
            .into_iter()
            .find(|k| k.function_name() == s)
            .ok_or_else(|| UnknownCallback(s.to_owned()))
    }
}

/// A user's Python file, checked by running its top level once in the sandbox.
///
/// Its tools are the functions decorated with `@tool(...)`, and the function named like the file
/// (`order_status.py` → `order_status`) if it is not decorated; its callbacks are the functions
/// named `before_agent_callback`, …, `after_tool_callback`.
#[derive(Debug, Clone)]
pub struct PythonModule {
    filename: String,
    source: Arc<str>,
    code: Option<Arc<str>>,
    tools: Vec<ToolSpec>,
    callbacks: Vec<CallbackKind>,
    functions: Vec<String>,
}

impl PythonModule {
    /// Loads `source` as the file `filename` (the name shows in tracebacks and names the
    /// file's default tool). A syntax error or an exception in the top level is an error with
    /// the traceback and line.
    pub async fn load(
        sandbox: &Sandbox,
        filename: impl Into<String>,
        source: impl Into<String>,
    ) -> Result<PythonModule, SandboxError> {
        Self::load_declared(sandbox, filename, source, &Declared::Standalone).await
    }

    /// Loads `source` as [`PythonModule::load`] does, as what its folder `declared` it to be: a
    /// declared tool is the file's one tool (its function must be there), a declared callback
    /// kind its one callback (likewise).
    pub async fn load_declared(
        sandbox: &Sandbox,
        filename: impl Into<String>,
        source: impl Into<String>,
        declared: &Declared,
    ) -> Result<PythonModule, SandboxError> {
        let filename = filename.into();
        let source: Arc<str> = source.into().into();
        let request = encode(&Describe::new(&filename, &source, declared))?;
        let output = sandbox.run(request, describe_env()).await?;
        let answer = Answer::read(&output)?;
        let description: Description = serde_json::from_value(answer.value)
            .map_err(|e| SandboxError::Protocol(format!("a file's description: {e}")))?;
        let callbacks = description
            .callbacks
            .iter()
            .map(|name| name.parse::<CallbackKind>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SandboxError::Protocol(e.to_string()))?;
        Ok(PythonModule {
            filename,
            source,
            code: description.code.map(Into::into),
            tools: description.tools,
            callbacks,
            functions: description.functions,
        })
    }

    /// The file's name.
    pub fn filename(&self) -> &str {
        &self.filename
    }

    /// The file's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The file's compiled bytecode, as the guest returned it.
    pub(crate) fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The tools it declares.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The callbacks it defines, in [`CallbackKind::ALL`] order.
    pub fn callbacks(&self) -> &[CallbackKind] {
        &self.callbacks
    }

    /// Its other top-level functions: neither tools nor callbacks.
    pub fn functions(&self) -> &[String] {
        &self.functions
    }
}

/// Describing a file reaches nothing: no tools, no network, no session.
fn describe_env() -> CallEnv {
    CallEnv {
        host: Arc::new(NoHost),
        call: HostCall {
            caller: "loading".to_owned(),
            file: String::new(),
            writes_approved: false,
            idempotency_key: None,
            context: CallbackContext::new("", "", "", StateMap::new(), Arc::default()),
        },
        recorded: None,
    }
}
