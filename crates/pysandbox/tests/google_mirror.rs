//! Google's own samples for this runtime, run unchanged, against what Google's own tests expect of
//! them: the project template of `GoogleCloudPlatform/cxas-scrapi` (its `Sample_Support_Agent`
//! app, its tool tests and its callback tests, restated here as sandbox calls).
//!
//! Google's code is not in this repository: set `CXAS_SCRAPI` to a checkout of that repository
//! (or a bare clone) to run this; without it the test says so and passes, and CI runs
//! `google_layout.rs` and `google_samples.rs`, whose fixture app does the same things.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent::{
    AgentTool, CallbackContext, Content, Event, FunctionCall, FunctionTool, LlmRequest,
    LlmResponse, Part, StateMap, ToolReturn,
};
use common::{Reports, obj, tool_context};
use pysandbox::{CallbackKind, Host, PythonCallback, PythonExtensions, ToolsHost};
use serde_json::{Value, json};

const TEMPLATE: &str = ".agents/skills/cxas-agent-foundry/assets/project-template";

/// The project template, from `CXAS_SCRAPI` (extracted into `scratch` from a bare clone).
fn template(scratch: &Path) -> Option<PathBuf> {
    let repo = PathBuf::from(std::env::var_os("CXAS_SCRAPI")?);
    if repo.join(TEMPLATE).is_dir() {
        return Some(repo.join(TEMPLATE));
    }
    let script = format!(
        "git -C '{}' archive HEAD '{TEMPLATE}' | tar -x -C '{}'",
        repo.display(),
        scratch.display()
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cannot extract {TEMPLATE} from {}",
        repo.display()
    );
    Some(scratch.join(TEMPLATE))
}

/// The customer datastore the template's `before_agent_callback` asks (an API connector tool
/// of the real app, which the template does not include).
fn datastore() -> Arc<dyn Host> {
    let read = FunctionTool::new(
        "Read_Customer_Datastore_readDatastore",
        "Reads a customer.",
        json!({"type": "object"}),
        |_, _| {
            ToolReturn::from(json!({"customer": {"name": "Jordan", "role": "premium",
                "service_status": "active"}}))
        },
    );
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(read)];
    Arc::new(ToolsHost::new(tools))
}

/// What each check found: (sample, check, passed, detail).
#[derive(Default)]
struct Results(Vec<(String, String, bool, String)>);

impl Results {
    fn check(&mut self, sample: &str, name: &str, passed: bool, detail: impl std::fmt::Debug) {
        self.0.push((
            sample.to_owned(),
            name.to_owned(),
            passed,
            format!("{detail:?}"),
        ));
    }
}

fn user_event(text: &str) -> Event {
    Event::new("inv-1", "user").with_content(Content::user_text(text))
}

fn context(state: Value, events: Vec<Event>) -> CallbackContext {
    CallbackContext::new("inv-1", "root_agent", "s-1", obj(state), Arc::new(events))
}

fn texts(response: &Option<LlmResponse>) -> Vec<String> {
    let parts = response
        .as_ref()
        .map(|r| r.content.parts.clone())
        .unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| p.text().map(str::to_owned))
        .collect()
}

fn calls(response: &Option<LlmResponse>) -> Vec<FunctionCall> {
    let parts = response
        .as_ref()
        .map(|r| r.content.parts.clone())
        .unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| p.function_call().cloned())
        .collect()
}

const SILENCE: &str = "<context>no user activity detected for 10 seconds.</context>";

/// One case of Google's `test.py` for the root agent's `before_model_callback`: the state and
/// user input it sets up (`user_content` is the session's last user event here, as in the
/// runtime), the request's contents (`MagicMock()` in Google's test: none), and its assertion.
type Check = fn(&Option<LlmResponse>, &StateMap) -> bool;

fn before_model_cases() -> Vec<(&'static str, Value, &'static str, Vec<Content>, Check)> {
    let silence = || {
        vec![
            Content::model_text("How can I help you?"),
            Content::user_text(SILENCE),
        ]
    };
    let normal = "My phone is not working";
    let idle = json!({"_action_trigger": "", "api_failed": "false"});
    let escalate = json!({"_action_trigger": "escalate", "_escalation_reason": "Customer wants human",
        "_escalation_topic": "billing"});
    let silent =
        |n: &str| json!({"no_input_counter": n, "_action_trigger": "", "api_failed": "false"});
    vec![
        (
            "test_session_start_returns_greeting",
            json!({}),
            "<event>session start</event>",
            vec![],
            |r, _| !texts(r).is_empty(),
        ),
        (
            "test_greeting_text_content",
            json!({}),
            "<event>session start</event>",
            vec![],
            |r, _| {
                texts(r)
                    .first()
                    .is_some_and(|t| t.to_lowercase().contains("virtual assistant"))
            },
        ),
        (
            "test_normal_message_skips_greeting",
            idle.clone(),
            normal,
            vec![],
            |r, _| r.is_none(),
        ),
        (
            "test_no_trigger_returns_none",
            idle.clone(),
            normal,
            vec![],
            |r, _| r.is_none(),
        ),
        (
            "test_missing_trigger_key_returns_none",
            json!({}),
            normal,
            vec![],
            |r, _| r.is_none(),
        ),
        (
            "test_unknown_trigger_returns_none",
            json!({"_action_trigger": "unknown_trigger_value"}),
            normal,
            vec![],
            |r, s| r.is_none() && s["_action_trigger"] == "",
        ),
        (
            "test_escalation_returns_response",
            escalate.clone(),
            normal,
            vec![],
            |r, _| r.is_some(),
        ),
        (
            "test_escalation_clears_trigger",
            escalate.clone(),
            normal,
            vec![],
            |_, s| s["_action_trigger"] == "",
        ),
        (
            "test_escalation_includes_text",
            escalate.clone(),
            normal,
            vec![],
            |r, _| !texts(r).is_empty(),
        ),
        (
            "test_escalation_resolves_state_references",
            json!({"_action_trigger": "escalate", "_escalation_reason": "Billing dispute",
                "_escalation_topic": "billing"}),
            normal,
            vec![],
            |r, _| {
                calls(r).iter().any(|c| {
                    c.name == "payload_update_tool"
                        && c.args["escalation_reason"] == "Billing dispute"
                        && c.args["main_topic"] == "billing"
                })
            },
        ),
        (
            "test_api_failure_triggers_escalation",
            json!({"api_failed": "true"}),
            normal,
            vec![],
            |r, _| r.is_some(),
        ),
        (
            "test_api_failure_clears_flag",
            json!({"api_failed": "true"}),
            normal,
            vec![],
            |_, s| s["api_failed"] == "false",
        ),
        (
            "test_api_failure_includes_apology_text",
            json!({"api_failed": "true"}),
            normal,
            vec![],
            |r, _| {
                texts(r).first().is_some_and(|t| {
                    let t = t.to_lowercase();
                    t.contains("technical issue") || t.contains("transfer")
                })
            },
        ),
        (
            "test_first_silence_returns_response",
            silent("0"),
            SILENCE,
            silence(),
            |r, _| r.is_some(),
        ),
        (
            "test_first_silence_increments_counter",
            silent("0"),
            SILENCE,
            silence(),
            |_, s| s["no_input_counter"] == "1",
        ),
        (
            "test_first_silence_includes_sorry_prefix",
            silent("0"),
            SILENCE,
            silence(),
            |r, _| {
                texts(r)
                    .first()
                    .is_some_and(|t| t.to_lowercase().contains("sorry"))
            },
        ),
        (
            "test_third_silence_ends_session",
            silent("2"),
            SILENCE,
            silence(),
            |r, _| calls(r).iter().any(|c| c.name == "end_session"),
        ),
        (
            "test_normal_message_resets_counter",
            silent("2"),
            normal,
            vec![Content::user_text("My phone is broken")],
            |_, s| s["no_input_counter"] == "0",
        ),
    ]
}

fn root(loaded: &PythonExtensions, kind: CallbackKind) -> Option<&PythonCallback> {
    loaded.callbacks.iter().find(|c| c.kind() == kind)
}

async fn tool_tests(loaded: &PythonExtensions, app: &Path, results: &mut Results) {
    for dir in ["lookup_account", "payload_update_tool", "set_session_state"] {
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(app.join(format!("tools/{dir}/{dir}.json"))).unwrap(),
        )
        .unwrap();
        let tool = loaded
            .tools
            .iter()
            .find(|t| t.spec().name == json["displayName"]);
        let declared = tool.is_some_and(|t| {
            t.spec().function == json["pythonFunction"]["name"]
                && t.spec().description == json["pythonFunction"]["description"]
        });
        results.check(
            &format!("tools/{dir}"),
            "loads as its JSON declares it",
            declared,
            (),
        );
    }
    // evals/tool_tests/example_tool_tests.yaml: args, variables, and `$.result.*` expectations
    // (Google's platform nests a tool's return value under `result`).
    let cases = [
        (
            "lookup_account_success",
            "lookup_account",
            json!({"account_id": "9820598207"}),
            json!({"auth_status": "authenticated"}),
            "status",
            Some("success"),
        ),
        (
            "lookup_account_missing_id",
            "lookup_account",
            json!({"account_id": ""}),
            json!({"auth_status": "authenticated"}),
            "agent_action",
            None,
        ),
        (
            "lookup_account_unauthenticated",
            "lookup_account",
            json!({"account_id": "9820598207"}),
            json!({"auth_status": ""}),
            "agent_action",
            None,
        ),
        (
            "set_session_state_trigger",
            "set_session_state",
            json!({"_action_trigger": "escalate",
            "_escalation_reason": "customer requested", "_escalation_topic": "billing"}),
            json!({}),
            "status",
            Some("success"),
        ),
    ];
    for (name, tool, args, state, path, equals) in cases {
        let Some(tool) = loaded.tools.iter().find(|t| t.spec().name == tool) else {
            results.check(&format!("tools/{tool}"), name, false, "not loaded");
            continue;
        };
        let mut ctx = tool_context(state);
        let value = tool.invoke(obj(args), &mut ctx).await.map(|r| r.value);
        let found = value
            .as_ref()
            .ok()
            .map(|v| v[path].clone())
            .unwrap_or_default();
        let passed = match equals {
            Some(expected) => found == expected,
            None => !found.is_null(),
        };
        results.check(&format!("tools/{}", tool.spec().name), name, passed, value);
    }
}

#[tokio::test]
async fn googles_samples_load_and_pass_googles_own_tests() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(template) = template(scratch.path()) else {
        eprintln!("CXAS_SCRAPI is not set: Google's samples were not run");
        return;
    };
    let app = template.join("cxas_app/Sample_Support_Agent");
    let reports = Reports::default();
    let loaded =
        PythonExtensions::load_dir(&common::sandbox(), &app, datastore(), reports.reporter())
            .await
            .unwrap();
    let mut results = Results::default();
    tool_tests(&loaded, &app, &mut results).await;

    let agent = "agents/root_agent/before_agent_callbacks";
    if let Some(cb) = root(&loaded, CallbackKind::BeforeAgent) {
        let mut ctx = context(
            json!({"account_id": "9820598207", "customer_id": "4444444",
            "auth_status": ""}),
            Vec::new(),
        );
        let answer = cb.run_agent(&mut ctx);
        let s = ctx.variables();
        let authenticated = answer.is_none()
            && s["auth_status"] == "authenticated"
            && s["customer_name"] == "Jordan"
            && !s.contains_key("api_failed");
        results.check(
            agent,
            "identifiers are authenticated through the datastore tool",
            authenticated,
            s,
        );
        let mut ctx = context(json!({"auth_status": "authenticated"}), Vec::new());
        let early = cb.run_agent(&mut ctx).is_none()
            && *ctx.variables() == obj(json!({"auth_status": "authenticated"}));
        results.check(
            agent,
            "test_returns_early_when_authenticated",
            early,
            ctx.variables(),
        );
    } else {
        results.check(agent, "loads", false, &loaded.errors);
    }

    // The callback tests' own copy of the callback (evals/callback_tests), as `test.py` runs it.
    let tested = template.join("evals/callback_tests/agents/root_agent/before_model_callbacks");
    let copy = PythonExtensions::load_dir(
        &common::sandbox(),
        &tested.join("before_model"),
        datastore(),
        reports.reporter(),
    )
    .await
    .unwrap();
    let sample = "evals/callback_tests/…/before_model (test.py)";
    match root(&copy, CallbackKind::BeforeModel) {
        Some(cb) => {
            for (name, state, user, contents, check) in before_model_cases() {
                let mut ctx = context(state, vec![user_event(user)]);
                let mut request = LlmRequest {
                    contents: contents.into(),
                    ..LlmRequest::default()
                };
                let answer = cb.run_before_model(&mut ctx, &mut request);
                results.check(
                    sample,
                    name,
                    check(&answer, ctx.variables()),
                    (&answer, ctx.variables()),
                );
            }
        }
        None => results.check(sample, "loads", false, &copy.errors),
    }

    let after = "agents/root_agent/after_model_callbacks";
    if let Some(cb) = root(&loaded, CallbackKind::AfterModel) {
        let end = LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(
            "end_session",
            obj(json!({"session_escalated": false})),
        ))]);
        let mut silent = context(json!({}), vec![user_event("bye")]);
        let added = cb.run_after_model(&mut silent, &end);
        let farewell = texts(&added)
            .first()
            .is_some_and(|t| t.contains("Have a great day"))
            && calls(&added).iter().any(|c| c.name == "end_session");
        results.check(
            after,
            "farewell before a silent end_session",
            farewell,
            &added,
        );
        let spoke = Event::new("inv-1", "root_agent").with_content(Content::model_text("Bye now."));
        let mut said = context(json!({}), vec![user_event("bye"), spoke]);
        let none = cb.run_after_model(&mut said, &end).is_none();
        results.check(after, "no farewell when the turn spoke already", none, ());
    }
    let sub = loaded.errors.iter().any(|e| {
        matches!(e, pysandbox::LoadError::SubAgent { agent, .. }
        if agent == "troubleshoot_agent")
    });
    results.check(
        "agents/troubleshoot_agent/before_model_callbacks",
        "reported as a sub-agent's",
        sub,
        &loaded.errors,
    );

    for (sample, name, passed, detail) in &results.0 {
        let mark = if *passed { "PASS" } else { "FAIL" };
        println!(
            "{mark} {sample}: {name}{}",
            if *passed {
                String::new()
            } else {
                format!(" — {detail}")
            }
        );
    }
    let failed: Vec<_> = results.0.iter().filter(|r| !r.2).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed",
        failed.len(),
        results.0.len()
    );
    assert!(
        reports.all().iter().all(|r| r.error.is_none()),
        "{:?}",
        reports.all()
    );
}
