//! Sign-in to a remote server that asks for it (MCP authorization: OAuth 2.1 with PKCE), through
//! rmcp's authorization. A server that answers 401 holds the call behind the app's
//! authorization card ([`McpOAuth`] as the server's [`Credentials`]); the card calls
//! [`McpOAuth::begin`] for the page to open and, when the browser comes back to the app's
//! loopback listener, [`McpOAuth::complete`]; the engine then runs the call again, now with the
//! token. Discovery follows the server's `WWW-Authenticate` (its protected resource metadata,
//! else the well-known places, then the authorization server's RFC 8414 or OpenID metadata, and
//! for 2025-03-26 servers the default endpoints); the app registers itself (dynamic client
//! registration) unless it was given a client; every token request names the server
//! (`resource`). Tokens are refreshed ahead of expiry, one refresh at a time, and kept in the
//! app's store ([`TokenStore`]) before they are used.

mod challenge;
mod sign_in;
mod store;
#[cfg(test)]
mod tests;
mod token;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agent::ToolReturn;
use async_trait::async_trait;
use rmcp::transport::auth::{AuthorizationManager, AuthorizationSession};
use tokio::sync::Mutex;

use crate::credentials::Credentials;
use store::{Client, Saved, Vault};
pub use store::{MemoryTokenStore, StoreError, TokenBlob, TokenStore};

/// How long before it expires a token is refreshed, at most (half the lifetime of a short one).
const REFRESH_AHEAD_SECS: u64 = 60;

/// A sign-in begun and not completed is forgotten after this.
const PENDING_FOR: Duration = Duration::from_secs(15 * 60);

/// Sign-ins begun and not completed that are kept at once (the newest).
const PENDING_KEPT: usize = 4;

/// After a server refused a token it was just refreshed for, it is not refreshed again for it.
const FORCED_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// A sign-in begun: the page to open, and the state its answer comes back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// The authorization server's page, for the sign-in window or the browser.
    pub authorize_url: String,
    /// The `state` the redirect carries, to give [`McpOAuth::complete`].
    pub state: String,
}

/// Why a sign-in could not be begun or completed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// How the server signs users in could not be found out.
    #[error("the server's authorization could not be found: {0}")]
    Discovery(String),
    /// The authorization server would not register the app.
    #[error("the authorization server would not register the app: {0}")]
    Registration(String),
    /// No sign-in begun waits for this answer (it expired, was completed, or is another's).
    #[error("no sign-in is waiting for this answer")]
    UnknownState,
    /// The user or the authorization server refused.
    #[error("the sign-in was refused: {0}")]
    Denied(String),
    /// The code did not give a token.
    #[error("the sign-in's code could not be exchanged for a token: {0}")]
    Exchange(String),
    /// The app's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A remote server's sign-in: its tokens, and the sign-ins begun for it.
pub struct McpOAuth {
    server_id: String,
    url: String,
    client_name: String,
    preregistered: Option<Client>,
    vault: Vault,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// rmcp's authorization, found out and configured, for refreshes.
    manager: Option<AuthorizationManager>,
    /// The server's last challenge: it asked for a sign-in.
    challenge: Option<String>,
    step_up: Option<challenge::StepUp>,
    pending: Vec<Pending>,
    /// When a refused token was last refreshed.
    forced_at: Option<Instant>,
}

struct Pending {
    state: String,
    session: AuthorizationSession,
    client: Client,
    scopes: Vec<String>,
    begun: Instant,
}

impl std::fmt::Debug for McpOAuth {
    // Tokens, secrets and sign-ins in progress stay out of it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOAuth")
            .field("server_id", &self.server_id)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl McpOAuth {
    /// The sign-in to server `server_id` at `url` (its MCP endpoint), kept in `store`.
    pub fn new(server_id: &str, url: &str, store: std::sync::Arc<dyn TokenStore>) -> McpOAuth {
        McpOAuth {
            server_id: server_id.to_owned(),
            url: url.to_owned(),
            client_name: "Feishu Companion".to_owned(),
            preregistered: None,
            vault: Vault::new(server_id, store),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Signs in as a client registered with the authorization server beforehand (the user
    /// gave its id and secret) instead of registering the app.
    pub fn with_client(mut self, client_id: &str, client_secret: Option<&str>) -> McpOAuth {
        self.preregistered = Some(Client {
            client_id: client_id.to_owned(),
            client_secret: client_secret.map(str::to_owned),
            redirect_uri: String::new(),
        });
        self
    }

    /// The name the app registers under (`Feishu Companion` by default).
    pub fn with_client_name(mut self, name: &str) -> McpOAuth {
        self.client_name = name.to_owned();
        self
    }

    /// Forgets the sign-in (tokens and registration), here and in the store.
    pub async fn sign_out(&self) -> Result<(), StoreError> {
        let mut inner = self.inner.lock().await;
        *inner = Inner::default();
        self.vault.clear().await
    }

    async fn saved(&self) -> Result<Saved, ToolReturn> {
        self.vault
            .saved()
            .await
            .map_err(|e| self.failed(&format!("could not read its sign-in: {e}")))
    }

    fn sign_in_needed(&self, scopes: &[String]) -> ToolReturn {
        challenge::sign_in_needed(&self.server_id, scopes)
    }

    fn failed(&self, what: &str) -> ToolReturn {
        challenge::failed(&self.server_id, what)
    }
}

#[async_trait]
impl Credentials for McpOAuth {
    async fn headers(&self, _tool: &str) -> Result<BTreeMap<String, String>, ToolReturn> {
        Ok(match self.access_token().await? {
            Some(token) => {
                BTreeMap::from([("Authorization".to_owned(), format!("Bearer {token}"))])
            }
            // Never asked: the server may need no sign-in at all.
            None => BTreeMap::new(),
        })
    }

    async fn on_refusal(&self, _tool: &str, _code: i64, _message: &str) -> Option<ToolReturn> {
        // MCP authorization refuses over HTTP (401, 403), which reaches `on_challenge`; a
        // JSON-RPC error is the tool's own and is passed on.
        None
    }

    async fn on_challenge(&self, _tool: &str, www_authenticate: &str) -> Option<ToolReturn> {
        self.challenged(www_authenticate).await
    }
}
