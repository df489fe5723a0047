//! The Feishu emulator: a local server that behaves like Feishu as documented, for tests and demo
//! mode. It binds a loopback port chosen at start; the app's base URLs point at it.
//!
//! This module holds the server, its shared state, the request log and the control endpoints;
//! [`oauth`] holds the sign-in side (authorize page, token endpoint, `user_info`), [`api`] the
//! Open API side (calendar, IM, docs, tasks, contact, drive) over the demo tenant of [`seed`],
//! and [`faults`] the injected failures and rate limits.
//!
//! The flows lark-cli uses, beside the authorize page: [`registration`] creates an app for the
//! person ("create an app for me", `/oauth/v1/app/registration` and `/page/cli`), with the
//! scopes of [`auto_approve`] enabled; [`device`] signs in with the device authorization grant
//! (`/oauth/v1/device_authorization`, the verification page, the token endpoint's device-code
//! grant); [`scope_apply`] is the page where an app applies for a scope it lacks and the tenant
//! admin's approval. Both device-code flows share one pace (`polling.rs`: interval, `slow_down`,
//! expiry), which tests shorten with [`FeishuEmulator::set_device_timing`].
//!
//! [`hosted_mcp`] is Feishu's hosted MCP server (`mcp.feishu.cn/mcp`) at `/mcp`: the document
//! tools lark-cli calls, over the same documents as the Open API.
//!
//! Two brands: every route is served as it is for Feishu's hosts (`open.feishu.cn`,
//! `accounts.feishu.cn`) and again under `/lark` for Lark's (`open.larksuite.com`,
//! `accounts.larksuite.com`), over the same tenant. Where the brand matters (a Lark tenant's
//! registration secret, the links a flow hands out) the handler reads which host it was.
//! The request log records both under the unprefixed path.

pub mod api;
pub mod auto_approve;
mod card_preview;
pub mod cards;
pub mod console;
mod datetime;
pub mod device;
pub mod faults;
pub mod hosted_mcp;
pub mod longconn;
pub mod oauth;
mod page;
mod polling;
pub mod registration;
pub mod scope_apply;
pub mod seed;
mod serve;
mod tenant;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;

pub use api::bot::DEFAULT_BOT_NAME;
pub use api::scopes::{self, ENDPOINTS, Endpoint, PREFERRED_SCOPES, preferred_scope};
pub use auto_approve::AUTO_APPROVED_SCOPES;
pub use cards::{BotCard, CardVersion};
pub use console::AppRelease;
pub use device::{DEVICE_CODE_GRANT, PendingDeviceAuthorization};
pub use faults::{Fault, FaultKind, RateLimit};
pub use longconn::{Click, ClickError, ClickOutcome, ClientConfig, LongConnectionStatus};
pub use registration::{CREATED_APP_NAME, RegistrationBrand, RegistrationInfo, RegistrationStatus};
pub use scope_apply::{ScopeApplication, ScopeApplicationStatus};
pub use seed::{SeedIds, SeedPerson};

/// One request the emulator received, for tests to count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// For the token endpoint: the grant type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_type: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub at: i64,
    /// For the Open API: the route that served it, with `{param}` placeholders (see
    /// [`scopes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// For the Open API: whether the endpoint writes (creates, changes or deletes).
    #[serde(default)]
    pub write: bool,
    /// For the Open API: the idempotency key it carried (`idempotency_key` or `client_token` in
    /// the query, `uuid` or `client_token` in the body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// For the Open API: the HTTP status answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// For the Open API: the Feishu `code` answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

/// A registered Feishu app.
#[derive(Debug, Clone)]
pub struct App {
    /// `cli_…`
    pub app_id: String,
    /// The app secret.
    pub app_secret: String,
    /// Redirect URLs registered in the console; matched exactly.
    pub redirect_uris: Vec<String>,
    /// Scopes the tenant admin enabled for the app (asking for others fails with 20027).
    pub enabled_scopes: Vec<String>,
}

/// A person in the emulated tenant.
#[derive(Debug, Clone, Serialize)]
pub struct User {
    /// Display name.
    pub name: String,
    /// English name.
    pub en_name: String,
    /// `ou_…`
    pub open_id: String,
    /// `on_…`
    pub union_id: String,
    /// Avatar URL.
    pub avatar_url: String,
}

pub(crate) struct EmulatorState {
    /// `http://127.0.0.1:<port>`, for links the emulator builds to itself.
    pub(crate) base_url: String,
    pub(crate) apps: HashMap<String, App>,
    pub(crate) console: console::ConsoleState,
    pub(crate) user: User,
    pub(crate) oauth: oauth::OAuthState,
    pub(crate) api: api::ApiState,
    pub(crate) bot: api::bot::BotState,
    pub(crate) longconn: longconn::LongConnState,
    pub(crate) registration: registration::RegistrationState,
    pub(crate) device: device::DeviceState,
    pub(crate) device_timing: polling::Timing,
    pub(crate) scope_apply: scope_apply::ScopeApplyState,
    pub(crate) log: Vec<LoggedRequest>,
}

/// Shared, lockable emulator state.
#[derive(Clone)]
pub(crate) struct Shared(pub(crate) Arc<Mutex<EmulatorState>>);

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, EmulatorState> {
        // The state holds plain values; a panicking handler cannot leave it half-written in a way
        // that matters to a test emulator.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn log(&self, method: &str, path: &str, grant_type: Option<String>) {
        self.lock().log.push(LoggedRequest {
            method: method.to_owned(),
            path: path.to_owned(),
            grant_type,
            at: now_millis(),
            route: None,
            write: false,
            idempotency_key: None,
            status: None,
            code: None,
        });
    }
}

pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The running emulator. Dropping it stops the server.
#[derive(Debug)]
pub struct FeishuEmulator {
    address: SocketAddr,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared(..)")
    }
}

/// Plays the user's browser on the emulator's authorize page: loads it, presses Allow (or
/// Deny), and returns where the page redirects — the app's loopback callback, with the code (or
/// the error) and the state. Tests use it for the part a person does in the sign-in window.
pub async fn press_consent(authorize_url: &str, allow: bool) -> Result<String, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let page = browser
        .get(authorize_url)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !page.status().is_success() {
        return Err(format!(
            "the authorize page answered HTTP {}",
            page.status()
        ));
    }
    let html = page.text().await.map_err(|e| e.to_string())?;
    let marker = "name=\"request_id\" value=\"";
    let start = html.find(marker).ok_or("the page has no consent form")? + marker.len();
    let end = html[start..]
        .find('"')
        .ok_or("the consent form is cut off")?;
    let request_id = &html[start..start + end];
    // Where the page's form posts (the Lark host's page posts to the Lark host).
    let action = html
        .find("action=\"")
        .and_then(|at| {
            let rest = &html[at + "action=\"".len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .unwrap_or("/open-apis/authen/v1/authorize/decision");
    let url = url::Url::parse(authorize_url).map_err(|e| e.to_string())?;
    let decision = url.join(action).map_err(|e| e.to_string())?;
    let answer = browser
        .post(decision)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "request_id={request_id}&decision={}",
            if allow { "allow" } else { "deny" }
        ))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    answer
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| format!("no redirect after consent (HTTP {})", answer.status()))
}

/// The demo user every sign-in signs in as.
pub fn demo_user() -> User {
    User {
        name: "林晓".to_owned(),
        en_name: "Lin Xiao".to_owned(),
        open_id: "ou_demo_linxiao".to_owned(),
        union_id: "on_demo_linxiao".to_owned(),
        avatar_url: "https://example.invalid/avatar/linxiao.png".to_owned(),
    }
}

impl FeishuEmulator {
    /// Starts the emulator on `127.0.0.1` at a free port.
    pub async fn start() -> std::io::Result<FeishuEmulator> {
        let (tenant, seed) = seed::build(now_millis());
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let address = listener.local_addr()?;
        let shared = Shared(Arc::new(Mutex::new(EmulatorState {
            base_url: format!("http://{address}"),
            apps: HashMap::new(),
            console: console::ConsoleState::default(),
            user: demo_user(),
            oauth: oauth::OAuthState::default(),
            api: api::ApiState {
                tenant,
                seed,
                faults: faults::FaultState::default(),
                clock_offset_ms: 0,
            },
            bot: api::bot::BotState::default(),
            longconn: longconn::LongConnState::default(),
            registration: registration::RegistrationState::default(),
            device: device::DeviceState::default(),
            device_timing: polling::Timing::default(),
            scope_apply: scope_apply::ScopeApplyState::default(),
            log: Vec::new(),
        })));
        let routes = Router::new()
            .merge(oauth::routes())
            .merge(api::routes(shared.clone()))
            .merge(hosted_mcp::routes(shared.clone()))
            .route("/_emulator/requests", get(request_log))
            .route(
                "/_emulator/faults",
                post(faults::post_faults).delete(faults::delete_faults),
            )
            .route("/_emulator/seed", get(seed_ids))
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(api::bot::tenant_access_token),
            )
            .route("/_emulator/cards", get(api::bot::list_cards))
            .route("/_emulator/cards/{message_id}", get(api::bot::get_card))
            .merge(console::routes())
            .merge(longconn::routes())
            .merge(card_preview::routes())
            .merge(registration::routes())
            .merge(device::routes())
            .merge(polling::routes())
            .merge(scope_apply::routes());
        // The Lark brand's hosts: the same routes under `/lark`, over the same state.
        let router = Router::new()
            .nest(
                "/lark",
                routes.clone().layer(axum::Extension(page::LarkHost)),
            )
            .merge(routes)
            .fallback(api::not_found)
            .layer(axum::middleware::from_fn(api::stamp_logid))
            .with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve::serve(listener, router, stopped));
        Ok(FeishuEmulator {
            address,
            shared,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:<port>`: both the accounts and the Open API base URL of the Feishu
    /// brand; the Lark brand's are the same with `/lark` appended.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `http://127.0.0.1:<port>/mcp`: the stand-in for Feishu's hosted MCP server
    /// (`https://mcp.feishu.cn/mcp`); Lark's is `/lark/mcp`. See [`hosted_mcp`].
    pub fn mcp_url(&self) -> String {
        format!("{}{}", self.base_url(), hosted_mcp::PATH)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Registers an app (as the developer console would).
    pub fn register_app(&self, app: App) {
        self.shared.lock().apps.insert(app.app_id.clone(), app);
    }

    /// Sets where the app stands for the user: published, unpublished, disabled, or out of
    /// the user's availability range (the authorize page fails with Feishu's code for each).
    pub fn set_app_release(&self, app_id: &str, release: AppRelease) {
        self.shared
            .lock()
            .console
            .releases
            .insert(app_id.to_owned(), release);
    }

    /// Makes the tenant sign in through an identity provider at `url` (enterprise single
    /// sign-on): the authorize page first redirects there, with a `return` URL that brings the
    /// browser back. `None` signs in on Feishu's own page again.
    pub fn set_identity_provider(&self, url: Option<String>) {
        self.shared.lock().console.identity_provider = url;
    }

    /// Starts a stand-in identity provider on another loopback port (one already signed in,
    /// which sends the browser straight back) and makes the tenant use it; answers its URL.
    pub async fn use_stand_in_identity_provider(&self) -> std::io::Result<String> {
        let url = console::start_stand_in(&self.shared).await?;
        self.set_identity_provider(Some(url.clone()));
        Ok(url)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.lock().log.clone()
    }

    /// How many requests hit `path` (with this grant type, if given).
    pub fn count(&self, path: &str, grant_type: Option<&str>) -> usize {
        self.shared
            .lock()
            .log
            .iter()
            .filter(|r| {
                r.path == path && (grant_type.is_none() || r.grant_type.as_deref() == grant_type)
            })
            .count()
    }

    /// Makes every later sign-in sign in as `user`: a second person using the same app.
    pub fn set_user(&self, user: User) {
        self.shared.lock().user = user;
    }

    /// Sets the lifetime of access tokens issued from now on.
    pub fn set_access_token_ttl(&self, ttl: Duration) {
        self.shared.lock().oauth.access_ttl = ttl;
    }

    /// Makes every access token issued so far expire now.
    pub fn expire_access_tokens(&self) {
        let now = now_millis();
        for token in self.shared.lock().oauth.access_tokens.values_mut() {
            token.expires_at = now;
        }
    }

    /// Revokes every refresh token (as a user removing the app's access would).
    pub fn revoke_refresh_tokens(&self) {
        for token in self.shared.lock().oauth.refresh_tokens.values_mut() {
            token.revoked = true;
        }
    }

    /// Makes the next `n` token requests fail with a server error (20050, HTTP 500).
    pub fn fail_next_token_requests(&self, n: usize) {
        self.shared.lock().oauth.fail_next = n;
    }

    /// Delays each token-endpoint answer (to make races observable).
    pub fn set_token_delay(&self, delay: Duration) {
        self.shared.lock().oauth.token_delay = delay;
    }

    /// Scopes the demo user has granted the app so far.
    pub fn granted_scopes(&self, app_id: &str) -> Vec<String> {
        self.shared
            .lock()
            .oauth
            .grants
            .get(app_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The app a live or expired access token was issued to.
    pub fn token_app_id(&self, token: &str) -> Option<String> {
        self.shared
            .lock()
            .oauth
            .access_tokens
            .get(token)
            .map(|t| t.app_id.clone())
    }

    /// Whether `token` is a live access token carrying `scope`.
    pub fn token_has_scope(&self, token: &str, scope: &str) -> bool {
        let state = self.shared.lock();
        state
            .oauth
            .access_tokens
            .get(token)
            .is_some_and(|t| t.expires_at > now_millis() && t.scopes.iter().any(|s| s == scope))
    }
}

/// The Open API side: test helpers.
impl FeishuEmulator {
    /// Issues an access token for `app_id` carrying exactly `scopes`, as if the user had signed
    /// in and granted them; it lives as long as [`FeishuEmulator::set_access_token_ttl`] says.
    /// If the app is registered, scopes it has not enabled still answer 99991672.
    pub fn issue_token(&self, app_id: &str, scopes: &[&str]) -> String {
        let mut state = self.shared.lock();
        let token = oauth::random_token("eyJ", 120);
        let ttl_ms = i64::try_from(state.oauth.access_ttl.as_millis()).unwrap_or(i64::MAX);
        state.oauth.access_tokens.insert(
            token.clone(),
            oauth::AccessToken {
                app_id: app_id.to_owned(),
                scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
                expires_at: now_millis().saturating_add(ttl_ms),
            },
        );
        token
    }

    /// The demo tenant's ids (the same in every run).
    pub fn seed(&self) -> SeedIds {
        self.shared.lock().api.seed.clone()
    }

    /// Queues a fault for the next matching Open API requests (also `POST /_emulator/faults`).
    pub fn inject_fault(&self, fault: Fault) {
        self.shared.lock().api.faults.add(fault);
    }

    /// Drops every queued fault.
    pub fn clear_faults(&self) {
        self.shared.lock().api.faults.clear();
    }

    /// Caps `method` `route` (a route constant of [`scopes`], e.g. [`scopes::MESSAGES`]) per app.
    pub fn set_rate_limit(&self, method: &str, route: &str, limit: RateLimit) {
        self.shared
            .lock()
            .api
            .faults
            .set_limit(method, route, limit);
    }

    /// Removes every rate limit.
    pub fn clear_rate_limits(&self) {
        self.shared.lock().api.faults.clear_limits();
    }

    /// Moves the Open API side's clock forward (idempotency windows, timestamps of new objects).
    /// Access tokens keep following the real clock.
    pub fn advance_clock(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let mut state = self.shared.lock();
        state.api.clock_offset_ms = state.api.clock_offset_ms.saturating_add(by);
    }

    /// Successful write requests to `route` (a route constant, or a concrete path), from the
    /// request log: what a test counts to prove a write went through once.
    pub fn writes_to(&self, route: &str) -> usize {
        self.shared
            .lock()
            .log
            .iter()
            .filter(|r| {
                r.write
                    && r.status == Some(200)
                    && (r.path == route || r.route.as_deref() == Some(route))
            })
            .count()
    }

    /// Messages sent to `chat_id` through the Open API (sends and replies), oldest first.
    pub fn messages_created_in(&self, chat_id: &str) -> Vec<CreatedMessage> {
        let state = self.shared.lock();
        let mut messages: Vec<CreatedMessage> = state
            .api
            .tenant
            .messages
            .iter()
            .filter(|m| m.via_api && m.chat_id == chat_id)
            .map(|m| CreatedMessage {
                message_id: m.message_id.clone(),
                msg_type: m.msg_type.clone(),
                content: m.content.clone(),
                parent_id: m.parent_id.clone(),
                create_time: m.create_time,
            })
            .collect();
        messages.sort_by_key(|m| m.create_time);
        messages
    }

    /// The chat a message is in (for sends addressed to a person, whose 1:1 chat may be new).
    pub fn chat_of_message(&self, message_id: &str) -> Option<String> {
        self.shared
            .lock()
            .api
            .tenant
            .messages
            .iter()
            .find(|m| m.message_id == message_id)
            .map(|m| m.chat_id.clone())
    }

    /// Events created through the Open API (not counting exceptions made by editing one
    /// instance), deleted ones included.
    pub fn events_created(&self) -> usize {
        let state = self.shared.lock();
        state
            .api
            .tenant
            .events
            .iter()
            .filter(|e| e.via_api && e.recurring_event_id.is_none())
            .count()
    }

    /// Tasks created through the Open API.
    pub fn tasks_created(&self) -> usize {
        let state = self.shared.lock();
        state.api.tenant.tasks.iter().filter(|t| t.via_api).count()
    }

    /// Documents created through the Open API.
    pub fn documents_created(&self) -> usize {
        let state = self.shared.lock();
        state
            .api
            .tenant
            .documents
            .iter()
            .filter(|d| d.via_api)
            .count()
    }

    /// How many top-level blocks `document_id` holds.
    pub fn block_count(&self, document_id: &str) -> Option<usize> {
        let state = self.shared.lock();
        state
            .api
            .tenant
            .documents
            .iter()
            .find(|d| d.document_id == document_id)
            .map(|d| d.blocks.len())
    }
}

/// The bots' side: tenant tokens, the bot capability, cards.
impl FeishuEmulator {
    /// Issues a tenant access token for `app_id`, as `tenant_access_token/internal` would.
    pub fn issue_tenant_token(&self, app_id: &str) -> String {
        let token = format!("t-{}", api::random_hex());
        self.shared.lock().bot.tenant_tokens.insert(
            token.clone(),
            api::bot::TenantToken {
                app_id: app_id.to_owned(),
                expires_at: now_millis() + 2 * 3600 * 1000,
            },
        );
        token
    }

    /// Makes every tenant token issued so far expire now.
    pub fn expire_tenant_tokens(&self) {
        let now = now_millis();
        for token in self.shared.lock().bot.tenant_tokens.values_mut() {
            token.expires_at = now;
        }
    }

    /// Turns the app's bot capability on (the default) or off (the developer console's 机器人
    /// switch): with it off, the bot's endpoints answer 230006.
    pub fn set_bot_enabled(&self, app_id: &str, enabled: bool) {
        let mut state = self.shared.lock();
        if enabled {
            state.bot.bot_off.remove(app_id);
        } else {
            state.bot.bot_off.insert(app_id.to_owned());
        }
    }

    /// Names the app's bot (as `bot/v3/info` reports it).
    pub fn set_bot_name(&self, app_id: &str, name: &str) {
        self.shared
            .lock()
            .bot
            .names
            .insert(app_id.to_owned(), name.to_owned());
    }

    /// The `open_id` of the app's bot.
    pub fn bot_open_id(&self, app_id: &str) -> String {
        api::bot::bot_open_id(app_id)
    }

    /// The cards bots sent to `open_id` (to anyone with `None`), oldest first, with every
    /// version (also `GET /_emulator/cards?open_id=`).
    pub fn bot_cards(&self, open_id: Option<&str>) -> Vec<BotCard> {
        api::bot::cards_of(&self.shared, open_id)
    }

    /// One card by its message id (also `GET /_emulator/cards/{message_id}`).
    pub fn card(&self, message_id: &str) -> Option<BotCard> {
        self.shared.lock().bot.cards.get(message_id).cloned()
    }
}

/// The long connection: knobs, faults and the click hook.
impl FeishuEmulator {
    /// Clicks the element `click.name` of the card `message_id` as `click.operator_open_id`
    /// (the demo user by default): delivers Feishu's `card.action.trigger` callback over one of
    /// the app's open long connections, waits for the app's answer (3 s unless
    /// `click.timeout_ms`) and applies its toast and card (also
    /// `POST /_emulator/cards/{message_id}/click`).
    pub async fn click_card(
        &self,
        message_id: &str,
        click: Click,
    ) -> Result<ClickOutcome, ClickError> {
        longconn::click(&self.shared, message_id, &click).await
    }

    /// Delivers the last callback again, unchanged (the same `event_id`), as Feishu re-pushes
    /// one (also `POST /_emulator/long_connection/replay`).
    pub async fn replay_last_callback(
        &self,
        timeout: Duration,
    ) -> Result<ClickOutcome, ClickError> {
        longconn::replay(&self.shared, timeout).await
    }

    /// The signed-in user forwards the card to `to_open_id`: answers the copy's message id, whose
    /// clicks come from that person (also `POST /_emulator/cards/{message_id}/forward`).
    pub fn forward_card(&self, message_id: &str, to_open_id: &str) -> Result<String, ClickError> {
        longconn::forward(&self.shared, message_id, to_open_id)
    }

    /// Closes the app's open connections from the server's side (every app's with `None`);
    /// answers how many (also `POST /_emulator/long_connection/drop`).
    pub fn drop_long_connections(&self, app_id: Option<&str>) -> usize {
        self.shared.lock().longconn.drop_connections(app_id)
    }

    /// A Feishu outage: drops every connection, then refuses the endpoint ("system busy") and
    /// new connections for `duration` (also `POST /_emulator/long_connection/outage`).
    pub fn long_connection_outage(&self, duration: Duration) {
        let ms = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.shared.lock().longconn.start_outage(ms);
    }

    /// Ends an outage early (also `DELETE /_emulator/long_connection/outage`).
    pub fn end_long_connection_outage(&self) {
        self.shared.lock().longconn.end_outage();
    }

    /// Whether the app receives callbacks through the long connection (on by default); off,
    /// the endpoint answers 403 and open connections close.
    pub fn set_long_connection_enabled(&self, app_id: &str, enabled: bool) {
        self.shared.lock().longconn.set_enabled(app_id, enabled);
    }

    /// The client config the endpoint and every pong hand out.
    pub fn set_long_connection_config(&self, config: ClientConfig) {
        self.shared.lock().longconn.set_config(config);
    }

    /// Splits delivered payloads into parts of at most `size` bytes (`sum`/`seq` headers), as
    /// Feishu does with large ones; `None` sends each whole.
    pub fn set_long_connection_part_size(&self, size: Option<usize>) {
        self.shared.lock().longconn.set_part_size(size);
    }

    /// Open connections and pings received (also `GET /_emulator/long_connection`).
    pub fn long_connection_status(&self) -> LongConnectionStatus {
        longconn::status(&self.shared)
    }

    /// Waits until `app_id` has at least `n` open connections; false after `timeout`.
    pub async fn wait_for_long_connections(
        &self,
        app_id: &str,
        n: usize,
        timeout: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let open = self
                .long_connection_status()
                .connections
                .iter()
                .filter(|(a, _)| a == app_id)
                .count();
            if open >= n {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A message sent through the Open API, as [`FeishuEmulator::messages_created_in`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreatedMessage {
    /// `om_…`.
    pub message_id: String,
    /// `text`, `post`, `interactive`…
    pub msg_type: String,
    /// The JSON string sent as `content`.
    pub content: String,
    /// For a reply: the message replied to.
    pub parent_id: Option<String>,
    /// Milliseconds.
    pub create_time: i64,
}

impl Drop for FeishuEmulator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn request_log(State(shared): State<Shared>) -> Json<Vec<LoggedRequest>> {
    Json(shared.lock().log.clone())
}

async fn seed_ids(State(shared): State<Shared>) -> Json<SeedIds> {
    Json(shared.lock().api.seed.clone())
}
