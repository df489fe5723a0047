//! The JSON the host and the guest (`python/guest.py`) exchange through `invoke`: a request to
//! describe a file or to call one of its functions, and the answer. Data model values travel in
//! the agent crate's serde shapes.

use agent::{Content, EventActions, LlmRequest, LlmResponse, StateMap, Tool};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{PythonError, SandboxError};
use crate::layout::Declared;
use crate::runtime::RunOutput;

/// Run a file's top level and list its tools and callbacks.
#[derive(Debug, Serialize)]
pub(crate) struct Describe<'a> {
    pub(crate) op: &'static str,
    pub(crate) filename: &'a str,
    pub(crate) source: &'a str,
    /// The tools its folder declares (Google's layout): then these are its tools, rather than
    /// the function named like the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<Vec<DeclaredToolWire<'a>>>,
    /// The callback kinds its folder says it implements: then only those, and one must be there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) callbacks: Option<Vec<&'static str>>,
}

/// A declared tool as the guest reads it.
#[derive(Debug, Serialize)]
pub(crate) struct DeclaredToolWire<'a> {
    pub(crate) name: &'a str,
    pub(crate) function: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<&'a str>,
    pub(crate) declared_in: &'a str,
}

impl<'a> Describe<'a> {
    pub(crate) fn new(filename: &'a str, source: &'a str, declared: &'a Declared) -> Self {
        let (tools, callbacks) = match declared {
            Declared::Standalone => (None, None),
            Declared::Tool(tool) => (
                Some(vec![DeclaredToolWire {
                    name: &tool.name,
                    function: &tool.function,
                    description: tool.description.as_deref(),
                    declared_in: &tool.declared_in,
                }]),
                Some(Vec::new()),
            ),
            Declared::Callback { kind, .. } => (Some(Vec::new()), Some(vec![kind.function_name()])),
        };
        Describe {
            op: "describe",
            filename,
            source,
            tools,
            callbacks,
        }
    }
}

/// The session as the called function sees it.
#[derive(Debug, Serialize)]
pub(crate) struct ContextWire<'a> {
    pub(crate) invocation_id: &'a str,
    pub(crate) agent_name: &'a str,
    pub(crate) session_id: &'a str,
    pub(crate) state: &'a StateMap,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_content: Option<&'a Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function_call_id: Option<&'a str>,
}

/// Run a file's top level, then call one of its functions.
#[derive(Debug, Serialize)]
pub(crate) struct Call<'a> {
    pub(crate) op: &'static str,
    /// `tool` or a callback kind (`before_model_callback`, …).
    pub(crate) kind: &'a str,
    pub(crate) filename: &'a str,
    pub(crate) source: &'a str,
    pub(crate) function: &'a str,
    /// The bytecode from [`Description::code`]; the source is still sent, for tracebacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<&'a str>,
    pub(crate) context: ContextWire<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) args: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) llm_request: Option<&'a LlmRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) llm_response: Option<&'a LlmResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool: Option<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_args: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_response: Option<Value>,
}

/// The guest's answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Answer {
    pub(crate) ok: bool,
    /// The function's return value, or the description of a file.
    #[serde(default)]
    pub(crate) value: Value,
    /// The variables the code changed (`null` = removed).
    #[serde(default)]
    pub(crate) state_delta: StateMap,
    /// A tool's `tool_context.actions` (without the state delta).
    #[serde(default)]
    pub(crate) actions: Option<EventActions>,
    /// `before_model_callback`: the request as the code left it, when it changed it.
    #[serde(default)]
    pub(crate) llm_request: Option<Value>,
    /// `before_tool_callback`: the arguments as the code left them, when it changed them.
    #[serde(default)]
    pub(crate) tool_args: Option<Map<String, Value>>,
    /// What went wrong, when `ok` is false.
    #[serde(default)]
    pub(crate) error: Option<PythonError>,
}

impl Answer {
    /// Reads the answer of a run: an exception in the user's code becomes
    /// [`SandboxError::Python`].
    pub(crate) fn read(output: &RunOutput) -> Result<Answer, SandboxError> {
        let answer: Answer = serde_json::from_str(&output.answer)
            .map_err(|e| SandboxError::Protocol(format!("{e}: {}", output.answer)))?;
        if answer.ok {
            return Ok(answer);
        }
        // Only the interpreter's own failure to raise MemoryError (a bare SystemError): a
        // MemoryError says what happened already, and any other error raised after the code
        // caught one stays that error.
        let out_of_memory = answer
            .error
            .as_ref()
            .is_some_and(|e| e.type_name == "SystemError");
        if let (Some(limit_bytes), true) = (output.memory_limit_hit, out_of_memory) {
            return Err(SandboxError::Memory { limit_bytes });
        }
        Err(SandboxError::Python(answer.error.unwrap_or_else(|| {
            PythonError {
                type_name: "Error".to_owned(),
                message: "the Python call failed without saying why".to_owned(),
                traceback: String::new(),
                filename: String::new(),
                line: None,
            }
        })))
    }
}

/// A tool a file declares, as the guest described it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// The Python function that implements it.
    pub function: String,
    /// What it does: the docstring's summary, or the declared description.
    pub description: String,
    /// The arguments' JSON Schema, from the function's signature.
    pub parameters: Value,
    /// Whether each call waits for the user's approval.
    #[serde(default)]
    pub requires_approval: bool,
    /// The Feishu scopes it needs.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Whether the service it writes to deduplicates by idempotency key.
    #[serde(default)]
    pub deduplicates: bool,
    /// Whether its file may send HTTP writes (it names `ces_requests` and a writing method):
    /// then every call waits for approval, as if declared `requires_approval`.
    #[serde(default)]
    pub may_write: bool,
    /// The function of the file that words its approval card (`preview=` or
    /// `preview_<function>`).
    #[serde(default)]
    pub preview: Option<String>,
}

impl ToolSpec {
    /// Whether each call waits for the user's approval: declared so, or its file may write.
    pub fn needs_approval(&self) -> bool {
        self.requires_approval || self.may_write
    }
}

/// What a file declares.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Description {
    #[serde(default)]
    pub(crate) tools: Vec<ToolSpec>,
    #[serde(default)]
    pub(crate) callbacks: Vec<String>,
    /// The file's other functions (helpers, or tools not marked as such).
    #[serde(default)]
    pub(crate) functions: Vec<String>,
    /// The file's bytecode (marshalled, base64), so calls need not compile the source again.
    #[serde(default)]
    pub(crate) code: Option<String>,
}
