//! Feishu's long connection on the emulator, driven by a small client in Feishu's frame format:
//! the endpoint and its errors, pings and pongs, card callbacks delivered when a test clicks a
//! card (the answer's toast and card applied), split payloads, and the fault hooks (dropped
//! connections, an outage, a replayed callback, a forwarded card, a tampered value).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use common::{APP, SECRET, USER, approval_card, call, send_card, start, tenant_token};
use emulator::feishu::{Click, ClickError, ClientConfig, FeishuEmulator};
use futures::{SinkExt as _, StreamExt as _};
use lark_frame::{Frame, METHOD_CONTROL, METHOD_DATA, header, kind};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const ENDPOINT: &str = "/callback/ws/endpoint";

/// A data frame's headers and its whole payload.
type Received = (HashMap<String, String>, Value);

/// What the test app answers to a callback.
#[derive(Clone)]
enum Reply {
    /// `{"code":200,"data":base64(json)}`.
    Answer(Value),
    /// Never answers.
    Silent,
    /// `{"code":500}`: the handler failed.
    Fail,
}

/// The app's side: one connection, answering every data frame with `reply`, reassembling split
/// payloads; what it received is kept.
struct TestApp {
    /// Whole payloads of data frames, with their headers.
    received: Arc<Mutex<Vec<Received>>>,
    /// Payloads of pongs.
    pongs: Arc<Mutex<Vec<Value>>>,
    ping: tokio::sync::mpsc::UnboundedSender<()>,
    closed: Arc<Mutex<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn endpoint_url(emulator: &FeishuEmulator) -> (String, Value) {
    let (status, body) = call(
        emulator,
        None,
        "POST",
        ENDPOINT,
        Some(json!({"AppID": APP, "AppSecret": SECRET})),
    )
    .await;
    assert_eq!((status, body["code"].as_i64()), (200, Some(0)), "{body}");
    (
        body["data"]["URL"].as_str().unwrap().to_owned(),
        body["data"]["ClientConfig"].clone(),
    )
}

async fn connect(emulator: &FeishuEmulator, reply: Reply) -> TestApp {
    let (url, _) = endpoint_url(emulator).await;
    let query: HashMap<String, String> = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let service: i32 = query["service_id"].parse().unwrap();
    let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .unwrap();
    let (mut sink, mut stream) = socket.split();
    let received = Arc::new(Mutex::new(Vec::new()));
    let pongs = Arc::new(Mutex::new(Vec::new()));
    let closed = Arc::new(Mutex::new(false));
    let (ping, mut pings) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (r, p, c) = (received.clone(), pongs.clone(), closed.clone());
    let task = tokio::spawn(async move {
        let mut parts: HashMap<String, Vec<Option<Vec<u8>>>> = HashMap::new();
        loop {
            tokio::select! {
                Some(()) = pings.recv() => {
                    let frame = Frame::control(kind::PING, service);
                    sink.send(Message::Binary(frame.to_bytes().into())).await.unwrap();
                }
                incoming = stream.next() => {
                    let Some(Ok(Message::Binary(bytes))) = incoming else {
                        *c.lock().unwrap() = true;
                        return;
                    };
                    let mut frame = Frame::from_bytes(&bytes).unwrap();
                    if frame.method == METHOD_CONTROL {
                        assert_eq!(frame.kind(), Some(kind::PONG));
                        let payload = frame.payload.clone().unwrap_or_default();
                        p.lock().unwrap().push(serde_json::from_slice(&payload).unwrap());
                        continue;
                    }
                    assert_eq!(frame.method, METHOD_DATA);
                    let id = frame.header(header::MESSAGE_ID).unwrap().to_owned();
                    let sum: usize = frame.header(header::SUM).unwrap().parse().unwrap();
                    let seq: usize = frame.header(header::SEQ).unwrap().parse().unwrap();
                    let slots = parts.entry(id.clone()).or_insert_with(|| vec![None; sum]);
                    slots[seq] = frame.payload.clone();
                    if slots.iter().any(Option::is_none) {
                        continue;
                    }
                    let whole: Vec<u8> = parts.remove(&id).unwrap().into_iter().flatten().flatten().collect();
                    let headers = frame.headers.iter().map(|h| (h.key.clone(), h.value.clone())).collect();
                    r.lock().unwrap().push((headers, serde_json::from_slice(&whole).unwrap()));
                    let answer = match &reply {
                        Reply::Silent => continue,
                        Reply::Fail => json!({"code": 500}),
                        Reply::Answer(v) => json!({
                            "code": 200,
                            "data": base64::engine::general_purpose::STANDARD.encode(v.to_string()),
                        }),
                    };
                    frame.set_header(header::BIZ_RT, "3");
                    frame.payload = Some(answer.to_string().into_bytes());
                    sink.send(Message::Binary(frame.to_bytes().into())).await.unwrap();
                }
            }
        }
    });
    assert!(
        emulator
            .wait_for_long_connections(APP, 1, Duration::from_secs(5))
            .await
    );
    TestApp {
        received,
        pongs,
        ping,
        closed,
        task,
    }
}

fn decided_card() -> Value {
    json!({
        "schema": "2.0",
        "config": {"update_multi": true},
        "header": {"title": {"tag": "plain_text", "content": "已批准"}, "template": "green"},
        "body": {"elements": [{"tag": "markdown", "content": "林晓 批准于 10:02"}]}
    })
}

async fn with_card(reply: Reply) -> (FeishuEmulator, TestApp, String) {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let message_id = send_card(&emulator, &token, &approval_card("call-7")).await;
    let app = connect(&emulator, reply).await;
    (emulator, app, message_id)
}

fn approve() -> Click {
    Click {
        name: "approve".to_owned(),
        ..Click::default()
    }
}

#[tokio::test]
async fn the_endpoint_hands_out_a_url_and_the_client_config_or_feishus_refusal() {
    let emulator = start().await;
    let (url, config) = endpoint_url(&emulator).await;
    let parsed = url::Url::parse(&url).unwrap();
    assert_eq!(parsed.scheme(), "ws");
    let query: HashMap<String, String> = parsed.query_pairs().into_owned().collect();
    assert!(query["device_id"].parse::<u64>().is_ok(), "{url}");
    assert!(query["service_id"].parse::<i32>().is_ok(), "{url}");
    assert_eq!(
        config,
        json!({"ReconnectCount": -1, "ReconnectInterval": 120, "ReconnectNonce": 30, "PingInterval": 120})
    );

    let (_, wrong) = call(
        &emulator,
        None,
        "POST",
        ENDPOINT,
        Some(json!({"AppID": APP, "AppSecret": "x"})),
    )
    .await;
    assert_eq!(wrong["code"], 514, "{wrong}");
    emulator.set_long_connection_enabled(APP, false);
    let (_, off) = call(
        &emulator,
        None,
        "POST",
        ENDPOINT,
        Some(json!({"AppID": APP, "AppSecret": SECRET})),
    )
    .await;
    assert_eq!(off["code"], 403, "{off}");
    emulator.set_long_connection_enabled(APP, true);
    emulator.long_connection_outage(Duration::from_secs(60));
    let (status, busy) = call(
        &emulator,
        None,
        "POST",
        ENDPOINT,
        Some(json!({"AppID": APP, "AppSecret": SECRET})),
    )
    .await;
    assert_eq!((status, busy["code"].as_i64()), (200, Some(1)), "{busy}");
    emulator.end_long_connection_outage();
    endpoint_url(&emulator).await;
}

#[tokio::test]
async fn a_ping_is_answered_with_a_pong_carrying_the_client_config() {
    let emulator = start().await;
    let config = ClientConfig {
        reconnect_count: 5,
        reconnect_interval: 2,
        reconnect_nonce: 0,
        ping_interval: 10,
    };
    emulator.set_long_connection_config(config);
    let app = connect(&emulator, Reply::Silent).await;
    app.ping.send(()).unwrap();
    app.ping.send(()).unwrap();
    for _ in 0..250 {
        if app.pongs.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pongs = app.pongs.lock().unwrap().clone();
    assert_eq!(pongs.len(), 2);
    assert_eq!(pongs[0], serde_json::to_value(config).unwrap());
    assert_eq!(pongs[0]["PingInterval"], 10);
    assert_eq!(emulator.long_connection_status().pings.get(APP), Some(&2));
}

#[tokio::test]
async fn a_click_arrives_as_feishus_callback_and_the_answer_updates_the_card() {
    let answer = json!({
        "toast": {"type": "success", "content": "已批准", "i18n": {"zh_cn": "已批准", "en_us": "Approved"}},
        "card": {"type": "raw", "data": decided_card()},
    });
    let (emulator, app, message_id) = with_card(Reply::Answer(answer.clone())).await;
    let mut click = approve();
    click
        .form_value
        .insert("reason".to_owned(), json!("看过了"));
    let outcome = emulator.click_card(&message_id, click).await.unwrap();

    let received = app.received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    let (headers, callback) = &received[0];
    // Feishu's SDKs only handle callbacks framed as `event`.
    assert_eq!(headers["type"], "event");
    assert_eq!(
        (headers["sum"].as_str(), headers["seq"].as_str()),
        ("1", "0")
    );
    assert!(!headers["trace_id"].is_empty() && !headers["message_id"].is_empty());
    assert_eq!(callback["schema"], "2.0");
    assert_eq!(callback["header"]["event_type"], "card.action.trigger");
    assert_eq!(callback["header"]["app_id"], APP);
    assert_eq!(
        callback["header"]["create_time"].as_str().unwrap().len(),
        16,
        "microseconds"
    );
    assert_eq!(callback["event"]["operator"]["open_id"], USER);
    assert_eq!(callback["event"]["action"]["tag"], "button");
    assert_eq!(callback["event"]["action"]["name"], "approve");
    assert_eq!(
        callback["event"]["action"]["value"],
        json!({"call_id": "call-7", "decision": "approve"})
    );
    assert_eq!(
        callback["event"]["action"]["form_value"],
        json!({"reason": "看过了"})
    );
    assert_eq!(callback["event"]["host"], "im_message");
    assert_eq!(
        callback["event"]["context"]["open_message_id"],
        message_id.as_str()
    );
    let card = emulator.card(&message_id).unwrap();
    assert_eq!(
        callback["event"]["context"]["open_chat_id"],
        card.chat_id.as_str()
    );
    assert!(
        callback["event"]["token"]
            .as_str()
            .unwrap()
            .starts_with("c-")
    );
    assert_eq!(outcome.callback, *callback);

    assert_eq!(outcome.code, 200);
    assert_eq!(
        outcome.event_id,
        callback["header"]["event_id"].as_str().unwrap()
    );
    assert_eq!(outcome.toast, Some(answer["toast"].clone()));
    assert_eq!(outcome.response, answer);
    assert!(outcome.updated);
    assert_eq!(outcome.card, decided_card());
    assert_eq!(card.card, decided_card());
    let sources: Vec<&str> = card.versions.iter().map(|v| v.source.as_str()).collect();
    assert_eq!(sources, ["send", "callback"]);
    assert_eq!(card.toasts, vec![answer["toast"].clone()]);
}

#[tokio::test]
async fn the_click_hook_works_over_http_too() {
    let answer = json!({"toast": {"type": "info", "content": "收到"}});
    let (emulator, _app, message_id) = with_card(Reply::Answer(answer)).await;
    let (status, outcome) = call(
        &emulator,
        None,
        "POST",
        &format!("/_emulator/cards/{message_id}/click"),
        Some(json!({"name": "reject", "operator_open_id": USER, "form_value": {"reason": "时间不合适"}})),
    )
    .await;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["toast"]["content"], "收到");
    assert_eq!(
        outcome["updated"], false,
        "no card in the answer: the card stays"
    );
    assert_eq!(
        outcome["callback"]["event"]["action"]["value"]["decision"],
        "reject"
    );
    assert_eq!(outcome["card"], approval_card("call-7"));
    let (status, refused) = call(
        &emulator,
        None,
        "POST",
        &format!("/_emulator/cards/{message_id}/click"),
        Some(json!({"name": "nothing"})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["reason"]["kind"], "no_element");
}

#[tokio::test]
async fn clicks_that_cannot_happen_are_refused_and_silence_times_out() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let mut card = approval_card("c9");
    card["body"]["elements"][1]["elements"][1]["columns"][0]["elements"][0]["disabled"] =
        json!(true);
    let message_id = send_card(&emulator, &token, &card).await;
    // Nobody connected yet.
    let err = emulator
        .click_card(
            &message_id,
            Click {
                name: "reject".into(),
                ..Click::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err, ClickError::NotConnected(APP.to_owned()));

    let app = connect(&emulator, Reply::Silent).await;
    let err = emulator
        .click_card(&message_id, approve())
        .await
        .unwrap_err();
    assert_eq!(err, ClickError::Disabled("approve".to_owned()));
    let mut typo = Click {
        name: "reject".into(),
        ..Click::default()
    };
    typo.form_value.insert("reasons".to_owned(), json!("x"));
    assert_eq!(
        emulator.click_card(&message_id, typo).await.unwrap_err(),
        ClickError::NoField("reasons".to_owned())
    );
    let stranger = Click {
        name: "reject".into(),
        operator_open_id: Some("ou_nobody".into()),
        ..Click::default()
    };
    assert_eq!(
        emulator
            .click_card(&message_id, stranger)
            .await
            .unwrap_err(),
        ClickError::NoPerson("ou_nobody".to_owned())
    );
    assert!(matches!(
        emulator
            .click_card("om_missing", approve())
            .await
            .unwrap_err(),
        ClickError::NoCard(_)
    ));
    assert!(
        app.received.lock().unwrap().is_empty(),
        "nothing refused was delivered"
    );

    let silent = Click {
        name: "reject".into(),
        timeout_ms: Some(200),
        ..Click::default()
    };
    let silent_later = silent.clone();
    assert_eq!(
        emulator.click_card(&message_id, silent).await.unwrap_err(),
        ClickError::Timeout(200)
    );
    assert_eq!(
        app.received.lock().unwrap().len(),
        1,
        "delivered, never answered"
    );
    assert_eq!(emulator.card(&message_id).unwrap().versions.len(), 1);

    // After 14 days the card no longer takes clicks.
    emulator.advance_clock(Duration::from_secs(15 * 24 * 3600));
    assert_eq!(
        emulator
            .click_card(&message_id, silent_later)
            .await
            .unwrap_err(),
        ClickError::Expired
    );
    assert_eq!(app.received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_handler_and_a_bad_card_in_the_answer_change_nothing() {
    let (emulator, _app, message_id) = with_card(Reply::Fail).await;
    let outcome = emulator.click_card(&message_id, approve()).await.unwrap();
    assert_eq!((outcome.code, outcome.updated), (500, false));
    assert_eq!(emulator.card(&message_id).unwrap().versions.len(), 1);

    let v1 = json!({"card": {"type": "raw", "data": {"elements": [{"tag": "div"}]}}});
    let (emulator, _app, message_id) = with_card(Reply::Answer(v1)).await;
    let outcome = emulator.click_card(&message_id, approve()).await.unwrap();
    assert!(!outcome.updated);
    assert!(outcome.card_error.unwrap().contains("200830"));
    assert_eq!(outcome.card, approval_card("call-7"));
}

#[tokio::test]
async fn large_payloads_arrive_in_parts_that_add_up() {
    let answer = json!({"toast": {"type": "info", "content": "ok"}});
    let (emulator, app, message_id) = with_card(Reply::Answer(answer)).await;
    emulator.set_long_connection_part_size(Some(100));
    let outcome = emulator.click_card(&message_id, approve()).await.unwrap();
    assert_eq!(outcome.code, 200);
    let (headers, callback) = app.received.lock().unwrap()[0].clone();
    let sum: usize = headers["sum"].parse().unwrap();
    assert!(sum > 3, "{sum} parts");
    assert_eq!(
        headers["seq"],
        (sum - 1).to_string(),
        "the last part completed it"
    );
    assert_eq!(callback, outcome.callback);
}

#[tokio::test]
async fn a_replayed_callback_carries_the_same_event_id() {
    let answer = json!({"toast": {"type": "info", "content": "ok"}});
    let (emulator, app, message_id) = with_card(Reply::Answer(answer)).await;
    let first = emulator.click_card(&message_id, approve()).await.unwrap();
    let again = emulator
        .replay_last_callback(Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(again.event_id, first.event_id);
    assert_eq!(again.callback, first.callback);
    let received = app.received.lock().unwrap().clone();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].1, received[1].1,
        "byte for byte the same callback"
    );
    assert_ne!(
        received[0].0["message_id"], received[1].0["message_id"],
        "a new frame"
    );
    let (status, replayed) = call(
        &emulator,
        None,
        "POST",
        "/_emulator/long_connection/replay",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(replayed["event_id"], first.event_id.as_str());
}

#[tokio::test]
async fn a_tampered_value_reaches_the_app_as_sent() {
    let (emulator, app, message_id) = with_card(Reply::Answer(json!({}))).await;
    let forged = json!({"call_id": "call-7", "decision": "approve", "args_hash": "forged"});
    let click = Click {
        value: Some(forged.clone()),
        ..approve()
    };
    emulator.click_card(&message_id, click).await.unwrap();
    assert_eq!(
        app.received.lock().unwrap()[0].1["event"]["action"]["value"],
        forged
    );
}

#[tokio::test]
async fn a_forwarded_card_is_clicked_by_someone_else_only_if_the_card_allows_it() {
    let emulator = start().await;
    let token = tenant_token(&emulator).await;
    let plain = send_card(&emulator, &token, &approval_card("c1")).await;
    let mut open = approval_card("c2");
    open["config"]["enable_forward_interaction"] = json!(true);
    let forwardable = send_card(&emulator, &token, &open).await;
    let app = connect(&emulator, Reply::Answer(json!({}))).await;
    let colleague = emulator
        .seed()
        .people
        .iter()
        .find(|p| p.open_id != USER)
        .unwrap()
        .open_id
        .clone();

    let copy = emulator.forward_card(&plain, &colleague).unwrap();
    let click = Click {
        operator_open_id: Some(colleague.clone()),
        ..approve()
    };
    assert_eq!(
        emulator.click_card(&copy, click.clone()).await.unwrap_err(),
        ClickError::ForwardedNotInteractive
    );

    let (status, forwarded) = call(
        &emulator,
        None,
        "POST",
        &format!("/_emulator/cards/{forwardable}/forward"),
        Some(json!({"to_open_id": colleague})),
    )
    .await;
    assert_eq!(status, 200, "{forwarded}");
    let copy = forwarded["message_id"].as_str().unwrap();
    assert_ne!(copy, forwardable);
    let outcome = emulator.click_card(copy, click).await.unwrap();
    let callback = &outcome.callback["event"];
    assert_eq!(callback["operator"]["open_id"], colleague.as_str());
    assert_eq!(callback["context"]["open_message_id"], copy);
    assert_eq!(
        callback["action"]["value"]["call_id"], "c2",
        "the copy carries the original's value"
    );
    assert_eq!(app.received.lock().unwrap().len(), 1);
    assert_eq!(
        emulator.card(copy).unwrap().forwarded_from.as_deref(),
        Some(forwardable.as_str())
    );
}

#[tokio::test]
async fn the_server_drops_connections_and_an_outage_refuses_new_ones() {
    let (emulator, app, message_id) = with_card(Reply::Answer(json!({}))).await;
    assert_eq!(emulator.drop_long_connections(Some(APP)), 1);
    for _ in 0..250 {
        if *app.closed.lock().unwrap() && emulator.long_connection_status().connections.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(*app.closed.lock().unwrap(), "the client saw the close");
    assert!(emulator.long_connection_status().connections.is_empty());
    assert!(matches!(
        emulator
            .click_card(&message_id, approve())
            .await
            .unwrap_err(),
        ClickError::NotConnected(_)
    ));

    // A URL is good for one connection only.
    let (url, _) = endpoint_url(&emulator).await;
    let app = connect_to(&url).await.unwrap();
    drop(app);
    let reused = connect_to(&url).await.unwrap_err();
    assert_eq!(reused.0, 403);
    assert_eq!(reused.1.as_deref(), Some("403"));

    // An outage: connections drop, the endpoint is busy, a URL handed out before is refused.
    let (url, _) = endpoint_url(&emulator).await;
    let (status, _) = call(
        &emulator,
        None,
        "POST",
        "/_emulator/long_connection/outage",
        Some(json!({"seconds": 30})),
    )
    .await;
    assert_eq!(status, 204);
    assert!(emulator.long_connection_status().outage);
    let refused = connect_to(&url).await.unwrap_err();
    assert_eq!(refused.0, 503);
    assert_eq!(refused.1.as_deref(), Some("1000040343"));
    let (status, _) = call(
        &emulator,
        None,
        "DELETE",
        "/_emulator/long_connection/outage",
        None,
    )
    .await;
    assert_eq!(status, 204);
    let _back = connect(&emulator, Reply::Answer(json!({}))).await;
    assert!(emulator.click_card(&message_id, approve()).await.is_ok());
}

/// Opens a WebSocket to `url`: the socket, or the refusal's HTTP status and `Handshake-Status`.
async fn connect_to(
    url: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, Option<String>),
> {
    match tokio_tungstenite::connect_async(url).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err((
            response.status().as_u16(),
            response
                .headers()
                .get("handshake-status")
                .map(|v| v.to_str().unwrap().to_owned()),
        )),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_click_while_another_connection_closes_reaches_the_open_one() {
    // The app's "Check connection" opens a connection and closes it at once, while its real one
    // stays open: a click at that moment must not be lost on the closing one.
    let (emulator, app, message_id) = with_card(Reply::Answer(json!({}))).await;
    for round in 0..20 {
        let (url, _) = endpoint_url(&emulator).await;
        let mut probe = connect_to(&url).await.unwrap();
        assert!(
            emulator
                .wait_for_long_connections(APP, 2, Duration::from_secs(5))
                .await
        );
        probe.close(None).await.unwrap();
        let outcome = emulator
            .click_card(
                &message_id,
                Click {
                    timeout_ms: Some(5000),
                    ..approve()
                },
            )
            .await;
        assert!(outcome.is_ok(), "round {round}: {outcome:?}");
    }
    assert_eq!(app.received.lock().unwrap().len(), 20);
}
