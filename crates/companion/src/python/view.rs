//! What the assistant's settings page and the Python editor show.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::settings::assistant::PythonFileSettings;
use crate::text::Text;
use crate::view::call::PreviewView;

use super::FileStatus;

/// A tool as the model will see it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ToolDeclarationView {
    /// The name the model calls.
    pub name: String,
    /// The Python function.
    pub function: String,
    /// What the model reads it is for.
    pub description: String,
    /// The arguments' JSON Schema, pretty-printed, exactly as sent to the model.
    pub parameters: String,
    /// Whether every call waits for the user.
    pub needs_approval: bool,
    /// Why: declared so, or the file sends HTTP writes.
    pub approval_reason: Option<Text>,
    /// Whether the file words the approval card itself.
    pub has_preview: bool,
}

impl ToolDeclarationView {
    pub(crate) fn of(tool: &pysandbox::PythonTool) -> ToolDeclarationView {
        let spec = tool.spec();
        let approval_reason = if spec.requires_approval {
            Some(Text::new(
                "声明了 requires_approval=True",
                "declared requires_approval=True",
            ))
        } else if spec.may_write {
            Some(Text::new(
                "文件会发送写请求（POST/PUT/PATCH/DELETE）",
                "the file sends write requests (POST/PUT/PATCH/DELETE)",
            ))
        } else {
            None
        };
        ToolDeclarationView {
            name: spec.name.clone(),
            function: spec.function.clone(),
            description: spec.description.clone(),
            parameters: serde_json::to_string_pretty(&spec.parameters).unwrap_or_default(),
            needs_approval: spec.needs_approval(),
            approval_reason,
            has_preview: spec.preview.is_some(),
        }
    }
}

/// Something a file's code did while the assistant ran it: a failure, or printed output.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct PythonReportView {
    /// The tool or callback.
    pub function: String,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// The line, when known.
    pub line: Option<u32>,
    /// What it printed.
    pub output: String,
}

impl From<pysandbox::Report> for PythonReportView {
    fn from(r: pysandbox::Report) -> Self {
        let mut output = r.stdout;
        output.push_str(&r.stderr);
        PythonReportView {
            function: r.function,
            error: r.error,
            line: r.line,
            output,
        }
    }
}

/// One file of the `python/` folder.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct PythonFileView {
    /// Its name (`notes.py`).
    pub name: String,
    /// `loaded`, `error` or `waiting` (the sandbox is not ready yet).
    pub status: String,
    /// Its tools, as the model sees them.
    pub tools: Vec<ToolDeclarationView>,
    /// The callbacks it defines.
    pub callbacks: Vec<String>,
    /// Why it did not load.
    pub error: Option<Text>,
    /// The line of the error.
    pub error_line: Option<u32>,
    /// The traceback, as Python wrote it.
    pub traceback: String,
    /// The hosts it may reach, and whether it may call Feishu's Open API as the user.
    pub settings: PythonFileSettings,
    /// What its code did lately.
    pub reports: Vec<PythonReportView>,
}

impl PythonFileView {
    pub(crate) fn new(
        name: &str,
        status: Option<&FileStatus>,
        waiting: bool,
        settings: PythonFileSettings,
        reports: Vec<PythonReportView>,
    ) -> PythonFileView {
        let status = status.cloned().unwrap_or_default();
        let (state, error, error_line, traceback) = match (&status.error, waiting) {
            (Some(failure), _) => (
                "error",
                Some(Text::new(failure.zh.clone(), failure.en.clone())),
                failure.line,
                failure.traceback.clone(),
            ),
            (None, true) => ("waiting", None, None, String::new()),
            (None, false) => ("loaded", None, None, String::new()),
        };
        PythonFileView {
            name: name.to_owned(),
            status: state.to_owned(),
            tools: status.tools,
            callbacks: status.callbacks,
            error,
            error_line,
            traceback,
            settings,
            reports,
        }
    }
}

/// Where the Python sandbox stands.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SandboxStateView {
    /// Not started: there is no Python file yet. The first one starts it.
    Idle,
    /// Being prepared (compiled the first time, read from the cache after).
    Preparing {
        /// For how long so far.
        #[ts(type = "number")]
        elapsed_ms: u64,
    },
    /// Ready.
    Ready {
        /// How long compiling took, when it was compiled at this start.
        #[ts(type = "number | null")]
        compiled_ms: Option<u64>,
    },
    /// It could not start.
    Failed {
        /// Why.
        message: String,
    },
}

/// The assistant's settings page: the instruction, the built-in tools, the Python files.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AssistantView {
    /// The instruction in use.
    pub instruction: String,
    /// The built-in instruction (what Reset restores).
    pub default_instruction: String,
    /// Every built-in tool, with whether the assistant may use it.
    pub builtin_tools: Vec<BuiltinToolView>,
    /// The Python sandbox.
    pub sandbox: SandboxStateView,
    /// The folder the files are in.
    pub folder: String,
    /// The files.
    pub files: Vec<PythonFileView>,
}

/// A built-in tool the user can turn off.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct BuiltinToolView {
    /// Its name.
    pub name: String,
    /// In words.
    pub title: Text,
    /// Whether its calls wait for approval.
    pub writes: bool,
    /// Whether the assistant may use it.
    pub enabled: bool,
}

/// The assistant's settings as the page saves them.
#[derive(Debug, Clone, PartialEq, Deserialize, TS)]
pub struct AssistantInput {
    /// The instruction; empty or equal to the built-in one means the built-in one.
    pub instruction: String,
    /// The built-in tools the assistant may not use.
    pub disabled_tools: Vec<String>,
}

/// What running a tool from the editor gave.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct PythonRunView {
    /// The tool writes and was not approved yet: here is its card. Run again approved.
    pub needs_approval: Option<PreviewView>,
    /// The return value, pretty-printed JSON.
    pub value: Option<String>,
    /// What went wrong.
    pub error: Option<String>,
    /// The line of the error.
    pub error_line: Option<u32>,
    /// What it printed (stdout then stderr).
    pub output: String,
    /// How long the call took.
    #[ts(type = "number")]
    pub elapsed_ms: u64,
    /// The variables it set (`state_delta`), pretty-printed JSON.
    pub state_delta: String,
}

/// What trying a callback on a sample request gave.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct CallbackTryView {
    /// The sample the callback was given (a request, a response or a tool call), as JSON.
    pub input: String,
    /// The input after the callback (its in-place edits), as JSON.
    pub edited: String,
    /// What it returned instead of the step (`null` for `None`), as JSON.
    pub returned: String,
    /// The variables it set.
    pub state_delta: String,
    /// What went wrong.
    pub error: Option<String>,
}
