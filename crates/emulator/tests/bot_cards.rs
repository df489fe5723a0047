//! The app's bot on the emulator: tenant tokens, the bot's information, cards sent as the bot
//! into the user's 1:1 chat, card updates with every version kept, and Feishu's error for each
//! thing done wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{
    APP, SECRET, USER, approval_card, call, send_card, start, start_with_scopes, tenant_token,
};
use emulator::feishu::{App, DEFAULT_BOT_NAME, scopes};
use serde_json::json;

const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";
const SEND: &str = "/open-apis/im/v1/messages?receive_id_type=open_id";

#[tokio::test]
async fn the_tenant_token_comes_from_the_app_secret_and_is_reused_while_fresh() {
    let emulator = start().await;
    let body = json!({"app_id": APP, "app_secret": SECRET});
    let (status, first) = call(&emulator, None, "POST", TOKEN_PATH, Some(body.clone())).await;
    assert_eq!((status, first["code"].as_i64()), (200, Some(0)), "{first}");
    let token = first["tenant_access_token"].as_str().unwrap();
    assert!(token.starts_with("t-"), "{token}");
    assert!(
        (7190..=7200).contains(&first["expire"].as_i64().unwrap()),
        "{first}"
    );
    assert!(first.get("data").is_none(), "the answer is flat: {first}");
    let (_, second) = call(&emulator, None, "POST", TOKEN_PATH, Some(body)).await;
    assert_eq!(second["tenant_access_token"], first["tenant_access_token"]);

    let wrong = json!({"app_id": APP, "app_secret": "guess"});
    let (status, refused) = call(&emulator, None, "POST", TOKEN_PATH, Some(wrong)).await;
    assert_eq!(
        (status, refused["code"].as_i64()),
        (400, Some(10014)),
        "{refused}"
    );
    assert_eq!(refused["msg"], "app secret invalid");
    let unknown = json!({"app_id": "cli_nobody", "app_secret": SECRET});
    let (_, refused) = call(&emulator, None, "POST", TOKEN_PATH, Some(unknown)).await;
    assert_eq!(refused["code"], 10003, "{refused}");
}

#[tokio::test]
async fn bot_info_names_the_bot_and_fails_with_the_bot_capability_off() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let (status, info) = call(&emulator, Some(&token), "GET", scopes::BOT_INFO, None).await;
    assert_eq!((status, info["code"].as_i64()), (200, Some(0)), "{info}");
    assert_eq!(info["bot"]["app_name"], DEFAULT_BOT_NAME);
    assert_eq!(info["bot"]["activate_status"], 2);
    assert_eq!(info["bot"]["open_id"], emulator.bot_open_id(APP));
    assert!(emulator.bot_open_id(APP).starts_with("ou_"));

    emulator.set_bot_name(APP, "审批助手");
    let (_, info) = call(&emulator, Some(&token), "GET", scopes::BOT_INFO, None).await;
    assert_eq!(info["bot"]["app_name"], "审批助手");

    emulator.set_bot_enabled(APP, false);
    let (status, off) = call(&emulator, Some(&token), "GET", scopes::BOT_INFO, None).await;
    assert_eq!((status, off["code"].as_i64()), (400, Some(230006)), "{off}");
    let card = approval_card("c1");
    let (_, off) = call(
        &emulator,
        Some(&token),
        "POST",
        SEND,
        Some(json!({"receive_id": USER, "msg_type": "interactive", "content": card.to_string()})),
    )
    .await;
    assert_eq!(off["code"], 230006, "sending needs the bot too: {off}");

    // The console switch over HTTP turns it back on.
    let (status, _) = call(
        &emulator,
        None,
        "POST",
        &format!("/_emulator/apps/{APP}"),
        Some(json!({"bot": true})),
    )
    .await;
    assert_eq!(status, 204);
    let (_, info) = call(&emulator, Some(&token), "GET", scopes::BOT_INFO, None).await;
    assert_eq!(info["code"], 0, "{info}");
}

#[tokio::test]
async fn each_token_only_reaches_its_own_endpoints() {
    let emulator = start().await;
    let tenant = tenant_token(&emulator).await;
    let user = emulator.issue_token(APP, &["im:message", "calendar:calendar:readonly"]);
    let (_, refused) = call(&emulator, Some(&user), "GET", scopes::BOT_INFO, None).await;
    assert_eq!(refused["code"], 99991668, "{refused}");
    let (_, refused) = call(
        &emulator,
        Some(&tenant),
        "POST",
        scopes::PRIMARY_CALENDAR,
        None,
    )
    .await;
    assert_eq!(refused["code"], 99991663, "{refused}");
    emulator.expire_tenant_tokens();
    let (_, expired) = call(&emulator, Some(&tenant), "GET", scopes::BOT_INFO, None).await;
    assert_eq!(expired["code"], 99991663, "{expired}");
}

#[tokio::test]
async fn the_bot_sends_a_card_into_its_chat_with_the_user_and_keeps_it() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let card = approval_card("call-1");
    let (status, sent) = call(
        &emulator,
        Some(&token),
        "POST",
        SEND,
        Some(json!({"receive_id": USER, "msg_type": "interactive", "content": card.to_string()})),
    )
    .await;
    assert_eq!((status, sent["code"].as_i64()), (200, Some(0)), "{sent}");
    let message = &sent["data"];
    assert_eq!(message["sender"]["sender_type"], "app");
    assert_eq!(message["sender"]["id_type"], "app_id");
    assert_eq!(message["sender"]["id"], APP);
    assert_eq!(message["msg_type"], "interactive");
    let message_id = message["message_id"].as_str().unwrap();

    let cards = emulator.bot_cards(Some(USER));
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0].message_id, message_id);
    assert_eq!(cards[0].app_id, APP);
    assert_eq!(cards[0].card, card);
    assert_eq!(cards[0].versions.len(), 1);
    assert_eq!(cards[0].versions[0].source, "send");
    assert_eq!(
        emulator.chat_of_message(message_id).as_deref(),
        Some(cards[0].chat_id.as_str())
    );

    // A second card goes into the same 1:1 chat; the hook lists both over HTTP too.
    let second = send_card(&emulator, &token, &approval_card("call-2")).await;
    assert_eq!(
        emulator.chat_of_message(&second),
        Some(cards[0].chat_id.clone())
    );
    let (status, listed) = call(
        &emulator,
        None,
        "GET",
        &format!("/_emulator/cards?open_id={USER}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [message_id, second.as_str()]);
    let (_, one) = call(
        &emulator,
        None,
        "GET",
        &format!("/_emulator/cards/{second}"),
        None,
    )
    .await;
    assert_eq!(
        one["card"]["body"]["elements"][1]["name"], "decision",
        "{one}"
    );
    let (status, _) = call(&emulator, None, "GET", "/_emulator/cards/om_nothing", None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_card_feishu_would_refuse_is_refused_with_its_code() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let send = |content: String| {
        let emulator = &emulator;
        let token = &token;
        async move {
            call(
                emulator,
                Some(token),
                "POST",
                SEND,
                Some(json!({"receive_id": USER, "msg_type": "interactive", "content": content})),
            )
            .await
        }
    };
    let (status, refused) = send("{\"schema\": \"2.0\", \"body\": ".to_owned()).await;
    assert_eq!(
        (status, refused["code"].as_i64()),
        (400, Some(230099)),
        "{refused}"
    );
    assert!(
        refused["msg"].as_str().unwrap().contains("ErrCode: 200621"),
        "{refused}"
    );

    let mut old_module = approval_card("c");
    old_module["body"]["elements"] = json!([{"tag": "action", "actions": []}]);
    let (_, refused) = send(old_module.to_string()).await;
    assert!(
        refused["msg"].as_str().unwrap().contains("ErrCode: 200861"),
        "{refused}"
    );

    let mut unnamed = approval_card("c");
    unnamed["body"]["elements"][1]["elements"][0]["name"] = json!("");
    let (_, refused) = send(unnamed.to_string()).await;
    assert!(
        refused["msg"].as_str().unwrap().contains("ErrCode: 200530"),
        "{refused}"
    );

    let mut huge = approval_card("c");
    huge["body"]["elements"][0]["content"] = json!("长".repeat(11_000));
    let (_, refused) = send(huge.to_string()).await;
    assert_eq!(refused["code"], 230025, "over 30 KB: {refused}");

    assert!(
        emulator.bot_cards(None).is_empty(),
        "nothing refused was kept"
    );
}

#[tokio::test]
async fn sending_as_the_bot_needs_a_bot_scope_the_app_enabled() {
    let emulator = start_with_scopes(&[]).await;
    let token = tenant_token(&emulator).await;
    let card = approval_card("c");
    let (status, refused) = call(
        &emulator,
        Some(&token),
        "POST",
        SEND,
        Some(json!({"receive_id": USER, "msg_type": "interactive", "content": card.to_string()})),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_i64()),
        (400, Some(99991672)),
        "{refused}"
    );
    let subjects: Vec<&str> = refused["error"]["permission_violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, scopes::BOT_SEND);
    assert!(
        refused["msg"]
            .as_str()
            .unwrap()
            .contains("im:message:send_as_bot")
    );

    emulator.register_app(App {
        app_id: APP.to_owned(),
        app_secret: SECRET.to_owned(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec!["im:message:send_as_bot".to_owned()],
    });
    send_card(&emulator, &token, &card).await;
}

#[tokio::test]
async fn the_bot_updates_its_own_cards_and_every_version_is_kept() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let message_id = send_card(&emulator, &token, &approval_card("c1")).await;
    let path = format!("/open-apis/im/v1/messages/{message_id}");
    let mut decided = approval_card("c1");
    decided["header"]["template"] = json!("green");
    decided["body"]["elements"] = json!([{"tag": "markdown", "content": "已批准"}]);
    let (status, patched) = call(
        &emulator,
        Some(&token),
        "PATCH",
        &path,
        Some(json!({"content": decided.to_string()})),
    )
    .await;
    assert_eq!(
        (status, patched["code"].as_i64()),
        (200, Some(0)),
        "{patched}"
    );
    let card = emulator.card(&message_id).unwrap();
    assert_eq!(card.card, decided);
    let sources: Vec<&str> = card.versions.iter().map(|v| v.source.as_str()).collect();
    assert_eq!(sources, ["send", "patch"]);
    assert_eq!(card.versions[0].card, approval_card("c1"));

    // Reading the message shows the new content, marked updated.
    let reader = emulator.issue_token(APP, &["im:message"]);
    let (_, got) = call(&emulator, Some(&reader), "GET", &path, None).await;
    let item = &got["data"]["items"][0];
    assert_eq!(item["updated"], true, "{got}");
    assert_eq!(
        item["body"]["content"].as_str().unwrap(),
        decided.to_string()
    );

    // A bad card, and a 2.0 card turned into a 1.0 one, change nothing.
    let (_, refused) = call(
        &emulator,
        Some(&token),
        "PATCH",
        &path,
        Some(json!({"content": "{"})),
    )
    .await;
    assert_eq!(refused["code"], 230099, "{refused}");
    let v1 = json!({"elements": [{"tag": "div", "text": {"tag": "plain_text", "content": "x"}}]});
    let (_, refused) = call(
        &emulator,
        Some(&token),
        "PATCH",
        &path,
        Some(json!({"content": v1.to_string()})),
    )
    .await;
    assert!(
        refused["msg"].as_str().unwrap().contains("ErrCode: 200830"),
        "{refused}"
    );
    assert_eq!(emulator.card(&message_id).unwrap().versions.len(), 2);

    // After 14 days a card can no longer be updated.
    emulator.advance_clock(Duration::from_secs(15 * 24 * 3600));
    let (_, late) = call(
        &emulator,
        Some(&token),
        "PATCH",
        &path,
        Some(json!({"content": decided.to_string()})),
    )
    .await;
    assert_eq!(late["code"], 230031, "{late}");
}

#[tokio::test]
async fn only_the_sender_updates_a_card_and_only_cards_are_updated() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let message_id = send_card(&emulator, &token, &approval_card("c1")).await;
    let body = Some(json!({"content": approval_card("c2").to_string()}));
    let path = format!("/open-apis/im/v1/messages/{message_id}");

    // Another app's bot.
    emulator.register_app(App {
        app_id: "cli_other".to_owned(),
        app_secret: "other".to_owned(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec!["im:message".to_owned()],
    });
    let other = emulator.issue_tenant_token("cli_other");
    let (_, refused) = call(&emulator, Some(&other), "PATCH", &path, body.clone()).await;
    assert_eq!(refused["code"], 230027, "{refused}");
    // The user, with a token of the same app.
    let user = emulator.issue_token(APP, &["im:message"]);
    let (_, refused) = call(&emulator, Some(&user), "PATCH", &path, body.clone()).await;
    assert_eq!(refused["code"], 230027, "{refused}");
    // A text message the bot sent is not a card.
    let (_, text) = call(
        &emulator,
        Some(&token),
        "POST",
        SEND,
        Some(json!({"receive_id": USER, "msg_type": "text", "content": "{\"text\":\"hi\"}"})),
    )
    .await;
    let text_id = text["data"]["message_id"].as_str().unwrap();
    let (_, refused) = call(
        &emulator,
        Some(&token),
        "PATCH",
        &format!("/open-apis/im/v1/messages/{text_id}"),
        body.clone(),
    )
    .await;
    assert_eq!(refused["code"], 230001, "{refused}");
    let (_, refused) = call(
        &emulator,
        Some(&token),
        "PATCH",
        "/open-apis/im/v1/messages/om_none",
        body,
    )
    .await;
    assert_eq!(refused["code"], 230001, "{refused}");
    assert_eq!(emulator.card(&message_id).unwrap().versions.len(), 1);
}

#[tokio::test]
async fn the_preview_draws_the_bots_cards_as_html() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let message_id = send_card(&emulator, &token, &approval_card("c1")).await;
    let http = common::http();
    let page = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", emulator.base_url());
        async move {
            let response = http.get(url).send().await.unwrap();
            let status = response.status().as_u16();
            let kind = response
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, kind, response.text().await.unwrap())
        }
    };
    let (status, kind, html) = page(format!("/_emulator/cards/preview?open_id={USER}")).await;
    assert_eq!(status, 200);
    assert_eq!(kind.as_deref(), Some("text/html; charset=utf-8"));
    assert!(html.contains("发消息到 产品周会"), "{html}");
    assert!(html.contains(&message_id));
    assert!(
        html.contains("class=\"btn primary\" data-name=\"approve\""),
        "{html}"
    );
    let (status, _, one) = page(format!("/_emulator/cards/{message_id}/preview")).await;
    assert_eq!(status, 200);
    assert!(one.contains("拒绝理由（可选）"), "{one}");
    let (status, _, _) = page("/_emulator/cards/om_none/preview".to_owned()).await;
    assert_eq!(status, 404);

    let draft = http
        .post(format!("{}/_emulator/cards/preview", emulator.base_url()))
        .body(json!({"schema": "2.0", "body": {"elements": [{"tag": "note"}]}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(draft.status().as_u16(), 400);
    assert!(draft.text().await.unwrap().contains("200861"));
}
