//! The facade of signing in: who is signed in, signing in and out, and what Feishu's page said.

use super::Companion;
use crate::error::CompanionError;
use crate::person::Person;

impl Companion {
    /// Runs a call that waits for a permission again (after the app was granted it).
    /// The answer is where the call's turn stands then.
    pub async fn retry_auth_call(
        &self,
        call_id: &str,
    ) -> Result<crate::view::TurnView, CompanionError> {
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
