//! Feishu's long connection (长连接) on the emulator: the endpoint an app calls with its App ID
//! and Secret for a WebSocket URL, the WebSocket of binary `pbbp2.Frame`s ([`lark_frame`]) with
//! its pings and pongs, and card callbacks (`card.action.trigger`) delivered over it when a test
//! "clicks" a card's button — the app's answer (toast, updated card) applied to the stored card.
//! Fault hooks drop the connections, refuse the endpoint and new connections for a while, replay
//! the last callback unchanged, and deliver clicks on forwarded copies of a card.
//!
//! Verified against Feishu's official Python SDK (`lark-oapi` 1.7.5: `ws/client.py`,
//! `ws/const.py`, `ws/model.py`, `event/dispatcher_handler.py`,
//! `event/callback/model/p2_card_action_trigger.py`) and the doc "卡片回传交互回调":
//! - the endpoint answers `{code, msg, data: {URL, ClientConfig: {ReconnectCount,
//!   ReconnectInterval, ReconnectNonce, PingInterval}}}`; the URL's query carries `device_id` and
//!   `service_id`. Code 1 (system busy) is retried by the SDK, any other non-zero code is not;
//!   a non-200 HTTP status is retried.
//! - a refused handshake answers headers `Handshake-Status` (514 auth failed with
//!   `Handshake-Autherrcode` 1000040350 for the connection limit, 403 forbidden: not retried;
//!   anything else is retried) and `Handshake-Msg`.
//! - card callbacks travel as data frames of `type` `event` (the SDK drops frames of type
//!   `card`), headers `message_id`, `sum`, `seq`, `trace_id`; the payload is the callback JSON
//!   (`schema` 2.0, `header.event_type` `card.action.trigger`). The client answers with the same
//!   frame, payload `{"code":200,"data":"<base64 of {toast, card}>"}`.
//! - a `ping` control frame is answered with a `pong` whose payload is the ClientConfig JSON.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lark_frame::{Frame, METHOD_CONTROL, METHOD_DATA, header, kind};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::api::bot::replace_card;
use super::api::random_hex;
use super::cards::{self, CardVersion};
use super::tenant::{Chat, Message};
use super::{Shared, now_millis};

/// Path of the WebSocket (Feishu's is `wss://msg-frontier.feishu.cn/ws/v2`).
const WS_PATH: &str = "/ws/v2";
/// Feishu's limit of connections per app.
const MAX_CONNECTIONS: usize = 50;
/// The SDK's codes (ws/const.py).
const SYSTEM_BUSY: i64 = 1;
const FORBIDDEN: i64 = 403;
const AUTH_FAILED: i64 = 514;
const INTERNAL_ERROR: i64 = 1000040343;
const EXCEED_CONN_LIMIT: i64 = 1000040350;
/// JSON 2.0 cards can be interacted with for 14 days.
const INTERACTION_WINDOW_MS: i64 = 14 * 24 * 3600 * 1000;
/// Feishu waits 3 seconds for a callback's answer.
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(3);

/// How the server tells clients to behave (seconds), sent by the endpoint and in every pong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ClientConfig {
    /// Attempts after a lost connection; negative: forever.
    pub reconnect_count: i64,
    /// Seconds between attempts.
    pub reconnect_interval: u64,
    /// Up to this many seconds of random wait before the first attempt.
    pub reconnect_nonce: u64,
    /// Seconds between pings.
    pub ping_interval: u64,
}

impl Default for ClientConfig {
    /// The SDKs' defaults.
    fn default() -> Self {
        ClientConfig {
            reconnect_count: -1,
            reconnect_interval: 120,
            reconnect_nonce: 30,
            ping_interval: 120,
        }
    }
}

enum Outgoing {
    Frame(Vec<u8>),
    Close,
}

struct Connection {
    id: u64,
    app_id: String,
    device_id: String,
    service_id: i32,
    tx: mpsc::UnboundedSender<Outgoing>,
}

struct Ticket {
    app_id: String,
    device_id: String,
    service_id: i32,
}

/// A callback as it was delivered, for the replay hook.
#[derive(Clone)]
struct Delivered {
    app_id: String,
    message_id: String,
    payload: Vec<u8>,
}

/// The long connection's state.
#[derive(Default)]
pub(crate) struct LongConnState {
    next_id: u64,
    connections: Vec<Connection>,
    tickets: HashMap<String, Ticket>,
    /// Frame `message_id` → the connection it went to, and who waits for the client's answer.
    pending: HashMap<String, (u64, oneshot::Sender<Vec<u8>>)>,
    /// Apps that have not turned on receiving callbacks through the long connection.
    off: HashSet<String>,
    /// Milliseconds until which the endpoint and new connections are refused.
    outage_until: Option<i64>,
    last: Option<Delivered>,
    pings: HashMap<String, usize>,
    config: ClientConfig,
    /// Split payloads into parts of at most this many bytes (Feishu splits large ones).
    part_size: Option<usize>,
    next_seq: u64,
}

impl std::fmt::Debug for LongConnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LongConnState")
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

impl LongConnState {
    fn in_outage(&self) -> bool {
        self.outage_until.is_some_and(|until| until > now_millis())
    }

    /// Closes the connections of `app_id` (of every app with `None`).
    pub(crate) fn drop_connections(&mut self, app_id: Option<&str>) -> usize {
        let mut dropped = 0;
        for conn in &self.connections {
            if app_id.is_none_or(|a| a == conn.app_id) {
                let _ = conn.tx.send(Outgoing::Close);
                dropped += 1;
            }
        }
        dropped
    }
}

pub(crate) fn routes() -> axum::Router<Shared> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/callback/ws/endpoint", post(endpoint))
        .route(WS_PATH, get(connect))
        .route("/_emulator/cards/{message_id}/click", post(click_hook))
        .route("/_emulator/cards/{message_id}/forward", post(forward_hook))
        .route("/_emulator/long_connection", get(status_hook))
        .route("/_emulator/long_connection/drop", post(drop_hook))
        .route(
            "/_emulator/long_connection/outage",
            post(outage_hook).delete(end_outage_hook),
        )
        .route("/_emulator/long_connection/replay", post(replay_hook))
}

fn answer(code: i64, msg: &str, data: Option<Value>) -> Response {
    let mut body = json!({"code": code, "msg": msg});
    if let Some(data) = data {
        body["data"] = data;
    }
    Json(body).into_response()
}

/// `POST /callback/ws/endpoint` with `{"AppID","AppSecret"}`.
async fn endpoint(State(shared): State<Shared>, body: Bytes) -> Response {
    shared.log("POST", "/callback/ws/endpoint", None);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let app_id = body["AppID"].as_str().unwrap_or_default();
    let secret = body["AppSecret"].as_str().unwrap_or_default();
    let mut state = shared.lock();
    if state.longconn.in_outage() {
        return answer(SYSTEM_BUSY, "system busy", None);
    }
    if app_id.is_empty() || secret.is_empty() {
        return answer(
            AUTH_FAILED,
            "auth failed: AppID and AppSecret are required",
            None,
        );
    }
    if state
        .apps
        .get(app_id)
        .is_none_or(|a| a.app_secret != secret)
    {
        return answer(AUTH_FAILED, "auth failed: app secret invalid", None);
    }
    if state.longconn.off.contains(app_id) {
        return answer(
            FORBIDDEN,
            "forbidden: the app does not receive events and callbacks through the long connection",
            None,
        );
    }
    let device_id = format!("{}", 7_000_000_000_000_000_000u64 + u64::from(rand_u32()));
    let service_id = i32::try_from(rand_u32() % 900_000 + 100_000).unwrap_or(100_000);
    let ticket = uuid::Uuid::new_v4().to_string();
    let url = format!(
        "{}{WS_PATH}?fpid=493&aid=552564&device_id={device_id}&access_key={}&service_id={service_id}&ticket={ticket}",
        state.base_url.replacen("http://", "ws://", 1),
        random_hex(),
    );
    state.longconn.tickets.insert(
        ticket,
        Ticket {
            app_id: app_id.to_owned(),
            device_id,
            service_id,
        },
    );
    let config = state.longconn.config;
    answer(0, "ok", Some(json!({"URL": url, "ClientConfig": config})))
}

fn rand_u32() -> u32 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// A refused handshake, with the headers Feishu's SDKs read.
fn refuse_handshake(status: StatusCode, code: i64, msg: &str, auth: Option<i64>) -> Response {
    let mut response = (status, msg.to_owned()).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        ("Handshake-Status", Some(code.to_string())),
        ("Handshake-Msg", Some(msg.to_owned())),
        ("Handshake-Autherrcode", auth.map(|a| a.to_string())),
    ] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    response
}

/// `GET /ws/v2?device_id=&service_id=&ticket=…`: the WebSocket.
async fn connect(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    shared.log("GET", WS_PATH, None);
    let (tx, rx) = mpsc::unbounded_channel();
    let id = {
        let mut state = shared.lock();
        let lc = &mut state.longconn;
        if lc.in_outage() {
            return refuse_handshake(
                StatusCode::SERVICE_UNAVAILABLE,
                INTERNAL_ERROR,
                "system busy",
                None,
            );
        }
        // Tickets are good once: every (re)connection starts at the endpoint.
        let ticket = query
            .get("ticket")
            .and_then(|t| lc.tickets.remove(t))
            .filter(|t| {
                query.get("device_id") == Some(&t.device_id)
                    && query.get("service_id") == Some(&t.service_id.to_string())
            });
        let Some(ticket) = ticket else {
            return refuse_handshake(
                StatusCode::FORBIDDEN,
                FORBIDDEN,
                "forbidden: invalid or used connection ticket",
                None,
            );
        };
        if lc.off.contains(&ticket.app_id) {
            return refuse_handshake(StatusCode::FORBIDDEN, FORBIDDEN, "forbidden", None);
        }
        let open = lc
            .connections
            .iter()
            .filter(|c| c.app_id == ticket.app_id)
            .count();
        if open >= MAX_CONNECTIONS {
            return refuse_handshake(
                StatusCode::FORBIDDEN,
                AUTH_FAILED,
                "exceed connection limit",
                Some(EXCEED_CONN_LIMIT),
            );
        }
        lc.next_id += 1;
        let id = lc.next_id;
        lc.connections.push(Connection {
            id,
            app_id: ticket.app_id,
            device_id: ticket.device_id,
            service_id: ticket.service_id,
            tx,
        });
        id
    };
    upgrade.on_upgrade(move |socket| serve_socket(shared, id, socket, rx))
}

async fn serve_socket(
    shared: Shared,
    id: u64,
    mut socket: WebSocket,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
) {
    loop {
        tokio::select! {
            // What the client sent first: a connection it has closed gets no more callbacks.
            biased;
            incoming = socket.recv() => match incoming {
                Some(Ok(WsMessage::Binary(bytes))) => {
                    if let Some(reply) = on_frame(&shared, id, &bytes) {
                        let _ = socket.send(WsMessage::Binary(reply.into())).await;
                    }
                }
                Some(Ok(WsMessage::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            out = rx.recv() => match out {
                Some(Outgoing::Frame(bytes)) => {
                    if socket.send(WsMessage::Binary(bytes.into())).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Close) | None => {
                    let _ = socket.send(WsMessage::Close(None)).await;
                    break;
                }
            },
        }
    }
    let mut state = shared.lock();
    let lc = &mut state.longconn;
    lc.connections.retain(|c| c.id != id);
    // Callbacks this connection took and never answered (queued, or written as the client
    // closed): dropping their waiters sends them to another open connection, as Feishu pushes
    // again what a connection did not acknowledge.
    lc.pending.retain(|_, (conn, _)| *conn != id);
}

/// A frame from the client: a ping (answered with a pong) or the answer to a data frame.
fn on_frame(shared: &Shared, id: u64, bytes: &[u8]) -> Option<Vec<u8>> {
    let frame = Frame::from_bytes(bytes).ok()?;
    let mut state = shared.lock();
    let lc = &mut state.longconn;
    let conn = lc.connections.iter().find(|c| c.id == id)?;
    let (app_id, service) = (conn.app_id.clone(), conn.service_id);
    if frame.method == METHOD_CONTROL && frame.kind() == Some(kind::PING) {
        *lc.pings.entry(app_id).or_default() += 1;
        let mut pong = Frame::control(kind::PONG, service);
        pong.payload = serde_json::to_vec(&lc.config).ok();
        return Some(pong.to_bytes());
    }
    if frame.method == METHOD_DATA
        && let Some(message_id) = frame.header(header::MESSAGE_ID)
        && let Some((_, waiter)) = lc.pending.remove(message_id)
    {
        let _ = waiter.send(frame.payload.unwrap_or_default());
    }
    None
}

/// Why a click reached no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum ClickError {
    /// The message is not a card a bot sent.
    #[error("no card {0}")]
    NoCard(String),
    /// The card has no element with that name.
    #[error("the card has no element named {0}")]
    NoElement(String),
    /// The element is disabled: Feishu's client does not let it be clicked.
    #[error("{0} is disabled")]
    Disabled(String),
    /// The element sends no callback (no `callback` behaviour).
    #[error("{0} sends no callback")]
    NotInteractive(String),
    /// A field the form does not have.
    #[error("the form has no field {0}")]
    NoField(String),
    /// The operator is not a person of the tenant.
    #[error("no person {0}")]
    NoPerson(String),
    /// The card was sent more than 14 days ago: Feishu's client no longer lets it be used.
    #[error("the card was sent over 14 days ago and cannot be interacted with")]
    Expired,
    /// A forwarded copy of a card whose config does not allow interaction after forwarding.
    #[error("forwarded cards are not interactive unless config.enable_forward_interaction")]
    ForwardedNotInteractive,
    /// No connection of the app is open (Feishu: the app is not online).
    #[error("the app {0} has no open long connection")]
    NotConnected(String),
    /// No answer within the timeout (Feishu: 200341).
    #[error("the app did not answer within {0} ms")]
    Timeout(u64),
    /// Nothing to replay.
    #[error("no callback was delivered yet")]
    NothingDelivered,
}

/// What a click came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClickOutcome {
    /// `header.event_id` of the callback.
    pub event_id: String,
    /// The `code` of the client's answer frame (200 handled, 500 the handler failed).
    pub code: i64,
    /// The toast of the app's answer, if any.
    pub toast: Option<Value>,
    /// The app's whole answer (`{toast, card}`), decoded; `null` without one.
    pub response: Value,
    /// Whether the answer replaced the card.
    pub updated: bool,
    /// Why the answer's card was refused (Feishu: 200672/200673), if it was.
    pub card_error: Option<String>,
    /// The card as it stands after the click.
    pub card: Value,
    /// The callback payload that was delivered.
    pub callback: Value,
}

/// A click on a card, as the test hook takes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Click {
    /// The element's `name` (a button, or a form's submit button).
    pub name: String,
    /// Who clicks (`ou_…`); the signed-in demo user when absent.
    #[serde(default)]
    pub operator_open_id: Option<String>,
    /// Values typed into the form's fields, by field name.
    #[serde(default)]
    pub form_value: HashMap<String, Value>,
    /// Sends this as `action.value` instead of the card's (a tampered callback).
    #[serde(default)]
    pub value: Option<Value>,
    /// Milliseconds to wait for the app's answer (3 s, Feishu's limit, when absent).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// Builds the `card.action.trigger` callback for `click` on `message_id`.
fn callback_for(
    shared: &Shared,
    message_id: &str,
    click: &Click,
) -> Result<(String, Value), ClickError> {
    let state = shared.lock();
    let record = state
        .bot
        .cards
        .get(message_id)
        .ok_or_else(|| ClickError::NoCard(message_id.to_owned()))?;
    if record.forwarded_from.is_some()
        && record.card["config"]["enable_forward_interaction"] != Value::Bool(true)
    {
        return Err(ClickError::ForwardedNotInteractive);
    }
    let sent_at = record.versions.first().map_or(0, |v| v.at);
    if state.api.now_ms() - sent_at > INTERACTION_WINDOW_MS {
        return Err(ClickError::Expired);
    }
    let element = cards::find_clickable(&record.card, &click.name)
        .ok_or_else(|| ClickError::NoElement(click.name.clone()))?;
    if element.disabled {
        return Err(ClickError::Disabled(click.name.clone()));
    }
    let card_value = element
        .value
        .clone()
        .ok_or_else(|| ClickError::NotInteractive(click.name.clone()))?;
    let operator_id = click
        .operator_open_id
        .clone()
        .unwrap_or_else(|| state.user.open_id.clone());
    let tenant = &state.api.tenant;
    let person = tenant
        .person(&operator_id)
        .ok_or_else(|| ClickError::NoPerson(operator_id.clone()))?;
    let mut action = json!({
        "value": click.value.clone().unwrap_or(card_value),
        "tag": element.tag,
        "name": element.name,
    });
    if let Some(fields) = &element.form_fields {
        for name in click.form_value.keys() {
            if !fields.contains(name) {
                return Err(ClickError::NoField(name.clone()));
            }
        }
        let form: serde_json::Map<String, Value> = fields
            .iter()
            .map(|f| {
                (
                    f.clone(),
                    click.form_value.get(f).cloned().unwrap_or(json!("")),
                )
            })
            .collect();
        action["form_value"] = Value::Object(form);
    } else if let Some(name) = click.form_value.keys().next() {
        return Err(ClickError::NoField(name.clone()));
    }
    let mut operator = json!({
        "tenant_key": tenant.tenant_key,
        "open_id": person.open_id,
        "union_id": person.union_id,
    });
    // user_id only with the "获取用户 user ID" scope, as the doc says.
    if state.apps.get(&record.app_id).is_some_and(|a| {
        a.enabled_scopes
            .iter()
            .any(|s| s == "contact:user.employee_id:readonly")
    }) {
        operator["user_id"] = json!(person.user_id);
    }
    let event_id = random_hex();
    let payload = json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "token": verification_token(&record.app_id),
            "create_time": (now_millis() * 1000).to_string(),
            "event_type": "card.action.trigger",
            "tenant_key": tenant.tenant_key,
            "app_id": record.app_id,
        },
        "event": {
            "operator": operator,
            "token": format!("c-{}{}", random_hex(), &random_hex()[..8]),
            "action": action,
            "host": "im_message",
            "context": {
                "open_message_id": record.message_id,
                "open_chat_id": record.chat_id,
            },
        },
    });
    Ok((record.app_id.clone(), payload))
}

/// The app's Verification Token (stable per app).
fn verification_token(app_id: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(format!("verification:{app_id}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Clicks `click.name` on the card `message_id`: delivers the callback over one of the app's
/// connections, waits for the answer and applies it to the card.
pub(crate) async fn click(
    shared: &Shared,
    message_id: &str,
    click: &Click,
) -> Result<ClickOutcome, ClickError> {
    let (app_id, payload) = callback_for(shared, message_id, click)?;
    let timeout = click
        .timeout_ms
        .map_or(CALLBACK_TIMEOUT, Duration::from_millis);
    deliver(shared, &app_id, message_id, payload, timeout).await
}

/// Sends the last callback again, byte for byte (the same `event_id`), as Feishu re-pushes.
pub(crate) async fn replay(shared: &Shared, timeout: Duration) -> Result<ClickOutcome, ClickError> {
    let last = shared
        .lock()
        .longconn
        .last
        .clone()
        .ok_or(ClickError::NothingDelivered)?;
    let payload: Value = serde_json::from_slice(&last.payload).unwrap_or(Value::Null);
    deliver(shared, &last.app_id, &last.message_id, payload, timeout).await
}

/// Queues the callback `bytes` on one open connection of `app_id` (not one of `dead`), split in
/// parts if asked; answers the connection's id.
fn send_callback(
    shared: &Shared,
    app_id: &str,
    message_id: &str,
    bytes: &[u8],
    frame_id: &str,
    waiter: oneshot::Sender<Vec<u8>>,
    dead: &[u64],
) -> Result<u64, ClickError> {
    let mut state = shared.lock();
    let lc = &mut state.longconn;
    let open: Vec<&Connection> = lc
        .connections
        .iter()
        .filter(|c| c.app_id == app_id && !dead.contains(&c.id))
        .collect();
    // Cluster mode: each message goes to one connection picked at random.
    let Some(conn) = (!open.is_empty()).then(|| open[rand_u32() as usize % open.len()]) else {
        return Err(ClickError::NotConnected(app_id.to_owned()));
    };
    let (conn_id, service, sender) = (conn.id, conn.service_id, conn.tx.clone());
    let part_size = lc.part_size.unwrap_or(usize::MAX).max(1);
    let parts: Vec<&[u8]> = if bytes.is_empty() {
        vec![bytes]
    } else {
        bytes.chunks(part_size).collect()
    };
    let trace_id = uuid::Uuid::new_v4().to_string();
    lc.pending.insert(frame_id.to_owned(), (conn_id, waiter));
    for (seq, part) in parts.iter().enumerate() {
        lc.next_seq += 1;
        let mut frame = Frame::control(kind::EVENT, service);
        frame.method = METHOD_DATA;
        frame.seq_id = lc.next_seq;
        frame.log_id = u64::from(rand_u32());
        frame.set_header(header::MESSAGE_ID, frame_id);
        frame.set_header(header::SUM, parts.len().to_string());
        frame.set_header(header::SEQ, seq.to_string());
        frame.set_header(header::TRACE_ID, trace_id.clone());
        frame.payload = Some(part.to_vec());
        if sender.send(Outgoing::Frame(frame.to_bytes())).is_err() {
            // Its socket task has ended: the waiter goes, and the caller tries another.
            lc.pending.remove(frame_id);
        }
    }
    lc.last = Some(Delivered {
        app_id: app_id.to_owned(),
        message_id: message_id.to_owned(),
        payload: bytes.to_vec(),
    });
    Ok(conn_id)
}

async fn deliver(
    shared: &Shared,
    app_id: &str,
    message_id: &str,
    payload: Value,
    timeout: Duration,
) -> Result<ClickOutcome, ClickError> {
    let bytes = serde_json::to_vec(&payload).unwrap_or_default();
    let event_id = payload["header"]["event_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out = || ClickError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    // Connections that closed without answering.
    let mut dead: Vec<u64> = Vec::new();
    let answer = loop {
        let frame_id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = oneshot::channel();
        let conn_id = send_callback(shared, app_id, message_id, &bytes, &frame_id, tx, &dead)?;
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => break answer,
            // The connection closed without answering (the callback queued, or written as the
            // client closed): another open connection gets it.
            Ok(Err(_)) => dead.push(conn_id),
            Err(_) => {
                shared.lock().longconn.pending.remove(&frame_id);
                return Err(timed_out());
            }
        }
    };
    let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    let code = answer["code"].as_i64().unwrap_or(0);
    let response = answer["data"]
        .as_str()
        .and_then(|d| STANDARD.decode(d).ok())
        .and_then(|raw| serde_json::from_slice::<Value>(&raw).ok())
        .unwrap_or(Value::Null);
    let toast = response.get("toast").filter(|t| !t.is_null()).cloned();
    let mut updated = false;
    let mut card_error = None;
    if code == 200 {
        if let Some(toast) = &toast
            && let Some(record) = shared.lock().bot.cards.get_mut(message_id)
        {
            record.toasts.push(toast.clone());
        }
        match response.get("card").filter(|c| !c.is_null()) {
            None => {}
            Some(card) if card["type"] == "raw" => {
                match cards::validate(&card["data"].to_string())
                    .and_then(|data| replace_card(shared, message_id, data, "callback"))
                {
                    Ok(()) => updated = true,
                    Err(e) => card_error = Some(format!("200673: {e}")),
                }
            }
            Some(card) => {
                card_error = Some(format!(
                    "200673: the emulator has no card templates ({})",
                    card["type"]
                ));
            }
        }
    }
    let card = shared
        .lock()
        .bot
        .cards
        .get(message_id)
        .map(|c| c.card.clone())
        .unwrap_or(Value::Null);
    Ok(ClickOutcome {
        event_id,
        code,
        toast,
        response,
        updated,
        card_error,
        card,
        callback: payload,
    })
}

/// Forwards the card `message_id` (as the signed-in user) to `to_open_id`: a copy in their 1:1
/// chat, with its own message id. Answers the copy's message id.
pub(crate) fn forward(
    shared: &Shared,
    message_id: &str,
    to_open_id: &str,
) -> Result<String, ClickError> {
    let mut state = shared.lock();
    let original = state
        .bot
        .cards
        .get(message_id)
        .cloned()
        .ok_or_else(|| ClickError::NoCard(message_id.to_owned()))?;
    let now = state.api.now_ms();
    let me = state.user.open_id.clone();
    let tenant = &mut state.api.tenant;
    if tenant.person(to_open_id).is_none() {
        return Err(ClickError::NoPerson(to_open_id.to_owned()));
    }
    let existing = tenant
        .chats
        .iter()
        .find(|c| {
            c.p2p
                && c.members.len() == 2
                && c.members.contains(&me)
                && c.members.iter().any(|m| m == to_open_id)
        })
        .map(|c| c.chat_id.clone());
    let chat_id = existing.unwrap_or_else(|| {
        let chat_id = format!("oc_{}", random_hex());
        tenant.chats.push(Chat {
            chat_id: chat_id.clone(),
            name: String::new(),
            description: String::new(),
            p2p: true,
            owner: me.clone(),
            members: vec![me.clone(), to_open_id.to_owned()],
            extra_members: 0,
            created_at: now,
        });
        chat_id
    });
    let copy_id = format!("om_{}", random_hex());
    tenant.messages.push(Message {
        message_id: copy_id.clone(),
        chat_id: chat_id.clone(),
        sender: me,
        msg_type: "interactive".to_owned(),
        content: original.card.to_string(),
        create_time: now,
        root_id: None,
        parent_id: None,
        thread_id: None,
        via_api: false,
        by_app: false,
        updated_at: None,
    });
    state.bot.cards.insert(
        copy_id.clone(),
        cards::BotCard {
            message_id: copy_id.clone(),
            app_id: original.app_id,
            chat_id,
            open_id: to_open_id.to_owned(),
            card: original.card.clone(),
            versions: vec![CardVersion {
                card: original.card,
                source: "forward".to_owned(),
                at: now,
            }],
            toasts: Vec::new(),
            forwarded_from: Some(message_id.to_owned()),
        },
    );
    Ok(copy_id)
}

/// What the long connection looks like now, for tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LongConnectionStatus {
    /// Open connections: (app id, device id).
    pub connections: Vec<(String, String)>,
    /// Pings received per app.
    pub pings: HashMap<String, usize>,
    /// Whether the endpoint and new connections are refused now.
    pub outage: bool,
}

pub(crate) fn status(shared: &Shared) -> LongConnectionStatus {
    let state = shared.lock();
    let lc = &state.longconn;
    LongConnectionStatus {
        connections: lc
            .connections
            .iter()
            .map(|c| (c.app_id.clone(), c.device_id.clone()))
            .collect(),
        pings: lc.pings.clone(),
        outage: lc.in_outage(),
    }
}

/// The knobs tests turn.
impl LongConnState {
    pub(crate) fn set_enabled(&mut self, app_id: &str, enabled: bool) {
        if enabled {
            self.off.remove(app_id);
        } else {
            self.off.insert(app_id.to_owned());
            self.drop_connections(Some(app_id));
        }
    }

    pub(crate) fn start_outage(&mut self, for_ms: i64) {
        self.outage_until = Some(now_millis().saturating_add(for_ms));
        self.drop_connections(None);
    }

    pub(crate) fn end_outage(&mut self) {
        self.outage_until = None;
    }

    pub(crate) fn set_config(&mut self, config: ClientConfig) {
        self.config = config;
    }

    pub(crate) fn set_part_size(&mut self, size: Option<usize>) {
        self.part_size = size;
    }
}

fn hook_error(e: &ClickError) -> Response {
    let status = match e {
        ClickError::NoCard(_) => StatusCode::NOT_FOUND,
        ClickError::NotConnected(_) => StatusCode::CONFLICT,
        ClickError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, Json(json!({"error": e.to_string(), "reason": e}))).into_response()
}

/// `POST /_emulator/cards/{message_id}/click` with a [`Click`].
async fn click_hook(
    State(shared): State<Shared>,
    Path(message_id): Path<String>,
    body: Bytes,
) -> Response {
    let request: Click = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": format!("not a click: {e}")})),
            )
                .into_response();
        }
    };
    match click(&shared, &message_id, &request).await {
        Ok(outcome) => Json(outcome).into_response(),
        Err(e) => hook_error(&e),
    }
}

#[derive(Deserialize)]
struct ForwardRequest {
    to_open_id: String,
}

/// `POST /_emulator/cards/{message_id}/forward` with `{"to_open_id"}`.
async fn forward_hook(
    State(shared): State<Shared>,
    Path(message_id): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(request) = serde_json::from_slice::<ForwardRequest>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "to_open_id is required"})),
        )
            .into_response();
    };
    match forward(&shared, &message_id, &request.to_open_id) {
        Ok(copy) => Json(json!({"message_id": copy})).into_response(),
        Err(e) => hook_error(&e),
    }
}

async fn status_hook(State(shared): State<Shared>) -> Json<LongConnectionStatus> {
    Json(status(&shared))
}

/// `POST /_emulator/long_connection/drop` (`{"app_id"}` optional): the server closes them.
async fn drop_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let dropped = shared
        .lock()
        .longconn
        .drop_connections(body["app_id"].as_str());
    Json(json!({"dropped": dropped})).into_response()
}

/// `POST /_emulator/long_connection/outage` with `{"seconds"}`: drops every connection and
/// refuses the endpoint (system busy) and new connections until then.
async fn outage_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(seconds) = body["seconds"].as_f64().filter(|s| *s >= 0.0) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "seconds is required"})),
        )
            .into_response();
    };
    // Whole milliseconds of a bounded, non-negative number of seconds.
    #[allow(clippy::cast_possible_truncation)]
    let ms = (seconds.min(86_400.0) * 1000.0) as i64;
    shared.lock().longconn.start_outage(ms);
    StatusCode::NO_CONTENT.into_response()
}

async fn end_outage_hook(State(shared): State<Shared>) -> Response {
    shared.lock().longconn.end_outage();
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /_emulator/long_connection/replay` (`{"timeout_ms"}` optional).
async fn replay_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let timeout = body["timeout_ms"]
        .as_u64()
        .map_or(CALLBACK_TIMEOUT, Duration::from_millis);
    match replay(&shared, timeout).await {
        Ok(outcome) => Json(outcome).into_response(),
        Err(e) => hook_error(&e),
    }
}
