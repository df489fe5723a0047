//! The facade of signing in: who is signed in, signing in and out, and what Feishu's page said.

use std::collections::BTreeSet;

use feishu::Account;

use super::Companion;
use crate::error::CompanionError;
use crate::events::SignInTicket;
use crate::person::Person;
use crate::view::settings::{AccountView, SignInTicketView};
use crate::view::timeline::TurnView;

impl Companion {
    /// The signed-in account (no secrets), if any.
    pub async fn account(&self) -> Result<Option<Account>, CompanionError> {
        Ok(self.ctx.runtime().tokens.account().await?)
    }

    /// The signed-in account as the UI shows it, without its tokens.
    pub async fn account_view(&self) -> Result<Option<AccountView>, CompanionError> {
        Ok(self.account().await?.map(AccountView::from))
    }

    /// Starts a sign-in for `scopes` (empty: whatever the waiting calls need), returns the page
    /// to open, and finishes in the background: the tokens are stored and every call waiting
    /// for those scopes runs again. Progress arrives as [`crate::UiEvent::SignIn`].
    pub async fn begin_sign_in(&self, scopes: Vec<String>) -> Result<SignInTicket, CompanionError> {
        // A remote MCP server's own sign-in, asked for by its card or its settings row.
        if let Some(server) = crate::mcp::sign_in::server_of_scopes(&scopes) {
            let server = server.to_owned();
            return self.mcp.begin_mcp_sign_in(&server).await;
        }
        let mut wanted: BTreeSet<String> = scopes.into_iter().collect();
        if wanted.is_empty() {
            for call in self.pending()? {
                wanted.extend(call.auth_scopes);
            }
        }
        crate::sign_in::begin(&self.ctx, wanted).await
    }

    /// [`Companion::begin_sign_in`], answered as the UI reads it.
    pub async fn sign_in(&self, scopes: Vec<String>) -> Result<SignInTicketView, CompanionError> {
        let ticket = self.begin_sign_in(scopes).await?;
        Ok(SignInTicketView {
            url: ticket.url,
            redirect_uri: ticket.redirect_uri,
            device: ticket.device.as_ref().map(Into::into),
        })
    }

    /// Stops a sign-in in progress (the listener closes and frees the port).
    pub fn cancel_sign_in(&self) {
        self.ctx.cancel_sign_in()
    }

    /// The user declined to sign in for a call: the model is told it was cancelled.
    pub async fn decline_sign_in(&self, call_id: &str) -> Result<TurnView, CompanionError> {
        Ok(self.engine().auth_declined(call_id).await?.into())
    }

    /// Signs out of Feishu.
    pub async fn sign_out(&self) -> Result<(), CompanionError> {
        Ok(self.ctx.runtime().tokens.sign_out().await?)
    }

    /// Runs a call that waits for a permission again (after the app was granted it).
    /// The answer is where the call's turn stands then.
    pub async fn retry_auth_call(&self, call_id: &str) -> Result<TurnView, CompanionError> {
        crate::sign_in::retry_auth_call(&self.ctx, self.pending()?, call_id).await
    }

    /// The person the app last signed in as, whether or not the sign-in still holds.
    pub fn person(&self) -> Result<Option<Person>, CompanionError> {
        crate::person::person(&self.ctx)
    }

    /// Feishu's authorize page refused the sign-in in progress with `code` (read off the page
    /// by the sign-in window; `named`: scope names it showed). The sign-in stops, its port is
    /// freed, and the card says what to change.
    pub async fn sign_in_refused(&self, code: i64, requested: Vec<String>, named: Vec<String>) {
        crate::sign_in_help::sign_in_refused(&self.ctx, code, requested, named).await
    }

    /// The sign-in left the embedded window for the system browser (the tenant's own identity
    /// provider); the same sign-in (state, PKCE verifier, listener) finishes there.
    pub fn sign_in_continues_in_browser(&self) {
        crate::sign_in_help::sign_in_continues_in_browser(&self.ctx)
    }
}
