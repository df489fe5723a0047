//! The tool-outcome contract of the seed `feishu-agent-result`: how a tool says what happened.
//!
//! A tool handler returns either a plain value (which counts as [`ToolOutcome::Completed`]) or a
//! [`ToolResult`] that states its outcome explicitly. [`coerce_tool_result`] turns either into the
//! text the model sees, whether that text is an error, and the structured result if there was one.
//! Approval of writes is *not* expressed here: the engine holds `requires_approval` calls before
//! dispatch, so a tool never gets to run before its approval exists.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The normalised disposition of one tool execution.
///
/// It serialises as its lowercase name and compares equal to that string, as the seed's
/// `str`-based enum does:
///
/// ```
/// use agent::ToolOutcome;
///
/// assert!(ToolOutcome::NeedsUserAuth == "needs_user_auth");
/// assert_eq!("completed".parse::<ToolOutcome>().unwrap(), ToolOutcome::Completed);
/// assert!("done".parse::<ToolOutcome>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool did what was asked.
    Completed,
    /// The tool ran and failed.
    Failed,
    /// A policy or the user refused the call; the model should not retry it as is.
    Blocked,
    /// The user must first grant a Feishu permission; the engine shows an auth card and suspends.
    NeedsUserAuth,
    /// The call was called off (expired, superseded, sign-in declined, turn cancelled).
    Cancelled,
    /// Nothing was changed; the content is for the model's information only.
    Informational,
}

impl ToolOutcome {
    /// Every outcome, in the seed's order.
    pub const ALL: [ToolOutcome; 6] = [
        ToolOutcome::Completed,
        ToolOutcome::Failed,
        ToolOutcome::Blocked,
        ToolOutcome::NeedsUserAuth,
        ToolOutcome::Cancelled,
        ToolOutcome::Informational,
    ];

    /// The wire string, as the seed spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Completed => "completed",
            ToolOutcome::Failed => "failed",
            ToolOutcome::Blocked => "blocked",
            ToolOutcome::NeedsUserAuth => "needs_user_auth",
            ToolOutcome::Cancelled => "cancelled",
            ToolOutcome::Informational => "informational",
        }
    }

    /// Whether a result with this outcome is, by itself, an error for the model.
    pub const fn is_error(self) -> bool {
        !matches!(self, ToolOutcome::Completed | ToolOutcome::Informational)
    }
}

impl fmt::Display for ToolOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`ToolOutcome`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown tool outcome {0:?}: expected one of completed, failed, blocked, needs_user_auth, cancelled, informational"
)]
pub struct UnknownOutcome(pub String);

impl FromStr for ToolOutcome {
    type Err = UnknownOutcome;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownOutcome(s.to_owned()))
    }
}

impl PartialEq<str> for ToolOutcome {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ToolOutcome {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ToolOutcome> for str {
    fn eq(&self, other: &ToolOutcome) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ToolOutcome> for &str {
    fn eq(&self, other: &ToolOutcome) -> bool {
        *self == other.as_str()
    }
}

/// The structured return value of a tool handler.
///
/// Most tools return a plain value; this type is for declaring an outcome, such as
/// `NeedsUserAuth` with the scopes needed and a fallback `authorize_url`.
///
/// ```
/// use agent::{ToolOutcome, ToolResult};
///
/// let ok = ToolResult::new(ToolOutcome::Completed).with_content("已列出 3 个日程");
/// assert_eq!(ok.outcome, ToolOutcome::Completed);
/// assert!(!ok.is_error);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// What happened.
    pub outcome: ToolOutcome,
    /// What goes back to the model: text or any JSON value; `None` for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// A sign-in link for the model to show when the app cannot show an auth card (the seed's fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorize_url: Option<String>,
    /// The Feishu scopes the call needs, for `NeedsUserAuth`.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub auth_scopes: Vec<String>,
    /// Marks the result as an error even when the outcome alone would not.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub is_error: bool,
}

impl ToolResult {
    /// A result with this outcome and nothing else set.
    pub fn new(outcome: ToolOutcome) -> Self {
        ToolResult {
            outcome,
            content: None,
            authorize_url: None,
            auth_scopes: Vec::new(),
            is_error: false,
        }
    }

    /// Sets the content returned to the model.
    #[must_use]
    pub fn with_content(mut self, content: impl Into<Value>) -> Self {
        self.content = Some(content.into());
        self
    }

    /// Sets the fallback sign-in link.
    #[must_use]
    pub fn with_authorize_url(mut self, url: impl Into<String>) -> Self {
        self.authorize_url = Some(url.into());
        self
    }

    /// Sets the scopes the call needs.
    #[must_use]
    pub fn with_auth_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.auth_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Marks the result as an error.
    #[must_use]
    pub fn with_is_error(mut self, is_error: bool) -> Self {
        self.is_error = is_error;
        self
    }
}

/// Whatever a tool handler returned: nothing, a plain value, or a [`ToolResult`].
///
/// This is the Rust spelling of the seed's `Any`: `None`, any value, or a `ToolResult` instance.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolReturn {
    /// The handler returned no value (Python's `None`).
    #[default]
    Nothing,
    /// A plain value: counts as `COMPLETED`.
    Value(Value),
    /// An explicit outcome.
    Result(ToolResult),
}

impl From<ToolResult> for ToolReturn {
    fn from(result: ToolResult) -> Self {
        ToolReturn::Result(result)
    }
}

impl From<Value> for ToolReturn {
    /// JSON `null` is Python's `None`, so it becomes [`ToolReturn::Nothing`].
    fn from(value: Value) -> Self {
        if value.is_null() {
            ToolReturn::Nothing
        } else {
            ToolReturn::Value(value)
        }
    }
}

impl From<&str> for ToolReturn {
    fn from(text: &str) -> Self {
        ToolReturn::Value(Value::String(text.to_owned()))
    }
}

impl From<String> for ToolReturn {
    fn from(text: String) -> Self {
        ToolReturn::Value(Value::String(text))
    }
}

impl<T: Into<ToolReturn>> From<Option<T>> for ToolReturn {
    fn from(value: Option<T>) -> Self {
        value.map_or(ToolReturn::Nothing, Into::into)
    }
}

/// The seed's `_stringify`: strings as they are, anything else as compact JSON that keeps
/// Chinese (and every other non-ASCII) character unescaped.
fn stringify(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        // `Value`'s Display is serde_json's compact writer, which never escapes non-ASCII.
        other => other.to_string(),
    }
}

/// Normalises a tool's return value to `(content_text, is_error, structured_result)`.
///
/// ```
/// use agent::{coerce_tool_result, ToolOutcome, ToolResult, ToolReturn};
/// use serde_json::json;
///
/// // A plain value is COMPLETED and not an error; non-strings become compact JSON.
/// assert_eq!(coerce_tool_result(json!({"标题": "周会"})), (r#"{"标题":"周会"}"#.to_owned(), false, None));
/// // No value at all.
/// assert_eq!(coerce_tool_result(ToolReturn::Nothing), (String::new(), false, None));
/// // A sign-in request carries the fallback link and is an error for the model.
/// let auth = ToolResult::new(ToolOutcome::NeedsUserAuth)
///     .with_content("需要日历权限")
///     .with_authorize_url("https://example.test/authorize");
/// let (text, is_error, structured) = coerce_tool_result(auth.clone());
/// assert_eq!(text, "需要日历权限\n授权链接：https://example.test/authorize");
/// assert!(is_error);
/// assert_eq!(structured, Some(auth));
/// ```
pub fn coerce_tool_result(result: impl Into<ToolReturn>) -> (String, bool, Option<ToolResult>) {
    match result.into() {
        ToolReturn::Result(result) => {
            let is_error = result.is_error || result.outcome.is_error();
            let mut text = match &result.content {
                Some(content) if !content.is_null() => stringify(content),
                _ => String::new(),
            };
            if let Some(url) = result.authorize_url.as_deref().filter(|u| !u.is_empty()) {
                // The seed trims only here, after appending the link.
                text = format!("{text}\n授权链接：{url}").trim().to_owned();
            }
            (text, is_error, Some(result))
        }
        ToolReturn::Nothing => (String::new(), false, None),
        ToolReturn::Value(value) => (stringify(&value), false, None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcome_round_trips_through_string_and_serde() {
        for outcome in ToolOutcome::ALL {
            let text = outcome.to_string();
            assert_eq!(text.parse::<ToolOutcome>(), Ok(outcome));
            assert_eq!(serde_json::to_value(outcome).unwrap(), json!(text));
            assert_eq!(
                serde_json::from_value::<ToolOutcome>(json!(text)).unwrap(),
                outcome
            );
            assert!(outcome == text.as_str());
            assert!(text.as_str() == outcome);
        }
        assert_eq!(ToolOutcome::NeedsUserAuth.as_str(), "needs_user_auth");
    }

    #[test]
    fn unknown_outcome_is_an_error_naming_the_string() {
        let err = "Completed".parse::<ToolOutcome>().unwrap_err();
        assert!(err.to_string().contains("\"Completed\""), "{err}");
        assert!(serde_json::from_value::<ToolOutcome>(json!("succeeded")).is_err());
        assert!(ToolOutcome::Completed != "failed");
    }

    #[test]
    fn error_outcomes_are_all_but_completed_and_informational() {
        let errors: Vec<_> = ToolOutcome::ALL
            .into_iter()
            .filter(|o| o.is_error())
            .collect();
        assert_eq!(
            errors,
            [
                ToolOutcome::Failed,
                ToolOutcome::Blocked,
                ToolOutcome::NeedsUserAuth,
                ToolOutcome::Cancelled
            ]
        );
        for outcome in ToolOutcome::ALL {
            let (_, is_error, _) = coerce_tool_result(ToolResult::new(outcome));
            assert_eq!(is_error, outcome.is_error(), "{outcome}");
        }
    }

    #[test]
    fn explicit_is_error_wins_over_a_good_outcome() {
        let result = ToolResult::new(ToolOutcome::Completed)
            .with_content("partial")
            .with_is_error(true);
        assert!(coerce_tool_result(result).1);
    }

    #[test]
    fn plain_values_are_completed_and_strings_stay_as_they_are() {
        assert_eq!(
            coerce_tool_result("  有空格  "),
            ("  有空格  ".to_owned(), false, None)
        );
        assert_eq!(coerce_tool_result(json!(3)), ("3".to_owned(), false, None));
        assert_eq!(
            coerce_tool_result(json!([1, "二"])),
            (r#"[1,"二"]"#.to_owned(), false, None)
        );
        assert_eq!(
            coerce_tool_result(json!(null)),
            (String::new(), false, None)
        );
        assert_eq!(
            coerce_tool_result(None::<String>),
            (String::new(), false, None)
        );
        assert_eq!(
            coerce_tool_result(json!(false)),
            ("false".to_owned(), false, None)
        );
    }

    #[test]
    fn result_without_content_is_empty_text() {
        let (text, is_error, structured) = coerce_tool_result(ToolResult::new(ToolOutcome::Failed));
        assert_eq!(text, "");
        assert!(is_error);
        assert_eq!(structured.map(|r| r.outcome), Some(ToolOutcome::Failed));
    }

    #[test]
    fn structured_content_is_compact_json_with_unescaped_chinese() {
        let result = ToolResult::new(ToolOutcome::Informational)
            .with_content(json!({"日程": ["周会"], "n": 1}));
        let (text, is_error, _) = coerce_tool_result(result);
        assert_eq!(text, r#"{"日程":["周会"],"n":1}"#);
        assert!(!is_error);
    }

    #[test]
    fn authorize_url_is_appended_and_the_whole_text_trimmed() {
        let only_url =
            ToolResult::new(ToolOutcome::NeedsUserAuth).with_authorize_url("https://a.test/x");
        assert_eq!(coerce_tool_result(only_url).0, "授权链接：https://a.test/x");

        let padded = ToolResult::new(ToolOutcome::NeedsUserAuth)
            .with_content("  需要授权 ")
            .with_authorize_url("https://a.test/x");
        assert_eq!(
            coerce_tool_result(padded).0,
            "需要授权 \n授权链接：https://a.test/x"
        );

        // Without a link nothing is trimmed: the seed only strips after appending it.
        let untrimmed = ToolResult::new(ToolOutcome::Completed).with_content("  x  ");
        assert_eq!(coerce_tool_result(untrimmed).0, "  x  ");

        // An empty link is "not set", as Python's truthiness test treats it.
        let empty = ToolResult::new(ToolOutcome::Completed)
            .with_content(" y ")
            .with_authorize_url("");
        assert_eq!(coerce_tool_result(empty).0, " y ");
    }

    #[test]
    fn tool_result_round_trips_and_defaults_missing_fields() {
        let full = ToolResult::new(ToolOutcome::NeedsUserAuth)
            .with_content(json!({"a": 1}))
            .with_authorize_url("https://a.test")
            .with_auth_scopes(["calendar:calendar", "offline_access"])
            .with_is_error(true);
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(serde_json::from_str::<ToolResult>(&text).unwrap(), full);

        let minimal: ToolResult = serde_json::from_str(r#"{"outcome":"blocked"}"#).unwrap();
        assert_eq!(minimal, ToolResult::new(ToolOutcome::Blocked));
        assert!(serde_json::from_str::<ToolResult>(r#"{"content":"x"}"#).is_err());
    }
}
