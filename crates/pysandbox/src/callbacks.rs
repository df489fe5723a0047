//! Python callbacks as the engine's callbacks.
//!
//! A [`PythonCallback`] is one `*_callback` function of a user's file. Turned into
//! [`agent::Callbacks`] entries (the engine's synchronous closures), they run in the engine's order
//! and short-circuit as the seed says: a callback that returns a value ends its kind's list for
//! that step. A callback that fails (an exception, the deadline, a return value that is not what
//! its kind returns) has its variable changes dropped and is reported. What happens next depends
//! on its kind: a failing `before_*` callback is a guard that could not decide, so it blocks its
//! step (the agent answers that the turn was stopped, the model is not called, the tool does not
//! run) rather than letting it through unchecked; a failing `after_*` callback is skipped, as if
//! it had returned `None`, and the step's own result stands.

use std::collections::HashMap;
use std::sync::Arc;

use agent::{
    CallbackContext, Content, LlmAgentBuilder, LlmRequest, LlmResponse, Part, StateMap, Tool,
    ToolContext, ToolOutcome, ToolResult, ToolReturn,
};
use serde_json::{Map, Value};

use crate::error::SandboxError;
use crate::host::{Host, HostCall};
use crate::module::{CallbackKind, PythonModule};
use crate::protocol::{Answer, Call, ContextWire};
use crate::report::{Report, Reporter};
use crate::runtime::{CallEnv, Sandbox, encode};

/// One callback function of a user's file.
#[derive(Debug, Clone)]
pub struct PythonCallback {
    module: Arc<PythonModule>,
    kind: CallbackKind,
    sandbox: Sandbox,
    host: Arc<dyn Host>,
    reporter: Reporter,
    /// What each of the agent's tools is for, by name: the `Tool.description` tool callbacks see.
    descriptions: Arc<HashMap<String, String>>,
}

/// The extra inputs of each kind.
enum Input<'a> {
    Agent,
    BeforeModel(&'a LlmRequest),
    AfterModel(&'a LlmResponse),
    Tool {
        name: &'a str,
        args: &'a Map<String, Value>,
        response: Option<Value>,
        function_call_id: &'a str,
    },
}

impl PythonCallback {
    /// The callback `kind` of `module`.
    pub fn new(
        module: Arc<PythonModule>,
        kind: CallbackKind,
        sandbox: Sandbox,
        host: Arc<dyn Host>,
        reporter: Reporter,
    ) -> Self {
        PythonCallback {
            module,
            kind,
            sandbox,
            host,
            reporter,
            descriptions: Arc::default(),
        }
    }

    /// Tells the callback what each tool is for (by name), for `Tool.description`.
    #[must_use]
    pub fn with_descriptions(mut self, descriptions: Arc<HashMap<String, String>>) -> Self {
        self.descriptions = descriptions;
        self
    }

    /// Every callback `module` defines, in [`CallbackKind::ALL`] order.
    pub fn all(
        module: &Arc<PythonModule>,
        sandbox: &Sandbox,
        host: &Arc<dyn Host>,
        reporter: &Reporter,
    ) -> Vec<PythonCallback> {
        module
            .callbacks()
            .iter()
            .map(|kind| {
                PythonCallback::new(
                    module.clone(),
                    *kind,
                    sandbox.clone(),
                    host.clone(),
                    reporter.clone(),
                )
            })
            .collect()
    }

    /// Which kind it is.
    pub fn kind(&self) -> CallbackKind {
        self.kind
    }

    /// The file it comes from.
    pub fn module(&self) -> &PythonModule {
        &self.module
    }

    /// Runs the function; on success its variable changes are applied to `ctx`.
    fn call(&self, ctx: &mut CallbackContext, input: Input<'_>) -> Result<Answer, SandboxError> {
        let (llm_request, llm_response, tool, tool_args, tool_response, function_call_id) =
            match input {
                Input::Agent => (None, None, None, None, None, None),
                Input::BeforeModel(request) => (Some(request), None, None, None, None, None),
                Input::AfterModel(response) => (None, Some(response), None, None, None, None),
                Input::Tool {
                    name,
                    args,
                    response,
                    function_call_id,
                } => (
                    None,
                    None,
                    Some(Tool {
                        name: name.to_owned(),
                        description: self.descriptions.get(name).cloned().unwrap_or_default(),
                    }),
                    Some(args),
                    response,
                    Some(function_call_id),
                ),
            };
        let request = encode(&Call {
            op: "call",
            kind: self.kind.function_name(),
            filename: self.module.filename(),
            source: self.module.source(),
            code: self.module.code(),
            function: self.kind.function_name(),
            context: ContextWire {
                invocation_id: &ctx.invocation_id,
                agent_name: &ctx.agent_name,
                session_id: &ctx.session_id,
                state: ctx.variables(),
                user_content: ctx.user_content.as_ref(),
                function_call_id,
            },
            args: None,
            llm_request,
            llm_response,
            tool,
            tool_args,
            tool_response,
        })?;
        let env = CallEnv {
            host: self.host.clone(),
            call: HostCall {
                caller: format!("{}: {}", self.module.filename(), self.kind),
                file: self.module.filename().to_owned(),
                // Callbacks are not approved calls: they may read, never write.
                writes_approved: false,
                idempotency_key: None,
                context: ctx.clone(),
            },
            recorded: None,
        };
        let output = self.sandbox.run_blocking(request, env)?;
        let answer = Answer::read(&output)?;
        if !output.stdout.is_empty() || !output.stderr.is_empty() {
            self.reporter.report(Report {
                file: self.module.filename().to_owned(),
                function: self.kind.to_string(),
                error: None,
                line: None,
                stdout: output.stdout,
                stderr: output.stderr,
            });
        }
        Ok(answer)
    }

    fn apply(ctx: &mut CallbackContext, delta: StateMap) {
        for (key, value) in delta {
            ctx.set_variable(key, value);
        }
    }

    /// Reads a return value; one that is not a `T` is the callback's failure.
    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        value: Value,
    ) -> Result<Option<T>, SandboxError> {
        if value.is_null() {
            return Ok(None);
        }
        agent::json::from_value(value)
            .map(Some)
            .map_err(|e| SandboxError::Protocol(format!("{} returned {e}", self.kind)))
    }

    /// Runs `attempt`; a failure is reported, and then either counts as "no value" (`after_*`
    /// kinds) or becomes `blocked(what went wrong)` (`before_*` kinds: a guard that fails must
    /// not let its step through unchecked).
    fn guarded<T>(
        &self,
        attempt: impl FnOnce() -> Result<Option<T>, SandboxError>,
        blocked: impl FnOnce(String) -> T,
    ) -> Option<T> {
        match attempt() {
            Ok(value) => value,
            Err(error) => {
                self.reporter.report(Report::failure(
                    self.module.filename(),
                    self.kind.function_name(),
                    &error,
                ));
                self.is_guard()
                    .then(|| blocked(self.blocked_message(&error)))
            }
        }
    }

    fn is_guard(&self) -> bool {
        matches!(
            self.kind,
            CallbackKind::BeforeAgent | CallbackKind::BeforeModel | CallbackKind::BeforeTool
        )
    }

    /// What the user (and, for a tool, the model) is told when a guard failed.
    fn blocked_message(&self, error: &SandboxError) -> String {
        let step = match self.kind {
            CallbackKind::BeforeTool => "the tool was not run",
            CallbackKind::BeforeModel => "the model was not called",
            _ => "this turn was stopped",
        };
        format!(
            "The Python {} in {} failed, so {step}. Fix the file (Settings → Assistant) and try again.\n{}",
            self.kind,
            self.module.filename(),
            error.detail()
        )
    }

    fn as_content(text: String) -> Content {
        Content::model_text(text)
    }

    /// `before_agent_callback` / `after_agent_callback`.
    pub fn run_agent(&self, ctx: &mut CallbackContext) -> Option<Content> {
        self.guarded(
            || {
                let answer = self.call(ctx, Input::Agent)?;
                let content = self.parse::<Content>(answer.value)?;
                Self::apply(ctx, answer.state_delta);
                Ok(content)
            },
            Self::as_content,
        )
    }

    /// `before_model_callback`: may edit `request`; a response replaces the model call.
    pub fn run_before_model(
        &self,
        ctx: &mut CallbackContext,
        request: &mut LlmRequest,
    ) -> Option<LlmResponse> {
        self.guarded(
            || {
                let answer = self.call(ctx, Input::BeforeModel(request))?;
                let response = self.parse::<LlmResponse>(answer.value)?;
                let edited = match answer.llm_request {
                    Some(edited) => self.parse::<LlmRequest>(edited)?,
                    None => None,
                };
                Self::apply(ctx, answer.state_delta);
                if let Some(edited) = edited {
                    *request = edited;
                }
                Ok(response)
            },
            |text| LlmResponse::from_parts(vec![Part::from_text(text)]),
        )
    }

    /// `after_model_callback`: a response replaces what the model said.
    pub fn run_after_model(
        &self,
        ctx: &mut CallbackContext,
        response: &LlmResponse,
    ) -> Option<LlmResponse> {
        self.guarded(
            || {
                let answer = self.call(ctx, Input::AfterModel(response))?;
                let replacement = self.parse::<LlmResponse>(answer.value)?;
                Self::apply(ctx, answer.state_delta);
                Ok(replacement)
            },
            |text| LlmResponse::from_parts(vec![Part::from_text(text)]),
        )
    }

    /// `before_tool_callback`: may edit `args`; a value replaces the tool's result.
    pub fn run_before_tool(
        &self,
        ctx: &mut ToolContext,
        tool: &str,
        args: &mut Map<String, Value>,
    ) -> Option<ToolReturn> {
        self.guarded(
            || {
                let call_id = ctx.function_call_id.clone();
                let answer = self.call(
                    ctx,
                    Input::Tool {
                        name: tool,
                        args,
                        response: None,
                        function_call_id: &call_id,
                    },
                )?;
                Self::apply(ctx, answer.state_delta);
                if let Some(edited) = answer.tool_args {
                    *args = edited;
                }
                Ok(self.tool_value(answer.value))
            },
            |text| {
                ToolResult::new(ToolOutcome::Blocked)
                    .with_content(text)
                    .into()
            },
        )
    }

    /// `after_tool_callback`: a value replaces the tool's result.
    pub fn run_after_tool(
        &self,
        ctx: &mut ToolContext,
        tool: &str,
        args: &Map<String, Value>,
        result: &ToolReturn,
    ) -> Option<ToolReturn> {
        self.guarded(
            || {
                let call_id = ctx.function_call_id.clone();
                let response = match result {
                    ToolReturn::Nothing => Value::Null,
                    ToolReturn::Value(value) => value.clone(),
                    ToolReturn::Result(result) => serde_json::to_value(result)
                        .map_err(|e| SandboxError::Protocol(e.to_string()))?,
                };
                let answer = self.call(
                    ctx,
                    Input::Tool {
                        name: tool,
                        args,
                        response: Some(response),
                        function_call_id: &call_id,
                    },
                )?;
                Self::apply(ctx, answer.state_delta);
                Ok(self.tool_value(answer.value))
            },
            ToolReturn::from,
        )
    }

    /// A tool callback's value as the tool's result, cut to the size limit as a tool's is.
    fn tool_value(&self, value: Value) -> Option<ToolReturn> {
        if value.is_null() {
            return None;
        }
        let (value, _) = crate::tool::cap_value(value, self.sandbox.limits().value_bytes);
        Some(ToolReturn::from(value))
    }

    /// Adds this callback to an agent, after the callbacks of its kind already there. Tool
    /// callbacks learn the descriptions of the tools the builder has so far, unless told them.
    pub fn add_to(self, builder: LlmAgentBuilder) -> LlmAgentBuilder {
        let mut cb = self;
        if cb.descriptions.is_empty() {
            cb.descriptions = Arc::new(descriptions_of(&builder));
        }
        match cb.kind {
            CallbackKind::BeforeAgent => builder.before_agent(move |ctx| cb.run_agent(ctx)),
            CallbackKind::AfterAgent => builder.after_agent(move |ctx| cb.run_agent(ctx)),
            CallbackKind::BeforeModel => {
                builder.before_model(move |ctx, request| cb.run_before_model(ctx, request))
            }
            CallbackKind::AfterModel => {
                builder.after_model(move |ctx, response| cb.run_after_model(ctx, response))
            }
            CallbackKind::BeforeTool => {
                builder.before_tool(move |ctx, tool, args| cb.run_before_tool(ctx, tool, args))
            }
            CallbackKind::AfterTool => builder.after_tool(move |ctx, tool, args, result| {
                cb.run_after_tool(ctx, tool, args, result)
            }),
        }
    }
}

/// What each tool of `builder` is for, by name.
pub(crate) fn descriptions_of(builder: &LlmAgentBuilder) -> HashMap<String, String> {
    builder
        .tools()
        .map(|t| (t.name().to_owned(), t.description().to_owned()))
        .collect()
}
