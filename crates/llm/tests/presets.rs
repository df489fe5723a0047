//! Every preset's request reaches the right path with the right auth header, and every preset's
//! model list is read from the service's own `models` endpoint. The fixture server stands at
//! the path of the preset's real base URL, so a wrong join (a lost `/v1`, a doubled one) shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, Reply, request, run};
use llm::{PRESETS, Preset, ProviderKind};

const KEY: &str = "sk-preset-0123456789abcdef";

/// The path part of a preset's base URL (`/v1`, `/api/v3`, ``).
fn path_of(preset: &Preset) -> String {
    let url = reqwest::Url::parse(preset.base_url).unwrap();
    url.path().trim_end_matches('/').to_owned()
}

fn answer(kind: ProviderKind) -> Reply {
    match kind {
        ProviderKind::OpenAiCompatible => Reply::sse(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"好\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            0,
        ),
        ProviderKind::Anthropic => Reply::sse(
            concat!(
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
                "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"好\"}}\n\n",
                "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
                "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ),
            0,
        ),
        ProviderKind::Gemini => Reply::sse(
            "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"好\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}]}\r\n\r\n",
            0,
        ),
    }
}

fn key_for(preset: &Preset) -> Option<llm::ApiKey> {
    preset.key_name.map(|_| llm::ApiKey::new(KEY))
}

#[tokio::test]
async fn each_preset_sends_its_request_to_the_right_path_with_the_right_auth() {
    for preset in PRESETS.iter().filter(|p| p.id != "custom") {
        let prefix = path_of(preset);
        let fixture = Fixture::start_at(&prefix, vec![answer(preset.kind)]).await;
        let mut config = preset.config(key_for(preset));
        config.base_url = fixture.base.clone();
        config.http = common::fast();
        let model = llm::connect(config).unwrap();
        let outcome = run(model.as_ref(), request("x")).await;
        assert_eq!(outcome.response().content.text(), "好", "{}", preset.id);
        let received = fixture.received();
        let got = &received[0];
        let header = |name: &str| {
            got.headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        match preset.kind {
            ProviderKind::OpenAiCompatible => {
                assert_eq!(
                    got.path_and_query,
                    format!("{prefix}/chat/completions"),
                    "{}",
                    preset.id
                );
                let expected = preset.key_name.map(|_| format!("Bearer {KEY}"));
                assert_eq!(header("authorization"), expected, "{}", preset.id);
                assert_eq!(got.body["model"], preset.default_model, "{}", preset.id);
            }
            ProviderKind::Anthropic => {
                assert_eq!(got.path_and_query, format!("{prefix}/messages"));
                assert_eq!(header("x-api-key").as_deref(), Some(KEY));
                assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
                assert_eq!(header("authorization"), None);
            }
            ProviderKind::Gemini => {
                assert_eq!(
                    got.path_and_query,
                    format!(
                        "{prefix}/models/{}:streamGenerateContent?alt=sse",
                        preset.default_model
                    )
                );
                assert_eq!(header("x-goog-api-key").as_deref(), Some(KEY));
                assert!(!got.path_and_query.contains("key="), "never in the URL");
            }
        }
    }
}

#[test]
fn the_international_endpoints_are_presets_of_their_own() {
    let qwen = llm::preset("qwen_intl").unwrap();
    assert_eq!(
        qwen.base_url,
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
    );
    let kimi = llm::preset("moonshot_intl").unwrap();
    assert_eq!(kimi.base_url, "https://api.moonshot.ai/v1");
    // Keys of one region do not work in the other: each keeps its own vault entry.
    assert_ne!(qwen.key_name, llm::preset("qwen").unwrap().key_name);
    assert_ne!(kimi.key_name, llm::preset("moonshot").unwrap().key_name);
}

#[test]
fn no_default_model_is_one_the_providers_retired() {
    // Retired or deprecated by their providers (see the sources in presets.rs).
    let retired = [
        "deepseek-chat",
        "deepseek-reasoner",
        "doubao-1-5-pro-32k-250115",
        "gemini-2.5-flash",
        "gpt-4.1-mini",
        "kimi-k2-0905-preview",
        "claude-sonnet-4-5",
    ];
    for preset in PRESETS {
        assert!(
            !retired.contains(&preset.default_model),
            "{}: {}",
            preset.id,
            preset.default_model
        );
    }
}

fn model_list(kind: ProviderKind) -> Reply {
    match kind {
        ProviderKind::OpenAiCompatible => Reply::json(
            200,
            r#"{"object":"list","data":[{"id":"model-b","object":"model","created":1764500000,"owned_by":"system"},{"id":"model-a","object":"model","created":1764500000,"owned_by":"system"}]}"#,
        ),
        ProviderKind::Anthropic => Reply::json(
            200,
            r#"{"data":[{"type":"model","id":"model-b","display_name":"Model B","created_at":"2026-09-29T00:00:00Z"},{"type":"model","id":"model-a","display_name":"Model A","created_at":"2026-06-30T00:00:00Z"}],"has_more":false,"first_id":"model-b","last_id":"model-a"}"#,
        ),
        ProviderKind::Gemini => Reply::json(
            200,
            r#"{"models":[{"name":"models/model-b","displayName":"B","supportedGenerationMethods":["generateContent","countTokens"]},{"name":"models/model-a","supportedGenerationMethods":["generateContent"]},{"name":"models/embedding-x","supportedGenerationMethods":["embedContent"]}]}"#,
        ),
    }
}

#[tokio::test]
async fn each_preset_lists_its_models_from_its_own_endpoint() {
    for preset in PRESETS.iter().filter(|p| p.id != "custom") {
        let prefix = path_of(preset);
        let fixture = Fixture::start_at(&prefix, vec![model_list(preset.kind)]).await;
        let mut config = preset.config(key_for(preset));
        config.base_url = fixture.base.clone();
        config.http = common::fast();
        let models = llm::list_models(&config).await.unwrap();
        assert_eq!(models, ["model-a", "model-b"], "{}", preset.id);
        let got = &fixture.received()[0];
        assert!(
            got.path_and_query.starts_with(&format!("{prefix}/models")),
            "{}: {}",
            preset.id,
            got.path_and_query
        );
        let header = |name: &str| got.headers.get(name).map(|v| v.to_str().unwrap());
        match preset.kind {
            ProviderKind::OpenAiCompatible => assert_eq!(
                header("authorization").map(str::to_owned),
                preset.key_name.map(|_| format!("Bearer {KEY}")),
                "{}",
                preset.id
            ),
            ProviderKind::Anthropic => assert_eq!(header("x-api-key"), Some(KEY)),
            ProviderKind::Gemini => assert_eq!(header("x-goog-api-key"), Some(KEY)),
        }
    }
}

#[tokio::test]
async fn a_refused_model_list_says_why_like_a_conversation_would() {
    let fixture = Fixture::start_at(
        "/v1",
        vec![Reply::json(
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-pre***cdef.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        )],
    )
    .await;
    let mut config = llm::preset("openai")
        .unwrap()
        .config(key_for(llm::preset("openai").unwrap()));
    config.base_url = fixture.base.clone();
    let error = llm::list_models(&config).await.unwrap_err();
    match error {
        llm::ListModelsError::Model(e) => assert_eq!(e.code, "unauthorized"),
        other => panic!("{other:?}"),
    }
}
