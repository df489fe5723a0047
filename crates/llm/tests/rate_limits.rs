//! Rate limits are not mistaken for empty accounts. A 429 is `rate_limited` and carries the wait
//! the service asked for (its `Retry-After` header, Gemini's `RetryInfo.retryDelay`, a wait named
//! in the message); a short wait is waited and the request retried, a long one is reported with
//! the wait for the user to count down. Only a real out-of-credit answer is `quota_exceeded`,
//! decided on the status and the structured fields first and the message text last.
//!
//! The bodies are recorded from the providers' documentation and error references:
//! - Gemini, "Rate limits" and "Troubleshooting" (ai.google.dev/gemini-api/docs/rate-limits,
//!   /troubleshooting): 429 `RESOURCE_EXHAUSTED` with `google.rpc.QuotaFailure`, `Help` and
//!   `google.rpc.RetryInfo` details; its message says "You exceeded your current quota, please
//!   check your plan and billing details" even for a per-minute limit.
//! - OpenAI, "Error codes" (platform.openai.com/docs/guides/error-codes): 429 "Rate limit
//!   reached … Please try again in 20s" (`rate_limit_exceeded`) versus 429 "You exceeded your
//!   current quota" (`insufficient_quota`).
//! - Anthropic, "Errors" (platform.claude.com/docs/en/api/errors): 429 `rate_limit_error` with
//!   `retry-after`; 400 "Your credit balance is too low to access the Anthropic API".
//! - DeepSeek, "Error codes" (api-docs.deepseek.com/quick_start/error_codes): 402 "Insufficient
//!   Balance".
//! - Moonshot, "错误说明" (platform.moonshot.cn/docs/api/errors): 429 `rate_limit_reached_error`
//!   versus 429 `exceeded_current_quota_error`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{gemini, openai};

use std::time::Duration;

use common::{Fixture, Reply, request, run};
use llm::{AnthropicProvider, OpenAiProvider, ProviderKind};

const KEY: &str = "sk-test-0123456789abcdef";

fn gemini_429(delay: &str) -> String {
    format!(
        r#"{{
  "error": {{
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-3.8-flash\nPlease retry in {delay}.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {{
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaDimensions": {{"location": "global", "model": "gemini-3.8-flash"}},
            "quotaValue": "10"
          }}
        ]
      }},
      {{
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [{{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}]
      }},
      {{
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "{delay}"
      }}
    ]
  }}
}}"#
    )
}

const GEMINI_TEXT: &str = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"好的\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 3,\"candidatesTokenCount\": 1,\"totalTokenCount\": 4}}\r\n\r\n";

#[tokio::test]
async fn a_gemini_per_minute_limit_is_rate_limited_with_its_wait_not_an_empty_account() {
    // 36 s is beyond what a turn waits (the tests' bound is 2 s): reported at once, with the wait.
    let fixture = Fixture::start(vec![Reply::json(429, &gemini_429("36s"))]).await;
    let outcome = run(&gemini(&fixture), request("x")).await;
    let error = outcome.error();
    assert_eq!(error.code, "rate_limited", "{error:?}");
    assert_eq!(error.retry_after_ms, Some(36_000));
    assert_eq!(
        fixture.count(),
        1,
        "not retried against a wait it cannot honour"
    );
}

#[tokio::test]
async fn a_short_retry_delay_in_the_body_is_waited_then_retried() {
    let fixture = Fixture::start(vec![
        Reply::json(429, &gemini_429("0.6s")),
        Reply::sse(GEMINI_TEXT, 0),
    ])
    .await;
    run(&gemini(&fixture), request("x")).await.response();
    let received = fixture.received();
    assert_eq!(received.len(), 2);
    assert!(
        received[1].at - received[0].at >= Duration::from_millis(550),
        "waited as the body asked, not the millisecond backoff"
    );
}

#[tokio::test]
async fn when_retries_run_out_the_last_wait_is_still_reported() {
    let fixture = Fixture::start(vec![
        Reply::json(429, &gemini_429("0.05s")),
        Reply::json(429, &gemini_429("0.05s")),
        Reply::json(429, &gemini_429("1.5s")),
    ])
    .await;
    let error = run(&gemini(&fixture), request("x")).await.error().clone();
    assert_eq!(fixture.count(), 3);
    assert_eq!(error.code, "rate_limited");
    assert_eq!(error.retry_after_ms, Some(1_500));
}

#[tokio::test]
async fn openai_rate_limit_versus_insufficient_quota() {
    let limited = r#"{"error":{"message":"Rate limit reached for gpt-6-luna in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let fixture = Fixture::start(vec![Reply::json(429, limited)]).await;
    let error = run(&openai(&fixture), request("x")).await.error().clone();
    assert_eq!(error.code, "rate_limited");
    assert_eq!(error.retry_after_ms, Some(20_000));

    let empty = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let fixture = Fixture::start(vec![Reply::json(429, empty)]).await;
    let error = run(&openai(&fixture), request("x")).await.error().clone();
    assert_eq!(error.code, "quota_exceeded");
    assert_eq!(error.retry_after_ms, None);
    assert_eq!(fixture.count(), 1, "an empty account is not retried");
}

#[tokio::test]
async fn a_retry_after_header_wins_over_the_message() {
    let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit (https://docs.claude.com/en/api/rate-limits); see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."}}"#;
    let fixture = Fixture::start(vec![Reply::json(429, limited).header("retry-after", "45")]).await;
    let config = common::config(
        &fixture,
        ProviderKind::Anthropic,
        "Anthropic Claude",
        "claude-sonnet-5-5",
        KEY,
        |_| {},
    );
    let error = run(&AnthropicProvider::new(config).unwrap(), request("x"))
        .await
        .error()
        .clone();
    assert_eq!(error.code, "rate_limited");
    assert_eq!(error.retry_after_ms, Some(45_000));
}

#[tokio::test]
async fn real_out_of_credit_answers_are_quota_exceeded() {
    let cases = [
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#,
        ),
        (
            402,
            r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#,
        ),
        (
            429,
            r#"{"error":{"message":"Your account org-xyz<ak-xyz> is suspended, please check your plan and billing details","type":"exceeded_current_quota_error"}}"#,
        ),
        (
            400,
            r#"{"error":{"code":"Arrearage","param":null,"message":"Access denied, please make sure your account is in good standing.","type":"Arrearage"},"id":"chatcmpl-1","request_id":"1"}"#,
        ),
    ];
    for (status, body) in cases {
        let fixture = Fixture::start(vec![Reply::json(status, body)]).await;
        let error = run(&openai(&fixture), request("x")).await.error().clone();
        assert_eq!(error.code, "quota_exceeded", "{status} {body}");
        assert_eq!(fixture.count(), 1);
    }
}

#[tokio::test]
async fn moonshot_rate_limit_is_not_an_empty_account() {
    let body = r#"{"error":{"message":"Your account org-xyz<ak-xyz> request reached organization max RPM: 3, please try again after 1 seconds","type":"rate_limit_reached_error"}}"#;
    let fixture = Fixture::start(vec![Reply::json(429, body)]).await;
    let config = common::config(
        &fixture,
        ProviderKind::OpenAiCompatible,
        "Moonshot Kimi",
        "kimi-k2.6",
        KEY,
        |c| c.http.retry = llm::RetryPolicy::none(),
    );
    let error = run(&OpenAiProvider::new(config).unwrap(), request("x"))
        .await
        .error()
        .clone();
    assert_eq!(error.code, "rate_limited");
}
