//! Signing in to a remote MCP server that asks for it. The server's [`mcp::McpOAuth`] keeps its
//! tokens in the vault; a call the server refuses for want of a sign-in is held behind the same
//! authorization card as a Feishu permission, carrying one pseudo-permission, `mcp:<server id>`,
//! so the card knows whose sign-in it is and the engine resumes exactly that server's calls when
//! it is granted. The card's sign-in goes through the app's loopback listener (on the same port as
//! Feishu's redirect, so a registration made with the server is reused) and the locked-down
//! sign-in window, which shows the authorization server's own page.

use std::sync::Arc;

use agent::{ToolOutcome, ToolResult, ToolReturn};
use async_trait::async_trait;
use feishu::LoopbackListener;
use feishu::listener::Answer;
use mcp::config::{SecretKind, secret_name};
use mcp::oauth::{StoreError, TokenBlob, TokenStore};
use mcp::{Credentials, McpOAuth};
use store::vault::Vault;

use crate::error::CompanionError;
use crate::events::{SignInStatus, SignInTicket};
use crate::mcp::api::Mcp;

/// What a call held for a server's sign-in waits for.
pub(crate) const SCOPE_PREFIX: &str = "mcp:";

/// How long the listener waits for the authorization server's answer.
const SIGN_IN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The pseudo-permission of server `id`.
pub(crate) fn scope_of(id: &str) -> String {
    format!("{SCOPE_PREFIX}{id}")
}

/// The server whose sign-in `scopes` ask for, when they ask for one.
pub(crate) fn server_of_scopes(scopes: &[String]) -> Option<&str> {
    scopes.iter().find_map(|s| s.strip_prefix(SCOPE_PREFIX))
}

/// The vault as a server's token store: one encrypted entry per server.
pub(crate) struct VaultTokens(pub(crate) Arc<Vault>);

fn entry(server_id: &str) -> String {
    secret_name(server_id, SecretKind::OAuth, "tokens")
}

#[async_trait]
impl TokenStore for VaultTokens {
    async fn load(&self, server_id: &str) -> Result<Option<TokenBlob>, StoreError> {
        let bytes = self
            .0
            .get(&entry(server_id))
            .map_err(|e| StoreError(e.to_string()))?;
        Ok(bytes.map(|b| TokenBlob::new(String::from_utf8_lossy(&b).into_owned())))
    }

    async fn save(&self, server_id: &str, blob: TokenBlob) -> Result<(), StoreError> {
        self.0
            .put(&entry(server_id), blob.expose().as_bytes())
            .map_err(|e| StoreError(e.to_string()))
    }

    async fn clear(&self, server_id: &str) -> Result<(), StoreError> {
        self.0
            .delete(&entry(server_id))
            .map(|_| ())
            .map_err(|e| StoreError(e.to_string()))
    }
}

/// A server's OAuth as its credentials, its holds marked with the server's pseudo-permission.
#[derive(Debug)]
pub(crate) struct ServerSignIn {
    id: String,
    pub(crate) oauth: Arc<McpOAuth>,
}

impl ServerSignIn {
    pub(crate) fn new(id: &str, oauth: Arc<McpOAuth>) -> ServerSignIn {
        ServerSignIn {
            id: id.to_owned(),
            oauth,
        }
    }

    /// `held` with this server's pseudo-permission instead of the server's own scopes.
    fn mark(&self, held: ToolReturn) -> ToolReturn {
        match held {
            ToolReturn::Result(r) if r.outcome == ToolOutcome::NeedsUserAuth => {
                ToolResult::new(ToolOutcome::NeedsUserAuth)
                    .with_content(format!(
                        "The user must sign in to the MCP server {}. The app is showing them a sign-in card; the call runs again by itself afterwards.",
                        self.id
                    ))
                    .with_auth_scopes([scope_of(&self.id)])
                    .into()
            }
            other => other,
        }
    }
}

#[async_trait]
impl Credentials for ServerSignIn {
    async fn headers(
        &self,
        tool: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, ToolReturn> {
        self.oauth.headers(tool).await.map_err(|r| self.mark(r))
    }

    async fn on_refusal(&self, tool: &str, code: i64, message: &str) -> Option<ToolReturn> {
        self.oauth
            .on_refusal(tool, code, message)
            .await
            .map(|r| self.mark(r))
    }

    async fn on_error_result(&self, tool: &str, text: &str) -> Option<ToolReturn> {
        self.oauth
            .on_error_result(tool, text)
            .await
            .map(|r| self.mark(r))
    }

    async fn on_challenge(&self, tool: &str, challenge: &str) -> Option<ToolReturn> {
        self.oauth
            .on_challenge(tool, challenge)
            .await
            .map(|r| self.mark(r))
    }
}

impl Mcp {
    /// Starts the sign-in to MCP server `id` for the calls held for it: the page to open, and
    /// in the background the listener that takes the answer, after which those calls run again.
    pub(crate) async fn begin_mcp_sign_in(&self, id: &str) -> Result<SignInTicket, CompanionError> {
        let sign_in = self
            .mcp()
            .sign_in_of(id)
            .ok_or_else(|| CompanionError::Other(format!("MCP server {id} has no sign-in")))?;
        self.stop_sign_in().await;
        let port = self.settings().feishu.redirect_port;
        let listener = LoopbackListener::bind(port)
            .await
            .map_err(feishu::SignInError::from)?;
        let redirect_uri = listener.redirect_uri();
        let begun = sign_in
            .oauth
            .begin(&redirect_uri)
            .await
            .map_err(|e| CompanionError::Other(format!("MCP server {id}: {e}")))?;
        let ticket = SignInTicket {
            url: begun.authorize_url.clone(),
            redirect_uri,
            device: None,
        };
        self.announce(SignInStatus::Waiting {
            url: ticket.url.clone(),
            device: None,
        });
        let me = self.clone();
        let id = id.to_owned();
        let task = tokio::spawn(async move {
            let status = me
                .finish_mcp_sign_in(&id, sign_in, listener, &begun.state)
                .await;
            me.announce(status);
        });
        self.set_sign_in_task(task);
        Ok(ticket)
    }

    async fn finish_mcp_sign_in(
        &self,
        id: &str,
        sign_in: Arc<ServerSignIn>,
        listener: LoopbackListener,
        state: &str,
    ) -> SignInStatus {
        let callback = match listener.callback(state, SIGN_IN_TIMEOUT).await {
            Ok(callback) => callback,
            Err(e) => {
                return SignInStatus::Failed {
                    message: e.to_string(),
                };
            }
        };
        let Some((code, callback)) = callback.code_or_decline().await else {
            return SignInStatus::Declined;
        };
        if let Err(e) = sign_in.oauth.complete(&code, state).await {
            callback.answer(Answer::Failed(e.to_string())).await;
            return SignInStatus::Failed {
                message: format!("MCP server {id}: {e}"),
            };
        }
        callback.answer(Answer::SignedIn).await;
        let granted = vec![scope_of(id)];
        if let Err(e) = self.engine().auth_completed(&granted).await {
            tracing::warn!(server = id, error = %e, "the calls held for an MCP sign-in did not run again");
        }
        // A server signed in to before it ever listed its tools lists them now.
        self.list_unknown_mcp_tools();
        SignInStatus::SignedIn {
            name: self
                .mcp()
                .configs()
                .into_iter()
                .find(|c| c.id == id)
                .map_or_else(|| id.to_owned(), |c| c.display_name().to_owned()),
            scopes: granted,
            switched_from: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_sign_in_is_found_among_the_scopes() {
        assert_eq!(scope_of("github"), "mcp:github");
        let scopes = vec!["calendar:calendar:readonly".to_owned(), scope_of("github")];
        assert_eq!(server_of_scopes(&scopes), Some("github"));
        assert_eq!(server_of_scopes(&["im:message".to_owned()]), None);
    }
}
