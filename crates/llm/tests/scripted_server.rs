//! The real OpenAI-compatible provider against the emulator's scripted model server, alone and
//! driving the engine (with the SQLite store): a read tool round trip, a write held for approval,
//! and the demo script's whole session including a sign-in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use agent::{
    Approval, CallStatus, Content, Decision, Engine, EngineConfig, FunctionTool, InvocationStatus,
    LlmAgent, ToolOutcome, ToolResult, ToolReturn,
};
use common::{calls, fast, request, run};
use emulator::model_server::{Matcher, ModelServer, Reply, Script, Step, ToolCall};
use llm::{ApiKey, OpenAiProvider, ProviderConfig, ProviderKind};
use serde_json::{Map, Value, json};

fn provider(server: &ModelServer, key: Option<&str>) -> OpenAiProvider {
    let mut config = ProviderConfig::new(
        ProviderKind::OpenAiCompatible,
        "Demo",
        server.base_url(),
        "demo-model",
        key.map(ApiKey::new),
    );
    config.http = fast();
    OpenAiProvider::new(config).unwrap()
}

fn when_user(word: &str) -> Matcher {
    Matcher {
        role: Some("user".into()),
        contains: Some(word.into()),
        ..Matcher::default()
    }
}

fn when_tool(name: &str) -> Matcher {
    Matcher {
        role: Some("tool".into()),
        tool: Some(name.into()),
        ..Matcher::default()
    }
}

#[tokio::test]
async fn text_and_split_tool_calls_arrive_whole() {
    let server = ModelServer::start(Script::of_steps(vec![Step::reply(Reply {
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
                id: Some("call_fixed".into()),
            },
        ],
    })]))
    .await
    .unwrap();
    let provider = provider(&server, Some("sk-demo"));
    let outcome = run(&provider, request("x")).await;
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
    assert_eq!(
        response
            .content
            .function_calls()
            .nth(1)
            .unwrap()
            .id
            .as_deref(),
        Some("call_fixed")
    );
    assert!(provider.last_usage().unwrap().output_tokens > 0);
    let log = server.requests();
    assert_eq!(log.len(), 1);
    assert!(log[0].authorized);
    assert_eq!(log[0].body["stream"], true);
    assert_eq!(log[0].body["tools"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn scripted_errors_reach_the_provider_as_the_real_ones_do() {
    let script = Script::of_steps(vec![
        Step::error(429),
        Step::error(503),
        Step::text("终于好了"),
        Step::error(404),
        Step::error(400),
        Step::call("send_message", json!("{\"chat\": ")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let provider = provider(&server, None);
    let outcome = run(&provider, request("x")).await;
    assert_eq!(outcome.response().content.text(), "终于好了");
    assert_eq!(server.request_count(), 3, "429 and 503 were retried");
    assert_eq!(
        run(&provider, request("x")).await.error().code,
        "model_not_found"
    );
    assert_eq!(
        run(&provider, request("x")).await.error().code,
        "context_length_exceeded"
    );
    let malformed = run(&provider, request("x")).await;
    assert_eq!(malformed.response().malformed_calls.len(), 1);
}

#[tokio::test]
async fn a_wrong_key_is_unauthorized() {
    let mut script = Script::of_steps(vec![Step::text("ok")]);
    script.api_key = Some("sk-right".into());
    let server = ModelServer::start(script).await.unwrap();
    let outcome = run(
        &provider(&server, Some("sk-wrong-0123456789")),
        request("x"),
    )
    .await;
    assert_eq!(outcome.error().code, "unauthorized");
    assert!(!outcome.error().message.contains("sk-wrong"));
}

type Runs = Arc<Mutex<Vec<Map<String, Value>>>>;

fn tool(name: &str, approval: Approval, runs: &Runs, output: Value) -> FunctionTool {
    let runs = runs.clone();
    FunctionTool::new(
        name,
        format!("test tool {name}"),
        json!({"type": "object"}),
        move |args, _ctx| {
            runs.lock().unwrap().push(args.clone());
            ToolReturn::from(output.clone())
        },
    )
    .with_approval(approval)
}

fn last_text(store: &store::Store, session: &str) -> String {
    let events = store.load_session(session).unwrap().events;
    events
        .iter()
        .rev()
        .find_map(|e| {
            e.content
                .as_ref()
                .filter(|c| c.is_model() && !c.text().is_empty())
                .map(Content::text)
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_engine_turn_runs_a_read_and_holds_a_write_for_approval() {
    let script = Script::of_steps(vec![
        Step::call(
            "list_events",
            json!({"start": "2026-12-01", "end": "2026-12-02"}),
        )
        .when(when_user("安排")),
        Step::text("明天上午 10 点有产品周会。").when(when_tool("list_events")),
        Step::call(
            "send_message",
            json!({"chat": "产品周会", "text": "我晚到 5 分钟"}),
        )
        .when(when_user("发")),
        Step::text("消息已发送。").when(when_tool("send_message")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let reads: Runs = Arc::default();
    let writes: Runs = Arc::default();
    let agent = LlmAgent::builder("assistant", Arc::new(provider(&server, Some("sk-demo"))))
        .instruction("你是飞书助手。")
        .tool(tool(
            "list_events",
            Approval::Never,
            &reads,
            json!([{"summary": "产品周会"}]),
        ))
        .tool(tool(
            "send_message",
            Approval::Always,
            &writes,
            json!({"message_id": "om_1"}),
        ))
        .build()
        .unwrap();
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let engine = Engine::new(agent, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u1", &Map::new()).unwrap();

    let outcome = engine
        .send_message(&session, Content::user_text("明天有什么安排？"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(
        *reads.lock().unwrap(),
        vec![
            json!({"start": "2026-12-01", "end": "2026-12-02"})
                .as_object()
                .unwrap()
                .clone()
        ]
    );
    assert_eq!(last_text(&store, &session), "明天上午 10 点有产品周会。");
    // The second request carried the engine's call id on both the call and its result.
    let second = &server.requests()[1];
    let messages = second.messages();
    let call_id = messages[2]["tool_calls"][0]["id"].as_str().unwrap();
    assert!(call_id.starts_with("fc_"), "{call_id}");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], call_id);
    assert_eq!(messages[0]["role"], "system");

    let outcome = engine
        .send_message(&session, Content::user_text("帮我发个消息说我晚到"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Suspended);
    assert!(
        writes.lock().unwrap().is_empty(),
        "nothing is sent before approval"
    );
    let pending = engine.pending_calls().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].status, CallStatus::AwaitingApproval);
    assert_eq!(pending[0].tool, "send_message");
    let outcome = engine
        .decide(&pending[0].call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(writes.lock().unwrap().len(), 1);
    assert_eq!(last_text(&store, &session), "消息已发送。");
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn the_demo_script_drives_a_whole_session_with_approval_and_sign_in() {
    // The demo types slowly on purpose; tests do not wait for it.
    let mut script = Script::demo().unwrap();
    script.chunk_delay_ms = 0;
    let server = ModelServer::start(script).await.unwrap();
    let reads: Runs = Arc::default();
    let writes: Runs = Arc::default();
    let granted = Arc::new(Mutex::new(false));
    let tasks = {
        let granted = granted.clone();
        FunctionTool::new(
            "list_tasks",
            "List the user's tasks.",
            json!({"type": "object"}),
            move |_args, _ctx| {
                if *granted.lock().unwrap() {
                    ToolReturn::from(json!([{"summary": "提交季度总结", "due": "周五"}]))
                } else {
                    ToolResult::new(ToolOutcome::NeedsUserAuth)
                        .with_content("需要任务读取权限")
                        .with_auth_scopes(["task:task:read"])
                        .into()
                }
            },
        )
        .with_scopes(["task:task:read"])
    };
    let agent = LlmAgent::builder("assistant", Arc::new(provider(&server, None)))
        .instruction("你是飞书助手。")
        .tool(tool(
            "list_calendar_events",
            Approval::Never,
            &reads,
            json!([{"summary": "产品周会", "start": "10:00"}]),
        ))
        .tool(tool(
            "create_calendar_event",
            Approval::Always,
            &writes,
            json!({"event_id": "ev_1", "summary": "产品评审会", "start": "2030-01-07 15:00", "end": "2030-01-07 16:00"}),
        ))
        .tool(tasks)
        .build()
        .unwrap();
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let engine = Engine::new(agent, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u1", &Map::new()).unwrap();

    // Reading the agenda.
    let outcome = engine
        .send_message(&session, Content::user_text("明天我有什么安排？"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(reads.lock().unwrap().len(), 1);
    let start = reads.lock().unwrap()[0]["start"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        start.ends_with("T00:00:00+08:00") && !start.contains("{{"),
        "{start}"
    );
    assert!(last_text(&store, &session).contains("15:00–16:00"));

    // Proposing a meeting: held for approval, then created.
    let outcome = engine
        .send_message(&session, Content::user_text("好，帮我约这个评审会"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Suspended);
    let held = engine.pending_calls().unwrap();
    assert_eq!(held[0].tool, "create_calendar_event");
    // 张伟 and 李娜 of the emulator's seeded tenant, by open_id as the real tool takes them.
    assert_eq!(
        held[0].args["attendees"],
        json!([
            "ou_fa77b4f09ce1149cb948721a5ca4b5f8",
            "ou_117e6a309c210a36ca5d1dc734cd0b90"
        ])
    );
    let outcome = engine
        .decide(&held[0].call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(writes.lock().unwrap().len(), 1);
    // The script quotes what the tool answered, as a model would.
    let said = last_text(&store, &session);
    assert!(
        said.starts_with("已创建「产品评审会」，从 2030-01-07 15:00 到 2030-01-07 16:00"),
        "{said}"
    );

    // A missing permission: the auth card, then the original call runs again.
    let outcome = engine
        .send_message(&session, Content::user_text("看看我的待办"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Suspended);
    let waiting = engine.pending_calls().unwrap();
    assert_eq!(waiting[0].status, CallStatus::AwaitingAuth);
    assert_eq!(waiting[0].auth_scopes, ["task:task:read"]);
    *granted.lock().unwrap() = true;
    let outcomes = engine
        .auth_completed(&["task:task:read".to_owned()])
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, InvocationStatus::Completed);
    assert!(last_text(&store, &session).starts_with("授权好了"));
}
