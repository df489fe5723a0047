//! The emulator's Open API side: the endpoints the tools call, in Feishu's `{code,msg,data}`
//! envelope, behind a gateway that does what Feishu's gateway does before an API sees a request:
//! injected faults, the user access token (99991661/99991668/99991677), the scopes of the
//! endpoint (99991679 for a scope the user has not granted, 99991672 for one the app has not
//! enabled) and rate limits (99991400 with `x-ogw-ratelimit-*`). It also logs every request.

pub mod scopes;

pub mod bitable;
pub(crate) mod bot;
mod calendar;
mod contact;
pub(crate) mod docs;
mod drive;
mod im;
mod query;
mod tasks;

use std::collections::HashMap;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::faults::{FaultKind, FaultState, Limited};
use super::oauth::{self, AccessToken};
use super::seed::SeedIds;
use super::tenant::Tenant;
use super::{EmulatorState, LoggedRequest, Shared, now_millis};
use scopes::{Endpoint, ScopeGroup};

/// Request bodies larger than this are refused (Markdown conversion accepts 10 MiB of text).
const MAX_BODY: usize = 12 * 1024 * 1024;

/// The Open API side's state.
#[derive(Debug)]
pub(crate) struct ApiState {
    pub(crate) tenant: Tenant,
    pub(crate) seed: SeedIds,
    pub(crate) faults: FaultState,
    /// Added to the real clock for timestamps and idempotency windows, so tests can step past
    /// an hour without waiting. Token lifetimes follow the real clock, as the OAuth side does.
    pub(crate) clock_offset_ms: i64,
}

impl ApiState {
    pub(crate) fn now_ms(&self) -> i64 {
        now_millis() + self.clock_offset_ms
    }
}

/// Who is calling, as the gateway authenticated it; handlers read it from the request extensions.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) app_id: String,
    /// Calling as the app's bot (a tenant access token), not as the signed-in user.
    pub(crate) bot: bool,
}

/// The Feishu `code` a response carried, left in its extensions for the request log.
#[derive(Debug, Clone, Copy)]
struct FeishuCode(i64);

/// A Feishu error answer: HTTP status, `code`, `msg` and the optional `error` object. Boxed so
/// that `Result`s carrying it stay small.
#[derive(Debug, thiserror::Error)]
#[error("Feishu error {}: {}", .0.code, .0.msg)]
pub(crate) struct ApiError(Box<ErrorBody>);

#[derive(Debug)]
struct ErrorBody {
    status: u16,
    code: i64,
    msg: String,
    error: Option<Value>,
    headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub(crate) fn new(status: u16, code: i64, msg: impl Into<String>) -> ApiError {
        ApiError(Box::new(ErrorBody {
            status,
            code,
            msg: msg.into(),
            error: None,
            headers: Vec::new(),
        }))
    }

    /// The Feishu `code`.
    pub(crate) fn code(&self) -> i64 {
        self.0.code
    }

    /// The `msg`.
    pub(crate) fn msg(&self) -> &str {
        &self.0.msg
    }

    /// The `error` object (log id, permission violations), if any.
    pub(crate) fn detail(&self) -> Option<&Value> {
        self.0.error.as_ref()
    }

    fn with_error(mut self, error: Value) -> ApiError {
        self.0.error = Some(error);
        self
    }

    fn with_header(mut self, name: &'static str, value: String) -> ApiError {
        self.0.headers.push((name, value));
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let ErrorBody {
            status,
            code,
            msg,
            error,
            headers,
        } = *self.0;
        let mut body = json!({"code": code, "msg": msg});
        if let Some(error) = error {
            body["error"] = error;
        }
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        let mut response = (status, Json(body)).into_response();
        for (name, value) in headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response.extensions_mut().insert(FeishuCode(code));
        response
    }
}

pub(crate) type ApiResult = Result<Response, ApiError>;

/// `{"code":0,"msg":"success","data":…}`.
pub(crate) fn ok(data: Value) -> ApiResult {
    let mut response = Json(json!({"code": 0, "msg": "success", "data": data})).into_response();
    response.extensions_mut().insert(FeishuCode(0));
    Ok(response)
}

/// A JSON request body; an empty body reads as `{}`.
pub(crate) fn json_body(body: &Bytes) -> Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("the request body must be a JSON object".to_owned()),
        Err(e) => Err(format!("the request body is not JSON: {e}")),
    }
}

/// Where a paged listing resumes. Page tokens are opaque to clients: they encode the offset and
/// the query they belong to, so a token replayed with another query is refused.
#[derive(Debug)]
pub(crate) struct Paging {
    pub(crate) size: usize,
    offset: usize,
    context: String,
}

impl Paging {
    /// Reads `page_size` (absent or 0 → `default`; outside `1..=max` → error) and `page_token`.
    pub(crate) fn parse(
        size: Option<&str>,
        token: Option<&str>,
        default: usize,
        max: usize,
        context: &str,
    ) -> Result<Paging, String> {
        let size = match size.map(str::trim).filter(|s| !s.is_empty()) {
            None => default,
            Some(text) => match text.parse::<i64>() {
                Ok(0) => default,
                Ok(n) if n >= 1 && usize::try_from(n).is_ok_and(|n| n <= max) => {
                    usize::try_from(n).unwrap_or(default)
                }
                _ => return Err(format!("page_size must be between 1 and {max}")),
            },
        };
        let offset = match token.filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|raw| String::from_utf8(raw).ok())
                .and_then(|text| {
                    let (ctx, offset) = text.rsplit_once('\n')?;
                    (ctx == context).then(|| offset.parse::<usize>().ok())?
                })
                .ok_or_else(|| "page_token is invalid".to_owned())?,
        };
        Ok(Paging {
            size,
            offset,
            context: context.to_owned(),
        })
    }

    /// This page of `items` and the token of the next one, if any.
    pub(crate) fn page<'a, T>(&self, items: &'a [T]) -> (&'a [T], Option<String>) {
        let start = self.offset.min(items.len());
        let end = start.saturating_add(self.size).min(items.len());
        let next =
            (end < items.len()).then(|| URL_SAFE_NO_PAD.encode(format!("{}\n{end}", self.context)));
        (items.get(start..end).unwrap_or_default(), next)
    }
}

/// Puts `has_more` and (only when there is more) the next token under `token_field`.
pub(crate) fn paged(mut data: Value, next: Option<String>, token_field: &str) -> Value {
    data["has_more"] = json!(next.is_some());
    if let Some(next) = next {
        data[token_field] = json!(next);
    }
    data
}

/// Lowercase hex of 16 random bytes: ids minted for objects created through the API.
pub(crate) fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// `prefix` and `len` random characters of `[0-9A-Za-z]`, the shape of docx and drive tokens.
pub(crate) fn random_token(prefix: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::from(prefix);
    while out.len() < prefix.len() + len {
        for byte in uuid::Uuid::new_v4().as_bytes() {
            if out.len() < prefix.len() + len {
                out.push(char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]));
            }
        }
    }
    out
}

pub(crate) fn routes(shared: Shared) -> Router<Shared> {
    bitable::routes(Router::new())
        .route(scopes::PRIMARY_CALENDAR, post(calendar::primary))
        .route(scopes::INSTANCE_VIEW, get(calendar::instance_view))
        .route(scopes::EVENTS, post(calendar::create_event))
        .route(
            scopes::EVENT,
            get(calendar::get_event)
                .patch(calendar::patch_event)
                .delete(calendar::delete_event),
        )
        .route(scopes::ATTENDEES, post(calendar::add_attendees))
        .route(scopes::FREEBUSY, post(calendar::freebusy))
        .route(scopes::CHATS, get(im::list_chats))
        .route(scopes::CHAT_SEARCH, get(im::search_chats))
        .route(scopes::CHAT, get(im::get_chat))
        .route(scopes::MESSAGES, get(im::list_messages).post(im::send))
        .route(scopes::MESSAGE, get(im::get_message).patch(bot::patch))
        .route(scopes::BOT_INFO, get(bot::info))
        .route(scopes::MESSAGE_REPLY, post(im::reply))
        .route(scopes::DOC_SEARCH, post(docs::search))
        .route(scopes::DOC_CONTENT, get(docs::content))
        .route(scopes::DOCUMENTS, post(docs::create))
        .route(scopes::DOCUMENT, get(docs::get_document))
        .route(scopes::BLOCK_CONVERT, post(docs::convert))
        .route(scopes::BLOCK_CHILDREN, post(docs::append_children))
        .route(scopes::WIKI_NODE, get(docs::get_node))
        .route(scopes::TASKS, get(tasks::list).post(tasks::create))
        .route(scopes::TASK, get(tasks::get).patch(tasks::patch))
        .route(scopes::USER_SEARCH, get(contact::search))
        .route(scopes::USER, get(contact::get_user))
        .route(scopes::DRIVE_FILES, get(drive::list))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(shared, gateway))
}

/// A path Feishu does not serve: its JSON envelope with 99991201 ("resource not find", the
/// generic error-code table's 404), never an empty body the SDKs cannot parse.
pub(crate) async fn not_found() -> Response {
    ApiError::new(404, 99991201, "resource not find").into_response()
}

/// A known path with a method it does not take: 99991301 ("request method doesn't match"),
/// in the envelope, not axum's empty 405.
pub(crate) async fn method_not_allowed() -> Response {
    ApiError::new(405, 99991301, "request method doesn't match").into_response()
}

/// Puts an `x-tt-logid` on every answer of the emulator, as Feishu does.
pub(crate) async fn stamp_logid(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if !response.headers().contains_key("x-tt-logid")
        && let Ok(value) = HeaderValue::from_str(&new_logid())
    {
        response.headers_mut().insert("x-tt-logid", value);
    }
    response
}

async fn gateway(
    State(shared): State<Shared>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().as_str().to_owned();
    // The Lark host's routes are the same under `/lark` (see `super`): scopes, faults and the
    // request log go by the unprefixed route.
    let unprefixed = |p: &str| {
        p.strip_prefix("/lark")
            .filter(|r| r.starts_with('/'))
            .unwrap_or(p)
            .to_owned()
    };
    let path = unprefixed(request.uri().path());
    let route = matched.map_or_else(|| path.clone(), |m| unprefixed(m.as_str()));
    let endpoint = scopes::endpoint(&method, &route);
    let (mut parts, body) = request.into_parts();
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let (response, idempotency_key) = match axum::body::to_bytes(body, MAX_BODY).await {
        Err(_) => (
            ApiError::new(400, 99992402, "the request body is too large").into_response(),
            None,
        ),
        Ok(bytes) => {
            let key = idempotency_key(&query, &bytes);
            let admitted = admit(
                &shared,
                &method,
                &path,
                &route,
                endpoint,
                &query,
                &parts.headers,
            )
            .await;
            let response = match admitted {
                Err(error) => error.into_response(),
                Ok(caller) => {
                    parts.extensions.insert(caller);
                    next.run(Request::from_parts(parts, Body::from(bytes)))
                        .await
                }
            };
            (response, key)
        }
    };
    let code = response.extensions().get::<FeishuCode>().map(|c| c.0);
    shared.lock().log.push(LoggedRequest {
        method,
        path,
        grant_type: None,
        at: now_millis(),
        route: Some(route),
        write: endpoint.is_some_and(|e| e.write),
        idempotency_key,
        status: Some(response.status().as_u16()),
        code,
    });
    response
}

/// The key a write carries: `idempotency_key` or `client_token` in the query, `uuid` or
/// `client_token` in the body.
fn idempotency_key(query: &HashMap<String, String>, body: &Bytes) -> Option<String> {
    if let Some(key) = ["idempotency_key", "client_token"]
        .iter()
        .find_map(|k| query.get(*k).filter(|v| !v.is_empty()))
    {
        return Some(key.clone());
    }
    let body: Value = serde_json::from_slice(body).ok()?;
    ["uuid", "client_token"].iter().find_map(|k| {
        body.get(*k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    })
}

/// Everything before the endpoint: faults, the token, scopes, rate limits.
async fn admit(
    shared: &Shared,
    method: &str,
    path: &str,
    route: &str,
    endpoint: Option<&'static Endpoint>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let token = oauth::bearer(headers);
    let fault = shared.lock().api.faults.take(path, route);
    match fault {
        Some(FaultKind::ServerError { status }) => {
            return Err(ApiError::new(status, 1500, "internal error"));
        }
        Some(FaultKind::RateLimited { reset_secs }) => {
            let limit = shared
                .lock()
                .api
                .faults
                .limit_of(method, route)
                .unwrap_or(50);
            return Err(rate_limited(Limited {
                limit,
                reset_secs,
                status: 429,
            }));
        }
        Some(FaultKind::Slow { delay_ms }) => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        Some(FaultKind::ExpireToken) => {
            if let Some(token) = &token
                && let Some(access) = shared.lock().oauth.access_tokens.get_mut(token)
            {
                access.expires_at = now_millis();
            }
        }
        None => {}
    }
    let mut state = shared.lock();
    let Some(token) = token else {
        return Err(ApiError::new(
            400,
            99991661,
            "Missing access token for authorization. Please make a request with token attached.",
        ));
    };
    if let Some(tenant) = state.bot.tenant_tokens.get(&token).cloned() {
        return admit_bot(&mut state, method, route, tenant);
    }
    let access = user_access(&state, &token)?;
    if let Some(endpoint) = endpoint {
        check_scopes(&state, &required_groups(&state, endpoint, query), &access)?;
    }
    state
        .api
        .faults
        .admit(method, route, &access.app_id, now_millis())
        .map_err(rate_limited)?;
    Ok(Caller {
        app_id: access.app_id,
        bot: false,
    })
}

/// The live user access token `token` (99991668 unknown, 99991677 expired). Feishu's hosted MCP
/// server checks the `X-Lark-MCP-UAT` header with it too.
pub(crate) fn user_access(state: &EmulatorState, token: &str) -> Result<AccessToken, ApiError> {
    let Some(access) = state.oauth.access_tokens.get(token).cloned() else {
        return Err(ApiError::new(
            401,
            99991668,
            "Invalid access token for authorization. Please make a request with token attached.",
        ));
    };
    if access.expires_at <= now_millis() {
        return Err(ApiError::new(401, 99991677, "token expired"));
    }
    Ok(access)
}

/// The app of the live tenant access token `token` (99991663 otherwise).
pub(crate) fn tenant_access(state: &EmulatorState, token: &str) -> Result<String, ApiError> {
    match state.bot.tenant_tokens.get(token) {
        Some(tenant) if tenant.expires_at > now_millis() => Ok(tenant.app_id.clone()),
        _ => Err(ApiError::new(
            400,
            99991663,
            "Invalid access token for authorization. Please make a request with token attached.",
        )),
    }
}

/// 99991672 unless the app enabled one scope of each of `groups`: what a tenant token needs.
pub(crate) fn check_app_scopes(
    state: &EmulatorState,
    app_id: &str,
    groups: &[ScopeGroup],
) -> Result<(), ApiError> {
    let enabled = state
        .apps
        .get(app_id)
        .map(|a| a.enabled_scopes.as_slice())
        .unwrap_or_default();
    match groups
        .iter()
        .find(|group| !group.iter().any(|s| enabled.iter().any(|e| e == s)))
    {
        Some(missing) => Err(app_scope_missing(app_id, missing)),
        None => Ok(()),
    }
}

/// A tenant access token: only the bot's endpoints take it, with the scopes the app enabled.
fn admit_bot(
    state: &mut EmulatorState,
    method: &str,
    route: &str,
    tenant: bot::TenantToken,
) -> Result<Caller, ApiError> {
    if tenant.expires_at <= now_millis() {
        return Err(ApiError::new(
            400,
            99991663,
            "Invalid access token for authorization. Please make a request with token attached.",
        ));
    }
    let Some(endpoint) = scopes::bot_endpoint(method, route) else {
        return Err(ApiError::new(
            400,
            99991663,
            "Invalid access token for authorization. tenant access token not support",
        ));
    };
    check_app_scopes(state, &tenant.app_id, endpoint.scopes)?;
    state
        .api
        .faults
        .admit(method, route, &tenant.app_id, now_millis())
        .map_err(rate_limited)?;
    Ok(Caller {
        app_id: tenant.app_id,
        bot: true,
    })
}

fn rate_limited(limited: Limited) -> ApiError {
    ApiError::new(limited.status, 99991400, "request trigger frequency limit")
        .with_header("x-ogw-ratelimit-limit", limited.limit.to_string())
        .with_header("x-ogw-ratelimit-reset", limited.reset_secs.to_string())
}

/// The scope groups a request needs: the endpoint's, plus, for listing messages, the group that
/// lets a user read that kind of chat.
fn required_groups(
    state: &EmulatorState,
    endpoint: &Endpoint,
    query: &HashMap<String, String>,
) -> Vec<ScopeGroup> {
    let mut groups = endpoint.scopes.to_vec();
    if endpoint.method == "GET" && endpoint.route == scopes::MESSAGES {
        let p2p = query
            .get("container_id")
            .and_then(|id| state.api.tenant.chat(id))
            .is_some_and(|chat| chat.p2p);
        groups.push(if p2p {
            scopes::P2P_MSG_AS_USER
        } else {
            scopes::GROUP_MSG_AS_USER
        });
    }
    groups
}

/// 99991679 (or 99991672, when the app never enabled it) unless `access` holds one scope of
/// each of `groups`.
pub(crate) fn check_scopes(
    state: &EmulatorState,
    groups: &[ScopeGroup],
    access: &AccessToken,
) -> Result<(), ApiError> {
    let holds = |scopes: &[String], group: ScopeGroup| {
        group.iter().any(|s| scopes.iter().any(|held| held == s))
    };
    // Feishu's gateway stops at the first requirement a token fails and names every scope that
    // would satisfy it ("required one of these privileges"), not one preferred scope: the
    // client must pick among them.
    let Some(&missing) = groups.iter().find(|group| !holds(&access.scopes, group)) else {
        return Ok(());
    };
    let log_id = new_logid();
    let listed = missing.join(", ");
    // A scope the app never enabled cannot be granted by the user: the admin has to act first,
    // so that answer wins. Tokens of unregistered apps (test helpers) skip this check.
    if let Some(app) = state.apps.get(&access.app_id)
        && !holds(&app.enabled_scopes, missing)
    {
        return Err(app_scope_missing(&app.app_id, missing));
    }
    // The shape of the documented example (获取授权码 → 如何获取包含目标权限的 user_access_token):
    // https://open.feishu.cn/document/common-capabilities/sso/api/obtain-oauth-code
    Err(ApiError::new(
        400,
        99991679,
        format!(
            "Unauthorized. You do not have permission to perform the requested operation on the \
             resource. Please request user re-authorization and try again. required one of these \
             privileges: [{listed}]"
        ),
    )
    .with_error(json!({
        "log_id": log_id,
        "permission_violations": violations(missing, "action_privilege_required"),
    }))
    .with_header("x-tt-logid", log_id))
}

/// 99991672: the app has not enabled any scope of `missing` (the admin has to act first).
fn app_scope_missing(app_id: &str, missing: ScopeGroup) -> ApiError {
    let log_id = new_logid();
    let listed = missing.join(", ");
    // The shape of the example in "如何为应用申请所需权限" (how to fix the 99991672 error):
    // https://open.feishu.cn/document/uAjLw4CM/ugTN1YjL4UTN24CO1UjN/trouble-shooting/how-to-fix-the-99991672-error
    let url = format!(
        "https://open.feishu.cn/app/{}/auth?q={}&op_from=openapi",
        app_id,
        missing.join(",")
    );
    ApiError::new(
            400,
            99991672,
            format!(
                "Access denied. One of the following scopes is required: [{listed}].\
                 应用尚未开通所需的应用身份权限：[{listed}]，点击链接申请并开通任一权限即可：{url}"
            ),
        )
        .with_error(json!({
            "message": "Refer to the documentation to fix the error: https://open.feishu.cn/document/uAjLw4CM/ugTN1YjL4UTN24CO1UjN/trouble-shooting/how-to-fix-the-99991672-error",
            "log_id": log_id,
            "permission_violations": violations(missing, "action_scope_required"),
            "helps": [{
                "url": url,
                "description": format!("Learn more about scopes and how to add them: [{listed}]"),
            }],
        }))
        .with_header("x-tt-logid", log_id)
}

/// Every scope of `group`, in the order Feishu's docs list them.
fn violations(group: ScopeGroup, kind: &str) -> Value {
    group
        .iter()
        .map(|scope| json!({"subject": scope, "type": kind}))
        .collect()
}

/// A log id in Feishu's shape: a timestamp and hex digits.
pub(crate) fn new_logid() -> String {
    format!(
        "{}{}",
        now_millis(),
        uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .to_ascii_uppercase()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn page_tokens_belong_to_their_query() {
        let items: Vec<u32> = (0..5).collect();
        let first = Paging::parse(Some("2"), None, 20, 50, "chat-a").unwrap();
        let (page, next) = first.page(&items);
        assert_eq!(page, [0, 1]);
        let next = next.unwrap();
        let second = Paging::parse(Some("2"), Some(&next), 20, 50, "chat-a").unwrap();
        assert_eq!(second.page(&items).0, [2, 3]);
        assert!(Paging::parse(Some("2"), Some(&next), 20, 50, "chat-b").is_err());
        assert!(Paging::parse(Some("51"), None, 20, 50, "chat-a").is_err());
        assert_eq!(Paging::parse(None, None, 20, 50, "x").unwrap().size, 20);
        let last = Paging::parse(Some("4"), None, 20, 50, "x").unwrap();
        assert_eq!(last.page(&items).1.map(|_| ()), Some(()));
        let all = Paging::parse(Some("5"), None, 20, 50, "x").unwrap();
        assert_eq!(all.page(&items).1, None);
    }
}
