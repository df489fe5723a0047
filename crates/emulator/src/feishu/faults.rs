//! Fault injection and rate limits for the Open API side.
//!
//! A [`Fault`] makes the next requests to a path (or to any Open API path) fail with a 5xx,
//! answer 429 with Feishu's rate-limit headers, arrive late, or find the caller's token expired.
//! A [`RateLimit`] caps an endpoint per app within a fixed window, the way Feishu limits each API
//! per app and tenant. Tests set both through [`super::FeishuEmulator`] or `POST /_emulator/faults`.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Shared;

/// What an injected fault does to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer with this 5xx status (and an `x-tt-logid`, as every answer has).
    ServerError {
        /// 500, 502, 503 or 504.
        #[serde(default = "default_server_status")]
        status: u16,
    },
    /// Answer 429 / 99991400 with `x-ogw-ratelimit-reset` set to this many seconds.
    RateLimited {
        /// Seconds until the (pretend) window resets.
        reset_secs: u64,
    },
    /// Hold the request this long, then serve it normally.
    Slow {
        /// Milliseconds.
        delay_ms: u64,
    },
    /// Expire the caller's access token, so the request fails with 99991677.
    ExpireToken,
}

fn default_server_status() -> u16 {
    500
}

fn one() -> usize {
    1
}

/// A fault for the next `times` requests to `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// A concrete path (`/open-apis/im/v1/messages`) or a route with placeholders
    /// (`/open-apis/task/v2/tasks/{task_guid}`); `None` matches every Open API request.
    #[serde(default)]
    pub path: Option<String>,
    /// How many requests it affects.
    #[serde(default = "one")]
    pub times: usize,
    /// What happens to them.
    #[serde(flatten)]
    pub kind: FaultKind,
}

impl Fault {
    /// The next request to any path answers with `status` (a 5xx).
    pub fn server_error(status: u16) -> Fault {
        Fault::new(FaultKind::ServerError { status })
    }

    /// The next request answers 429 with `x-ogw-ratelimit-reset: reset_secs`.
    pub fn rate_limited(reset_secs: u64) -> Fault {
        Fault::new(FaultKind::RateLimited { reset_secs })
    }

    /// The next request is served after `delay`.
    pub fn slow(delay: Duration) -> Fault {
        Fault::new(FaultKind::Slow {
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The next request finds its access token expired.
    pub fn expire_token() -> Fault {
        Fault::new(FaultKind::ExpireToken)
    }

    fn new(kind: FaultKind) -> Fault {
        Fault {
            path: None,
            times: 1,
            kind,
        }
    }

    /// Only requests to `path` (concrete, or a route with `{param}` placeholders).
    #[must_use]
    pub fn on(mut self, path: &str) -> Fault {
        self.path = Some(path.to_owned());
        self
    }

    /// The next `times` matching requests instead of one.
    #[must_use]
    pub fn times(mut self, times: usize) -> Fault {
        self.times = times;
        self
    }
}

/// A cap on one endpoint: at most `limit` requests per app within each `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per window.
    pub limit: u32,
    /// The window; it starts with the first request after the previous one ended.
    pub window: Duration,
    /// HTTP status of the overflow answer: 429, or 400 for the legacy APIs (docx) that use it.
    pub status: u16,
}

impl RateLimit {
    /// `limit` requests per `window`, overflow answered with HTTP 429.
    pub fn new(limit: u32, window: Duration) -> RateLimit {
        RateLimit {
            limit,
            window,
            status: 429,
        }
    }

    /// Answers overflow with `status` instead (Feishu's docx APIs use 400).
    #[must_use]
    pub fn with_status(mut self, status: u16) -> RateLimit {
        self.status = status;
        self
    }
}

/// The overflow answer's details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limited {
    pub(crate) limit: u32,
    pub(crate) reset_secs: u64,
    pub(crate) status: u16,
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    faults: Vec<Fault>,
    /// By "METHOD route".
    limits: HashMap<String, RateLimit>,
    /// By ("METHOD route", app id): (window start in ms, requests in it).
    windows: HashMap<(String, String), (i64, u32)>,
}

impl FaultState {
    pub(crate) fn add(&mut self, fault: Fault) {
        if fault.times > 0 {
            self.faults.push(fault);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.faults.clear();
    }

    /// Consumes one use of the first fault matching a request to `path` served by `route`.
    pub(crate) fn take(&mut self, path: &str, route: &str) -> Option<FaultKind> {
        let index = self
            .faults
            .iter()
            .position(|f| f.path.as_deref().is_none_or(|p| p == path || p == route))?;
        let fault = self.faults.get_mut(index)?;
        fault.times -= 1;
        let kind = fault.kind.clone();
        if fault.times == 0 {
            self.faults.remove(index);
        }
        Some(kind)
    }

    pub(crate) fn set_limit(&mut self, method: &str, route: &str, limit: RateLimit) {
        let key = format!("{} {route}", method.to_ascii_uppercase());
        self.windows.retain(|(k, _), _| *k != key);
        self.limits.insert(key, limit);
    }

    pub(crate) fn clear_limits(&mut self) {
        self.limits.clear();
        self.windows.clear();
    }

    /// The configured limit of an endpoint, for the `x-ogw-ratelimit-limit` header of an
    /// injected 429.
    pub(crate) fn limit_of(&self, method: &str, route: &str) -> Option<u32> {
        self.limits
            .get(&format!("{method} {route}"))
            .map(|l| l.limit)
    }

    /// Counts a request by `app_id`; `Err` when it overflows the endpoint's window.
    pub(crate) fn admit(
        &mut self,
        method: &str,
        route: &str,
        app_id: &str,
        now_ms: i64,
    ) -> Result<(), Limited> {
        let key = format!("{method} {route}");
        let Some(limit) = self.limits.get(&key).copied() else {
            return Ok(());
        };
        let window_ms = i64::try_from(limit.window.as_millis()).unwrap_or(i64::MAX);
        let entry = self
            .windows
            .entry((key, app_id.to_owned()))
            .or_insert((now_ms, 0));
        if now_ms - entry.0 >= window_ms {
            *entry = (now_ms, 0);
        }
        if entry.1 >= limit.limit {
            let left_ms = (entry.0 + window_ms - now_ms).max(0);
            // Whole seconds, rounded up: waiting that long always clears the window.
            let reset_secs = u64::try_from((left_ms + 999) / 1000).unwrap_or(1).max(1);
            return Err(Limited {
                limit: limit.limit,
                reset_secs,
                status: limit.status,
            });
        }
        entry.1 += 1;
        Ok(())
    }
}

/// `POST /_emulator/faults` with a [`Fault`] (or an array of them) as JSON.
pub(crate) async fn post_faults(State(shared): State<Shared>, body: Bytes) -> Response {
    let faults: Vec<Fault> = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Array(items)) => {
            match items
                .into_iter()
                .map(serde_json::from_value)
                .collect::<Result<Vec<Fault>, _>>()
            {
                Ok(faults) => faults,
                Err(e) => return bad_fault(&e),
            }
        }
        Ok(value) => match serde_json::from_value(value) {
            Ok(fault) => vec![fault],
            Err(e) => return bad_fault(&e),
        },
        Err(e) => return bad_fault(&e),
    };
    let mut state = shared.lock();
    let count = faults.len();
    for fault in faults {
        state.api.faults.add(fault);
    }
    Json(json!({"added": count})).into_response()
}

/// `DELETE /_emulator/faults`: forget every pending fault.
pub(crate) async fn delete_faults(State(shared): State<Shared>) -> Response {
    shared.lock().api.faults.clear();
    StatusCode::NO_CONTENT.into_response()
}

fn bad_fault(error: &serde_json::Error) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": format!("not a fault: {error}")})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn faults_are_consumed_in_order() {
        let mut state = FaultState::default();
        state.add(Fault::server_error(503).on("/a").times(2));
        state.add(Fault::rate_limited(3));
        assert_eq!(
            state.take("/b", "/b"),
            Some(FaultKind::RateLimited { reset_secs: 3 })
        );
        assert_eq!(state.take("/b", "/b"), None);
        assert!(state.take("/a", "/a").is_some());
        assert!(state.take("/a", "/a").is_some());
        assert_eq!(state.take("/a", "/a"), None);
    }

    #[test]
    fn the_control_json_round_trips() {
        let fault: Fault =
            serde_json::from_str(r#"{"kind":"server_error","path":"/x","times":2}"#).unwrap();
        assert_eq!(fault, Fault::server_error(500).on("/x").times(2));
        let fault: Fault = serde_json::from_str(r#"{"kind":"slow","delay_ms":20}"#).unwrap();
        assert_eq!(fault, Fault::slow(Duration::from_millis(20)));
    }

    #[test]
    fn windows_reset() {
        let mut state = FaultState::default();
        state.set_limit("GET", "/r", RateLimit::new(2, Duration::from_secs(10)));
        assert!(state.admit("GET", "/r", "app", 0).is_ok());
        assert!(state.admit("GET", "/r", "app", 1).is_ok());
        let limited = state.admit("GET", "/r", "app", 2500).unwrap_err();
        assert_eq!((limited.limit, limited.reset_secs), (2, 8));
        assert!(state.admit("GET", "/r", "other", 2500).is_ok(), "per app");
        assert!(state.admit("GET", "/r", "app", 10_000).is_ok());
    }
}
