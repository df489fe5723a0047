//! What a model says besides its answer reaches the session: its reasoning is stored in the
//! model's turn and given back to it on the next call (the provider decides what to send);
//! a function call the service could not read, or one cut off at the output limit, is asked
//! again once with a note before the user is told; every finish reason and the token usage are
//! recorded on the model's event; a rate limit's requested wait is recorded on the error event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agent::{
    Approval, Content, Engine, EngineConfig, FinishReason, FunctionCall, FunctionTool,
    InvocationStatus, LlmAgent, LlmResponse, MalformedCall, ManualClock, ModelError, Part,
    RecordingModel, ScriptedModel, ToolReturn, UsageMetadata,
};
use serde_json::{Map, Value, json};

struct Harness {
    engine: Engine,
    store: Arc<store::Store>,
    model: Arc<RecordingModel>,
    session: String,
}

fn harness(script: Vec<Result<LlmResponse, ModelError>>) -> Harness {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let model = Arc::new(RecordingModel::new(Arc::new(ScriptedModel::with_results(
        script,
    ))));
    let tool = FunctionTool::new(
        "list_events",
        "List events.",
        json!({"type": "object", "properties": {"day": {"type": "string"}}}),
        |_args, _ctx| ToolReturn::from(json!([{"summary": "周会"}])),
    )
    .with_approval(Approval::Never);
    let agent = LlmAgent::builder("assistant", model.clone())
        .instruction("You help with Feishu.")
        .tool(tool)
        .build()
        .unwrap();
    let engine = Engine::with_clock(
        agent,
        store.clone(),
        EngineConfig::default(),
        Arc::new(ManualClock::at(1_800_000_000_000)),
    )
    .unwrap();
    let session = engine.create_session("u1", &Map::new()).unwrap();
    Harness {
        engine,
        store,
        model,
        session,
    }
}

impl Harness {
    async fn send(&self, text: &str) -> agent::TurnOutcome {
        self.engine
            .send_message(&self.session, Content::user_text(text))
            .await
            .unwrap()
    }

    fn events(&self) -> Vec<agent::Event> {
        self.store.load_session(&self.session).unwrap().events
    }
}

fn with(parts: Vec<Part>, finish: FinishReason) -> LlmResponse {
    LlmResponse {
        finish_reason: Some(finish),
        ..LlmResponse::from_parts(parts)
    }
}

fn list_call() -> Part {
    Part::FunctionCall(FunctionCall::new(
        "list_events",
        json!({"day": "明天"}).as_object().unwrap().clone(),
    ))
}

fn note_in(request: &agent::LlmRequest) -> bool {
    request
        .contents
        .last()
        .is_some_and(|c| c.is_user() && c.text().contains("could not be read"))
}

#[tokio::test]
async fn reasoning_is_kept_in_the_model_turn_and_given_back_on_the_next_call() {
    let h = harness(vec![
        Ok(with(
            vec![Part::from_reasoning("先查日历。"), list_call()],
            FinishReason::ToolCalls,
        )),
        Ok(with(
            vec![
                Part::from_reasoning("只有周会。"),
                Part::from_text("明天有周会。"),
            ],
            FinishReason::Stop,
        )),
    ]);
    assert_eq!(h.send("明天？").await.status, InvocationStatus::Completed);
    let events = h.events();
    let first = events[1].content.as_ref().unwrap();
    assert_eq!(first.reasoning_text(), "先查日历。");
    assert_eq!(first.text(), "", "the reasoning is not the answer");
    // The second model call saw its own reasoning of the first, next to its call.
    let second = &h.model.requests()[1];
    let model_turn = second.contents.iter().find(|c| c.is_model()).unwrap();
    assert_eq!(model_turn.reasoning_text(), "先查日历。");
    assert!(model_turn.function_calls().next().is_some());
    assert_eq!(
        events.last().unwrap().content.as_ref().unwrap().text(),
        "明天有周会。"
    );
}

#[tokio::test]
async fn a_malformed_function_call_is_asked_again_once_with_a_note() {
    let h = harness(vec![
        Ok(with(vec![], FinishReason::MalformedFunctionCall)),
        Ok(with(vec![list_call()], FinishReason::ToolCalls)),
        Ok(with(
            vec![Part::from_text("明天有周会。")],
            FinishReason::Stop,
        )),
    ]);
    assert_eq!(h.send("明天？").await.status, InvocationStatus::Completed);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    assert!(!note_in(&requests[0]));
    assert!(
        note_in(&requests[1]),
        "the retry tells the model what went wrong"
    );
    assert!(
        !note_in(&requests[2]),
        "the note is not kept in the history"
    );
    // The failed attempt is not recorded; the user sees only the turn that worked.
    assert!(
        h.events()
            .iter()
            .all(|e| e.finish_reason != Some(FinishReason::MalformedFunctionCall))
    );
}

#[tokio::test]
async fn a_second_malformed_call_is_not_retried_and_the_event_says_why() {
    let h = harness(vec![
        Ok(with(vec![], FinishReason::MalformedFunctionCall)),
        Ok(with(vec![], FinishReason::MalformedFunctionCall)),
        Ok(with(
            vec![Part::from_text("never asked")],
            FinishReason::Stop,
        )),
    ]);
    h.send("明天？").await;
    assert_eq!(h.model.requests().len(), 2, "retried once, not more");
    let last = h.events().pop().unwrap();
    assert_eq!(
        last.finish_reason,
        Some(FinishReason::MalformedFunctionCall)
    );
    assert!(last.turn_complete);
}

#[tokio::test]
async fn a_tool_call_cut_off_at_the_limit_is_asked_again_once() {
    let cut = LlmResponse {
        malformed_calls: vec![MalformedCall {
            id: Some("call_1".into()),
            name: "list_events".into(),
            arguments: "{\"day\": \"明".into(),
            error: "EOF while parsing a string".into(),
        }],
        ..with(vec![], FinishReason::MaxTokens)
    };
    let h = harness(vec![
        Ok(cut),
        Ok(with(vec![list_call()], FinishReason::ToolCalls)),
        Ok(with(
            vec![Part::from_text("明天有周会。")],
            FinishReason::Stop,
        )),
    ]);
    assert_eq!(h.send("明天？").await.status, InvocationStatus::Completed);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    assert!(note_in(&requests[1]));
}

#[tokio::test]
async fn a_cut_off_or_filtered_answer_keeps_its_reason_and_its_usage() {
    let usage = UsageMetadata {
        prompt_token_count: 120,
        candidates_token_count: 4096,
        thoughts_token_count: Some(3000),
        cached_content_token_count: None,
    };
    let h = harness(vec![Ok(LlmResponse {
        usage_metadata: Some(usage),
        ..with(vec![Part::from_text("明天上午")], FinishReason::MaxTokens)
    })]);
    assert_eq!(h.send("明天？").await.status, InvocationStatus::Completed);
    let last = h.events().pop().unwrap();
    assert_eq!(last.finish_reason, Some(FinishReason::MaxTokens));
    assert_eq!(last.usage_metadata, Some(usage));
    assert_eq!(
        h.model.requests().len(),
        1,
        "a text cut-off is told, not retried"
    );
}

#[tokio::test]
async fn a_rate_limit_records_the_wait_the_service_asked_for() {
    let h = harness(vec![Err(ModelError::new(
        "rate_limited",
        "Google Gemini is limiting requests (HTTP 429).",
    )
    .with_retry_after(std::time::Duration::from_secs(36)))]);
    assert_eq!(h.send("明天？").await.status, InvocationStatus::Failed);
    let last = h.events().pop().unwrap();
    assert_eq!(last.error_code.as_deref(), Some("rate_limited"));
    assert_eq!(last.retry_after_ms, Some(36_000));
}

#[test]
fn reasoning_survives_the_store() {
    let content = Content::new(
        agent::ROLE_MODEL,
        vec![Part::from_reasoning("想一想"), Part::from_text("好")],
    );
    let wire: Value = serde_json::to_value(&content).unwrap();
    assert_eq!(wire["parts"][0]["reasoning"]["text"], "想一想");
}
