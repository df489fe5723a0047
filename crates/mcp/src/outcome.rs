//! A server's answer as the engine's tool result. Text parts are joined; images and audio are
//! named, not passed on (the model's request would carry megabytes of base64); a structured
//! result is passed as it is. `isError` and every failure to get an answer become a failed
//! outcome whose words say which server and what happened, so the model and the card can tell
//! the user.

use agent::{ToolOutcome, ToolResult, ToolReturn};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::connection::CallError;

/// The engine's result for the server's answer.
pub fn from_result(result: CallToolResult) -> ToolReturn {
    let text = text_of(&result);
    if result.is_error == Some(true) {
        let words = if text.is_empty() {
            "the tool failed without saying why".to_owned()
        } else {
            text
        };
        return ToolResult::new(ToolOutcome::Failed)
            .with_content(words)
            .into();
    }
    match result.structured_content {
        Some(structured) if text.is_empty() => ToolReturn::Value(structured),
        Some(structured) => ToolReturn::Value(json!({"text": text, "structured": structured})),
        None => ToolReturn::Value(Value::String(text)),
    }
}

/// The engine's result for a call that got no answer from `server`.
pub fn from_error(server: &str, error: &CallError) -> ToolReturn {
    ToolResult::new(ToolOutcome::Failed)
        .with_content(format!("MCP server {server} {error}"))
        .into()
}

/// The answer's content in words.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        // Read as JSON: the content kinds grow with the protocol, and an unknown kind should
        // still say what it is.
        let Ok(block) = serde_json::to_value(block) else {
            continue;
        };
        let kind = block["type"].as_str().unwrap_or("");
        match kind {
            "text" => parts.push(block["text"].as_str().unwrap_or_default().to_owned()),
            "image" | "audio" => {
                let size = block["data"].as_str().map_or(0, |d| d.len() * 3 / 4);
                let mime = block["mimeType"].as_str().unwrap_or("?");
                parts.push(format!("[{kind} {mime}, {size} bytes]"));
            }
            "resource" => {
                let resource = &block["resource"];
                match resource["text"].as_str() {
                    Some(text) => parts.push(text.to_owned()),
                    None => parts.push(format!(
                        "[resource {}]",
                        resource["uri"].as_str().unwrap_or("?")
                    )),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource {} {}]",
                block["name"].as_str().unwrap_or(""),
                block["uri"].as_str().unwrap_or("?")
            )),
            other => parts.push(format!("[{other}]")),
        }
    }
    parts.join("\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_is_joined_and_media_named() {
        let r = result(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]}));
        assert_eq!(
            from_result(r),
            ToolReturn::Value(Value::String(
                "hello\n[image image/png, 3 bytes]\ninside\n[resource b file:///b]".into()
            ))
        );
    }

    #[test]
    fn structured_results_pass_as_they_are() {
        let r = result(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(from_result(r), ToolReturn::Value(json!({"sum": 3})));
    }

    #[test]
    fn errors_fail_with_the_servers_words() {
        let r =
            result(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
        let (text, is_error, _) = agent::coerce_tool_result(from_result(r));
        assert!(is_error);
        assert_eq!(text, "no such file");
        let (text, is_error, _) = agent::coerce_tool_result(from_error(
            "fs",
            &CallError::Timeout(std::time::Duration::from_secs(5)),
        ));
        assert!(is_error);
        assert_eq!(
            text,
            "MCP server fs gave no answer within 5 s; the call was cancelled"
        );
    }
}
