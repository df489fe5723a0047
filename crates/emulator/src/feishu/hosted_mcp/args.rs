//! Reading a tool's arguments, and the error a tool answers with:
//! `{"error": "[KIND:code] message\n💡 Suggestion: …", "log_id": …}`, the shape the lark-doc
//! skill documents. The kinds and numbers are the emulator's own except `VALIDATION:1005` (an
//! old-style `/doc/` document), taken from a real answer.

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use super::super::api::new_logid;

/// A tool's failure, answered as a result (not a JSON-RPC error), as the hosted server does.
#[derive(Debug, thiserror::Error)]
#[error("[{kind}:{code}] {message}")]
pub(super) struct ToolError {
    kind: &'static str,
    code: u32,
    message: String,
    suggestion: &'static str,
}

impl ToolError {
    pub(super) fn invalid(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: "VALIDATION",
            code: 1001,
            message: message.into(),
            suggestion: "Check the arguments against the tool's input schema.",
        }
    }

    /// An old-style `/doc/` document, which the hosted server turns away.
    pub(super) fn legacy_document() -> ToolError {
        ToolError {
            kind: "VALIDATION",
            code: 1005,
            message: "Unsupported document type: Legacy document".to_owned(),
            suggestion: "Only docx documents are supported.",
        }
    }

    pub(super) fn not_found(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: "NOT_FOUND",
            code: 2001,
            message: message.into(),
            suggestion: "Check the token or URL; the user may lack access to it.",
        }
    }

    pub(super) fn no_match(ambiguous: bool, found: usize) -> ToolError {
        let (code, message, suggestion) = if ambiguous {
            (
                3002,
                format!("the selection matches {found} places"),
                "Make the selection longer until it matches one place.",
            )
        } else {
            (
                3001,
                "the selection matches nothing".to_owned(),
                "Fetch the document and copy the selection from its Markdown.",
            )
        };
        ToolError {
            kind: "SELECTION",
            code,
            message,
            suggestion,
        }
    }

    /// The result's JSON.
    pub(super) fn body(&self) -> Value {
        json!({
            "error": format!("{self}\n💡 Suggestion: {}", self.suggestion),
            "log_id": new_logid(),
        })
    }
}

/// A string argument; absent and `null` are `None`.
pub(super) fn text<'a>(args: &'a JsonObject, name: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::invalid(format!("{name} must be a string"))),
    }
}

pub(super) fn required<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, ToolError> {
    text(args, name)?
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolError::invalid(format!("{name} is required")))
}

pub(super) fn integer(args: &JsonObject, name: &str, min: u64) -> Result<Option<usize>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|n| *n >= min)
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| ToolError::invalid(format!("{name} must be an integer ≥ {min}"))),
    }
}

/// A title: 1 to 800 characters.
pub(super) fn title(args: &JsonObject, name: &str) -> Result<Option<String>, ToolError> {
    match text(args, name)? {
        Some(t) if !(1..=800).contains(&t.chars().count()) => Err(ToolError::invalid(format!(
            "{name} must be 1 to 800 characters"
        ))),
        t => Ok(t.map(str::to_owned)),
    }
}

/// A token given as itself or inside a Feishu URL, and the kind of object the URL names
/// (`docx`, `wiki`, `doc`…).
pub(super) fn token_of(reference: &str) -> (Option<String>, String) {
    let reference = reference.trim();
    if let Ok(url) = url::Url::parse(reference)
        && let Some(segments) = url.path_segments()
    {
        let segments: Vec<&str> = segments.filter(|s| !s.is_empty()).collect();
        if let [.., kind, token] = segments.as_slice() {
            return (Some((*kind).to_owned()), (*token).to_owned());
        }
    }
    (None, reference.to_owned())
}
