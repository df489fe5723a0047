//! The emulator's sign-in side, as Feishu documents it: the authorize page with consent and deny
//! buttons; authorization codes that are single use and valid five minutes; PKCE (`S256` and
//! `plain`, failing with 20049); redirect URLs matched exactly (20029 on the page, 20071 at the
//! token endpoint); refresh tokens that rotate and are single use (20064 revoked, 20073 reused);
//! cumulative grants; the flat v2 token JSON and its error codes; and `user_info`. The token
//! endpoint also redeems device codes ([`super::device`]), answering with the same JSON.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::console::AppRelease;
use super::page::{CSS, Host, escape};
use super::{Shared, now_millis};

/// Authorization codes live this long (Feishu: 5 minutes).
pub const CODE_TTL_MS: i64 = 5 * 60 * 1000;
/// Refresh tokens live this long (Feishu's example: 7 days).
pub const REFRESH_TTL_SECS: u64 = 604_800;

#[derive(Debug, Clone)]
struct PendingConsent {
    app_id: String,
    redirect_uri: String,
    scopes: Vec<String>,
    state: Option<String>,
    challenge: Option<(String, String)>,
}

#[derive(Debug, Clone)]
struct IssuedCode {
    app_id: String,
    redirect_uri: String,
    challenge: Option<(String, String)>,
    issued_at: i64,
    used: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct AccessToken {
    pub(crate) app_id: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) expires_at: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct RefreshToken {
    app_id: String,
    expires_at: i64,
    used: bool,
    pub(crate) revoked: bool,
}

pub(crate) struct OAuthState {
    pending: HashMap<String, PendingConsent>,
    codes: HashMap<String, IssuedCode>,
    pub(crate) access_tokens: HashMap<String, AccessToken>,
    pub(crate) refresh_tokens: HashMap<String, RefreshToken>,
    pub(crate) grants: HashMap<String, Vec<String>>,
    pub(crate) access_ttl: Duration,
    pub(crate) fail_next: usize,
    pub(crate) token_delay: Duration,
}

impl Default for OAuthState {
    fn default() -> Self {
        OAuthState {
            pending: HashMap::new(),
            codes: HashMap::new(),
            access_tokens: HashMap::new(),
            refresh_tokens: HashMap::new(),
            grants: HashMap::new(),
            access_ttl: Duration::from_secs(7200),
            fail_next: 0,
            token_delay: Duration::ZERO,
        }
    }
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/open-apis/authen/v1/authorize", get(authorize))
        .route("/open-apis/authen/v1/authorize/decision", post(decide))
        .route("/open-apis/authen/v2/oauth/token", post(token))
        .route("/open-apis/authen/v1/user_info", get(user_info))
        .route(
            "/open-apis/auth/v3/app_access_token/internal",
            post(app_access_token),
        )
        .method_not_allowed_fallback(super::api::method_not_allowed)
}

pub(crate) fn random_token(prefix: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(prefix.len() + len);
    out.push_str(prefix);
    while out.len() < prefix.len() + len {
        for byte in uuid::Uuid::new_v4().as_bytes() {
            if out.len() < prefix.len() + len {
                out.push(char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]));
            }
        }
    }
    out
}

/// The authorize page refusing the request, worded as Feishu's does ("错误码：20029 redirect_uri
/// 请求不合法" / "Error code: 20029 redirect_uri request is invalid.", then the log ID for
/// support), so an app can read the code off the page.
pub(crate) fn error_page(code: i64, zh: &str, en: &str) -> Response {
    let log_id = format!(
        "{}{}",
        now_millis(),
        uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .to_ascii_uppercase()
    );
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>飞书 · Feishu</title>\
         <style>{CSS}</style></head><body><main>\
         <div class=\"brand\">飞书 · Feishu <span>模拟器 Emulator</span></div>\
         <h1 id=\"error\">错误码：{code} {zh}</h1><p class=\"who\">Error code: {code} {en}</p>\
         <p class=\"note\">若点击刷新重试无法解决问题，请将 log ID 提供给客服协助解决：{log_id}<br>\
         If refreshing doesn't solve the issue, please contact support with the log ID for assistance. Log ID: {log_id}</p>\
         </main></body></html>",
        zh = escape(zh),
        en = escape(en),
    );
    (StatusCode::BAD_REQUEST, Html(html)).into_response()
}

async fn authorize(
    State(shared): State<Shared>,
    host: Host,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    shared.log("GET", "/open-apis/authen/v1/authorize", None);
    let mut state = shared.lock();
    let app_id = query.get("client_id").cloned().unwrap_or_default();
    let Some(app) = state.apps.get(&app_id).cloned() else {
        return error_page(20048, "应用不存在", "The app does not exist.");
    };
    let redirect_uri = query.get("redirect_uri").cloned().unwrap_or_default();
    if !app.redirect_uris.contains(&redirect_uri) {
        return error_page(
            20029,
            "redirect_uri 请求不合法",
            "redirect_uri request is invalid",
        );
    }
    if query.get("response_type").map(String::as_str) != Some("code") {
        return error_page(
            20001,
            "缺少参数 response_type",
            "response_type must be code",
        );
    }
    let scopes: Vec<String> = query
        .get("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    // The app's release and the user's place in its availability range come before consent;
    // the codes are those Feishu documents for the same conditions at the token endpoint
    // (feishu-platform.md §1.3; 通用错误码: 20009 tenant app not installed, 20010 user not
    // visible to app), since the authorize page's own list is not published.
    match state
        .console
        .releases
        .get(&app_id)
        .copied()
        .unwrap_or_default()
    {
        AppRelease::Available => {}
        AppRelease::Unpublished => {
            return error_page(
                20009,
                "应用未开通，请联系管理员安装应用",
                "The app is not available. Please contact the administrator to install the application.",
            );
        }
        AppRelease::Disabled => {
            return error_page(20069, "应用已停用", "The app has been disabled.");
        }
        AppRelease::UserOutsideAvailability => {
            return error_page(
                20010,
                "你不在该应用的可用范围内，请联系管理员",
                "You are not in the app's availability range. Please contact the administrator.",
            );
        }
    }
    // 20027: a scope asked for that the app has not enabled (获取授权码 → 常见问题).
    let missing: Vec<&String> = scopes
        .iter()
        .filter(|s| *s != "offline_access" && !app.enabled_scopes.contains(s))
        .collect();
    if !missing.is_empty() {
        let listed = missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return error_page(
            20027,
            &format!("应用未开通所需的权限：[{listed}]"),
            &format!("The app has not enabled the scopes: [{listed}]"),
        );
    }
    // Enterprise single sign-on: the tenant's identity provider signs the user in first, then
    // sends the browser back here with a ticket.
    if let Some(provider) = state.console.identity_provider.clone() {
        let ticket = query.get("sso_ticket").cloned();
        if !ticket.is_some_and(|t| state.console.sso_tickets.remove(&t)) {
            let ticket = random_token("sso_", 24);
            state.console.sso_tickets.insert(ticket.clone());
            let mut back = url::Url::parse(&format!(
                "{}{}/open-apis/authen/v1/authorize",
                state.base_url,
                host.prefix()
            ))
            .ok();
            if let Some(back) = back.as_mut() {
                let mut pairs = back.query_pairs_mut();
                for (k, v) in query.iter().filter(|(k, _)| *k != "sso_ticket") {
                    pairs.append_pair(k, v);
                }
                pairs.append_pair("sso_ticket", &ticket);
            }
            let back = back.map(|b| b.to_string()).unwrap_or_default();
            let target = if provider.starts_with("http") {
                match url::Url::parse(&provider) {
                    Ok(mut idp) => {
                        idp.query_pairs_mut().append_pair("return", &back);
                        idp.to_string()
                    }
                    Err(_) => provider,
                }
            } else {
                // Not a web address (a test of `javascript:` redirects): sent as it is.
                provider
            };
            return (StatusCode::FOUND, [(header::LOCATION, target)]).into_response();
        }
    }
    let challenge = query.get("code_challenge").map(|c| {
        let method = query
            .get("code_challenge_method")
            .cloned()
            .unwrap_or_else(|| "plain".to_owned());
        (c.clone(), method)
    });
    let request_id = random_token("req_", 24);
    let user = state.user.name.clone();
    state.oauth.pending.insert(
        request_id.clone(),
        PendingConsent {
            app_id: app_id.clone(),
            redirect_uri,
            scopes: scopes.clone(),
            state: query.get("state").cloned(),
            challenge,
        },
    );
    let items: String = scopes
        .iter()
        .map(|s| format!("<li><code>{}</code></li>", escape(s)))
        .collect();
    // Styled like Feishu's own consent page closely enough that a demo user recognises the
    // step; the markup tests parse (the request_id field, #allow, #deny) stays plain.
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>授权 · Authorize</title>\
         <style>{CSS}</style></head><body><main>\
         <div class=\"brand\">飞书 · Feishu <span>模拟器 Emulator</span></div>\
         <h1>授权应用访问你的飞书</h1><p class=\"who\">{user}，应用 <b>{app}</b> 请求以下权限 / The app requests:</p>\
         <ul id=\"scopes\">{items}</ul>\
         <form method=\"post\" action=\"{prefix}/open-apis/authen/v1/authorize/decision\">\
         <input type=\"hidden\" name=\"request_id\" value=\"{request_id}\">\
         <button id=\"allow\" name=\"decision\" value=\"allow\" type=\"submit\">授权 Allow</button> \
         <button id=\"deny\" name=\"decision\" value=\"deny\" type=\"submit\">拒绝 Deny</button>\
         </form><p class=\"note\">这是内置的演示环境，不会访问真实的飞书。 · A built-in demo; nothing reaches real Feishu.</p>\
         </main></body></html>",
        user = escape(&user),
        app = escape(&app_id),
        // The Lark host's page posts back to the Lark host.
        prefix = host.prefix(),
    );
    Html(html).into_response()
}

fn with_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    let mut url = match url::Url::parse(uri) {
        Ok(url) => url,
        Err(_) => return uri.to_owned(),
    };
    {
        let mut query = url.query_pairs_mut();
        for (k, v) in pairs {
            query.append_pair(k, v);
        }
    }
    url.to_string()
}

pub(crate) fn form_or_json(headers: &HeaderMap, body: &Bytes) -> HashMap<String, String> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        serde_json::from_slice::<HashMap<String, Value>>(body)
            .map(|m| {
                m.into_iter()
                    .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        url::form_urlencoded::parse(body).into_owned().collect()
    }
}

async fn decide(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    shared.log("POST", "/open-apis/authen/v1/authorize/decision", None);
    let form = form_or_json(&headers, &body);
    let mut state = shared.lock();
    let Some(pending) = form
        .get("request_id")
        .and_then(|id| state.oauth.pending.remove(id))
    else {
        return error_page(
            20003,
            "授权请求已失效",
            "This authorization request is no longer valid.",
        );
    };
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    let code;
    if form.get("decision").map(String::as_str) == Some("allow") {
        code = random_token("", 64);
        let grants = state
            .oauth
            .grants
            .entry(pending.app_id.clone())
            .or_default();
        for scope in &pending.scopes {
            if !grants.contains(scope) {
                grants.push(scope.clone());
            }
        }
        state.oauth.codes.insert(
            code.clone(),
            IssuedCode {
                app_id: pending.app_id.clone(),
                redirect_uri: pending.redirect_uri.clone(),
                challenge: pending.challenge.clone(),
                issued_at: now_millis(),
                used: false,
            },
        );
        pairs.push(("code", &code));
    } else {
        pairs.push(("error", "access_denied"));
    }
    if let Some(s) = &pending.state {
        pairs.push(("state", s));
    }
    Redirect::to(&with_query(&pending.redirect_uri, &pairs)).into_response()
}

pub(crate) fn token_error(
    status: StatusCode,
    code: i64,
    error: &str,
    description: &str,
) -> Response {
    (
        status,
        axum::Json(json!({"code": code, "error": error, "error_description": description})),
    )
        .into_response()
}

fn pkce_ok(challenge: &(String, String), verifier: Option<&String>) -> bool {
    let Some(verifier) = verifier else {
        return false;
    };
    match challenge.1.as_str() {
        "S256" => URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge.0,
        _ => *verifier == challenge.0,
    }
}

async fn token(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let form = form_or_json(&headers, &body);
    let grant_type = form.get("grant_type").cloned().unwrap_or_default();
    shared.log(
        "POST",
        "/open-apis/authen/v2/oauth/token",
        Some(grant_type.clone()),
    );
    let delay = shared.lock().oauth.token_delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut state = shared.lock();
    if state.oauth.fail_next > 0 {
        state.oauth.fail_next -= 1;
        return token_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            20050,
            "server_error",
            "internal server error, please retry",
        );
    }
    if headers.contains_key(header::AUTHORIZATION) && form.contains_key("client_secret") {
        return token_error(
            StatusCode::BAD_REQUEST,
            20070,
            "invalid_request",
            "both Basic auth and client_secret were supplied",
        );
    }
    let app_id = form.get("client_id").cloned().unwrap_or_default();
    let Some(app) = state.apps.get(&app_id).cloned() else {
        return token_error(
            StatusCode::BAD_REQUEST,
            20048,
            "invalid_client",
            "app does not exist",
        );
    };
    if form.get("client_secret") != Some(&app.app_secret) {
        return token_error(
            StatusCode::BAD_REQUEST,
            20002,
            "invalid_client",
            "client secret is invalid",
        );
    }
    let now = now_millis();
    match grant_type.as_str() {
        "authorization_code" => {
            let code = form.get("code").cloned().unwrap_or_default();
            let Some(issued) = state.oauth.codes.get_mut(&code) else {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20003,
                    "invalid_grant",
                    "authorization code not found",
                );
            };
            if issued.used {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20065,
                    "invalid_grant",
                    "authorization code already used",
                );
            }
            if now - issued.issued_at > CODE_TTL_MS {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20004,
                    "invalid_grant",
                    "authorization code expired",
                );
            }
            if issued.app_id != app_id {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20024,
                    "invalid_grant",
                    "code belongs to another app",
                );
            }
            if form
                .get("redirect_uri")
                .is_some_and(|r| *r != issued.redirect_uri)
            {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20071,
                    "invalid_grant",
                    "redirect_uri mismatch",
                );
            }
            if let Some(challenge) = &issued.challenge
                && !pkce_ok(challenge, form.get("code_verifier"))
            {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20049,
                    "invalid_grant",
                    "PKCE verification failed",
                );
            }
            issued.used = true;
            issue_tokens(&mut state, &app_id)
        }
        "refresh_token" => {
            let presented = form.get("refresh_token").cloned().unwrap_or_default();
            let Some(refresh) = state.oauth.refresh_tokens.get_mut(&presented) else {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20026,
                    "invalid_grant",
                    "refresh token is invalid",
                );
            };
            if refresh.revoked {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20064,
                    "invalid_grant",
                    "refresh token has been revoked",
                );
            }
            if refresh.used {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20073,
                    "invalid_grant",
                    "refresh token has already been used",
                );
            }
            if refresh.expires_at <= now {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20037,
                    "invalid_grant",
                    "refresh token has expired",
                );
            }
            if refresh.app_id != app_id {
                return token_error(
                    StatusCode::BAD_REQUEST,
                    20024,
                    "invalid_grant",
                    "refresh token belongs to another app",
                );
            }
            refresh.used = true;
            issue_tokens(&mut state, &app_id)
        }
        super::device::DEVICE_CODE_GRANT => super::device::redeem(&mut state, &app_id, &form),
        other => token_error(
            StatusCode::BAD_REQUEST,
            20036,
            "unsupported_grant_type",
            &format!("unsupported grant_type {other:?}"),
        ),
    }
}

pub(crate) fn issue_tokens(state: &mut super::EmulatorState, app_id: &str) -> Response {
    let now = now_millis();
    let scopes = state.oauth.grants.get(app_id).cloned().unwrap_or_default();
    let access = random_token("eyJ", 120);
    let ttl = state.oauth.access_ttl;
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    state.oauth.access_tokens.insert(
        access.clone(),
        AccessToken {
            app_id: app_id.to_owned(),
            scopes: scopes.clone(),
            expires_at: now + ttl_ms,
        },
    );
    let mut body = json!({
        "code": 0,
        "access_token": access,
        "expires_in": ttl.as_secs(),
        "token_type": "Bearer",
        "scope": scopes.join(" "),
    });
    if scopes.iter().any(|s| s == "offline_access") {
        let refresh = random_token("ur-", 96);
        state.oauth.refresh_tokens.insert(
            refresh.clone(),
            RefreshToken {
                app_id: app_id.to_owned(),
                expires_at: now + i64::try_from(REFRESH_TTL_SECS * 1000).unwrap_or(i64::MAX),
                used: false,
                revoked: false,
            },
        );
        body["refresh_token"] = json!(refresh);
        body["refresh_token_expires_in"] = json!(REFRESH_TTL_SECS);
    }
    axum::Json(body).into_response()
}

/// `POST /auth/v3/app_access_token/internal`: a self-built app's own token, for the App ID and
/// Secret alone. Flat answer (`{code,msg,app_access_token,expire,tenant_access_token}`); a wrong
/// secret is 10015 and a disabled app 10014, as the generic error-code table names them.
async fn app_access_token(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.log("POST", "/open-apis/auth/v3/app_access_token/internal", None);
    let form = form_or_json(&headers, &body);
    let state = shared.lock();
    let flat = |code: i64, msg: &str| axum::Json(json!({"code": code, "msg": msg})).into_response();
    let (Some(app_id), Some(secret)) = (form.get("app_id"), form.get("app_secret")) else {
        return flat(10003, "invalid param: app_id and app_secret are required");
    };
    let Some(app) = state.apps.get(app_id) else {
        return flat(10003, "invalid param: app_id does not exist");
    };
    if app.app_secret != *secret {
        return flat(10015, "wrong app secret");
    }
    if state.console.releases.get(app_id) == Some(&AppRelease::Disabled) {
        return flat(10014, "app unauthorized");
    }
    let token = random_token("t-", 40);
    axum::Json(json!({
        "code": 0,
        "msg": "ok",
        "app_access_token": token,
        "expire": 7200,
        "tenant_access_token": token,
    }))
    .into_response()
}

/// The bearer token of a request, if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned)
}

async fn user_info(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    shared.log("GET", "/open-apis/authen/v1/user_info", None);
    let state = shared.lock();
    let valid = bearer(&headers)
        .and_then(|t| state.oauth.access_tokens.get(&t).cloned())
        .is_some_and(|t| t.expires_at > now_millis());
    if !valid {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"code": 20005, "msg": "invalid access token"})),
        )
            .into_response();
    }
    let user = &state.user;
    axum::Json(json!({
        "code": 0,
        "msg": "success",
        "data": {
            "name": user.name,
            "en_name": user.en_name,
            "avatar_url": user.avatar_url,
            "open_id": user.open_id,
            "union_id": user.union_id,
            "tenant_key": "demo_tenant",
        }
    }))
    .into_response()
}
