//! Thinking models keep their reasoning across tool calls: the reasoning is read from each
//! provider's stream into a `Part::Reasoning` (never into the answer text), and sent back where
//! the service requires it — DeepSeek's and Kimi's `reasoning_content` on the assistant messages
//! of a tool-using turn, Claude's signed `thinking` blocks — and nowhere else.
//!
//! The streams are recorded from the providers' documentation:
//! - DeepSeek, "Thinking Mode" (api-docs.deepseek.com/guides/thinking_mode): `reasoning_content`
//!   deltas at the level of `content`, then `tool_calls`; "if the model performed a tool call,
//!   the intermediate assistant's reasoning_content must participate in the context
//!   concatenation … otherwise the API will return a 400 error".
//! - Kimi, "使用思考模型" (platform.moonshot.cn/docs/guide/use-kimi-k2-thinking-model):
//!   `reasoning_content` always streams before `content`; keep it in the context of tool calls.
//! - Anthropic, "Streaming messages" (platform.claude.com/docs/en/build-with-claude/streaming),
//!   the extended-thinking example: `thinking` block, `thinking_delta`s, a `signature_delta`.
//! - Gemini, "Thinking" (ai.google.dev/gemini-api/docs/thinking): parts with `"thought": true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::claude;

use agent::{Content, FunctionCall, FunctionResponse, LlmRequest, Part, Reasoning};
use common::{Fixture, Reply, calls, request, run};
use llm::{GeminiProvider, OpenAiProvider, ProviderKind};
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789abcdef";

/// DeepSeek in thinking mode deciding to call a tool (deepseek-flash, the docs' shape).
const DEEPSEEK_TOOL_TURN: &str = concat!(
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"用户问明天的安排，\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"需要先查日历。\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_00_Nv3X\",\"type\":\"function\",\"function\":{\"name\":\"list_events\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"start\\\":\\\"2026-12-02\\\",\\\"end\\\":\\\"2026-12-03\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"9a5c1e0f\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"deepseek-flash\",\"system_fingerprint\":\"fp_ds\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":301,\"completion_tokens\":64,\"total_tokens\":365,\"prompt_tokens_details\":{\"cached_tokens\":256},\"completion_tokens_details\":{\"reasoning_tokens\":41},\"prompt_cache_hit_tokens\":256,\"prompt_cache_miss_tokens\":45}}\n\n",
    "data: [DONE]\n\n",
);

fn openai_compatible(fixture: &Fixture, preset: &str) -> OpenAiProvider {
    let preset = llm::preset(preset).unwrap();
    let mut config = preset.config(Some(llm::ApiKey::new(KEY)));
    config.base_url = fixture.base.clone();
    config.http = common::fast();
    OpenAiProvider::new(config).unwrap()
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// The history after a tool-using turn of a thinking model, and a second turn without tools:
/// user → model (reasoning + call) → result → model (reasoning + answer) → user → model
/// (reasoning + answer, no tools) → user.
fn history_with_reasoning() -> LlmRequest {
    let mut req = request("明天有什么安排？");
    req.contents.push(Content::new(
        "model",
        vec![
            Part::from_reasoning("用户问明天的安排，需要先查日历。"),
            Part::FunctionCall(FunctionCall {
                id: Some("fc_1".into()),
                name: "list_events".into(),
                args: args(json!({"start": "2026-12-02", "end": "2026-12-03"})),
            }),
        ],
    ));
    req.contents.push(Content::new(
        "user",
        vec![Part::FunctionResponse(
            FunctionResponse::from_output("list_events", json!([{"summary": "周会"}]))
                .with_id("fc_1"),
        )],
    ));
    req.contents.push(Content::new(
        "model",
        vec![
            Part::from_reasoning("日历里只有周会。"),
            Part::from_text("明天 10 点有周会。"),
        ],
    ));
    req.contents.push(Content::user_text("谢谢"));
    req.contents.push(Content::new(
        "model",
        vec![
            Part::from_reasoning("礼貌回应即可。"),
            Part::from_text("不客气！"),
        ],
    ));
    req.contents.push(Content::user_text("后天呢？"));
    req
}

fn assistant_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}

#[tokio::test]
async fn deepseek_reasoning_is_kept_apart_from_the_answer_and_streamed_live() {
    let fixture = Fixture::start(vec![Reply::sse(DEEPSEEK_TOOL_TURN, 7)]).await;
    let outcome = run(&openai_compatible(&fixture, "deepseek"), request("明天？")).await;
    let response = outcome.response();
    assert_eq!(
        outcome.reasoning.concat(),
        "用户问明天的安排，需要先查日历。"
    );
    assert_eq!(response.content.text(), "", "reasoning is not the answer");
    assert_eq!(
        response.content.parts[0],
        Part::Reasoning(Reasoning::new("用户问明天的安排，需要先查日历。"))
    );
    assert_eq!(
        calls(response),
        [(
            "list_events".to_owned(),
            json!({"start": "2026-12-02", "end": "2026-12-03"})
        )]
    );
}

#[tokio::test]
async fn deepseek_gets_reasoning_content_back_on_every_assistant_message_of_a_tool_turn() {
    let fixture = Fixture::start(vec![Reply::sse(DEEPSEEK_TOOL_TURN, 0)]).await;
    run(
        &openai_compatible(&fixture, "deepseek"),
        history_with_reasoning(),
    )
    .await
    .response();
    let assistants = assistant_messages(&fixture.last_body());
    assert_eq!(assistants.len(), 3);
    // The tool-using turn: both of its assistant messages carry their reasoning.
    assert_eq!(
        assistants[0]["reasoning_content"],
        "用户问明天的安排，需要先查日历。"
    );
    assert!(assistants[0]["tool_calls"].is_array());
    assert_eq!(assistants[1]["reasoning_content"], "日历里只有周会。");
    // A turn without tools: DeepSeek ignores it, so it is not sent.
    assert!(assistants[2].get("reasoning_content").is_none());
    assert_eq!(assistants[2]["content"], "不客气！");
}

#[tokio::test]
async fn kimi_on_both_hosts_gets_its_reasoning_back_too() {
    for preset in ["moonshot", "moonshot_intl"] {
        let fixture = Fixture::start(vec![Reply::sse(DEEPSEEK_TOOL_TURN, 0)]).await;
        run(
            &openai_compatible(&fixture, preset),
            history_with_reasoning(),
        )
        .await
        .response();
        let assistants = assistant_messages(&fixture.last_body());
        assert_eq!(
            assistants[0]["reasoning_content"], "用户问明天的安排，需要先查日历。",
            "{preset}"
        );
    }
}

#[tokio::test]
async fn openai_never_gets_reasoning_content() {
    let fixture = Fixture::start(vec![Reply::sse(DEEPSEEK_TOOL_TURN, 0)]).await;
    run(
        &openai_compatible(&fixture, "openai"),
        history_with_reasoning(),
    )
    .await
    .response();
    let body = fixture.last_body();
    assert!(
        !body.to_string().contains("reasoning_content"),
        "OpenAI does not accept the field: {body}"
    );
    // And the reasoning never leaks into the text the model reads as its own answer.
    assert_eq!(
        assistant_messages(&body)[1]["content"],
        "明天 10 点有周会。"
    );
}

/// Kimi's `kimi-k2.6` in the docs' shape: reasoning first, then the answer, with usage in
/// `choices[0].usage` of the last chunk (Kimi streaming guide).
const KIMI_ANSWER: &str = concat!(
    "data: {\"id\":\"chatcmpl-6929a1\",\"object\":\"chat.completion.chunk\",\"created\":1764560100,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"1+1 是基本加法，\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-6929a1\",\"object\":\"chat.completion.chunk\",\"created\":1764560100,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"答案是 2。\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-6929a1\",\"object\":\"chat.completion.chunk\",\"created\":1764560100,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"1+1=2。\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-6929a1\",\"object\":\"chat.completion.chunk\",\"created\":1764560100,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":13,\"total_tokens\":32}}]}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn kimi_reasoning_then_answer() {
    let fixture = Fixture::start(vec![Reply::sse(KIMI_ANSWER, 0)]).await;
    let outcome = run(&openai_compatible(&fixture, "moonshot"), request("1+1?")).await;
    let response = outcome.response();
    assert_eq!(outcome.text(), "1+1=2。");
    assert_eq!(response.content.text(), "1+1=2。");
    assert_eq!(
        response.content.reasoning_text(),
        "1+1 是基本加法，答案是 2。"
    );
}

/// The docs' extended-thinking stream, with a tool call after the thinking.
const CLAUDE_THINKING_TOOL: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01T7\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-5-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":512,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me check the calendar\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\" for tomorrow first.\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01A\",\"name\":\"list_events\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"start\\\": \\\"2026-12-02\\\", \\\"end\\\": \\\"2026-12-03\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":87}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test]
async fn claude_thinking_comes_back_signed_before_the_tool_use() {
    let fixture = Fixture::start(vec![
        Reply::sse(CLAUDE_THINKING_TOOL, 11),
        Reply::sse(CLAUDE_THINKING_TOOL, 0),
    ])
    .await;
    let provider = claude(&fixture);
    let outcome = run(&provider, request("明天？")).await;
    let response = outcome.response().clone();
    assert_eq!(
        outcome.reasoning.concat(),
        "Let me check the calendar for tomorrow first."
    );
    assert_eq!(response.content.text(), "");
    let Part::Reasoning(thinking) = &response.content.parts[0] else {
        panic!("{:?}", response.content.parts)
    };
    assert_eq!(
        thinking.signature.as_deref(),
        Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")
    );

    // The next request carries the thinking block, unchanged, before the tool_use block.
    let mut next = request("明天？");
    next.contents.push(response.content.clone());
    next.contents.push(Content::new(
        "user",
        vec![Part::FunctionResponse(
            FunctionResponse::from_output("list_events", json!([])).with_id("toolu_01A"),
        )],
    ));
    run(&provider, next).await.response();
    let body = fixture.last_body();
    let blocks = &body["messages"][1]["content"];
    assert_eq!(
        blocks[0],
        json!({
            "type": "thinking",
            "thinking": "Let me check the calendar for tomorrow first.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        })
    );
    assert_eq!(blocks[1]["type"], "tool_use");
}

#[tokio::test]
async fn reasoning_from_another_service_is_not_sent_to_claude() {
    // No signature: Claude would refuse a thinking block it did not sign.
    let fixture = Fixture::start(vec![Reply::sse(CLAUDE_THINKING_TOOL, 0)]).await;
    run(&claude(&fixture), history_with_reasoning())
        .await
        .response();
    let body = fixture.last_body().to_string();
    assert!(!body.contains("thinking"), "{body}");
    assert!(!body.contains("需要先查日历"), "{body}");
}

#[tokio::test]
async fn gemini_thought_summaries_are_reasoning_and_stay_home() {
    let stream = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"**Checking the calendar**\\nThe user wants tomorrow.\",\"thought\": true}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 40,\"totalTokenCount\": 60,\"thoughtsTokenCount\": 20},\"modelVersion\": \"gemini-3.8-flash\"}\r\n\r\n",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"明天有周会。\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 40,\"candidatesTokenCount\": 6,\"totalTokenCount\": 66,\"thoughtsTokenCount\": 20},\"modelVersion\": \"gemini-3.8-flash\"}\r\n\r\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0), Reply::sse(stream, 0)]).await;
    let config = common::config(
        &fixture,
        ProviderKind::Gemini,
        "Google Gemini",
        "gemini-3.8-flash",
        KEY,
        |_| {},
    );
    let provider = GeminiProvider::new(config).unwrap();
    let outcome = run(&provider, request("明天？")).await;
    let response = outcome.response().clone();
    assert_eq!(outcome.text(), "明天有周会。");
    assert_eq!(response.content.text(), "明天有周会。");
    assert!(
        response
            .content
            .reasoning_text()
            .contains("Checking the calendar")
    );
    let mut next = request("明天？");
    next.contents.push(response.content);
    next.contents.push(Content::user_text("谢谢"));
    run(&provider, next).await.response();
    assert!(
        !fixture
            .last_body()
            .to_string()
            .contains("Checking the calendar")
    );
}
