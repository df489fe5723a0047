//! Responses from outside the agent — a tool call made from user code, or an HTTP request — in the
//! seed's shape: [`ExternalResponse`] with `ok`, `json()` and `raise_for_status()`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// PATCH
    Patch,
    /// HEAD
    Head,
    /// OPTIONS
    Options,
}

impl HttpMethod {
    /// Every method, in the seed's order.
    pub const ALL: [HttpMethod; 7] = [
        HttpMethod::Get,
        HttpMethod::Post,
        HttpMethod::Put,
        HttpMethod::Delete,
        HttpMethod::Patch,
        HttpMethod::Head,
        HttpMethod::Options,
    ];

    /// The method's name in upper case.
    pub const fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Delete => "DELETE",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Head => "HEAD",
            HttpMethod::Options => "OPTIONS",
        }
    }

    /// Whether the method can change something on the server, and so needs the user's approval
    /// when user code sends it.
    pub const fn is_write(self) -> bool {
        matches!(
            self,
            HttpMethod::Post | HttpMethod::Put | HttpMethod::Delete | HttpMethod::Patch
        )
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`HttpMethod`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown HTTP method {0:?}: expected one of GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS")]
pub struct UnknownMethod(pub String);

impl FromStr for HttpMethod {
    type Err = UnknownMethod;

    /// Case-insensitive, as HTTP client libraries accept `get` as well as `GET`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HttpMethod::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownMethod(s.to_owned()))
    }
}

/// The error `raise_for_status` raises for a response that is not ok.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status {status_code}: {reason}")]
pub struct StatusError {
    /// The HTTP status code.
    pub status_code: u16,
    /// Why it failed.
    pub reason: String,
}

/// A response body that is not valid JSON.
#[derive(Debug, thiserror::Error)]
#[error("response body is not valid JSON: {0}")]
pub struct JsonBodyError(#[from] pub serde_json::Error);

/// A response from outside the agent, such as a tool call or an HTTP request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalResponse {
    /// The body as a string.
    pub text: String,
    /// The HTTP status code.
    pub status_code: u16,
    /// Why it failed; empty when it did not.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub reason: String,
    /// An HTTP response's headers (empty for a tool call's answer).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The URL that answered, after redirects (empty for a tool call's answer).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The body's bytes, base64-encoded, when they are not UTF-8 text (`text` is then lossy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl ExternalResponse {
    /// A response with this status and body and no reason.
    pub fn new(status_code: u16, text: impl Into<String>) -> Self {
        ExternalResponse {
            text: text.into(),
            status_code,
            reason: String::new(),
            headers: std::collections::BTreeMap::new(),
            url: String::new(),
            body_base64: None,
        }
    }

    /// Sets the reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// `true` when the status code is below 400.
    pub fn ok(&self) -> bool {
        self.status_code < 400
    }

    /// The body parsed as JSON.
    ///
    /// ```
    /// let response = agent::ExternalResponse::new(200, r#"{"n": 1}"#);
    /// assert_eq!(response.json().unwrap()["n"], 1);
    /// assert!(agent::ExternalResponse::new(200, "<html>").json().is_err());
    /// ```
    pub fn json(&self) -> Result<Value, JsonBodyError> {
        Ok(serde_json::from_str(&self.text)?)
    }

    /// `Err(StatusError)` when the response is not ok.
    ///
    /// ```
    /// let response = agent::ExternalResponse::new(404, "").with_reason("Not Found");
    /// let err = response.raise_for_status().unwrap_err();
    /// assert_eq!((err.status_code, err.reason.as_str()), (404, "Not Found"));
    /// ```
    pub fn raise_for_status(&self) -> Result<(), StatusError> {
        if self.ok() {
            Ok(())
        } else {
            Err(StatusError {
                status_code: self.status_code,
                reason: self.reason.clone(),
            })
        }
    }
}
