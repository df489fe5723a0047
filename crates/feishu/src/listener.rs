//! The loopback listener that catches Feishu's redirect after the user consents.
//!
//! Feishu matches registered redirect URLs exactly and has no "any loopback port" rule, so the
//! port is fixed (configurable). The listener binds `127.0.0.1` only — never `0.0.0.0` — and
//! accepts a request only if its `Host` is exactly that address (a page elsewhere cannot reach it
//! through DNS rebinding) and its `state` matches the sign-in it belongs to, compared in constant
//! time. A wrong request is answered and ignored; the listener keeps waiting until the one valid
//! callback arrives or the time runs out, then stops and frees the port.
//!
//! Any local process can connect to the port, so the listener cannot be tied up: a connection
//! must send its request head within [`HEADER_TIMEOUT`]; at most [`MAX_CONNECTIONS`] are open at
//! once, and when a new one arrives at the cap the oldest that has not sent a request is closed
//! (a browser sends its request at once, so the newest connection is the likely one); each
//! connection serves one request; and every connection's task ends when the listener does.
//!
//! The browser's page tells the truth: the callback's connection is held until the app has
//! exchanged the code ([`Callback::answer`]), so "signed in" is shown only once it is so, and a
//! failed exchange shows what went wrong.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Method, StatusCode};
use subtle::ConstantTimeEq as _;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinSet};

/// The default redirect port: fixed because Feishu needs the exact URL registered.
pub const DEFAULT_PORT: u16 = 9768;

/// How long a connection may take to send its request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The most connections open at once.
pub const MAX_CONNECTIONS: usize = 32;

/// How long the browser's page waits for the app to finish the sign-in.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest request head read (a callback URL is a few hundred bytes).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How the user's visit to the authorize page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// The user consented: the authorization code to exchange.
    Code(String),
    /// The user declined (`error=access_denied`), or Feishu sent another error.
    Denied {
        /// Feishu's `error`.
        error: String,
    },
}

/// Why the listener could not deliver a callback.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// Another program holds the port.
    #[error(
        "port {port} on 127.0.0.1 is already in use, so the sign-in redirect cannot be received. Close the program using it, or choose another port under Settings → Feishu → Redirect port (and register the new redirect URL in the Feishu developer console)."
    )]
    PortBusy {
        /// The port.
        port: u16,
    },
    /// Binding failed for another reason.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port.
        port: u16,
        /// The OS error.
        source: std::io::Error,
    },
    /// No valid callback arrived in time.
    #[error("the sign-in was not completed within {0:?}")]
    Timeout(Duration),
    /// The server stopped unexpectedly.
    #[error("the sign-in listener stopped: {0}")]
    Stopped(String),
}

/// What one request to the listener is, decided from its method, target and `Host` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `Host` is not exactly `127.0.0.1:<port>`: not addressed to the app.
    WrongHost,
    /// Not `GET /callback`.
    NotFound,
    /// The callback path without this sign-in's `state` (an old tab, a forged request), or
    /// with a parameter given twice.
    WrongState,
    /// This sign-in's callback.
    Callback(CallbackOutcome),
}

/// Classifies a request: `method`, the request target (`/callback?code=…&state=…`) and the
/// `Host` header's bytes. Total over every input (a fuzz target holds it to that).
pub fn classify(
    method: &str,
    target: &str,
    host: Option<&[u8]>,
    expected_host: &str,
    expected_state: &str,
) -> Request {
    if host != Some(expected_host.as_bytes()) {
        return Request::WrongHost;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != "GET" || path != "/callback" {
        return Request::NotFound;
    }
    let mut state = None;
    let mut code = None;
    let mut error = None;
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match key.as_ref() {
            "state" => &mut state,
            "code" => &mut code,
            "error" => &mut error,
            _ => continue,
        };
        if slot.replace(value.into_owned()).is_some() {
            // Two states or two codes: which one is meant cannot be known.
            return Request::WrongState;
        }
    }
    if !state
        .as_deref()
        .is_some_and(|s| same_secret(s, expected_state))
    {
        return Request::WrongState;
    }
    Request::Callback(match code.filter(|c| !c.is_empty()) {
        Some(code) => CallbackOutcome::Code(code),
        None => CallbackOutcome::Denied {
            error: error.unwrap_or_else(|| "missing_code".to_owned()),
        },
    })
}

/// What the browser is told once the app has dealt with the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The code was exchanged and the tokens saved.
    SignedIn,
    /// The user declined on Feishu's page.
    Declined,
    /// The sign-in failed; the reason is shown (it must hold no secret).
    Failed(String),
    /// The app received Feishu's answer and finishes the sign-in on its own.
    Received,
}

/// A valid callback, its browser still waiting for the page.
#[derive(Debug)]
pub struct Callback {
    /// What Feishu sent.
    pub outcome: CallbackOutcome,
    reply: Option<oneshot::Sender<Answer>>,
    server: Server,
}

impl Callback {
    /// The authorization code, with the callback still to answer once it is exchanged; `None`
    /// when the user declined, whose browser is then told so.
    pub async fn code_or_decline(self) -> Option<(String, Callback)> {
        match self.outcome.clone() {
            CallbackOutcome::Code(code) => Some((code, self)),
            CallbackOutcome::Denied { .. } => {
                self.answer(Answer::Declined).await;
                None
            }
        }
    }

    /// Answers the browser with `answer`, then stops the listener and frees the port.
    pub async fn answer(mut self, answer: Answer) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(answer);
        }
        self.server.finish().await;
    }
}

/// The accept loop's task; aborting it drops its connections' tasks with it.
#[derive(Debug)]
struct Server {
    task: tokio::task::JoinHandle<()>,
    /// Closed to ask the accept loop to stop accepting and let the answer be written.
    stop: Option<oneshot::Sender<()>>,
}

impl Server {
    async fn finish(&mut self) {
        drop(self.stop.take());
        // The loop ends once its last connection has written its answer; a browser that does not
        // read it is not waited for.
        if tokio::time::timeout(Duration::from_secs(2), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stop accepting, give a connection being answered a moment to write its page, then end
        // every connection: none outlives the listener by more than that moment.
        drop(self.stop.take());
        let task = self.task.abort_handle();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    task.abort();
                });
            }
            Err(_) => task.abort(),
        }
    }
}

/// A bound, not yet serving, loopback listener.
#[derive(Debug)]
pub struct LoopbackListener {
    listener: tokio::net::TcpListener,
    port: u16,
}

struct Shared {
    expected_state: String,
    host: String,
    found: mpsc::Sender<(CallbackOutcome, oneshot::Sender<Answer>)>,
}

impl LoopbackListener {
    /// Binds `127.0.0.1:port` (`0` picks a free port, for tests).
    pub async fn bind(port: u16) -> Result<Self, ListenerError> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::AddrInUse {
                    ListenerError::PortBusy { port }
                } else {
                    ListenerError::Bind { port, source }
                }
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| ListenerError::Bind { port, source })?
            .port();
        Ok(LoopbackListener { listener, port })
    }

    /// The port actually bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address actually bound (always `127.0.0.1`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// `http://127.0.0.1:<port>/callback`: the URL to register with Feishu.
    pub fn redirect_uri(&self) -> String {
        redirect_uri(self.port)
    }

    /// Serves until one valid callback for `expected_state` arrives or `timeout` passes. The
    /// callback's browser waits for [`Callback::answer`]; dropping the [`Callback`] unanswered
    /// tells it the sign-in could not be completed. Dropping the future stops the listener.
    pub async fn callback(
        self,
        expected_state: &str,
        timeout: Duration,
    ) -> Result<Callback, ListenerError> {
        let (found, mut outcomes) = mpsc::channel(1);
        let shared = Arc::new(Shared {
            expected_state: expected_state.to_owned(),
            host: format!("127.0.0.1:{}", self.port),
            found,
        });
        let (stop, stopped) = oneshot::channel();
        // Until the callback arrives the server runs inside this future, so dropping it (a new
        // sign-in replacing this one) closes the port at once; then it moves to a task of its
        // own, to answer the browser once the app has exchanged the code.
        let mut serving = Box::pin(accept_loop(self.listener, shared, stopped));
        tokio::select! {
            received = tokio::time::timeout(timeout, outcomes.recv()) => match received {
                Ok(Some((outcome, reply))) => Ok(Callback {
                    outcome,
                    reply: Some(reply),
                    server: Server {
                        task: tokio::spawn(serving),
                        stop: Some(stop),
                    },
                }),
                Ok(None) => Err(ListenerError::Stopped("no callback".to_owned())),
                Err(_) => Err(ListenerError::Timeout(timeout)),
            },
            () = &mut serving => Err(ListenerError::Stopped("closed".to_owned())),
        }
    }

    /// Like [`LoopbackListener::callback`], for callers that finish the sign-in elsewhere: the
    /// browser is told that the app received Feishu's answer and finishes the sign-in itself.
    pub async fn wait(
        self,
        expected_state: &str,
        timeout: Duration,
    ) -> Result<CallbackOutcome, ListenerError> {
        let mut callback = self.callback(expected_state, timeout).await?;
        let outcome = callback.outcome.clone();
        if let Some(reply) = callback.reply.take() {
            let _ = reply.send(match &outcome {
                CallbackOutcome::Code(_) => Answer::Received,
                CallbackOutcome::Denied { .. } => Answer::Declined,
            });
        }
        callback.server.finish().await;
        Ok(outcome)
    }
}

/// Accepts connections until asked to stop (then lets the open ones finish) or aborted (then
/// its `JoinSet` drops, aborting every connection's task).
async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    // Oldest first: each connection's task and whether it has sent a request.
    let mut open: VecDeque<(AbortHandle, Arc<AtomicBool>)> = VecDeque::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to close.
                tracing::warn!(error = %e, "the sign-in listener could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        open.retain(|(task, _)| !task.is_finished());
        if open.len() >= MAX_CONNECTIONS {
            match open
                .iter()
                .position(|(_, busy)| !busy.load(Ordering::Acquire))
            {
                Some(oldest_idle) => {
                    if let Some((task, _)) = open.remove(oldest_idle) {
                        task.abort();
                    }
                }
                // Every connection is being answered: there is no room for another.
                None => continue,
            }
        }
        let busy = Arc::new(AtomicBool::new(false));
        let task = connections.spawn(serve_connection(stream, shared.clone(), busy.clone()));
        open.push_back((task, busy));
    }
    drop(listener);
    // Stopped: the callback's connection writes its answer; the rest are closed.
    for (task, busy) in &open {
        if !busy.load(Ordering::Acquire) {
            task.abort();
        }
    }
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    busy: Arc<AtomicBool>,
) {
    let service = {
        let busy = busy.clone();
        hyper::service::service_fn(move |request| {
            busy.store(true, Ordering::Release);
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(respond(&shared, &request).await) }
        })
    };
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = &mut connection => return,
        () = tokio::time::sleep(HEADER_TIMEOUT) => {}
    }
    if busy.load(Ordering::Acquire) {
        // Its request is being answered (the app may be exchanging the code).
        let _ = tokio::time::timeout(ANSWER_TIMEOUT + HEADER_TIMEOUT, connection).await;
    }
    // Otherwise it sent nothing in time: dropping it closes the socket.
}

async fn respond<B>(shared: &Shared, request: &hyper::Request<B>) -> hyper::Response<Full<Bytes>> {
    let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let host = request
        .headers()
        .get(header::HOST)
        .map(HeaderValue::as_bytes);
    let method = if request.method() == Method::GET {
        "GET"
    } else {
        request.method().as_str()
    };
    match classify(method, target, host, &shared.host, &shared.expected_state) {
        Request::WrongHost => page(StatusCode::BAD_REQUEST, Page::WrongHost),
        Request::NotFound => not_found(),
        Request::WrongState => page(StatusCode::BAD_REQUEST, Page::WrongState),
        Request::Callback(outcome) => {
            let (reply, answer) = oneshot::channel();
            if shared.found.try_send((outcome, reply)).is_err() {
                // A second valid-looking callback after the first: the sign-in is already over.
                return page(StatusCode::CONFLICT, Page::AlreadyDone);
            }
            match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
                Ok(Ok(Answer::SignedIn)) => page(StatusCode::OK, Page::SignedIn),
                Ok(Ok(Answer::Declined)) => page(StatusCode::OK, Page::Denied),
                Ok(Ok(Answer::Received)) => page(StatusCode::OK, Page::Received),
                Ok(Ok(Answer::Failed(reason))) => {
                    page(StatusCode::BAD_GATEWAY, Page::Failed(reason))
                }
                Ok(Err(_)) | Err(_) => page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Page::Failed(String::new()),
                ),
            }
        }
    }
}

/// The redirect URI for a port.
pub fn redirect_uri(port: u16) -> String {
    format!("http://127.0.0.1:{port}/callback")
}

fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn not_found() -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"not found")));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

enum Page {
    SignedIn,
    /// Feishu's answer reached the app, which finishes the sign-in itself.
    Received,
    Denied,
    /// The sign-in failed; why, when known.
    Failed(String),
    WrongState,
    WrongHost,
    AlreadyDone,
}

fn page(status: StatusCode, which: Page) -> hyper::Response<Full<Bytes>> {
    let (zh, en, detail) = match which {
        Page::SignedIn => (
            "登录成功，请返回飞书助手。此窗口可以关闭。",
            "Signed in. Return to Feishu Companion; you can close this window.",
            String::new(),
        ),
        Page::Received => (
            "已收到飞书的授权，请返回飞书助手完成登录。",
            "Feishu's answer reached the app. Return to Feishu Companion, which finishes the sign-in.",
            String::new(),
        ),
        Page::Denied => (
            "你取消了授权。请返回飞书助手。",
            "You declined the sign-in. Return to Feishu Companion.",
            String::new(),
        ),
        Page::Failed(reason) => (
            "登录没有完成。请返回飞书助手查看原因并重试。",
            "The sign-in did not complete. Return to Feishu Companion to see why and try again.",
            reason,
        ),
        Page::WrongState => (
            "这个登录链接已失效。请回到飞书助手重新登录。",
            "This sign-in link is no longer valid. Return to Feishu Companion and sign in again.",
            String::new(),
        ),
        Page::WrongHost => (
            "请求地址不正确。",
            "This request was not addressed to Feishu Companion.",
            String::new(),
        ),
        Page::AlreadyDone => (
            "登录已完成。请返回飞书助手。",
            "The sign-in is already complete. Return to Feishu Companion.",
            String::new(),
        ),
    };
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(
            "<p style=\"color:#646a73;font-size:.9rem\">{}</p>",
            escape_html(&detail)
        )
    };
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>飞书助手 · Feishu Companion</title>\
         <meta name=\"viewport\" content=\"width=device-width\"></head>\
         <body style=\"font-family:system-ui,'PingFang SC','Microsoft YaHei','Noto Sans CJK SC',sans-serif;\
         margin:15vh auto;max-width:32rem;text-align:center;color:#1f2329\">\
         <p style=\"font-size:1.15rem\">{zh}</p><p style=\"color:#646a73\">{en}</p>{detail}</body></html>"
    );
    let mut response = hyper::Response::new(Full::new(Bytes::from(html)));
    *response.status_mut() = status;
    // The page is static; it must not be framed or cached.
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    response
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "127.0.0.1:9768";

    fn classify_get(target: &str) -> Request {
        classify("GET", target, Some(HOST.as_bytes()), HOST, "st4te")
    }

    #[test]
    fn requests_are_classified_by_host_path_and_state() {
        assert_eq!(
            classify_get("/callback?code=abc&state=st4te"),
            Request::Callback(CallbackOutcome::Code("abc".into()))
        );
        assert_eq!(
            classify_get("/callback?error=access_denied&state=st4te"),
            Request::Callback(CallbackOutcome::Denied {
                error: "access_denied".into()
            })
        );
        assert_eq!(
            classify(
                "GET",
                "/callback?code=a&state=st4te",
                Some(b"localhost:9768"),
                HOST,
                "st4te"
            ),
            Request::WrongHost
        );
        assert_eq!(
            classify("GET", "/callback?code=a&state=st4te", None, HOST, "st4te"),
            Request::WrongHost
        );
        assert_eq!(
            classify(
                "POST",
                "/callback?code=a&state=st4te",
                Some(HOST.as_bytes()),
                HOST,
                "st4te"
            ),
            Request::NotFound
        );
        assert_eq!(
            classify_get("/callbackx?code=a&state=st4te"),
            Request::NotFound
        );
        assert_eq!(
            classify_get("/callback?code=a&state=st4tf"),
            Request::WrongState
        );
        assert_eq!(classify_get("/callback?code=a"), Request::WrongState);
        // A second state, or a second code, makes the request ambiguous: refused.
        assert_eq!(
            classify_get("/callback?code=a&state=st4te&state=x"),
            Request::WrongState
        );
        assert_eq!(
            classify_get("/callback?code=a&code=b&state=st4te"),
            Request::WrongState
        );
        assert_eq!(
            classify_get("/callback?code=%E4%BD%A0&state=st%34te"),
            Request::Callback(CallbackOutcome::Code("你".into()))
        );
    }

    #[test]
    fn a_failure_reason_is_escaped_on_the_page() {
        assert_eq!(
            escape_html("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
    }
}
