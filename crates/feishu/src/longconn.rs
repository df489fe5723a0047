//! Feishu's long connection (长连接): the WebSocket an app opens with its App ID and Secret to
//! receive events and card callbacks without a public URL.
//!
//! The protocol, as Feishu's own SDKs speak it:
//! 1. `POST {open}/callback/ws/endpoint` with `{"AppID", "AppSecret"}` answers the WebSocket URL
//!    (its query names `device_id` and `service_id`) and a *client config*: `PingInterval`,
//!    `ReconnectCount` (negative: forever), `ReconnectInterval` and `ReconnectNonce`, in seconds.
//! 2. Every WebSocket message is one binary `pbbp2.Frame` (see [`lark_frame`]). The client sends
//!    a `ping` control frame every `PingInterval`; the server's `pong` may carry a new client
//!    config, which applies from then on.
//! 3. Events and callbacks arrive as data frames (`type` `event` or `card`), a large payload split
//!    in `sum` parts numbered by `seq` under one `message_id`. The client answers each with the
//!    same frame, a `biz_rt` header added and as payload `{"code": 200, "headers": {}, "data":
//!    base64(answer JSON)}` (code 500 when the handler failed). A card callback's answer is the
//!    toast and the updated card the clicker sees.
//! 4. A lost connection is opened again (endpoint call included): first after a random wait of up
//!    to `ReconnectNonce` (so many clients do not return at once), then every `ReconnectInterval`,
//!    `ReconnectCount` times. Errors the client itself caused (wrong credentials, the app's
//!    connection limit) are not retried: they need the user.
//!
//! A connection that answers no ping for three intervals counts as lost: a dead network often
//! closes nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::{SinkExt as _, StreamExt as _};
use lark_frame::{Frame, METHOD_CONTROL, METHOD_DATA, header, kind};
use secrecy::ExposeSecret as _;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use crate::config::{AppCredentials, Endpoints};

/// Feishu's endpoint codes: busy or failing on its side (retried).
const SYSTEM_BUSY: i64 = 1;
const INTERNAL_ERROR: i64 = 1000040343;
/// The handshake's status when the app may not connect (not retried).
const FORBIDDEN: i64 = 403;
const AUTH_FAILED: i64 = 514;
const EXCEED_CONN_LIMIT: i64 = 1000040350;

/// Parts of a split payload wait this long for the rest.
const PARTS_TTL: Duration = Duration::from_secs(5);
/// The most parts one payload may announce (a hostile `sum` allocates nothing beyond this).
const MAX_PARTS: usize = 64;

/// How the server wants the client to behave; every field in seconds on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Between two pings.
    pub ping_interval: Duration,
    /// Attempts after a lost connection; `None`: forever.
    pub reconnect_count: Option<u32>,
    /// Between two attempts.
    pub reconnect_interval: Duration,
    /// Before the first attempt, a random wait of up to this.
    pub reconnect_nonce: Duration,
}

impl Default for ClientConfig {
    /// The SDKs' values before the server says otherwise.
    fn default() -> Self {
        ClientConfig {
            ping_interval: Duration::from_secs(120),
            reconnect_count: None,
            reconnect_interval: Duration::from_secs(120),
            reconnect_nonce: Duration::from_secs(30),
        }
    }
}

impl ClientConfig {
    /// Applies the fields `value` (`{"PingInterval": 90, …}`) carries; others keep their value.
    /// A ping interval below one second is taken as one second.
    pub fn apply(&mut self, value: &Value) {
        let secs = |key: &str| value.get(key).and_then(Value::as_i64);
        if let Some(s) = secs("PingInterval") {
            self.ping_interval = Duration::from_secs(s.max(1).unsigned_abs());
        }
        if let Some(n) = secs("ReconnectCount") {
            self.reconnect_count = u32::try_from(n).ok();
        }
        if let Some(s) = secs("ReconnectInterval") {
            self.reconnect_interval = Duration::from_secs(s.max(0).unsigned_abs());
        }
        if let Some(s) = secs("ReconnectNonce") {
            self.reconnect_nonce = Duration::from_secs(s.max(0).unsigned_abs());
        }
    }
}

/// Why the long connection cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LongConnError {
    /// Feishu refused the app (wrong App ID or Secret, long connection not allowed, too many
    /// connections): trying again will not help until the user changes something.
    #[error("Feishu refused the long connection (code {code}): {msg}")]
    Refused {
        /// Feishu's code.
        code: i64,
        /// Feishu's message.
        msg: String,
    },
    /// Feishu could not be reached or was busy: tried again later.
    #[error("Feishu's long connection is unavailable: {0}")]
    Unavailable(String),
    /// Feishu answered something it does not document.
    #[error("Feishu's long-connection answer could not be read: {0}")]
    Malformed(String),
}

impl LongConnError {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, LongConnError::Refused { .. })
    }
}

/// Where the connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Opening for the first time.
    Connecting,
    /// Open: callbacks arrive.
    Connected,
    /// Lost or never opened; trying again.
    Reconnecting {
        /// Attempts so far since the connection was last open.
        attempt: u32,
        /// What went wrong last.
        error: String,
    },
    /// Given up (an error that needs the user, or every attempt failed), or shut down.
    Stopped {
        /// Why, unless it was shut down.
        error: Option<String>,
    },
}

/// What receives the callbacks.
#[async_trait::async_trait]
pub trait CallbackHandler: Send + Sync + 'static {
    /// Handles one event or callback (`kind` is the frame's `type`, `event` or `card`);
    /// answers the JSON to send back (for a card action: toast and card), `None` for nothing,
    /// or an error (answered as code 500).
    async fn handle(&self, kind: &str, payload: Value) -> Result<Option<Value>, String>;
}

/// Settings of the client itself.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a handler may take before the answer is given up on (Feishu waits 3 s for a
    /// card callback's answer).
    pub handler_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            handler_timeout: Duration::from_millis(2800),
        }
    }
}

/// The running long connection; shut it down with [`LongConnection::shutdown`] (dropping it
/// stops it too).
#[derive(Debug)]
pub struct LongConnection {
    state: watch::Receiver<LinkState>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl LongConnection {
    /// Opens the connection in the background and keeps it open until shut down.
    pub fn start(
        endpoints: Endpoints,
        credentials: AppCredentials,
        handler: Arc<dyn CallbackHandler>,
        options: Options,
    ) -> LongConnection {
        crate::oauth::install_crypto_provider();
        let (state_tx, state) = watch::channel(LinkState::Connecting);
        let cancel = CancellationToken::new();
        let client = Client {
            endpoints,
            credentials,
            handler,
            options,
            state: state_tx,
            cancel: cancel.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(20))
                .build()
                .ok(),
        };
        let task = tokio::spawn(client.run());
        LongConnection {
            state,
            cancel,
            task: Some(task),
        }
    }

    /// Where the connection stands, and every change from now on.
    pub fn state(&self) -> watch::Receiver<LinkState> {
        self.state.clone()
    }

    /// Closes the connection (a WebSocket close frame) and waits until it has.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LongConnection {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Checks that the long connection opens (endpoint call and WebSocket handshake), then closes it.
pub async fn probe(
    endpoints: &Endpoints,
    credentials: &AppCredentials,
) -> Result<(), LongConnError> {
    crate::oauth::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| LongConnError::Unavailable(e.to_string()))?;
    let mut config = ClientConfig::default();
    let (url, _) = endpoint(&http, endpoints, credentials, &mut config).await?;
    let (mut ws, _) = open(&url).await?;
    let _ = ws.close(None).await;
    Ok(())
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Client {
    endpoints: Endpoints,
    credentials: AppCredentials,
    handler: Arc<dyn CallbackHandler>,
    options: Options,
    state: watch::Sender<LinkState>,
    cancel: CancellationToken,
    http: Option<reqwest::Client>,
}

/// How one connection ended.
enum Ended {
    Shutdown,
    Lost(String),
}

impl Client {
    async fn run(self) {
        let mut config = ClientConfig::default();
        let mut attempt: u32 = 0;
        let mut was_open = false;
        loop {
            if self.cancel.is_cancelled() {
                break;
            }
            match self.connect(&mut config).await {
                Ok((socket, service)) => {
                    attempt = 0;
                    was_open = true;
                    self.state.send_replace(LinkState::Connected);
                    tracing::info!("Feishu long connection open");
                    match self.serve(socket, service, &mut config).await {
                        Ended::Shutdown => break,
                        Ended::Lost(reason) => {
                            tracing::warn!(%reason, "Feishu long connection lost");
                            self.state.send_replace(LinkState::Reconnecting {
                                attempt: 0,
                                error: reason,
                            });
                            // Many clients lose the connection at once when Feishu restarts:
                            // spread their return.
                            let nonce = config.reconnect_nonce.mul_f64(fastrand::f64());
                            if !self.sleep(nonce).await {
                                break;
                            }
                        }
                    }
                }
                Err(error) => {
                    attempt += 1;
                    let message = error.to_string();
                    tracing::warn!(attempt, error = %message, "Feishu long connection failed");
                    let exhausted = config.reconnect_count.is_some_and(|n| attempt > n);
                    if !error.is_retryable() || exhausted {
                        self.state.send_replace(LinkState::Stopped {
                            error: Some(message),
                        });
                        return;
                    }
                    self.state.send_replace(LinkState::Reconnecting {
                        attempt,
                        error: message,
                    });
                    // Before the connection was ever open the user is waiting on it: the first
                    // retry comes soon, later ones at the server's interval.
                    let wait = if was_open || attempt > 1 {
                        config.reconnect_interval
                    } else {
                        config.reconnect_nonce.mul_f64(fastrand::f64())
                    };
                    if !self.sleep(wait).await {
                        break;
                    }
                }
            }
        }
        self.state.send_replace(LinkState::Stopped { error: None });
    }

    /// Waits, unless shut down first (then `false`).
    async fn sleep(&self, wait: Duration) -> bool {
        tokio::select! {
            () = self.cancel.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        }
    }

    async fn connect(&self, config: &mut ClientConfig) -> Result<(Socket, i32), LongConnError> {
        let http = self
            .http
            .as_ref()
            .ok_or_else(|| LongConnError::Unavailable("no HTTP client".into()))?;
        let (url, service) = endpoint(http, &self.endpoints, &self.credentials, config).await?;
        let (socket, _) = open(&url).await?;
        Ok((socket, service))
    }

    async fn serve(&self, socket: Socket, service: i32, config: &mut ClientConfig) -> Ended {
        let (mut sink, mut stream) = socket.split();
        let (answers_tx, mut answers) = mpsc::channel::<Frame>(64);
        let mut parts = Parts::default();
        let mut last_heard = Instant::now();
        // The first ping goes at once: its pong brings the server's config.
        let mut next_ping = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = self.cancel.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    let _ = sink.close().await;
                    return Ended::Shutdown;
                }
                () = tokio::time::sleep_until(next_ping) => {
                    if last_heard.elapsed() > config.ping_interval * 3 {
                        return Ended::Lost("Feishu stopped answering pings".into());
                    }
                    let ping = Frame::control(kind::PING, service);
                    if let Err(e) = sink.send(Message::Binary(ping.to_bytes().into())).await {
                        return Ended::Lost(format!("sending a ping failed: {e}"));
                    }
                    next_ping = tokio::time::Instant::now() + config.ping_interval;
                }
                Some(answer) = answers.recv() => {
                    if let Err(e) = sink.send(Message::Binary(answer.to_bytes().into())).await {
                        return Ended::Lost(format!("sending an answer failed: {e}"));
                    }
                }
                message = stream.next() => {
                    let bytes = match message {
                        None => return Ended::Lost("Feishu closed the connection".into()),
                        Some(Err(e)) => return Ended::Lost(e.to_string()),
                        Some(Ok(Message::Close(frame))) => {
                            return Ended::Lost(match frame {
                                Some(f) => format!("Feishu closed the connection ({} {})", u16::from(f.code), f.reason),
                                None => "Feishu closed the connection".into(),
                            });
                        }
                        Some(Ok(Message::Binary(bytes))) => bytes,
                        Some(Ok(_)) => {
                            last_heard = Instant::now();
                            continue;
                        }
                    };
                    last_heard = Instant::now();
                    let frame = match Frame::from_bytes(&bytes) {
                        Ok(frame) => frame,
                        Err(e) => {
                            tracing::warn!(error = %e, "an unreadable frame from Feishu was ignored");
                            continue;
                        }
                    };
                    match frame.method {
                        METHOD_CONTROL => {
                            if frame.kind() == Some(kind::PONG)
                                && let Some(payload) = frame.payload.as_deref().filter(|p| !p.is_empty())
                            {
                                match serde_json::from_slice::<Value>(payload) {
                                    Ok(value) => {
                                        let before = config.ping_interval;
                                        config.apply(&value);
                                        if config.ping_interval != before {
                                            next_ping = tokio::time::Instant::now() + config.ping_interval;
                                        }
                                    }
                                    Err(_) => tracing::warn!("a pong's client config was not JSON"),
                                }
                            }
                        }
                        METHOD_DATA => {
                            if let Some((frame, payload)) = parts.add(frame) {
                                self.answer(frame, payload, answers_tx.clone());
                            }
                        }
                        other => tracing::warn!(method = other, "a frame of unknown method was ignored"),
                    }
                }
            }
        }
    }

    /// Hands a whole payload to the handler off the connection's loop and queues its answer.
    fn answer(&self, mut frame: Frame, payload: Vec<u8>, answers: mpsc::Sender<Frame>) {
        let handler = self.handler.clone();
        let timeout = self.options.handler_timeout;
        tokio::spawn(async move {
            let started = Instant::now();
            let kind = frame.kind().unwrap_or_default().to_owned();
            let outcome = match serde_json::from_slice::<Value>(&payload) {
                Err(_) => Err("the payload is not JSON".to_owned()),
                Ok(value) => {
                    match tokio::time::timeout(timeout, handler.handle(&kind, value)).await {
                        Ok(outcome) => outcome,
                        Err(_) => Err("the handler took too long".to_owned()),
                    }
                }
            };
            let response = match outcome {
                Ok(data) => {
                    let mut response = json!({"code": 200, "headers": {}});
                    if let Some(data) = data {
                        response["data"] = Value::String(
                            base64::engine::general_purpose::STANDARD.encode(data.to_string()),
                        );
                    }
                    response
                }
                Err(error) => {
                    tracing::warn!(%error, kind, "a Feishu callback failed");
                    json!({"code": 500, "headers": {}})
                }
            };
            frame.set_header(header::BIZ_RT, started.elapsed().as_millis().to_string());
            frame.payload = Some(response.to_string().into_bytes());
            let _ = answers.send(frame).await;
        });
    }
}

/// Asks for the connection's URL; applies the client config that comes with it.
async fn endpoint(
    http: &reqwest::Client,
    endpoints: &Endpoints,
    credentials: &AppCredentials,
    config: &mut ClientConfig,
) -> Result<(String, i32), LongConnError> {
    let response = http
        .post(endpoints.long_connection_url())
        .header("locale", "zh")
        .json(&json!({
            "AppID": credentials.app_id,
            "AppSecret": credentials.app_secret.expose_secret(),
        }))
        .send()
        .await
        .map_err(|e| {
            LongConnError::Unavailable(if e.is_timeout() {
                "timed out".into()
            } else {
                "cannot reach Feishu".into()
            })
        })?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(LongConnError::Unavailable(format!(
            "the endpoint answered HTTP {status}"
        )));
    }
    let body: Value = response
        .json()
        .await
        .map_err(|_| LongConnError::Malformed("the endpoint's answer is not JSON".into()))?;
    let code = body.get("code").and_then(Value::as_i64).unwrap_or(-1);
    let msg = body
        .get("msg")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match code {
        0 => {}
        SYSTEM_BUSY | INTERNAL_ERROR => {
            return Err(LongConnError::Unavailable(format!("code {code}: {msg}")));
        }
        _ => return Err(LongConnError::Refused { code, msg }),
    }
    let data = body.get("data").cloned().unwrap_or_default();
    if let Some(client_config) = data.get("ClientConfig") {
        config.apply(client_config);
    }
    let url = data
        .get("URL")
        .and_then(Value::as_str)
        .ok_or_else(|| LongConnError::Malformed("no URL in the endpoint's answer".into()))?;
    let parsed = url::Url::parse(url)
        .map_err(|_| LongConnError::Malformed("the endpoint's URL is not a URL".into()))?;
    if !matches!(parsed.scheme(), "ws" | "wss") {
        return Err(LongConnError::Malformed(
            "the endpoint's URL is not a WebSocket URL".into(),
        ));
    }
    let service = parsed
        .query_pairs()
        .find(|(k, _)| k == "service_id")
        .and_then(|(_, v)| v.parse::<i32>().ok())
        .ok_or_else(|| LongConnError::Malformed("the URL names no service_id".into()))?;
    Ok((url.to_owned(), service))
}

/// The WebSocket handshake; a refusal is read from Feishu's `handshake-*` headers.
async fn open(url: &str) -> Result<(Socket, ()), LongConnError> {
    match tokio::time::timeout(
        Duration::from_secs(15),
        tokio_tungstenite::connect_async(url),
    )
    .await
    {
        Err(_) => Err(LongConnError::Unavailable(
            "the WebSocket handshake timed out".into(),
        )),
        Ok(Ok((socket, _))) => Ok((socket, ())),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let status = header("handshake-status").and_then(|s| s.parse::<i64>().ok());
            let msg = header("handshake-msg")
                .unwrap_or_else(|| format!("HTTP {}", response.status().as_u16()));
            let auth_code = header("handshake-autherrcode").and_then(|s| s.parse::<i64>().ok());
            Err(match status {
                Some(FORBIDDEN) => LongConnError::Refused {
                    code: FORBIDDEN,
                    msg,
                },
                Some(AUTH_FAILED) if auth_code == Some(EXCEED_CONN_LIMIT) => {
                    LongConnError::Refused {
                        code: EXCEED_CONN_LIMIT,
                        msg,
                    }
                }
                Some(code) => LongConnError::Unavailable(format!("handshake {code}: {msg}")),
                None => LongConnError::Unavailable(msg),
            })
        }
        Ok(Err(e)) => Err(LongConnError::Unavailable(e.to_string())),
    }
}

/// The parts of one payload received so far, by `seq`.
type Pieces = Vec<Option<Vec<u8>>>;

/// Split payloads waiting for their other parts.
#[derive(Default)]
struct Parts {
    waiting: HashMap<String, (Instant, Pieces)>,
}

impl Parts {
    /// Adds one data frame; answers the frame and the whole payload once complete.
    fn add(&mut self, frame: Frame) -> Option<(Frame, Vec<u8>)> {
        let number = |key: &str, default: usize| {
            frame
                .header(key)
                .map_or(Some(default), |v| v.parse::<usize>().ok())
        };
        let (Some(sum), Some(seq)) = (number(header::SUM, 1), number(header::SEQ, 0)) else {
            tracing::warn!("a data frame with an unreadable sum or seq was ignored");
            return None;
        };
        if sum <= 1 {
            let payload = frame.payload.clone().unwrap_or_default();
            return Some((frame, payload));
        }
        if sum > MAX_PARTS || seq >= sum {
            tracing::warn!(sum, seq, "a data frame's parts do not add up; ignored");
            return None;
        }
        let id = frame
            .header(header::MESSAGE_ID)
            .unwrap_or_default()
            .to_owned();
        self.waiting.retain(|_, (at, _)| at.elapsed() < PARTS_TTL);
        let entry = self
            .waiting
            .entry(id.clone())
            .or_insert_with(|| (Instant::now(), vec![None; sum]));
        if entry.1.len() != sum {
            tracing::warn!(sum, "a part disagrees with its message's sum; ignored");
            return None;
        }
        entry.1[seq] = Some(frame.payload.clone().unwrap_or_default());
        if entry.1.iter().all(Option::is_some) {
            let (_, pieces) = self.waiting.remove(&id)?;
            let payload = pieces.into_iter().flatten().flatten().collect();
            return Some((frame, payload));
        }
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn part(id: &str, sum: usize, seq: usize, bytes: &[u8]) -> Frame {
        let mut f = Frame::control(kind::CARD, 1);
        f.method = METHOD_DATA;
        f.set_header(header::MESSAGE_ID, id);
        f.set_header(header::SUM, sum.to_string());
        f.set_header(header::SEQ, seq.to_string());
        f.payload = Some(bytes.to_vec());
        f
    }

    #[test]
    fn parts_in_any_order_make_the_whole_payload_once() {
        let mut parts = Parts::default();
        assert!(parts.add(part("m", 3, 2, b"c")).is_none());
        assert!(parts.add(part("m", 3, 0, b"a")).is_none());
        let (_, whole) = parts.add(part("m", 3, 1, b"b")).unwrap();
        assert_eq!(whole, b"abc");
        assert!(parts.waiting.is_empty());
    }

    #[test]
    fn parts_that_do_not_add_up_are_ignored() {
        let mut parts = Parts::default();
        assert!(parts.add(part("m", 3, 3, b"x")).is_none(), "seq beyond sum");
        assert!(
            parts.add(part("m", 100_000, 0, b"x")).is_none(),
            "hostile sum"
        );
        assert!(parts.add(part("n", 2, 0, b"x")).is_none());
        assert!(parts.add(part("n", 5, 1, b"y")).is_none(), "sum changed");
        let mut bad = part("o", 1, 0, b"x");
        bad.set_header(header::SUM, "two");
        assert!(parts.add(bad).is_none());
    }

    #[test]
    fn the_client_config_applies_what_it_carries() {
        let mut c = ClientConfig::default();
        c.apply(&json!({"PingInterval": 0, "ReconnectCount": -1, "ReconnectInterval": 5}));
        assert_eq!(
            c.ping_interval,
            Duration::from_secs(1),
            "never a zero interval"
        );
        assert_eq!(c.reconnect_count, None);
        assert_eq!(c.reconnect_interval, Duration::from_secs(5));
        assert_eq!(c.reconnect_nonce, Duration::from_secs(30), "kept");
        c.apply(&json!({"ReconnectCount": 3}));
        assert_eq!(c.reconnect_count, Some(3));
    }
}
