//! The token a request carries: refreshed ahead of expiry (one refresh at a time), renewed
//! once when the server refuses it, and given up for a sign-in when it cannot be renewed.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use agent::ToolReturn;
use oauth2::TokenResponse as _;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, OAuthClientConfig, StoredCredentials, WWWAuthenticateParams,
};

use super::store::Saved;
use super::{FORCED_AGAIN_AFTER, Inner, McpOAuth, REFRESH_AHEAD_SECS, challenge};

impl McpOAuth {
    /// The access token to send, refreshed first when it is about to expire; `None` before the
    /// server ever asked for one.
    pub(super) async fn access_token(&self) -> Result<Option<String>, ToolReturn> {
        // One at a time: a refresh is made once, and whoever waited finds its token.
        let mut inner = self.inner.lock().await;
        let saved = self.saved().await?;
        let Some(token) = saved.access_token() else {
            if saved.signed_in_before() || inner.challenge.is_some() {
                return Err(self.sign_in_needed(&saved.requested));
            }
            return Ok(None);
        };
        match &saved.credentials {
            Some(credentials) if expiring(credentials, now()) => {
                self.refresh(&mut inner, &saved).await.map(Some)
            }
            _ => Ok(Some(token)),
        }
    }

    /// A new access token for the refresh token kept (rotated and stored by rmcp before it is
    /// given here); the user must sign in again when there is none or it is refused.
    async fn refresh(&self, inner: &mut Inner, saved: &Saved) -> Result<String, ToolReturn> {
        let refreshable = saved
            .credentials
            .as_ref()
            .and_then(|c| c.token_response.as_ref())
            .is_some_and(|t| t.refresh_token().is_some());
        if !refreshable {
            self.forget_token().await;
            return Err(self.sign_in_needed(&saved.requested));
        }
        let manager = match self.configured(inner, saved).await {
            Ok(manager) => manager,
            Err(e) => return Err(self.failed(&format!("could not renew the sign-in ({e})"))),
        };
        match manager.refresh_token().await {
            Ok(response) => Ok(response.access_token().secret().clone()),
            Err(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired) => {
                self.forget_token().await;
                Err(self.sign_in_needed(&saved.requested))
            }
            Err(e) => {
                tracing::warn!(server = %self.server_id, error = %e, "token refresh failed");
                Err(self.failed(&format!(
                    "could not renew the sign-in ({e}); the next call tries again"
                )))
            }
        }
    }

    /// rmcp's authorization for refreshes: found out once (after a restart, at the first
    /// refresh), with the client the tokens were issued to.
    async fn configured<'a>(
        &self,
        inner: &'a mut Inner,
        saved: &Saved,
    ) -> Result<&'a AuthorizationManager, String> {
        if inner.manager.is_none() {
            let client = self
                .preregistered
                .clone()
                .or_else(|| saved.client.clone())
                .ok_or("no client is registered")?;
            let mut manager = self.manager().await?;
            let found = manager
                .resolve_metadata_from_challenge(inner.challenge.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            manager.set_metadata(found.metadata);
            let mut config = OAuthClientConfig::new(client.client_id, client.redirect_uri);
            if let Some(secret) = client.client_secret {
                config = config.with_client_secret(secret);
            }
            manager
                .configure_client(config)
                .map_err(|e| e.to_string())?;
            inner.manager = Some(manager);
        }
        inner
            .manager
            .as_ref()
            .ok_or_else(|| "no authorization".to_owned())
    }

    /// A new rmcp authorization for the server, keeping its tokens in the vault.
    pub(super) async fn manager(&self) -> Result<AuthorizationManager, String> {
        crate::http::install_crypto();
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(|e| e.to_string())?;
        manager.set_credential_store(self.vault.clone());
        Ok(manager)
    }

    /// Drops the access token (the server refused it for good), keeping the registration.
    async fn forget_token(&self) {
        let forgotten = self
            .vault
            .change(|s| {
                if let Some(credentials) = &mut s.credentials {
                    credentials.token_response = None;
                }
            })
            .await;
        if let Err(e) = forgotten {
            tracing::warn!(server = %self.server_id, error = %e, "could not forget a refused token");
        }
    }

    /// What the server's refusal `www_authenticate` asks of the user.
    pub(super) async fn challenged(&self, www_authenticate: &str) -> Option<ToolReturn> {
        let base = reqwest::Url::parse(&self.url).ok()?;
        let params = WWWAuthenticateParams::parse(www_authenticate, &base);
        let asked = challenge::scopes(params.scope.as_deref());
        let mut inner = self.inner.lock().await;
        inner.challenge = Some(www_authenticate.to_owned());
        let saved = match self.saved().await {
            Ok(saved) => saved,
            Err(failed) => return Some(failed),
        };
        if params.is_insufficient_scope() {
            let verdict = challenge::step_up(&mut inner.step_up, &asked, saved.granted());
            return Some(match verdict {
                challenge::Verdict::Ask(scopes) => {
                    self.sign_in_needed(&challenge::union(&saved.requested, &scopes))
                }
                challenge::Verdict::GiveUp(why) => self.failed(&why),
            });
        }
        // A 401 for a token that went out: it expired early or was revoked. One refresh, and
        // the request is made again with it; a second refusal soon after needs the user.
        if saved.access_token().is_some() {
            let recent = inner
                .forced_at
                .is_some_and(|at| at.elapsed() < FORCED_AGAIN_AFTER);
            if !recent {
                inner.forced_at = Some(Instant::now());
                // Renewed: no result, and the connection makes the request again.
                return self.refresh(&mut inner, &saved).await.err();
            }
            self.forget_token().await;
        }
        Some(self.sign_in_needed(&challenge::union(&saved.requested, &asked)))
    }
}

/// Seconds since the epoch.
pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether the token of `credentials` expires within the refresh margin at `now`; a token
/// without an expiry is used until the server refuses it.
pub(super) fn expiring(credentials: &StoredCredentials, now: u64) -> bool {
    let (Some(response), Some(received)) =
        (&credentials.token_response, credentials.token_received_at)
    else {
        return false;
    };
    let Some(lifetime) = response.expires_in().map(|d| d.as_secs()) else {
        return false;
    };
    let ahead = REFRESH_AHEAD_SECS.min(lifetime / 2).max(1);
    received.saturating_add(lifetime) < now.saturating_add(ahead)
}
