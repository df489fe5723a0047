//! The app's bot: what the app does as itself rather than as the signed-in user. It sends the
//! user interactive cards (approvals waiting in the app) and updates them once decided.
//!
//! The bot calls carry a *tenant access token*, obtained with the App ID and Secret
//! (`auth/v3/tenant_access_token/internal`). Feishu gives it for two hours and hands out a new one
//! when less than 30 minutes remain, so the client keeps one and asks again inside that window,
//! one request at a time. The token is never logged: it lives in a [`SecretString`].

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::api::{Answer, ApiError, decode_answer};
use crate::config::{AppCredentials, Endpoints};
use crate::ids::{ApiPath, IdKind};

/// Ask for a new tenant token when less than this remains (Feishu renews within 30 minutes of
/// expiry, and gives back the same token before that).
pub const TENANT_TOKEN_MARGIN: Duration = Duration::from_secs(30 * 60);

/// Feishu's code for an invalid or expired tenant access token.
const TOKEN_INVALID: [i64; 2] = [99991663, 99991661];

/// What `bot/v3/info` says about the app's bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotInfo {
    /// The bot's name (the app's name).
    pub app_name: String,
    /// The bot's open_id.
    pub open_id: String,
    /// `2`: the bot is activated (the app is published with the bot capability).
    pub activate_status: i64,
}

struct CachedToken {
    token: SecretString,
    /// When to ask again (already inside the renewal window).
    renew_at: std::time::Instant,
}

/// Talks to Feishu as the app's bot.
#[derive(Clone)]
pub struct BotClient {
    endpoints: Endpoints,
    credentials: AppCredentials,
    http: reqwest::Client,
    token: Arc<Mutex<Option<CachedToken>>>,
}

impl std::fmt::Debug for BotClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotClient")
            .field("open", &self.endpoints.open.as_str())
            .field("app_id", &self.credentials.app_id)
            .finish_non_exhaustive()
    }
}

impl BotClient {
    /// A bot client for the app with these credentials.
    pub fn new(endpoints: Endpoints, credentials: AppCredentials) -> Result<Self, ApiError> {
        crate::oauth::install_crypto_provider();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| ApiError::Malformed(format!("cannot build the HTTP client: {e}")))?;
        Ok(BotClient {
            endpoints,
            credentials,
            http,
            token: Arc::default(),
        })
    }

    /// The hosts it talks to.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The App ID.
    pub fn app_id(&self) -> &str {
        &self.credentials.app_id
    }

    /// The app's credentials (for the long connection, which presents them itself).
    pub fn credentials(&self) -> &AppCredentials {
        &self.credentials
    }

    /// A tenant access token, from the cache unless it is inside its renewal window.
    pub async fn tenant_token(&self) -> Result<SecretString, ApiError> {
        let mut cached = self.token.lock().await;
        if let Some(c) = cached.as_ref()
            && std::time::Instant::now() < c.renew_at
        {
            return Ok(c.token.clone());
        }
        let url = self
            .endpoints
            .api(&ApiPath::new("auth/v3/tenant_access_token/internal"));
        let body = json!({
            "app_id": self.credentials.app_id,
            "app_secret": self.credentials.app_secret.expose_secret(),
        });
        let response = self
            .http
            .post(url)
            .json(&body)
            .send()
            .await
            .map_err(|e| network(&e))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|_| ApiError::Network("the answer was cut off".into()))?;
        let value = top_level(status, &text)?;
        let token = value
            .get("tenant_access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Malformed("no tenant_access_token in the answer".into()))?;
        let expire = value.get("expire").and_then(Value::as_u64).unwrap_or(7200);
        let lifetime = Duration::from_secs(expire);
        let token = SecretString::from(token.to_owned());
        *cached = Some(CachedToken {
            token: token.clone(),
            renew_at: std::time::Instant::now() + lifetime.saturating_sub(TENANT_TOKEN_MARGIN),
        });
        Ok(token)
    }

    /// Forgets the cached token (Feishu refused it).
    async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    /// The bot's details (`bot/v3/info`): fails when the app has no bot capability.
    pub async fn info(&self) -> Result<BotInfo, ApiError> {
        let value = self
            .send(Method::GET, &ApiPath::new("bot/v3/info"), &[], None, true)
            .await?;
        let bot = value
            .get("bot")
            .ok_or_else(|| ApiError::Malformed("no bot in the answer".into()))?;
        let text = |key: &str| {
            bot.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(BotInfo {
            app_name: text("app_name"),
            open_id: text("open_id"),
            activate_status: bot
                .get("activate_status")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
        })
    }

    /// Sends `card` (card JSON 2.0) to the person `open_id` as the bot; returns the message id.
    /// `uuid` makes a repeat within Feishu's one-hour window a no-op, so a send whose answer was
    /// lost may be tried again without a second card.
    pub async fn send_card(
        &self,
        open_id: &str,
        card: &Value,
        uuid: &str,
    ) -> Result<String, ApiError> {
        // The open_id comes from Feishu's own sign-in answer and goes in the body, never the
        // path: not checked against the shape of ids the model passes.
        let body = json!({
            "receive_id": open_id,
            "msg_type": "interactive",
            "content": card.to_string(),
            "uuid": uuid,
        });
        let value = self
            .send(
                Method::POST,
                &ApiPath::new("im/v1/messages"),
                &[("receive_id_type", "open_id".to_owned())],
                Some(&body),
                true,
            )
            .await?;
        value
            .pointer("/data/message_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Malformed("no message_id in the answer".into()))
    }

    /// Whether the app may send messages as its bot, without sending one: a message to nobody
    /// is refused for a missing scope first ([`ApiError::ScopeNotEnabled`]) and otherwise for
    /// its missing receiver, which answers `Ok`.
    pub async fn probe_send_scope(&self) -> Result<(), ApiError> {
        // Credentials that fail fail here, not as a refused message.
        self.tenant_token().await?;
        let body = json!({"receive_id": "", "msg_type": "text", "content": "{}"});
        match self
            .send(
                Method::POST,
                &ApiPath::new("im/v1/messages"),
                &[("receive_id_type", "open_id".to_owned())],
                Some(&body),
                true,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(ApiError::Feishu { code, .. }) if !TOKEN_INVALID.contains(&code) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the content of a card the bot sent (`PATCH im/v1/messages/:message_id`).
    pub async fn update_card(&self, message_id: &str, card: &Value) -> Result<(), ApiError> {
        let path = ApiPath::new("im/v1/messages").id(IdKind::Message, "message_id", message_id)?;
        let body = json!({ "content": card.to_string() });
        self.send(Method::PATCH, &path, &[], Some(&body), true)
            .await?;
        Ok(())
    }

    /// One call with the tenant token; a refused token is renewed once. Answers the whole
    /// envelope (some bot APIs put their answer beside `data`).
    async fn send(
        &self,
        method: Method,
        path: &ApiPath,
        query: &[(&str, String)],
        body: Option<&Value>,
        retry_token: bool,
    ) -> Result<Value, ApiError> {
        let token = self.tenant_token().await?;
        let mut request = self
            .http
            .request(method.clone(), self.endpoints.api(path))
            .bearer_auth(token.expose_secret())
            .query(query);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| network(&e))?;
        let status = response.status().as_u16();
        let log_id = response
            .headers()
            .get("x-tt-logid")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let reset = response
            .headers()
            .get("x-ogw-ratelimit-reset")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response
            .text()
            .await
            .map_err(|_| ApiError::Network("the answer was cut off".into()))?;
        match decode_answer(status, reset.as_deref(), log_id, &text) {
            Answer::Data(_) => serde_json::from_str(&text)
                .map_err(|_| ApiError::Malformed("the answer is not JSON".into())),
            Answer::Failed(ApiError::Feishu { code, .. })
                if retry_token && TOKEN_INVALID.contains(&code) =>
            {
                self.forget_token().await;
                Box::pin(self.send(method, path, query, body, false)).await
            }
            Answer::Failed(e) | Answer::TokenRejected(e) => Err(e),
            Answer::RateLimited { reset } => Err(ApiError::RateLimited { reset }),
            Answer::ServerError => Err(ApiError::Server {
                http_status: status,
                attempts: 1,
                log_id: None,
            }),
        }
    }
}

fn network(e: &reqwest::Error) -> ApiError {
    ApiError::Network(if e.is_timeout() {
        "timed out".into()
    } else {
        "connection failed".into()
    })
}

/// Reads an answer whose fields sit beside `code` (the token endpoints), checking `code`.
fn top_level(status: u16, text: &str) -> Result<Value, ApiError> {
    if status >= 500 {
        return Err(ApiError::Server {
            http_status: status,
            attempts: 1,
            log_id: None,
        });
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|_| ApiError::Malformed(format!("HTTP {status} with a body that is not JSON")))?;
    match value.get("code").and_then(Value::as_i64) {
        Some(0) => Ok(value),
        code => Err(ApiError::Feishu {
            http_status: status,
            code: code.unwrap_or(-1),
            msg: value
                .get("msg")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_owned(),
            log_id: None,
            body: Box::new(value),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_answer_with_an_error_code_is_feishus_error() {
        let err = top_level(200, r#"{"code":10014,"msg":"app secret invalid"}"#)
            .err()
            .map(|e| e.code());
        assert_eq!(err, Some(Some(10014)));
        assert!(top_level(200, r#"{"code":0,"tenant_access_token":"t","expire":7200}"#).is_ok());
        assert!(matches!(
            top_level(502, "bad gateway"),
            Err(ApiError::Server { .. })
        ));
        assert!(matches!(
            top_level(200, "<html>"),
            Err(ApiError::Malformed(_))
        ));
    }
}
