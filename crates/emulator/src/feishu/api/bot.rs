//! The app's own identity: `tenant_access_token` from the App ID and Secret, the bot's
//! information, and what the bot sends — messages (cards above all) into a person's 1:1 chat
//! with the bot, and updates of its cards (`PATCH /im/v1/messages/:message_id`), every version
//! kept for tests.
//!
//! Sources: "自建应用获取 tenant_access_token" (flat `{code,msg,tenant_access_token,expire}`, two
//! hours, the same token until under 30 minutes remain), "获取机器人信息" (flat `{code,msg,bot}`),
//! "发送消息" and "更新已发送的消息卡片" (bot scopes, 230006 without the bot capability, 230099
//! for a bad card, 230031 after 14 days, 230027 for another sender's message), and the generic
//! error codes 10014 (app secret invalid) and 99991663/99991668 (a token the API does not take).

use std::collections::{HashMap, HashSet};

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::super::cards::{self, BotCard, CardError, CardVersion};
use super::super::tenant::{Chat, Message};
use super::super::{Shared, now_millis};
use super::im::{deduplicated, message_error, outgoing, store};
use super::{ApiError, ApiResult, Caller, FeishuCode, json_body, ok, random_hex};

/// Tenant tokens live two hours…
const TENANT_TTL_MS: i64 = 2 * 3600 * 1000;
/// …and the same one is handed out until less than this remains.
const TENANT_RENEW_MS: i64 = 30 * 60 * 1000;
/// Cards can be updated for 14 days.
const UPDATE_WINDOW_MS: i64 = 14 * 24 * 3600 * 1000;

/// A tenant access token.
#[derive(Debug, Clone)]
pub(crate) struct TenantToken {
    pub(crate) app_id: String,
    pub(crate) expires_at: i64,
}

/// The bots' side of the tenant.
#[derive(Debug, Default)]
pub(crate) struct BotState {
    pub(crate) tenant_tokens: HashMap<String, TenantToken>,
    /// Apps whose bot capability is off (on by default).
    pub(crate) bot_off: HashSet<String>,
    /// Bot names set by tests; otherwise [`DEFAULT_BOT_NAME`].
    pub(crate) names: HashMap<String, String>,
    /// Every card a bot sent (and forwarded copies), by message id.
    pub(crate) cards: HashMap<String, BotCard>,
}

/// The name a bot has unless a test sets another.
pub const DEFAULT_BOT_NAME: &str = "Feishu Companion";

/// The bot's `open_id`: stable per app, in Feishu's `ou_` + 32 hex shape.
pub(crate) fn bot_open_id(app_id: &str) -> String {
    let digest = Sha256::digest(format!("bot:{app_id}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("ou_{}", &hex[..32])
}

/// A flat answer (`{code,msg,…}` without `data`), as the auth and bot endpoints give.
fn flat(mut body: Value) -> Response {
    body["code"] = json!(0);
    body["msg"] = json!("ok");
    let mut response = axum::Json(body).into_response();
    response.extensions_mut().insert(FeishuCode(0));
    response
}

/// `POST /open-apis/auth/v3/tenant_access_token/internal` with `{app_id, app_secret}`.
pub(crate) async fn tenant_access_token(State(shared): State<Shared>, body: Bytes) -> Response {
    shared.log(
        "POST",
        "/open-apis/auth/v3/tenant_access_token/internal",
        None,
    );
    let body = match json_body(&body) {
        Ok(body) => body,
        Err(e) => return ApiError::new(400, 10003, format!("invalid param: {e}")).into_response(),
    };
    let (Some(app_id), Some(secret)) = (body["app_id"].as_str(), body["app_secret"].as_str())
    else {
        return ApiError::new(
            400,
            10003,
            "invalid param: app_id and app_secret are required",
        )
        .into_response();
    };
    let mut state = shared.lock();
    let Some(app) = state.apps.get(app_id) else {
        return ApiError::new(400, 10003, "invalid param: app_id not found").into_response();
    };
    if app.app_secret != secret {
        return ApiError::new(400, 10014, "app secret invalid").into_response();
    }
    let now = now_millis();
    let reusable = state
        .bot
        .tenant_tokens
        .iter()
        .filter(|(_, t)| t.app_id == app_id)
        .max_by_key(|(_, t)| t.expires_at)
        .filter(|(_, t)| t.expires_at - now >= TENANT_RENEW_MS)
        .map(|(token, t)| (token.clone(), t.expires_at));
    let (token, expires_at) = reusable.unwrap_or_else(|| {
        let token = format!("t-{}{}", random_hex(), &random_hex()[..8]);
        let expires_at = now + TENANT_TTL_MS;
        state.bot.tenant_tokens.insert(
            token.clone(),
            TenantToken {
                app_id: app_id.to_owned(),
                expires_at,
            },
        );
        (token, expires_at)
    });
    flat(json!({
        "tenant_access_token": token,
        "expire": (expires_at - now) / 1000,
    }))
}

fn bot_off() -> ApiError {
    ApiError::new(400, 230006, "Bot ability is not activated.")
}

/// `GET /open-apis/bot/v3/info` (tenant token only).
pub(crate) async fn info(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    if !caller.bot {
        return Err(ApiError::new(
            400,
            99991668,
            "Invalid access token for authorization. user access token not support",
        ));
    }
    let state = shared.lock();
    if state.bot.bot_off.contains(&caller.app_id) {
        return Err(bot_off());
    }
    let name = state
        .bot
        .names
        .get(&caller.app_id)
        .cloned()
        .unwrap_or_else(|| DEFAULT_BOT_NAME.to_owned());
    Ok(flat(json!({
        "bot": {
            // 2: enabled in the tenant.
            "activate_status": 2,
            "app_name": name,
            "avatar_url": format!("https://example.invalid/static-resource/v1/{}~100x100.png", caller.app_id),
            "ip_white_list": [],
            "open_id": bot_open_id(&caller.app_id),
        }
    })))
}

fn card_error(e: &CardError) -> ApiError {
    ApiError::new(400, 230099, e.to_string())
}

/// `POST /open-apis/im/v1/messages` with a tenant token: the bot sends into its 1:1 chat with a
/// person (made on first use) or into a chat it is in.
pub(crate) fn send_as_bot(
    shared: &Shared,
    caller: &Caller,
    query: &HashMap<String, String>,
    body: &Bytes,
) -> ApiResult {
    let (id_type, receive_id, draft) = outgoing(query, body)?;
    let card = if draft.msg_type == "interactive" {
        Some(cards::validate(&draft.content).map_err(|e| card_error(&e))?)
    } else {
        None
    };
    let mut state = shared.lock();
    if state.bot.bot_off.contains(&caller.app_id) {
        return Err(bot_off());
    }
    let now = state.api.now_ms();
    let bot = bot_open_id(&caller.app_id);
    // The bot's `uuid`s are its own, apart from those of the same app acting as a user.
    let dedup_key = format!("{}#bot", caller.app_id);
    let tenant = &mut state.api.tenant;
    if let Some(first) = deduplicated(tenant, &dedup_key, draft.uuid.as_ref(), now) {
        return ok(first);
    }
    let (chat_id, person) = if id_type == "chat_id" {
        let chat = tenant
            .chat(&receive_id)
            .filter(|c| c.members.contains(&bot))
            .ok_or_else(|| ApiError::new(400, 230002, "Bot/User can NOT be out of the chat."))?;
        let person = chat.members.iter().find(|m| **m != bot).cloned();
        (chat.chat_id.clone(), person.unwrap_or_default())
    } else {
        let person = tenant
            .person_by(&id_type, &receive_id)
            .ok_or_else(|| ApiError::new(400, 230034, "The receive_id is invalid."))?
            .open_id
            .clone();
        let existing = tenant
            .chats
            .iter()
            .find(|c| c.p2p && c.members.contains(&bot) && c.members.contains(&person))
            .map(|c| c.chat_id.clone());
        let chat_id = existing.unwrap_or_else(|| {
            let chat_id = format!("oc_{}", random_hex());
            tenant.chats.push(Chat {
                chat_id: chat_id.clone(),
                name: String::new(),
                description: String::new(),
                p2p: true,
                owner: person.clone(),
                members: vec![person.clone(), bot.clone()],
                extra_members: 0,
                created_at: now,
            });
            chat_id
        });
        (chat_id, person)
    };
    let message = Message {
        message_id: format!("om_{}", random_hex()),
        chat_id: chat_id.clone(),
        sender: caller.app_id.clone(),
        msg_type: draft.msg_type,
        content: draft.content,
        create_time: now,
        root_id: None,
        parent_id: None,
        thread_id: None,
        via_api: true,
        by_app: true,
        updated_at: None,
    };
    let message_id = message.message_id.clone();
    let answer = store(tenant, &dedup_key, draft.uuid, message);
    if let Some(card) = card {
        state.bot.cards.insert(
            message_id.clone(),
            BotCard {
                message_id,
                app_id: caller.app_id.clone(),
                chat_id,
                open_id: person,
                card: card.clone(),
                versions: vec![CardVersion {
                    card,
                    source: "send".to_owned(),
                    at: now,
                }],
                toasts: Vec::new(),
                forwarded_from: None,
            },
        );
    }
    ok(answer)
}

/// Replaces a card's content (from a PATCH or a click's answer), keeping the old version.
/// Feishu refuses to turn a JSON 2.0 card into a 1.0 one (200830).
pub(crate) fn replace_card(
    shared: &Shared,
    message_id: &str,
    card: Value,
    source: &str,
) -> Result<(), CardError> {
    let mut state = shared.lock();
    let now = state.api.now_ms();
    if let Some(record) = state.bot.cards.get_mut(message_id) {
        if cards::is_v2(&record.card) && !cards::is_v2(&card) {
            return Err(CardError {
                code: cards::V2_TO_V1,
                path: "ROOT".to_owned(),
                msg: "a card of schema V2 cannot be updated to schema V1".to_owned(),
                value: "schema".to_owned(),
            });
        }
        record.card = card.clone();
        record.versions.push(CardVersion {
            card: card.clone(),
            source: source.to_owned(),
            at: now,
        });
    }
    if let Some(message) = state
        .api
        .tenant
        .messages
        .iter_mut()
        .find(|m| m.message_id == message_id)
    {
        message.content = card.to_string();
        message.updated_at = Some(now);
    }
    Ok(())
}

/// `PATCH /open-apis/im/v1/messages/:message_id`: a card's new content, by whoever sent it.
pub(crate) async fn patch(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(message_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| message_error(&e))?;
    let content = body["content"]
        .as_str()
        .ok_or_else(|| message_error("content must be a JSON string"))?;
    if content.len() > 30 * 1024 {
        return Err(ApiError::new(
            400,
            230025,
            "The length of the message content reaches its limit.",
        ));
    }
    {
        let state = shared.lock();
        if caller.bot && state.bot.bot_off.contains(&caller.app_id) {
            return Err(bot_off());
        }
        let message = state
            .api
            .tenant
            .messages
            .iter()
            .find(|m| m.message_id == message_id)
            .ok_or_else(|| message_error("message_id does not name a message"))?;
        if message.msg_type != "interactive" {
            return Err(message_error(
                "only cards (interactive messages) can be updated",
            ));
        }
        // The identity that updates must be the one that sent.
        let same_sender = if caller.bot {
            message.by_app && message.sender == caller.app_id
        } else {
            !message.by_app && message.via_api && message.sender == state.user.open_id
        };
        if !same_sender {
            return Err(ApiError::new(400, 230027, "Lack of necessary permissions."));
        }
        if state.api.now_ms() - message.create_time > UPDATE_WINDOW_MS {
            return Err(ApiError::new(
                400,
                230031,
                "Message can only be modified within 14 days after sending.",
            ));
        }
    }
    let card = cards::validate(content).map_err(|e| card_error(&e))?;
    replace_card(&shared, &message_id, card, "patch").map_err(|e| card_error(&e))?;
    ok(json!({}))
}

/// The cards bots sent to `open_id` (everyone's when `None`), oldest first.
pub(crate) fn cards_of(shared: &Shared, open_id: Option<&str>) -> Vec<BotCard> {
    let state = shared.lock();
    let mut cards: Vec<BotCard> = state
        .bot
        .cards
        .values()
        .filter(|c| open_id.is_none_or(|o| c.open_id == o))
        .cloned()
        .collect();
    cards.sort_by_key(|c| (c.versions.first().map(|v| v.at), c.message_id.clone()));
    cards
}

/// `GET /_emulator/cards?open_id=`: the cards bots sent, with every version.
pub(crate) async fn list_cards(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> axum::Json<Vec<BotCard>> {
    axum::Json(cards_of(&shared, query.get("open_id").map(String::as_str)))
}

/// `GET /_emulator/cards/{message_id}`.
pub(crate) async fn get_card(
    State(shared): State<Shared>,
    Path(message_id): Path<String>,
) -> Response {
    match shared.lock().bot.cards.get(&message_id) {
        Some(card) => axum::Json(card.clone()).into_response(),
        None => (
            axum::http::StatusCode::NOT_FOUND,
            axum::Json(json!({"error": format!("no card {message_id}")})),
        )
            .into_response(),
    }
}
