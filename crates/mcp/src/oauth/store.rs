//! Where a remote server's sign-in is kept: one opaque JSON blob per server in the app's store
//! (its encrypted vault), holding the client the app registered (or was given) and the tokens.
//! The blob is read once and then kept in memory; every change is written to the store first
//! and only then used, so a refresh token the server rotated is in the vault before the new
//! access token goes out. Nothing here prints a token: the blob's `Debug` shows its length.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// A server's sign-in as the store keeps it: JSON, secrets inside.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenBlob(String);

impl TokenBlob {
    /// The blob the store gave back.
    pub fn new(json: String) -> TokenBlob {
        TokenBlob(json)
    }

    /// The JSON, to keep: it holds tokens, so it goes nowhere but the store.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TokenBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenBlob({} bytes)", self.0.len())
    }
}

/// Why the store could not read or keep a blob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the token store failed: {0}")]
pub struct StoreError(pub String);

/// Where the app keeps each server's sign-in.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Server `server_id`'s blob, if it has one.
    async fn load(&self, server_id: &str) -> Result<Option<TokenBlob>, StoreError>;
    /// Keeps `blob` as server `server_id`'s, replacing what was there.
    async fn save(&self, server_id: &str, blob: TokenBlob) -> Result<(), StoreError>;
    /// Forgets server `server_id`'s blob (the user signed out, or removed the server).
    async fn clear(&self, server_id: &str) -> Result<(), StoreError>;
}

/// A store in memory, for tests and tools that keep nothing.
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    blobs: Mutex<std::collections::BTreeMap<String, TokenBlob>>,
}

#[async_trait]
impl TokenStore for MemoryTokenStore {
    async fn load(&self, server_id: &str) -> Result<Option<TokenBlob>, StoreError> {
        Ok(self.blobs().get(server_id).cloned())
    }

    async fn save(&self, server_id: &str, blob: TokenBlob) -> Result<(), StoreError> {
        self.blobs().insert(server_id.to_owned(), blob);
        Ok(())
    }

    async fn clear(&self, server_id: &str) -> Result<(), StoreError> {
        self.blobs().remove(server_id);
        Ok(())
    }
}

impl MemoryTokenStore {
    fn blobs(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, TokenBlob>> {
        self.blobs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The client the authorization server knows the app as.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Client {
    pub(crate) client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// Where it was registered to send the user back (a registration is reused only for it).
    #[serde(default)]
    pub(crate) redirect_uri: String,
}

/// What the blob holds. No `Debug`: it is all secrets.
#[derive(Clone, Default, Serialize, Deserialize)]
pub(crate) struct Saved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client: Option<Client>,
    /// The tokens, as rmcp keeps them; `token_response` is `None` once the server refused
    /// them for good (the user signed in before, and must again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials: Option<StoredCredentials>,
    /// The scopes asked for at the last sign-in, which a step-up adds to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) requested: Vec<String>,
}

impl Saved {
    /// The access token, if one is kept.
    pub(crate) fn access_token(&self) -> Option<String> {
        use oauth2::TokenResponse as _;
        let response = self.credentials.as_ref()?.token_response.as_ref()?;
        Some(response.access_token().secret().clone())
    }

    /// Whether the user signed in to this server before (so it needs a sign-in, not a try
    /// without).
    pub(crate) fn signed_in_before(&self) -> bool {
        self.credentials.is_some()
    }

    /// The scopes the tokens were granted.
    pub(crate) fn granted(&self) -> &[String] {
        self.credentials
            .as_ref()
            .map_or(&[], |c| c.granted_scopes.as_slice())
    }
}

struct Cache {
    loaded: bool,
    saved: Saved,
}

/// One server's blob: read from the store once, written through on every change. rmcp's
/// authorization keeps its tokens here too (as its [`CredentialStore`]).
#[derive(Clone)]
pub(crate) struct Vault {
    server_id: String,
    store: Arc<dyn TokenStore>,
    cache: Arc<Mutex<Cache>>,
}

impl Vault {
    pub(crate) fn new(server_id: &str, store: Arc<dyn TokenStore>) -> Vault {
        Vault {
            server_id: server_id.to_owned(),
            store,
            cache: Arc::new(Mutex::new(Cache {
                loaded: false,
                saved: Saved::default(),
            })),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is kept now, read from the store the first time.
    pub(crate) async fn saved(&self) -> Result<Saved, StoreError> {
        {
            let cache = self.cache();
            if cache.loaded {
                return Ok(cache.saved.clone());
            }
        }
        let saved = match self.store.load(&self.server_id).await? {
            // A blob this version cannot read is a sign-in to make again, not a failure.
            Some(blob) => serde_json::from_str(blob.expose()).unwrap_or_default(),
            None => Saved::default(),
        };
        let mut cache = self.cache();
        cache.loaded = true;
        cache.saved = saved.clone();
        Ok(saved)
    }

    /// Changes what is kept: in the store first, then here.
    pub(crate) async fn change(&self, change: impl FnOnce(&mut Saved)) -> Result<(), StoreError> {
        let mut saved = self.saved().await?;
        change(&mut saved);
        let json = serde_json::to_string(&saved)
            .map_err(|e| StoreError(format!("the sign-in could not be written: {e}")))?;
        self.store.save(&self.server_id, TokenBlob(json)).await?;
        self.cache().saved = saved;
        Ok(())
    }

    /// Forgets everything, in the store and here.
    pub(crate) async fn clear(&self) -> Result<(), StoreError> {
        self.store.clear(&self.server_id).await?;
        let mut cache = self.cache();
        cache.loaded = true;
        cache.saved = Saved::default();
        Ok(())
    }
}

#[async_trait]
impl CredentialStore for Vault {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.saved()
            .await
            .map(|s| s.credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.0))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.change(|s| s.credentials = Some(credentials))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.0))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        // rmcp clears when the authorization server changed: the registration goes too.
        self.change(|s| {
            s.credentials = None;
            s.client = None;
        })
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.0))
    }
}
