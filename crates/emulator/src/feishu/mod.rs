//! The Feishu emulator: a local server that behaves like Feishu as documented, for tests and demo
//! mode. It binds a loopback port chosen at start; the app's base URLs point at it.
//!
//! This module holds the server, its shared state, the request log and the control endpoints;
//! [`oauth`] holds the sign-in side (authorize page, token endpoint, `user_info`).

pub mod oauth;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

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
    pub(crate) apps: HashMap<String, App>,
    pub(crate) user: User,
    pub(crate) oauth: oauth::OAuthState,
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
        let shared = Shared(Arc::new(Mutex::new(EmulatorState {
            apps: HashMap::new(),
            user: demo_user(),
            oauth: oauth::OAuthState::default(),
            log: Vec::new(),
        })));
        let router = Router::new()
            .merge(oauth::routes())
            .route("/_emulator/requests", get(request_log))
            .with_state(shared.clone());
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let address = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let server = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "the Feishu emulator stopped");
            }
        });
        Ok(FeishuEmulator {
            address,
            shared,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:<port>`: both the accounts and the Open API base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Registers an app (as the developer console would).
    pub fn register_app(&self, app: App) {
        self.shared.lock().apps.insert(app.app_id.clone(), app);
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
