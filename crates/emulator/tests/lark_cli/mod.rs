//! The official lark-cli's reading of the self-registration and device-flow answers, redone in
//! Rust for the tests: which keys it reads, which fallbacks it takes, which `error` strings it
//! matches and what it concludes from each (`internal/auth/app_registration.go`,
//! `internal/auth/device_flow.go`, `cmd/config/init_interactive.go`). Tests assert on these
//! conclusions, so an answer the CLI would misread fails them.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use base64::Engine as _;
use serde_json::Value;

pub fn http() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `getStr`: a string value, or empty when absent or not a string.
pub fn get_str(data: &Value, key: &str) -> String {
    data.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `getInt`: a number, or the fallback.
pub fn get_int(data: &Value, key: &str, fallback: i64) -> i64 {
    data.get(key)
        .and_then(Value::as_f64)
        .map_or(fallback, |n| n as i64)
}

/// A form POST as lark-cli sends it: the HTTP status and the body as JSON.
pub async fn post_form(
    url: &str,
    pairs: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let mut request = http()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some((id, secret)) = basic {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
        request = request.header("authorization", format!("Basic {encoded}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, json)
}

/// The `error_description`-else-`error` message lark-cli puts in its failures.
fn failure_message(data: &Value) -> String {
    let description = get_str(data, "error_description");
    if !description.is_empty() {
        return description;
    }
    let error = get_str(data, "error");
    if error.is_empty() {
        "Unknown error".to_owned()
    } else {
        error
    }
}

/// `AppRegistrationResponse`.
#[derive(Debug, Clone)]
pub struct Begun {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: i64,
    pub interval: i64,
}

/// `RequestAppRegistration`: the begin call on `accounts` (always Feishu's in lark-cli); the
/// complete URL is built on `open`, the brand the person picked.
pub async fn begin_registration(accounts: &str, open: &str) -> Result<Begun, String> {
    let (status, data) = post_form(
        &format!("{accounts}/oauth/v1/app/registration"),
        &[
            ("action", "begin"),
            ("archetype", "PersonalAgent"),
            ("auth_method", "client_secret"),
            ("request_user_info", "open_id tenant_brand"),
        ],
        None,
    )
    .await;
    read_begin(status, &data, open)
}

pub fn read_begin(status: u16, data: &Value, open: &str) -> Result<Begun, String> {
    if status >= 400 || data.get("error").is_some() {
        return Err(format!(
            "app registration failed: {}",
            failure_message(data)
        ));
    }
    let user_code = get_str(data, "user_code");
    Ok(Begun {
        device_code: get_str(data, "device_code"),
        verification_uri: get_str(data, "verification_uri"),
        verification_uri_complete: format!("{open}/page/cli?user_code={user_code}"),
        user_code,
        expires_in: get_int(data, "expires_in", 300),
        interval: get_int(data, "interval", 5),
    })
}

/// `BuildVerificationURL`: the tracking parameters lark-cli appends before showing the link.
pub fn with_tracking(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}lpv=1.0.0&ocv=1.0.0&from=cli")
}

/// What one registration poll means to lark-cli's loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrationPoll {
    /// `client_id` present and no `error`: the loop returns this.
    Done {
        client_id: String,
        client_secret: String,
        open_id: Option<String>,
        tenant_brand: Option<String>,
    },
    /// `authorization_pending`: poll again at the same interval.
    Pending,
    /// `slow_down`: poll again, 5 s slower.
    SlowDown,
    /// The loop gives up with this message.
    Failed(String),
}

/// One iteration of `PollAppRegistration` against `accounts`.
pub async fn poll_registration(accounts: &str, device_code: &str) -> RegistrationPoll {
    let (_, data) = post_form(
        &format!("{accounts}/oauth/v1/app/registration"),
        &[("action", "poll"), ("device_code", device_code)],
        None,
    )
    .await;
    read_registration_poll(&data)
}

pub fn read_registration_poll(data: &Value) -> RegistrationPoll {
    let error = get_str(data, "error");
    if error.is_empty() && !get_str(data, "client_id").is_empty() {
        let info = data.get("user_info").filter(|v| v.is_object());
        return RegistrationPoll::Done {
            client_id: get_str(data, "client_id"),
            client_secret: get_str(data, "client_secret"),
            open_id: info.map(|i| get_str(i, "open_id")),
            tenant_brand: info.map(|i| get_str(i, "tenant_brand")),
        };
    }
    match error.as_str() {
        "authorization_pending" => RegistrationPoll::Pending,
        "slow_down" => RegistrationPoll::SlowDown,
        "access_denied" => RegistrationPoll::Failed("app registration denied by user".to_owned()),
        "expired_token" | "invalid_grant" => {
            RegistrationPoll::Failed("device code expired, please try again".to_owned())
        }
        _ => RegistrationPoll::Failed(format!(
            "app registration failed: {}",
            failure_message(data)
        )),
    }
}

/// `DeviceAuthResponse`.
#[derive(Debug, Clone)]
pub struct DeviceAuth {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: i64,
    pub interval: i64,
}

/// `RequestDeviceAuthorization`: `offline_access` is always added to the scopes.
pub async fn request_device_authorization(
    accounts: &str,
    app_id: &str,
    secret: &str,
    scope: &str,
) -> Result<DeviceAuth, String> {
    let scope = if scope.contains("offline_access") {
        scope.to_owned()
    } else if scope.is_empty() {
        "offline_access".to_owned()
    } else {
        format!("{scope} offline_access")
    };
    let (status, data) = post_form(
        &format!("{accounts}/oauth/v1/device_authorization"),
        &[("client_id", app_id), ("scope", &scope)],
        Some((app_id, secret)),
    )
    .await;
    read_device_authorization(status, &data)
}

pub fn read_device_authorization(status: u16, data: &Value) -> Result<DeviceAuth, String> {
    if status >= 400 || data.get("error").is_some() {
        return Err(format!(
            "Device authorization failed: {}",
            failure_message(data)
        ));
    }
    let verification_uri = get_str(data, "verification_uri");
    let mut complete = get_str(data, "verification_uri_complete");
    if complete.is_empty() {
        complete = verification_uri.clone();
    }
    Ok(DeviceAuth {
        device_code: get_str(data, "device_code"),
        user_code: get_str(data, "user_code"),
        verification_uri,
        verification_uri_complete: complete,
        expires_in: get_int(data, "expires_in", 240),
        interval: get_int(data, "interval", 5),
    })
}

/// `DeviceFlowTokenData`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToken {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: i64,
    pub refresh_expires_in: i64,
    pub scope: String,
}

impl DeviceToken {
    pub fn scopes(&self) -> Vec<&str> {
        self.scope.split_whitespace().collect()
    }
}

/// What one token poll means to `PollDeviceToken`'s loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicePoll {
    Done(DeviceToken),
    Pending,
    SlowDown,
    /// `DeviceFlowResult{OK:false}`: the `Error` lark-cli reports (it folds `invalid_grant`
    /// and anything unexpected into `expired_token`) and the message.
    Failed {
        error: String,
        message: String,
    },
}

/// One iteration of `PollDeviceToken` against `open`.
pub async fn poll_device_token(
    open: &str,
    app_id: &str,
    secret: &str,
    device_code: &str,
) -> DevicePoll {
    let (_, data) = post_form(
        &format!("{open}/open-apis/authen/v2/oauth/token"),
        &[
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", device_code),
            ("client_id", app_id),
            ("client_secret", secret),
        ],
        None,
    )
    .await;
    read_device_poll(&data)
}

pub fn read_device_poll(data: &Value) -> DevicePoll {
    let error = get_str(data, "error");
    if error.is_empty() && !get_str(data, "access_token").is_empty() {
        let refresh_token = get_str(data, "refresh_token");
        let expires_in = get_int(data, "expires_in", 7200);
        let mut refresh_expires_in = get_int(data, "refresh_token_expires_in", 604_800);
        if refresh_token.is_empty() {
            refresh_expires_in = expires_in;
        }
        return DevicePoll::Done(DeviceToken {
            access_token: get_str(data, "access_token"),
            refresh_token,
            expires_in,
            refresh_expires_in,
            scope: get_str(data, "scope"),
        });
    }
    let description = get_str(data, "error_description");
    let or = |fallback: &str| {
        if description.is_empty() {
            fallback.to_owned()
        } else {
            description.clone()
        }
    };
    match error.as_str() {
        "authorization_pending" => DevicePoll::Pending,
        "slow_down" => DevicePoll::SlowDown,
        "access_denied" => DevicePoll::Failed {
            error: "access_denied".to_owned(),
            message: or("Authorization denied by user"),
        },
        "expired_token" | "invalid_grant" => DevicePoll::Failed {
            error: "expired_token".to_owned(),
            message: or("Device code expired, please try again"),
        },
        _ => DevicePoll::Failed {
            error: "expired_token".to_owned(),
            message: or(if error.is_empty() {
                "Unknown error"
            } else {
                &error
            }),
        },
    }
}

/// The raw `error` of a token-endpoint answer, for tests that tell `invalid_grant` from
/// `expired_token` (lark-cli folds them; the contract keeps them apart).
pub async fn raw_device_poll(
    open: &str,
    app_id: &str,
    secret: &str,
    device_code: &str,
) -> (u16, Value) {
    post_form(
        &format!("{open}/open-apis/authen/v2/oauth/token"),
        &[
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", device_code),
            ("client_id", app_id),
            ("client_secret", secret),
        ],
        None,
    )
    .await
}

/// The raw answer of a registration poll.
pub async fn raw_registration_poll(accounts: &str, device_code: &str) -> (u16, Value) {
    post_form(
        &format!("{accounts}/oauth/v1/app/registration"),
        &[("action", "poll"), ("device_code", device_code)],
        None,
    )
    .await
}

/// A page's status and HTML.
pub async fn get_page(url: &str) -> (u16, String) {
    let answer = http().get(url).send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// A form POST from a page (a person pressing a button): status and HTML.
pub async fn press(url: &str, pairs: &[(&str, &str)]) -> (u16, String) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let answer = http()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// The `action` of the page's first form, made absolute on `base`.
pub fn form_action(base: &str, html: &str) -> String {
    let marker = "action=\"";
    let start = html.find(marker).expect("a form") + marker.len();
    let end = html[start..].find('"').unwrap();
    format!("{base}{}", &html[start..start + end])
}

/// An Open API call with a user token: status and JSON.
pub async fn open_api(
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = http()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
    )
}

/// A hook call with a JSON body: status and JSON.
pub async fn hook(base: &str, path: &str, body: Value) -> (u16, Value) {
    let response = http()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
    )
}

/// A hook GET: JSON.
pub async fn hook_get(base: &str, path: &str) -> Value {
    http()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
