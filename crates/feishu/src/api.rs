//! The Open API client: Feishu's `{code,msg,data}` envelope, its error codes, pagination, and
//! the waits and retries a well-behaved client owes it.
//!
//! Decisions are made on `code`, never on `msg`: 99991400 (rate limited) waits out
//! `x-ogw-ratelimit-reset` and tries again, a bounded number of times; a 5xx is retried with
//! jittered exponential backoff, bounded; 99991677/99991668 (token expired or invalid) refresh the
//! token once and retry; 99991679 (the user has not granted a scope) becomes a request to sign in
//! for exactly the scopes its `permission_violations` name; 99991672 (the app lacks the scope)
//! tells the user their admin must enable it. Every error keeps Feishu's `x-tt-logid` for support.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use reqwest::Method;
use secrecy::ExposeSecret as _;
use serde_json::{Value, json};

use crate::config::Endpoints;
use crate::flow::missing_scopes_from_error;
use crate::ids::{ApiPath, BadId};
use crate::tokens::{TokenError, TokenManager};

/// How hard the client tries before giving up.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Rate-limit waits per request.
    pub rate_limit_waits: u32,
    /// The longest single rate-limit wait; a longer reset is reported instead of waited out.
    pub max_rate_limit_wait: Duration,
    /// Retries of a 5xx or a network failure per request.
    pub server_retries: u32,
    /// The first backoff; each retry doubles it, with jitter.
    pub backoff: Duration,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            rate_limit_waits: 3,
            max_rate_limit_wait: Duration::from_secs(60),
            server_retries: 3,
            backoff: Duration::from_millis(300),
            timeout: Duration::from_secs(30),
        }
    }
}

/// A failed Open API call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The user must sign in (again), for these scopes (empty: whatever the tool needs).
    #[error("Feishu needs the user to sign in{}", scopes_suffix(.scopes))]
    NeedsAuth {
        /// The scopes to ask for.
        scopes: Vec<String>,
    },
    /// The app itself lacks a scope: only a tenant admin can enable it.
    #[error(
        "the Feishu app has not been granted this permission by your organisation ({message}). Ask your Feishu admin to enable it for the app in the developer console and publish a new version."
    )]
    ScopeNotEnabled {
        /// Feishu's message, which names the scope.
        message: String,
        /// The scopes its `permission_violations` name (any one of them would do).
        scopes: Vec<String>,
        /// Feishu's log id.
        log_id: Option<String>,
    },
    /// Rate limited longer than the policy waits.
    #[error("Feishu is rate limiting this request; try again in {} s", .reset.as_secs())]
    RateLimited {
        /// How long until the window resets.
        reset: Duration,
    },
    /// Feishu kept failing on its side.
    #[error("Feishu is having trouble (HTTP {http_status}) after {attempts} attempts{}", log_suffix(.log_id))]
    Server {
        /// The last HTTP status.
        http_status: u16,
        /// Attempts made.
        attempts: u32,
        /// Feishu's log id.
        log_id: Option<String>,
    },
    /// Feishu answered with an error code.
    #[error("Feishu error {code}: {msg}{}", log_suffix(.log_id))]
    Feishu {
        /// HTTP status.
        http_status: u16,
        /// Feishu's code.
        code: i64,
        /// Feishu's message.
        msg: String,
        /// Feishu's log id.
        log_id: Option<String>,
        /// The whole body, for callers that need a field of `error`.
        body: Box<Value>,
    },
    /// Feishu could not be reached.
    #[error("cannot reach Feishu: {0}")]
    Network(String),
    /// Feishu's answer was not what it documents.
    #[error("Feishu's answer could not be read: {0}")]
    Malformed(String),
    /// The token could not be had for another reason (store failure, bad settings).
    #[error(transparent)]
    Token(TokenError),
    /// An id does not have its kind's shape: refused before any request.
    #[error(transparent)]
    BadId(#[from] BadId),
}

fn scopes_suffix(scopes: &[String]) -> String {
    if scopes.is_empty() {
        String::new()
    } else {
        format!(" and grant {}", scopes.join(", "))
    }
}

fn log_suffix(log_id: &Option<String>) -> String {
    log_id
        .as_ref()
        .map(|id| format!(" (log id {id})"))
        .unwrap_or_default()
}

impl ApiError {
    /// Feishu's code, when it gave one.
    pub fn code(&self) -> Option<i64> {
        match self {
            ApiError::Feishu { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Talks to the Open API as the signed-in user.
#[derive(Debug, Clone)]
pub struct ApiClient {
    endpoints: Endpoints,
    tokens: Arc<TokenManager>,
    http: reqwest::Client,
    policy: RetryPolicy,
}

/// Where the next page comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStyle {
    /// `page_token` in, `data.page_token` + `data.has_more` out (most APIs).
    PageToken,
    /// `page_token` in, `data.next_page_token` + `data.has_more` out (the drive file list).
    NextPageToken,
}

impl ApiClient {
    /// A client using `tokens` for the user's identity.
    pub fn new(
        endpoints: Endpoints,
        tokens: Arc<TokenManager>,
        policy: RetryPolicy,
    ) -> Result<Self, ApiError> {
        crate::oauth::install_crypto_provider();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(policy.timeout)
            .build()
            .map_err(|e| ApiError::Malformed(format!("cannot build the HTTP client: {e}")))?;
        Ok(ApiClient {
            endpoints,
            tokens,
            http,
            policy,
        })
    }

    /// The token manager.
    pub fn tokens(&self) -> &Arc<TokenManager> {
        &self.tokens
    }

    /// Calls `method path` (relative to `/open-apis/`) and returns `data` (`null` when absent).
    /// For reads, and for writes that carry the service's idempotency key: both may be sent again.
    pub async fn call(
        &self,
        method: Method,
        path: &ApiPath,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.request(method, path, query, body, true).await
    }

    /// Like [`ApiClient::call`] for a write the service cannot deduplicate: after a server error
    /// or a timeout it is not sent again (it may have taken effect); only a connection that never
    /// opened is retried.
    pub async fn call_unrepeatable(
        &self,
        method: Method,
        path: &ApiPath,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.request(method, path, query, body, false).await
    }

    async fn request(
        &self,
        method: Method,
        path: &ApiPath,
        query: &[(&str, String)],
        body: Option<&Value>,
        repeatable: bool,
    ) -> Result<Value, ApiError> {
        let url = self.endpoints.api(path);
        let path = path.to_string();
        let path = path.as_str();
        let mut rate_waits = 0;
        let mut server_attempts = 0;
        let mut refreshed = false;
        let mut token = self.tokens.access_token().await.map_err(token_error)?;
        loop {
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .bearer_auth(token.expose_secret())
                .query(query);
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = match request.send().await {
                Ok(response) => response,
                Err(e) => {
                    server_attempts += 1;
                    if server_attempts <= self.policy.server_retries
                        && (repeatable || e.is_connect())
                    {
                        self.backoff(server_attempts).await;
                        continue;
                    }
                    return Err(ApiError::Network(if e.is_timeout() {
                        "timed out".into()
                    } else {
                        "connection failed".into()
                    }));
                }
            };
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let log_id = header(&headers, "x-tt-logid");
            let text = response
                .text()
                .await
                .map_err(|_| ApiError::Network("the answer was cut off".into()))?;
            let reset = header(&headers, "x-ogw-ratelimit-reset");
            match decode_answer(status, reset.as_deref(), log_id.clone(), &text) {
                Answer::Data(data) => return Ok(data),
                Answer::RateLimited { reset } => {
                    if rate_waits < self.policy.rate_limit_waits
                        && reset <= self.policy.max_rate_limit_wait
                    {
                        rate_waits += 1;
                        tracing::info!(
                            path,
                            wait_ms = reset.as_millis() as u64,
                            "rate limited by Feishu; waiting"
                        );
                        // A little past the reset, so the retry lands in the new window.
                        tokio::time::sleep(reset + Duration::from_millis(50)).await;
                        continue;
                    }
                    return Err(ApiError::RateLimited { reset });
                }
                Answer::ServerError => {
                    server_attempts += 1;
                    if repeatable && server_attempts <= self.policy.server_retries {
                        tracing::warn!(
                            path,
                            status,
                            log_id = log_id.as_deref(),
                            "Feishu server error; retrying"
                        );
                        self.backoff(server_attempts).await;
                        continue;
                    }
                    return Err(ApiError::Server {
                        http_status: status,
                        attempts: server_attempts,
                        log_id,
                    });
                }
                Answer::TokenRejected(error) => {
                    if refreshed {
                        return Err(error);
                    }
                    refreshed = true;
                    token = self
                        .tokens
                        .refresh_after_rejection(&token)
                        .await
                        .map_err(token_error)?;
                }
                Answer::Failed(error) => return Err(error),
            }
        }
    }

    async fn backoff(&self, attempt: u32) {
        let base = self
            .policy
            .backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(6));
        // Full jitter: spreads retries of many clients instead of synchronising them.
        let jittered = base.mul_f64(0.5 + fastrand::f64() * 0.5);
        tokio::time::sleep(jittered).await;
    }

    /// Every item of a paginated list, page after page, as a stream (`items_key` names the array
    /// in `data`, e.g. `items`). Stops at `max_items` when given.
    pub fn paginate<'a>(
        &'a self,
        path: &'a ApiPath,
        query: Vec<(&'a str, String)>,
        items_key: &'a str,
        style: PageStyle,
        max_items: Option<usize>,
    ) -> impl Stream<Item = Result<Value, ApiError>> + 'a {
        async_stream(move |sender| async move {
            let mut page_token: Option<String> = None;
            let mut sent = 0usize;
            loop {
                let mut q = query.clone();
                if let Some(token) = &page_token {
                    q.push(("page_token", token.clone()));
                }
                let data = match self.call(Method::GET, path, &q, None).await {
                    Ok(data) => data,
                    Err(e) => {
                        let _ = sender.send(Err(e)).await;
                        return;
                    }
                };
                for item in data
                    .get(items_key)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    if max_items.is_some_and(|max| sent >= max)
                        || sender.send(Ok(item)).await.is_err()
                    {
                        return;
                    }
                    sent += 1;
                }
                let has_more = data
                    .get("has_more")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let next_key = match style {
                    PageStyle::PageToken => "page_token",
                    PageStyle::NextPageToken => "next_page_token",
                };
                page_token = data
                    .get(next_key)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                if !has_more || page_token.is_none() || max_items.is_some_and(|max| sent >= max) {
                    return;
                }
            }
        })
    }

    /// Collects a paginated list into a vector.
    pub async fn collect(
        &self,
        path: &ApiPath,
        query: Vec<(&str, String)>,
        items_key: &str,
        style: PageStyle,
        max_items: Option<usize>,
    ) -> Result<Vec<Value>, ApiError> {
        use futures::StreamExt as _;
        let mut items = Vec::new();
        let mut stream = std::pin::pin!(self.paginate(path, query, items_key, style, max_items));
        while let Some(item) = stream.next().await {
            items.push(item?);
        }
        Ok(items)
    }
}

/// What one answer of the Open API means, decided on its HTTP status and Feishu's `code`, never
/// on `msg`.
#[derive(Debug)]
pub enum Answer {
    /// `code` 0: the call's `data` (`null` when absent).
    Data(Value),
    /// HTTP 429 or `code` 99991400: wait this long (`x-ogw-ratelimit-reset`, 1 s when absent).
    RateLimited {
        /// Until the rate-limit window resets.
        reset: Duration,
    },
    /// HTTP 5xx: Feishu failed on its side.
    ServerError,
    /// 99991677/99991668: the access token expired or is invalid; refresh once, else this error.
    TokenRejected(ApiError),
    /// Anything else: the error to report.
    Failed(ApiError),
}

/// Decodes one answer of the Open API: the HTTP `status`, the `x-ogw-ratelimit-reset` header,
/// Feishu's `x-tt-logid` and the body. Total over every input: a body that is not Feishu's
/// `{code,msg,data}` envelope is [`ApiError::Malformed`], never a panic.
pub fn decode_answer(
    status: u16,
    ratelimit_reset: Option<&str>,
    log_id: Option<String>,
    body: &str,
) -> Answer {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let code = parsed
        .as_ref()
        .and_then(|v| v.get("code"))
        .and_then(Value::as_i64);
    if status == 429 || code == Some(99991400) {
        let reset = ratelimit_reset
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(1), Duration::from_secs);
        return Answer::RateLimited { reset };
    }
    if status >= 500 {
        return Answer::ServerError;
    }
    let Some(value) = parsed else {
        return Answer::Failed(ApiError::Malformed(format!(
            "HTTP {status} with a body that is not JSON"
        )));
    };
    let msg = |fallback: &str| {
        value
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or(fallback)
            .to_owned()
    };
    match code {
        Some(0) => Answer::Data(value.get("data").cloned().unwrap_or(Value::Null)),
        Some(99991679) => Answer::Failed(ApiError::NeedsAuth {
            scopes: missing_scopes_from_error(&value),
        }),
        Some(99991672) => Answer::Failed(ApiError::ScopeNotEnabled {
            message: msg(""),
            scopes: missing_scopes_from_error(&value),
            log_id,
        }),
        other => {
            let error = ApiError::Feishu {
                http_status: status,
                code: other.unwrap_or(-1),
                msg: msg("no message"),
                log_id,
                body: Box::new(value),
            };
            if matches!(other, Some(99991677 | 99991668)) {
                Answer::TokenRejected(error)
            } else {
                Answer::Failed(error)
            }
        }
    }
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn token_error(error: TokenError) -> ApiError {
    match error {
        TokenError::NotSignedIn | TokenError::SignInAgain(_) => {
            ApiError::NeedsAuth { scopes: Vec::new() }
        }
        other => ApiError::Token(other),
    }
}

/// A stream fed by an async producer through a bounded channel: the producer waits while the
/// consumer is slow, and stops when the consumer drops the stream.
fn async_stream<T, F, Fut>(producer: F) -> impl Stream<Item = T>
where
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    let produce = producer(sender);
    futures::stream::unfold(
        (Some(Box::pin(produce)), receiver),
        |(mut produce, mut receiver)| async move {
            loop {
                match produce.as_mut() {
                    Some(running) => {
                        tokio::select! {
                            biased;
                            item = receiver.recv() => return item.map(|item| (item, (produce, receiver))),
                            () = running.as_mut() => produce = None,
                        }
                    }
                    None => return receiver.recv().await.map(|item| (item, (None, receiver))),
                }
            }
        },
    )
}

/// The `{code,msg,data}` envelope of a successful call, for emulators and tests.
pub fn ok_envelope(data: Value) -> Value {
    json!({"code": 0, "msg": "success", "data": data})
}
