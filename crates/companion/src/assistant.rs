//! The agent the user shapes (Settings → Assistant): its instruction, which built-in tools it
//! may use, and the user's Python files with their allowed hosts. Every change rebuilds the
//! agent for the next turn; sessions and pending approvals stay as they are.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agent::{
    CallbackContext, Content, LlmAgent, LlmRequest, LlmResponse, StateMap, ToolContext, ToolReturn,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::agents::Agents;
use crate::compose::SYSTEM_INSTRUCTION;
use crate::context::Context;
use crate::error::CompanionError;
use crate::feature::{Feature, WeakFeature};
use crate::mcp::McpServers;
use crate::python::PythonTools;
use crate::python::TEMPLATE;
use crate::python::host::AppHost;
use crate::python::view::{
    AssistantInput, AssistantView, BuiltinToolView, CallbackTryView, PythonFileView, PythonRunView,
};
pub use crate::settings::assistant::{AssistantSettings, PythonFileSettings};
use crate::text::Text;
use crate::view::call::PreviewView;

/// The longest a file name may be, and what it may contain: a Python module's name.
fn check_file_name(name: &str) -> Result<(), CompanionError> {
    let stem = name.strip_suffix(".py").unwrap_or("");
    let ok = !stem.is_empty()
        && stem.len() <= 64
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !stem.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(CompanionError::Other(format!(
            "“{name}” is not a usable file name: use letters, digits and _ (not first), ending in .py, like notes.py \
             （文件名只能用字母、数字和下划线，以 .py 结尾，如 notes.py）"
        )))
    }
}

/// How long the editor's Run waits for the sandbox to finish preparing.
const SANDBOX_WAIT: Duration = Duration::from_secs(60);

/// What the assistant keeps: the user's Python (its files and what they reach outside the
/// sandbox), and what the agent is composed with besides (the MCP servers' tools, and the
/// connected agents, given those tools too).
pub(crate) struct AssistantState {
    python: Arc<PythonTools>,
    host: Arc<AppHost>,
    mcp: Arc<McpServers>,
    agents: Agents,
}

/// The assistant as a feature (see [`crate::feature`]). The app keeps one.
pub(crate) type Assistant = Feature<AssistantState>;
/// [`Assistant`] that does not keep the app alive (the folder's watcher, rebuilds).
pub(crate) type WeakAssistant = WeakFeature<AssistantState>;

impl Assistant {
    pub(crate) fn open(
        ctx: Context,
        python: Arc<PythonTools>,
        host: Arc<AppHost>,
        mcp: Arc<McpServers>,
        agents: Agents,
    ) -> Assistant {
        Feature::new(
            ctx,
            AssistantState {
                python,
                host,
                mcp,
                agents,
            },
        )
    }

    /// The user's Python files and sandbox.
    pub(crate) fn python(&self) -> &Arc<PythonTools> {
        &self.state().python
    }

    /// What that Python reaches outside the sandbox; re-attached to each new runtime.
    pub(crate) fn host(&self) -> &Arc<AppHost> {
        &self.state().host
    }

    fn python_host(&self) -> Arc<dyn pysandbox::Host> {
        self.state().host.clone()
    }

    pub(crate) fn mcp(&self) -> &Arc<McpServers> {
        &self.state().mcp
    }

    pub(crate) fn agents(&self) -> &Agents {
        &self.state().agents
    }
}

impl Assistant {
    /// The assistant's settings page.
    pub fn assistant(&self) -> AssistantView {
        let settings = self.settings().assistant;
        let disabled: HashSet<&String> = settings.disabled_tools.iter().collect();
        let builtin_tools = self
            .runtime()
            .builtin
            .iter()
            .map(|t| BuiltinToolView {
                name: t.name().to_owned(),
                title: crate::labels::tool_title(t.name()),
                writes: t.requires_approval(&Map::new()),
                enabled: !disabled.contains(&t.name().to_owned()),
            })
            .collect();
        AssistantView {
            instruction: settings
                .instruction
                .unwrap_or_else(|| SYSTEM_INSTRUCTION.to_owned()),
            default_instruction: SYSTEM_INSTRUCTION.to_owned(),
            builtin_tools,
            sandbox: self.python().sandbox_view(),
            folder: self.python().dir().display().to_string(),
            files: self.python().file_views(),
        }
    }

    /// Saves the instruction and the built-in tools; the next turn uses them.
    pub fn save_assistant(&self, input: AssistantInput) -> Result<AssistantView, CompanionError> {
        let mut settings = self.settings();
        let known: HashSet<String> = self
            .runtime()
            .builtin
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        if let Some(unknown) = input.disabled_tools.iter().find(|t| !known.contains(*t)) {
            return Err(CompanionError::Other(format!(
                "there is no built-in tool named {unknown}（没有名为 {unknown} 的内置工具）"
            )));
        }
        let instruction = input.instruction.trim();
        settings.assistant.instruction = (!instruction.is_empty()
            && instruction != SYSTEM_INSTRUCTION)
            .then(|| instruction.to_owned());
        settings.assistant.disabled_tools = input.disabled_tools;
        self.update_settings(settings)?;
        self.apply_agent()?;
        Ok(self.assistant())
    }

    /// A file's source.
    pub fn python_source(&self, name: &str) -> Result<String, CompanionError> {
        check_file_name(name)?;
        std::fs::read_to_string(self.python().dir().join(name)).map_err(|e| {
            CompanionError::Other(format!("cannot read {name}（无法读取 {name}）: {e}"))
        })
    }

    /// Saves a file (creating it), loads the folder again and rebuilds the agent; answers the
    /// file's status, so the editor shows its error at once.
    pub async fn save_python_file(
        &self,
        name: &str,
        source: &str,
    ) -> Result<PythonFileView, CompanionError> {
        check_file_name(name)?;
        let path = self.python().dir().join(name);
        // Written whole then renamed, so the watcher never loads half a file.
        let tmp = self.python().dir().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, source)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CompanionError::Other(format!("cannot save {name}（无法保存）: {e}")))?;
        self.reload_python().await?;
        self.python_file(name)
    }

    /// Creates a file from the template; refuses to overwrite one.
    pub async fn create_python_file(&self, name: &str) -> Result<PythonFileView, CompanionError> {
        check_file_name(name)?;
        if self.python().dir().join(name).exists() {
            return Err(CompanionError::Other(format!(
                "{name} exists already（{name} 已存在）"
            )));
        }
        self.save_python_file(name, TEMPLATE).await
    }

    /// Deletes a file.
    pub async fn delete_python_file(&self, name: &str) -> Result<(), CompanionError> {
        check_file_name(name)?;
        std::fs::remove_file(self.python().dir().join(name))
            .map_err(|e| CompanionError::Other(format!("cannot delete {name}: {e}")))?;
        self.reload_python().await
    }

    /// Sets what a file may reach.
    pub fn set_python_file_settings(
        &self,
        name: &str,
        file: PythonFileSettings,
    ) -> Result<PythonFileView, CompanionError> {
        check_file_name(name)?;
        let mut hosts = Vec::new();
        for host in &file.allowed_hosts {
            let host = host.trim().to_ascii_lowercase();
            if host.is_empty() {
                continue;
            }
            let bare = host.strip_prefix("*.").unwrap_or(&host);
            let valid = bare.contains('.') || bare == "localhost";
            if !valid || url::Host::parse(bare).is_err() {
                return Err(CompanionError::Other(format!(
                    "“{host}” is not a host name: write it like api.example.com or *.example.com \
                     （请填写主机名，如 api.example.com）"
                )));
            }
            hosts.push(host);
        }
        let file = PythonFileSettings {
            allowed_hosts: hosts,
            feishu_api: file.feishu_api,
        };
        let mut settings = self.settings();
        settings
            .assistant
            .python_files
            .insert(name.to_owned(), file);
        self.update_settings(settings)?;
        self.sync_python_file_settings();
        self.python_file(name)
    }

    /// One file's status.
    pub fn python_file(&self, name: &str) -> Result<PythonFileView, CompanionError> {
        self.python()
            .file_views()
            .into_iter()
            .find(|f| f.name == name)
            .ok_or_else(|| CompanionError::Other(format!("no file named {name}（没有 {name}）")))
    }

    /// The editor's template for a new file.
    pub fn python_template(&self) -> &'static str {
        TEMPLATE
    }

    /// Loads every Python file again and rebuilds the agent. The folder's first file starts the
    /// sandbox, and the load waits for it (a sandbox still not ready after the wait loads the
    /// files itself when it is).
    pub async fn reload_python(&self) -> Result<(), CompanionError> {
        // Looking for files reads them all, so only a sandbox not yet up has them looked for.
        let up = matches!(
            self.python().sandbox_state(),
            crate::python::SandboxState::Ready(_) | crate::python::SandboxState::Failed(_)
        );
        if !up && self.python().has_files() {
            self.settle_sandbox().await;
        }
        let builtin: HashSet<String> = self
            .runtime()
            .builtin
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        self.python().reload(self.python_host(), &builtin).await;
        self.apply_agent()
    }

    /// Copies the per-file settings where the HTTP host reads them.
    pub(crate) fn sync_python_file_settings(&self) {
        *self
            .python()
            .files
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            self.settings().assistant.python_files;
    }

    /// The agent as the user shaped it, for the runtime in use now.
    pub(crate) fn build_agent(&self) -> Result<LlmAgent, CompanionError> {
        let runtime = self.runtime();
        crate::compose::build_agent(
            &self.settings().assistant,
            runtime.model.clone(),
            &runtime.builtin,
            &self.python().extensions(),
            &self.mcp().tools(),
        )
    }

    /// Rebuilds the agent; the next turn uses it (sessions and waiting approvals stay).
    pub(crate) fn apply_agent(&self) -> Result<(), CompanionError> {
        let agent = self.build_agent()?;
        self.engine().set_agent(agent)?;
        // The MCP servers' tools may have changed, and agents may have been given them.
        self.agents().apply_connected_agents()
    }

    /// Watches the Python folder, reloading on every change, and prepares the sandbox in the
    /// background (never delaying the window) when the folder has files: its first load follows.
    /// An empty folder leaves the sandbox unstarted until a file appears or something runs.
    pub(crate) fn start_python(&self) {
        self.sync_python_file_settings();
        // Watched from the start, so a file written while the sandbox prepares is not missed:
        // a change before it is ready finds no sandbox and waits for the first load.
        let weak = self.downgrade();
        let watched = self.python().watch(move || {
            let Some(me) = weak.upgrade() else {
                return;
            };
            tokio::spawn(async move {
                if let Err(e) = me.reload_python().await {
                    tracing::warn!(error = %e, "reloading the Python files failed");
                }
            });
        });
        if let Err(e) = watched {
            tracing::warn!(error = %e, "the Python folder is not watched; changes load when saved in the app");
        }
        if self.python().has_files() {
            self.prepare_python();
        }
    }

    /// Starts preparing the sandbox on a thread of its own, unless it has been started already;
    /// the files are loaded once it is ready.
    fn prepare_python(&self) {
        if !self.python().begin_preparing() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let python = me.python().clone();
            // A thread of its own, not tokio's blocking pool: a runtime shutting down (the app
            // closing during the first compile) waits for its blocking tasks, not for this.
            let (done, prepared) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("python-sandbox".to_owned())
                .spawn(move || {
                    python.prepare_sandbox();
                    let _ = done.send(());
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start preparing the Python sandbox");
                me.python()
                    .set_failed(format!("cannot start its thread: {e}"));
                return;
            }
            // The app no longer needs it once the sender is gone without a word.
            if prepared.await.is_err() {
                return;
            }
            if let Err(e) = me.reload_python().await {
                tracing::warn!(error = %e, "loading the Python files failed");
            }
        });
    }

    /// Starts the sandbox if nothing has, and waits (at most [`SANDBOX_WAIT`]) until it is
    /// ready or has failed; what it came to.
    async fn settle_sandbox(&self) -> crate::python::SandboxState {
        use crate::python::SandboxState;
        self.prepare_python();
        let started = std::time::Instant::now();
        loop {
            match self.python().sandbox_state() {
                SandboxState::Idle | SandboxState::Preparing(_)
                    if started.elapsed() <= SANDBOX_WAIT =>
                {
                    // From the shipped compiled copy it is ready in a few hundred milliseconds.
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                state => return state,
            }
        }
    }

    async fn ready_sandbox(&self) -> Result<(), CompanionError> {
        use crate::python::SandboxState;
        match self.settle_sandbox().await {
            SandboxState::Ready(_) => Ok(()),
            SandboxState::Failed(message) => Err(CompanionError::Other(format!(
                "the Python sandbox cannot start（Python 沙箱无法启动）: {message}"
            ))),
            SandboxState::Idle | SandboxState::Preparing(_) => Err(CompanionError::Other(
                "the Python sandbox is still being prepared; try again in a moment（Python 沙箱仍在准备中，请稍后再试）"
                    .to_owned(),
            )),
        }
    }

    /// Runs a Python tool from the editor with arguments the user typed (a JSON object). A tool
    /// that needs approval answers its card first; run it again with `approved` to send.
    pub async fn run_python_tool(
        &self,
        file: &str,
        tool: &str,
        args: &str,
        approved: bool,
    ) -> Result<PythonRunView, CompanionError> {
        self.ready_sandbox().await?;
        let args: Map<String, Value> = if args.trim().is_empty() {
            Map::new()
        } else {
            serde_json::from_str(args).map_err(|e| {
                CompanionError::Other(format!(
                    "the arguments are not a JSON object（参数不是 JSON 对象）: {e}"
                ))
            })?
        };
        let extensions = self.python().extensions();
        let Some(found) = extensions
            .tools
            .iter()
            .find(|t| t.module().filename() == file && t.spec().name == tool)
        else {
            return Err(CompanionError::Other(format!(
                "{file} has no loaded tool {tool}（{file} 中没有已加载的工具 {tool}）"
            )));
        };
        if found.spec().needs_approval() && !approved {
            let preview = found.preview_call(&args).await;
            return Ok(PythonRunView {
                needs_approval: Some(preview.as_ref().map(PreviewView::from).unwrap_or_else(
                    || PreviewView {
                        summary: Text::new(format!("运行 {tool}"), format!("Run {tool}")),
                        risk: "normal".to_owned(),
                        fields: Vec::new(),
                        changes: Vec::new(),
                    },
                )),
                value: None,
                error: None,
                error_line: None,
                output: String::new(),
                elapsed_ms: 0,
                state_delta: String::new(),
            });
        }
        let mut ctx = ToolContext::new(
            CallbackContext::new(
                "editor",
                "assistant",
                "editor",
                StateMap::new(),
                Arc::default(),
            ),
            format!("editor-{}", uuid_like()),
        );
        let started = std::time::Instant::now();
        let result = found.invoke(args.clone(), &mut ctx).await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(match result {
            Ok(run) => PythonRunView {
                needs_approval: None,
                value: Some(serde_json::to_string_pretty(&run.value).unwrap_or_default()),
                error: None,
                error_line: None,
                output: format!("{}{}", run.stdout, run.stderr),
                elapsed_ms,
                state_delta: serde_json::to_string_pretty(ctx.state_delta()).unwrap_or_default(),
            },
            Err(error) => PythonRunView {
                needs_approval: None,
                value: None,
                error_line: error.python().and_then(|e| e.line),
                error: Some(error.detail()),
                output: String::new(),
                elapsed_ms,
                state_delta: String::new(),
            },
        })
    }

    /// Tries a file's callback on a sample: a request asking about tomorrow (model kinds), a
    /// call of the first built-in tool (tool kinds), or the turn (agent kinds).
    pub async fn try_python_callback(
        &self,
        file: &str,
        kind: &str,
    ) -> Result<CallbackTryView, CompanionError> {
        self.ready_sandbox().await?;
        let extensions = self.python().extensions();
        let Some(callback) = extensions
            .callbacks
            .iter()
            .find(|c| c.module().filename() == file && c.kind().function_name() == kind)
            .cloned()
        else {
            return Err(CompanionError::Other(format!(
                "{file} defines no loaded {kind}（{file} 中没有已加载的 {kind}）"
            )));
        };
        let agent = self.build_agent()?;
        let instruction = agent.instruction.clone();
        let outcome = tokio::task::spawn_blocking(move || try_callback(&callback, &instruction))
            .await
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        Ok(outcome)
    }
}

/// A short unique suffix for ids made by the editor.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{nanos:x}")
}

fn pretty(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// Runs one callback on a sample (blocking: callbacks are the engine's synchronous hooks).
fn try_callback(callback: &pysandbox::PythonCallback, instruction: &str) -> CallbackTryView {
    use pysandbox::CallbackKind as K;
    let user = Content::user_text("明天我有什么安排？What is on tomorrow?");
    let mut ctx = CallbackContext::new(
        "editor",
        "assistant",
        "editor",
        StateMap::new(),
        Arc::default(),
    );
    ctx.user_content = Some(user.clone());
    let (input, edited, returned) = match callback.kind() {
        K::BeforeModel => {
            let mut request = LlmRequest {
                model: None,
                contents: vec![user].into(),
                config: Some(agent::GenerateContentConfig {
                    system_instruction: Some(Content::user_text(instruction)),
                    ..agent::GenerateContentConfig::default()
                }),
            };
            let input = pretty(&request);
            let returned = callback.run_before_model(&mut ctx, &mut request);
            (input, pretty(&request), pretty(&returned))
        }
        K::AfterModel => {
            let response = LlmResponse::from_parts(vec![agent::Part::from_text(
                "明天 10:00 有产品评审会。Tomorrow at 10:00: product review.",
            )]);
            let returned = callback.run_after_model(&mut ctx, &response);
            (pretty(&response), pretty(&response), pretty(&returned))
        }
        K::BeforeTool | K::AfterTool => {
            let mut tctx = ToolContext::new(ctx.clone(), "sample-call");
            let mut args = Map::new();
            args.insert("query".to_owned(), Value::from("产品评审"));
            let input = pretty(&args);
            let returned = if callback.kind() == K::BeforeTool {
                callback.run_before_tool(&mut tctx, "search_docs", &mut args)
            } else {
                let result = ToolReturn::from(serde_json::json!({"docs": ["产品评审纪要"]}));
                callback.run_after_tool(&mut tctx, "search_docs", &args, &result)
            };
            ctx = tctx.into_callback_context();
            (
                input,
                pretty(&args),
                pretty(&returned.map(|r| format!("{r:?}"))),
            )
        }
        K::BeforeAgent | K::AfterAgent => {
            let returned = callback.run_agent(&mut ctx);
            (pretty(&user), pretty(&user), pretty(&returned))
        }
    };
    CallbackTryView {
        input,
        edited,
        returned,
        state_delta: pretty(ctx.state_delta()),
        error: None,
    }
}
