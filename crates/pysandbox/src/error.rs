//! What can go wrong: in the user's Python ([`PythonError`], with its traceback and line), in the
//! sandbox around it ([`SandboxError`]: a deadline, the memory cap, a trap), or in setting the
//! sandbox up.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// An exception raised by user code (or a `SyntaxError` in it), as Python reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonError {
    /// The exception's class name, such as `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// `str(exception)`.
    #[serde(default)]
    pub message: String,
    /// The formatted traceback, frames of the user's file only, ending with the exception line.
    #[serde(default)]
    pub traceback: String,
    /// The file it happened in.
    #[serde(default)]
    pub filename: String,
    /// The line of the user's file where it was raised (for a `SyntaxError`, the bad line).
    #[serde(default)]
    pub line: Option<u32>,
}

impl fmt::Display for PythonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}, line {line}: ", self.filename)?,
            None => write!(f, "{}: ", self.filename)?,
        }
        write!(f, "{}", self.type_name)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for PythonError {}

/// A Python call that did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The user's code raised an exception (or does not compile).
    #[error("{0}")]
    Python(PythonError),
    /// The call ran past its wall-clock deadline and was stopped.
    #[error("{}", deadline_message(*.limit, .during.as_deref()))]
    Deadline {
        /// The deadline.
        limit: Duration,
        /// What the code was doing when it was stopped, when known
        /// (`time.sleep(60) would outlast it`).
        during: Option<String>,
    },
    /// The code needed more memory than the cap and the interpreter could not recover with a
    /// `MemoryError`.
    #[error("the Python code was stopped: it needed more than its {} MiB memory limit", .limit_bytes / (1024 * 1024))]
    Memory {
        /// The cap.
        limit_bytes: usize,
    },
    /// The code called `sys.exit()` / `os._exit()`.
    #[error("the Python code exited with status {0}")]
    Exit(i32),
    /// The WebAssembly code trapped (a stack overflow, say).
    #[error("the Python runtime stopped: {0}")]
    Trap(String),
    /// The answer from the guest was not what the protocol says: a bug of this crate.
    #[error("the Python runtime answered something unexpected: {0}")]
    Protocol(String),
    /// The sandbox is shutting down.
    #[error("the Python sandbox is shut down")]
    ShutDown,
    /// A call through `tools.NAME` nested deeper than the sandbox allows (a tool calling itself).
    #[error(
        "the Python call was refused: tools called through tools.NAME may nest only {limit} deep (does a tool call itself?)"
    )]
    TooDeep {
        /// How deep calls may nest under the engine's.
        limit: u32,
    },
    /// Every instance slot is taken; nested calls leave some free for the engine's own calls.
    #[error("the Python call was refused: {running} Python calls are running already{}", if *.nested { " (calls made through tools.NAME may not take the last slots)" } else { "" })]
    Busy {
        /// How many were running.
        running: u32,
        /// Whether the refused call was a nested one.
        nested: bool,
    },
}

/// A Python exception names its file already; other failures need it said.
fn python_load_message(file: &str, error: &SandboxError) -> String {
    match error {
        SandboxError::Python(_) => error.to_string(),
        other => format!("{file}: {other}"),
    }
}

fn nothing_declared_message(file: &str, functions: &[String]) -> String {
    let stem = file.strip_suffix(".py").unwrap_or(file);
    let mut message = format!(
        "{file} declares no tools or callbacks: a tool is the function named like the file \
         (def {stem}(...)) or a function marked @tool; callbacks are named \
         before_model_callback, after_tool_callback and so on"
    );
    if !functions.is_empty() {
        message.push_str(&format!(
            ". It defines {}: put @tool on the line above each one the assistant should call",
            functions.join(", ")
        ));
    }
    message
}

fn deadline_message(limit: Duration, during: Option<&str>) -> String {
    let limit = if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} ms", limit.as_millis())
    };
    match during {
        Some(during) => format!("the Python code was stopped at its {limit} deadline: {during}"),
        None => format!("the Python code was stopped: it ran past its {limit} deadline"),
    }
}

impl SandboxError {
    /// The Python exception, when the user's code raised one.
    pub fn python(&self) -> Option<&PythonError> {
        match self {
            SandboxError::Python(e) => Some(e),
            _ => None,
        }
    }

    /// The text shown to the model and the user: the traceback for a Python exception (it names
    /// the file and line), the reason otherwise.
    pub fn detail(&self) -> String {
        match self {
            SandboxError::Python(e) if !e.traceback.is_empty() => e.traceback.trim_end().to_owned(),
            other => other.to_string(),
        }
    }
}

/// The sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The component file cannot be read.
    #[error("cannot read the Python component {path}: {source}")]
    ReadComponent {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A compiled copy could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// wasmtime refused the configuration, the component or the linking.
    #[error("cannot prepare the Python component: {0}")]
    Wasmtime(String),
    /// The worker threads could not be started.
    #[error("cannot start the Python sandbox's threads: {0}")]
    Threads(std::io::Error),
}

/// A file of the extensions folder that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Running the file's top level failed (a syntax error, an exception, a deadline).
    #[error("{}", python_load_message(.file, .error))]
    Python {
        /// The file name.
        file: String,
        /// What happened.
        error: SandboxError,
    },
    /// Two files declare a tool of the same name.
    #[error("{file}: a tool named {tool} is already defined in {first}")]
    DuplicateTool {
        /// The later file.
        file: String,
        /// The tool's name.
        tool: String,
        /// The file that defined it first.
        first: String,
    },
    /// The file loads but declares no tool and no callback, so it adds nothing to the agent.
    #[error("{}", nothing_declared_message(.file, .functions))]
    NothingDeclared {
        /// The file name.
        file: String,
        /// Its plain functions, any of which the user may have meant as a tool.
        functions: Vec<String>,
    },
    /// A file of Google's layout whose folder declares it wrongly: a tool JSON that does not
    /// parse or names no usable tool, a callback the agent's JSON does not list, and so on.
    #[error("{file}: {message}")]
    Declaration {
        /// The file (the JSON, or the code it is about), by its path in the folder.
        file: String,
        /// What is wrong, and what to do.
        message: String,
    },
    /// A callback of an app's sub-agent: this app runs one agent, the root one, and in Google's
    /// runtime a sub-agent's callbacks run only while that agent has the conversation.
    #[error(
        "{file} is a callback of the sub-agent {agent}; this app runs only the root agent ({root}), so it is not loaded"
    )]
    SubAgent {
        /// The file, by its path in the folder.
        file: String,
        /// The agent it belongs to.
        agent: String,
        /// The app's root agent.
        root: String,
    },
    /// The folder cannot be listed.
    #[error("cannot list {path}: {source}")]
    ReadDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}
