//! The built-in server: Feishu's hosted MCP server for Markdown documents (create, fetch, locate
//! and update a document), the one Feishu's own command-line tool uses, reached with the app's
//! own sign-in. It is always listed and needs no setup; its requests carry the signed-in user's
//! token (refreshed as any of the app's calls), and a missing sign-in or permission holds the
//! call behind the app's authorization card, which runs it again after the user signs in.
//! The app, not the server, says which of its tools only read.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent::ToolReturn;
use async_trait::async_trait;
use feishu::TokenManager;
use mcp::{Credentials, Resolved, ServerConfig, ToolInfo, TransportConfig};
use serde_json::json;

/// The built-in server's id; no server of the user's can take it.
pub(crate) const ID: &str = "feishu";

/// The header Feishu's hosted server reads the user's token from.
const TOKEN_HEADER: &str = "X-Lark-MCP-UAT";

/// Its tools that only read.
const READS: &[&str] = &["fetch-doc", "locate-doc"];

/// The least each tool needs, among the scopes the app may ask for.
fn scopes_of(tool: &str) -> Vec<String> {
    let scopes: &[&str] = match tool {
        "create-doc" => &["docx:document:create"],
        "update-doc" => &["docx:document:readonly", "docx:document:write_only"],
        _ => &["docx:document:readonly"],
    };
    scopes.iter().map(|s| (*s).to_owned()).collect()
}

/// The built-in server for the runtime's Feishu (the emulator's in demo mode).
pub(crate) fn server(endpoints: &feishu::Endpoints, tokens: Arc<TokenManager>) -> Resolved {
    Resolved {
        config: ServerConfig {
            id: ID.to_owned(),
            name: "飞书文档 · Feishu Docs".to_owned(),
            transport: TransportConfig::Http {
                url: endpoints.hosted_mcp_url().to_string(),
                headers: Vec::new(),
            },
            enabled: true,
            trusted: false,
            read_tools: READS.iter().map(|s| (*s).to_owned()).collect(),
            timeout_secs: 60,
        },
        env: BTreeMap::new(),
        headers: BTreeMap::new(),
        credentials: Some(Arc::new(FeishuToken { tokens })),
    }
}

/// The user's token as the hosted server wants it.
#[derive(Debug)]
struct FeishuToken {
    tokens: Arc<TokenManager>,
}

fn needs_sign_in(tool: &str, scopes: Vec<String>) -> ToolReturn {
    let scopes = if scopes.is_empty() {
        scopes_of(tool)
    } else {
        scopes
    };
    feishu::tools::needs_sign_in(scopes)
}

#[async_trait]
impl Credentials for FeishuToken {
    async fn headers(&self, tool: &str) -> Result<BTreeMap<String, String>, ToolReturn> {
        use secrecy::ExposeSecret as _;
        // Asked before the call, so a sign-in that lacks the tool's permission is completed
        // first instead of failing at the server.
        if !tool.is_empty() {
            let missing = self
                .tokens
                .missing_scopes(&scopes_of(tool))
                .await
                .unwrap_or_else(|_| scopes_of(tool));
            if !missing.is_empty() {
                return Err(needs_sign_in(tool, missing));
            }
        }
        match self.tokens.access_token().await {
            Ok(token) => Ok(BTreeMap::from([(
                TOKEN_HEADER.to_owned(),
                token.expose_secret().to_owned(),
            )])),
            Err(_) => Err(needs_sign_in(tool, Vec::new())),
        }
    }

    async fn on_refusal(&self, tool: &str, code: i64, message: &str) -> Option<ToolReturn> {
        match code {
            // The token is unknown, expired or revoked: sign in again.
            99_991_661 | 99_991_668 | 99_991_677 => Some(needs_sign_in(tool, Vec::new())),
            // A permission the user has not granted, named in the message.
            99_991_679 => {
                let named = named_scopes(message);
                let chosen = feishu::tools::choose_scopes(&named, &[]);
                Some(needs_sign_in(tool, chosen))
            }
            _ => None,
        }
    }
}

/// The scopes a Feishu message names in brackets: `… privileges: [a, b]`.
fn named_scopes(message: &str) -> Vec<String> {
    let Some(start) = message.find('[') else {
        return Vec::new();
    };
    let Some(len) = message[start..].find(']') else {
        return Vec::new();
    };
    message[start + 1..start + len]
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The server's tools as the app knows them before it first reached the server (they are
/// replaced by what the server lists once it is reached): enough for the model to call them,
/// and the call to ask for a sign-in.
pub(crate) fn known_tools() -> Vec<ToolInfo> {
    let tool = |name: &str, description: &str, schema: serde_json::Value, read: bool| ToolInfo {
        name: name.to_owned(),
        title: None,
        description: description.to_owned(),
        input_schema: schema,
        read_only_hint: Some(read),
        destructive_hint: Some(name == "update-doc"),
    };
    vec![
        tool(
            "create-doc",
            "Create a Feishu document from Markdown.",
            json!({"type": "object", "properties": {
                "markdown": {"type": "string"}, "title": {"type": "string"},
                "folder_token": {"type": "string"}}, "required": ["markdown"]}),
            false,
        ),
        tool(
            "fetch-doc",
            "Read a Feishu document as Markdown.",
            json!({"type": "object", "properties": {
                "doc_id": {"type": "string"}, "offset": {"type": "integer"},
                "limit": {"type": "integer"}}, "required": ["doc_id"]}),
            true,
        ),
        tool(
            "locate-doc",
            "Find where a piece of text sits in a Feishu document.",
            json!({"type": "object", "properties": {
                "doc_id": {"type": "string"}, "selection_with_ellipsis": {"type": "string"},
                "limit": {"type": "integer"}}, "required": ["doc_id", "selection_with_ellipsis"]}),
            true,
        ),
        tool(
            "update-doc",
            "Change a Feishu document with Markdown: append, overwrite, or replace, insert or delete at a selection.",
            json!({"type": "object", "properties": {
                "doc_id": {"type": "string"},
                "mode": {"type": "string", "enum": ["append", "overwrite", "replace_range", "replace_all", "insert_before", "insert_after", "delete_range"]},
                "markdown": {"type": "string"}, "selection_with_ellipsis": {"type": "string"},
                "selection_by_title": {"type": "string"}, "new_title": {"type": "string"}},
                "required": ["doc_id", "mode"]}),
            false,
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_scopes_a_message_names_are_read() {
        assert_eq!(
            named_scopes(
                "required one of these privileges: [docx:document:readonly, docx:document]"
            ),
            ["docx:document:readonly", "docx:document"]
        );
        assert!(named_scopes("no brackets").is_empty());
    }

    #[test]
    fn only_the_app_says_which_tools_read() {
        for tool in known_tools() {
            assert_eq!(
                READS.contains(&tool.name.as_str()),
                tool.read_only_hint == Some(true)
            );
        }
    }
}
