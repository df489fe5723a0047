//! A Python function as an agent tool: [`PythonTool`] implements [`agent::AgentTool`], with the
//! name, description and JSON Schema read from the function's signature and docstring, and the
//! approval flag and scopes from its `@tool(...)` declaration.

use std::sync::Arc;
use std::time::Duration;

use agent::{AgentTool, EventActions, ToolContext, ToolOutcome, ToolResult, ToolReturn};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::error::SandboxError;
use crate::host::{Host, HostCall};
use crate::module::PythonModule;
use crate::protocol::{Answer, Call, ContextWire, ToolSpec};
use crate::report::{Report, Reporter};
use crate::runtime::{CallEnv, Sandbox, encode};

/// What one successful call of a Python tool gave.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    /// The function's return value as JSON (`null` for `None`).
    pub value: Value,
    /// What it printed to stdout.
    pub stdout: String,
    /// What it printed to stderr.
    pub stderr: String,
    /// How long the call took, a fresh interpreter instance included.
    pub elapsed: Duration,
}

/// A tool implemented by a function of a user's Python file.
#[derive(Debug, Clone)]
pub struct PythonTool {
    module: Arc<PythonModule>,
    spec: ToolSpec,
    sandbox: Sandbox,
    host: Arc<dyn Host>,
    reporter: Reporter,
}

impl PythonTool {
    /// The tool `spec` of `module`, run in `sandbox` with `host` behind `tools.*` and
    /// `ces_requests.*`.
    pub fn new(
        module: Arc<PythonModule>,
        spec: ToolSpec,
        sandbox: Sandbox,
        host: Arc<dyn Host>,
        reporter: Reporter,
    ) -> Self {
        PythonTool {
            module,
            spec,
            sandbox,
            host,
            reporter,
        }
    }

    /// Every tool `module` declares.
    pub fn all(
        module: &Arc<PythonModule>,
        sandbox: &Sandbox,
        host: &Arc<dyn Host>,
        reporter: &Reporter,
    ) -> Vec<PythonTool> {
        module
            .tools()
            .iter()
            .map(|spec| {
                PythonTool::new(
                    module.clone(),
                    spec.clone(),
                    sandbox.clone(),
                    host.clone(),
                    reporter.clone(),
                )
            })
            .collect()
    }

    /// What the file declared for this tool.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The file it comes from.
    pub fn module(&self) -> &PythonModule {
        &self.module
    }

    /// Calls the function with `args`. The variables it changes are recorded in `ctx` (and so
    /// become the response event's `state_delta`), as are the actions it set on
    /// `tool_context.actions`; nothing is recorded when it fails.
    ///
    /// Writes (`ces_requests.post`, tools needing approval) are let through only for a tool
    /// declared `requires_approval`: the engine runs such a tool only after the user approved
    /// the call, so this method must be reached through the engine for those.
    pub async fn invoke(
        &self,
        args: Map<String, Value>,
        ctx: &mut ToolContext,
    ) -> Result<ToolRun, SandboxError> {
        let request = encode(&Call {
            op: "call",
            kind: "tool",
            filename: self.module.filename(),
            source: self.module.source(),
            code: self.module.code(),
            function: &self.spec.function,
            context: ContextWire {
                invocation_id: &ctx.invocation_id,
                agent_name: &ctx.agent_name,
                session_id: &ctx.session_id,
                state: ctx.variables(),
                user_content: ctx.user_content.as_ref(),
                function_call_id: Some(&ctx.function_call_id),
            },
            args: Some(&args),
            llm_request: None,
            llm_response: None,
            tool: None,
            tool_args: None,
            tool_response: None,
        })?;
        let env = CallEnv {
            host: self.host.clone(),
            call: HostCall {
                caller: format!("{}: tool {}", self.module.filename(), self.spec.name),
                writes_approved: self.spec.requires_approval,
                idempotency_key: Some(ctx.idempotency_key.clone()),
                context: agent::CallbackContext::clone(ctx),
            },
        };
        let output = self.sandbox.run(request, env).await?;
        let answer = Answer::read(&output)?;
        for (key, value) in answer.state_delta {
            ctx.set_variable(key, value);
        }
        if let Some(actions) = answer.actions {
            merge_actions(&mut ctx.actions, actions);
        }
        if !output.stdout.is_empty() || !output.stderr.is_empty() {
            self.reporter.report(Report {
                file: self.module.filename().to_owned(),
                function: format!("tool {}", self.spec.name),
                error: None,
                line: None,
                stdout: output.stdout.clone(),
                stderr: output.stderr.clone(),
            });
        }
        Ok(ToolRun {
            value: answer.value,
            stdout: output.stdout,
            stderr: output.stderr,
            elapsed: output.elapsed,
        })
    }
}

/// Adds what Python asked for to the actions the engine will put on the response event.
fn merge_actions(into: &mut EventActions, from: EventActions) {
    into.skip_summarization |= from.skip_summarization;
    into.escalate |= from.escalate;
    into.end_invocation |= from.end_invocation;
    if from.transfer_to_agent.is_some() {
        into.transfer_to_agent = from.transfer_to_agent;
    }
    into.artifact_delta.extend(from.artifact_delta);
    into.requested_auth_configs
        .extend(from.requested_auth_configs);
}

#[async_trait]
impl AgentTool for PythonTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }

    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        self.spec.requires_approval
    }

    fn scopes(&self) -> Vec<String> {
        self.spec.scopes.clone()
    }

    fn deduplicates(&self) -> bool {
        self.spec.deduplicates
    }

    /// A failure of the code (an exception, the deadline, the memory cap) answers `FAILED` with
    /// the traceback, so the model can say what went wrong, and is reported to the app.
    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn {
        match self.invoke(args, ctx).await {
            Ok(run) => ToolReturn::from(run.value),
            Err(error) => {
                self.reporter.report(Report::failure(
                    self.module.filename(),
                    &format!("tool {}", self.spec.name),
                    &error,
                ));
                ToolResult::new(ToolOutcome::Failed)
                    .with_content(format!(
                        "The Python tool {} failed.\n{}",
                        self.spec.name,
                        error.detail()
                    ))
                    .into()
            }
        }
    }
}
