//! Usage is recorded wherever each provider puts it, and `stream_options.include_usage` goes
//! only to services that accept it.
//!
//! Recorded from the providers' documentation:
//! - OpenAI, `stream_options.include_usage` (platform.openai.com/docs/api-reference/chat/create):
//!   a last chunk with empty `choices` and the `usage`.
//! - Moonshot, "使用 Kimi API 的流式输出功能" (platform.moonshot.cn/docs/guide/
//!   utilize-the-streaming-output-feature-of-kimi-api): the `usage` is in `choices[0]` of the
//!   last chunk.
//! - Anthropic, "Streaming messages": `message_start.message.usage` (input, cache reads), then
//!   cumulative `message_delta.usage`.
//! - Gemini, `UsageMetadata` (ai.google.dev/api/generate-content#UsageMetadata):
//!   `thoughtsTokenCount` apart from `candidatesTokenCount`.
//! - Zhipu, 对话补全 (docs.bigmodel.cn): usage on the last chunk, no `stream_options`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agent::UsageMetadata;
use common::{Fixture, Reply, request, run};
use llm::{AnthropicProvider, GeminiProvider, OpenAiProvider, ProviderKind};

const KEY: &str = "sk-test-0123456789abcdef";

fn from_preset(fixture: &Fixture, id: &str) -> OpenAiProvider {
    let mut config = llm::preset(id).unwrap().config(Some(llm::ApiKey::new(KEY)));
    config.base_url = fixture.base.clone();
    config.http = common::fast();
    OpenAiProvider::new(config).unwrap()
}

#[tokio::test]
async fn openai_usage_chunk_with_reasoning_and_cached_tokens() {
    let stream = concat!(
        "data: {\"id\":\"chatcmpl-u1\",\"object\":\"chat.completion.chunk\",\"created\":1764560500,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"好\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-u1\",\"object\":\"chat.completion.chunk\",\"created\":1764560500,\"model\":\"gpt-6-luna\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-u1\",\"object\":\"chat.completion.chunk\",\"created\":1764560500,\"model\":\"gpt-6-luna\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":300,\"total_tokens\":1500,\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":256,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
        "data: [DONE]\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let provider = from_preset(&fixture, "openai");
    let response = run(&provider, request("x")).await.response().clone();
    assert_eq!(
        response.usage_metadata,
        Some(UsageMetadata {
            prompt_token_count: 1200,
            candidates_token_count: 300,
            thoughts_token_count: Some(256),
            cached_content_token_count: Some(1024),
        })
    );
    assert_eq!(provider.last_usage().unwrap().output_tokens, 300);
    assert_eq!(fixture.last_body()["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn moonshot_usage_in_the_last_choice_is_read() {
    let stream = concat!(
        "data: {\"id\":\"cmpl-1305b94c570f447fbde3180560736287\",\"object\":\"chat.completion.chunk\",\"created\":1698999575,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"cmpl-1305b94c570f447fbde3180560736287\",\"object\":\"chat.completion.chunk\",\"created\":1698999575,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"你好，李雷！1+1等于2。\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"cmpl-1305b94c570f447fbde3180560736287\",\"object\":\"chat.completion.chunk\",\"created\":1698999575,\"model\":\"kimi-k2.6\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":13,\"total_tokens\":32}}]}\n\n",
        "data: [DONE]\n\n",
    );
    for preset in ["moonshot", "moonshot_intl"] {
        let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
        let response = run(&from_preset(&fixture, preset), request("x"))
            .await
            .response()
            .clone();
        let usage = response.usage_metadata.expect(preset);
        assert_eq!(
            (usage.prompt_token_count, usage.candidates_token_count),
            (19, 13),
            "{preset}"
        );
    }
}

#[tokio::test]
async fn glm_gets_no_stream_options_and_its_usage_is_still_read() {
    let stream = concat!(
        "data: {\"id\":\"2025120117\",\"created\":1764560300,\"model\":\"glm-5.3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"好\"}}]}\n\n",
        "data: {\"id\":\"2025120117\",\"created\":1764560300,\"model\":\"glm-5.3\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,\"total_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n",
        "data: [DONE]\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let response = run(&from_preset(&fixture, "zhipu"), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(response.usage_metadata.unwrap().candidates_token_count, 2);
    assert!(fixture.last_body().get("stream_options").is_none());
}

#[test]
fn include_usage_is_a_per_preset_flag() {
    for preset in llm::PRESETS {
        let config = preset.config(None);
        assert_eq!(
            config.options.include_usage, preset.include_usage,
            "{}",
            preset.id
        );
    }
    assert!(!llm::preset("zhipu").unwrap().include_usage);
    assert!(llm::preset("openai").unwrap().include_usage);
}

#[tokio::test]
async fn claude_usage_adds_cache_reads_and_takes_the_last_output_count() {
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01U\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-5-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"好\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let config = common::config(
        &fixture,
        ProviderKind::Anthropic,
        "Anthropic Claude",
        "claude-sonnet-5-5",
        KEY,
        |_| {},
    );
    let response = run(&AnthropicProvider::new(config).unwrap(), request("x"))
        .await
        .response()
        .clone();
    assert_eq!(
        response.usage_metadata,
        Some(UsageMetadata {
            prompt_token_count: 2025,
            candidates_token_count: 15,
            thoughts_token_count: None,
            cached_content_token_count: Some(2000),
        })
    );
}

#[tokio::test]
async fn gemini_thought_tokens_count_as_generated() {
    let stream = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"好\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 40,\"candidatesTokenCount\": 6,\"totalTokenCount\": 146,\"thoughtsTokenCount\": 100,\"cachedContentTokenCount\": 32},\"modelVersion\": \"gemini-3.8-flash\"}\r\n\r\n";
    let fixture = Fixture::start(vec![Reply::sse(stream, 0)]).await;
    let config = common::config(
        &fixture,
        ProviderKind::Gemini,
        "Google Gemini",
        "gemini-3.8-flash",
        KEY,
        |_| {},
    );
    let response = run(&GeminiProvider::new(config).unwrap(), request("x"))
        .await
        .response()
        .clone();
    let usage = response.usage_metadata.unwrap();
    assert_eq!(usage.candidates_token_count, 106);
    assert_eq!(usage.thoughts_token_count, Some(100));
    assert_eq!(usage.cached_content_token_count, Some(32));
    assert_eq!(usage.total_token_count(), 146);
}
