//! The Gemini provider against `streamGenerateContent?alt=sse` fixtures (written from the API
//! reference: each event a whole `GenerateContentResponse` with `candidates[].content.parts[]`,
//! `functionCall` parts, a `finishReason` on the last, `usageMetadata`; errors as
//! `{"error":{"code","message","status"}}`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use agent::{Content, FunctionCall, Model, Part};
use common::{Fixture, Piece, Reply, calls, request, request_with_history, run};
use futures::StreamExt;
use llm::{GeminiProvider, ProviderConfig, ProviderKind, ToolChoice};
use serde_json::{Value, json};

const KEY: &str = "AIzaSy-test-0123456789abcdef";

fn provider(fixture: &Fixture) -> GeminiProvider {
    provider_with(fixture, |_| {})
}

fn provider_with(fixture: &Fixture, change: impl FnOnce(&mut ProviderConfig)) -> GeminiProvider {
    let config = common::config(
        fixture,
        ProviderKind::Gemini,
        "Google Gemini",
        "gemini-2.5-flash",
        KEY,
        change,
    );
    GeminiProvider::new(config).unwrap()
}

/// One event with these parts, and a finish reason on the last.
fn event(parts: Value, finish: Option<&str>) -> String {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    let response = json!({
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 31, "candidatesTokenCount": 9, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
    });
    format!("data: {response}\r\n\r\n")
}

/// A text answer exactly as the service streams it.
const TEXT_STREAM: &str = concat!(
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"明天\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 31,\"candidatesTokenCount\": 1,\"totalTokenCount\": 32},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"abc\"}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"上午 10 点\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 31,\"candidatesTokenCount\": 4,\"totalTokenCount\": 35},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"abc\"}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"有周会。\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 31,\"candidatesTokenCount\": 9,\"totalTokenCount\": 40},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"abc\"}\r\n\r\n",
);

#[tokio::test]
async fn plain_text_streams_partials_then_the_whole_answer() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider(&fixture);
    let outcome = run(&provider, request("x")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点", "有周会。"]);
    assert_eq!(outcome.response().content.text(), "明天上午 10 点有周会。");
    let usage = provider.last_usage().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (31, 9));
}

#[tokio::test]
async fn the_request_follows_the_generate_content_shape_and_keeps_the_key_out_of_the_url() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider_with(&fixture, |c| {
        c.options.tool_choice = Some(ToolChoice::Function("list_events".into()));
        c.options.max_tokens = Some(256);
    });
    run(&provider, request_with_history()).await.response();
    let sent = &fixture.received()[0];
    assert_eq!(
        sent.path_and_query,
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert!(!sent.path_and_query.contains(KEY));
    assert_eq!(sent.headers["x-goog-api-key"].to_str().unwrap(), KEY);
    let body = &sent.body;
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "你是飞书助手。"}]})
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["name"],
        "list_events"
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["required"],
        json!(["start", "end"])
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["list_events"]}})
    );
    assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 256}));
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "明天有什么安排？"}]},
            {"role": "model", "parts": [
                {"text": "我查一下。"},
                {"functionCall": {"name": "list_events", "args": {"start": "2026-12-01", "end": "2026-12-02"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "list_events", "response": {"output": [{"summary": "周会"}]}}},
            ]},
            {"role": "model", "parts": [{"text": "明天 10 点有周会。"}]},
            {"role": "user", "parts": [{"text": "谢谢"}]},
        ])
    );
}

#[tokio::test]
async fn one_function_call_gets_a_stable_id_when_gemini_gives_none() {
    let body = event(
        json!([{"functionCall": {"name": "list_events", "args": {"start": "2026-12-01", "end": "2026-12-02"}}}]),
        Some("STOP"),
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0), Reply::sse(&body, 0)]).await;
    let provider = provider(&fixture);
    let first = run(&provider, request("x")).await;
    let call = first
        .response()
        .content
        .function_calls()
        .next()
        .unwrap()
        .clone();
    assert_eq!(call.id.as_deref(), Some("call_0_list_events"));
    assert_eq!(
        Value::Object(call.args),
        json!({"start": "2026-12-01", "end": "2026-12-02"})
    );
    let again = run(&provider, request("x")).await;
    assert_eq!(
        again
            .response()
            .content
            .function_calls()
            .next()
            .unwrap()
            .id
            .as_deref(),
        Some("call_0_list_events"),
        "the same answer gets the same id"
    );
}

#[tokio::test]
async fn parallel_calls_across_events_keep_their_order_and_ids() {
    let body = event(json!([{"text": "好的，"}]), None)
        + &event(
            json!([{"functionCall": {"id": "g1", "name": "list_events", "args": {"start": "a", "end": "b"}}}]),
            None,
        )
        + &event(
            json!([
                {"functionCall": {"name": "send_message", "args": {"chat": "产品周会", "text": "晚到"}}},
                {"functionCall": {"name": "list_events", "args": {"start": "c", "end": "d"}}},
            ]),
            Some("STOP"),
        );
    // Delivered two bytes at a time.
    let fixture = Fixture::start(vec![Reply::sse(&body, 2)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(response.content.text(), "好的，");
    assert_eq!(
        calls(response),
        vec![
            ("list_events".to_owned(), json!({"start": "a", "end": "b"})),
            (
                "send_message".to_owned(),
                json!({"chat": "产品周会", "text": "晚到"})
            ),
            ("list_events".to_owned(), json!({"start": "c", "end": "d"})),
        ]
    );
    let ids: Vec<_> = response
        .content
        .function_calls()
        .map(|c| c.id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["g1", "call_1_send_message", "call_2_list_events"]);
}

#[tokio::test]
async fn a_call_with_arguments_that_are_not_an_object_is_malformed() {
    let body = event(
        json!([
            {"functionCall": {"name": "list_events", "args": {"start": "a", "end": "b"}}},
            {"functionCall": {"name": "send_message", "args": ["not", "an", "object"]}},
        ]),
        Some("STOP"),
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(calls(response).len(), 1);
    assert_eq!(response.malformed_calls.len(), 1);
    assert_eq!(response.malformed_calls[0].name, "send_message");
}

#[tokio::test]
async fn thought_text_is_not_shown_and_signatures_are_sent_back() {
    let body = event(
        json!([
            {"text": "Let me think about the calendar…", "thought": true},
            {"functionCall": {"name": "list_events", "args": {"start": "a", "end": "b"}}, "thoughtSignature": "c2lnbmF0dXJl"},
        ]),
        Some("STOP"),
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0), Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider(&fixture);
    let outcome = run(&provider, request("x")).await;
    assert!(outcome.partials.is_empty());
    assert_eq!(outcome.response().content.text(), "");
    // The engine gives the call its own id and sends it back in the history.
    let mut next = request("x");
    next.contents.push(Content::new(
        "model",
        vec![Part::FunctionCall(FunctionCall {
            id: Some("fc_9".into()),
            name: "list_events".into(),
            args: json!({"start": "a", "end": "b"})
                .as_object()
                .unwrap()
                .clone(),
        })],
    ));
    next.contents.push(Content::new(
        "user",
        vec![Part::FunctionResponse(
            agent::FunctionResponse::from_output("list_events", json!([])).with_id("fc_9"),
        )],
    ));
    run(&provider, next).await.response();
    let sent = fixture.last_body();
    assert_eq!(
        sent["contents"][1]["parts"][0]["thoughtSignature"],
        "c2lnbmF0dXJl"
    );
}

#[tokio::test]
async fn a_stream_without_a_finish_reason_is_incomplete() {
    let cut: String = TEXT_STREAM.split_inclusive("\r\n\r\n").take(2).collect();
    let fixture = Fixture::start(vec![Reply::sse(&cut, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点"]);
    assert_eq!(outcome.error().code, "incomplete");
}

#[tokio::test]
async fn a_broken_connection_midway_is_incomplete() {
    let first: String = TEXT_STREAM.split_inclusive("\r\n\r\n").take(1).collect();
    let fixture = Fixture::start(vec![
        Reply::sse(&first, 0)
            .then(Piece::Wait(Duration::from_millis(50)))
            .then(Piece::Abort),
    ])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "incomplete");
}

#[tokio::test]
async fn error_bodies_map_to_stable_codes() {
    let cases = [
        (
            400,
            r#"[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}]"#,
            "unauthorized",
        ),
        (
            403,
            r#"{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}"#,
            "unauthorized",
        ),
        (
            404,
            r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}"#,
            "model_not_found",
        ),
        (
            400,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
            "context_length_exceeded",
        ),
    ];
    for (status, body, code) in cases {
        let fixture = Fixture::start(vec![Reply::json(status, body)]).await;
        let outcome = run(&provider(&fixture), request("x")).await;
        let error = outcome.error();
        assert_eq!(error.code, code, "{status} {body}");
        assert!(!error.message.contains(KEY));
        assert_eq!(fixture.count(), 1);
    }
}

const EXHAUSTED: &str = r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#;

#[tokio::test]
async fn a_429_is_retried_then_succeeds() {
    let fixture = Fixture::start(vec![
        Reply::json(429, EXHAUSTED),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    assert_eq!(fixture.count(), 2);
}

#[tokio::test]
async fn a_429_with_retry_after_waits_as_asked() {
    let fixture = Fixture::start(vec![
        Reply::json(429, EXHAUSTED).header("retry-after", "1"),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    let received = fixture.received();
    assert!(received[1].at - received[0].at >= Duration::from_millis(950));
}

#[tokio::test]
async fn a_503_is_retried_then_succeeds() {
    let fixture = Fixture::start(vec![
        Reply::json(503, r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    assert_eq!(fixture.count(), 2);
}

#[tokio::test]
async fn a_malformed_sse_line_is_a_malformed_stream_error() {
    let first: String = TEXT_STREAM.split_inclusive("\r\n\r\n").take(1).collect();
    let body = first + "data: {\"candidates\": [{\"content\": \r\n\r\n";
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天"]);
    assert_eq!(outcome.error().code, "malformed_stream");
}

#[tokio::test]
async fn a_blocked_prompt_is_reported() {
    let body = "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"},\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8}}\r\n\r\n";
    let fixture = Fixture::start(vec![Reply::sse(body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "blocked");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let first: String = TEXT_STREAM.split_inclusive("\r\n\r\n").take(1).collect();
    let fixture = Fixture::start(vec![Reply::sse(&first, 0).then(Piece::Hang)]).await;
    let provider = provider(&fixture);
    let mut stream = tokio::time::timeout(Duration::from_secs(5), provider.generate(request("x")))
        .await
        .unwrap()
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.content.text(), "明天");
    drop(stream);
    fixture.wait_dropped(Duration::from_secs(3)).await;
}
