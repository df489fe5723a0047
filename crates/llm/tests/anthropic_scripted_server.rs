//! The real Anthropic provider against the emulator's scripted model server (its Messages
//! endpoint): the production client judges the server's wire format. A streamed text answer and
//! a tool call arrive whole, a tool's answer is matched by the same script steps the
//! OpenAI-compatible endpoint uses, and scripted failures reach the provider as Anthropic's do.
//!
//! It lives here rather than in the emulator's tests because llm already dev-depends on the
//! emulator, as tests/scripted_server.rs does for the OpenAI-compatible provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agent::{Content, FinishReason, FunctionResponse};
use common::{calls, fast, request, run};
use emulator::model_server::{Matcher, ModelServer, Reply, Script, Step, ToolCall};
use llm::{AnthropicProvider, ApiKey, ProviderConfig, ProviderKind};
use serde_json::json;

fn provider(server: &ModelServer, key: &str) -> AnthropicProvider {
    let mut config = ProviderConfig::new(
        ProviderKind::Anthropic,
        "Anthropic Claude",
        server.base_url(),
        "claude-sonnet-4-5",
        Some(ApiKey::new(key)),
    );
    config.http = fast();
    AnthropicProvider::new(config).unwrap()
}

#[tokio::test]
async fn a_streamed_text_and_tool_call_arrive_whole() {
    let server = ModelServer::start(Script::of_steps(vec![
        Step::reply(Reply {
            text: "好的，我先查日程，再给产品周会发消息。".into(),
            tool_calls: vec![
                ToolCall {
                    name: "list_events".into(),
                    arguments: json!({"start": "2026-12-01", "end": "2026-12-02"}),
                    id: None,
                },
                ToolCall {
                    name: "send_message".into(),
                    arguments: json!({"chat": "产品周会", "text": "我晚到 5 分钟，先开始吧"}),
                    id: Some("toolu_fixed".into()),
                },
            ],
        }),
        Step::text("明天上午 10 点有周会，之后没有别的安排。"),
    ]))
    .await
    .unwrap();
    let provider = provider(&server, "sk-ant-demo");

    let outcome = run(&provider, request("明天有什么安排？")).await;
    assert!(outcome.partials.len() > 3, "{:?}", outcome.partials);
    let response = outcome.response();
    assert_eq!(outcome.text(), response.content.text());
    assert_eq!(
        response.content.text(),
        "好的，我先查日程，再给产品周会发消息。"
    );
    assert_eq!(
        calls(response),
        vec![
            (
                "list_events".to_owned(),
                json!({"start": "2026-12-01", "end": "2026-12-02"})
            ),
            (
                "send_message".to_owned(),
                json!({"chat": "产品周会", "text": "我晚到 5 分钟，先开始吧"})
            ),
        ]
    );
    let ids: Vec<_> = response
        .content
        .function_calls()
        .map(|c| c.id.clone().unwrap())
        .collect();
    assert!(ids[0].starts_with("toolu_"), "{ids:?}");
    assert_eq!(ids[1], "toolu_fixed");
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    let usage = provider.last_usage().unwrap();
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );

    let outcome = run(&provider, request("还有别的吗？")).await;
    assert_eq!(
        outcome.response().content.text(),
        "明天上午 10 点有周会，之后没有别的安排。"
    );
    assert_eq!(outcome.response().finish_reason, Some(FinishReason::Stop));

    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].path, "/v1/messages");
    assert!(log[0].authorized, "the key went as x-api-key");
    assert_eq!(log[0].body["stream"], true);
    assert_eq!(log[0].body["tools"].as_array().unwrap().len(), 2);
    assert_eq!(log[0].step, Some(0));
}

#[tokio::test]
async fn a_tool_answer_is_matched_and_quoted_by_the_same_steps() {
    let when_tool = Matcher {
        role: Some("tool".into()),
        tool: Some("list_events".into()),
        ..Matcher::default()
    };
    let mut script = Script::of_steps(vec![
        Step::call("list_events", json!({"start": "2026-12-01"})),
        Step::text("明天有「{{result.output.summary}}」。").when(when_tool),
    ]);
    script.api_key = Some("sk-ant-right".into());
    let server = ModelServer::start(script).await.unwrap();
    let provider = provider(&server, "sk-ant-right");

    let mut request = request("明天有什么安排？");
    let first = run(&provider, request.clone()).await;
    request.contents.push(first.response().content.clone());
    let id = first
        .response()
        .content
        .function_calls()
        .next()
        .unwrap()
        .id
        .clone()
        .unwrap();
    request.contents.push(Content::new(
        "user",
        vec![agent::Part::FunctionResponse(
            FunctionResponse::from_output("list_events", json!({"summary": "产品周会"}))
                .with_id(id.clone()),
        )],
    ));
    let second = run(&provider, request).await;
    assert_eq!(second.response().content.text(), "明天有「产品周会」。");
    let log = server.requests();
    assert_eq!(log[1].step, Some(1));
    assert_eq!(
        log[1].messages().last().unwrap()["content"][0]["tool_use_id"],
        json!(id)
    );
}

#[tokio::test]
async fn scripted_failures_reach_the_provider_as_anthropics_do() {
    let mut script = Script::of_steps(vec![
        Step::error(529),
        Step::error(429),
        Step::text("终于好了"),
        Step::error(400),
        Step::error(404),
    ]);
    script.api_key = Some("sk-ant-right".into());
    let server = ModelServer::start(script).await.unwrap();
    let provider = provider(&server, "sk-ant-right");
    let outcome = run(&provider, request("x")).await;
    assert_eq!(outcome.response().content.text(), "终于好了");
    assert_eq!(server.request_count(), 3, "529 and 429 were retried");
    assert_eq!(
        run(&provider, request("x")).await.error().code,
        "context_length_exceeded"
    );
    let missing = run(&provider, request("x")).await;
    assert_eq!(missing.error().code, "model_not_found", "{missing:?}");

    let wrong = run(
        &self::provider(&server, "sk-ant-wrong-0123456789"),
        request("x"),
    )
    .await;
    assert_eq!(wrong.error().code, "unauthorized", "{wrong:?}");
}
