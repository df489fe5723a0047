//! Signing in: the page to open, and the code it comes back with exchanged for tokens.

use std::collections::BTreeMap;
use std::time::Instant;

use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession};

use super::store::Client;
use super::{McpOAuth, OAuthError, PENDING_FOR, PENDING_KEPT, Pending, SignIn, challenge};

impl McpOAuth {
    /// Begins a sign-in that comes back to `redirect_uri` (the app's loopback listener, any
    /// port): the page to open, and the state to complete it with.
    pub async fn begin(&self, redirect_uri: &str) -> Result<SignIn, OAuthError> {
        let mut inner = self.inner.lock().await;
        let saved = self.vault.saved().await?;
        let mut manager = self.manager().await.map_err(OAuthError::Discovery)?;
        let found = manager
            .resolve_metadata_from_challenge(inner.challenge.as_deref())
            .await
            .map_err(|e| OAuthError::Discovery(e.to_string()))?;
        manager.set_metadata(found.metadata);
        // A step-up asks for what was asked before and what the server wants now; a first
        // sign-in for what the server names (its challenge, else its metadata), or nothing;
        // signing in again keeps what was granted before.
        let scopes = match &mut inner.step_up {
            Some(step) => {
                step.sign_ins += 1;
                challenge::union(&saved.requested, &step.scopes)
            }
            None => challenge::union(&saved.requested, &manager.select_initial_scopes(&[]).await),
        };
        let client = match (&self.preregistered, &saved.client) {
            (Some(given), _) => Client {
                redirect_uri: redirect_uri.to_owned(),
                ..given.clone()
            },
            (None, Some(registered)) if registered.redirect_uri == redirect_uri => {
                registered.clone()
            }
            _ => {
                let asked: Vec<&str> = scopes.iter().map(String::as_str).collect();
                let config = manager
                    .register_client(&self.client_name, redirect_uri, &asked)
                    .await
                    .map_err(|e| OAuthError::Registration(e.to_string()))?;
                Client {
                    client_id: config.client_id,
                    client_secret: config.client_secret,
                    redirect_uri: redirect_uri.to_owned(),
                }
            }
        };
        let mut request = AuthorizationRequest::new(redirect_uri)
            .with_preregistered_client(client.client_id.clone())
            .with_client_name(self.client_name.clone());
        if let Some(secret) = &client.client_secret {
            request = request.with_client_secret(secret.clone());
        }
        // Scopes nobody named are left out of the request rather than guessed.
        request = if scopes.is_empty() {
            request.with_initial_scope_selection()
        } else {
            request.with_scopes(scopes.clone())
        };
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| OAuthError::Registration(e.to_string()))?;
        let authorize_url = session.get_authorization_url().to_owned();
        let state = reqwest::Url::parse(&authorize_url)
            .ok()
            .and_then(|url| {
                url.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or_else(|| OAuthError::Discovery("the sign-in page carries no state".into()))?;
        inner.pending.retain(|p| p.begun.elapsed() < PENDING_FOR);
        if inner.pending.len() >= PENDING_KEPT {
            inner.pending.remove(0);
        }
        inner.pending.push(Pending {
            state: state.clone(),
            session,
            client,
            scopes,
            begun: Instant::now(),
        });
        Ok(SignIn {
            authorize_url,
            state,
        })
    }

    /// Completes the sign-in begun with `state`, from where the browser came back (the whole
    /// redirect URL) or the code alone. The tokens are in the store when it returns.
    pub async fn complete(&self, callback: &str, state: &str) -> Result<(), OAuthError> {
        let mut inner = self.inner.lock().await;
        inner.pending.retain(|p| p.begun.elapsed() < PENDING_FOR);
        let index = inner
            .pending
            .iter()
            .position(|p| p.state == state)
            .ok_or(OAuthError::UnknownState)?;
        let (code, issuer) = read_callback(callback, state)?;
        let pending = inner.pending.remove(index);
        // The client first, so the blob that gets the tokens names who they were issued to.
        self.vault
            .change(|s| {
                s.client = Some(pending.client.clone());
                s.requested = pending.scopes.clone();
            })
            .await?;
        pending
            .session
            .handle_callback_with_issuer(&code, state, issuer.as_deref())
            .await
            .map_err(|e| OAuthError::Exchange(e.to_string()))?;
        inner.manager = Some(pending.session.auth_manager);
        inner.challenge = None;
        inner.forced_at = None;
        tracing::info!(server = %self.server_id, "signed in to the MCP server");
        Ok(())
    }
}

/// The code (and the RFC 9207 issuer, if given) in what the browser came back with: the whole
/// redirect URL, or the code alone.
pub(super) fn read_callback(
    callback: &str,
    state: &str,
) -> Result<(String, Option<String>), OAuthError> {
    let callback = callback.trim();
    let Some(url) = reqwest::Url::parse(callback)
        .ok()
        .filter(|u| u.query().is_some())
    else {
        return Ok((callback.to_owned(), None));
    };
    let pairs: BTreeMap<String, String> = url.query_pairs().into_owned().collect();
    if let Some(error) = pairs.get("error") {
        let description = pairs.get("error_description").unwrap_or(error);
        return Err(OAuthError::Denied(description.clone()));
    }
    if pairs.get("state").is_some_and(|s| s != state) {
        return Err(OAuthError::UnknownState);
    }
    let code = pairs
        .get("code")
        .cloned()
        .ok_or_else(|| OAuthError::Denied("the answer carries no code".into()))?;
    Ok((code, pairs.get("iss").cloned()))
}
