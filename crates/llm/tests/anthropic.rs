//! The Anthropic provider against Messages streaming fixtures (written from the API reference:
//! `message_start`, `content_block_start/delta/stop` with `text_delta` and `input_json_delta`,
//! `ping`, `message_delta`, `message_stop`, and `error` events).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use agent::Model;
use common::{Fixture, Piece, Reply, calls, request, request_with_history, run};
use futures::StreamExt;
use llm::{AnthropicProvider, ProviderConfig, ProviderKind, ToolChoice};
use serde_json::{Value, json};

const KEY: &str = "sk-ant-test-0123456789abcdef";

fn provider(fixture: &Fixture) -> AnthropicProvider {
    provider_with(fixture, |_| {})
}

fn provider_with(fixture: &Fixture, change: impl FnOnce(&mut ProviderConfig)) -> AnthropicProvider {
    let config = common::config(
        fixture,
        ProviderKind::Anthropic,
        "Anthropic Claude",
        "claude-sonnet-4-5",
        KEY,
        change,
    );
    AnthropicProvider::new(config).unwrap()
}

fn ev(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

const START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2}}}\n\n";
const STOP: &str = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// A text answer as the service streams it.
const TEXT_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"明天\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"上午 10 点有周会。\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// Text, then tool-use blocks whose input arrives `piece` characters at a time.
fn tool_stream(text: &str, tools: &[(&str, &str, &str)], piece: usize) -> String {
    let mut out = START.to_owned();
    let mut index = 0;
    if !text.is_empty() {
        out += &ev(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        );
        out += &ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        );
        out += &ev(json!({"type": "content_block_stop", "index": 0}));
        index = 1;
    }
    for (id, name, input) in tools {
        out += &ev(
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        );
        out += &ev(
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        );
        let letters: Vec<char> = input.chars().collect();
        for fragment in letters.chunks(piece.max(1)) {
            let fragment: String = fragment.iter().collect();
            out += &ev(
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}}),
            );
        }
        out += &ev(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    out += &ev(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}),
    );
    out += STOP;
    out
}

#[tokio::test]
async fn plain_text_streams_partials_then_the_whole_answer() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider(&fixture);
    let outcome = run(&provider, request("明天有什么安排？")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点有周会。"]);
    assert_eq!(outcome.response().content.text(), "明天上午 10 点有周会。");
    assert!(calls(outcome.response()).is_empty());
    let usage = provider.last_usage().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (472, 15));
}

#[tokio::test]
async fn the_request_follows_the_messages_shape() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider_with(&fixture, |c| {
        c.options.tool_choice = Some(ToolChoice::Required);
    });
    run(&provider, request_with_history()).await.response();
    let sent = &fixture.received()[0];
    assert_eq!(sent.path_and_query, "/messages");
    assert_eq!(sent.headers["x-api-key"].to_str().unwrap(), KEY);
    assert_eq!(
        sent.headers["anthropic-version"].to_str().unwrap(),
        "2023-06-01"
    );
    assert!(sent.headers.get("authorization").is_none());
    let body = &sent.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"], "你是飞书助手。");
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(body["tools"][0]["name"], "list_events");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "明天有什么安排？"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "我查一下。"},
                {"type": "tool_use", "id": "fc_1", "name": "list_events", "input": {"start": "2026-12-01", "end": "2026-12-02"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "fc_1", "content": "{\"output\":[{\"summary\":\"周会\"}]}", "is_error": false},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "明天 10 点有周会。"}]},
            {"role": "user", "content": [{"type": "text", "text": "谢谢"}]},
        ])
    );
}

#[tokio::test]
async fn one_tool_call_is_assembled_from_input_json_deltas() {
    let body = tool_stream(
        "我查一下日程。",
        &[(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "list_events",
            r#"{"start": "2026-12-01", "end": "2026-12-02"}"#,
        )],
        7,
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["我查一下日程。"]);
    let response = outcome.response();
    assert_eq!(response.content.text(), "我查一下日程。");
    let call = response.content.function_calls().next().unwrap();
    assert_eq!(call.id.as_deref(), Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6"));
    assert_eq!(
        Value::Object(call.args.clone()),
        json!({"start": "2026-12-01", "end": "2026-12-02"})
    );
}

#[tokio::test]
async fn parallel_tool_calls_keep_their_order() {
    let body = tool_stream(
        "",
        &[
            ("toolu_a", "list_events", r#"{"start":"a","end":"b"}"#),
            (
                "toolu_b",
                "send_message",
                r#"{"chat":"产品周会","text":"晚到"}"#,
            ),
        ],
        4,
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![
            ("list_events".to_owned(), json!({"start": "a", "end": "b"})),
            (
                "send_message".to_owned(),
                json!({"chat": "产品周会", "text": "晚到"})
            ),
        ]
    );
}

#[tokio::test]
async fn input_split_over_many_chunks_and_reads_still_parses() {
    let input = r#"{"chat":"产品周会 🚀","text":"第一行\n第二行 \"引号\""}"#;
    let body = tool_stream("", &[("toolu_a", "send_message", input)], 1);
    let fixture = Fixture::start(vec![Reply::sse(&body, 2)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![(
            "send_message".to_owned(),
            serde_json::from_str::<Value>(input).unwrap()
        )]
    );
}

#[tokio::test]
async fn a_tool_without_input_gets_an_empty_object() {
    let body = tool_stream("", &[("toolu_a", "list_events", "")], 1);
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![("list_events".to_owned(), json!({}))]
    );
}

#[tokio::test]
async fn malformed_input_becomes_a_malformed_call() {
    let body = tool_stream(
        "",
        &[
            ("toolu_a", "list_events", r#"{"start":"a","end":"b"}"#),
            ("toolu_b", "send_message", r#"{"chat": "产品周会", "te"#),
        ],
        3,
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(calls(response).len(), 1);
    assert_eq!(response.malformed_calls.len(), 1);
    assert_eq!(response.malformed_calls[0].id.as_deref(), Some("toolu_b"));
    assert_eq!(
        response.malformed_calls[0].arguments,
        r#"{"chat": "产品周会", "te"#
    );
}

#[tokio::test]
async fn a_stream_cut_off_midway_is_incomplete() {
    let cut = TEXT_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap();
    let fixture = Fixture::start(vec![Reply::sse(cut, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点有周会。"]);
    assert_eq!(outcome.error().code, "incomplete");
    assert_eq!(fixture.count(), 1);
}

#[tokio::test]
async fn a_cut_in_the_middle_of_an_event_is_incomplete_not_malformed() {
    let cut = &TEXT_STREAM[..TEXT_STREAM.find("text_delta\",\"text\":\"上午").unwrap()];
    let fixture = Fixture::start(vec![Reply::sse(cut, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "incomplete");
}

#[tokio::test]
async fn error_bodies_map_to_stable_codes() {
    let cases = [
        (
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            "unauthorized",
        ),
        (
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#,
            "unauthorized",
        ),
        (
            404,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#,
            "model_not_found",
        ),
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            "context_length_exceeded",
        ),
        (
            413,
            r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
            "context_length_exceeded",
        ),
    ];
    for (status, body, code) in cases {
        let fixture = Fixture::start(vec![Reply::json(status, body)]).await;
        let outcome = run(&provider(&fixture), request("x")).await;
        let error = outcome.error();
        assert_eq!(error.code, code, "{status} {body}");
        assert!(!error.message.contains(KEY));
        assert_eq!(fixture.count(), 1, "{status} is not retried");
    }
}

const RATE_LIMITED: &str = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;

#[tokio::test]
async fn a_429_is_retried_then_succeeds() {
    let fixture = Fixture::start(vec![
        Reply::json(429, RATE_LIMITED),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    assert_eq!(fixture.count(), 2);
}

#[tokio::test]
async fn a_429_with_retry_after_waits_as_asked() {
    let fixture = Fixture::start(vec![
        Reply::json(429, RATE_LIMITED).header("retry-after", "1"),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    let received = fixture.received();
    assert!(received[1].at - received[0].at >= Duration::from_millis(950));
}

#[tokio::test]
async fn overloaded_529_and_500_are_retried_then_succeed() {
    let fixture = Fixture::start(vec![
        Reply::json(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::json(
            500,
            r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
        ),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    run(&provider(&fixture), request("x")).await.response();
    assert_eq!(fixture.count(), 3);
}

#[tokio::test]
async fn an_overloaded_error_event_before_any_text_is_retried() {
    let overloaded = START.to_owned()
        + "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let fixture =
        Fixture::start(vec![Reply::sse(&overloaded, 0), Reply::sse(TEXT_STREAM, 0)]).await;
    run(&provider(&fixture), request("x")).await.response();
    assert_eq!(fixture.count(), 2);
}

#[tokio::test]
async fn an_error_event_after_text_is_reported() {
    let upto = TEXT_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap()
        .to_owned();
    let body = upto
        + "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials.len(), 2);
    assert_eq!(outcome.error().code, "unavailable");
    assert_eq!(fixture.count(), 1);
}

#[tokio::test]
async fn a_malformed_sse_line_is_a_malformed_stream_error() {
    let upto = TEXT_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap()
        .to_owned();
    let body = upto
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\n\n"
        + STOP;
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "malformed_stream");
    assert_eq!(outcome.extra, 0);
}

#[tokio::test]
async fn a_delta_for_a_block_never_started_is_malformed() {
    let body = START.to_owned()
        + &ev(
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}),
        )
        + STOP;
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "malformed_stream");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let upto = TEXT_STREAM
        .split("event: content_block_delta")
        .next()
        .unwrap()
        .to_owned()
        + &ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "明天"}}),
        );
    let fixture = Fixture::start(vec![Reply::sse(&upto, 0).then(Piece::Hang)]).await;
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

#[test]
fn a_provider_without_a_key_is_refused_at_configuration() {
    let config = ProviderConfig::new(
        ProviderKind::Anthropic,
        "Anthropic Claude",
        "https://api.anthropic.com/v1",
        "claude-sonnet-4-5",
        None,
    );
    let error = AnthropicProvider::new(config).unwrap_err();
    assert!(error.to_string().contains("anthropic_api_key"), "{error}");
}
