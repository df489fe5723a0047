//! Every way an answer can end reaches the engine as an `agent::FinishReason`, with what was
//! said before it; none is dropped, and none turns an answer that was cut off or withheld into
//! one that looks complete.
//!
//! The streams are recorded from the providers' documentation:
//! - OpenAI, Chat Completions streaming reference (platform.openai.com/docs/api-reference/
//!   chat-streaming): `finish_reason` is `stop`, `length`, `tool_calls` or `content_filter`.
//! - Zhipu, 对话补全 (docs.bigmodel.cn/api-reference): `finish_reason` `sensitive` when the
//!   content filter stops the answer.
//! - Anthropic, "Handling stop reasons" (platform.claude.com/docs/en/build-with-claude/
//!   handling-stop-reasons): `refusal`, `max_tokens`.
//! - Gemini, `FinishReason` (ai.google.dev/api/generate-content#FinishReason): `SAFETY`,
//!   `RECITATION`, `MALFORMED_FUNCTION_CALL` (with a `finishMessage`), `MAX_TOKENS`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{claude, gemini, openai};

use agent::FinishReason;
use common::{Fixture, Reply, request, run};

#[tokio::test]
async fn an_openai_content_filter_is_carried_with_the_text_before_it() {
    let stream = concat!(
        "data: {\"id\":\"chatcmpl-cf1\",\"object\":\"chat.completion.chunk\",\"created\":1764560200,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-cf1\",\"object\":\"chat.completion.chunk\",\"created\":1764560200,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"关于这个话题，\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-cf1\",\"object\":\"chat.completion.chunk\",\"created\":1764560200,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"content_filter\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let outcome = run(&openai(&fixture), request("x")).await;
    let response = outcome.response();
    assert_eq!(response.content.text(), "关于这个话题，");
    assert_eq!(response.finish_reason, Some(FinishReason::ContentFilter));
}

#[tokio::test]
async fn glm_sensitive_is_a_content_filter() {
    let stream = concat!(
        "data: {\"id\":\"2025120117\",\"created\":1764560300,\"model\":\"glm-5.3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"好的\"}}]}\n\n",
        "data: {\"id\":\"2025120117\",\"created\":1764560300,\"model\":\"glm-5.3\",\"choices\":[{\"index\":0,\"finish_reason\":\"sensitive\",\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,\"total_tokens\":10}}\n\n",
        "data: [DONE]\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let response = run(&openai(&fixture), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(response.finish_reason, Some(FinishReason::ContentFilter));
}

#[tokio::test]
async fn a_tool_call_cut_off_at_length_is_a_malformed_call_with_max_tokens() {
    let stream = concat!(
        "data: {\"id\":\"chatcmpl-len\",\"object\":\"chat.completion.chunk\",\"created\":1764560400,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_L1\",\"type\":\"function\",\"function\":{\"name\":\"send_message\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-len\",\"object\":\"chat.completion.chunk\",\"created\":1764560400,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"chat\\\":\\\"产品周会\\\",\\\"text\\\":\\\"各位好，本周\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-len\",\"object\":\"chat.completion.chunk\",\"created\":1764560400,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let response = run(&openai(&fixture), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(response.finish_reason, Some(FinishReason::MaxTokens));
    assert_eq!(response.malformed_calls.len(), 1);
    assert_eq!(response.malformed_calls[0].name, "send_message");
    assert!(response.content.function_calls().next().is_none());
}

fn claude_stream(text: &str, stop_reason: &str) -> String {
    format!(
        concat!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_01R\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-5-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{{\"input_tokens\":20,\"output_tokens\":1}}}}}}\n\n",
            "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n",
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n",
            "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n",
            "event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{}\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":9}}}}\n\n",
            "event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
        ),
        text, stop_reason
    )
}

#[tokio::test]
async fn a_claude_refusal_and_a_max_tokens_cut_are_carried() {
    for (stop, expected) in [
        ("refusal", FinishReason::Refusal),
        ("max_tokens", FinishReason::MaxTokens),
        ("end_turn", FinishReason::Stop),
    ] {
        let fixture = Fixture::start(vec![Reply::sse(&claude_stream("我", stop), 0)]).await;
        let response = run(&claude(&fixture), request("x"))
            .await
            .response()
            .clone();
        assert_eq!(response.finish_reason, Some(expected), "{stop}");
        assert_eq!(response.content.text(), "我");
    }
}

fn gemini_stream(parts: &str, finish: &str, extra: &str) -> String {
    format!(
        "data: {{\"candidates\": [{{\"content\": {{\"parts\": {parts},\"role\": \"model\"}},\"finishReason\": \"{finish}\",\"index\": 0{extra}}}],\"usageMetadata\": {{\"promptTokenCount\": 12,\"candidatesTokenCount\": 3,\"totalTokenCount\": 15}},\"modelVersion\": \"gemini-3.8-flash\"}}\r\n\r\n"
    )
}

#[tokio::test]
async fn gemini_safety_recitation_and_max_tokens_are_answers_that_say_why_they_stopped() {
    for (finish, expected) in [
        ("SAFETY", FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::Recitation),
        ("MAX_TOKENS", FinishReason::MaxTokens),
    ] {
        // The text before the stop arrives first, then an event that only says why.
        let stream = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"部分回答\"}],\"role\": \"model\"},\"index\": 0}],\"modelVersion\": \"gemini-3.8-flash\"}\r\n\r\n"
            .to_owned()
            + &format!(
                "data: {{\"candidates\": [{{\"finishReason\": \"{finish}\",\"index\": 0,\"safetyRatings\": [{{\"category\": \"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\": \"HIGH\",\"blocked\": true}}]}}],\"usageMetadata\": {{\"promptTokenCount\": 12,\"candidatesTokenCount\": 3,\"totalTokenCount\": 15}},\"modelVersion\": \"gemini-3.8-flash\"}}\r\n\r\n"
            );
        let fixture = Fixture::start(vec![Reply::sse(&stream, 0)]).await;
        let outcome = run(&gemini(&fixture), request("x")).await;
        let response = outcome.response();
        assert_eq!(response.finish_reason, Some(expected), "{finish}");
        assert_eq!(response.content.text(), "部分回答", "{finish}");
    }
}

#[tokio::test]
async fn gemini_withholding_everything_is_an_empty_answer_with_its_reason_not_an_error() {
    let stream = "data: {\"candidates\": [{\"finishReason\": \"SAFETY\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 12,\"totalTokenCount\": 12},\"modelVersion\": \"gemini-3.8-flash\"}\r\n\r\n";
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let response = run(&gemini(&fixture), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(response.finish_reason, Some(FinishReason::ContentFilter));
    assert!(response.content.parts.is_empty());
}

#[tokio::test]
async fn gemini_malformed_function_call_is_reported_for_a_retry() {
    let stream = gemini_stream(
        "[]",
        "MALFORMED_FUNCTION_CALL",
        ",\"finishMessage\": \"Malformed function call: print(default_api.list_events(start='2026-12-02'\"",
    );
    let fixture = Fixture::start(vec![Reply::sse(&stream, 0)]).await;
    let response = run(&gemini(&fixture), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(
        response.finish_reason,
        Some(FinishReason::MalformedFunctionCall)
    );
    assert!(response.content.function_calls().next().is_none());
}

#[tokio::test]
async fn gemini_stop_with_calls_is_tool_calls() {
    let stream = gemini_stream(
        "[{\"functionCall\": {\"name\": \"list_events\",\"args\": {\"start\": \"2026-12-02\",\"end\": \"2026-12-03\"}}}]",
        "STOP",
        "",
    );
    let fixture = Fixture::start(vec![Reply::sse(&stream, 0)]).await;
    let response = run(&gemini(&fixture), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
}
