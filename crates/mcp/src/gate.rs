//! What the approval gate makes of a server's tool. A server's annotations are hints from a party
//! the app does not control: a tool counts as a read only if the user marked its server trusted
//! and the tool says `readOnlyHint`, or the user marked that tool a read. Everything else waits
//! for approval like a built-in write, and its card says which server and tool, in the tool's
//! own words, with the arguments laid out and `destructiveHint` shown as a risk.

use agent::{Localized, Preview, PreviewField, Risk};
use serde_json::{Map, Value};

use crate::config::ServerConfig;

/// The longest description and argument value a card shows, in characters.
const SHOWN: usize = 400;

/// What the app knows of one tool of a server, from `tools/list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolInfo {
    /// The tool's name on its server.
    pub name: String,
    /// Its human-readable title, if it gave one.
    #[serde(default)]
    pub title: Option<String>,
    /// What it does, in the server's words.
    #[serde(default)]
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
    /// The server says the tool only reads.
    #[serde(default)]
    pub read_only_hint: Option<bool>,
    /// The server says the tool may destroy or overwrite.
    #[serde(default)]
    pub destructive_hint: Option<bool>,
}

impl ToolInfo {
    /// What a server's `tools/list` says of one tool.
    pub fn from_mcp(tool: &rmcp::model::Tool) -> ToolInfo {
        let hints = tool.annotations.as_ref();
        ToolInfo {
            name: tool.name.to_string(),
            title: tool
                .title
                .clone()
                .or_else(|| hints.and_then(|h| h.title.clone())),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: Value::Object((*tool.input_schema).clone()),
            read_only_hint: hints.and_then(|h| h.read_only_hint),
            destructive_hint: hints.and_then(|h| h.destructive_hint),
        }
    }

    /// The title, else the name.
    pub fn display_title(&self) -> &str {
        self.title
            .as_deref()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(&self.name)
    }
}

/// Whether a call of `tool` runs without the user's approval.
pub fn is_read(server: &ServerConfig, tool: &ToolInfo) -> bool {
    server.read_tools.iter().any(|t| t == &tool.name)
        || (server.trusted && tool.read_only_hint == Some(true))
}

/// The approval card's words for a call of `tool` with `args`.
pub fn preview(server: &ServerConfig, tool: &ToolInfo, args: &Map<String, Value>) -> Preview {
    let server_name = server.display_name();
    let title = tool.display_title();
    let destructive = tool.destructive_hint == Some(true);
    let mut fields = vec![
        PreviewField {
            label: Localized::new("MCP 服务器", "MCP server"),
            value: if server_name == server.id {
                server.id.clone()
            } else {
                format!("{server_name} ({})", server.id)
            },
        },
        PreviewField {
            label: Localized::new("工具", "Tool"),
            value: if title == tool.name {
                tool.name.clone()
            } else {
                format!("{title} ({})", tool.name)
            },
        },
    ];
    if !tool.description.trim().is_empty() {
        fields.push(PreviewField {
            label: Localized::new("服务器的说明", "The server's description"),
            value: shorten(tool.description.trim()),
        });
    }
    if destructive {
        fields.push(PreviewField {
            label: Localized::new("风险", "Risk"),
            value: "服务器声明此工具可能删除或覆盖数据 · The server says this tool may delete or overwrite data".to_owned(),
        });
    }
    for (key, value) in args {
        fields.push(PreviewField {
            label: Localized::new(key.clone(), key.clone()),
            value: readable(value),
        });
    }
    Preview {
        summary: Localized::new(
            format!("通过 MCP 服务器「{server_name}」调用「{title}」"),
            format!("Call “{title}” on the MCP server {server_name}"),
        ),
        risk: if destructive {
            Risk::High
        } else {
            Risk::Normal
        },
        fields,
        changes: Vec::new(),
    }
}

/// A value as a person reads it: text as it is, anything else as compact JSON; cut when long.
fn readable(value: &Value) -> String {
    match value {
        Value::String(s) => shorten(s),
        other => shorten(&other.to_string()),
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= SHOWN {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(SHOWN).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::TransportConfig;
    use serde_json::json;

    fn server(trusted: bool, read_tools: &[&str]) -> ServerConfig {
        ServerConfig {
            id: "fs".into(),
            name: "Files".into(),
            transport: TransportConfig::Stdio {
                command: "npx".into(),
                args: vec![],
                env: vec![],
                cwd: None,
            },
            enabled: true,
            trusted,
            read_tools: read_tools.iter().map(|s| (*s).to_owned()).collect(),
            timeout_secs: 60,
        }
    }

    fn tool(name: &str, read_only: Option<bool>, destructive: Option<bool>) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: "Writes a file".into(),
            input_schema: json!({"type": "object"}),
            read_only_hint: read_only,
            destructive_hint: destructive,
        }
    }

    #[test]
    fn a_servers_word_counts_only_when_the_user_trusts_it() {
        let read = tool("read_file", Some(true), None);
        assert!(
            !is_read(&server(false, &[]), &read),
            "untrusted hint ignored"
        );
        assert!(is_read(&server(true, &[]), &read));
        let unmarked = tool("list", None, None);
        assert!(!is_read(&server(true, &[]), &unmarked), "no hint, held");
        assert!(
            is_read(&server(false, &["list"]), &unmarked),
            "the user's mark"
        );
        let write = tool("write_file", Some(false), Some(true));
        assert!(!is_read(&server(true, &["read_file"]), &write));
    }

    #[test]
    fn the_card_names_server_tool_and_risk_and_lays_out_the_arguments() {
        let mut t = tool("write_file", Some(false), Some(true));
        t.title = Some("Write file".into());
        let args =
            json!({"path": "/tmp/a.txt", "content": "x".repeat(1000), "mode": {"append": true}});
        let p = preview(&server(false, &[]), &t, args.as_object().unwrap());
        assert_eq!(p.risk, Risk::High);
        assert_eq!(p.summary.en, "Call “Write file” on the MCP server Files");
        assert!(p.summary.zh.contains("「Files」"));
        let field = |label: &str| {
            p.fields
                .iter()
                .find(|f| f.label.en == label)
                .map(|f| f.value.clone())
        };
        assert_eq!(field("MCP server").as_deref(), Some("Files (fs)"));
        assert_eq!(field("Tool").as_deref(), Some("Write file (write_file)"));
        assert_eq!(field("path").as_deref(), Some("/tmp/a.txt"));
        assert_eq!(field("mode").as_deref(), Some(r#"{"append":true}"#));
        assert_eq!(field("content").unwrap().chars().count(), SHOWN + 1);
        assert!(field("Risk").is_some());
        let plain = preview(&server(false, &[]), &tool("x", None, None), &Map::new());
        assert_eq!(plain.risk, Risk::Normal);
    }
}
