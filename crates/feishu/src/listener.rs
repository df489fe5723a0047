//! The loopback listener that catches Feishu's redirect after the user consents.
//!
//! Feishu matches registered redirect URLs exactly and has no "any loopback port" rule, so the
//! port is fixed (configurable). The listener binds `127.0.0.1` only — never `0.0.0.0` — and
//! accepts a request only if its `Host` is exactly that address (a page elsewhere cannot reach it
//! through DNS rebinding) and its `state` matches the sign-in it belongs to, compared in constant
//! time. A wrong request is answered and ignored; the listener keeps waiting until the one valid
//! callback arrives or the time runs out, then stops and frees the port.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use subtle::ConstantTimeEq as _;
use tokio::sync::mpsc;

/// The default redirect port: fixed because Feishu needs the exact URL registered.
pub const DEFAULT_PORT: u16 = 9768;

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

/// A bound, not yet serving, loopback listener.
#[derive(Debug)]
pub struct LoopbackListener {
    listener: tokio::net::TcpListener,
    port: u16,
}

#[derive(Clone)]
struct Shared {
    expected_state: String,
    host: String,
    found: mpsc::Sender<CallbackOutcome>,
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

    /// Serves until one valid callback for `expected_state` arrives or `timeout` passes, then
    /// stops (after answering the browser) and frees the port. Dropping the future stops it too.
    pub async fn wait(
        self,
        expected_state: &str,
        timeout: Duration,
    ) -> Result<CallbackOutcome, ListenerError> {
        let (found, mut outcomes) = mpsc::channel(1);
        let shared = Shared {
            expected_state: expected_state.to_owned(),
            host: format!("127.0.0.1:{}", self.port),
            found,
        };
        let app = Router::new()
            .route("/callback", get(callback))
            .fallback(not_found)
            .with_state(shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = axum::serve(self.listener, app).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        let mut server = Box::pin(server.into_future());
        let outcome = tokio::select! {
            result = &mut server => return Err(ListenerError::Stopped(match result {
                Ok(()) => "closed".to_owned(),
                Err(e) => e.to_string(),
            })),
            outcome = tokio::time::timeout(timeout, outcomes.recv()) => outcome,
        };
        // Let the server finish answering the browser before the port closes.
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
        match outcome {
            Ok(Some(outcome)) => Ok(outcome),
            Ok(None) => Err(ListenerError::Stopped("no callback".to_owned())),
            Err(_) => Err(ListenerError::Timeout(timeout)),
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

async fn callback(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if host != shared.host {
        return page(StatusCode::BAD_REQUEST, Page::WrongHost);
    }
    let state_ok = query
        .get("state")
        .is_some_and(|s| same_secret(s, &shared.expected_state));
    if !state_ok {
        // Not this sign-in (an old tab, or a forged request): answer, keep waiting.
        return page(StatusCode::BAD_REQUEST, Page::WrongState);
    }
    let (outcome, shown) = if let Some(code) = query.get("code").filter(|c| !c.is_empty()) {
        (CallbackOutcome::Code(code.clone()), Page::SignedIn)
    } else {
        let error = query
            .get("error")
            .cloned()
            .unwrap_or_else(|| "missing_code".to_owned());
        (CallbackOutcome::Denied { error }, Page::Denied)
    };
    if shared.found.try_send(outcome).is_err() {
        // A second valid-looking callback after the first: the sign-in is already finished.
        return page(StatusCode::CONFLICT, Page::AlreadyDone);
    }
    page(StatusCode::OK, shown)
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

#[derive(Clone, Copy)]
enum Page {
    SignedIn,
    Denied,
    WrongState,
    WrongHost,
    AlreadyDone,
}

fn page(status: StatusCode, which: Page) -> Response {
    let (zh, en) = match which {
        Page::SignedIn => (
            "登录成功，请返回飞书助手。此窗口可以关闭。",
            "Signed in. Return to Feishu Companion; you can close this window.",
        ),
        Page::Denied => (
            "你取消了授权。请返回飞书助手。",
            "You declined the sign-in. Return to Feishu Companion.",
        ),
        Page::WrongState => (
            "这个登录链接已失效。请回到飞书助手重新登录。",
            "This sign-in link is no longer valid. Return to Feishu Companion and sign in again.",
        ),
        Page::WrongHost => (
            "请求地址不正确。",
            "This request was not addressed to Feishu Companion.",
        ),
        Page::AlreadyDone => (
            "登录已完成。请返回飞书助手。",
            "The sign-in is already complete. Return to Feishu Companion.",
        ),
    };
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>飞书助手 · Feishu Companion</title>\
         <meta name=\"viewport\" content=\"width=device-width\"></head>\
         <body style=\"font-family:system-ui,'PingFang SC','Microsoft YaHei','Noto Sans CJK SC',sans-serif;\
         margin:15vh auto;max-width:32rem;text-align:center;color:#1f2329\">\
         <p style=\"font-size:1.15rem\">{zh}</p><p style=\"color:#646a73\">{en}</p></body></html>"
    );
    let mut response = (status, Html(html)).into_response();
    // The page is static; it must not be framed or cached.
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert("x-frame-options", header::HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    response
}
