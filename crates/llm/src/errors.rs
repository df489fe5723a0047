//! Turning what a provider says went wrong into a [`ModelError`] with a stable code.
//!
//! Providers disagree on shapes (OpenAI `{"error":{"code","type","message"}}`, Anthropic
//! `{"type":"error","error":{"type","message"}}`, Gemini `{"error":{"code","status","message"}}`,
//! sometimes wrapped in an array, Ollama `{"error":"…"}`) and the OpenAI-compatible services
//! disagree on statuses (an unknown model is a 404 at OpenAI, a 400 elsewhere), so the code is
//! decided from the status and the body together: the status and the body's structured fields
//! (`code`, `type`, `status`, `details`) first, its message text last. That order matters for
//! 429s: Gemini's per-minute limit says "You exceeded your current quota, please check your plan
//! and billing details" in its message, yet it is a rate limit (`RESOURCE_EXHAUSTED` with a
//! `RetryInfo.retryDelay`); only OpenAI's `insufficient_quota` code and its kin mean the account
//! is empty. The codes:
//!
//! | code | when |
//! | --- | --- |
//! | `unauthorized` | 401/403, or a body saying the key is invalid |
//! | `model_not_found` | 404, or a body saying the model does not exist |
//! | `context_length_exceeded` | the conversation does not fit the model's window |
//! | `quota_exceeded` | 402, an out-of-credit code (`insufficient_quota`, `Arrearage`, …), or a message saying the credit balance is too low (not worth retrying) |
//! | `rate_limited` | 429 otherwise, with the wait the service asked for when it said |
//! | `unavailable` | 5xx, or the service says it is overloaded |
//! | `bad_request` | any other refusal of the request |
//! | `malformed_stream` | the response is not the event stream it should be |
//! | `incomplete` | the stream stopped before its end marker |
//! | `network` | the service could not be reached or did not answer in time |

use std::time::Duration;

use agent::ModelError;
use serde_json::Value;

use crate::secret::ApiKey;

/// The longest excerpt of a server's message put into an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// What an error body says, whatever the provider.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ErrorInfo {
    /// `error.message`, or the body's text when it is not JSON.
    pub message: String,
    /// `error.code` (OpenAI: `context_length_exceeded`; Gemini: the HTTP status as a number).
    pub code: String,
    /// `error.type` (OpenAI, Anthropic) or `error.status` (Gemini).
    pub kind: String,
    /// Gemini's `RetryInfo.retryDelay`, or a wait named in the message ("Please retry in 36s").
    pub retry_delay: Option<Duration>,
}

impl ErrorInfo {
    /// Reads an error body. Never fails: an unreadable body is its own message.
    pub fn parse(body: &str) -> ErrorInfo {
        match serde_json::from_str::<Value>(body) {
            Ok(value) => ErrorInfo::from_value(&value),
            Err(_) => ErrorInfo {
                message: body.trim().to_owned(),
                ..ErrorInfo::default()
            },
        }
    }

    /// Reads an already parsed error document.
    pub fn from_value(value: &Value) -> ErrorInfo {
        // Gemini's streaming endpoint wraps its error object in an array.
        let value = match value {
            Value::Array(items) => items.first().unwrap_or(value),
            other => other,
        };
        let error = value.get("error").unwrap_or(value);
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        match error {
            Value::String(message) => ErrorInfo {
                message: message.clone(),
                ..ErrorInfo::default()
            },
            Value::Object(map) => {
                let mut message = text(map.get("message"));
                if message.is_empty() {
                    message = text(map.get("msg"));
                }
                let mut kind = text(map.get("type"));
                if kind.is_empty() {
                    kind = text(map.get("status"));
                }
                let details = map
                    .get("details")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                // Gemini puts the precise reason (`API_KEY_INVALID`) in `details`.
                let reasons: Vec<String> = details
                    .iter()
                    .filter_map(|d| d.get("reason").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect();
                let mut code = text(map.get("code"));
                if !reasons.is_empty() {
                    code = reasons.join(",");
                }
                let retry_delay = details
                    .iter()
                    .filter_map(|d| d.get("retryDelay").and_then(Value::as_str))
                    .find_map(parse_duration)
                    .or_else(|| wait_in_message(&message));
                ErrorInfo {
                    message,
                    code,
                    kind,
                    retry_delay,
                }
            }
            _ => ErrorInfo::default(),
        }
    }

    fn mentions(&self, needles: &[&str]) -> bool {
        let haystack = format!("{} {} {}", self.code, self.kind, self.message).to_lowercase();
        needles.iter().any(|n| haystack.contains(n))
    }

    fn is_context_overflow(&self) -> bool {
        self.mentions(&[
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "context window",
            "prompt is too long",
            "input is too long",
            "exceeds the maximum number of tokens",
            "input token count",
            "token limit",
            "too many tokens",
            "range of input length",
            "超长",
            "上下文长度",
        ])
    }

    fn is_bad_key(&self) -> bool {
        self.mentions(&[
            "api_key_invalid",
            "api key not valid",
            "invalid api key",
            "invalid_api_key",
            "incorrect api key",
            "authentication_error",
            "authentication fails",
            "permission_error",
        ])
    }

    fn is_unknown_model(&self) -> bool {
        self.mentions(&[
            "model_not_found",
            "not_found_error",
            "model not exist",
            "model does not exist",
            "模型不存在",
        ]) || (self.mentions(&["model"])
            && self.mentions(&["does not exist", "not found", "not exist", "no such"]))
    }

    /// A structured field says the account is out of credit: OpenAI `insufficient_quota`,
    /// Moonshot `exceeded_current_quota_error`, DashScope `Arrearage`, Volcengine Ark
    /// `AccountOverdueError`, Zhipu `1113`.
    fn has_credit_code(&self) -> bool {
        const CODES: [&str; 7] = [
            "insufficient_quota",
            "exceeded_current_quota_error",
            "billing_hard_limit_reached",
            "insufficient_balance",
            "arrearage",
            "accountoverdueerror",
            "1113",
        ];
        [&self.code, &self.kind]
            .iter()
            .any(|field| CODES.contains(&field.to_lowercase().as_str()))
    }

    /// The message says the account is out of credit (Anthropic's "Your credit balance is too
    /// low", DeepSeek's "Insufficient Balance"): read only when no structured field decided.
    fn says_out_of_credit(&self) -> bool {
        self.message_mentions(&[
            "credit balance",
            "insufficient balance",
            "insufficient account balance",
            "余额不足",
            "欠费",
        ])
    }

    fn message_mentions(&self, needles: &[&str]) -> bool {
        let message = self.message.to_lowercase();
        needles.iter().any(|n| message.contains(n))
    }

    fn is_overloaded(&self) -> bool {
        self.mentions(&[
            "overloaded",
            "server_error",
            "api_error",
            "internal",
            "unavailable",
        ])
    }

    fn is_rate_limit(&self) -> bool {
        self.mentions(&[
            "rate_limit",
            "rate limit",
            "resource_exhausted",
            "too many requests",
        ])
    }
}

/// A protobuf duration as Google writes it (`"36s"`, `"1.5s"`, `"45.837906927s"`).
fn parse_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && (0.0..1e9).contains(&seconds)).then(|| Duration::from_secs_f64(seconds))
}

/// A wait named in a message: "Please retry in 36.5s." (Gemini), "Please try again in 20s" or
/// "in 120ms" (OpenAI).
fn wait_in_message(message: &str) -> Option<Duration> {
    let lower = message.to_lowercase();
    let at = ["retry in ", "try again in "]
        .iter()
        .find_map(|marker| lower.find(marker).map(|i| i + marker.len()))?;
    let rest = &lower[at..];
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let value: f64 = rest[..number_end].parse().ok()?;
    let unit = rest[number_end..].trim_start();
    let seconds = if unit.starts_with("ms") {
        value / 1000.0
    } else if unit.starts_with('s') {
        value
    } else if unit.starts_with('m') {
        value * 60.0
    } else {
        return None;
    };
    (seconds.is_finite() && (0.0..1e9).contains(&seconds)).then(|| Duration::from_secs_f64(seconds))
}

/// Who is talking, for messages: the provider's label, the model, and the key to keep out.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub provider: String,
    pub model: String,
    pub key: Option<ApiKey>,
}

impl Context {
    /// The server's message, cleaned for showing: the key removed, shortened.
    fn excerpt(&self, info: &ErrorInfo) -> String {
        let message = match &self.key {
            Some(key) => key.redact(&info.message),
            None => info.message.clone(),
        };
        let mut short: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        if short.len() < message.len() {
            short.push('…');
        }
        short
    }

    fn with_detail(&self, text: String, info: &ErrorInfo) -> String {
        let detail = self.excerpt(info);
        if detail.is_empty() {
            text
        } else {
            format!("{text} The service said: {detail}")
        }
    }

    /// The error for a refused request (a non-success HTTP status). `retry_after` is the
    /// service's `Retry-After` header, which wins over a delay named in the body.
    pub fn status_error(
        &self,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
    ) -> ModelError {
        let info = ErrorInfo::parse(body);
        let provider = &self.provider;
        let model = &self.model;
        if info.has_credit_code() || status == 402 {
            return self.credit_error(&info, Some(status));
        }
        if status == 401 || status == 403 || (status == 400 && info.is_bad_key()) {
            // The server's words are left out: some echo part of the key they were sent.
            return ModelError::new(
                "unauthorized",
                format!(
                    "{provider} refused the API key (HTTP {status}). Check the API key in settings."
                ),
            );
        }
        if status == 429 {
            return self.rate_error(&info, Some(status), retry_after.or(info.retry_delay));
        }
        if info.is_context_overflow() || status == 413 {
            return self.context_error(&info);
        }
        if status == 404 || info.is_unknown_model() {
            return ModelError::new(
                "model_not_found",
                self.with_detail(
                    format!(
                        "{provider} does not know the model `{model}` (HTTP {status}). Check the model name and the base URL in settings."
                    ),
                    &info,
                ),
            );
        }
        if info.says_out_of_credit() {
            return self.credit_error(&info, Some(status));
        }
        if status >= 500 {
            return ModelError::new(
                "unavailable",
                self.with_detail(
                    format!("{provider} is unavailable (HTTP {status}). Try again shortly."),
                    &info,
                ),
            );
        }
        ModelError::new(
            "bad_request",
            self.with_detail(
                format!("{provider} refused the request (HTTP {status})."),
                &info,
            ),
        )
    }

    fn credit_error(&self, info: &ErrorInfo, status: Option<u16>) -> ModelError {
        let provider = &self.provider;
        let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
        ModelError::new(
            "quota_exceeded",
            self.with_detail(
                format!("The {provider} account has no quota or credit left{status}. Top it up in the service's console."),
                info,
            ),
        )
    }

    fn rate_error(
        &self,
        info: &ErrorInfo,
        status: Option<u16>,
        wait: Option<Duration>,
    ) -> ModelError {
        let provider = &self.provider;
        let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
        let error = ModelError::new(
            "rate_limited",
            self.with_detail(
                format!("{provider} is limiting requests{status}. Try again shortly."),
                info,
            ),
        );
        match wait {
            Some(wait) => error.with_retry_after(wait),
            None => error,
        }
    }

    /// The error for an error reported inside a stream that had started well.
    pub fn stream_error(&self, info: &ErrorInfo) -> ModelError {
        let provider = &self.provider;
        if info.has_credit_code() {
            return self.credit_error(info, None);
        }
        if info.is_context_overflow() {
            return self.context_error(info);
        }
        if info.is_rate_limit() {
            return self.rate_error(info, None, info.retry_delay);
        }
        if info.says_out_of_credit() {
            return self.credit_error(info, None);
        }
        if info.is_bad_key() {
            return ModelError::new(
                "unauthorized",
                format!("{provider} refused the API key. Check the API key in settings."),
            );
        }
        if info.is_unknown_model() {
            return ModelError::new(
                "model_not_found",
                self.with_detail(
                    format!(
                        "{provider} does not know the model `{}`. Check the model name in settings.",
                        self.model
                    ),
                    info,
                ),
            );
        }
        if info.is_overloaded() {
            return ModelError::new(
                "unavailable",
                self.with_detail(format!("{provider} is unavailable."), info),
            );
        }
        ModelError::new(
            "provider_error",
            self.with_detail(format!("{provider} reported an error."), info),
        )
    }

    fn context_error(&self, info: &ErrorInfo) -> ModelError {
        ModelError::new(
            "context_length_exceeded",
            self.with_detail(
                format!(
                    "The conversation is too long for the model `{}`. Start a new session or choose a model with a larger context window.",
                    self.model
                ),
                info,
            ),
        )
    }

    /// The error for a stream that is not valid SSE or JSON.
    pub fn malformed(&self, what: impl std::fmt::Display) -> ModelError {
        ModelError::new(
            "malformed_stream",
            format!(
                "{} sent a response that cannot be read: {what}",
                self.provider
            ),
        )
    }

    /// The error for a stream that ended before its end marker.
    pub fn incomplete(&self, why: &str) -> ModelError {
        ModelError::new(
            "incomplete",
            format!(
                "The response of {} was cut off before it finished ({why}).",
                self.provider
            ),
        )
    }
}

/// Whether an error is worth another attempt: the service is busy, not refusing.
pub(crate) fn is_retryable(error: &ModelError) -> bool {
    matches!(error.code.as_str(), "rate_limited" | "unavailable")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ctx() -> Context {
        Context {
            provider: "Test".to_owned(),
            model: "m-1".to_owned(),
            key: None,
        }
    }

    fn code(status: u16, body: &str) -> String {
        ctx().status_error(status, body, None).code
    }

    #[test]
    fn statuses_and_bodies_of_the_real_services_map_to_stable_codes() {
        let cases = [
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                "unauthorized",
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#,
                "unauthorized",
            ),
            (
                404,
                r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                "model_not_found",
            ),
            (
                400,
                r#"{"error":{"message":"Model Not Exist","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#,
                "model_not_found",
            ),
            (
                404,
                r#"{"error":"model \"llama9\" not found, try pulling it first"}"#,
                "model_not_found",
            ),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                "context_length_exceeded",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
                "context_length_exceeded",
            ),
            (
                400,
                r#"[{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]"#,
                "context_length_exceeded",
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
                "rate_limited",
            ),
            (
                429,
                r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
                "quota_exceeded",
            ),
            (
                402,
                r#"{"error":{"message":"Insufficient Balance","type":"unknown_error"}}"#,
                "quota_exceeded",
            ),
            (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "unavailable",
            ),
            (502, "<html>Bad Gateway</html>", "unavailable"),
            (
                400,
                r#"{"error":{"message":"Invalid type for 'messages[0].role'","type":"invalid_request_error"}}"#,
                "bad_request",
            ),
        ];
        for (status, body, expected) in cases {
            assert_eq!(code(status, body), expected, "{status} {body}");
        }
    }

    #[test]
    fn an_unauthorized_message_never_repeats_the_server_and_says_where_to_fix_it() {
        let err = ctx().status_error(
            401,
            r#"{"error":{"message":"key sk-abc***xyz is wrong"}}"#,
            None,
        );
        assert!(!err.message.contains("sk-abc"), "{}", err.message);
        assert!(
            err.message.contains("API key in settings"),
            "{}",
            err.message
        );
    }

    #[test]
    fn the_key_is_redacted_from_echoed_messages() {
        let ctx = Context {
            provider: "Test".to_owned(),
            model: "m".to_owned(),
            key: Some(ApiKey::new("sk-live-0123456789abcdef")),
        };
        let err = ctx.status_error(
            400,
            r#"{"error":{"message":"bad header sk-live-0123456789abcdef"}}"#,
            None,
        );
        assert!(!err.message.contains("0123456789abcdef"), "{}", err.message);
    }

    #[test]
    fn waits_are_read_from_retry_info_and_from_messages() {
        assert_eq!(parse_duration("36s"), Some(Duration::from_secs(36)));
        assert_eq!(
            parse_duration("45.837906927s"),
            Some(Duration::from_secs_f64(45.837906927))
        );
        assert_eq!(parse_duration("36"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(
            wait_in_message("… Please retry in 36.5s."),
            Some(Duration::from_millis(36_500))
        );
        assert_eq!(
            wait_in_message("Please try again in 120ms. Visit …"),
            Some(Duration::from_millis(120))
        );
        assert_eq!(
            wait_in_message("Please try again in 1m."),
            Some(Duration::from_secs(60))
        );
        assert_eq!(wait_in_message("Please try again later."), None);
    }

    #[test]
    fn a_429_saying_quota_and_billing_in_words_is_still_a_rate_limit() {
        let body = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;
        let error = ctx().status_error(429, body, None);
        assert_eq!(error.code, "rate_limited");
        assert_eq!(error.retry_after_ms, Some(7_000));
        // The header wins over the body.
        let error = ctx().status_error(429, body, Some(Duration::from_secs(2)));
        assert_eq!(error.retry_after_ms, Some(2_000));
        // In a stream, structured fields decide too.
        let info = ErrorInfo::parse(body);
        assert_eq!(ctx().stream_error(&info).code, "rate_limited");
    }

    #[test]
    fn in_stream_errors_map_by_type() {
        let info = ErrorInfo::parse(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(ctx().stream_error(&info).code, "unavailable");
        let info = ErrorInfo::parse(
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        );
        assert_eq!(ctx().stream_error(&info).code, "rate_limited");
    }
}
