//! The long-connection client against a small server in the test that speaks Feishu's protocol:
//! the endpoint call, pings and the pong's client config, data frames answered with the
//! response frame, split payloads, a dropped connection, refusals, and a clean shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use feishu::longconn::{CallbackHandler, LinkState, LongConnection, Options};
use feishu::{AppCredentials, Endpoints};
use futures::{SinkExt as _, StreamExt as _};
use lark_frame::{Frame, METHOD_CONTROL, METHOD_DATA, header, kind};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// The sender of frames to the connected client (`None` drops the connection).
type Pusher = Arc<tokio::sync::Mutex<Option<mpsc::Sender<Option<Vec<u8>>>>>>;

/// What the test server saw, and a way to talk to the connected client.
#[derive(Default)]
struct Seen {
    endpoint_calls: usize,
    endpoint_bodies: Vec<Value>,
    connections: usize,
    pings: usize,
    answers: Vec<Frame>,
    closed_by_client: bool,
}

struct Server {
    base: String,
    seen: Arc<Mutex<Seen>>,
    /// Frames to push to the client now connected.
    push: Pusher,
}

/// How the server answers the endpoint call.
#[derive(Clone)]
enum EndpointMode {
    Ok { ping: u64 },
    Code(i64),
}

async fn server(mode: EndpointMode) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let push: Pusher = Arc::default();
    let (s, p) = (seen.clone(), push.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (s, p, mode) = (s.clone(), p.clone(), mode.clone());
            tokio::spawn(async move { serve(stream, port, s, p, mode).await });
        }
    });
    Server {
        base: format!("http://127.0.0.1:{port}"),
        seen,
        push,
    }
}

async fn serve(
    mut stream: TcpStream,
    port: u16,
    seen: Arc<Mutex<Seen>>,
    push: Pusher,
    mode: EndpointMode,
) {
    let mut head = [0u8; 5];
    stream.peek(&mut head).await.unwrap();
    if &head == b"POST " {
        // The endpoint call: one request, one JSON answer.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let body = loop {
            let n = stream.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(split) = text.find("\r\n\r\n") {
                let length: usize = text[..split]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if buf.len() >= split + 4 + length {
                    break serde_json::from_slice::<Value>(&buf[split + 4..split + 4 + length])
                        .unwrap();
                }
            }
        };
        let answer = {
            let mut seen = seen.lock().unwrap();
            seen.endpoint_calls += 1;
            seen.endpoint_bodies.push(body);
            match mode {
                EndpointMode::Ok { ping } => json!({"code": 0, "msg": "ok", "data": {
                    "URL": format!("ws://127.0.0.1:{port}/ws?device_id=d{}&service_id=7", seen.endpoint_calls),
                    "ClientConfig": {"PingInterval": ping, "ReconnectCount": -1, "ReconnectInterval": 0, "ReconnectNonce": 0},
                }}),
                EndpointMode::Code(code) => json!({"code": code, "msg": "refused"}),
            }
        }
        .to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
            answer.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
        return;
    }
    let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
    seen.lock().unwrap().connections += 1;
    let (tx, mut rx) = mpsc::channel::<Option<Vec<u8>>>(16);
    *push.lock().await = Some(tx);
    loop {
        tokio::select! {
            pushed = rx.recv() => match pushed {
                Some(Some(bytes)) => ws.send(Message::Binary(bytes.into())).await.unwrap(),
                // None: drop the connection without a close frame, as a dead network does.
                _ => return,
            },
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(bytes))) => {
                    let frame = Frame::from_bytes(&bytes).unwrap();
                    if frame.method == METHOD_CONTROL && frame.kind() == Some(kind::PING) {
                        assert_eq!(frame.service, 7, "pings name the URL's service_id");
                        seen.lock().unwrap().pings += 1;
                        let mut pong = Frame::control(kind::PONG, 7);
                        // The pong shortens the interval: the client must follow it.
                        pong.payload = Some(br#"{"PingInterval":1}"#.to_vec());
                        ws.send(Message::Binary(pong.to_bytes().into())).await.unwrap();
                    } else {
                        seen.lock().unwrap().answers.push(frame);
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    seen.lock().unwrap().closed_by_client = true;
                    return;
                }
                _ => {}
            },
        }
    }
}

fn data_frame(id: &str, sum: usize, seq: usize, payload: &[u8]) -> Vec<u8> {
    let mut f = Frame::control(kind::CARD, 7);
    f.method = METHOD_DATA;
    f.set_header(header::TYPE, kind::CARD);
    f.set_header(header::MESSAGE_ID, id);
    f.set_header(header::SUM, sum.to_string());
    f.set_header(header::SEQ, seq.to_string());
    f.set_header(header::TRACE_ID, "t1");
    f.payload = Some(payload.to_vec());
    f.to_bytes()
}

/// Answers every callback with a toast naming what it got; remembers the payloads.
#[derive(Default)]
struct Recorder {
    got: Mutex<Vec<(String, Value)>>,
}

#[async_trait::async_trait]
impl CallbackHandler for Recorder {
    async fn handle(&self, kind: &str, payload: Value) -> Result<Option<Value>, String> {
        self.got
            .lock()
            .unwrap()
            .push((kind.to_owned(), payload.clone()));
        if payload.get("fail").is_some() {
            return Err("asked to fail".into());
        }
        Ok(Some(
            json!({"toast": {"type": "success", "content": payload["n"].clone()}}),
        ))
    }
}

fn credentials() -> AppCredentials {
    AppCredentials {
        app_id: "cli_test".into(),
        app_secret: "secret".to_owned().into(),
    }
}

fn start(server: &Server, handler: Arc<Recorder>) -> LongConnection {
    LongConnection::start(
        Endpoints::single(server.base.parse().unwrap()),
        credentials(),
        handler,
        Options::default(),
    )
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn wait_state(conn: &LongConnection, want: impl Fn(&LinkState) -> bool) -> LinkState {
    let mut state = conn.state();
    tokio::time::timeout(Duration::from_secs(10), state.wait_for(|s| want(s)))
        .await
        .expect("state in time")
        .expect("client alive")
        .clone()
}

async fn push(server: &Server, bytes: Option<Vec<u8>>) {
    let tx = server
        .push
        .lock()
        .await
        .clone()
        .expect("a client is connected");
    tx.send(bytes).await.unwrap();
}

fn decoded_answer(frame: &Frame) -> Value {
    let payload: Value = serde_json::from_slice(frame.payload.as_deref().unwrap()).unwrap();
    assert_eq!(payload["code"], 200, "{payload}");
    let data = base64::engine::general_purpose::STANDARD
        .decode(payload["data"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&data).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_is_answered_with_the_response_frame() {
    let server = server(EndpointMode::Ok { ping: 120 }).await;
    let handler = Arc::new(Recorder::default());
    let conn = start(&server, handler.clone());
    wait_state(&conn, |s| *s == LinkState::Connected).await;
    {
        let seen = server.seen.lock().unwrap();
        assert_eq!(
            seen.endpoint_bodies[0],
            json!({"AppID": "cli_test", "AppSecret": "secret"})
        );
    }
    wait_for("the pushing side", || {
        server.push.try_lock().is_ok_and(|p| p.is_some())
    })
    .await;
    push(&server, Some(data_frame("m1", 1, 0, br#"{"n": 1}"#))).await;
    wait_for("the answer", || {
        !server.seen.lock().unwrap().answers.is_empty()
    })
    .await;
    let answer = server.seen.lock().unwrap().answers[0].clone();
    assert_eq!(answer.method, METHOD_DATA);
    assert_eq!(answer.header(header::MESSAGE_ID), Some("m1"));
    assert_eq!(answer.header(header::TRACE_ID), Some("t1"));
    assert!(answer.header(header::BIZ_RT).is_some(), "biz_rt added");
    assert_eq!(
        decoded_answer(&answer),
        json!({"toast": {"type": "success", "content": 1}})
    );
    assert_eq!(handler.got.lock().unwrap()[0].0, "card");

    // A handler that fails is answered 500, and the connection carries on.
    push(&server, Some(data_frame("m2", 1, 0, br#"{"fail": true}"#))).await;
    wait_for("the failure's answer", || {
        server.seen.lock().unwrap().answers.len() == 2
    })
    .await;
    let failed: Value = serde_json::from_slice(
        server.seen.lock().unwrap().answers[1]
            .payload
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(failed["code"], 500);
    // Bytes that are no frame are ignored, not fatal.
    push(&server, Some(vec![0x2a, 0x0c, 0x0a])).await;
    push(&server, Some(data_frame("m3", 1, 0, br#"{"n": 3}"#))).await;
    wait_for("the third answer", || {
        server.seen.lock().unwrap().answers.len() == 3
    })
    .await;
    assert_eq!(conn.state().borrow().clone(), LinkState::Connected);

    conn.shutdown().await;
    wait_for("the close", || server.seen.lock().unwrap().closed_by_client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_payload_reaches_the_handler_whole_and_once() {
    let server = server(EndpointMode::Ok { ping: 120 }).await;
    let handler = Arc::new(Recorder::default());
    let conn = start(&server, handler.clone());
    wait_state(&conn, |s| *s == LinkState::Connected).await;
    wait_for("the pushing side", || {
        server.push.try_lock().is_ok_and(|p| p.is_some())
    })
    .await;
    let whole = br#"{"n": "a long one", "pad": "xxxxxxxx"}"#;
    let (a, rest) = whole.split_at(10);
    let (b, c) = rest.split_at(10);
    push(&server, Some(data_frame("big", 3, 2, c))).await;
    push(&server, Some(data_frame("big", 3, 0, a))).await;
    push(&server, Some(data_frame("big", 3, 1, b))).await;
    wait_for("the answer", || {
        !server.seen.lock().unwrap().answers.is_empty()
    })
    .await;
    let got = handler.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1["n"], "a long one");
    conn.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_follow_the_pongs_config_and_a_dropped_connection_comes_back() {
    // The endpoint says 120 s between pings; the first pong says 1 s: a second ping within a
    // few seconds shows the pong's config applied.
    let server = server(EndpointMode::Ok { ping: 120 }).await;
    let handler = Arc::new(Recorder::default());
    let conn = start(&server, handler.clone());
    wait_state(&conn, |s| *s == LinkState::Connected).await;
    for _ in 0..200 {
        if server.seen.lock().unwrap().pings >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        server.seen.lock().unwrap().pings >= 2,
        "the pong's PingInterval was applied"
    );

    wait_for("the pushing side", || {
        server.push.try_lock().is_ok_and(|p| p.is_some())
    })
    .await;
    let old = server.push.lock().await.take();
    old.unwrap().send(None).await.unwrap();
    // Back: a second endpoint call and a second connection; callbacks flow again.
    wait_for("a second connection", || {
        server.seen.lock().unwrap().connections == 2
    })
    .await;
    assert_eq!(server.seen.lock().unwrap().endpoint_calls, 2);
    wait_state(&conn, |s| *s == LinkState::Connected).await;
    wait_for("the pushing side", || {
        server.push.try_lock().is_ok_and(|p| p.is_some())
    })
    .await;
    push(&server, Some(data_frame("after", 1, 0, br#"{"n": 9}"#))).await;
    wait_for("the answer", || {
        !server.seen.lock().unwrap().answers.is_empty()
    })
    .await;
    conn.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_app_stops_with_feishus_reason_and_no_retries() {
    let server = server(EndpointMode::Code(1000040345)).await;
    let conn = start(&server, Arc::new(Recorder::default()));
    let state = wait_state(&conn, |s| matches!(s, LinkState::Stopped { .. })).await;
    let LinkState::Stopped { error: Some(error) } = state else {
        panic!("stopped with an error, got {state:?}");
    };
    assert!(error.contains("1000040345"), "{error}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.seen.lock().unwrap().endpoint_calls, 1, "not retried");
    conn.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_feishu_is_retried_and_an_unreachable_one_is_reported() {
    let server = server(EndpointMode::Code(1)).await;
    let conn = start(&server, Arc::new(Recorder::default()));
    let state = wait_state(&conn, |s| matches!(s, LinkState::Reconnecting { .. })).await;
    assert!(
        matches!(state, LinkState::Reconnecting { attempt: 1, .. }),
        "{state:?}"
    );
    conn.shutdown().await;

    // Nothing listens: the probe says so instead of hanging or panicking.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let err = feishu::longconn::probe(&Endpoints::single(base.parse().unwrap()), &credentials())
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
}
