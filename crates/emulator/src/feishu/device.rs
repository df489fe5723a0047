//! The device authorization grant (RFC 8628), as lark-cli's `auth login` uses it
//! (`internal/auth/device_flow.go`): the app asks `POST /oauth/v1/device_authorization` (Basic
//! auth with its id and secret) for a code, shows the person the verification page
//! (`/oauth/v1/device/verify?user_code=…`, Allow / Deny), and polls the token endpoint with
//! `grant_type=urn:ietf:params:oauth:grant-type:device_code` until the person decides. No
//! redirect URL is involved.
//!
//! The scopes granted are the requested ones the app has enabled (plus `offline_access`); the
//! rest are trimmed silently, as Feishu "may trim the request", and the token's `scope` says
//! what the client got. Grants accumulate with those of the authorization-code flow, and the
//! token answer is the same flat v2 JSON ([`super::oauth`] issues both).
//!
//! Tests decide for the person with `POST /_emulator/device/decide` or
//! [`FeishuEmulator::decide_device`], and find the code a client is waiting on with
//! `GET /_emulator/device/pending` or [`FeishuEmulator::latest_device_user_code`].

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::console::AppRelease;
use super::page::{self, DEMO_NOTE, Host, escape};
use super::polling::{self, DecideError, PollClock, oauth_error};
use super::{EmulatorState, FeishuEmulator, Shared, now_millis};

/// The grant type the token endpoint takes for this flow.
pub const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Device codes live 4 minutes unless the timing says otherwise (lark-cli's fallback).
const DEFAULT_EXPIRES_IN_SECS: u64 = 240;
const ENDPOINT: &str = "/oauth/v1/device_authorization";
const VERIFY: &str = "/oauth/v1/device/verify";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pending,
    Denied,
    Approved,
    Consumed,
}

#[derive(Debug, Clone)]
struct DeviceAuthorization {
    device_code: String,
    user_code: String,
    app_id: String,
    /// The scopes asked for, as sent.
    requested: Vec<String>,
    clock: PollClock,
    outcome: Outcome,
}

#[derive(Debug, Default)]
pub(crate) struct DeviceState {
    codes: Vec<DeviceAuthorization>,
}

impl DeviceState {
    fn by_user_code(&mut self, typed: &str) -> Option<&mut DeviceAuthorization> {
        let code = polling::normalize_user_code(typed);
        self.codes.iter_mut().find(|d| d.user_code == code)
    }
}

/// A code waiting for the person, as [`FeishuEmulator::pending_device_authorizations`] reports
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingDeviceAuthorization {
    /// `ABCD-EFGH`: what the verification page asks for.
    pub user_code: String,
    /// The app asking.
    pub app_id: String,
    /// The scopes it asked for (the grant trims those the app has not enabled).
    pub scopes: Vec<String>,
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route(ENDPOINT, post(authorize_device))
        .route(VERIFY, get(show_page))
        .route("/oauth/v1/device/verify/decision", post(decide_on_page))
        .route("/_emulator/device/decide", post(decide_hook))
        .route("/_emulator/device/pending", get(pending_hook))
}

/// The app id and secret of an `Authorization: Basic` header.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

/// Of `requested`, the scopes the app may be granted: those it has enabled, and
/// `offline_access`, which the authorize page does not hold against the app either.
fn grantable(state: &EmulatorState, app_id: &str, requested: &[String]) -> Vec<String> {
    let enabled = state
        .apps
        .get(app_id)
        .map(|a| a.enabled_scopes.as_slice())
        .unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for scope in requested {
        if (scope == "offline_access" || enabled.contains(scope)) && !out.contains(scope) {
            out.push(scope.clone());
        }
    }
    out
}

/// `POST /oauth/v1/device_authorization`.
async fn authorize_device(
    State(shared): State<Shared>,
    host: Host,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.log("POST", ENDPOINT, None);
    let form = super::oauth::form_or_json(&headers, &body);
    let mut state = shared.lock();
    let authenticated = basic_credentials(&headers).filter(|(id, secret)| {
        state
            .apps
            .get(id)
            .is_some_and(|app| app.app_secret == *secret)
    });
    let Some((app_id, _)) = authenticated else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client authentication failed: send Authorization: Basic base64(app_id:app_secret)",
        );
    };
    if form.get("client_id").is_some_and(|id| *id != app_id) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "client_id does not match the authenticated client",
        );
    }
    let requested: Vec<String> = form
        .get("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let timing = state.device_timing;
    let expires_in = timing.expires_in_secs.unwrap_or(DEFAULT_EXPIRES_IN_SECS);
    let authorization = DeviceAuthorization {
        device_code: polling::device_code(),
        user_code: polling::user_code(),
        app_id,
        requested,
        clock: PollClock::new(now_millis(), expires_in, timing.interval_secs),
        outcome: Outcome::Pending,
    };
    let verify = format!("{}{}{VERIFY}", state.base_url, host.prefix());
    let answer = json!({
        "device_code": authorization.device_code,
        "user_code": authorization.user_code,
        "verification_uri": verify,
        "verification_uri_complete": format!("{verify}?user_code={}", authorization.user_code),
        "expires_in": expires_in,
        "interval": timing.interval_secs,
    });
    state.device.codes.push(authorization);
    Json(answer).into_response()
}

/// The token endpoint's device-code grant, after the client's id and secret were checked.
pub(crate) fn redeem(
    state: &mut EmulatorState,
    app_id: &str,
    form: &HashMap<String, String>,
) -> Response {
    let device_code = form.get("device_code").cloned().unwrap_or_default();
    let Some(authorization) = state
        .device
        .codes
        .iter_mut()
        .find(|d| d.device_code == device_code)
    else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "unknown device_code",
        );
    };
    if authorization.outcome == Outcome::Consumed {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "the device_code was already used",
        );
    }
    if authorization.app_id != app_id {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "the device_code belongs to another client",
        );
    }
    if let Err(refusal) = authorization.clock.poll(now_millis()) {
        return polling::refusal_answer(refusal);
    }
    match authorization.outcome {
        Outcome::Pending => oauth_error(
            StatusCode::BAD_REQUEST,
            "authorization_pending",
            "the user has not decided yet",
        ),
        Outcome::Denied => oauth_error(
            StatusCode::BAD_REQUEST,
            "access_denied",
            "the user denied the authorization",
        ),
        Outcome::Approved | Outcome::Consumed => {
            authorization.outcome = Outcome::Consumed;
            super::oauth::issue_tokens(state, app_id)
        }
    }
}

/// The person's decision on `user_code`; on allow, adds the grantable scopes to the app's
/// grants (as the authorize page's Allow does) and answers them.
pub(crate) fn decide(
    state: &mut EmulatorState,
    user_code: &str,
    allow: bool,
    open_id: Option<&str>,
) -> Result<Vec<String>, DecideError> {
    let code = polling::normalize_user_code(user_code);
    let now = now_millis();
    let Some(authorization) = state.device.by_user_code(&code) else {
        return Err(DecideError::Unknown(code));
    };
    if authorization.clock.expired(now) {
        return Err(DecideError::Expired(code));
    }
    if authorization.outcome != Outcome::Pending {
        return Err(DecideError::Decided(code));
    }
    if !allow {
        authorization.outcome = Outcome::Denied;
        return Ok(Vec::new());
    }
    let (app_id, requested) = (
        authorization.app_id.clone(),
        authorization.requested.clone(),
    );
    polling::sign_in_as(state, open_id).map_err(DecideError::NoSuchPerson)?;
    let granted = grantable(state, &app_id, &requested);
    let grants = state.oauth.grants.entry(app_id).or_default();
    for scope in &granted {
        if !grants.contains(scope) {
            grants.push(scope.clone());
        }
    }
    if let Some(authorization) = state.device.by_user_code(&code) {
        authorization.outcome = Outcome::Approved;
    }
    Ok(granted)
}

fn refused_page(error: &DecideError) -> Response {
    match error {
        DecideError::Unknown(_) => page::invalid(
            StatusCode::NOT_FOUND,
            "找不到这个授权码，请核对后重试，或回到应用重新登录。",
            "No such code. Check it, or go back to the app and sign in again.",
        ),
        DecideError::Expired(_) => page::invalid(
            StatusCode::BAD_REQUEST,
            "授权码已过期，请回到应用重新登录。",
            "The code has expired. Go back to the app and sign in again.",
        ),
        DecideError::Decided(_) => page::invalid(
            StatusCode::BAD_REQUEST,
            "这个授权请求已处理过了。",
            "This authorization request was already decided.",
        ),
        DecideError::NoSuchPerson(e) => {
            page::invalid(StatusCode::BAD_REQUEST, "找不到这个用户。", e)
        }
    }
}

/// The form a person types the code into when the link carried none.
fn code_entry_page(prefix: &str) -> Response {
    page::respond(
        StatusCode::OK,
        "输入授权码 · Enter the code",
        &format!(
            "<h1>输入授权码 · Enter the code</h1>\
             <p class=\"who\">请输入应用中显示的授权码。<br>Enter the code the app shows.</p>\
             <form method=\"get\" action=\"{prefix}{VERIFY}\">\
             <input name=\"user_code\" data-testid=\"device-user-code\" autocomplete=\"off\" \
             placeholder=\"ABCD-EFGH\"> \
             <button class=\"primary\" data-testid=\"device-code-submit\" type=\"submit\">\
             继续 Continue</button></form>{DEMO_NOTE}"
        ),
    )
}

/// `GET /oauth/v1/device/verify?user_code=…`.
async fn show_page(
    State(shared): State<Shared>,
    host: Host,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    shared.log("GET", VERIFY, None);
    let prefix = host.prefix();
    let Some(typed) = query.get("user_code").filter(|c| !c.trim().is_empty()) else {
        return code_entry_page(prefix);
    };
    let mut state = shared.lock();
    let now = now_millis();
    let Some(authorization) = state.device.by_user_code(typed) else {
        return refused_page(&DecideError::Unknown(typed.clone()));
    };
    if authorization.clock.expired(now) {
        return refused_page(&DecideError::Expired(typed.clone()));
    }
    if authorization.outcome != Outcome::Pending {
        return refused_page(&DecideError::Decided(typed.clone()));
    }
    let (code, app_id, requested) = (
        authorization.user_code.clone(),
        authorization.app_id.clone(),
        authorization.requested.clone(),
    );
    // The app's release and the person's place in its availability range come first, with the
    // codes the authorize page shows for them.
    match state
        .console
        .releases
        .get(&app_id)
        .copied()
        .unwrap_or_default()
    {
        AppRelease::Available => {}
        AppRelease::Unpublished => {
            return super::oauth::error_page(
                20009,
                "应用未开通，请联系管理员安装应用",
                "The app is not available. Please contact the administrator to install the application.",
            );
        }
        AppRelease::Disabled => {
            return super::oauth::error_page(20069, "应用已停用", "The app has been disabled.");
        }
        AppRelease::UserOutsideAvailability => {
            return super::oauth::error_page(
                20010,
                "你不在该应用的可用范围内，请联系管理员",
                "You are not in the app's availability range. Please contact the administrator.",
            );
        }
    }
    let granted = grantable(&state, &app_id, &requested);
    let skipped: Vec<&str> = requested
        .iter()
        .filter(|s| !granted.contains(s))
        .map(String::as_str)
        .collect();
    let skipped_html = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "<p>应用尚未开通以下权限，本次不会授予 · The app has not enabled these; they will not be \
             granted:</p>{}",
            page::scope_list("device-scopes-skipped", skipped)
        )
    };
    let user = state.user.clone();
    let main = format!(
        "<h1>授权应用访问你的飞书 · Authorize the app</h1>\
         <p class=\"who\" id=\"device-summary\">{name}，应用 <b>{app}</b> 请求以下权限<br>\
         {en_name}, the app <b>{app}</b> asks for:</p>{list}{skipped_html}\
         <p>授权码 · Code: <b id=\"user-code\">{code}</b></p>\
         <form method=\"post\" action=\"{prefix}{VERIFY}/decision\">\
         <input type=\"hidden\" name=\"user_code\" value=\"{code}\">\
         <button id=\"allow\" data-testid=\"device-allow\" name=\"decision\" value=\"allow\" \
         type=\"submit\">授权 Allow</button> \
         <button id=\"deny\" data-testid=\"device-deny\" name=\"decision\" value=\"deny\" \
         type=\"submit\">拒绝 Deny</button></form>{DEMO_NOTE}",
        name = escape(&user.name),
        en_name = escape(&user.en_name),
        app = escape(&super::registration::app_name(&state, &app_id)),
        list = page::scope_list("device-scopes", granted.iter().map(String::as_str)),
    );
    page::respond(StatusCode::OK, "授权 · Authorize", &main)
}

/// `POST /oauth/v1/device/verify/decision`: the page's buttons.
async fn decide_on_page(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    shared.log("POST", "/oauth/v1/device/verify/decision", None);
    let form = super::oauth::form_or_json(&headers, &body);
    let allow = form.get("decision").map(String::as_str) == Some("allow");
    let user_code = form.get("user_code").cloned().unwrap_or_default();
    let result = decide(&mut shared.lock(), &user_code, allow, None);
    match result {
        Err(error) => refused_page(&error),
        Ok(_) if allow => page::respond(
            StatusCode::OK,
            "已授权 · Authorized",
            &format!(
                "<h1 id=\"done\" data-testid=\"device-done\">已授权 · Authorized</h1>\
                 <p class=\"who\">授权完成，请回到应用继续。<br>\
                 Done. Return to the app to continue.</p>{DEMO_NOTE}"
            ),
        ),
        Ok(_) => page::respond(
            StatusCode::OK,
            "已拒绝 · Denied",
            &format!(
                "<h1 id=\"done\" data-testid=\"device-denied\">已拒绝 · Denied</h1>\
                 <p class=\"who\">应用没有获得授权，可以关闭此页面并回到应用。<br>\
                 The app was not authorized. You can close this page and return to the app.</p>\
                 {DEMO_NOTE}"
            ),
        ),
    }
}

/// The body of `POST /_emulator/device/decide`.
#[derive(Debug, Deserialize)]
struct DecideBody {
    user_code: String,
    decision: String,
    open_id: Option<String>,
}

async fn decide_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let (body, allow) = match polling::hook_decision(&body, |b: &DecideBody| &b.decision) {
        Ok(read) => read,
        Err(e) => return polling::hook_error(StatusCode::BAD_REQUEST, e),
    };
    let result = decide(
        &mut shared.lock(),
        &body.user_code,
        allow,
        body.open_id.as_deref(),
    );
    match result {
        Ok(granted) => Json(json!({ "granted": granted })).into_response(),
        Err(e) => polling::hook_refusal(&e),
    }
}

async fn pending_hook(State(shared): State<Shared>) -> Json<Vec<PendingDeviceAuthorization>> {
    Json(pending(&shared.lock()))
}

fn pending(state: &EmulatorState) -> Vec<PendingDeviceAuthorization> {
    let now = now_millis();
    state
        .device
        .codes
        .iter()
        .filter(|d| d.outcome == Outcome::Pending && !d.clock.expired(now))
        .map(|d| PendingDeviceAuthorization {
            user_code: d.user_code.clone(),
            app_id: d.app_id.clone(),
            scopes: d.requested.clone(),
        })
        .collect()
}

/// The device authorization grant: the person's side.
impl FeishuEmulator {
    /// Plays the signed-in person pressing Allow (`allow`) or Deny on the verification page
    /// for `user_code` (also `POST /_emulator/device/decide`).
    pub fn decide_device(&self, user_code: &str, allow: bool) -> Result<(), String> {
        self.decide_device_as(user_code, allow, None)
    }

    /// [`FeishuEmulator::decide_device`] as the tenant's person `open_id`, who becomes the
    /// signed-in user; `None` decides as the signed-in user.
    pub fn decide_device_as(
        &self,
        user_code: &str,
        allow: bool,
        open_id: Option<&str>,
    ) -> Result<(), String> {
        decide(&mut self.shared.lock(), user_code, allow, open_id)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// The codes waiting for the person, oldest first (also `GET /_emulator/device/pending`).
    pub fn pending_device_authorizations(&self) -> Vec<PendingDeviceAuthorization> {
        pending(&self.shared.lock())
    }

    /// The user code of the newest code waiting for the person: what a test presses Allow on
    /// when it only saw the client print a URL.
    pub fn latest_device_user_code(&self) -> Option<String> {
        pending(&self.shared.lock()).pop().map(|p| p.user_code)
    }
}
