//! IM: the groups the user is in, chat search, one chat (with `user_count`), a chat's history
//! (`page_size` ≤ 50, `sort_type` fixed across pages), sending and replying. A repeated `uuid`
//! within an hour answers with the first message instead of sending another.

use std::collections::HashMap;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::tenant::{Chat, Message, Tenant};
use super::{ApiError, ApiResult, Caller, Paging, json_body, ok, paged, random_hex};

/// A `uuid` deduplicates sends for one hour.
const UUID_WINDOW_MS: i64 = 3600 * 1000;

fn chat_error(msg: &str) -> ApiError {
    ApiError::new(
        400,
        232001,
        format!("Your request contains an invalid request parameter: {msg}"),
    )
}

pub(super) fn message_error(msg: &str) -> ApiError {
    ApiError::new(
        400,
        230001,
        format!("Your request contains an invalid request parameter: {msg}"),
    )
}

fn avatar(chat: &Chat) -> String {
    format!(
        "https://example.invalid/static-resource/v1/{}~100x100.jpg",
        chat.chat_id
    )
}

/// A chat as the list and search answers show it.
fn list_item(tenant: &Tenant, chat: &Chat) -> Value {
    json!({
        "chat_id": chat.chat_id,
        "avatar": avatar(chat),
        "name": chat.name,
        "description": chat.description,
        "owner_id": chat.owner,
        "owner_id_type": "open_id",
        "external": false,
        "tenant_key": tenant.tenant_key,
        "chat_status": "normal",
    })
}

/// The groups `user` is in; Feishu leaves 1:1 chats out of the chat list.
fn groups_of<'a>(tenant: &'a Tenant, user: &str) -> Vec<&'a Chat> {
    tenant
        .chats
        .iter()
        .filter(|c| !c.p2p && c.members.iter().any(|m| m == user))
        .collect()
}

/// `GET /im/v1/chats` (ByCreateTimeAsc, or ByActiveTimeDesc).
pub(crate) async fn list_chats(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let sort = query
        .get("sort_type")
        .map_or("ByCreateTimeAsc", String::as_str);
    if !["ByCreateTimeAsc", "ByActiveTimeDesc"].contains(&sort) {
        return Err(chat_error("sort_type"));
    }
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        20,
        100,
        &format!("chats\n{sort}"),
    )
    .map_err(|e| chat_error(&e))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let mut chats = groups_of(tenant, &state.user.open_id);
    if sort == "ByActiveTimeDesc" {
        let active = |chat: &Chat| {
            tenant
                .messages
                .iter()
                .filter(|m| m.chat_id == chat.chat_id)
                .map(|m| m.create_time)
                .max()
                .unwrap_or(chat.created_at)
        };
        chats.sort_by_key(|c| std::cmp::Reverse(active(c)));
    } else {
        chats.sort_by_key(|c| c.created_at);
    }
    let items: Vec<Value> = chats.iter().map(|c| list_item(tenant, c)).collect();
    let (page, next) = paging.page(&items);
    ok(paged(json!({ "items": page }), next, "page_token"))
}

/// `GET /im/v1/chats/search?query=`: matches group names and member names.
pub(crate) async fn search_chats(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let text = query.get("query").map_or("", |q| q.trim()).to_owned();
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        20,
        100,
        &format!("chat-search\n{text}"),
    )
    .map_err(|e| chat_error(&e))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    // Feishu answers an empty result for an empty query or one over 64 characters.
    let items: Vec<Value> = if text.is_empty() || text.chars().count() > 64 {
        Vec::new()
    } else {
        let needle = text.to_lowercase();
        groups_of(tenant, &state.user.open_id)
            .into_iter()
            .filter(|chat| {
                chat.name.to_lowercase().contains(&needle)
                    || chat.members.iter().any(|m| {
                        tenant.person(m).is_some_and(|p| {
                            p.name.contains(&text) || p.en_name.to_lowercase().contains(&needle)
                        })
                    })
            })
            .map(|c| list_item(tenant, c))
            .collect()
    };
    let (page, next) = paging.page(&items);
    ok(paged(json!({ "items": page }), next, "page_token"))
}

/// `GET /im/v1/chats/:chat_id`.
pub(crate) async fn get_chat(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(chat_id): Path<String>,
) -> ApiResult {
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let chat = tenant.chat(&chat_id).ok_or_else(|| {
        ApiError::new(
            400,
            232006,
            "Your request specifies a chat_id which is invalid.",
        )
    })?;
    let mut data = json!({
        "avatar": avatar(chat),
        "description": chat.description,
        "i18n_names": {},
        "user_manager_id_list": [],
        "bot_manager_id_list": [],
        "chat_mode": if chat.p2p { "p2p" } else { "group" },
        "edit_permission": "all_members",
        "moderation_permission": "all_members",
        "external": false,
        "tenant_key": tenant.tenant_key,
        "user_count": chat.user_count().to_string(),
        "bot_count": "0",
        "urgent_setting": "all_members",
        "video_conference_setting": "all_members",
        "hide_member_count_setting": "all_members",
        "chat_status": "normal",
    });
    if !chat.p2p {
        // 1:1 chats have no name, owner or group settings.
        let group = json!({
            "name": chat.name,
            "add_member_permission": "all_members",
            "share_card_permission": "allowed",
            "at_all_permission": if chat.user_count() > 50 { "only_owner" } else { "all_members" },
            "owner_id_type": "open_id",
            "owner_id": chat.owner,
            "group_message_type": "chat",
            "chat_type": "private",
            "chat_tag": "inner",
            "join_message_visibility": "all_members",
            "leave_message_visibility": "all_members",
            "membership_approval": "no_approval_required",
        });
        if let (Value::Object(data), Value::Object(group)) = (&mut data, group) {
            data.extend(group);
        }
    }
    ok(data)
}

pub(super) fn message_json(tenant: &Tenant, message: &Message) -> Value {
    let mut value = json!({
        "message_id": message.message_id,
        "msg_type": message.msg_type,
        "create_time": message.create_time.to_string(),
        "update_time": message.updated_at.unwrap_or(message.create_time).to_string(),
        "deleted": false,
        "updated": message.updated_at.is_some(),
        "chat_id": message.chat_id,
        // A bot's message names its app: Feishu's `sender` for an app is its app id.
        "sender": {
            "id": message.sender,
            "id_type": if message.by_app { "app_id" } else { "open_id" },
            "sender_type": if message.by_app { "app" } else { "user" },
            "tenant_key": tenant.tenant_key,
        },
        "body": { "content": message.content },
        "mentions": [],
    });
    for (field, id) in [
        ("root_id", &message.root_id),
        ("parent_id", &message.parent_id),
        ("thread_id", &message.thread_id),
    ] {
        if let Some(id) = id {
            value[field] = json!(id);
        }
    }
    value
}

/// `GET /im/v1/messages?container_id_type=chat&container_id=&sort_type=&page_size=`.
pub(crate) async fn list_messages(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    match query.get("container_id_type").map(String::as_str) {
        Some("chat") => {}
        // Threads are not part of the demo tenant.
        Some("thread") => return Err(message_error("the thread does not exist")),
        _ => return Err(message_error("container_id_type must be chat or thread")),
    }
    let chat_id = query
        .get("container_id")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| message_error("container_id is required"))?;
    let sort = query
        .get("sort_type")
        .map_or("ByCreateTimeAsc", String::as_str);
    if !["ByCreateTimeAsc", "ByCreateTimeDesc"].contains(&sort) {
        return Err(message_error("sort_type"));
    }
    let bound = |field: &str| -> Result<Option<i64>, ApiError> {
        query
            .get(field)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| message_error(&format!("{field} must be in seconds")))
            })
            .transpose()
    };
    let start = bound("start_time")?;
    let end = bound("end_time")?;
    // The token remembers the sort: Feishu does not allow changing it between pages.
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        20,
        50,
        &format!("messages\n{chat_id}\n{sort}\n{start:?}\n{end:?}"),
    )
    .map_err(|e| message_error(&e))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let chat = tenant
        .chat(chat_id)
        .ok_or_else(|| message_error("container_id does not name a chat"))?;
    if !chat.members.contains(&state.user.open_id) {
        return Err(ApiError::new(400, 230027, "Lack of necessary permissions."));
    }
    let mut messages: Vec<&Message> = tenant
        .messages
        .iter()
        .filter(|m| m.chat_id == *chat_id)
        .filter(|m| start.is_none_or(|s| m.create_time >= s * 1000))
        .filter(|m| end.is_none_or(|e| m.create_time <= e * 1000))
        .collect();
    messages.sort_by_key(|m| m.create_time);
    if sort == "ByCreateTimeDesc" {
        messages.reverse();
    }
    let items: Vec<Value> = messages.iter().map(|m| message_json(tenant, m)).collect();
    let (page, next) = paging.page(&items);
    ok(paged(json!({ "items": page }), next, "page_token"))
}

/// `GET /im/v1/messages/:message_id`: answers `items` with the one message.
pub(crate) async fn get_message(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(message_id): Path<String>,
) -> ApiResult {
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let message = tenant
        .messages
        .iter()
        .find(|m| m.message_id == message_id)
        .ok_or_else(|| message_error("message_id does not name a message"))?;
    if !tenant
        .chat(&message.chat_id)
        .is_some_and(|c| c.members.contains(&state.user.open_id))
    {
        return Err(ApiError::new(400, 230027, "Lack of necessary permissions."));
    }
    ok(json!({ "items": [message_json(tenant, message)] }))
}

/// A send's recipient (`receive_id_type`, `receive_id`) and message, checked as Feishu checks
/// them; the same for a user's send and the bot's.
pub(super) fn outgoing(
    query: &HashMap<String, String>,
    body: &Bytes,
) -> Result<(String, String, Draft), ApiError> {
    let body = json_body(body).map_err(|e| message_error(&e))?;
    let id_type = query
        .get("receive_id_type")
        .map(String::as_str)
        .filter(|t| ["open_id", "union_id", "user_id", "email", "chat_id"].contains(t))
        .ok_or_else(|| message_error("receive_id_type"))?
        .to_owned();
    let receive_id = body["receive_id"]
        .as_str()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| message_error("receive_id is required"))?
        .to_owned();
    Ok((id_type, receive_id, draft(&body)?))
}

/// The message a body describes, checked as Feishu checks it.
pub(super) struct Draft {
    pub(super) msg_type: String,
    pub(super) content: String,
    pub(super) uuid: Option<String>,
}

pub(super) fn draft(body: &Value) -> Result<Draft, ApiError> {
    const TYPES: &[&str] = &[
        "text",
        "post",
        "image",
        "file",
        "audio",
        "media",
        "sticker",
        "interactive",
        "share_chat",
        "share_user",
        "system",
    ];
    let msg_type = body["msg_type"]
        .as_str()
        .filter(|t| TYPES.contains(t))
        .ok_or_else(|| message_error("msg_type"))?;
    let content = body["content"]
        .as_str()
        .ok_or_else(|| message_error("content must be a JSON string"))?;
    if msg_type == "interactive" {
        // Feishu's card service judges a card's JSON itself (230099 with its sub-code).
        super::super::cards::validate(content)
            .map_err(|e| ApiError::new(400, 230099, e.to_string()))?;
    }
    let parsed: Value = serde_json::from_str(content)
        .map_err(|_| message_error("content must be a JSON string"))?;
    if msg_type == "text" && !parsed["text"].is_string() {
        return Err(message_error("text content needs a text field"));
    }
    let limit = if msg_type == "text" { 150 } else { 30 } * 1024;
    if content.len() > limit {
        return Err(ApiError::new(
            400,
            230025,
            "The length of the message content reaches its limit.",
        ));
    }
    let uuid = body["uuid"].as_str().filter(|u| !u.is_empty());
    if uuid.is_some_and(|u| u.chars().count() > 50) {
        return Err(message_error("uuid is longer than 50 characters"));
    }
    Ok(Draft {
        msg_type: msg_type.to_owned(),
        content: content.to_owned(),
        uuid: uuid.map(str::to_owned),
    })
}

/// The message an earlier send with the same `uuid` made within the hour, if any.
pub(super) fn deduplicated(
    tenant: &Tenant,
    app_id: &str,
    uuid: Option<&String>,
    now: i64,
) -> Option<Value> {
    let (message_id, at) = tenant
        .message_uuids
        .get(&(app_id.to_owned(), uuid?.clone()))?;
    if now - at >= UUID_WINDOW_MS {
        return None;
    }
    let message = tenant
        .messages
        .iter()
        .find(|m| m.message_id == *message_id)?;
    Some(message_json(tenant, message))
}

/// Stores a message sent through the API and answers it.
pub(super) fn store(
    tenant: &mut Tenant,
    app_id: &str,
    uuid: Option<String>,
    message: Message,
) -> Value {
    let answer = message_json(tenant, &message);
    if let Some(uuid) = uuid {
        tenant.message_uuids.insert(
            (app_id.to_owned(), uuid),
            (message.message_id.clone(), message.create_time),
        );
    }
    tenant.messages.push(message);
    answer
}

/// `POST /im/v1/messages?receive_id_type=`: to a chat, or to a person (their 1:1 chat with the
/// user, made on first use).
pub(crate) async fn send(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    if caller.bot {
        return super::bot::send_as_bot(&shared, &caller, &query, &body);
    }
    let (id_type, receive_id, draft) = outgoing(&query, &body)?;
    let mut state = shared.lock();
    let now = state.api.now_ms();
    let me = state.user.open_id.clone();
    let tenant = &mut state.api.tenant;
    if let Some(first) = deduplicated(tenant, &caller.app_id, draft.uuid.as_ref(), now) {
        return ok(first);
    }
    let invalid_receiver = || ApiError::new(400, 230034, "The receive_id is invalid.");
    let chat_id = if id_type == "chat_id" {
        let chat = tenant.chat(&receive_id).ok_or_else(invalid_receiver)?;
        if !chat.members.contains(&me) {
            return Err(ApiError::new(
                400,
                232011,
                "Operator can NOT be out of the chat.",
            ));
        }
        chat.chat_id.clone()
    } else {
        let person = tenant
            .person_by(&id_type, &receive_id)
            .ok_or_else(invalid_receiver)?
            .open_id
            .clone();
        let existing = tenant
            .chats
            .iter()
            .find(|c| c.p2p && c.members.contains(&me) && c.members.contains(&person));
        match existing {
            Some(chat) => chat.chat_id.clone(),
            None => {
                let chat_id = format!("oc_{}", random_hex());
                tenant.chats.push(Chat {
                    chat_id: chat_id.clone(),
                    name: String::new(),
                    description: String::new(),
                    p2p: true,
                    owner: me.clone(),
                    members: vec![me.clone(), person],
                    extra_members: 0,
                    created_at: now,
                });
                chat_id
            }
        }
    };
    let message = Message {
        message_id: format!("om_{}", random_hex()),
        chat_id,
        sender: me,
        msg_type: draft.msg_type,
        content: draft.content,
        create_time: now,
        root_id: None,
        parent_id: None,
        thread_id: None,
        via_api: true,
        by_app: false,
        updated_at: None,
    };
    ok(store(tenant, &caller.app_id, draft.uuid, message))
}

/// `POST /im/v1/messages/:message_id/reply`.
pub(crate) async fn reply(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(message_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| message_error(&e))?;
    let draft = draft(&body)?;
    let in_thread = body["reply_in_thread"].as_bool().unwrap_or(false);
    let mut state = shared.lock();
    let now = state.api.now_ms();
    let me = state.user.open_id.clone();
    let tenant = &mut state.api.tenant;
    if let Some(first) = deduplicated(tenant, &caller.app_id, draft.uuid.as_ref(), now) {
        return ok(first);
    }
    let parent = tenant
        .messages
        .iter()
        .find(|m| m.message_id == message_id)
        .cloned()
        .ok_or_else(|| message_error("message_id does not name a message"))?;
    if !tenant
        .chat(&parent.chat_id)
        .is_some_and(|c| c.members.contains(&me))
    {
        return Err(ApiError::new(
            400,
            232011,
            "Operator can NOT be out of the chat.",
        ));
    }
    let thread_id = if in_thread {
        Some(
            parent
                .thread_id
                .clone()
                .unwrap_or_else(|| format!("omt_{}", &random_hex()[..16])),
        )
    } else {
        parent.thread_id.clone()
    };
    let message = Message {
        message_id: format!("om_{}", random_hex()),
        chat_id: parent.chat_id.clone(),
        sender: me,
        msg_type: draft.msg_type,
        content: draft.content,
        create_time: now,
        root_id: Some(parent.root_id.clone().unwrap_or(parent.message_id.clone())),
        parent_id: Some(parent.message_id.clone()),
        thread_id,
        via_api: true,
        by_app: false,
        updated_at: None,
    };
    ok(store(tenant, &caller.app_id, draft.uuid, message))
}
