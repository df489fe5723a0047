//! What the two device-code flows share (app self-registration in [`super::registration`] and
//! the device authorization grant in [`super::device`]), as RFC 8628 describes them: a long
//! `device_code` the client polls with and a short `user_code` a person types; a lifetime
//! (`expires_in`) and a polling interval, which grows by 5 s each time a client polls too soon
//! (`slow_down`); the OAuth-style error answers `{"error","error_description"}`; and the
//! timing tests shorten so that they do not wait 5 s per poll.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::{EmulatorState, FeishuEmulator, Shared, User};

/// RFC 8628 §3.5: "the interval MUST be increased by 5 seconds for this and all subsequent
/// requests" after a `slow_down`.
pub(crate) const SLOW_DOWN_STEP_MS: i64 = 5_000;

/// The interval and lifetime of codes issued from now on, for both flows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Seconds a client must wait between two polls of one code (lark-cli's fallback: 5).
    pub(crate) interval_secs: u64,
    /// Seconds a code lives; `None` for each flow's own default (300 registration, 240 device).
    pub(crate) expires_in_secs: Option<u64>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            interval_secs: 5,
            expires_in_secs: None,
        }
    }
}

/// Why a poll is refused before its code's state is even looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `expires_in` has passed: `expired_token`.
    Expired,
    /// Polled sooner than the interval after the previous poll: `slow_down`.
    SlowDown,
}

/// One code's lifetime and polling pace.
#[derive(Debug, Clone)]
pub(crate) struct PollClock {
    pub(crate) issued_at: i64,
    pub(crate) expires_in_secs: u64,
    interval_ms: i64,
    last_poll: Option<i64>,
}

impl PollClock {
    pub(crate) fn new(now: i64, expires_in_secs: u64, interval_secs: u64) -> PollClock {
        PollClock {
            issued_at: now,
            expires_in_secs,
            interval_ms: secs_to_ms(interval_secs),
            last_poll: None,
        }
    }

    pub(crate) fn expires_at(&self) -> i64 {
        self.issued_at
            .saturating_add(secs_to_ms(self.expires_in_secs))
    }

    pub(crate) fn expired(&self, now: i64) -> bool {
        now >= self.expires_at()
    }

    /// The current interval, in whole seconds (rounded up).
    #[cfg(test)]
    pub(crate) fn interval_secs(&self) -> u64 {
        u64::try_from(self.interval_ms.saturating_add(999) / 1000).unwrap_or(u64::MAX)
    }

    /// Records a poll at `now`. Every poll counts as "the previous poll" for the next one, a
    /// refused one too: a client that keeps hammering keeps being told to slow down.
    pub(crate) fn poll(&mut self, now: i64) -> Result<(), Refusal> {
        if self.expired(now) {
            return Err(Refusal::Expired);
        }
        let too_soon = self
            .last_poll
            .is_some_and(|last| now.saturating_sub(last) < self.interval_ms);
        self.last_poll = Some(now);
        if too_soon {
            self.interval_ms = self.interval_ms.saturating_add(SLOW_DOWN_STEP_MS);
            return Err(Refusal::SlowDown);
        }
        Ok(())
    }
}

fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// An OAuth error answer: `{"error","error_description"}`, the keys lark-cli reads.
pub(crate) fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

/// The answer for a refused poll.
pub(crate) fn refusal_answer(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Expired => oauth_error(
            StatusCode::BAD_REQUEST,
            "expired_token",
            "the device code has expired; start again",
        ),
        Refusal::SlowDown => oauth_error(
            StatusCode::BAD_REQUEST,
            "slow_down",
            "polling too often; the interval is now 5 seconds longer",
        ),
    }
}

/// RFC 8628 §6.1's advice for user codes: letters only, no vowels (no words), no look-alikes,
/// eight of them in two groups: 20^8 ≈ 2.6e10 codes, plenty for a few minutes' lifetime.
const USER_CODE_ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

/// A fresh user code, `ABCD-EFGH`.
pub(crate) fn user_code() -> String {
    let mut out = String::with_capacity(9);
    for (i, byte) in uuid::Uuid::new_v4().as_bytes().iter().take(8).enumerate() {
        if i == 4 {
            out.push('-');
        }
        out.push(char::from(
            USER_CODE_ALPHABET[usize::from(*byte) % USER_CODE_ALPHABET.len()],
        ));
    }
    out
}

/// A user code as a person may type it (lower case, without the dash, with spaces) in the form
/// the emulator issued it: upper case, `ABCD-EFGH`.
pub(crate) fn normalize_user_code(typed: &str) -> String {
    let letters: String = typed
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 {
        format!("{}-{}", &letters[..4], &letters[4..])
    } else {
        letters
    }
}

/// A fresh device code: long and random, only ever seen by the client.
pub(crate) fn device_code() -> String {
    super::oauth::random_token("", 64)
}

/// Why a person's decision on a user code was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecideError {
    /// No code like it was ever issued.
    #[error("no request has the user code {0}")]
    Unknown(String),
    /// Its lifetime has passed.
    #[error("the user code {0} has expired")]
    Expired(String),
    /// Already allowed or denied.
    #[error("the user code {0} was already decided")]
    Decided(String),
    /// The `open_id` deciding is nobody in the tenant.
    #[error("{0}")]
    NoSuchPerson(String),
}

/// A test hook's refusal: `{"error": …}` with `status`.
pub(crate) fn hook_error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({"error": message}))).into_response()
}

/// A hook's JSON body and its `decision` (`allow` or `deny`, nothing else), or why not.
pub(crate) fn hook_decision<T: serde::de::DeserializeOwned>(
    body: &[u8],
    decision: impl FnOnce(&T) -> &str,
) -> Result<(T, bool), String> {
    let body: T = serde_json::from_slice(body).map_err(|e| format!("not a decision: {e}"))?;
    let allow = match decision(&body) {
        "allow" => true,
        "deny" => false,
        other => return Err(format!("decision must be allow or deny, not {other:?}")),
    };
    Ok((body, allow))
}

/// A hook's answer to a refused decision: 404 for a code never issued, 400 otherwise.
pub(crate) fn hook_refusal(error: &DecideError) -> Response {
    let status = match error {
        DecideError::Unknown(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    };
    hook_error(status, error.to_string())
}

/// Makes the person `open_id` the signed-in user, the one later sign-ins sign in as (the
/// emulator serves one user at a time); `None` keeps the current one. Answers who it is.
pub(crate) fn sign_in_as(state: &mut EmulatorState, open_id: Option<&str>) -> Result<User, String> {
    let Some(open_id) = open_id.filter(|id| *id != state.user.open_id) else {
        return Ok(state.user.clone());
    };
    let person = state
        .api
        .tenant
        .person(open_id)
        .ok_or_else(|| format!("no person {open_id} in the tenant"))?;
    let user = User {
        name: person.name.clone(),
        en_name: person.en_name.clone(),
        open_id: person.open_id.clone(),
        union_id: person.union_id.clone(),
        avatar_url: person.avatar("640x640"),
    };
    state.user = user.clone();
    Ok(user)
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new().route("/_emulator/device_timing", post(set_timing))
}

/// The body of `POST /_emulator/device_timing`: either field may be left out to keep it.
#[derive(Debug, Deserialize)]
struct TimingChange {
    interval_secs: Option<u64>,
    expires_in_secs: Option<u64>,
}

async fn set_timing(State(shared): State<Shared>, body: Bytes) -> Response {
    let change: TimingChange = match serde_json::from_slice(&body) {
        Ok(change) => change,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": format!("not a timing: {e}")})),
            )
                .into_response();
        }
    };
    let mut state = shared.lock();
    if let Some(interval) = change.interval_secs {
        state.device_timing.interval_secs = interval;
    }
    if let Some(expires_in) = change.expires_in_secs {
        state.device_timing.expires_in_secs = Some(expires_in);
    }
    let timing = state.device_timing;
    Json(json!({
        "interval_secs": timing.interval_secs,
        "expires_in_secs": timing.expires_in_secs,
    }))
    .into_response()
}

/// The pace of both device-code flows.
impl FeishuEmulator {
    /// Sets the polling interval and the lifetime of registration and device codes issued from
    /// now on (defaults: 5 s; 300 s registration, 240 s device), so that tests need not wait 5 s
    /// per poll and reach `expired_token` quickly (also `POST /_emulator/device_timing`).
    pub fn set_device_timing(&self, interval_secs: u64, expires_in_secs: u64) {
        self.shared.lock().device_timing = Timing {
            interval_secs,
            expires_in_secs: Some(expires_in_secs),
        };
    }

    /// Sets only the polling interval of codes issued from now on, keeping each flow's lifetime.
    pub fn set_device_interval(&self, interval_secs: u64) {
        self.shared.lock().device_timing.interval_secs = interval_secs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_sooner_than_the_interval_slows_down_and_the_interval_grows() {
        let mut clock = PollClock::new(0, 300, 5);
        assert_eq!(clock.poll(0), Ok(()), "the first poll is never too soon");
        assert_eq!(clock.poll(4_999), Err(Refusal::SlowDown));
        assert_eq!(clock.interval_secs(), 10);
        // 5 s after the previous poll is now too soon: the interval is 10 s.
        assert_eq!(clock.poll(9_999), Err(Refusal::SlowDown));
        assert_eq!(clock.interval_secs(), 15);
        assert_eq!(clock.poll(9_999 + 15_000), Ok(()));
    }

    #[test]
    fn a_code_expires_after_its_lifetime_whatever_the_pace() {
        let mut clock = PollClock::new(1_000, 2, 0);
        assert_eq!(clock.poll(2_999), Ok(()));
        assert_eq!(clock.poll(3_000), Err(Refusal::Expired));
        assert!(clock.expired(3_000));
    }

    #[test]
    fn user_codes_are_short_typable_and_read_back_however_typed() {
        let code = user_code();
        assert_eq!(code.len(), 9, "{code}");
        assert_eq!(code.as_bytes()[4], b'-', "{code}");
        assert!(
            code.chars()
                .all(|c| c == '-' || USER_CODE_ALPHABET.contains(&(c as u8))),
            "{code}"
        );
        let typed = code.to_ascii_lowercase().replace('-', " ");
        assert_eq!(normalize_user_code(&typed), code);
        assert_ne!(user_code(), user_code(), "random");
    }
}
