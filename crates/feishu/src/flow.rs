//! One whole sign-in: listen on the loopback port, show the authorize page, wait for the
//! redirect, exchange the code, save the tokens. The app opens the page in its embedded window
//! (or the system browser); this module does not care which.

use std::time::Duration;

use serde_json::Value;
use url::Url;

use crate::listener::{Answer, CallbackOutcome, ListenerError, LoopbackListener};
use crate::tokens::{Account, TokenError, TokenManager};

/// How long a sign-in may take before the listener gives up.
pub const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Why a sign-in did not complete.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The loopback listener failed (busy port, timeout).
    #[error(transparent)]
    Listener(#[from] ListenerError),
    /// The user declined on Feishu's page.
    #[error("the sign-in was declined ({0})")]
    Declined(String),
    /// Exchanging the code or saving the tokens failed.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The authorize URL could not be built.
    #[error(transparent)]
    OAuth(#[from] crate::oauth::FeishuOAuthError),
    /// The device flow ended without a token (declined, expired, offline, refused).
    #[error(transparent)]
    Device(#[from] crate::device::DeviceFlowError),
}

impl TokenManager {
    /// Signs the user in for `scopes` (plus `offline_access`): binds the listener on `port`,
    /// calls `open` with the authorize URL, waits for the redirect and stores the tokens.
    pub async fn sign_in(
        &self,
        scopes: &[String],
        port: u16,
        timeout: Duration,
        open: impl FnOnce(&Url),
    ) -> Result<Account, SignInError> {
        let listener = LoopbackListener::bind(port).await?;
        let request = self
            .oauth()
            .begin_sign_in(scopes, &listener.redirect_uri())?;
        open(&request.url);
        let callback = listener.callback(request.state.secret(), timeout).await?;
        match callback.outcome.clone() {
            CallbackOutcome::Code(code) => match self.complete_sign_in(&request, &code).await {
                Ok(account) => {
                    callback.answer(Answer::SignedIn).await;
                    Ok(account)
                }
                Err(e) => {
                    callback.answer(Answer::Failed(e.to_string())).await;
                    Err(e.into())
                }
            },
            CallbackOutcome::Denied { error } => {
                callback.answer(Answer::Declined).await;
                Err(SignInError::Declined(error))
            }
        }
    }
}

impl TokenManager {
    /// Signs the user in for `scopes` (plus `offline_access`) by the device flow: asks for a
    /// code, calls `show` with it (the QR code, the link), polls until the user confirms on
    /// Feishu's page and stores the tokens. No redirect URL is involved.
    pub async fn device_sign_in(
        &self,
        scopes: &[String],
        show: impl FnOnce(&crate::device::DeviceCode),
    ) -> Result<Account, SignInError> {
        let code = self.oauth().request_device_code(scopes).await?;
        show(&code);
        let tokens = self.oauth().wait_for_device_token(&code).await?;
        Ok(self.store_sign_in(tokens).await?)
    }
}

/// The scopes a 99991679 error says the user has not granted, from its `permission_violations`
/// (`error.permission_violations[].subject`), for a sign-in that asks for exactly those.
pub fn missing_scopes_from_error(body: &Value) -> Vec<String> {
    let violations = body
        .pointer("/error/permission_violations")
        .or_else(|| body.get("permission_violations"))
        .and_then(Value::as_array);
    let mut scopes: Vec<String> = Vec::new();
    for subject in violations
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("subject").and_then(Value::as_str))
    {
        if !scopes.iter().any(|s| s == subject) {
            scopes.push(subject.to_owned());
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn permission_violations_give_exactly_the_missing_scopes() {
        let body = json!({
            "code": 99991679,
            "msg": "Unauthorized. You do not have permission... required one of these privileges: [task:task:read]",
            "error": {"permission_violations": [
                {"subject": "task:task:read", "type": "action_privilege_required"},
                {"subject": "task:task:write", "type": "action_privilege_required"},
                {"subject": "task:task:read", "type": "action_privilege_required"}
            ]}
        });
        assert_eq!(
            missing_scopes_from_error(&body),
            ["task:task:read", "task:task:write"]
        );
        assert!(missing_scopes_from_error(&json!({"code": 99991679})).is_empty());
    }
}
