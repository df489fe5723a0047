//! Real Feishu names every scope that would satisfy a call (`task:task:read` *or*
//! `task:task:write`); the app must ask for the least of them. Each read tool, signed in with
//! nothing, is run against the emulator, which answers as Feishu does: the auth request and the
//! authorize URL it leads to carry read scopes only, all of them ones the settings page lists.
//! And a task the assistant creates is the user's: it shows in `list_tasks`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent::{AgentTool, CallbackContext, ToolContext, ToolOutcome, coerce_tool_result};
use emulator::feishu::api::scopes::PREFERRED_SCOPES;
use emulator::feishu::{App, FeishuEmulator};
use feishu::tools::is_read_scope;
use feishu::{APP_SCOPES, ApiClient, Endpoints, FeishuTool, RetryPolicy, ToolEnv, all_tools};
use serde_json::{Map, Value, json};

const APP_ID: &str = "cli_least_privilege";

fn app() -> App {
    // The console enabled every scope the tools ask for, writes included: only the app's choice
    // keeps a read from asking for write access.
    let mut enabled: Vec<String> = APP_SCOPES.iter().map(|s| (*s).to_owned()).collect();
    enabled.extend(PREFERRED_SCOPES.iter().map(|s| (*s).to_owned()));
    App {
        app_id: APP_ID.into(),
        app_secret: "secret".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: enabled,
    }
}

async fn tools_signed_in_with(emulator: &FeishuEmulator, scopes: &[&str]) -> Vec<FeishuTool> {
    let tokens = common::sign_in(emulator, app(), scopes).await;
    let api = ApiClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        tokens,
        RetryPolicy {
            backoff: Duration::from_millis(10),
            ..RetryPolicy::default()
        },
    )
    .unwrap();
    all_tools(ToolEnv {
        api,
        tz: jiff::tz::TimeZone::get("Asia/Shanghai").unwrap(),
    })
}

async fn run(tool: &FeishuTool, args: Value) -> (String, bool, Option<agent::ToolResult>) {
    let ctx = CallbackContext::new("inv", "assistant", "s", Map::new(), Arc::default());
    let mut ctx = ToolContext::new(ctx, "fc_test")
        .with_idempotency_key(uuid::Uuid::new_v4().simple().to_string());
    coerce_tool_result(tool.run(args.as_object().unwrap().clone(), &mut ctx).await)
}

fn tool<'a>(tools: &'a [FeishuTool], name: &str) -> &'a FeishuTool {
    tools.iter().find(|t| t.name() == name).unwrap()
}

#[tokio::test]
async fn every_read_tool_asks_for_read_scopes_only() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let seed = emulator.seed();
    let tools = tools_signed_in_with(&emulator, &[]).await;
    let now = jiff::Timestamp::now();
    let week = json!({"start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(24 * 7)).to_string()});
    let calls = [
        ("search_people", json!({"query": "张伟"})),
        ("list_calendar_events", week.clone()),
        ("get_free_busy", week),
        ("list_chats", json!({})),
        (
            "read_chat_messages",
            json!({"chat_id": seed.product_chat_id}),
        ),
        ("search_docs", json!({"query": "需求"})),
        (
            "read_document",
            json!({"document_id": seed.prd_document_id}),
        ),
        ("list_drive_folder", json!({})),
        ("list_tasks", json!({})),
    ];
    let reads: Vec<&str> = tools
        .iter()
        .filter(|t| !t.is_write() && !t.scopes().is_empty())
        .map(|t| t.name())
        .collect();
    assert_eq!(
        reads.len(),
        calls.len(),
        "every read tool that needs a scope is tried: {reads:?}"
    );
    let redirect = feishu::listener::redirect_uri(feishu::listener::DEFAULT_PORT);
    for (name, args) in calls {
        let (text, is_error, structured) = run(tool(&tools, name), args).await;
        let structured = structured.unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(is_error, "{name} ran without a scope: {text}");
        assert_eq!(
            structured.outcome,
            ToolOutcome::NeedsUserAuth,
            "{name}: {text}"
        );
        let scopes = structured.auth_scopes.clone();
        assert!(!scopes.is_empty(), "{name}");
        for scope in &scopes {
            assert!(is_read_scope(scope), "{name} asks for {scope}: {scopes:?}");
            assert!(
                APP_SCOPES.contains(&scope.as_str()),
                "{name} asks for {scope}, which the settings page does not list"
            );
        }
        // The authorize URL the card opens asks for exactly these, plus staying signed in.
        let oauth = common::oauth(&emulator, APP_ID, "secret");
        let request = oauth.begin_sign_in(&scopes, &redirect).unwrap();
        let asked: String = request
            .url
            .query_pairs()
            .find(|(k, _)| k == "scope")
            .map(|(_, v)| v.into_owned())
            .unwrap();
        for scope in asked.split(' ') {
            assert!(
                scope == "offline_access" || is_read_scope(scope),
                "{name}'s sign-in asks for {scope}"
            );
        }
    }
}

#[tokio::test]
async fn feishu_names_every_alternative_and_the_tool_takes_its_own() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let tools = tools_signed_in_with(&emulator, &["calendar:calendar:readonly"]).await;
    // Feishu would accept task:task:read or task:task:write for listing tasks, and the read
    // tool asks for the read scope alone.
    let (_, _, structured) = run(tool(&tools, "list_tasks"), json!({})).await;
    assert_eq!(structured.unwrap().auth_scopes, ["task:task:read"]);
    // A write tool asks for what it declares, not the broadest alternative.
    let (_, _, created) = run(tool(&tools, "create_task"), json!({"summary": "x"})).await;
    assert_eq!(created.unwrap().auth_scopes, ["task:task:write"]);
}

#[test]
fn the_choice_prefers_the_declared_then_the_narrowest_listed_scope() {
    let named = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        feishu::choose_scopes(
            &named(&["task:task:read", "task:task:write"]),
            &["task:task:read"]
        ),
        ["task:task:read"]
    );
    // Nothing declared matches: the narrowest alternative the settings page lists.
    assert_eq!(
        feishu::choose_scopes(
            &named(&["calendar:calendar", "calendar:calendar:readonly"]),
            &["calendar:calendar.event:read"]
        ),
        ["calendar:calendar:readonly"]
    );
    // Nothing the app may ask for: nothing (the tool then says so instead of a sign-in).
    assert!(feishu::choose_scopes(&named(&["wiki:wiki", "wiki:node:read"]), &[]).is_empty());
}

#[tokio::test]
async fn a_created_task_is_assigned_to_the_user_and_listed_as_theirs() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let tools = tools_signed_in_with(&emulator, &["task:task:read", "task:task:write"]).await;
    let (text, is_error, _) =
        run(tool(&tools, "create_task"), json!({"summary": "整理周报"})).await;
    assert!(!is_error, "{text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    let guid = created["task_guid"].as_str().unwrap().to_owned();
    let (text, is_error, _) = run(tool(&tools, "list_tasks"), json!({})).await;
    assert!(!is_error, "{text}");
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_guid"] == guid.as_str()),
        "the new task is among the user's tasks: {listed}"
    );
}

/// The first sign-in of an app the companion created asks only for reads Feishu grants without
/// an administrator: every one is one the tools declare, in the auto-approved set, and no write.
#[test]
fn the_first_sign_in_asks_for_auto_approved_reads_only() {
    let tools: std::collections::BTreeSet<&str> = feishu::APP_SCOPES.iter().copied().collect();
    for scope in feishu::AUTO_APPROVED_SCOPES {
        assert!(tools.contains(scope), "{scope} is no scope of the tools");
    }
    for scope in feishu::FIRST_SIGN_IN_SCOPES {
        assert!(
            feishu::AUTO_APPROVED_SCOPES.contains(scope),
            "{scope} needs an administrator"
        );
        assert!(
            !["create", "update", "delete", "write", "send"]
                .iter()
                .any(|w| scope.contains(w)),
            "{scope} is a write"
        );
    }
    // What Feishu's tool says needs an administrator is asked for only when a tool needs it.
    for admin in [
        "search:docs:read",
        "drive:drive:readonly",
        "im:message.send_as_user",
    ] {
        assert!(!feishu::AUTO_APPROVED_SCOPES.contains(&admin), "{admin}");
    }
}
