//! The signed-in user's tokens: kept encrypted by a [`TokenStore`], refreshed ahead of expiry,
//! one refresh at a time.
//!
//! Feishu's refresh tokens are single use and rotate: the answer to a refresh carries the next
//! one and the old one dies at once. Two refreshes racing would therefore sign the user out, so
//! every caller goes through one async lock and re-checks the token after taking it (the second
//! caller finds the first one's fresh token). The rotated refresh token is saved before the new
//! access token is handed out, so a crash right after a refresh cannot lose it; if that save
//! fails, the rotated token is kept in memory (the old one is dead: it is never used again), the
//! user stays signed in, and the save is tried again on every later use until it succeeds.
//!
//! A stored sign-in that cannot be read (damaged, or written under a lost key) does not lock the
//! user out: it counts as signed out, [`TokenManager::load_problem`] says why, signing in again
//! replaces it and signing out removes it.

use std::sync::Arc;
use std::time::Duration;

use agent::Clock;
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize as _, Zeroizing};

use crate::oauth::{
    FeishuOAuthError, OAuthClient, RefreshAction, SignInRequest, TokenSet, UserInfo,
};

/// Refresh this long before the access token expires.
pub const REFRESH_MARGIN_MS: i64 = 5 * 60 * 1000;

/// The signed-in user's tokens and who they are.
#[derive(Clone)]
pub struct StoredToken {
    /// The user access token.
    pub access_token: SecretString,
    /// The refresh token, when `offline_access` was granted.
    pub refresh_token: Option<SecretString>,
    /// When the access token expires (milliseconds since the Unix epoch).
    pub expires_at: i64,
    /// When the refresh token expires.
    pub refresh_expires_at: Option<i64>,
    /// Every scope granted so far.
    pub scopes: Vec<String>,
    /// Who signed in.
    pub user: Option<UserInfo>,
    /// When the user last signed in.
    pub signed_in_at: i64,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("expires_at", &self.expires_at)
            .field("refresh_expires_at", &self.refresh_expires_at)
            .field("scopes", &self.scopes)
            .field("user", &self.user.as_ref().map(|u| &u.open_id))
            .finish_non_exhaustive()
    }
}

/// The stored form. Only a [`TokenStore`] sees it, and it encrypts it.
#[derive(Serialize, Deserialize)]
struct TokenRecord {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: i64,
    refresh_expires_at: Option<i64>,
    scopes: Vec<String>,
    user: Option<UserInfo>,
    signed_in_at: i64,
}

impl StoredToken {
    /// Serialises for an encrypted store. The bytes hold secrets (wiped when dropped).
    pub fn to_secret_json(&self) -> Zeroizing<Vec<u8>> {
        let record = TokenRecord {
            access_token: self.access_token.expose_secret().to_owned(),
            refresh_token: self
                .refresh_token
                .as_ref()
                .map(|t| t.expose_secret().to_owned()),
            expires_at: self.expires_at,
            refresh_expires_at: self.refresh_expires_at,
            scopes: self.scopes.clone(),
            user: self.user.clone(),
            signed_in_at: self.signed_in_at,
        };
        // A struct of strings, numbers and options always serialises.
        let bytes = Zeroizing::new(serde_json::to_vec(&record).unwrap_or_default());
        // The record's copies of the secrets are plain Strings: wipe them too.
        let TokenRecord {
            mut access_token,
            refresh_token,
            ..
        } = record;
        access_token.zeroize();
        if let Some(mut refresh) = refresh_token {
            refresh.zeroize();
        }
        bytes
    }

    /// Reads what [`StoredToken::to_secret_json`] wrote.
    pub fn from_secret_json(bytes: &[u8]) -> Result<Self, TokenError> {
        let record: TokenRecord = serde_json::from_slice(bytes).map_err(|e| {
            TokenError::Store(format!(
                "the stored sign-in cannot be read ({e}); sign in again"
            ))
        })?;
        Ok(StoredToken {
            access_token: SecretString::from(record.access_token),
            refresh_token: record.refresh_token.map(SecretString::from),
            expires_at: record.expires_at,
            refresh_expires_at: record.refresh_expires_at,
            scopes: record.scopes,
            user: record.user,
            signed_in_at: record.signed_in_at,
        })
    }

    /// What the UI may see: no secrets.
    pub fn account(&self) -> Account {
        Account {
            user: self.user.clone(),
            scopes: self.scopes.clone(),
            expires_at: self.expires_at,
            refresh_expires_at: self.refresh_expires_at,
        }
    }
}

/// The signed-in account as shown to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    /// Who.
    pub user: Option<UserInfo>,
    /// What they granted.
    pub scopes: Vec<String>,
    /// When the access token expires.
    pub expires_at: i64,
    /// When the user must sign in again at the latest.
    pub refresh_expires_at: Option<i64>,
}

/// Where tokens live (encrypted). One store holds one app's sign-in.
pub trait TokenStore: Send + Sync + std::fmt::Debug {
    /// The stored token, if any.
    fn load(&self) -> Result<Option<StoredToken>, TokenError>;
    /// Replaces the stored token.
    fn save(&self, token: &StoredToken) -> Result<(), TokenError>;
    /// Forgets the token.
    fn clear(&self) -> Result<(), TokenError>;
}

/// Why no token can be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Nobody has signed in.
    #[error("not signed in to Feishu")]
    NotSignedIn,
    /// The sign-in has ended (refresh token expired, revoked or reused); sign in again.
    #[error("the Feishu sign-in has ended ({0}); sign in again")]
    SignInAgain(String),
    /// The app's settings are wrong.
    #[error(
        "Feishu rejected the app's settings: {0}. Check the App ID, App Secret and redirect port in Settings."
    )]
    FixSettings(String),
    /// Feishu failed in another way.
    #[error(transparent)]
    OAuth(#[from] FeishuOAuthError),
    /// The encrypted store failed.
    #[error("the token store failed: {0}")]
    Store(String),
}

/// Holds the user's tokens and refreshes them.
#[derive(Debug)]
pub struct TokenManager {
    oauth: OAuthClient,
    store: Arc<dyn TokenStore>,
    clock: Arc<dyn Clock>,
    current: tokio::sync::Mutex<Option<StoredToken>>,
    loaded: std::sync::atomic::AtomicBool,
    retry_delay: Duration,
    /// The token in memory is newer than the stored one: its save failed and is retried.
    unsaved: std::sync::atomic::AtomicBool,
    /// Why the stored sign-in could not be read, if it could not.
    load_problem: std::sync::Mutex<Option<String>>,
}

impl TokenManager {
    /// A manager for this app's tokens in `store`.
    pub fn new(oauth: OAuthClient, store: Arc<dyn TokenStore>, clock: Arc<dyn Clock>) -> Self {
        TokenManager {
            oauth,
            store,
            clock,
            current: tokio::sync::Mutex::new(None),
            loaded: std::sync::atomic::AtomicBool::new(false),
            retry_delay: Duration::from_millis(500),
            unsaved: std::sync::atomic::AtomicBool::new(false),
            load_problem: std::sync::Mutex::new(None),
        }
    }

    /// Sets the pause between retries of a transient failure (tests make it short).
    #[must_use]
    pub fn with_retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// The OAuth client.
    pub fn oauth(&self) -> &OAuthClient {
        &self.oauth
    }

    async fn lock(&self) -> Result<tokio::sync::MutexGuard<'_, Option<StoredToken>>, TokenError> {
        use std::sync::atomic::Ordering;
        let mut guard = self.current.lock().await;
        if !self.loaded.load(Ordering::Acquire) {
            *guard = match self.store.load() {
                Ok(token) => token,
                Err(e) => {
                    // Signed out, not stuck: a new sign-in replaces the row, signing out removes it.
                    tracing::warn!(error = %e, "the stored Feishu sign-in cannot be read");
                    *self.problem() = Some(e.to_string());
                    None
                }
            };
            self.loaded.store(true, Ordering::Release);
        }
        if self.unsaved.load(Ordering::Acquire)
            && let Some(token) = guard.as_ref()
        {
            self.save(token);
        }
        Ok(guard)
    }

    fn problem(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.load_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Why the stored sign-in could not be read (the user counts as signed out), if so.
    pub fn load_problem(&self) -> Option<String> {
        self.problem().clone()
    }

    /// Saves `token`; on failure keeps it marked unsaved, to be saved again on the next use.
    fn save(&self, token: &StoredToken) {
        use std::sync::atomic::Ordering;
        match self.store.save(token) {
            Ok(()) => {
                self.unsaved.store(false, Ordering::Release);
                *self.problem() = None;
            }
            Err(e) => {
                self.unsaved.store(true, Ordering::Release);
                tracing::warn!(error = %e, "saving the refreshed Feishu token failed; it is kept in memory and saved again later");
            }
        }
    }

    /// Finishes a sign-in: exchanges the code, learns who signed in, saves the tokens.
    pub async fn complete_sign_in(
        &self,
        request: &SignInRequest,
        code: &str,
    ) -> Result<Account, TokenError> {
        let tokens = self
            .oauth
            .exchange_code(code, &request.verifier, &request.redirect_uri)
            .await
            .map_err(classify)?;
        self.store_sign_in(tokens).await
    }

    /// Finishes a sign-in whose tokens came some other way (the device flow): learns who signed
    /// in and saves the tokens, exactly as after a loopback sign-in.
    pub async fn store_sign_in(&self, tokens: TokenSet) -> Result<Account, TokenError> {
        let user = self
            .oauth
            .user_info(&tokens.access_token)
            .await
            .map_err(classify)?;
        let now = self.clock.now_millis();
        let mut guard = self.lock().await?;
        let mut scopes = guard.as_ref().map(|t| t.scopes.clone()).unwrap_or_default();
        for scope in tokens.scopes() {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        let token = StoredToken {
            access_token: tokens.access_token,
            refresh_token: tokens.refresh_token,
            expires_at: now + secs_to_ms(tokens.expires_in),
            refresh_expires_at: tokens.refresh_token_expires_in.map(|s| now + secs_to_ms(s)),
            scopes,
            user: Some(user),
            signed_in_at: now,
        };
        self.store.save(&token)?;
        self.unsaved
            .store(false, std::sync::atomic::Ordering::Release);
        *self.problem() = None;
        let account = token.account();
        *guard = Some(token);
        tracing::info!(scopes = account.scopes.len(), "signed in to Feishu");
        Ok(account)
    }

    /// A valid access token, refreshed first if it expires within [`REFRESH_MARGIN_MS`].
    pub async fn access_token(&self) -> Result<SecretString, TokenError> {
        let mut guard = self.lock().await?;
        let token = guard.as_ref().ok_or(TokenError::NotSignedIn)?;
        if token.expires_at - REFRESH_MARGIN_MS > self.clock.now_millis() {
            return Ok(token.access_token.clone());
        }
        self.refresh_locked(&mut guard).await
    }

    /// Refreshes because the API said `stale` is no longer valid — unless another caller has
    /// already replaced it, in which case its replacement is returned.
    pub async fn refresh_after_rejection(
        &self,
        stale: &SecretString,
    ) -> Result<SecretString, TokenError> {
        let mut guard = self.lock().await?;
        let token = guard.as_ref().ok_or(TokenError::NotSignedIn)?;
        if token.access_token.expose_secret() != stale.expose_secret() {
            return Ok(token.access_token.clone());
        }
        self.refresh_locked(&mut guard).await
    }

    async fn refresh_locked(
        &self,
        guard: &mut Option<StoredToken>,
    ) -> Result<SecretString, TokenError> {
        let Some(token) = guard.as_ref() else {
            return Err(TokenError::NotSignedIn);
        };
        let now = self.clock.now_millis();
        let refresh_token = match &token.refresh_token {
            Some(refresh) if token.refresh_expires_at.is_none_or(|at| at > now) => refresh.clone(),
            _ => return Err(self.end_sign_in(guard, "the refresh token has expired")),
        };
        let mut attempt = 0;
        let fresh = loop {
            match self.oauth.refresh(&refresh_token).await {
                Ok(fresh) => break fresh,
                Err(e) if e.action() == RefreshAction::Retry && attempt < 2 => {
                    attempt += 1;
                    tracing::warn!(
                        code = e.code(),
                        attempt,
                        "refreshing the Feishu token failed; retrying"
                    );
                    tokio::time::sleep(self.retry_delay * attempt).await;
                }
                Err(e) => {
                    return Err(match e.action() {
                        RefreshAction::SignInAgain => self.end_sign_in(guard, &e.to_string()),
                        _ => classify(e),
                    });
                }
            }
        };
        let now = self.clock.now_millis();
        let scopes = if fresh.scope.is_empty() {
            token.scopes.clone()
        } else {
            fresh.scopes()
        };
        let renewed = StoredToken {
            access_token: fresh.access_token,
            // Feishu always rotates; keep the old one only if an answer ever lacks a new one.
            refresh_token: fresh.refresh_token.or(Some(refresh_token)),
            expires_at: now + secs_to_ms(fresh.expires_in),
            refresh_expires_at: fresh
                .refresh_token_expires_in
                .map(|s| now + secs_to_ms(s))
                .or(token.refresh_expires_at),
            scopes,
            user: token.user.clone(),
            signed_in_at: token.signed_in_at,
        };
        // Saved before use: the old refresh token is already dead. If the save fails the rotated
        // token is still the only live one, so it is kept (in memory, saved again later) rather
        // than lost, which would sign the user out.
        self.save(&renewed);
        let access = renewed.access_token.clone();
        *guard = Some(renewed);
        tracing::info!("refreshed the Feishu access token");
        Ok(access)
    }

    fn end_sign_in(&self, guard: &mut Option<StoredToken>, reason: &str) -> TokenError {
        *guard = None;
        self.unsaved
            .store(false, std::sync::atomic::Ordering::Release);
        if let Err(e) = self.store.clear() {
            tracing::warn!(error = %e, "could not forget the ended sign-in");
        }
        tracing::warn!(reason, "the Feishu sign-in ended");
        TokenError::SignInAgain(reason.to_owned())
    }

    /// The scopes granted so far (empty when signed out).
    pub async fn granted_scopes(&self) -> Result<Vec<String>, TokenError> {
        Ok(self
            .lock()
            .await?
            .as_ref()
            .map(|t| t.scopes.clone())
            .unwrap_or_default())
    }

    /// Which of `needed` the user has not granted yet.
    pub async fn missing_scopes(&self, needed: &[String]) -> Result<Vec<String>, TokenError> {
        let granted = self.granted_scopes().await?;
        Ok(needed
            .iter()
            .filter(|s| !granted.contains(s))
            .cloned()
            .collect())
    }

    /// The signed-in account, without secrets.
    pub async fn account(&self) -> Result<Option<Account>, TokenError> {
        Ok(self.lock().await?.as_ref().map(StoredToken::account))
    }

    /// Signs out: forgets the tokens.
    pub async fn sign_out(&self) -> Result<(), TokenError> {
        let mut guard = self.lock().await?;
        *guard = None;
        self.unsaved
            .store(false, std::sync::atomic::Ordering::Release);
        self.store.clear()?;
        *self.problem() = None;
        Ok(())
    }
}

fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000)
}

fn classify(error: FeishuOAuthError) -> TokenError {
    match error.action() {
        RefreshAction::SignInAgain => TokenError::SignInAgain(error.to_string()),
        RefreshAction::FixSettings => TokenError::FixSettings(error.to_string()),
        _ => TokenError::OAuth(error),
    }
}

/// A [`TokenStore`] in memory, for tests and for a session that must not persist.
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    token: std::sync::Mutex<Option<Vec<u8>>>,
}

impl TokenStore for MemoryTokenStore {
    fn load(&self) -> Result<Option<StoredToken>, TokenError> {
        let bytes = self
            .token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        bytes.map(|b| StoredToken::from_secret_json(&b)).transpose()
    }

    fn save(&self, token: &StoredToken) -> Result<(), TokenError> {
        *self
            .token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(token.to_secret_json().to_vec());
        Ok(())
    }

    fn clear(&self) -> Result<(), TokenError> {
        *self
            .token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }
}

/// A [`TokenStore`] in the encrypted vault: the sign-in survives restarts, encrypted at rest
/// under the master key in the OS keychain.
#[derive(Debug, Clone)]
pub struct VaultTokenStore {
    vault: Arc<store::Vault>,
    name: String,
}

impl VaultTokenStore {
    /// The store for `app_id`'s sign-in (each app has its own).
    pub fn new(vault: Arc<store::Vault>, app_id: &str) -> Self {
        VaultTokenStore {
            vault,
            name: format!("feishu.user_token.{app_id}"),
        }
    }
}

impl TokenStore for VaultTokenStore {
    fn load(&self) -> Result<Option<StoredToken>, TokenError> {
        match self.vault.get(&self.name) {
            Ok(Some(bytes)) => StoredToken::from_secret_json(&bytes).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(TokenError::Store(e.to_string())),
        }
    }

    fn save(&self, token: &StoredToken) -> Result<(), TokenError> {
        self.vault
            .put(&self.name, &token.to_secret_json())
            .map_err(|e| TokenError::Store(e.to_string()))
    }

    fn clear(&self) -> Result<(), TokenError> {
        self.vault
            .delete(&self.name)
            .map(drop)
            .map_err(|e| TokenError::Store(e.to_string()))
    }
}
