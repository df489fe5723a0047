//! The rules and the audit trail as the UI lists, filters and exports them.

use agent::Rule;
use agent::persist::{AuditEntry, AuditFilter};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::labels;
use crate::text::{Text, snake};

/// An always/never rule.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct RuleView {
    /// The rule's id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The tool in words.
    pub title: Text,
    /// `always_allow` or `never_allow`.
    pub effect: String,
    /// Argument values a call must have; empty for any call.
    #[ts(type = "Record<string, unknown>")]
    pub constraints: Map<String, Value>,
    /// When it lapses.
    #[ts(type = "number | null")]
    pub expires_at: Option<i64>,
    /// When it was made.
    #[ts(type = "number")]
    pub created_at: i64,
    /// When it was revoked.
    #[ts(type = "number | null")]
    pub revoked_at: Option<i64>,
}

impl From<Rule> for RuleView {
    fn from(r: Rule) -> RuleView {
        RuleView {
            title: labels::tool_title(&r.tool),
            effect: snake(&r.effect),
            id: r.id,
            tool: r.tool,
            constraints: r.arg_constraints,
            expires_at: r.expires_at,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AuditView {
    /// When.
    #[ts(type = "number")]
    pub at: i64,
    /// The session.
    pub session_id: Option<String>,
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub tool: Option<String>,
    /// `approval.requested`, `approval.approved`, `call.dispatched`…
    pub kind: String,
    /// The kind in words.
    pub label: Text,
    /// `user`, `agent:<name>`, `rule:<id>`, `engine`.
    pub actor: String,
    /// The tool in words, if any.
    pub tool_title: Option<Text>,
    /// The particulars.
    #[ts(type = "unknown")]
    pub detail: Value,
}

/// A tool in words; a user's Python tool names its file and function (the audit's `source`).
fn python_tool_title(tool: &str, detail: &Value) -> Text {
    let source = &detail["source"];
    match (source["python_file"].as_str(), source["function"].as_str()) {
        (Some(file), Some(function)) => Text::new(
            format!("Python 工具 {tool}（{file} · def {function}）"),
            format!("Python tool {tool} ({file} · def {function})"),
        ),
        _ => labels::tool_title(tool),
    }
}

impl From<AuditEntry> for AuditView {
    fn from(a: AuditEntry) -> AuditView {
        AuditView {
            label: labels::audit_kind(&a.kind),
            tool_title: a
                .tool
                .as_deref()
                .map(|tool| python_tool_title(tool, &a.detail)),
            at: a.at,
            session_id: a.session_id,
            call_id: a.call_id,
            tool: a.tool,
            kind: a.kind,
            actor: a.actor,
            detail: a.detail,
        }
    }
}

/// Which audit lines to read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, TS)]
#[serde(default)]
pub struct AuditQuery {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only kinds starting with this (`approval.`, `call.`, `rule.`).
    pub kind_prefix: Option<String>,
    /// Only at or after this time.
    #[ts(type = "number | null")]
    pub since: Option<i64>,
    /// At most this many, newest first.
    pub limit: Option<u32>,
}

impl From<&AuditQuery> for AuditFilter {
    fn from(q: &AuditQuery) -> AuditFilter {
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        AuditFilter {
            session_id: nonempty(&q.session_id),
            tool: nonempty(&q.tool),
            kind_prefix: nonempty(&q.kind_prefix),
            since: q.since,
            limit: q.limit.map(|l| l as usize),
        }
    }
}

/// How to export the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// A JSON array.
    Json,
    /// Comma-separated values with a header row.
    Csv,
}

/// Every audit line as CSV, with a header row; fields quoted where needed.
pub fn audit_csv(entries: &[AuditView]) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    }
    let mut out = String::from("time,kind,actor,tool,session_id,call_id,detail\n");
    for e in entries {
        let time = jiff::Timestamp::from_millisecond(e.at)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| e.at.to_string());
        let row = [
            time,
            e.kind.clone(),
            e.actor.clone(),
            e.tool.clone().unwrap_or_default(),
            e.session_id.clone().unwrap_or_default(),
            e.call_id.clone().unwrap_or_default(),
            if e.detail.is_null() {
                String::new()
            } else {
                e.detail.to_string()
            },
        ];
        let row: Vec<String> = row.iter().map(|s| field(s)).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let entry = AuditView {
            at: 0,
            session_id: Some("s1".into()),
            call_id: None,
            tool: Some("send_message".into()),
            kind: "approval.rejected".into(),
            label: labels::audit_kind("approval.rejected"),
            actor: "user".into(),
            tool_title: Some(labels::tool_title("send_message")),
            detail: serde_json::json!({"reason": "不要, \"现在\""}),
        };
        let csv = audit_csv(&[entry]);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("time,kind,actor,tool,session_id,call_id,detail")
        );
        assert_eq!(
            lines.next(),
            Some(
                r#"1970-01-01T00:00:00Z,approval.rejected,user,send_message,s1,,"{""reason"":""不要, \""现在\""""}""#
            )
        );
    }
}
