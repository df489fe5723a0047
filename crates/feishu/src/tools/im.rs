//! Chats and messages.

use std::sync::Arc;

use agent::{Localized, Preview, PreviewField, Risk};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::time::local;
use super::{FeishuTool, Spec, ToolEnv, object_schema, opt_text, people, pick, text_arg};
use crate::api::{ApiError, PageStyle};
use crate::ids::{ApiPath, IdKind};

const CHATS: &str = "im:chat:readonly";
const MESSAGES: &str = "im:message:readonly";
const GROUP_AS_USER: &str = "im:message.group_msg:get_as_user";
const SEND: &str = "im:message";
const SEND_AS_USER: &str = "im:message.send_as_user";

/// Messaging a group larger than this is marked high-risk on the card.
pub const LARGE_CHAT: i64 = 50;

pub(crate) fn tools(env: &Arc<ToolEnv>) -> Vec<FeishuTool> {
    vec![
        FeishuTool::read(
            Spec {
                name: "list_chats",
                description: "List the user's chats, or search them by name.",
                parameters: object_schema(
                    json!({"query": {"type": "string", "description": "Part of a chat's name; omit to list all."}}),
                    &[],
                ),
                scopes: &[CHATS],
                dedup: false,
                ids: &[],
            },
            env,
            |env, args, _| Box::pin(list_chats(env, args)),
        ),
        FeishuTool::read(
            Spec {
                name: "read_chat_messages",
                description: "Read a chat's most recent messages, newest first.",
                parameters: object_schema(
                    json!({
                        "chat_id": IdKind::Chat.schema("As list_chats returned it."),
                        "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "How many (default 20)."}
                    }),
                    &["chat_id"],
                ),
                scopes: &[MESSAGES, GROUP_AS_USER],
                dedup: false,
                ids: &[("chat_id", IdKind::Chat)],
            },
            env,
            |env, args, _| Box::pin(read_messages(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "send_message",
                description: "Send a text message as the user to a chat (chat_id) or a person (user_id = open_id). Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "chat_id": IdKind::Chat.schema("As list_chats returned it."),
                        "user_id": IdKind::OpenId.schema("A person's open_id, for a direct message."),
                        "text": {"type": "string"}
                    }),
                    &["text"],
                ),
                // What sending needs; the card's chat name uses im:chat:readonly when granted.
                scopes: &[SEND, SEND_AS_USER],
                dedup: true,
                ids: &[("chat_id", IdKind::Chat), ("user_id", IdKind::OpenId)],
            },
            env,
            |env, args, key| Box::pin(send(env, args, key)),
            |env, args| Box::pin(preview_send(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "reply_message",
                description: "Reply as the user to a message. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "message_id": IdKind::Message.schema("As read_chat_messages returned it."),
                        "text": {"type": "string"}
                    }),
                    &["message_id", "text"],
                ),
                scopes: &[SEND, SEND_AS_USER],
                dedup: true,
                ids: &[("message_id", IdKind::Message)],
            },
            env,
            |env, args, key| Box::pin(reply(env, args, key)),
            |env, args| Box::pin(preview_reply(env, args)),
        ),
    ]
}

async fn list_chats(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let (path, mut query) = match opt_text(&args, "query") {
        Some(q) => (ApiPath::new("im/v1/chats/search"), vec![("query", q)]),
        None => (ApiPath::new("im/v1/chats"), Vec::new()),
    };
    query.push(("page_size", "50".into()));
    let items = env
        .api
        .collect(&path, query, "items", PageStyle::PageToken, Some(200))
        .await?;
    let chats: Vec<Value> = items
        .iter()
        .map(|c| pick(c, &["chat_id", "name", "description"]))
        .collect();
    Ok(json!({"chats": chats}))
}

/// The readable text of a message body (`content` is a JSON string in Feishu's API).
fn message_text(message: &Value) -> String {
    let content = message
        .pointer("/body/content")
        .and_then(Value::as_str)
        .unwrap_or("");
    let parsed: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    if let Some(text) = parsed.get("text").and_then(Value::as_str) {
        return text.to_owned();
    }
    // Rich text ("post"): the words of every element, line by line.
    let mut lines = Vec::new();
    if let Some(title) = parsed
        .get("title")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        lines.push(title.to_owned());
    }
    for line in parsed
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let words: String = line
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|el| el.get("text").and_then(Value::as_str))
            .collect();
        lines.push(words);
    }
    if lines.is_empty() {
        format!(
            "[{}]",
            message
                .get("msg_type")
                .and_then(Value::as_str)
                .unwrap_or("message")
        )
    } else {
        lines.join("\n")
    }
}

async fn read_messages(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let chat = text_arg(&args, "chat_id")?;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(20)
        .clamp(1, 200) as usize;
    let query = vec![
        ("container_id_type", "chat".to_owned()),
        ("container_id", chat),
        ("sort_type", "ByCreateTimeDesc".to_owned()),
        ("page_size", limit.min(50).to_string()),
    ];
    let items = env
        .api
        .collect(
            &ApiPath::new("im/v1/messages"),
            query,
            "items",
            PageStyle::PageToken,
            Some(limit),
        )
        .await?;
    let messages: Vec<Value> = items
        .iter()
        .map(|m| {
            let at = m
                .get("create_time")
                .and_then(Value::as_str)
                .and_then(|ms| ms.parse::<i64>().ok())
                .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map(|t| local(t, &env.tz));
            json!({
                "message_id": m.get("message_id"),
                "sender": m.pointer("/sender/id"),
                "time": at,
                "text": message_text(m),
            })
        })
        .collect();
    Ok(json!({"time_zone": env.tz.iana_name(), "messages": messages}))
}

fn text_content(text: &str) -> String {
    json!({"text": text}).to_string()
}

async fn send(env: Arc<ToolEnv>, args: Map<String, Value>, key: String) -> Result<Value, ApiError> {
    let text = text_arg(&args, "text")?;
    let (kind, receiver) = match (opt_text(&args, "chat_id"), opt_text(&args, "user_id")) {
        (Some(chat), _) => ("chat_id", chat),
        (None, Some(user)) => ("open_id", user),
        (None, None) => return Err(ApiError::Malformed("give chat_id or user_id".into())),
    };
    // `uuid`: Feishu sends at most one message per uuid within an hour, so a retry after a
    // crash cannot send the message twice.
    let body = json!({"receive_id": receiver, "msg_type": "text", "content": text_content(&text), "uuid": key});
    let data = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("im/v1/messages"),
            &[("receive_id_type", kind.into())],
            Some(&body),
        )
        .await?;
    Ok(pick(&data, &["message_id", "chat_id", "create_time"]))
}

async fn reply(
    env: Arc<ToolEnv>,
    args: Map<String, Value>,
    key: String,
) -> Result<Value, ApiError> {
    let message = text_arg(&args, "message_id")?;
    let text = text_arg(&args, "text")?;
    let body = json!({"msg_type": "text", "content": text_content(&text), "uuid": key});
    let data = env
        .api
        .call(
            Method::POST,
            &message_path(&message)?.then("reply"),
            &[],
            Some(&body),
        )
        .await?;
    Ok(pick(&data, &["message_id", "chat_id", "create_time"]))
}

/// `im/v1/messages/{message_id}`.
fn message_path(message: &str) -> Result<ApiPath, ApiError> {
    Ok(ApiPath::new("im/v1/messages").id(IdKind::Message, "message_id", message)?)
}

async fn chat_info(env: &ToolEnv, chat: &str) -> Option<(String, i64)> {
    let data = env
        .api
        .call(
            Method::GET,
            &ApiPath::new("im/v1/chats")
                .id(IdKind::Chat, "chat_id", chat)
                .ok()?,
            &[],
            None,
        )
        .await
        .ok()?;
    let name = data
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(chat)
        .to_owned();
    let count = match data.get("user_count") {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    };
    Some((name, count))
}

async fn preview_send(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let text = opt_text(&args, "text").unwrap_or_default();
    let mut risk = Risk::Normal;
    let mut fields = Vec::new();
    let (zh_target, en_target) = if let Some(chat) = opt_text(&args, "chat_id") {
        let (name, members) = chat_info(&env, &chat).await.unwrap_or((chat.clone(), 0));
        if members > LARGE_CHAT {
            risk = Risk::High;
        }
        // Named as its own field so an "always allow for this chat" choice can say which chat.
        fields.push(PreviewField {
            label: Localized::new("会话", "Chat"),
            value: name.clone(),
        });
        if members > 0 {
            fields.push(PreviewField {
                label: Localized::new("群成员", "Members"),
                value: members.to_string(),
            });
        }
        (format!("群「{name}」"), format!("the group “{name}”"))
    } else {
        let id = opt_text(&args, "user_id").unwrap_or_default();
        let name = people::names(&env, &[id]).await.pop().unwrap_or_default();
        (name.clone(), name)
    };
    fields.insert(
        0,
        PreviewField {
            label: Localized::new("内容", "Message"),
            value: text,
        },
    );
    Preview {
        summary: Localized::new(
            format!("以你的身份向{zh_target}发送消息"),
            format!("Send a message to {en_target} as you"),
        ),
        risk,
        fields,
        changes: Vec::new(),
    }
}

async fn preview_reply(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let text = opt_text(&args, "text").unwrap_or_default();
    let message = opt_text(&args, "message_id").unwrap_or_default();
    let original = match message_path(&message) {
        Ok(path) => env
            .api
            .call(Method::GET, &path, &[], None)
            .await
            .ok()
            .and_then(|d| d.pointer("/items/0").cloned())
            .map(|m| message_text(&m)),
        Err(_) => None,
    };
    let mut fields = vec![PreviewField {
        label: Localized::new("回复内容", "Reply"),
        value: text,
    }];
    if let Some(original) = original {
        fields.push(PreviewField {
            label: Localized::new("原消息", "In reply to"),
            value: original,
        });
    }
    Preview {
        summary: Localized::new("以你的身份回复一条消息", "Reply to a message as you"),
        risk: Risk::Normal,
        fields,
        changes: Vec::new(),
    }
}
