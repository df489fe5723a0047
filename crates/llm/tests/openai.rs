//! The OpenAI-compatible provider against Chat Completions wire fixtures (written from the API
//! reference: `chat.completion.chunk` events, `tool_calls` deltas by index, a usage chunk with
//! no choices, `data: [DONE]`), served by a local fixture server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use agent::Model;
use common::{Fixture, Piece, Reply, calls, fast, request, request_with_history, run};
use futures::StreamExt;
use llm::{ApiKey, OpenAiProvider, ProviderConfig, ProviderKind, ToolChoice};
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789abcdef";

fn provider(fixture: &Fixture) -> OpenAiProvider {
    provider_with(fixture, |_| {})
}

fn provider_with(fixture: &Fixture, change: impl FnOnce(&mut ProviderConfig)) -> OpenAiProvider {
    let config = common::config(
        fixture,
        ProviderKind::OpenAiCompatible,
        "OpenAI",
        "gpt-4.1-mini",
        KEY,
        change,
    );
    OpenAiProvider::new(config).unwrap()
}

/// One `chat.completion.chunk` event.
fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-abc123",
        "object": "chat.completion.chunk",
        "created": 1_764_500_000,
        "model": "gpt-4.1-mini-2025-04-14",
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    });
    format!("data: {chunk}\n\n")
}

const USAGE: &str = "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":7,\"total_tokens\":49,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n";

const DONE: &str = "data: [DONE]\n\n";

/// A plain text answer exactly as the service streams it.
const TEXT_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"明天\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"上午 10 点\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"有周会。\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"system_fingerprint\":\"fp_test\",\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":7,\"total_tokens\":49}}\n\n",
    "data: [DONE]\n\n",
);

/// One tool call: id and name first, arguments in fragments.
const TOOL_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-t1\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_Xyz123\",\"type\":\"function\",\"function\":{\"name\":\"list_events\",\"arguments\":\"\"}}],\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-t1\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"st\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-t1\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"art\\\":\\\"2026-12-01\\\",\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-t1\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"end\\\":\\\"2026-12-02\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-t1\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// A stream where a call's arguments arrive `piece` characters at a time.
fn tool_calls_stream(calls: &[(&str, &str, &str)], piece: usize, text: &str) -> String {
    let mut out = chunk(json!({"role": "assistant", "content": ""}), None);
    if !text.is_empty() {
        out += &chunk(json!({"content": text}), None);
    }
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        out += &chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        );
        let letters: Vec<char> = arguments.chars().collect();
        for fragment in letters.chunks(piece.max(1)) {
            let fragment: String = fragment.iter().collect();
            out += &chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                None,
            );
        }
    }
    out += &chunk(json!({}), Some("tool_calls"));
    out += USAGE;
    out += DONE;
    out
}

#[tokio::test]
async fn plain_text_streams_partials_then_the_whole_answer() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider(&fixture);
    let outcome = run(&provider, request("明天有什么安排？")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点", "有周会。"]);
    let response = outcome.response();
    assert_eq!(response.content.text(), "明天上午 10 点有周会。");
    assert!(response.content.is_model());
    assert!(calls(response).is_empty());
    assert_eq!(outcome.extra, 0);
    let usage = provider.last_usage().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (42, 7));
}

#[tokio::test]
async fn the_request_follows_the_chat_completions_shape() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider_with(&fixture, |c| {
        c.options.tool_choice = Some(ToolChoice::Function("list_events".into()));
        c.options.max_tokens = Some(512);
    });
    run(&provider, request_with_history()).await.response();
    let received = fixture.received();
    let sent = &received[0];
    assert_eq!(sent.path_and_query, "/chat/completions");
    assert_eq!(
        sent.headers["authorization"].to_str().unwrap(),
        format!("Bearer {KEY}")
    );
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-4.1-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "list_events"}})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "list_events");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["start", "end"])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "你是飞书助手。"},
            {"role": "user", "content": "明天有什么安排？"},
            {"role": "assistant", "content": "我查一下。", "tool_calls": [
                {"id": "fc_1", "type": "function", "function": {"name": "list_events", "arguments": "{\"start\":\"2026-12-01\",\"end\":\"2026-12-02\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "fc_1", "content": "{\"output\":[{\"summary\":\"周会\"}]}"},
            {"role": "assistant", "content": "明天 10 点有周会。"},
            {"role": "user", "content": "谢谢"},
        ])
    );
}

#[tokio::test]
async fn a_request_without_tools_sends_no_tools_and_no_tool_choice() {
    let fixture = Fixture::start(vec![Reply::sse(TEXT_STREAM, 0)]).await;
    let provider = provider_with(&fixture, |c| {
        c.options.tool_choice = Some(ToolChoice::Required);
        c.options.include_usage = false;
        c.api_key = None;
    });
    let mut req = request("hi");
    req.config = None;
    run(&provider, req).await.response();
    let sent = &fixture.received()[0];
    assert!(sent.body.get("tools").is_none());
    assert!(sent.body.get("tool_choice").is_none());
    assert!(sent.body.get("stream_options").is_none());
    assert!(
        sent.headers.get("authorization").is_none(),
        "no key, no header"
    );
}

#[tokio::test]
async fn one_tool_call_is_assembled_from_its_fragments() {
    let fixture = Fixture::start(vec![Reply::sse(TOOL_STREAM, 0)]).await;
    let outcome = run(&provider(&fixture), request("明天有什么安排？")).await;
    assert!(outcome.partials.is_empty());
    let response = outcome.response();
    let call = response.content.function_calls().next().unwrap();
    assert_eq!(call.id.as_deref(), Some("call_Xyz123"));
    assert_eq!(call.name, "list_events");
    assert_eq!(
        Value::Object(call.args.clone()),
        json!({"start": "2026-12-01", "end": "2026-12-02"})
    );
    assert!(response.malformed_calls.is_empty());
}

#[tokio::test]
async fn parallel_tool_calls_keep_their_order_and_text() {
    let body = tool_calls_stream(
        &[
            (
                "call_1",
                "list_events",
                r#"{"start":"2026-12-01","end":"2026-12-02"}"#,
            ),
            (
                "call_2",
                "send_message",
                r#"{"chat":"产品周会","text":"我晚到 5 分钟"}"#,
            ),
            (
                "call_3",
                "list_events",
                r#"{"start":"2026-12-03","end":"2026-12-04"}"#,
            ),
        ],
        6,
        "好的，",
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(response.content.text(), "好的，");
    assert_eq!(
        calls(response),
        vec![
            (
                "list_events".to_owned(),
                json!({"start":"2026-12-01","end":"2026-12-02"})
            ),
            (
                "send_message".to_owned(),
                json!({"chat":"产品周会","text":"我晚到 5 分钟"})
            ),
            (
                "list_events".to_owned(),
                json!({"start":"2026-12-03","end":"2026-12-04"})
            ),
        ]
    );
    let ids: Vec<_> = response
        .content
        .function_calls()
        .map(|c| c.id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
}

#[tokio::test]
async fn arguments_split_over_many_chunks_and_network_reads_still_parse() {
    let arguments = r#"{"chat":"产品周会 🚀","text":"第一行\n第二行 \"引号\"","members":12}"#;
    let body = tool_calls_stream(&[("call_1", "send_message", arguments)], 1, "");
    // One character per event, and the bytes delivered three at a time (splitting UTF-8).
    let fixture = Fixture::start(vec![Reply::sse(&body, 3)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![(
            "send_message".to_owned(),
            serde_json::from_str::<Value>(arguments).unwrap()
        )]
    );
}

#[tokio::test]
async fn interleaved_fragments_of_parallel_calls_go_to_the_right_call() {
    let mut body = chunk(json!({"role": "assistant"}), None);
    body += &chunk(
        json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "list_events", "arguments": "{\"start\":"}}]}),
        None,
    );
    body += &chunk(
        json!({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "send_message", "arguments": "{\"text\":"}}]}),
        None,
    );
    body += &chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"1\"}"}}]}),
        None,
    );
    body += &chunk(
        json!({"tool_calls": [{"index": 1, "function": {"arguments": "\"hi\"}"}}]}),
        None,
    );
    body += &chunk(json!({}), Some("tool_calls"));
    body += DONE;
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![
            ("list_events".to_owned(), json!({"start": "1"})),
            ("send_message".to_owned(), json!({"text": "hi"})),
        ]
    );
}

#[tokio::test]
async fn malformed_arguments_become_malformed_calls_not_errors() {
    let body = tool_calls_stream(
        &[
            ("call_ok", "list_events", r#"{"start":"a","end":"b"}"#),
            (
                "call_bad",
                "send_message",
                r#"{"chat": "产品周会", "text": "未闭合"#,
            ),
            ("call_arr", "send_message", r#"["not", "an", "object"]"#),
        ],
        5,
        "",
    );
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(
        calls(response),
        vec![("list_events".to_owned(), json!({"start": "a", "end": "b"}))]
    );
    assert_eq!(response.malformed_calls.len(), 2);
    let bad = &response.malformed_calls[0];
    assert_eq!(bad.id.as_deref(), Some("call_bad"));
    assert_eq!(bad.name, "send_message");
    assert_eq!(bad.arguments, r#"{"chat": "产品周会", "text": "未闭合"#);
    assert!(bad.error.contains("not valid JSON"), "{}", bad.error);
    assert!(
        response.malformed_calls[1].error.contains("not an object"),
        "{}",
        response.malformed_calls[1].error
    );
}

#[tokio::test]
async fn a_call_without_arguments_gets_an_empty_object() {
    let body = tool_calls_stream(&[("call_1", "list_events", "")], 1, "");
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(
        calls(outcome.response()),
        vec![("list_events".to_owned(), json!({}))]
    );
}

#[tokio::test]
async fn a_stream_cut_off_midway_is_incomplete_after_its_partials() {
    // The server ends the body cleanly but before the finish reason and [DONE].
    let cut = TEXT_STREAM.split("有周会").next().unwrap();
    let fixture = Fixture::start(vec![Reply::sse(cut, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天", "上午 10 点"]);
    assert_eq!(outcome.error().code, "incomplete");
    assert_eq!(fixture.count(), 1, "a started stream is never retried");
}

#[tokio::test]
async fn a_broken_connection_midway_is_incomplete() {
    let first_two: String = TEXT_STREAM.split_inclusive("\n\n").take(2).collect();
    let fixture = Fixture::start(vec![
        Reply::sse(&first_two, 0)
            .then(Piece::Wait(Duration::from_millis(50)))
            .then(Piece::Abort),
    ])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天"]);
    assert_eq!(outcome.error().code, "incomplete");
}

#[tokio::test]
async fn a_stream_ending_with_a_finish_reason_but_no_done_is_accepted() {
    let without_done = TEXT_STREAM.replace(DONE, "");
    let fixture = Fixture::start(vec![Reply::sse(&without_done, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.response().content.text(), "明天上午 10 点有周会。");
}

#[tokio::test]
async fn a_bad_key_is_unauthorized_and_the_key_is_never_shown() {
    let fixture = Fixture::start(vec![Reply::json(
        401,
        &format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
        ),
    )])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let error = outcome.error();
    assert_eq!(error.code, "unauthorized");
    assert!(
        error.message.contains("API key in settings"),
        "{}",
        error.message
    );
    assert!(!error.message.contains(KEY));
    assert!(!format!("{error:?}").contains(KEY));
    assert_eq!(fixture.count(), 1, "a refused key is not retried");
}

#[tokio::test]
async fn an_unknown_model_is_model_not_found() {
    let fixture = Fixture::start(vec![Reply::json(
        404,
        r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
    )])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let error = outcome.error();
    assert_eq!(error.code, "model_not_found");
    assert!(error.message.contains("gpt-4.1-mini"), "{}", error.message);
}

#[tokio::test]
async fn a_context_overflow_is_context_length_exceeded() {
    let fixture = Fixture::start(vec![Reply::json(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    )])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "context_length_exceeded");
    assert_eq!(fixture.count(), 1);
}

const RATE_LIMITED: &str = r#"{"error":{"message":"Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;

#[tokio::test]
async fn a_429_is_retried_with_backoff_then_succeeds() {
    let fixture = Fixture::start(vec![
        Reply::json(429, RATE_LIMITED),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.response().content.text(), "明天上午 10 点有周会。");
    assert_eq!(fixture.count(), 2);
    // The retry sends the same request.
    let received = fixture.received();
    assert_eq!(received[0].body, received[1].body);
}

#[tokio::test]
async fn a_429_with_retry_after_waits_as_asked() {
    let fixture = Fixture::start(vec![
        Reply::json(429, RATE_LIMITED).header("retry-after", "1"),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    outcome.response();
    let received = fixture.received();
    let waited = received[1].at - received[0].at;
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
}

#[tokio::test]
async fn a_retry_after_beyond_the_bound_is_reported_not_waited() {
    let fixture = Fixture::start(vec![
        Reply::json(429, RATE_LIMITED).header("retry-after", "3600"),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    let started = Instant::now();
    let outcome = run(&provider(&fixture), request("x")).await;
    let error = outcome.error();
    assert_eq!(error.code, "rate_limited");
    assert!(error.message.contains("3600 s"), "{}", error.message);
    assert_eq!(fixture.count(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let fixture = Fixture::start(vec![Reply::json(
        429,
        r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
    )])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "quota_exceeded");
    assert_eq!(fixture.count(), 1);
}

#[tokio::test]
async fn a_5xx_is_retried_then_succeeds() {
    let fixture = Fixture::start(vec![
        Reply::json(
            503,
            r#"{"error":{"message":"The server is overloaded.","type":"server_error"}}"#,
        ),
        Reply::json(502, "<html>bad gateway</html>"),
        Reply::sse(TEXT_STREAM, 0),
    ])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    outcome.response();
    assert_eq!(fixture.count(), 3);
}

#[tokio::test]
async fn retries_are_bounded() {
    let busy = || Reply::json(500, r#"{"error":{"message":"boom","type":"server_error"}}"#);
    let fixture = Fixture::start(vec![busy(), busy(), busy(), busy()]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "unavailable");
    assert_eq!(fixture.count(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn an_error_event_opening_the_stream_is_retried() {
    let error = "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n";
    let fixture = Fixture::start(vec![Reply::sse(error, 0), Reply::sse(TEXT_STREAM, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    outcome.response();
    assert_eq!(fixture.count(), 2);
}

#[tokio::test]
async fn an_error_event_after_text_is_reported_not_retried() {
    let first_two: String = TEXT_STREAM.split_inclusive("\n\n").take(2).collect();
    let body = first_two
        + "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n";
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天"]);
    assert_eq!(outcome.error().code, "unavailable");
    assert_eq!(fixture.count(), 1);
}

#[tokio::test]
async fn a_malformed_sse_line_is_a_malformed_stream_error() {
    let first_two: String = TEXT_STREAM.split_inclusive("\n\n").take(2).collect();
    let body =
        first_two + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}\n\n" + DONE;
    let fixture = Fixture::start(vec![Reply::sse(&body, 0)]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.partials, ["明天"]);
    let error = outcome.error();
    assert_eq!(error.code, "malformed_stream");
    assert_eq!(outcome.extra, 0, "nothing after the error");
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_a_malformed_stream() {
    let mut reply = Reply::sse(&chunk(json!({"content": "a"}), None), 0);
    reply
        .pieces
        .push(Piece::Bytes(b"data: \xff\xfe\n\n".to_vec()));
    let fixture = Fixture::start(vec![reply]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "malformed_stream");
}

#[tokio::test]
async fn an_html_page_instead_of_a_stream_is_malformed() {
    let mut reply = Reply::json(200, "<html><body>Please log in to the Wi-Fi</body></html>");
    reply.headers = vec![("content-type".into(), "text/html".into())];
    let fixture = Fixture::start(vec![reply]).await;
    let outcome = run(&provider(&fixture), request("x")).await;
    assert_eq!(outcome.error().code, "malformed_stream");
}

#[tokio::test]
async fn a_server_ignoring_stream_true_is_still_understood() {
    let fixture = Fixture::start(vec![Reply::json(
        200,
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":1764500000,"model":"qwen3:8b","choices":[{"index":0,"message":{"role":"assistant","content":"好的","tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_events","arguments":"{\"start\":\"a\",\"end\":\"b\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
    )])
    .await;
    let outcome = run(&provider(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(response.content.text(), "好的");
    assert_eq!(
        calls(response),
        vec![("list_events".to_owned(), json!({"start": "a", "end": "b"}))]
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let first_two: String = TEXT_STREAM.split_inclusive("\n\n").take(2).collect();
    let fixture = Fixture::start(vec![Reply::sse(&first_two, 0).then(Piece::Hang)]).await;
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
    // Nothing else is coming: the server only sends keep-alives.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), stream.next())
            .await
            .is_err()
    );
    drop(stream);
    fixture.wait_dropped(Duration::from_secs(3)).await;
}

#[tokio::test]
async fn a_silent_server_times_out_as_incomplete() {
    let first_two: String = TEXT_STREAM.split_inclusive("\n\n").take(2).collect();
    let fixture = Fixture::start(vec![Reply::sse(&first_two, 0).then(Piece::Stall)]).await;
    let provider = provider_with(&fixture, |c| {
        c.http.read_timeout = Duration::from_millis(300)
    });
    let started = Instant::now();
    let outcome = run(&provider, request("x")).await;
    assert_eq!(outcome.partials, ["明天"]);
    let error = outcome.error();
    assert_eq!(error.code, "incomplete");
    assert!(
        error.message.contains("nothing arrived"),
        "{}",
        error.message
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_unreachable_service_is_a_network_error() {
    let port = common::dead_port().await;
    let mut config = ProviderConfig::new(
        ProviderKind::OpenAiCompatible,
        "Ollama",
        format!("http://127.0.0.1:{port}/v1"),
        "qwen3:8b",
        None,
    );
    config.http = fast();
    let provider = OpenAiProvider::new(config).unwrap();
    let outcome = run(&provider, request("x")).await;
    let error = outcome.error();
    assert_eq!(error.code, "network");
    assert!(error.message.contains("Ollama"), "{}", error.message);
}

#[test]
fn the_provider_debug_output_hides_the_key() {
    let config = ProviderConfig::new(
        ProviderKind::OpenAiCompatible,
        "OpenAI",
        "https://api.openai.com/v1",
        "gpt-4.1-mini",
        Some(ApiKey::new(KEY)),
    );
    assert!(!format!("{config:?}").contains(KEY));
    let provider = OpenAiProvider::new(config).unwrap();
    assert!(!format!("{provider:?}").contains(KEY));
}
