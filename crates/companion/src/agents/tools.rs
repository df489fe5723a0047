//! The two tools only connected agents have: `approve`, in the shape Claude Code's
//! `--permission-prompt-tool` calls (the agent's own tool name and input; the answer is `allow`
//! with the input, possibly edited, or `deny` with a message), and `request_approval`, a plain
//! yes-or-no on an action the agent describes. Both are writes, so every call is held for the
//! user like any other; what the card shows is laid out here.
//!
//! What the gate sees of a permission request is flattened: besides `tool_name` and `input`, the
//! command (`command`), the file (`file_path`) and the client's project folder (`project`) are
//! top-level arguments, so a rule can say "always allow `npm test` in this project" and an edit
//! of the command on the card is what runs.

use agent::{
    AgentTool, Localized, Preview, PreviewChange, PreviewField, Risk, ToolContext, ToolReturn,
};
use async_trait::async_trait;
use serde_json::{Map, Value, json};

/// The permission-prompt tool's name.
pub const APPROVE: &str = "approve";
/// The yes-or-no tool's name.
pub const REQUEST_APPROVAL: &str = "request_approval";

/// The most of a file's new content or a command a card shows.
const SHOWN_CHARS: usize = 4_000;

/// Both tools.
pub(crate) fn all() -> Vec<std::sync::Arc<dyn AgentTool>> {
    vec![
        std::sync::Arc::new(Approve),
        std::sync::Arc::new(RequestApproval),
    ]
}

/// What clients are told `approve` takes (Claude Code's permission-prompt request).
pub(crate) fn approve_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "description": "The tool the agent wants to use (Bash, Edit, Write, …)."},
            "input": {"type": "object", "description": "The input it would run with."},
            "tool_use_id": {"type": "string", "description": "The agent's id of this use, if any."}
        },
        "required": ["tool_name", "input"]
    })
}

/// A permission request as the gate sees it (see the module's note).
pub(crate) fn flatten_permission(
    mut args: Map<String, Value>,
    project: Option<&str>,
) -> Map<String, Value> {
    let input = args
        .get("input")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in ["command", "file_path"] {
        if let Some(Value::String(v)) = input.get(key) {
            args.insert(key.to_owned(), Value::String(v.clone()));
        }
    }
    if let Some(project) = project {
        args.insert("project".to_owned(), Value::String(project.to_owned()));
    }
    args
}

/// The input to answer `allow` with: the agent's, with the command or file the user edited on
/// the card.
pub(crate) fn updated_input(args: &Map<String, Value>) -> Value {
    let mut input = args
        .get("input")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in ["command", "file_path"] {
        if let Some(v @ Value::String(_)) = args.get(key)
            && input.contains_key(key)
        {
            input.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(input)
}

fn text(args: &Map<String, Value>, key: &str) -> String {
    args.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(chars).collect();
    s.push('…');
    s
}

fn field(zh: &str, en: &str, value: impl Into<String>) -> PreviewField {
    PreviewField {
        label: Localized::new(zh, en),
        value: value.into(),
    }
}

/// Shell commands that are hard to undo or reach beyond the project.
fn risky_command(command: &str) -> bool {
    let c = command.to_ascii_lowercase();
    const PATTERNS: &[&str] = &[
        "rm -r",
        "rm -f",
        "rm -rf",
        "sudo ",
        "git push",
        "--force",
        "mkfs",
        "dd if=",
        "chmod -r",
        "chown -r",
        "| sh",
        "| bash",
        "curl ",
        "wget ",
        "drop table",
        "drop database",
        "> /dev/",
        "shutdown",
        "reboot",
        "kill -9",
        "git reset --hard",
        "git clean",
    ];
    PATTERNS.iter().any(|p| c.contains(p))
}

/// The card of a permission request.
fn permission_preview(args: &Map<String, Value>) -> Preview {
    let tool = text(args, "tool_name");
    let input = args
        .get("input")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut fields = Vec::new();
    let mut changes = Vec::new();
    let mut risk = Risk::Normal;
    let summary = match tool.as_str() {
        "Bash" => {
            let command = text(args, "command");
            if risky_command(&command) {
                risk = Risk::High;
            }
            fields.push(field("命令", "Command", shorten(&command, SHOWN_CHARS)));
            let what = text(&input, "description");
            if !what.is_empty() {
                fields.push(field("说明", "Description", what));
            }
            let line = shorten(command.lines().next().unwrap_or_default(), 80);
            Localized::new(
                format!("运行命令：{line}"),
                format!("Run a command: {line}"),
            )
        }
        "Edit" | "MultiEdit" | "NotebookEdit" => {
            let path = text(args, "file_path");
            fields.push(field("文件", "File", path.clone()));
            let edits: Vec<Map<String, Value>> = match input.get("edits") {
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|e| e.as_object().cloned())
                    .collect(),
                _ => vec![input.clone()],
            };
            for edit in edits {
                changes.push(PreviewChange {
                    field: Localized::new("内容", "Text"),
                    from: shorten(&text(&edit, "old_string"), SHOWN_CHARS),
                    to: shorten(&text(&edit, "new_string"), SHOWN_CHARS),
                });
            }
            Localized::new(format!("修改文件 {path}"), format!("Edit {path}"))
        }
        "Write" => {
            let path = text(args, "file_path");
            fields.push(field("文件", "File", path.clone()));
            fields.push(field(
                "内容",
                "Content",
                shorten(&text(&input, "content"), SHOWN_CHARS),
            ));
            Localized::new(format!("写入文件 {path}"), format!("Write {path}"))
        }
        _ => {
            for (key, value) in &input {
                let shown = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                fields.push(field(key, key, shorten(&shown, SHOWN_CHARS)));
            }
            Localized::new(format!("使用工具 {tool}"), format!("Use the tool {tool}"))
        }
    };
    let project = text(args, "project");
    if !project.is_empty() {
        fields.push(field("项目", "Project", project));
    }
    Preview {
        summary,
        risk,
        fields,
        changes,
    }
}

/// `approve`: the permission-prompt tool.
struct Approve;

#[async_trait]
impl AgentTool for Approve {
    fn name(&self) -> &str {
        APPROVE
    }

    fn description(&self) -> &str {
        "Asks the user, in Feishu Companion, whether the agent may use one of its own tools \
         (a shell command, a file edit). Answers JSON: {\"behavior\":\"allow\",\"updatedInput\":{…}} \
         or {\"behavior\":\"deny\",\"message\":\"…\"}."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "tool_name": {"type": "string", "minLength": 1},
                "input": {"type": "object"},
                "tool_use_id": {"type": "string"},
                "command": {"type": "string"},
                "file_path": {"type": "string"},
                "project": {"type": "string"}
            },
            "required": ["tool_name", "input"]
        })
    }

    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        true
    }

    async fn preview(&self, args: &Map<String, Value>) -> Option<Preview> {
        Some(permission_preview(args))
    }

    async fn run(&self, args: Map<String, Value>, _ctx: &mut ToolContext) -> ToolReturn {
        // Approved: what the agent runs is its input with the user's edits.
        json!({"behavior": "allow", "updatedInput": updated_input(&args)}).into()
    }
}

/// `request_approval`: a yes-or-no on an action the agent describes.
struct RequestApproval;

#[async_trait]
impl AgentTool for RequestApproval {
    fn name(&self) -> &str {
        REQUEST_APPROVAL
    }

    fn description(&self) -> &str {
        "Asks the user, in Feishu Companion (and on their phone, when Feishu approval is on), to \
         approve an action you are about to take. Waits for the decision; answers whether it was \
         approved, and the user's reason when not."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "minLength": 1, "description": "One line: what you will do."},
                "details": {"type": "string", "description": "Anything the user should know first."},
                "risk": {"type": "string", "enum": ["normal", "high"], "description": "high: hard to undo, or seen by many."}
            },
            "required": ["summary"]
        })
    }

    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        true
    }

    async fn preview(&self, args: &Map<String, Value>) -> Option<Preview> {
        let summary = shorten(&text(args, "summary"), 200);
        let mut fields = Vec::new();
        let details = text(args, "details");
        if !details.is_empty() {
            fields.push(field("详情", "Details", shorten(&details, SHOWN_CHARS)));
        }
        let project = text(args, "project");
        if !project.is_empty() {
            fields.push(field("项目", "Project", project));
        }
        Some(Preview {
            summary: Localized::new(summary.clone(), summary),
            risk: if text(args, "risk") == "high" {
                Risk::High
            } else {
                Risk::Normal
            },
            fields,
            changes: Vec::new(),
        })
    }

    async fn run(&self, _args: Map<String, Value>, _ctx: &mut ToolContext) -> ToolReturn {
        json!({"approved": true}).into()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_permission_request_is_flattened_for_rules_and_edits_flow_back_into_the_input() {
        let args = obj(
            json!({"tool_name": "Bash", "input": {"command": "npm test", "description": "Run tests"}}),
        );
        let mut flat = flatten_permission(args, Some("/work/app"));
        assert_eq!(flat["command"], "npm test");
        assert_eq!(flat["project"], "/work/app");
        flat.insert("command".into(), json!("npm test -- --watch=false"));
        assert_eq!(
            updated_input(&flat),
            json!({"command": "npm test -- --watch=false", "description": "Run tests"})
        );
    }

    #[test]
    fn the_card_lays_out_commands_and_edits_and_flags_risky_commands() {
        let bash = flatten_permission(
            obj(json!({"tool_name": "Bash", "input": {"command": "rm -rf build"}})),
            None,
        );
        let p = permission_preview(&bash);
        assert_eq!(p.risk, Risk::High);
        assert!(p.summary.en.contains("rm -rf build"), "{:?}", p.summary);
        let safe = flatten_permission(
            obj(json!({"tool_name": "Bash", "input": {"command": "npm test"}})),
            None,
        );
        assert_eq!(permission_preview(&safe).risk, Risk::Normal);
        let edit = flatten_permission(
            obj(
                json!({"tool_name": "Edit", "input": {"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}}),
            ),
            None,
        );
        let p = permission_preview(&edit);
        assert_eq!(p.changes.len(), 1);
        assert_eq!(
            (p.changes[0].from.as_str(), p.changes[0].to.as_str()),
            ("a", "b")
        );
        assert!(p.summary.zh.contains("src/a.rs"));
    }
}
