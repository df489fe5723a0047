//! Names for people: the assistant's tools and Feishu's permissions in plain words, in both
//! languages. Unknown names fall back to the raw string, so a new tool or scope still shows.

use crate::text::Text;
use crate::view::call::ScopeView;

/// Every user scope to enable for a self-built Feishu app, in the order the README's table and
/// the settings page list them; the feishu crate's list, which bounds what a sign-in asks for.
pub const APP_SCOPES: &[&str] = feishu::tools::APP_SCOPES;

/// The tool in words ("Create a calendar event").
pub fn tool_title(tool: &str) -> Text {
    let (zh, en) = match tool {
        "whoami" => ("查看我的账号", "Look up your account"),
        "search_people" => ("查找同事", "Find colleagues"),
        "list_calendar_events" => ("查看日程", "Read your calendar"),
        "get_free_busy" => ("查看忙闲", "Check free/busy"),
        "create_calendar_event" => ("创建日程", "Create a calendar event"),
        "update_calendar_event" => ("修改日程", "Change a calendar event"),
        "delete_calendar_event" => ("删除日程", "Delete a calendar event"),
        "list_chats" => ("查看群聊", "List your chats"),
        "read_chat_messages" => ("读取聊天消息", "Read chat messages"),
        "send_message" => ("发送消息", "Send a message"),
        "reply_message" => ("回复消息", "Reply to a message"),
        "search_docs" => ("搜索文档", "Search docs"),
        "read_document" => ("读取文档", "Read a document"),
        "list_drive_folder" => ("查看云空间文件夹", "List a Drive folder"),
        "create_document" => ("创建文档", "Create a document"),
        "append_to_document" => ("在文档末尾追加内容", "Append to a document"),
        "list_tasks" => ("查看待办", "Read your tasks"),
        "create_task" => ("创建待办", "Create a task"),
        "complete_task" => ("完成待办", "Complete a task"),
        "reopen_task" => ("重新打开待办", "Reopen a task"),
        crate::agents::tools::APPROVE => ("允许智能体的操作", "Allow an agent's action"),
        crate::agents::tools::REQUEST_APPROVAL => ("智能体请求批准", "An agent asks for approval"),
        other => return mcp_tool_title(other).unwrap_or_else(|| Text::new(other, other)),
    };
    Text::new(zh, en)
}

/// An MCP server's tool in words: the server and the tool as the name carries them
/// (`mcp__github__create_issue` → "MCP · github · create_issue").
fn mcp_tool_title(tool: &str) -> Option<Text> {
    let server = mcp::naming::server_of(tool)?;
    let rest = &tool[mcp::naming::PREFIX.len() + server.len() + 2..];
    Some(Text::new(
        format!("MCP 工具 · {server} · {rest}"),
        format!("MCP tool · {server} · {rest}"),
    ))
}

/// An audit line's kind in words ("approval.rejected" → "Rejected"); unknown kinds as they are.
pub fn audit_kind(kind: &str) -> Text {
    let (zh, en) = match kind {
        "approval.requested" => ("请求批准", "Approval requested"),
        "approval.approved" => ("已批准", "Approved"),
        "approval.approved_edited" => ("修改后批准", "Approved with edits"),
        "approval.rejected" => ("已拒绝", "Rejected"),
        "approval.expired" => ("已过期", "Expired"),
        "approval.blocked_by_rule" => ("被规则拦截", "Blocked by a rule"),
        "approval.blocked_by_mode" => ("只读模式拒绝", "Refused by read-only mode"),
        "autonomy.set" => ("更改写入方式", "Write mode changed"),
        "auth.requested" => ("请求授权", "Permission requested"),
        "auth.granted" => ("已授权", "Permission granted"),
        "auth.declined" => ("拒绝授权", "Permission declined"),
        "call.dispatched" => ("已发送", "Sent"),
        "call.completed" => ("已完成", "Completed"),
        "call.cancelled" => ("已取消", "Cancelled"),
        "call.invalid_arguments" => ("参数无效", "Invalid arguments"),
        "call.malformed_arguments" => ("参数格式错误", "Malformed arguments"),
        "call.unknown_tool" => ("未知工具", "Unknown tool"),
        "call.outcome_unknown" => ("结果未知", "Outcome unknown"),
        "call.retry" => ("重新发送", "Sent again"),
        "call.retry_after_crash" => ("崩溃后重发", "Re-sent after a crash"),
        "call.settled" => ("已确认结果", "Outcome confirmed"),
        "rule.created" => ("创建规则", "Rule created"),
        "rule.revoked" => ("撤销规则", "Rule revoked"),
        "turn.closed" => ("回合结束", "Turn closed"),
        other => (other, other),
    };
    Text::new(zh, en)
}

/// A Feishu permission in words; the raw scope stays in [`ScopeView::scope`].
pub fn scope(scope: &str) -> ScopeView {
    // A remote MCP server's sign-in (see `crate::mcp::sign_in`), named by the server's id.
    if let Some(server) = scope.strip_prefix("mcp:") {
        return ScopeView {
            scope: scope.to_owned(),
            label: Text::new(
                format!("登录 MCP 服务器 {server}"),
                format!("Sign in to the MCP server {server}"),
            ),
        };
    }
    let (zh, en) = match scope {
        "offline_access" => ("保持登录状态", "Stay signed in"),
        "calendar:calendar:readonly" | "calendar:calendar:read" => {
            ("查看你的日历", "See your calendars")
        }
        "calendar:calendar.event:read" => ("查看日程详情", "See your calendar events"),
        "calendar:calendar.free_busy:read" => ("查看你的忙闲状态", "See when you are free or busy"),
        "calendar:calendar.event:create" => ("以你的身份创建日程", "Create events as you"),
        "calendar:calendar.event:update" => ("修改你的日程", "Change your events"),
        "calendar:calendar.event:delete" => ("删除你的日程", "Delete your events"),
        "calendar:calendar" => ("管理你的日历", "Manage your calendars"),
        "im:chat:readonly" | "im:chat:read" | "im:chat.group_info:readonly" => {
            ("查看你所在的群聊", "See the chats you are in")
        }
        "im:chat" => ("管理群聊", "Manage chats"),
        "im:message:readonly"
        | "im:message.group_msg:get_as_user"
        | "im:message.p2p_msg:get_as_user" => ("读取你的聊天消息", "Read your chat messages"),
        "im:message" | "im:message.send_as_user" => ("以你的身份发送消息", "Send messages as you"),
        "search:docs:read" => ("搜索你的文档", "Search your docs"),
        "docs:document.content:read" | "docx:document:readonly" => {
            ("阅读你的文档", "Read your documents")
        }
        "docx:document:create" => ("创建文档", "Create documents"),
        "docx:document:write_only" | "docx:document" | "docx:document.block:convert" => {
            ("编辑你的文档", "Edit your documents")
        }
        "drive:drive:readonly" | "space:document:retrieve" => {
            ("查看你的云空间文件", "See your Drive files")
        }
        "drive:drive" => ("管理你的云空间文件", "Manage your Drive files"),
        "wiki:wiki:readonly" | "wiki:node:read" => ("阅读知识库", "Read wikis"),
        "wiki:wiki" => ("管理知识库", "Manage wikis"),
        "task:task:read" => ("查看你的待办", "See your tasks"),
        "task:task:write" | "task:task:writeonly" => {
            ("创建和更新你的待办", "Create and update your tasks")
        }
        "contact:user:search" => ("按名字查找同事", "Find colleagues by name"),
        "contact:contact.base:readonly" | "contact:contact:readonly" => {
            ("查看同事的名字", "See colleagues' names")
        }
        other => (other, other),
    };
    ScopeView {
        scope: scope.to_owned(),
        label: Text::new(zh, en),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_the_tools_ask_for_has_words() {
        for s in emulator::feishu::api::scopes::PREFERRED_SCOPES {
            let view = scope(s);
            assert_ne!(view.label.en, *s, "no words for {s}");
            assert_ne!(view.label.zh, *s, "no words for {s}");
        }
    }

    #[test]
    fn the_app_asks_for_every_scope_the_tools_prefer() {
        for s in emulator::feishu::api::scopes::PREFERRED_SCOPES {
            assert!(APP_SCOPES.contains(s), "{s} missing from APP_SCOPES");
        }
        assert!(APP_SCOPES.contains(&crate::options::PEOPLE_NAMES_SCOPE));
    }

    #[test]
    fn every_audit_kind_the_engine_writes_has_words() {
        // Every module of the engine (it is split by concern under agent/src/engine/).
        let engine = [
            include_str!("../../agent/src/engine/mod.rs"),
            include_str!("../../agent/src/engine/auth.rs"),
            include_str!("../../agent/src/engine/autonomy.rs"),
            include_str!("../../agent/src/engine/decision.rs"),
            include_str!("../../agent/src/engine/dispatch.rs"),
            include_str!("../../agent/src/engine/expiry.rs"),
            include_str!("../../agent/src/engine/gate.rs"),
            include_str!("../../agent/src/engine/model_call.rs"),
            include_str!("../../agent/src/engine/recovery.rs"),
            include_str!("../../agent/src/engine/session.rs"),
            include_str!("../../agent/src/engine/turn.rs"),
        ]
        .concat();
        let engine = engine.as_str();
        let mut kinds = 0;
        for prefix in [
            "\"approval.",
            "\"auth.",
            "\"autonomy.",
            "\"call.",
            "\"rule.",
            "\"turn.",
        ] {
            for (i, _) in engine.match_indices(prefix) {
                let rest = &engine[i + 1..];
                let kind: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '.' || *c == '_')
                    .collect();
                if kind.ends_with('.') || !rest[kind.len()..].starts_with('"') {
                    continue;
                }
                kinds += 1;
                assert_ne!(audit_kind(&kind).en, kind, "no words for {kind}");
            }
        }
        assert!(kinds >= 20, "found only {kinds} audit kinds in the engine");
    }

    #[test]
    fn unknown_names_show_as_they_are() {
        assert_eq!(tool_title("brand_new_tool").en, "brand_new_tool");
        assert_eq!(scope("x:y").label.zh, "x:y");
    }
}
