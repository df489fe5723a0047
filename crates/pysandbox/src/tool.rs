//! A Python function as an agent tool: [`PythonTool`] implements [`agent::AgentTool`], with the
//! name, description and JSON Schema read from the function's signature and docstring, and the
//! approval flag and scopes from its `@tool(...)` declaration.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent::{
    AgentTool, EventActions, Localized, Preview, PreviewField, Risk, ToolContext, ToolOutcome,
    ToolResult, ToolReturn,
};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::error::SandboxError;
use crate::host::{Host, HostCall, HttpRequest};
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
        let function = self.spec.function.clone();
        self.call("tool", &function, args, ctx, None).await
    }

    /// Runs `function` of the file as `kind` (`tool` or `preview`) with `args`.
    async fn call(
        &self,
        kind: &str,
        function: &str,
        args: Map<String, Value>,
        ctx: &mut ToolContext,
        recorded: Option<Arc<Mutex<Vec<HttpRequest>>>>,
    ) -> Result<ToolRun, SandboxError> {
        let request = encode(&Call {
            op: "call",
            kind,
            filename: self.module.filename(),
            source: self.module.source(),
            code: self.module.code(),
            function,
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
                file: self.module.filename().to_owned(),
                // The engine runs a tool needing approval only once the user approved the
                // call (or a rule of theirs did); a preview never writes.
                writes_approved: kind == "tool" && self.spec.needs_approval(),
                idempotency_key: Some(ctx.idempotency_key.clone()),
                context: agent::CallbackContext::clone(ctx),
            },
            recorded,
        };
        let output = self.sandbox.run(request, env).await?;
        let mut answer = Answer::read(&output)?;
        let limit = self.sandbox.limits().value_bytes;
        let mut cut_note = None;
        if output.answer.len() > limit {
            let (value, cut) = cap_value(std::mem::take(&mut answer.value), limit);
            answer.value = value;
            cut_note = cut.map(|size| {
                format!("the return value was {size} bytes as JSON and was cut to {limit}")
            });
        }
        if kind == "tool" {
            for (key, value) in answer.state_delta {
                ctx.set_variable(key, value);
            }
            if let Some(actions) = answer.actions {
                merge_actions(&mut ctx.actions, actions);
            }
        }
        if !output.stdout.is_empty() || !output.stderr.is_empty() || cut_note.is_some() {
            self.reporter.report(Report {
                file: self.module.filename().to_owned(),
                function: format!("{kind} {}", self.spec.name),
                error: cut_note,
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

    /// The approval card's words for a call: the file's preview function's summary and fields
    /// when it has one, and the HTTP writes a dry run of the tool would send (method, URL, body)
    /// when its file may write. A preview sees no session state and sends nothing.
    pub async fn preview_call(&self, args: &Map<String, Value>) -> Option<Preview> {
        let empty = || {
            ToolContext::new(
                agent::CallbackContext::new("", "", "", agent::StateMap::new(), Arc::default()),
                "preview",
            )
        };
        let mut summary = None;
        let mut fields = Vec::new();
        if let Some(function) = &self.spec.preview {
            match self
                .call("preview", function, args.clone(), &mut empty(), None)
                .await
            {
                Ok(run) => {
                    let (text, more) = preview_words(run.value);
                    summary = text;
                    fields.extend(more);
                }
                Err(error) => self.reporter.report(Report::failure(
                    self.module.filename(),
                    &format!("preview {}", self.spec.name),
                    &error,
                )),
            }
        }
        let mut writes = Vec::new();
        if self.spec.may_write {
            let recorded = Arc::new(Mutex::new(Vec::new()));
            let function = self.spec.function.clone();
            // The dry run's own result does not matter (its writes were answered with a
            // stand-in); only what it would have sent does.
            let _ = self
                .call(
                    "tool",
                    &function,
                    args.clone(),
                    &mut empty(),
                    Some(recorded.clone()),
                )
                .await;
            writes = std::mem::take(&mut *recorded.lock().unwrap_or_else(PoisonError::into_inner));
        }
        for request in &writes {
            fields.push(PreviewField {
                label: Localized::new(
                    format!("{} 请求", request.method),
                    format!("{} request", request.method),
                ),
                value: http_words(request),
            });
        }
        fields.push(PreviewField {
            label: Localized::new("Python 代码", "Python code"),
            value: format!("{} · def {}", self.module.filename(), self.spec.function),
        });
        let summary = summary.map(|s| Localized::new(s.clone(), s)).unwrap_or_else(|| {
            let (file, name, n) = (self.module.filename(), &self.spec.name, writes.len());
            if n == 0 {
                Localized::new(
                    format!("运行 Python 工具 {name}（{file}）"),
                    format!("Run the Python tool {name} ({file})"),
                )
            } else {
                Localized::new(
                    format!("运行 Python 工具 {name}（{file}），它将发送 {n} 个写请求"),
                    format!(
                        "Run the Python tool {name} ({file}), which will send {n} write request{}",
                        if n == 1 { "" } else { "s" }
                    ),
                )
            }
        });
        Some(Preview {
            summary,
            risk: Risk::Normal,
            fields,
            changes: Vec::new(),
        })
    }
}

/// A preview function's value: a summary string, or `{"summary": ..., "fields": {label: value}}`.
fn preview_words(value: Value) -> (Option<String>, Vec<PreviewField>) {
    match value {
        Value::String(text) => (Some(text), Vec::new()),
        Value::Object(mut map) => {
            let summary = map
                .remove("summary")
                .and_then(|s| s.as_str().map(str::to_owned));
            let fields = match map.remove("fields") {
                Some(Value::Object(fields)) => fields
                    .into_iter()
                    .map(|(label, value)| PreviewField {
                        label: Localized::new(label.clone(), label),
                        value: match value {
                            Value::String(s) => s,
                            other => other.to_string(),
                        },
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (summary, fields)
        }
        Value::Null => (None, Vec::new()),
        other => (Some(other.to_string()), Vec::new()),
    }
}

/// How much of a request body a card shows.
const CARD_BODY_CHARS: usize = 2_000;

/// A request as a person reads it: the URL with its query, then the body, pretty-printed.
fn http_words(request: &HttpRequest) -> String {
    let mut url = request.url.clone();
    let mut query = Vec::new();
    for (key, value) in &request.params {
        match value {
            Value::Array(values) => query.extend(values.iter().map(|v| (key, text_of(v)))),
            other => query.push((key, text_of(other))),
        }
    }
    if !query.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        let pairs: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        url.push_str(&pairs.join("&"));
    }
    let body = if let Some(json) = &request.json {
        serde_json::to_string_pretty(json).unwrap_or_default()
    } else if let Some(form) = &request.form {
        form.iter()
            .map(|(k, v)| format!("{k}={}", text_of(v)))
            .collect::<Vec<_>>()
            .join("\n")
    } else if let Some(data) = &request.data {
        data.clone()
    } else if let Some(bytes) = &request.data_base64 {
        format!("({} bytes of binary data)", bytes.len() / 4 * 3)
    } else {
        String::new()
    };
    if body.is_empty() {
        return url;
    }
    let mut shown: String = body.chars().take(CARD_BODY_CHARS).collect();
    if shown.len() < body.len() {
        shown.push('…');
    }
    format!("{url}\n{shown}")
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Cuts a return value whose JSON is longer than `limit` bytes to a string of that many bytes
/// that says it was cut, as printed output is; returns the original size when it cut.
pub(crate) fn cap_value(value: Value, limit: usize) -> (Value, Option<usize>) {
    let text = match value {
        Value::String(text) => {
            // The JSON of a string is at least its length; measure it only when it may be over.
            if text.len() + 2 <= limit {
                return (Value::String(text), None);
            }
            text
        }
        other => {
            let text = other.to_string();
            if text.len() <= limit {
                return (other, None);
            }
            text
        }
    };
    let size = text.len();
    let mut end = limit.min(size);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let kept = format!(
        "{}\n[cut: the value was {size} bytes; only the first {end} are kept, the limit of what a \
         Python tool or callback returns]",
        &text[..end]
    );
    (Value::String(kept), Some(size))
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
        self.spec.needs_approval()
    }

    fn source(&self) -> Option<Value> {
        Some(serde_json::json!({
            "python_file": self.module.filename(),
            "function": self.spec.function,
        }))
    }

    async fn preview(&self, args: &Map<String, Value>) -> Option<Preview> {
        if self.spec.needs_approval() {
            self.preview_call(args).await
        } else {
            None
        }
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
