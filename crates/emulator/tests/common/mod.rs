//! What the bot and long-connection tests share: an emulator with one registered app, plain
//! HTTP calls in Feishu's envelope, and an approval card in JSON 2.0.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use emulator::feishu::{App, FeishuEmulator, PREFERRED_SCOPES};
use serde_json::{Value, json};

pub const APP: &str = "cli_bot_test_app";
pub const SECRET: &str = "bot-secret";
pub const USER: &str = "ou_demo_linxiao";

pub async fn start() -> FeishuEmulator {
    start_with_scopes(&["im:message:send_as_bot"]).await
}

/// An emulator whose app has enabled the tools' scopes plus `extra`.
pub async fn start_with_scopes(extra: &[&str]) -> FeishuEmulator {
    let emulator = FeishuEmulator::start().await.unwrap();
    let mut enabled: Vec<String> = PREFERRED_SCOPES
        .iter()
        .filter(|s| **s != "im:message")
        .map(|s| (*s).to_owned())
        .collect();
    enabled.extend(extra.iter().map(|s| (*s).to_owned()));
    emulator.register_app(App {
        app_id: APP.to_owned(),
        app_secret: SECRET.to_owned(),
        redirect_uris: vec!["http://127.0.0.1:9768/callback".to_owned()],
        enabled_scopes: enabled,
    });
    emulator
}

pub fn http() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// `method path?query` with `token`: the HTTP status and the JSON body.
pub async fn call(
    emulator: &FeishuEmulator,
    token: Option<&str>,
    method: &str,
    path_and_query: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = http().request(method, format!("{}{path_and_query}", emulator.base_url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A tenant token through the real endpoint.
pub async fn tenant_token(emulator: &FeishuEmulator) -> String {
    let (status, body) = call(
        emulator,
        None,
        "POST",
        "/open-apis/auth/v3/tenant_access_token/internal",
        Some(json!({"app_id": APP, "app_secret": SECRET})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["tenant_access_token"].as_str().unwrap().to_owned()
}

/// An approval card: a summary, a reason field and Approve / Reject submitting the form.
pub fn approval_card(call_id: &str) -> Value {
    json!({
        "schema": "2.0",
        "config": {"update_multi": true},
        "header": {
            "title": {"tag": "plain_text", "content": "发消息到 产品周会"},
            "subtitle": {"tag": "plain_text", "content": "等待你的批准"},
            "template": "orange"
        },
        "body": {"elements": [
            {"tag": "markdown", "content": "**内容**：明天下午 3 点评审"},
            {"tag": "form", "name": "decision", "elements": [
                {"tag": "input", "name": "reason",
                 "placeholder": {"tag": "plain_text", "content": "拒绝理由（可选）"}},
                {"tag": "column_set", "columns": [
                    {"tag": "column", "elements": [
                        {"tag": "button", "name": "approve", "type": "primary",
                         "text": {"tag": "plain_text", "content": "批准"},
                         "form_action_type": "submit",
                         "behaviors": [{"type": "callback", "value": {"call_id": call_id, "decision": "approve"}}]}
                    ]},
                    {"tag": "column", "elements": [
                        {"tag": "button", "name": "reject", "type": "danger",
                         "text": {"tag": "plain_text", "content": "拒绝"},
                         "form_action_type": "submit",
                         "behaviors": [{"type": "callback", "value": {"call_id": call_id, "decision": "reject"}}]}
                    ]}
                ]}
            ]}
        ]}
    })
}

/// Sends `card` as the bot to the demo user: the message id.
pub async fn send_card(emulator: &FeishuEmulator, token: &str, card: &Value) -> String {
    let (status, body) = call(
        emulator,
        Some(token),
        "POST",
        "/open-apis/im/v1/messages?receive_id_type=open_id",
        Some(json!({"receive_id": USER, "msg_type": "interactive", "content": card.to_string()})),
    )
    .await;
    assert_eq!((status, body["code"].as_i64()), (200, Some(0)), "{body}");
    body["data"]["message_id"].as_str().unwrap().to_owned()
}
