//! App self-registration ("create an app for me"), as lark-cli's `config init` does it
//! (`internal/auth/app_registration.go`): the client begins at `POST /oauth/v1/app/registration`
//! (`action=begin`, archetype `PersonalAgent`), shows the person `{open}/page/cli?user_code=…`,
//! and polls the same endpoint (`action=poll`) until the person confirms on that page; the answer
//! is a new app's `client_id` and `client_secret` and who created it (`user_info`).
//!
//! A person in a Lark tenant gets, on the Feishu host, the `client_id` without the secret
//! (`tenant_brand: "lark"`): lark-cli then polls the same code on the Lark host
//! (`/lark/oauth/v1/app/registration` here), which answers with the secret and so consumes the
//! code (a Feishu tenant's code polled on the Lark host answers with the secret as well). The app
//! is created with [`super::AUTO_APPROVED_SCOPES`] and `offline_access` enabled
//! and signs in like any registered app; the person who confirmed becomes the signed-in user.
//!
//! Tests play the phone's scan and confirm with `POST /_emulator/registration/confirm` or
//! [`super::FeishuEmulator::confirm_registration`]; the page itself has `data-testid`s
//! (`registration-confirm`, `registration-cancel`) for end-to-end tests.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::page::{self, DEMO_NOTE, Host, escape};
use super::polling::{self, DecideError as ConfirmError, PollClock, oauth_error};
use super::{App, EmulatorState, FeishuEmulator, Shared, now_millis};

/// The name of every app self-registration creates: the one the person is asked to create.
pub const CREATED_APP_NAME: &str = "飞书助手 Feishu Companion";
/// The only archetype the endpoint takes (lark-cli's).
const ARCHETYPE: &str = "PersonalAgent";
/// Registration codes live 5 minutes unless the timing says otherwise (lark-cli's fallback).
const DEFAULT_EXPIRES_IN_SECS: u64 = 300;
/// The request log's path for both hosts, so that counts do not depend on the brand.
const ENDPOINT: &str = "/oauth/v1/app/registration";

/// Which brand's tenant the person who confirmed is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationBrand {
    /// Feishu (飞书), `open.feishu.cn`.
    #[default]
    Feishu,
    /// Lark, `open.larksuite.com`: the secret is only handed out on the Lark host.
    Lark,
}

impl RegistrationBrand {
    fn as_str(self) -> &'static str {
        match self {
            RegistrationBrand::Feishu => "feishu",
            RegistrationBrand::Lark => "lark",
        }
    }
}

/// Where a registration code stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegistrationStatus {
    /// Waiting for the person.
    Pending,
    /// The person cancelled.
    Denied,
    /// The app exists; the client has not yet fetched its secret.
    Created,
    /// The client fetched the secret; the code is used up.
    Consumed,
    /// Its lifetime passed before the client fetched a secret.
    Expired,
}

/// One registration code, as [`FeishuEmulator::registrations`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegistrationInfo {
    /// `ABCD-EFGH`.
    pub user_code: String,
    /// Where it stands.
    pub status: RegistrationStatus,
    /// The app created, once confirmed.
    pub app_id: Option<String>,
    /// The confirming person's brand, once confirmed.
    pub brand: Option<RegistrationBrand>,
    /// The confirming person, once confirmed.
    pub open_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pending,
    Denied,
    Created(Created),
    Consumed(Created),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Created {
    app_id: String,
    open_id: String,
    brand: RegistrationBrand,
}

#[derive(Debug, Clone)]
struct Registration {
    device_code: String,
    user_code: String,
    clock: PollClock,
    /// `request_user_info`: the fields of `user_info` the client asked for.
    user_info: Vec<String>,
    outcome: Outcome,
}

#[derive(Debug, Default)]
pub(crate) struct RegistrationState {
    codes: Vec<Registration>,
    /// Apps self-registration created: app_id → name (pages show it instead of the id).
    pub(crate) names: HashMap<String, String>,
}

impl RegistrationState {
    fn by_user_code(&mut self, typed: &str) -> Option<&mut Registration> {
        let code = polling::normalize_user_code(typed);
        self.codes.iter_mut().find(|r| r.user_code == code)
    }
}

/// What pages call an app: its name if self-registration created it, else its id.
pub(crate) fn app_name(state: &EmulatorState, app_id: &str) -> String {
    state
        .registration
        .names
        .get(app_id)
        .cloned()
        .unwrap_or_else(|| app_id.to_owned())
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route(ENDPOINT, post(endpoint))
        .route("/page/cli", get(show_page))
        .route("/page/cli/decision", post(decide_on_page))
        .route("/_emulator/registration/confirm", post(confirm_hook))
        .route("/_emulator/registrations", get(list_hook))
}

async fn endpoint(
    State(shared): State<Shared>,
    host: Host,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.log("POST", ENDPOINT, None);
    let form = super::oauth::form_or_json(&headers, &body);
    let mut state = shared.lock();
    match form.get("action").map(String::as_str) {
        Some("begin") => begin(&mut state, &form, host.prefix()),
        Some("poll") => poll(&mut state, &form, host.lark),
        _ => oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "action must be begin or poll",
        ),
    }
}

fn begin(state: &mut EmulatorState, form: &HashMap<String, String>, prefix: &str) -> Response {
    if form.get("archetype").map(String::as_str) != Some(ARCHETYPE) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "archetype must be PersonalAgent",
        );
    }
    if form.get("auth_method").map(String::as_str) != Some("client_secret") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "auth_method must be client_secret",
        );
    }
    let timing = state.device_timing;
    let expires_in = timing.expires_in_secs.unwrap_or(DEFAULT_EXPIRES_IN_SECS);
    let registration = Registration {
        device_code: polling::device_code(),
        user_code: polling::user_code(),
        clock: PollClock::new(now_millis(), expires_in, timing.interval_secs),
        user_info: form
            .get("request_user_info")
            .map(|f| f.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        outcome: Outcome::Pending,
    };
    let answer = json!({
        "device_code": registration.device_code,
        "user_code": registration.user_code,
        // lark-cli reads this but builds the complete URL itself: `{open}/page/cli?user_code=…`.
        "verification_uri": format!("{}{prefix}/page/cli", state.base_url),
        "expires_in": expires_in,
        "interval": timing.interval_secs,
    });
    state.registration.codes.push(registration);
    Json(answer).into_response()
}

fn poll(state: &mut EmulatorState, form: &HashMap<String, String>, lark_host: bool) -> Response {
    let device_code = form.get("device_code").cloned().unwrap_or_default();
    let Some(registration) = state
        .registration
        .codes
        .iter_mut()
        .find(|r| r.device_code == device_code)
    else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "unknown device_code",
        );
    };
    if matches!(registration.outcome, Outcome::Consumed(_)) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "the device_code was already used",
        );
    }
    if let Err(refusal) = registration.clock.poll(now_millis()) {
        return polling::refusal_answer(refusal);
    }
    let created = match &registration.outcome {
        Outcome::Pending => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "authorization_pending",
                "the user has not confirmed yet",
            );
        }
        Outcome::Denied => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "access_denied",
                "the user cancelled creating the app",
            );
        }
        Outcome::Created(created) | Outcome::Consumed(created) => created.clone(),
    };
    let mut answer = json!({"client_id": created.app_id});
    if !registration.user_info.is_empty() {
        let mut info = serde_json::Map::new();
        for field in &registration.user_info {
            match field.as_str() {
                "open_id" => info.insert(field.clone(), json!(created.open_id)),
                "tenant_brand" => info.insert(field.clone(), json!(created.brand.as_str())),
                _ => None,
            };
        }
        answer["user_info"] = Value::Object(info);
    }
    // A Lark tenant's secret is only handed out by the Lark host; the Feishu host's answer
    // tells the client where to ask, and leaves the code usable for that.
    if created.brand == RegistrationBrand::Lark && !lark_host {
        return Json(answer).into_response();
    }
    registration.outcome = Outcome::Consumed(created.clone());
    let secret = state
        .apps
        .get(&created.app_id)
        .map(|a| a.app_secret.clone())
        .unwrap_or_default();
    answer["client_secret"] = json!(secret);
    Json(answer).into_response()
}

/// The person's decision on `user_code`: on allow, creates the app and answers its id.
pub(crate) fn confirm(
    state: &mut EmulatorState,
    user_code: &str,
    allow: bool,
    brand: RegistrationBrand,
    open_id: Option<&str>,
) -> Result<Option<String>, ConfirmError> {
    let now = now_millis();
    let code = polling::normalize_user_code(user_code);
    let Some(registration) = state.registration.by_user_code(&code) else {
        return Err(ConfirmError::Unknown(code));
    };
    if registration.clock.expired(now) {
        return Err(ConfirmError::Expired(code));
    }
    if registration.outcome != Outcome::Pending {
        return Err(ConfirmError::Decided(code));
    }
    if !allow {
        registration.outcome = Outcome::Denied;
        return Ok(None);
    }
    let user = polling::sign_in_as(state, open_id).map_err(ConfirmError::NoSuchPerson)?;
    // Feishu's app ids are `cli_` and 16 hex digits.
    let hex = super::api::random_hex();
    let app_id = format!("cli_{}", hex.get(..16).unwrap_or(&hex));
    state.apps.insert(
        app_id.clone(),
        App {
            app_id: app_id.clone(),
            app_secret: super::oauth::random_token("", 32),
            // Device-flow sign-in needs none.
            redirect_uris: Vec::new(),
            enabled_scopes: super::auto_approve::initial_scopes(),
        },
    );
    // Release (Available), the bot capability and the long connection are on by default.
    state
        .registration
        .names
        .insert(app_id.clone(), CREATED_APP_NAME.to_owned());
    if let Some(registration) = state.registration.by_user_code(&code) {
        registration.outcome = Outcome::Created(Created {
            app_id: app_id.clone(),
            open_id: user.open_id,
            brand,
        });
    }
    Ok(Some(app_id))
}

/// The page a refused confirmation shows.
fn refused_page(error: &ConfirmError) -> Response {
    match error {
        ConfirmError::Unknown(_) => page::invalid(
            StatusCode::NOT_FOUND,
            "找不到这个创建应用的请求，请回到应用重新开始。",
            "No such app-creation request. Go back to the app and start again.",
        ),
        ConfirmError::Expired(_) => page::invalid(
            StatusCode::BAD_REQUEST,
            "这个创建应用的请求已过期，请回到应用重新开始。",
            "This app-creation request has expired. Go back to the app and start again.",
        ),
        ConfirmError::Decided(_) => page::invalid(
            StatusCode::BAD_REQUEST,
            "这个创建应用的请求已处理过了。",
            "This app-creation request was already confirmed or cancelled.",
        ),
        ConfirmError::NoSuchPerson(e) => {
            page::invalid(StatusCode::BAD_REQUEST, "找不到这个用户。", e)
        }
    }
}

/// `GET /page/cli?user_code=…`: what the person sees after scanning the code.
async fn show_page(
    State(shared): State<Shared>,
    host: Host,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    shared.log("GET", "/page/cli", None);
    let mut state = shared.lock();
    let typed = query.get("user_code").cloned().unwrap_or_default();
    let Some(registration) = state.registration.by_user_code(&typed) else {
        return refused_page(&ConfirmError::Unknown(typed));
    };
    if registration.clock.expired(now_millis()) {
        return refused_page(&ConfirmError::Expired(typed));
    }
    if registration.outcome != Outcome::Pending {
        return refused_page(&ConfirmError::Decided(typed));
    }
    let code = registration.user_code.clone();
    let user = state.user.clone();
    let scopes = super::auto_approve::initial_scopes();
    let main = format!(
        "<h1>创建应用 · Create an app</h1>\
         <p class=\"who\" id=\"registration-summary\">{name}，将以你的身份创建应用「{app}」（{ARCHETYPE}），\
         并授权它以你的身份使用飞书。<br>Create the app 「{app}」({ARCHETYPE}) for you as {en_name}, \
         and let it use Feishu as you.</p>\
         <p>应用将获得以下权限 · The app will have these permissions:</p>{list}\
         <p>确认码 · Code: <b id=\"user-code\">{code}</b></p>\
         <form method=\"post\" action=\"{prefix}/page/cli/decision\">\
         <input type=\"hidden\" name=\"user_code\" value=\"{code}\">\
         <button class=\"primary\" id=\"registration-confirm\" data-testid=\"registration-confirm\" \
         name=\"decision\" value=\"allow\" type=\"submit\">创建并授权 Confirm</button> \
         <button id=\"registration-cancel\" data-testid=\"registration-cancel\" name=\"decision\" \
         value=\"deny\" type=\"submit\">取消 Cancel</button></form>{DEMO_NOTE}",
        name = escape(&user.name),
        en_name = escape(&format!("{} ({})", user.en_name, user.name)),
        app = escape(CREATED_APP_NAME),
        list = page::scope_list("registration-scopes", scopes.iter().map(String::as_str)),
        prefix = host.prefix(),
    );
    page::respond(StatusCode::OK, "创建应用 · Create an app", &main)
}

/// `POST /page/cli/decision`: the page's buttons. The person's brand is the host the page was
/// opened on (lark-cli opens the Lark host's page for a Lark tenant), unless a `brand` field
/// says otherwise.
async fn decide_on_page(
    State(shared): State<Shared>,
    host: Host,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.log("POST", "/page/cli/decision", None);
    let form = super::oauth::form_or_json(&headers, &body);
    let allow = form.get("decision").map(String::as_str) == Some("allow");
    let brand = match form.get("brand").map(String::as_str) {
        Some("lark") => RegistrationBrand::Lark,
        Some("feishu") => RegistrationBrand::Feishu,
        _ if host.lark => RegistrationBrand::Lark,
        _ => RegistrationBrand::Feishu,
    };
    let user_code = form.get("user_code").cloned().unwrap_or_default();
    let result = confirm(&mut shared.lock(), &user_code, allow, brand, None);
    match result {
        Err(error) => refused_page(&error),
        Ok(Some(_)) => page::respond(
            StatusCode::OK,
            "应用已创建 · App created",
            &format!(
                "<h1 id=\"done\" data-testid=\"registration-done\">应用已创建 · App created</h1>\
                 <p class=\"who\">「{}」已创建并授权，请回到应用继续。<br>\
                 The app is created and authorized. Return to the app to continue.</p>{DEMO_NOTE}",
                escape(CREATED_APP_NAME)
            ),
        ),
        Ok(None) => page::respond(
            StatusCode::OK,
            "已取消 · Cancelled",
            &format!(
                "<h1 id=\"done\" data-testid=\"registration-cancelled\">已取消 · Cancelled</h1>\
                 <p class=\"who\">没有创建应用，可以关闭此页面并回到应用。<br>\
                 No app was created. You can close this page and return to the app.</p>{DEMO_NOTE}"
            ),
        ),
    }
}

/// The body of `POST /_emulator/registration/confirm`.
#[derive(Debug, Deserialize)]
struct ConfirmBody {
    user_code: String,
    decision: String,
    #[serde(default)]
    brand: RegistrationBrand,
    open_id: Option<String>,
}

async fn confirm_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let (body, allow) = match polling::hook_decision(&body, |b: &ConfirmBody| &b.decision) {
        Ok(read) => read,
        Err(e) => return polling::hook_error(StatusCode::BAD_REQUEST, e),
    };
    let result = confirm(
        &mut shared.lock(),
        &body.user_code,
        allow,
        body.brand,
        body.open_id.as_deref(),
    );
    match result {
        Ok(app_id) => Json(json!({ "app_id": app_id })).into_response(),
        Err(e) => polling::hook_refusal(&e),
    }
}

async fn list_hook(State(shared): State<Shared>) -> Json<Vec<RegistrationInfo>> {
    Json(registrations(&shared.lock()))
}

fn registrations(state: &EmulatorState) -> Vec<RegistrationInfo> {
    let now = now_millis();
    state
        .registration
        .codes
        .iter()
        .map(|r| {
            // An expired code may still have created its app: report the app too.
            let created = match &r.outcome {
                Outcome::Created(c) | Outcome::Consumed(c) => Some(c),
                Outcome::Pending | Outcome::Denied => None,
            };
            let status = match &r.outcome {
                Outcome::Consumed(_) => RegistrationStatus::Consumed,
                _ if r.clock.expired(now) => RegistrationStatus::Expired,
                Outcome::Pending => RegistrationStatus::Pending,
                Outcome::Denied => RegistrationStatus::Denied,
                Outcome::Created(_) => RegistrationStatus::Created,
            };
            RegistrationInfo {
                user_code: r.user_code.clone(),
                status,
                app_id: created.map(|c| c.app_id.clone()),
                brand: created.map(|c| c.brand),
                open_id: created.map(|c| c.open_id.clone()),
            }
        })
        .collect()
}

/// App self-registration: the phone's side and what it created.
impl FeishuEmulator {
    /// Plays the person scanning the registration code and pressing Confirm (`allow`) or
    /// Cancel, as someone in a `brand` tenant; `open_id` (a person of the tenant) confirms
    /// instead of the signed-in user and becomes the signed-in user. Answers the new app's id
    /// on allow (also `POST /_emulator/registration/confirm`).
    pub fn confirm_registration(
        &self,
        user_code: &str,
        allow: bool,
        brand: RegistrationBrand,
        open_id: Option<&str>,
    ) -> Result<Option<String>, String> {
        confirm(&mut self.shared.lock(), user_code, allow, brand, open_id)
            .map_err(|e| e.to_string())
    }

    /// Every registration code issued so far, oldest first (also `GET /_emulator/registrations`).
    pub fn registrations(&self) -> Vec<RegistrationInfo> {
        registrations(&self.shared.lock())
    }

    /// A registered app as it stands now (its enabled scopes change as applications are
    /// approved).
    pub fn app(&self, app_id: &str) -> Option<App> {
        self.shared.lock().apps.get(app_id).cloned()
    }
}
