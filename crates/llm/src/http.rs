//! The HTTP side shared by every provider: timeouts, the retry policy, and the request loop that
//! retries a busy service before anything of its answer has reached the engine.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use agent::{ModelError, ModelStream};
use futures::StreamExt;
use reqwest::header::HeaderMap;

use crate::errors::{Context, is_retryable};
use crate::stream::{Decoder, Driver};

/// Timeouts and retries of one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// How long to wait for a connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// The longest silence accepted while waiting for the response or between two reads of the
    /// stream. Models that think before answering send nothing for a while, hence the margin.
    pub read_timeout: Duration,
    /// What to do when the service is busy.
    pub retry: RetryPolicy,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

/// Retries on 429 and 5xx (and on a busy error that opens the stream), with exponential backoff
/// and jitter, before anything was delivered. Later failures are reported: a half-delivered answer
/// cannot be taken back.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    /// The first backoff; it doubles on each retry.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a service asking for more gets no retry, and the user
    /// is told to wait instead of watching a frozen turn.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `attempt` (0-based): `base · 2^attempt`, capped, with "equal
    /// jitter" (half fixed, half random) so that clients limited together do not retry together.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.min(16)));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// The token counts of the last complete response, as the service reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the request.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
}

impl From<agent::UsageMetadata> for Usage {
    fn from(usage: agent::UsageMetadata) -> Self {
        Usage {
            input_tokens: usage.prompt_token_count,
            output_tokens: usage.candidates_token_count,
        }
    }
}

/// Where a provider keeps the usage of its last response; shared with the streams it returns.
pub(crate) type UsageCell = Arc<Mutex<Option<Usage>>>;

pub(crate) fn store_usage(cell: &UsageCell, usage: Usage, provider: &str) {
    tracing::debug!(
        provider,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        "model usage"
    );
    // Usage is a plain value; a panic elsewhere cannot leave it half-written.
    *cell
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(usage);
}

pub(crate) fn read_usage(cell: &UsageCell) -> Option<Usage> {
    *cell
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Errors building a provider from its settings.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The base URL is empty or not an http(s) URL.
    #[error("the base URL `{url}` is not a valid http(s) URL")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
    },
    /// The provider needs a key and none was given.
    #[error("no API key is set for {provider}; add `{key_name}` in settings")]
    MissingKey {
        /// The provider's label.
        provider: String,
        /// The vault name of the key.
        key_name: String,
    },
    /// The model name is empty.
    #[error("no model is set for {provider}")]
    MissingModel {
        /// The provider's label.
        provider: String,
    },
    /// The HTTP client could not be built (TLS set-up).
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

/// Builds the HTTP client of one provider.
pub(crate) fn client(settings: &HttpSettings) -> Result<reqwest::Client, ConfigError> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // reqwest is built without a crypto provider (no aws-lc C build, no OpenSSL); ring is
        // installed as the process default once. An Err means the app installed one first, which
        // is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.read_timeout)
        .user_agent(concat!("feishu-companion/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ConfigError::Client(e.to_string()))
}

/// Checks a base URL and removes its trailing slash.
pub(crate) fn base_url(url: &str) -> Result<String, ConfigError> {
    let trimmed = url.trim().trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(trimmed.to_owned())
        }
        _ => Err(ConfigError::InvalidBaseUrl {
            url: url.to_owned(),
        }),
    }
}

/// The pieces a provider hands to [`open`] for one request.
pub(crate) struct Transport<'a> {
    pub settings: &'a HttpSettings,
    /// Who is asked, for messages.
    pub ctx: Context,
}

/// Why one attempt failed, and how long the service asked us to wait.
struct Failure {
    error: ModelError,
    retry_after: Option<Duration>,
}

/// The most of an error body read: enough for any message, bounded against a server that
/// streams an endless error page.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Sends the request built by `request` and returns the stream of the answer, decoded by a fresh
/// `decoder()`. Retries busy answers (429, 5xx, a busy error as the stream's first event) within
/// the policy, waiting with backoff or as `Retry-After` says.
///
/// The returned stream owns the connection and nothing else runs for it: dropping it closes the
/// connection and stops everything.
pub(crate) async fn open<D: Decoder>(
    transport: &Transport<'_>,
    request: impl Fn() -> reqwest::RequestBuilder,
    decoder: impl Fn() -> D,
) -> Result<ModelStream, ModelError> {
    let policy = &transport.settings.retry;
    let mut attempt: u32 = 0;
    loop {
        let failure = match attempt_once(transport, request(), decoder()).await {
            Ok(stream) => return Ok(stream),
            Err(failure) => failure,
        };
        // The wait the service asked for, from its header or its body (Gemini's RetryInfo).
        let asked = failure
            .retry_after
            .or(failure.error.retry_after_ms.map(Duration::from_millis));
        if !is_retryable(&failure.error) || attempt >= policy.max_retries {
            return Err(with_wait(failure.error, asked));
        }
        let wait = match asked {
            Some(asked) if asked > policy.max_retry_after => {
                // Not worth a frozen turn: the user is told, with the wait, and can count down.
                let mut error = with_wait(failure.error, Some(asked));
                error.message = format!(
                    "{} The service asked to wait {} s before trying again.",
                    error.message,
                    asked.as_secs_f64().ceil()
                );
                return Err(error);
            }
            Some(asked) => asked,
            None => policy.backoff(attempt),
        };
        tracing::info!(
            provider = %transport.ctx.provider,
            code = %failure.error.code,
            attempt = attempt + 1,
            wait_ms = wait.as_millis() as u64,
            "model request retried"
        );
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// The error with the service's wait attached, when it asked for one.
fn with_wait(error: ModelError, wait: Option<Duration>) -> ModelError {
    match wait {
        Some(wait) => error.with_retry_after(wait),
        None => error,
    }
}

async fn attempt_once<D: Decoder>(
    transport: &Transport<'_>,
    request: reqwest::RequestBuilder,
    decoder: D,
) -> Result<ModelStream, Failure> {
    let ctx = &transport.ctx;
    let response = request.send().await.map_err(|e| Failure {
        error: network_error(transport, &e),
        retry_after: None,
    })?;
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let body = read_error_body(response).await;
        return Err(Failure {
            error: ctx.status_error(status.as_u16(), &body, retry_after),
            retry_after,
        });
    }
    let mut driver = Driver::new(response, decoder, transport.ctx.clone(), transport.settings);
    // Reading up to the first item lets a busy error that opens the stream be retried like a 429:
    // nothing has reached the engine yet.
    match driver.next().await {
        Some(Err(error)) if is_retryable(&error) => Err(Failure {
            error,
            retry_after: None,
        }),
        first => {
            let mut items = VecDeque::new();
            if let Some(first) = first {
                items.push_back(first);
            }
            Ok(driver.into_stream(items).boxed())
        }
    }
}

/// Reads the beginning of an error body, bounded in size; a body that fails to arrive is empty.
async fn read_error_body(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// `Retry-After` in seconds, or OpenAI's `retry-after-ms`. The HTTP-date form is not used by
/// the model services and falls back to backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // Bounds before converting: `Duration::from_secs_f64` panics on values it cannot hold.
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && (0.0..1e12).contains(&ms)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    header("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
}

/// The error for a request that got no answer. reqwest's own text names the URL, which never
/// holds a key (keys travel in headers), but is left out to keep the message short.
fn network_error(transport: &Transport<'_>, error: &reqwest::Error) -> ModelError {
    let provider = &transport.ctx.provider;
    let why = if error.is_timeout() {
        if error.is_connect() {
            format!(
                "no connection within {} s",
                transport.settings.connect_timeout.as_secs_f64()
            )
        } else {
            format!(
                "no answer within {} s",
                transport.settings.read_timeout.as_secs_f64()
            )
        }
    } else if error.is_connect() {
        "the connection failed".to_owned()
    } else {
        source_chain(error)
    };
    ModelError::new(
        "network",
        format!("{provider} could not be reached: {why}. Check the network and the base URL."),
    )
}

/// The innermost cause of an error, which says more than reqwest's summary.
pub(crate) fn source_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = error;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    innermost.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(1),
        };
        for _ in 0..50 {
            let first = policy.backoff(0);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = policy.backoff(2);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let late = policy.backoff(30);
            assert!(late >= Duration::from_millis(500) && late <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.insert("retry-after-ms", "1e300".parse().unwrap());
        assert_eq!(
            retry_after(&headers),
            Some(Duration::from_secs(2)),
            "absurd: ignored"
        );
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn base_urls_are_checked_and_trimmed() {
        assert_eq!(
            base_url(" https://api.deepseek.com/v1/ ").unwrap(),
            "https://api.deepseek.com/v1"
        );
        assert!(base_url("").is_err());
        assert!(base_url("ftp://x").is_err());
        assert!(base_url("localhost:11434").is_err());
    }
}
