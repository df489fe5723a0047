//! Signing in without a redirect URL: the device authorization grant (RFC 8628) as Feishu's own
//! command-line tool uses it, for the user's token; the same polling drives app
//! self-registration ([`crate::registration`]).
//!
//! Terms. A *device code* is the secret the app polls with; the *user code* is the short code
//! the verification page shows; the *verification page* is where the user confirms, on the phone
//! (a QR code of the page) or in the app's sign-in window. Polling waits `interval` between
//! polls, adds 5 s on `slow_down` (and 1 s after a network failure, as the official tool does),
//! and ends on `access_denied`, `expired_token`/`invalid_grant`, or the code's lifetime. The
//! token answer is the same flat v2 JSON as the code grant's, so what follows a device sign-in
//! (saving, refreshing) is exactly what follows a loopback one. No redirect URL means no 20029.

use std::future::Future;
use std::time::Duration;

use base64::Engine as _;
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;
use url::Url;

use crate::oauth::{OAuthClient, OFFLINE_ACCESS, TokenSet};

/// The grant type of a device-code token request.
pub const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Added to the interval on `slow_down` (RFC 8628 §3.5).
const SLOW_DOWN_STEP: Duration = Duration::from_secs(5);
/// Added to the interval after a poll that got no answer.
const NETWORK_STEP: Duration = Duration::from_secs(1);
/// The interval never grows past this.
const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// What Feishu's own tool assumes when an answer leaves these out.
const DEFAULT_INTERVAL_SECS: u64 = 5;

/// A device code to poll with, and what the user is shown.
#[derive(Debug, Clone)]
pub struct DeviceCode {
    /// Polled with; never shown or logged.
    pub device_code: SecretString,
    /// The short code on the verification page.
    pub user_code: String,
    /// The verification page.
    pub verification_uri: String,
    /// The verification page with the user code filled in: what the QR code holds.
    pub verification_uri_complete: String,
    /// How long the code lives.
    pub expires_in: Duration,
    /// How long to wait between polls.
    pub interval: Duration,
}

/// One poll's answer.
#[derive(Debug)]
pub enum Poll<T> {
    /// Nobody has confirmed yet.
    Pending,
    /// Polled too often: wait longer.
    SlowDown,
    /// Confirmed.
    Done(T),
}

/// Why a device flow ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceFlowError {
    /// The user pressed Cancel (or Deny) on the verification page.
    #[error("the request was declined on Feishu's page")]
    Denied,
    /// The code ran out before anyone confirmed.
    #[error("the code expired before it was confirmed")]
    Expired,
    /// Feishu could not be reached.
    #[error("could not reach Feishu at {host}: {message}")]
    Offline {
        /// The host.
        host: String,
        /// What failed (never a secret).
        message: String,
    },
    /// Feishu refused the request.
    #[error("Feishu refused the request: {description} ({error})")]
    Refused {
        /// The RFC 6749 error name, or Feishu's numeric code.
        error: String,
        /// Feishu's words.
        description: String,
    },
    /// The answer was not what Feishu's tool reads.
    #[error("Feishu's answer could not be read: {0}")]
    Malformed(String),
}

/// Polls until `poll` answers [`Poll::Done`], the code's lifetime passes, or the flow ends.
/// A network failure is retried after a longer wait; if the lifetime passes while Feishu cannot
/// be reached, that (not "expired") is the answer, so the user is told the real reason.
pub async fn poll_until<T, F, Fut>(
    interval: Duration,
    expires_in: Duration,
    mut poll: F,
) -> Result<T, DeviceFlowError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, DeviceFlowError>>,
{
    let deadline = tokio::time::Instant::now() + expires_in;
    let mut interval = interval;
    let mut offline: Option<DeviceFlowError> = None;
    loop {
        let next = tokio::time::Instant::now() + interval;
        if next > deadline {
            tokio::time::sleep_until(deadline).await;
            return Err(offline.unwrap_or(DeviceFlowError::Expired));
        }
        tokio::time::sleep_until(next).await;
        match poll().await {
            Ok(Poll::Done(value)) => return Ok(value),
            Ok(Poll::Pending) => offline = None,
            Ok(Poll::SlowDown) => {
                offline = None;
                interval = (interval + SLOW_DOWN_STEP).min(MAX_INTERVAL);
            }
            Err(e @ DeviceFlowError::Offline { .. }) => {
                tracing::warn!(error = %e, "a device-flow poll got no answer; polling on");
                offline = Some(e);
                interval = (interval + NETWORK_STEP).min(MAX_INTERVAL);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads a poll's JSON the way Feishu's tool does: success when `error` is absent and `done_key`
/// is present; otherwise the `error` names the state.
pub(crate) fn read_poll(value: &Value, done_key: &str) -> Result<Poll<()>, DeviceFlowError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let error = text("error");
    if error.is_empty() && !text(done_key).is_empty() {
        return Ok(Poll::Done(()));
    }
    match error {
        "authorization_pending" => Ok(Poll::Pending),
        "slow_down" => Ok(Poll::SlowDown),
        "access_denied" => Err(DeviceFlowError::Denied),
        "expired_token" | "invalid_grant" => Err(DeviceFlowError::Expired),
        _ => Err(refused(value)),
    }
}

/// A refusal in Feishu's words: `error_description`, `error`, or the v2 endpoint's `code`/`msg`.
pub(crate) fn refused(value: &Value) -> DeviceFlowError {
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let error = text("error")
        .or_else(|| value.get("code").map(Value::to_string))
        .unwrap_or_else(|| "unknown".to_owned());
    let description = text("error_description")
        .or_else(|| text("msg"))
        .unwrap_or_else(|| "no description".to_owned());
    DeviceFlowError::Refused { error, description }
}

/// A device-code answer (`device_authorization`, or registration's `begin`): the fields, with
/// Feishu's tool's fallbacks (240 s lifetime here, 300 s for registration; 5 s interval).
pub(crate) fn read_device_code(
    value: &Value,
    default_lifetime_secs: u64,
    complete: impl FnOnce(&str) -> String,
) -> Result<DeviceCode, DeviceFlowError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let secs =
        |key: &str, fallback: u64| value.get(key).and_then(Value::as_u64).unwrap_or(fallback);
    let device_code = text("device_code");
    let user_code = text("user_code");
    if device_code.is_empty() || user_code.is_empty() {
        return Err(DeviceFlowError::Malformed(
            "no device_code or user_code in the answer".to_owned(),
        ));
    }
    let verification_uri = text("verification_uri").to_owned();
    let given = text("verification_uri_complete");
    let verification_uri_complete = if given.is_empty() {
        complete(user_code)
    } else {
        given.to_owned()
    };
    // A page that is not http(s) would be opened in the sign-in window or shown as a QR code.
    let parsed = Url::parse(&verification_uri_complete)
        .map_err(|_| DeviceFlowError::Malformed("the verification page is not a URL".to_owned()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(DeviceFlowError::Malformed(
            "the verification page is not a web page".to_owned(),
        ));
    }
    Ok(DeviceCode {
        device_code: SecretString::from(device_code.to_owned()),
        user_code: user_code.to_owned(),
        verification_uri,
        verification_uri_complete,
        expires_in: Duration::from_secs(secs("expires_in", default_lifetime_secs).max(1)),
        interval: Duration::from_secs(secs("interval", DEFAULT_INTERVAL_SECS).max(1)),
    })
}

/// Posts a form and reads the JSON answer, whatever its status (the device endpoints answer
/// their states with HTTP 400).
pub(crate) async fn post_form(
    http: &reqwest::Client,
    url: &Url,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Result<(u16, Value), DeviceFlowError> {
    let mut request = http.post(url.clone()).form(form);
    if let Some((user, password)) = basic {
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request = request.header(reqwest::header::AUTHORIZATION, format!("Basic {pair}"));
    }
    let offline = |e: reqwest::Error| DeviceFlowError::Offline {
        host: url.host_str().unwrap_or("?").to_owned(),
        message: if e.is_timeout() {
            "timed out".to_owned()
        } else if e.is_connect() {
            "connection failed".to_owned()
        } else {
            "request failed".to_owned()
        },
    };
    let response = request.send().await.map_err(offline)?;
    let status = response.status().as_u16();
    let text = response.text().await.map_err(offline)?;
    let value = serde_json::from_str(&text).map_err(|_| {
        DeviceFlowError::Malformed(format!("HTTP {status} with a body that is not JSON"))
    })?;
    Ok((status, value))
}

impl OAuthClient {
    /// Asks for a device code for `scopes` (plus `offline_access`, for a refresh token).
    pub async fn request_device_code(
        &self,
        scopes: &[String],
    ) -> Result<DeviceCode, DeviceFlowError> {
        let mut wanted: Vec<&str> = Vec::new();
        for scope in scopes.iter().map(String::as_str).chain([OFFLINE_ACCESS]) {
            if !scope.is_empty() && !wanted.contains(&scope) {
                wanted.push(scope);
            }
        }
        let scope = wanted.join(" ");
        let credentials = self.credentials();
        let (status, value) = post_form(
            self.http(),
            &self.endpoints().device_authorization_url(),
            &[
                ("client_id", credentials.app_id.as_str()),
                ("scope", scope.as_str()),
            ],
            Some((
                credentials.app_id.as_str(),
                credentials.app_secret.expose_secret(),
            )),
        )
        .await?;
        if status >= 400 || value.get("error").is_some() {
            return Err(refused(&value));
        }
        let fallback = value
            .get("verification_uri")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        read_device_code(&value, 240, |_| fallback)
    }

    /// Polls the token endpoint once with a device code.
    pub async fn poll_device_token(
        &self,
        device_code: &SecretString,
    ) -> Result<Poll<TokenSet>, DeviceFlowError> {
        let credentials = self.credentials();
        let (_, value) = post_form(
            self.http(),
            &self.endpoints().token_url(),
            &[
                ("grant_type", DEVICE_CODE_GRANT),
                ("device_code", device_code.expose_secret()),
                ("client_id", credentials.app_id.as_str()),
                ("client_secret", credentials.app_secret.expose_secret()),
            ],
            None,
        )
        .await?;
        match read_poll(&value, "access_token")? {
            Poll::Pending => Ok(Poll::Pending),
            Poll::SlowDown => Ok(Poll::SlowDown),
            Poll::Done(()) => serde_json::from_value(value)
                .map(Poll::Done)
                .map_err(|e| DeviceFlowError::Malformed(format!("the token answer lacks {e}"))),
        }
    }

    /// Polls with `code` until the user confirms (or the flow ends).
    pub async fn wait_for_device_token(
        &self,
        code: &DeviceCode,
    ) -> Result<TokenSet, DeviceFlowError> {
        poll_until(code.interval, code.expires_in, || {
            self.poll_device_token(&code.device_code)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[test]
    fn a_poll_reads_as_the_official_tool_reads_it() {
        let read = |v: Value| read_poll(&v, "access_token");
        assert!(matches!(
            read(json!({"access_token": "eyJ"})),
            Ok(Poll::Done(()))
        ));
        assert!(matches!(
            read(json!({"error": "authorization_pending"})),
            Ok(Poll::Pending)
        ));
        assert!(matches!(
            read(json!({"error": "slow_down"})),
            Ok(Poll::SlowDown)
        ));
        assert_eq!(
            read(json!({"error": "access_denied"})).err(),
            Some(DeviceFlowError::Denied)
        );
        for expired in ["expired_token", "invalid_grant"] {
            assert_eq!(
                read(json!({"error": expired})).err(),
                Some(DeviceFlowError::Expired)
            );
        }
        // An error beside a token is still an error (the tool checks `error` first).
        assert!(matches!(
            read(json!({"error": "invalid_client", "access_token": "x"})),
            Err(DeviceFlowError::Refused { .. })
        ));
        assert!(matches!(
            read(json!({"code": 20002, "msg": "bad secret"})),
            Err(DeviceFlowError::Refused { ref error, .. }) if error == "20002"
        ));
    }

    #[test]
    fn a_device_code_takes_the_tools_fallbacks_and_refuses_a_page_that_is_not_a_web_page() {
        let code = read_device_code(
            &json!({"device_code": "d", "user_code": "ABCD-EFGH", "verification_uri": "https://x/verify"}),
            240,
            |u| format!("https://x/verify?user_code={u}"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code.expires_in, Duration::from_secs(240));
        assert_eq!(code.interval, Duration::from_secs(5));
        assert_eq!(
            code.verification_uri_complete,
            "https://x/verify?user_code=ABCD-EFGH"
        );
        let bad = read_device_code(
            &json!({"device_code": "d", "user_code": "u", "verification_uri_complete": "javascript:alert(1)"}),
            240,
            |_| String::new(),
        );
        assert!(matches!(bad, Err(DeviceFlowError::Malformed(_))));
        assert!(matches!(
            read_device_code(&json!({"user_code": "u"}), 240, |_| String::new()),
            Err(DeviceFlowError::Malformed(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn slow_down_adds_five_seconds_and_the_lifetime_ends_the_wait() {
        let times = Mutex::new(Vec::new());
        let start = tokio::time::Instant::now();
        let answers = Mutex::new(vec![Poll::Pending, Poll::SlowDown, Poll::Pending]);
        let result: Result<(), _> =
            poll_until(Duration::from_secs(2), Duration::from_secs(20), || {
                times
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(start.elapsed().as_secs());
                let next = answers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop()
                    .unwrap_or(Poll::Pending);
                async move { Ok(next) }
            })
            .await;
        assert_eq!(result.err(), Some(DeviceFlowError::Expired));
        // Polls at 2, then slow_down (popped second) widens to 7 s: 4, 11, 18; 25 would pass 20.
        assert_eq!(
            *times.lock().unwrap_or_else(|e| e.into_inner()),
            vec![2, 4, 11, 18]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_spent_offline_says_offline_not_expired() {
        let result: Result<(), _> =
            poll_until(Duration::from_secs(1), Duration::from_secs(5), || async {
                Err(DeviceFlowError::Offline {
                    host: "accounts.feishu.cn".into(),
                    message: "connection failed".into(),
                })
            })
            .await;
        assert!(matches!(result, Err(DeviceFlowError::Offline { .. })));
        let denied: Result<(), _> =
            poll_until(Duration::from_secs(1), Duration::from_secs(5), || async {
                Err(DeviceFlowError::Denied)
            })
            .await;
        assert_eq!(denied.err(), Some(DeviceFlowError::Denied));
    }
}
