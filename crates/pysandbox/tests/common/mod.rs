//! Helpers shared by the sandbox's tests: one sandbox per test process, and a quick way to run a
//! function of a snippet as a tool.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agent::{
    CallbackContext, Content, Engine, EngineConfig, Event, FunctionCall, LlmAgent, LlmResponse,
    Part, ScriptedModel, StateMap, ToolContext, TurnOutcome,
};
use pysandbox::{
    Host, Limits, NoHost, PythonExtensions, PythonModule, PythonTool, Report, Reporter, Sandbox,
    SandboxConfig, SandboxError, ToolRun,
};
use serde_json::{Map, Value};

/// The deadline of the tests' calls: short, so the hostile tests end quickly.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The tests' sandbox, shared within one test process.
pub fn sandbox() -> Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            Sandbox::new(SandboxConfig {
                limits: Limits {
                    deadline: DEADLINE,
                    ..Limits::default()
                },
                ..SandboxConfig::default()
            })
            .expect("the sandbox starts")
        })
        .clone()
}

/// Reports collected for a test to look at.
#[derive(Clone, Default)]
pub struct Reports(pub Arc<Mutex<Vec<Report>>>);

impl Reports {
    pub fn reporter(&self) -> Reporter {
        let reports = self.0.clone();
        Reporter::new(move |r| reports.lock().unwrap().push(r))
    }

    pub fn all(&self) -> Vec<Report> {
        self.0.lock().unwrap().clone()
    }
}

pub fn obj(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

/// A tool context over `state`.
pub fn tool_context(state: Value) -> ToolContext {
    let ctx = CallbackContext::new(
        "inv-1",
        "assistant",
        "session-1",
        obj(state),
        Arc::default(),
    );
    ToolContext::new(ctx, "call-1")
}

/// Loads `source` as `file` and returns its tool `name`.
pub async fn tool_of(file: &str, source: &str, name: &str, host: Arc<dyn Host>) -> PythonTool {
    let module = Arc::new(PythonModule::load(&sandbox(), file, source).await.unwrap());
    let spec = module
        .tools()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{file} declares no tool {name}: {:?}", module.tools()))
        .clone();
    PythonTool::new(module, spec, sandbox(), host, Reporter::default())
}

/// Runs `function` of `source` (declared a tool by `@tool`, or named like the file) with `args`.
pub async fn run_tool(
    source: &str,
    function: &str,
    args: Value,
    state: Value,
) -> (Result<ToolRun, SandboxError>, ToolContext) {
    let tool = tool_of(
        &format!("{function}.py"),
        source,
        function,
        Arc::new(NoHost),
    )
    .await;
    let mut ctx = tool_context(state);
    let result = tool.invoke(obj(args), &mut ctx).await;
    (result, ctx)
}

pub fn state_of(ctx: &ToolContext) -> StateMap {
    ctx.variables().clone()
}

pub fn say(text: &str) -> LlmResponse {
    LlmResponse::from_parts(vec![Part::from_text(text)])
}

pub fn call(name: &str, args: Value) -> LlmResponse {
    LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(name, obj(args)))])
}

/// An engine whose agent has the tools and callbacks of `files`, talking to a scripted model,
/// over an in-memory SQLite store.
pub struct EngineHarness {
    pub engine: Engine,
    pub store: Arc<store::Store>,
    pub model: Arc<ScriptedModel>,
    pub session: String,
    pub extensions: PythonExtensions,
    pub reports: Reports,
}

pub async fn engine_with(
    files: &[(&str, &str)],
    script: Vec<LlmResponse>,
    host: Arc<dyn Host>,
    state: Value,
) -> EngineHarness {
    let reports = Reports::default();
    let extensions = PythonExtensions::load_sources(
        &sandbox(),
        files
            .iter()
            .map(|(f, s)| ((*f).to_owned(), (*s).to_owned())),
        host,
        reports.reporter(),
    )
    .await;
    engine_over(extensions, reports, script, state)
}

/// An engine as [`engine_with`] makes, over extensions loaded already (reporting to `reports`).
pub fn engine_over(
    extensions: PythonExtensions,
    reports: Reports,
    script: Vec<LlmResponse>,
    state: Value,
) -> EngineHarness {
    let model = Arc::new(ScriptedModel::new(script));
    let builder = LlmAgent::builder("assistant", model.clone()).instruction("You help.");
    let agent = extensions.add_to(builder).build().unwrap();
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let engine = Engine::new(agent, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u1", &obj(state)).unwrap();
    EngineHarness {
        engine,
        store,
        model,
        session,
        extensions,
        reports,
    }
}

impl EngineHarness {
    pub async fn send(&self, text: &str) -> TurnOutcome {
        self.engine
            .send_message(&self.session, Content::user_text(text))
            .await
            .unwrap()
    }

    pub fn events(&self) -> Vec<Event> {
        self.store.load_session(&self.session).unwrap().events
    }

    /// The latest function responses the model was shown (those of its last step).
    pub fn last_responses(&self) -> Vec<Map<String, Value>> {
        let requests = self.model.requests();
        let last = requests.last().unwrap();
        last.contents
            .iter()
            .rev()
            .find(|c| c.function_responses().next().is_some())
            .map(|c| c.function_responses().map(|r| r.response.clone()).collect())
            .unwrap_or_default()
    }

    /// The session's state as stored: the fold of every event's delta.
    pub fn state(&self) -> StateMap {
        self.store.load_session(&self.session).unwrap().state
    }
}
