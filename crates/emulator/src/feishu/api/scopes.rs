//! The endpoints the emulator serves and the user scopes each accepts, from the table in
//! feishu-platform.md §3 cross-checked against each endpoint's page in the Feishu docs.
//!
//! An endpoint needs one scope out of each of its groups. When a token lacks a group, the error
//! names, as real Feishu does, every scope of the first group it lacks (any one would do); the
//! client picks the one its tool declares. [`preferred_scope`] is the one the tools ask for, which
//! the demo app enables.

/// A set of scopes of which any one suffices.
pub type ScopeGroup = &'static [&'static str];

/// The scopes the client and the tools request, in order of preference: a missing group is
/// reported as the first scope of this list that belongs to it.
///
/// `free_busy:read` comes before `calendar:readonly` because the free/busy group contains both
/// and the free/busy tool asks for the narrower one; no other group contains `free_busy:read`.
pub const PREFERRED_SCOPES: &[&str] = &[
    "calendar:calendar.free_busy:read",
    "calendar:calendar:readonly",
    "calendar:calendar.event:create",
    "calendar:calendar.event:update",
    "calendar:calendar.event:delete",
    "im:chat:readonly",
    "im:message:readonly",
    "im:message.group_msg:get_as_user",
    "im:message",
    "im:message.send_as_user",
    "search:docs:read",
    "docs:document.content:read",
    "docx:document:create",
    "docx:document:write_only",
    "docx:document.block:convert",
    "task:task:read",
    "task:task:write",
    "contact:user:search",
    "contact:contact.base:readonly",
    "drive:drive:readonly",
];

/// The scope reported for a missing `group`: the first of [`PREFERRED_SCOPES`] in it, else (for
/// groups the tools never ask for, such as reading 1:1 messages) the group's first scope.
pub fn preferred_scope(group: &[&'static str]) -> &'static str {
    PREFERRED_SCOPES
        .iter()
        .copied()
        .find(|s| group.contains(s))
        .or_else(|| group.first().copied())
        .unwrap_or_default()
}

/// Paths, with axum's `{param}` placeholders, relative to the Open API base URL.
pub const PRIMARY_CALENDAR: &str = "/open-apis/calendar/v4/calendars/primary";
/// Recurring events expanded over a range.
pub const INSTANCE_VIEW: &str =
    "/open-apis/calendar/v4/calendars/{calendar_id}/events/instance_view";
/// Create an event (POST).
pub const EVENTS: &str = "/open-apis/calendar/v4/calendars/{calendar_id}/events";
/// Get, patch or delete an event.
pub const EVENT: &str = "/open-apis/calendar/v4/calendars/{calendar_id}/events/{event_id}";
/// Add attendees to an event.
pub const ATTENDEES: &str =
    "/open-apis/calendar/v4/calendars/{calendar_id}/events/{event_id}/attendees";
/// Free/busy of a user.
pub const FREEBUSY: &str = "/open-apis/calendar/v4/freebusy/list";
/// The groups the user is in.
pub const CHATS: &str = "/open-apis/im/v1/chats";
/// Search visible groups.
pub const CHAT_SEARCH: &str = "/open-apis/im/v1/chats/search";
/// One chat's information.
pub const CHAT: &str = "/open-apis/im/v1/chats/{chat_id}";
/// List (GET) or send (POST) messages.
pub const MESSAGES: &str = "/open-apis/im/v1/messages";
/// One message (GET).
pub const MESSAGE: &str = "/open-apis/im/v1/messages/{message_id}";
/// Reply to a message.
pub const MESSAGE_REPLY: &str = "/open-apis/im/v1/messages/{message_id}/reply";
/// Search docs and wiki.
pub const DOC_SEARCH: &str = "/open-apis/search/v2/doc_wiki/search";
/// A document as Markdown.
pub const DOC_CONTENT: &str = "/open-apis/docs/v1/content";
/// Create a docx document.
pub const DOCUMENTS: &str = "/open-apis/docx/v1/documents";
/// A docx document's metadata (GET).
pub const DOCUMENT: &str = "/open-apis/docx/v1/documents/{document_id}";
/// Markdown/HTML to blocks.
pub const BLOCK_CONVERT: &str = "/open-apis/docx/v1/documents/blocks/convert";
/// Append children to a block.
pub const BLOCK_CHILDREN: &str =
    "/open-apis/docx/v1/documents/{document_id}/blocks/{block_id}/children";
/// A wiki node (to find the document behind a wiki search result).
pub const WIKI_NODE: &str = "/open-apis/wiki/v2/spaces/get_node";
/// List (GET) or create (POST) tasks.
pub const TASKS: &str = "/open-apis/task/v2/tasks";
/// Get (GET) or patch (PATCH) a task.
pub const TASK: &str = "/open-apis/task/v2/tasks/{task_guid}";
/// Search users.
pub const USER_SEARCH: &str = "/open-apis/search/v1/user";
/// One user.
pub const USER: &str = "/open-apis/contact/v3/users/{user_id}";
/// List a drive folder.
pub const DRIVE_FILES: &str = "/open-apis/drive/v1/files";
/// The app's bot (tenant token only).
pub const BOT_INFO: &str = "/open-apis/bot/v3/info";

const CALENDAR_PRIMARY: ScopeGroup = &["calendar:calendar:read", "calendar:calendar:readonly"];
const EVENT_READ: ScopeGroup = &[
    "calendar:calendar.event:read",
    "calendar:calendar",
    "calendar:calendar:readonly",
];
const EVENT_CREATE: ScopeGroup = &["calendar:calendar.event:create", "calendar:calendar"];
const EVENT_UPDATE: ScopeGroup = &["calendar:calendar.event:update", "calendar:calendar"];
const EVENT_DELETE: ScopeGroup = &["calendar:calendar.event:delete", "calendar:calendar"];
const FREE_BUSY: ScopeGroup = &[
    "calendar:calendar.free_busy:read",
    "calendar:calendar",
    "calendar:calendar:readonly",
];
const CHAT_LIST: ScopeGroup = &[
    "im:chat",
    "im:chat:readonly",
    "im:chat:read",
    "im:chat.group_info:readonly",
];
const CHAT_GET: ScopeGroup = &["im:chat", "im:chat:read", "im:chat:readonly"];
const MESSAGE_READ: ScopeGroup = &["im:message", "im:message:readonly"];
const MESSAGE_WRITE: ScopeGroup = &["im:message"];
const SEND_AS_USER: ScopeGroup = &["im:message.send_as_user"];
/// Updating a card the user sent ("更新已发送的消息卡片" lists these for either identity).
const MESSAGE_UPDATE: ScopeGroup = &["im:message", "im:message:update"];
/// Sending as the app's bot ("发送消息": any one of these, enabled by the app).
pub const BOT_SEND: ScopeGroup = &["im:message", "im:message:send_as_bot", "im:message:send"];
/// Updating a card the bot sent.
pub const BOT_UPDATE: ScopeGroup = &["im:message", "im:message:send_as_bot", "im:message:update"];
/// Reading a group's messages as a user also needs this group…
pub const GROUP_MSG_AS_USER: ScopeGroup = &["im:message.group_msg:get_as_user"];
/// …and reading a 1:1 chat's messages this one instead.
pub const P2P_MSG_AS_USER: ScopeGroup = &["im:message.p2p_msg:get_as_user"];
const DOC_SEARCH_READ: ScopeGroup = &["search:docs:read"];
const DOC_CONTENT_READ: ScopeGroup = &["docs:document.content:read"];
/// Reading a docx document (also the hosted MCP server's `fetch-doc` and `locate-doc`).
pub const DOCX_READ: ScopeGroup = &["docx:document:readonly", "docx:document"];
/// Creating a docx document (also `create-doc`).
pub const DOCX_CREATE: ScopeGroup = &["docx:document", "docx:document:create"];
/// Changing a docx document's blocks (also `update-doc`, which reads it too).
pub const DOCX_WRITE: ScopeGroup = &["docx:document", "docx:document:write_only"];
const DOCX_CONVERT: ScopeGroup = &["docx:document.block:convert"];
const WIKI_READ: ScopeGroup = &["wiki:node:read", "wiki:wiki", "wiki:wiki:readonly"];
const TASK_READ: ScopeGroup = &["task:task:read", "task:task:write"];
const TASK_WRITE: ScopeGroup = &["task:task:write", "task:task:writeonly"];
const USER_SEARCH_READ: ScopeGroup = &["contact:user:search"];
const USER_READ: ScopeGroup = &[
    "contact:contact.base:readonly",
    "contact:contact:readonly",
    "contact:contact:readonly_as_app",
];
const DRIVE_READ: ScopeGroup = &[
    "drive:drive",
    "drive:drive:readonly",
    "space:document:retrieve",
];

/// One endpoint: method, route and the scope groups it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// HTTP method.
    pub method: &'static str,
    /// Route with `{param}` placeholders (one of the constants above).
    pub route: &'static str,
    /// One scope out of each group is needed. Listing messages adds [`GROUP_MSG_AS_USER`] or
    /// [`P2P_MSG_AS_USER`] depending on the chat.
    pub scopes: &'static [ScopeGroup],
    /// Whether it changes the tenant (the request log marks these).
    pub write: bool,
}

pub(crate) const fn read(
    method: &'static str,
    route: &'static str,
    scopes: &'static [ScopeGroup],
) -> Endpoint {
    Endpoint {
        method,
        route,
        scopes,
        write: false,
    }
}

pub(crate) const fn write(
    method: &'static str,
    route: &'static str,
    scopes: &'static [ScopeGroup],
) -> Endpoint {
    Endpoint {
        method,
        route,
        scopes,
        write: true,
    }
}

/// Every endpoint of the Open API side.
pub const ENDPOINTS: &[Endpoint] = &[
    // POST although it only reads.
    read("POST", PRIMARY_CALENDAR, &[CALENDAR_PRIMARY]),
    read("GET", INSTANCE_VIEW, &[EVENT_READ]),
    read("GET", EVENT, &[EVENT_READ]),
    write("POST", EVENTS, &[EVENT_CREATE]),
    write("POST", ATTENDEES, &[EVENT_UPDATE]),
    write("PATCH", EVENT, &[EVENT_UPDATE]),
    write("DELETE", EVENT, &[EVENT_DELETE]),
    read("POST", FREEBUSY, &[FREE_BUSY]),
    read("GET", CHATS, &[CHAT_LIST]),
    read("GET", CHAT_SEARCH, &[CHAT_LIST]),
    read("GET", CHAT, &[CHAT_GET]),
    read("GET", MESSAGES, &[MESSAGE_READ]),
    read("GET", MESSAGE, &[MESSAGE_READ]),
    write("POST", MESSAGES, &[MESSAGE_WRITE, SEND_AS_USER]),
    write("POST", MESSAGE_REPLY, &[MESSAGE_WRITE, SEND_AS_USER]),
    write("PATCH", MESSAGE, &[MESSAGE_UPDATE]),
    read("POST", DOC_SEARCH, &[DOC_SEARCH_READ]),
    read("GET", DOC_CONTENT, &[DOC_CONTENT_READ]),
    read("GET", DOCUMENT, &[DOCX_READ]),
    write("POST", DOCUMENTS, &[DOCX_CREATE]),
    // A pure transform: nothing in the tenant changes.
    read("POST", BLOCK_CONVERT, &[DOCX_CONVERT]),
    write("POST", BLOCK_CHILDREN, &[DOCX_WRITE]),
    read("GET", WIKI_NODE, &[WIKI_READ]),
    read("GET", TASKS, &[TASK_READ]),
    write("POST", TASKS, &[TASK_WRITE]),
    read("GET", TASK, &[TASK_READ]),
    write("PATCH", TASK, &[TASK_WRITE]),
    read("GET", USER_SEARCH, &[USER_SEARCH_READ]),
    read("GET", USER, &[USER_READ]),
    read("GET", DRIVE_FILES, &[DRIVE_READ]),
];

/// The endpoints that take a tenant access token (the app's bot), with the scope groups the app
/// must have enabled. Every other endpoint answers a tenant token with 99991663.
pub const BOT_ENDPOINTS: &[Endpoint] = &[
    read("GET", BOT_INFO, &[]),
    write("POST", MESSAGES, &[BOT_SEND]),
    write("PATCH", MESSAGE, &[BOT_UPDATE]),
];

/// The bot endpoint serving `method` on `route`.
pub fn bot_endpoint(method: &str, route: &str) -> Option<&'static Endpoint> {
    BOT_ENDPOINTS
        .iter()
        .find(|e| e.method.eq_ignore_ascii_case(method) && e.route == route)
}

/// The endpoint serving `method` on `route` (a route constant, not a concrete path), Base's
/// included.
pub fn endpoint(method: &str, route: &str) -> Option<&'static Endpoint> {
    ENDPOINTS
        .iter()
        .chain(super::bitable::ENDPOINTS)
        .find(|e| e.method.eq_ignore_ascii_case(method) && e.route == route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_the_tools_ask_for_has_a_preferred_scope() {
        for endpoint in ENDPOINTS {
            for group in endpoint.scopes {
                let preferred = preferred_scope(group);
                assert!(group.contains(&preferred), "{preferred} is in its group");
                // Reads the tools only do for previews, with scopes outside the list.
                if endpoint.route != WIKI_NODE && endpoint.route != DOCUMENT {
                    assert!(
                        PREFERRED_SCOPES.contains(&preferred),
                        "{} {}: {preferred}",
                        endpoint.method,
                        endpoint.route
                    );
                }
            }
        }
        assert_eq!(
            preferred_scope(FREE_BUSY),
            "calendar:calendar.free_busy:read"
        );
        assert_eq!(preferred_scope(EVENT_READ), "calendar:calendar:readonly");
        assert_eq!(preferred_scope(MESSAGE_READ), "im:message:readonly");
        assert_eq!(preferred_scope(TASK_WRITE), "task:task:write");
    }
}
