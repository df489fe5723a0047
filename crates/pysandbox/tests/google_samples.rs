//! Code written the way Google's published samples for this runtime are written runs as Google's
//! runtime runs it: tools read the caller's status from `context.state`, callbacks read the answer
//! of `tools.NAME(...)` as a dict (`answer.get("caller", {})`), and the seed's `ExternalResponse`
//! (`raise_for_status()`, `json()`) keeps working beside that.
//!
//! The app is `tests/fixtures/google_app/front_desk`, written for these tests in the layout and
//! the style of Google's samples (`GoogleCloudPlatform/cxas-scrapi`); `google_mirror.rs` runs
//! Google's own samples and their tests when a copy of that repository is at hand.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use agent::{
    AgentTool, CallbackContext, Content, Event, FunctionCall, FunctionTool, InvocationStatus,
    LlmResponse, Part, ToolReturn,
};
use common::{Reports, call, engine_over, obj, say, tool_context};
use pysandbox::{CallbackKind, Host, NoHost, PythonCallback, PythonExtensions, ToolsHost};
use serde_json::{Value, json};

/// The phone directory the app's `verify_caller` asks: Ada's number, or nobody.
fn directory() -> Arc<dyn Host> {
    let find = FunctionTool::new(
        "Directory_findCaller",
        "Finds a caller by phone number.",
        json!({"type": "object"}),
        |args, _| match args.get("phone").and_then(Value::as_str) {
            Some("555-0100") => ToolReturn::from(json!({"caller": {"name": "Ada"}})),
            _ => ToolReturn::from(json!({})),
        },
    );
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(find)];
    Arc::new(ToolsHost::new(tools))
}

async fn front_desk(host: Arc<dyn Host>, reports: &Reports) -> PythonExtensions {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/google_app/front_desk");
    let loaded = PythonExtensions::load_dir(&common::sandbox(), &dir, host, reports.reporter())
        .await
        .unwrap();
    assert_eq!(loaded.tools.len(), 2, "{:?}", loaded.errors);
    loaded
}

fn callback(loaded: &PythonExtensions, kind: CallbackKind) -> &PythonCallback {
    loaded.callbacks.iter().find(|c| c.kind() == kind).unwrap()
}

fn context(state: Value, events: Vec<Event>) -> CallbackContext {
    CallbackContext::new("inv-1", "desk_agent", "s-1", obj(state), Arc::new(events))
}

#[tokio::test]
async fn a_tool_reads_the_callers_status_from_state_as_googles_tool_tests_expect() {
    let loaded = front_desk(Arc::new(NoHost), &Reports::default()).await;
    let balance = &loaded.tools[0];
    // Google's tool tests, in this app's words: a verified caller, a missing argument, a caller
    // nobody verified. Google reads each answer at `$.result`, where its platform nests a tool's
    // return value; here it is the value itself.
    for (args, state, status, key) in [
        (
            json!({"account": "A-7"}),
            json!({"caller_status": "verified"}),
            "ok",
            "owed",
        ),
        (
            json!({"account": ""}),
            json!({"caller_status": "verified"}),
            "refused",
            "next_step",
        ),
        (
            json!({"account": "A-7"}),
            json!({"caller_status": ""}),
            "refused",
            "next_step",
        ),
    ] {
        let mut ctx = tool_context(state.clone());
        let value = balance.invoke(obj(args), &mut ctx).await.unwrap().value;
        assert_eq!(value["status"], status, "{state}: {value}");
        assert!(!value[key].is_null(), "{state}: {value}");
    }
    let mut ctx = tool_context(json!({}));
    let noted = loaded.tools[1]
        .invoke(obj(json!({"_wanted": "human"})), &mut ctx)
        .await
        .unwrap();
    assert_eq!(noted.value["status"], "ok");
    assert_eq!(ctx.variables()["_wanted"], "human");
}

#[tokio::test]
async fn a_callback_reading_a_tools_answer_as_a_dict_verifies_the_caller() {
    let reports = Reports::default();
    let loaded = front_desk(directory(), &reports).await;
    let verify = callback(&loaded, CallbackKind::BeforeAgent);
    let mut ctx = context(
        json!({"phone": "555-0100", "caller_status": ""}),
        Vec::new(),
    );
    assert_eq!(verify.run_agent(&mut ctx), None);
    let state = ctx.variables();
    assert_eq!(
        (
            state["caller_status"].as_str(),
            state["caller_name"].as_str()
        ),
        (Some("verified"), Some("Ada")),
        "the sample's own except took the failure path: {state:?}"
    );
    assert!(!state.contains_key("lookup_failed"), "{state:?}");
    assert!(reports.all().is_empty(), "{:?}", reports.all());
}

#[tokio::test]
async fn reading_an_answer_that_is_no_json_object_as_a_dict_fails_loudly_though_the_code_catches_it()
 {
    // No directory tool: `tools.Directory_findCaller` answers 404 with words, not JSON.
    let reports = Reports::default();
    let loaded = front_desk(Arc::new(NoHost), &reports).await;
    let verify = callback(&loaded, CallbackKind::BeforeAgent);
    let mut ctx = context(json!({"phone": "555-0100"}), Vec::new());
    assert_eq!(verify.run_agent(&mut ctx), None);
    let state = ctx.variables();
    assert_eq!(state["lookup_failed"], "true");
    let error = state["lookup_error"].as_str().unwrap();
    assert!(
        error.contains("status 404") && error.contains("no tool named Directory_findCaller"),
        "{error}"
    );
    // The code swallowed the TypeError; the app is told anyway.
    let reports = reports.all();
    assert!(
        reports.iter().any(|r| r.function == "before_agent_callback"
            && r.stderr
                .contains("ExternalResponse: response.get('caller')")
            && r.file.ends_with("verify_caller/python_code.py")),
        "{reports:?}"
    );
}

#[tokio::test]
async fn an_external_response_is_the_seeds_and_reads_its_json_object_as_a_dict() {
    let source = r#"
def probe() -> dict:
    r = tools.directory({})
    r.raise_for_status()
    assert r.ok and r.status_code == 200 and r.json() == {"caller": {"name": "Ada"}, "n": 2}
    assert r.get("caller", {}).get("name") == "Ada" and r.get("missing", 5) == 5
    assert r["n"] == 2 and "caller" in r and "missing" not in r
    assert sorted(r) == ["caller", "n"] and sorted(r.keys()) == ["caller", "n"]
    assert dict(r.items()) == r.json() and list(r.values())[1] == 2 and dict(r) == r.json()
    listed = tools.listing({})
    try:
        listed.get("x")
        raise AssertionError("a list body was read as a dict")
    except TypeError as e:
        assert "is JSON list, not a JSON object" in str(e), e
    assert listed.json() == [1, 2]
    return {"repr": repr(r), "text": r.text}
"#;
    let tools: Vec<Arc<dyn AgentTool>> = vec![
        Arc::new(FunctionTool::new(
            "directory",
            "d",
            json!({"type": "object"}),
            |_, _| ToolReturn::from(json!({"caller": {"name": "Ada"}, "n": 2})),
        )),
        Arc::new(FunctionTool::new(
            "listing",
            "l",
            json!({"type": "object"}),
            |_, _| ToolReturn::from(json!([1, 2])),
        )),
    ];
    let tool = common::tool_of("probe.py", source, "probe", Arc::new(ToolsHost::new(tools))).await;
    let mut ctx = tool_context(json!({}));
    let run = tool.invoke(serde_json::Map::new(), &mut ctx).await.unwrap();
    assert_eq!(run.value["repr"], "<ExternalResponse [200]>");
    assert!(run.stderr.contains("is JSON list"), "{}", run.stderr);
}

#[tokio::test]
async fn the_app_runs_a_conversation_as_googles_samples_describe_it() {
    let reports = Reports::default();
    let loaded = front_desk(directory(), &reports).await;
    let h = engine_over(
        loaded,
        reports.clone(),
        vec![
            call("balance_lookup", json!({"account": "A-7"})),
            say("You owe 12.50."),
            call(
                "remember_request",
                json!({"_wanted": "human", "_why": "asked for a person"}),
            ),
            say("unused: act_on_request answers this step"),
            say("Done."),
        ],
        json!({"phone": "555-0100"}),
    );
    // The opening event: verify_caller verifies the caller, greet answers without the model.
    assert_eq!(
        h.send("<event>hello</event>").await.status,
        InvocationStatus::Completed
    );
    assert!(h.model.requests().is_empty(), "greet should have answered");
    let said = |h: &common::EngineHarness| h.events().last().unwrap().content.clone().unwrap();
    assert_eq!(said(&h).text(), "Welcome back, Ada.");

    h.send("What do I owe on A-7?").await;
    let responses = h.last_responses();
    let output = responses[0]["output"].as_str().unwrap();
    assert!(output.contains(r#""status":"ok""#), "{output}");

    h.send("Get me a person").await;
    let texts: Vec<String> = h
        .events()
        .iter()
        .filter_map(|e| e.content.as_ref().map(Content::text))
        .collect();
    assert!(
        texts.iter().any(|t| t == "Passing you to a person now."),
        "{texts:?}"
    );
    assert_eq!(
        h.state()["_wanted"],
        "",
        "act_on_request clears what it acted on"
    );
    assert_eq!(h.state()["_why"], "asked for a person");
    assert!(
        reports.all().iter().all(|r| r.error.is_none()),
        "{:?}",
        reports.all()
    );
}

#[tokio::test]
async fn say_goodbye_adds_words_only_when_the_turn_has_none() {
    let loaded = front_desk(Arc::new(NoHost), &Reports::default()).await;
    let goodbye = callback(&loaded, CallbackKind::AfterModel);
    let end = LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(
        "end_session",
        obj(json!({"session_escalated": false})),
    ))]);
    let user = Event::new("inv-1", "user").with_content(Content::user_text("bye"));
    let spoke = Event::new("inv-1", "desk_agent").with_content(Content::model_text("See you."));
    let mut silent = context(json!({}), vec![user.clone()]);
    let added = goodbye.run_after_model(&mut silent, &end).unwrap();
    assert_eq!(added.content.parts[0], Part::from_text("Goodbye."));
    assert_eq!(added.content.parts[1], end.content.parts[0]);
    let mut said = context(json!({}), vec![user, spoke]);
    assert_eq!(goodbye.run_after_model(&mut said, &end), None);
}
