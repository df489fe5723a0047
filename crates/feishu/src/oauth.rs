//! Feishu OAuth 2.0 with PKCE: the authorize URL, and the v2 token endpoint for the
//! `authorization_code` and `refresh_token` grants.
//!
//! The authorize URL, the PKCE pair and the `state` come from the `oauth2` crate. The token calls
//! are made here over `reqwest` rather than through `oauth2`'s exchange, because Feishu answers
//! failures with a numeric `code` (20050 retry, 20064 sign in again, …) that `oauth2`'s standard
//! error type drops, and that code decides what the app does next. The client secret goes in the
//! body only (Feishu rejects Basic auth and a body secret together with 20070), and token calls
//! follow no redirects.

use std::time::Duration;

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
};
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::config::{AppCredentials, Endpoints};

/// Always requested, so a refresh token comes back.
pub const OFFLINE_ACCESS: &str = "offline_access";

/// Feishu accepts at most this many scopes in one authorize request.
pub const MAX_SCOPES_PER_REQUEST: usize = 50;

/// One sign-in attempt: the URL to open and what is needed to finish it.
#[derive(Debug)]
pub struct SignInRequest {
    /// The authorize page, with the PKCE challenge and `state`.
    pub url: Url,
    /// The `state` the callback must bring back.
    pub state: CsrfToken,
    /// The PKCE verifier the token exchange must present.
    pub verifier: PkceCodeVerifier,
    /// The redirect URI, sent again with the exchange (Feishu checks they match: 20071).
    pub redirect_uri: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
}

/// The flat v2 token response.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenSet {
    /// The user access token.
    pub access_token: SecretString,
    /// Present when `offline_access` was granted; single use.
    #[serde(default)]
    pub refresh_token: Option<SecretString>,
    /// Seconds the access token lives.
    pub expires_in: u64,
    /// Seconds the refresh token lives.
    #[serde(default)]
    pub refresh_token_expires_in: Option<u64>,
    /// The scopes granted, space-separated (all the user ever granted the app).
    #[serde(default)]
    pub scope: String,
}

impl TokenSet {
    /// The granted scopes.
    pub fn scopes(&self) -> Vec<String> {
        self.scope.split_whitespace().map(str::to_owned).collect()
    }
}

/// Who signed in (`/authen/v1/user_info`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct UserInfo {
    /// Display name.
    pub name: String,
    /// English name, if set.
    #[serde(default)]
    pub en_name: Option<String>,
    /// Avatar URL.
    #[serde(default)]
    pub avatar_url: Option<String>,
    /// The user's id within this app.
    pub open_id: String,
    /// The user's id across the developer's apps.
    #[serde(default)]
    pub union_id: Option<String>,
    /// The tenant.
    #[serde(default)]
    pub tenant_key: Option<String>,
}

/// What a failed token call means for the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshAction {
    /// A passing server problem (20050, 20072): try again shortly.
    Retry,
    /// The refresh token is gone (invalid, expired, revoked, reused, or refreshing disabled):
    /// the user must sign in again.
    SignInAgain,
    /// The app's settings are wrong (secret, app id, redirect URL): the user must fix them.
    FixSettings,
    /// Anything else.
    Fail,
}

/// A failure of the token endpoint or of `user_info`.
#[derive(Debug, thiserror::Error)]
pub enum FeishuOAuthError {
    /// Feishu answered with an error code.
    #[error("Feishu refused the sign-in request: {description} (code {code}, HTTP {http_status})")]
    Feishu {
        /// HTTP status.
        http_status: u16,
        /// Feishu's numeric code.
        code: i64,
        /// Feishu's `error` (RFC 6749 name).
        error: String,
        /// Feishu's `error_description` or `msg`.
        description: String,
    },
    /// The request did not get an answer.
    #[error("could not reach Feishu at {host}: {message}")]
    Network {
        /// The host.
        host: String,
        /// What failed (never includes a secret).
        message: String,
    },
    /// The answer was not what Feishu documents.
    #[error("Feishu's answer could not be read: {0}")]
    Malformed(String),
}

impl FeishuOAuthError {
    /// The Feishu code, if Feishu gave one.
    pub fn code(&self) -> Option<i64> {
        match self {
            FeishuOAuthError::Feishu { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// What to do about it.
    pub fn action(&self) -> RefreshAction {
        match self {
            FeishuOAuthError::Network { .. } => RefreshAction::Retry,
            FeishuOAuthError::Malformed(_) => RefreshAction::Fail,
            FeishuOAuthError::Feishu { code, .. } => match code {
                20050 | 20072 => RefreshAction::Retry,
                20026 | 20037 | 20064 | 20073 | 20074 | 20003 | 20004 | 20065 | 20005 | 20006 => {
                    RefreshAction::SignInAgain
                }
                20002 | 20024 | 20029 | 20048 | 20069 | 20070 | 20071 => RefreshAction::FixSettings,
                _ => RefreshAction::Fail,
            },
        }
    }
}

/// Talks to Feishu's OAuth endpoints for one app.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    endpoints: Endpoints,
    credentials: AppCredentials,
    http: reqwest::Client,
}

impl OAuthClient {
    /// A client for this app at these endpoints.
    pub fn new(
        endpoints: Endpoints,
        credentials: AppCredentials,
    ) -> Result<Self, FeishuOAuthError> {
        let http = secret_client().map_err(|e| {
            FeishuOAuthError::Malformed(format!("cannot build the HTTP client: {e}"))
        })?;
        Ok(OAuthClient {
            endpoints,
            credentials,
            http,
        })
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The App ID.
    pub fn app_id(&self) -> &str {
        &self.credentials.app_id
    }

    /// The app's credentials (for the crate's other token calls).
    pub(crate) fn credentials(&self) -> &AppCredentials {
        &self.credentials
    }

    /// The HTTP client token calls use: no redirects followed.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A sign-in request for `scopes` (plus `offline_access`), redirecting to `redirect_uri`.
    pub fn begin_sign_in(
        &self,
        scopes: &[String],
        redirect_uri: &str,
    ) -> Result<SignInRequest, FeishuOAuthError> {
        let mut wanted: Vec<String> = Vec::new();
        for scope in scopes.iter().map(String::as_str).chain([OFFLINE_ACCESS]) {
            if !scope.is_empty() && !wanted.iter().any(|w| w == scope) {
                wanted.push(scope.to_owned());
            }
        }
        if wanted.len() > MAX_SCOPES_PER_REQUEST {
            return Err(FeishuOAuthError::Malformed(format!(
                "{} scopes requested; Feishu accepts at most {MAX_SCOPES_PER_REQUEST} per sign-in",
                wanted.len()
            )));
        }
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| {
            FeishuOAuthError::Malformed(format!("invalid redirect URI {redirect_uri}: {e}"))
        })?;
        let client = BasicClient::new(ClientId::new(self.credentials.app_id.clone()))
            .set_auth_uri(AuthUrl::from_url(self.endpoints.authorize_url()))
            .set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state) = client
            .authorize_url(CsrfToken::new_random)
            .add_scopes(wanted.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .url();
        Ok(SignInRequest {
            url,
            state,
            verifier,
            redirect_uri: redirect_uri.to_owned(),
            scopes: wanted,
        })
    }

    /// Exchanges an authorization code for tokens.
    pub async fn exchange_code(
        &self,
        code: &str,
        verifier: &PkceCodeVerifier,
        redirect_uri: &str,
    ) -> Result<TokenSet, FeishuOAuthError> {
        self.token_call(json!({
            "grant_type": "authorization_code",
            "client_id": self.credentials.app_id,
            "client_secret": self.credentials.app_secret.expose_secret(),
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier.secret(),
        }))
        .await
    }

    /// Uses a refresh token (single use: the answer carries its replacement).
    pub async fn refresh(
        &self,
        refresh_token: &SecretString,
    ) -> Result<TokenSet, FeishuOAuthError> {
        self.token_call(json!({
            "grant_type": "refresh_token",
            "client_id": self.credentials.app_id,
            "client_secret": self.credentials.app_secret.expose_secret(),
            "refresh_token": refresh_token.expose_secret(),
        }))
        .await
    }

    fn network_error(&self, url: &Url, err: &reqwest::Error) -> FeishuOAuthError {
        // reqwest's Display may include the URL, never the body; keep only the kind of failure.
        let message = if err.is_timeout() {
            "timed out".to_owned()
        } else if err.is_connect() {
            "connection failed".to_owned()
        } else {
            "request failed".to_owned()
        };
        FeishuOAuthError::Network {
            host: url.host_str().unwrap_or("?").to_owned(),
            message,
        }
    }

    async fn token_call(&self, body: Value) -> Result<TokenSet, FeishuOAuthError> {
        let url = self.endpoints.token_url();
        let response = self
            .http
            .post(url.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| self.network_error(&url, &e))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| self.network_error(&url, &e))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            FeishuOAuthError::Malformed(format!("HTTP {status} with a body that is not JSON"))
        })?;
        let code = value
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(if status < 400 { 0 } else { -1 });
        if code != 0 || status >= 400 {
            return Err(feishu_error(status, code, &value));
        }
        serde_json::from_value(value).map_err(|e| {
            FeishuOAuthError::Malformed(format!("the token response lacks a field: {e}"))
        })
    }

    /// Who holds this token.
    pub async fn user_info(
        &self,
        access_token: &SecretString,
    ) -> Result<UserInfo, FeishuOAuthError> {
        let url = self.endpoints.user_info_url();
        let response = self
            .http
            .get(url.clone())
            .bearer_auth(access_token.expose_secret())
            .send()
            .await
            .map_err(|e| self.network_error(&url, &e))?;
        let status = response.status().as_u16();
        let value: Value = response.json().await.map_err(|_| {
            FeishuOAuthError::Malformed(format!(
                "user_info: HTTP {status} with a body that is not JSON"
            ))
        })?;
        let code = value.get("code").and_then(Value::as_i64).unwrap_or(-1);
        if code != 0 {
            return Err(feishu_error(status, code, &value));
        }
        serde_json::from_value(value.get("data").cloned().unwrap_or(Value::Null))
            .map_err(|e| FeishuOAuthError::Malformed(format!("user_info lacks a field: {e}")))
    }
}

/// The HTTP client for requests that carry a secret or answer one (token calls, device flows,
/// app registration): it follows no redirect, since an endpoint that redirects is not one to
/// send secrets to, and it gives up rather than hang.
pub(crate) fn secret_client() -> Result<reqwest::Client, reqwest::Error> {
    install_crypto_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .build()
}

/// reqwest is built without a default TLS provider (no OpenSSL, no aws-lc build); the process
/// gets ring's. Installing twice is harmless: the first one stays.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn feishu_error(http_status: u16, code: i64, body: &Value) -> FeishuOAuthError {
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
    FeishuOAuthError::Feishu {
        http_status,
        code,
        error: text("error").unwrap_or_default(),
        description: text("error_description")
            .or_else(|| text("msg"))
            .unwrap_or_else(|| "no description".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OAuthClient {
        let endpoints =
            Endpoints::single(Url::parse("http://127.0.0.1:9/").unwrap_or_else(|_| unreachable!()));
        OAuthClient::new(
            endpoints,
            AppCredentials {
                app_id: "cli_test".into(),
                app_secret: SecretString::from("s3cret".to_owned()),
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_authorize_url_carries_pkce_s256_state_and_offline_access_once() {
        let request = client()
            .begin_sign_in(
                &["calendar:calendar".into(), "offline_access".into()],
                "http://127.0.0.1:9768/callback",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let pairs: std::collections::HashMap<_, _> =
            request.url.query_pairs().into_owned().collect();
        assert_eq!(request.url.path(), "/open-apis/authen/v1/authorize");
        assert_eq!(pairs["client_id"], "cli_test");
        assert_eq!(pairs["response_type"], "code");
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(pairs["redirect_uri"], "http://127.0.0.1:9768/callback");
        assert_eq!(pairs["scope"], "calendar:calendar offline_access");
        assert_eq!(pairs["state"], request.state.secret().as_str());
        assert!(request.state.secret().len() >= 16);
        assert!(
            !pairs.contains_key("client_secret"),
            "the secret never goes in a URL"
        );
        // Two sign-ins never share a state or a verifier.
        let other = client()
            .begin_sign_in(&[], "http://127.0.0.1:9768/callback")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(other.state.secret(), request.state.secret());
        assert_ne!(other.verifier.secret(), request.verifier.secret());
    }

    #[test]
    fn too_many_scopes_are_refused_before_feishu_sees_them() {
        let scopes: Vec<String> = (0..60).map(|i| format!("scope:{i}")).collect();
        assert!(
            client()
                .begin_sign_in(&scopes, "http://127.0.0.1:9768/callback")
                .is_err()
        );
    }

    #[test]
    fn error_codes_decide_what_happens() {
        let err = |code| FeishuOAuthError::Feishu {
            http_status: 400,
            code,
            error: String::new(),
            description: String::new(),
        };
        for code in [20050, 20072] {
            assert_eq!(err(code).action(), RefreshAction::Retry);
        }
        for code in [20026, 20037, 20064, 20073, 20074] {
            assert_eq!(err(code).action(), RefreshAction::SignInAgain, "{code}");
        }
        assert_eq!(err(20070).action(), RefreshAction::FixSettings);
        assert_eq!(err(20071).action(), RefreshAction::FixSettings);
        assert_eq!(err(20067).action(), RefreshAction::Fail);
    }
}
