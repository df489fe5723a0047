//! No id from the model reaches another endpoint: every id argument of every tool is sent path
//! traversal, percent-encoded dots, `?`, `#` and `/`, and each is refused with an error naming
//! the argument, before any request leaves the app; a write is refused at argument validation,
//! before the engine holds it for approval (so no approval card is ever shown for it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use agent::{
    AgentTool, CallbackContext, Content, Engine, EngineConfig, FunctionCall, InvocationStatus,
    LlmAgent, LlmResponse, Part, ScriptedModel, ToolContext, ToolOutcome, coerce_tool_result,
};
use emulator::feishu::api::scopes::PREFERRED_SCOPES;
use emulator::feishu::{App, FeishuEmulator};
use feishu::{ApiClient, Endpoints, FeishuTool, IdKind, RetryPolicy, ToolEnv, all_tools};
use serde_json::{Map, Value, json};

/// What a model might send to steer a request elsewhere.
const HOSTILE: [&str; 9] = [
    "../../../../../task/v2/tasks/G",
    "..",
    "%2e%2e",
    "%2e%2e%2ftask%2fv2%2ftasks%2fG",
    "oc_abc?page_size=1",
    "ou_abc#x",
    "om_abc/reply",
    "abcdefgh/..",
    "",
];

fn app() -> App {
    App {
        app_id: "cli_hostile_ids".into(),
        app_secret: "secret".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: PREFERRED_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
    }
}

async fn signed_in(emulator: &FeishuEmulator) -> ToolEnv {
    let tokens = common::sign_in(emulator, app(), PREFERRED_SCOPES).await;
    let api = ApiClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        tokens,
        RetryPolicy::default(),
    )
    .unwrap();
    ToolEnv {
        api,
        tz: jiff::tz::TimeZone::UTC,
    }
}

/// Arguments that pass the tool's schema, with `id_arg` set to `value` (in an array for an
/// array argument).
fn args_with(tool: &FeishuTool, id_arg: &str, value: &str) -> Map<String, Value> {
    let schema = tool.parameters();
    let mut args = Map::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in required.iter().copied().chain([id_arg]) {
        let property = &schema["properties"][name];
        let kind = tool
            .id_arguments()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k);
        let fill = |kind: Option<IdKind>| match kind {
            Some(_) if name == id_arg => json!(value),
            Some(kind) => json!(kind.example()),
            None if name == "start" || name == "end" => json!("2026-12-01T09:00:00+08:00"),
            None => json!("x"),
        };
        let v = match property["type"].as_str() {
            Some("array") => json!([fill(kind)]),
            Some("integer") => json!(1),
            Some("boolean") => json!(true),
            _ => fill(kind),
        };
        args.insert(name.to_owned(), v);
    }
    args
}

fn open_api_requests(emulator: &FeishuEmulator) -> usize {
    emulator
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/open-apis/") && !r.path.contains("/authen/"))
        .count()
}

#[tokio::test]
async fn every_id_argument_of_every_tool_refuses_hostile_values_before_any_request() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let tools = all_tools(signed_in(&emulator).await);
    let before = open_api_requests(&emulator);
    let mut cases = 0;
    for tool in &tools {
        for (arg, kind) in tool.id_arguments() {
            // The well-formed id passes the check: the refusal below is the hostile value's.
            assert_eq!(
                tool.check_args(&args_with(tool, arg, kind.example())),
                Ok(()),
                "{} {arg}",
                tool.name()
            );
            for value in HOSTILE {
                let args = args_with(tool, arg, value);
                let message = tool
                    .check_args(&args)
                    .expect_err(&format!("{} accepted {arg} = {value:?}", tool.name()));
                assert!(
                    message.contains(arg) && message.contains(kind.noun()),
                    "{}: {message}",
                    tool.name()
                );
                // Run directly, bypassing the engine: still refused, as a failure the model reads.
                let ctx = CallbackContext::new("inv", "assistant", "s", Map::new(), Arc::default());
                let mut ctx = ToolContext::new(ctx, "fc_test").with_idempotency_key("k");
                let (text, is_error, result) = coerce_tool_result(tool.run(args, &mut ctx).await);
                assert!(is_error, "{}: {text}", tool.name());
                assert_eq!(
                    result.map(|r| r.outcome),
                    Some(ToolOutcome::Failed),
                    "{}",
                    tool.name()
                );
                assert!(text.contains(arg), "{}: {text}", tool.name());
                cases += 1;
            }
        }
    }
    // 13 tools take ids (14 id arguments), each sent every hostile value.
    assert_eq!(cases, 14 * HOSTILE.len());
    assert_eq!(
        open_api_requests(&emulator),
        before,
        "a request left the app: {:?}",
        emulator.requests()
    );
}

/// Through the engine: a write with a hostile id never becomes an approval card.
#[tokio::test]
async fn a_write_with_a_hostile_id_is_refused_before_it_is_held_for_approval() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let env = signed_in(&emulator).await;
    let tools = all_tools(env.clone());
    let writes: Vec<(String, String, Map<String, Value>)> = tools
        .iter()
        .filter(|t| t.is_write())
        .flat_map(|t| {
            t.id_arguments().iter().flat_map(move |(arg, _)| {
                HOSTILE
                    .iter()
                    .map(move |v| (t.name().to_owned(), (*arg).to_owned(), args_with(t, arg, v)))
            })
        })
        .collect();
    assert!(writes.len() >= 8 * HOSTILE.len(), "{}", writes.len());
    let before = open_api_requests(&emulator);
    for (tool_name, arg, args) in writes {
        let model = Arc::new(ScriptedModel::new([
            LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(
                tool_name.clone(),
                args.clone(),
            ))]),
            LlmResponse::from_parts(vec![Part::from_text("ok")]),
        ]));
        let mut builder = LlmAgent::builder("assistant", model.clone());
        for tool in all_tools(env.clone()) {
            builder = builder.tool(tool);
        }
        let store = Arc::new(store::Store::open_in_memory().unwrap());
        let engine = Engine::new(builder.build().unwrap(), store, EngineConfig::default()).unwrap();
        let session = engine.create_session("me", &Default::default()).unwrap();
        let outcome = engine
            .send_message(&session, Content::user_text("do it"))
            .await
            .unwrap();
        assert_eq!(
            outcome.status,
            InvocationStatus::Completed,
            "{tool_name} {arg} {args:?}"
        );
        assert!(engine.pending_calls().unwrap().is_empty(), "{tool_name}");
        let audit = engine.audit_trail(&Default::default()).unwrap();
        assert!(
            !audit.iter().any(|e| e.kind == "approval.requested"),
            "{tool_name}: {audit:?}"
        );
        let refused = audit
            .iter()
            .find(|e| e.kind == "call.invalid_arguments")
            .unwrap_or_else(|| panic!("{tool_name}: {audit:?}"));
        assert!(
            refused.detail["errors"].as_str().unwrap().contains(&arg),
            "{refused:?}"
        );
        // The model was told why, naming the argument.
        let told = model.requests()[1].contents.iter().any(|c| {
            c.parts.iter().any(|p| match p {
                Part::FunctionResponse(r) => {
                    Value::Object(r.response.clone()).to_string().contains(&arg)
                }
                _ => false,
            })
        });
        assert!(told, "{tool_name}");
    }
    assert_eq!(open_api_requests(&emulator), before);
}
