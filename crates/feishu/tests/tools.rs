//! Every tool against the Feishu emulator: success, a missing scope, rate limits, server errors,
//! an expired token, deduplicated writes, pagination, and the approval-card previews in both
//! languages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::{
    AgentTool, CallbackContext, Preview, Risk, ToolContext, ToolOutcome, ToolReturn,
    coerce_tool_result,
};
use emulator::feishu::api::scopes::PREFERRED_SCOPES;
use emulator::feishu::faults::Fault;
use emulator::feishu::{App, FeishuEmulator};
use feishu::{ApiClient, Endpoints, FeishuTool, RetryPolicy, ToolEnv, all_tools};
use serde_json::{Map, Value, json};

const APP_ID: &str = "cli_tools_test";

struct Setup {
    emulator: FeishuEmulator,
    tools: Vec<FeishuTool>,
}

fn app() -> App {
    let mut enabled: Vec<String> = PREFERRED_SCOPES.iter().map(|s| (*s).to_owned()).collect();
    enabled.push("im:message.p2p_msg:get_as_user".into());
    App {
        app_id: APP_ID.into(),
        app_secret: "secret".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: enabled,
    }
}

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        backoff: Duration::from_millis(10),
        max_rate_limit_wait: Duration::from_secs(3),
        ..RetryPolicy::default()
    }
}

/// Signed in with `scopes` (all the tools need, by default).
async fn setup_with(scopes: &[&str]) -> Setup {
    let emulator = FeishuEmulator::start().await.unwrap();
    let tokens = common::sign_in(&emulator, app(), scopes).await;
    let api = ApiClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        tokens,
        fast_policy(),
    )
    .unwrap();
    let tools = all_tools(ToolEnv {
        api,
        tz: jiff::tz::TimeZone::get("Asia/Shanghai").unwrap(),
    });
    Setup { emulator, tools }
}

async fn setup() -> Setup {
    let mut scopes: Vec<&str> = PREFERRED_SCOPES.to_vec();
    scopes.push("im:message.p2p_msg:get_as_user");
    setup_with(&scopes).await
}

impl Setup {
    fn tool(&self, name: &str) -> &FeishuTool {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    }

    async fn run_with_key(
        &self,
        name: &str,
        args: Value,
        key: &str,
    ) -> (String, bool, Option<agent::ToolResult>) {
        let ctx = CallbackContext::new("inv", "assistant", "s", Map::new(), Arc::default());
        let mut ctx = ToolContext::new(ctx, "fc_test").with_idempotency_key(key);
        let result: ToolReturn = self
            .tool(name)
            .run(args.as_object().unwrap().clone(), &mut ctx)
            .await;
        coerce_tool_result(result)
    }

    async fn run(&self, name: &str, args: Value) -> Value {
        let (text, is_error, _) = self.run_with_key(name, args, &uuid_key()).await;
        assert!(!is_error, "{name} failed: {text}");
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{name} answered non-JSON: {text}"))
    }

    async fn preview(&self, name: &str, args: Value) -> Preview {
        self.tool(name)
            .preview(args.as_object().unwrap())
            .await
            .expect("writes have previews")
    }
}

fn uuid_key() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn week() -> Value {
    let now = jiff::Timestamp::now();
    json!({"start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(24 * 10)).to_string()})
}

#[tokio::test]
async fn the_read_tools_answer_from_the_tenant() {
    let s = setup().await;
    let seed = s.emulator.seed();
    let me = s.run("whoami", json!({})).await;
    assert_eq!(me["open_id"], seed.demo_user);

    let agenda = s.run("list_calendar_events", week()).await;
    let events = agenda["events"].as_array().unwrap();
    let standups = events.iter().filter(|e| e["summary"] == "每日站会").count();
    assert!(
        standups >= 5,
        "the daily stand-up is expanded into occurrences: {agenda}"
    );
    assert_eq!(agenda["time_zone"], "Asia/Shanghai");

    let busy = s.run("get_free_busy", week()).await;
    assert!(!busy["busy"].as_array().unwrap().is_empty());

    let chats = s.run("list_chats", json!({})).await;
    assert!(
        chats["chats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["chat_id"] == seed.product_chat_id)
    );
    let found = s.run("list_chats", json!({"query": "羽毛球"})).await;
    assert_eq!(found["chats"][0]["chat_id"], seed.badminton_chat_id);

    let people = s.run("search_people", json!({"query": "张伟"})).await;
    assert_eq!(people["people"][0]["open_id"], seed.p2p_peer);

    let doc = s
        .run(
            "read_document",
            json!({"document_id": seed.prd_document_id}),
        )
        .await;
    assert!(doc["markdown"].as_str().unwrap().contains('#'), "{doc}");

    let results = s.run("search_docs", json!({"query": "需求"})).await;
    assert!(
        !results["results"].as_array().unwrap().is_empty(),
        "{results}"
    );

    let tasks = s.run("list_tasks", json!({})).await;
    assert!(
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_guid"] == seed.open_task_guid)
    );
    let done = s.run("list_tasks", json!({"completed": true})).await;
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_guid"] == seed.completed_task_guid)
    );
}

#[tokio::test]
async fn lists_follow_every_page() {
    let s = setup().await;
    let seed = s.emulator.seed();
    let history = s
        .run(
            "read_chat_messages",
            json!({"chat_id": seed.product_chat_id, "limit": 200}),
        )
        .await;
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        seed.product_chat_messages.min(200),
        "more than one page of 50"
    );
    assert!(
        messages
            .iter()
            .all(|m| !m["text"].as_str().unwrap().is_empty())
    );

    let folder = s
        .run(
            "list_drive_folder",
            json!({"folder_token": seed.archive_folder_token}),
        )
        .await;
    assert_eq!(
        folder["files"].as_array().unwrap().len(),
        seed.archive_files,
        "every page, via next_page_token"
    );
}

#[tokio::test]
async fn a_message_sent_twice_with_one_key_lands_once() {
    let s = setup().await;
    let chat = s.emulator.seed().product_chat_id;
    let key = uuid_key();
    let args = json!({"chat_id": chat, "text": "周会改到三点"});
    let (first, is_error, _) = s.run_with_key("send_message", args.clone(), &key).await;
    assert!(!is_error, "{first}");
    let (second, _, _) = s.run_with_key("send_message", args, &key).await;
    let first: Value = serde_json::from_str(&first).unwrap();
    let second: Value = serde_json::from_str(&second).unwrap();
    assert_eq!(first["message_id"], second["message_id"]);
    let created = s.emulator.messages_created_in(&chat);
    assert_eq!(created.len(), 1);
    assert!(created[0].content.contains("周会改到三点"));
    assert!(s.tool("send_message").deduplicates());
}

#[tokio::test]
async fn events_and_tasks_created_twice_with_one_key_exist_once() {
    let s = setup().await;
    let seed = s.emulator.seed();
    let key = uuid_key();
    let event = json!({
        "summary": "方案评审",
        "start": "2030-01-07T14:00:00+08:00",
        "end": "2030-01-07T15:00:00+08:00",
        "attendees": [seed.p2p_peer]
    });
    let (a, ea, _) = s
        .run_with_key("create_calendar_event", event.clone(), &key)
        .await;
    let (b, eb, _) = s.run_with_key("create_calendar_event", event, &key).await;
    assert!(!ea && !eb, "{a} / {b}");
    assert_eq!(
        serde_json::from_str::<Value>(&a).unwrap()["event_id"],
        serde_json::from_str::<Value>(&b).unwrap()["event_id"]
    );
    assert_eq!(s.emulator.events_created(), 1);

    let task_key = uuid_key();
    let task = json!({"summary": "准备评审材料", "due": "2030-01-06"});
    s.run_with_key("create_task", task.clone(), &task_key).await;
    s.run_with_key("create_task", task, &task_key).await;
    assert_eq!(s.emulator.tasks_created(), 1);
}

#[tokio::test]
async fn documents_are_created_and_appended_to_once_per_key() {
    let s = setup().await;
    let doc = s.run("create_document", json!({"title": "周报"})).await;
    let id = doc["document_id"].as_str().unwrap().to_owned();
    assert_eq!(s.emulator.documents_created(), 1);
    assert!(
        !s.tool("create_document").deduplicates(),
        "Feishu has no key for this one"
    );
    let key = uuid_key();
    let body = json!({"document_id": id, "markdown": "# 本周进展\n\n- 完成评审\n- 修复三个缺陷\n"});
    s.run_with_key("append_to_document", body.clone(), &key)
        .await;
    let after_first = s.emulator.block_count(&id).unwrap();
    assert!(after_first >= 3, "heading and two items: {after_first}");
    s.run_with_key("append_to_document", body, &key).await;
    assert_eq!(
        s.emulator.block_count(&id).unwrap(),
        after_first,
        "the same client_token appends once"
    );
}

#[tokio::test]
async fn a_reply_lands_under_the_message_once_per_key() {
    let s = setup().await;
    let chat = s.emulator.seed().product_chat_id;
    let history = s
        .run("read_chat_messages", json!({"chat_id": chat, "limit": 1}))
        .await;
    let original = history["messages"][0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = uuid_key();
    let args = json!({"message_id": original, "text": "收到，我来跟进"});
    s.run_with_key("reply_message", args.clone(), &key).await;
    s.run_with_key("reply_message", args, &key).await;
    let created = s.emulator.messages_created_in(&chat);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].parent_id.as_deref(), Some(original.as_str()));
}

#[tokio::test]
async fn tasks_are_completed_and_reopened() {
    let s = setup().await;
    let guid = s.emulator.seed().open_task_guid;
    let done = s.run("complete_task", json!({"task_guid": guid})).await;
    assert_eq!(done["completed"], true);
    let open = s.run("reopen_task", json!({"task_guid": guid})).await;
    assert_eq!(open["completed"], false);
}

#[tokio::test]
async fn events_are_updated_and_deleted() {
    let s = setup().await;
    let created = s
        .run(
            "create_calendar_event",
            json!({"summary": "临时会", "start": "2030-02-01 10:00", "end": "2030-02-01 10:30"}),
        )
        .await;
    let id = created["event_id"].as_str().unwrap().to_owned();
    let updated = s
        .run(
            "update_calendar_event",
            json!({"event_id": id, "start": "2030-02-01 11:00", "end": "2030-02-01 11:30"}),
        )
        .await;
    assert_eq!(updated["start"], "2030-02-01 11:00");
    let deleted = s
        .run("delete_calendar_event", json!({"event_id": id}))
        .await;
    assert_eq!(deleted["deleted"], id);
}

#[tokio::test]
async fn a_missing_user_scope_asks_to_sign_in_for_exactly_that_scope() {
    // Signed in for the calendar only.
    let s = setup_with(&["calendar:calendar:readonly"]).await;
    let chat = s.emulator.seed().product_chat_id;
    let (text, is_error, structured) = s
        .run_with_key(
            "send_message",
            json!({"chat_id": chat, "text": "hi"}),
            &uuid_key(),
        )
        .await;
    let structured = structured.unwrap();
    assert!(is_error);
    assert_eq!(structured.outcome, ToolOutcome::NeedsUserAuth);
    assert_eq!(
        structured.auth_scopes,
        ["im:message", "im:message.send_as_user"],
        "{text}"
    );
    assert!(s.emulator.messages_created_in(&chat).is_empty());

    // Creating an event then inviting people takes two scopes: one sign-in asks for both.
    let event = json!({"summary": "x", "start": "2030-01-01 10:00", "end": "2030-01-01 11:00", "attendees": [s.emulator.seed().p2p_peer]});
    let (_, _, created) = s
        .run_with_key("create_calendar_event", event, &uuid_key())
        .await;
    assert_eq!(
        created.unwrap().auth_scopes,
        [
            "calendar:calendar.event:create",
            "calendar:calendar.event:update"
        ]
    );

    let (_, _, tasks) = s.run_with_key("list_tasks", json!({}), &uuid_key()).await;
    assert_eq!(tasks.unwrap().auth_scopes, ["task:task:read"]);
}

#[tokio::test]
async fn a_scope_the_app_lacks_waits_on_feishus_scope_apply_page_for_that_scope_and_app() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let mut limited = app();
    limited.enabled_scopes.retain(|s| !s.starts_with("task:"));
    emulator.register_app(limited);
    // The user cannot grant what the organisation never gave the app: only the admin can help.
    let store = feishu::MemoryTokenStore::default();
    let token = feishu::StoredToken {
        access_token: secrecy::SecretString::from(
            emulator.issue_token(APP_ID, &["calendar:calendar:readonly"]),
        ),
        refresh_token: None,
        expires_at: agent::now_millis() + 3_600_000,
        refresh_expires_at: None,
        scopes: vec!["calendar:calendar:readonly".into()],
        user: None,
        signed_in_at: agent::now_millis(),
    };
    feishu::TokenStore::save(&store, &token).unwrap();
    let tokens = Arc::new(feishu::TokenManager::new(
        common::oauth(&emulator, APP_ID, "secret"),
        Arc::new(store),
        Arc::new(agent::SystemClock),
    ));
    let api = ApiClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        tokens,
        fast_policy(),
    )
    .unwrap();
    let s = Setup {
        tools: all_tools(ToolEnv {
            api,
            tz: jiff::tz::TimeZone::UTC,
        }),
        emulator,
    };
    let (text, is_error, structured) = s.run_with_key("list_tasks", json!({}), &uuid_key()).await;
    assert!(is_error);
    let structured = structured.unwrap();
    // Not a dead end: the call waits, naming the one scope to apply for, with Feishu's page
    // for exactly that scope and this app, and the model is told an administrator may act.
    assert_eq!(structured.outcome, ToolOutcome::NeedsUserAuth);
    assert_eq!(structured.auth_scopes, ["task:task:read"]);
    let page = url::Url::parse(structured.authorize_url.as_deref().unwrap()).unwrap();
    assert_eq!(page.path(), "/page/scope-apply");
    let query: std::collections::HashMap<_, _> = page.query_pairs().into_owned().collect();
    assert_eq!(query["clientID"], APP_ID);
    assert_eq!(query["scopes"], "task:task:read");
    assert!(text.contains("administrator"), "{text}");
}

#[tokio::test]
async fn a_rate_limit_is_waited_out_and_the_call_goes_through() {
    let s = setup().await;
    s.emulator
        .inject_fault(Fault::rate_limited(1).on("/open-apis/task/v2/tasks"));
    let started = Instant::now();
    let tasks = s.run("list_tasks", json!({})).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the reset was waited out"
    );
    assert!(!tasks["tasks"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn server_errors_are_retried_then_reported_clearly() {
    let s = setup().await;
    s.emulator.inject_fault(
        Fault::server_error(503)
            .on("/open-apis/task/v2/tasks")
            .times(2),
    );
    let tasks = s.run("list_tasks", json!({})).await;
    assert!(
        !tasks["tasks"].as_array().unwrap().is_empty(),
        "third time lucky"
    );

    s.emulator.inject_fault(
        Fault::server_error(500)
            .on("/open-apis/task/v2/tasks")
            .times(10),
    );
    let (text, is_error, structured) = s.run_with_key("list_tasks", json!({}), &uuid_key()).await;
    assert!(is_error);
    assert_eq!(structured.unwrap().outcome, ToolOutcome::Failed);
    assert!(
        text.contains("HTTP 500") && text.contains("log id"),
        "{text}"
    );
}

#[tokio::test]
async fn an_expired_token_is_refreshed_and_the_call_goes_through() {
    let s = setup().await;
    s.emulator
        .inject_fault(Fault::expire_token().on("/open-apis/task/v2/tasks"));
    let tasks = s.run("list_tasks", json!({})).await;
    assert!(!tasks["tasks"].as_array().unwrap().is_empty());
    assert_eq!(
        s.emulator
            .count("/open-apis/authen/v2/oauth/token", Some("refresh_token")),
        1
    );
}

#[tokio::test]
async fn write_previews_read_well_in_both_languages() {
    let s = setup().await;
    let seed = s.emulator.seed();

    let send = s
        .preview(
            "send_message",
            json!({"chat_id": seed.product_chat_id, "text": "周会改到三点"}),
        )
        .await;
    assert_eq!(send.summary.zh, "以你的身份向群「产品研发部」发送消息");
    assert_eq!(
        send.summary.en,
        "Send a message to the group “产品研发部” as you"
    );
    assert_eq!(send.risk, Risk::Normal);
    assert_eq!(send.fields[0].value, "周会改到三点");
    assert_eq!(
        (
            send.fields[1].label.en.as_str(),
            send.fields[1].value.as_str()
        ),
        ("Chat", "产品研发部")
    );
    let all_hands = s
        .preview(
            "send_message",
            json!({"chat_id": seed.all_hands_chat_id, "text": "大家好"}),
        )
        .await;
    assert_eq!(all_hands.risk, Risk::High, "a group over 50 members");
    let direct = s
        .preview(
            "send_message",
            json!({"user_id": seed.p2p_peer, "text": "在吗"}),
        )
        .await;
    assert_eq!(direct.summary.en, "Send a message to 张伟 as you");

    let event = s
        .preview(
            "create_calendar_event",
            json!({"summary": "方案评审", "start": "2030-01-07T14:00:00+08:00", "end": "2030-01-07T15:00:00+08:00", "attendees": [seed.p2p_peer], "location": "3楼会议室"}),
        )
        .await;
    assert_eq!(
        event.summary.zh,
        "在你的日历中创建日程「方案评审」并发送邀请"
    );
    assert_eq!(
        event.summary.en,
        "Create the event “方案评审” in your calendar and send invitations"
    );
    let values: Vec<(&str, &str)> = event
        .fields
        .iter()
        .map(|f| (f.label.en.as_str(), f.value.as_str()))
        .collect();
    assert_eq!(
        values,
        [
            ("When", "2030-01-07 14:00–15:00 (Asia/Shanghai)"),
            ("Attendees", "张伟"),
            ("Where", "3楼会议室")
        ]
    );
    assert_eq!(event.fields[0].label.zh, "时间");

    let update = s
        .preview("update_calendar_event", json!({"event_id": seed.review_event_id, "summary": "v2.3 需求评审（改期）", "start": "2030-01-08 16:00", "end": "2030-01-08 17:00"}))
        .await;
    assert_eq!(update.summary.zh, "修改日程「v2.3 需求评审」");
    assert_eq!(update.summary.en, "Change the event “v2.3 需求评审”");
    assert_eq!(update.changes[0].field.en, "Title");
    assert_eq!(
        (
            update.changes[0].from.as_str(),
            update.changes[0].to.as_str()
        ),
        ("v2.3 需求评审", "v2.3 需求评审（改期）")
    );
    assert_eq!(update.changes[1].field.zh, "时间");
    assert!(
        update.changes[1].from.contains("10:00–11:30"),
        "the current time: {}",
        update.changes[1].from
    );
    assert_eq!(
        update.changes[1].to,
        "2030-01-08 16:00–17:00 (Asia/Shanghai)"
    );

    let delete = s
        .preview(
            "delete_calendar_event",
            json!({"event_id": seed.review_event_id}),
        )
        .await;
    assert_eq!(delete.risk, Risk::High);
    assert_eq!(
        delete.summary.en,
        "Delete the event “v2.3 需求评审” (cannot be undone)"
    );
    assert_eq!(delete.summary.zh, "删除日程「v2.3 需求评审」（无法撤销）");

    let task = s
        .preview(
            "create_task",
            json!({"summary": "准备评审材料", "due": "2030-01-06 18:00"}),
        )
        .await;
    assert_eq!(task.summary.zh, "创建任务「准备评审材料」");
    assert_eq!(task.summary.en, "Create the task “准备评审材料”");
    assert_eq!(task.fields[0].value, "2030-01-06 18:00");
    let complete = s
        .preview("complete_task", json!({"task_guid": seed.open_task_guid}))
        .await;
    assert_eq!(
        complete.summary.en,
        "Complete the task “整理 v2.3 需求评审意见”"
    );
    assert_eq!(complete.summary.zh, "完成任务「整理 v2.3 需求评审意见」");
    assert_eq!(
        (
            complete.changes[0].from.as_str(),
            complete.changes[0].to.as_str()
        ),
        ("未完成 / open", "已完成 / done")
    );
    let reopen = s
        .preview(
            "reopen_task",
            json!({"task_guid": seed.completed_task_guid}),
        )
        .await;
    assert_eq!(reopen.summary.zh, "重新打开任务「提交差旅报销单」");
    assert_eq!(reopen.summary.en, "Reopen the task “提交差旅报销单”");

    let doc = s.preview("create_document", json!({"title": "周报"})).await;
    assert_eq!(
        (doc.summary.zh.as_str(), doc.summary.en.as_str()),
        ("新建文档「周报」", "Create the document “周报”")
    );
    let append = s
        .preview(
            "append_to_document",
            json!({"document_id": seed.prd_document_id, "markdown": "## 补充\n新增导出功能"}),
        )
        .await;
    assert!(
        append.summary.en.starts_with("Append to the end of"),
        "{}",
        append.summary.en
    );
    assert!(
        append.summary.zh.starts_with("在文档「") && append.summary.zh.ends_with("」末尾追加内容"),
        "{}",
        append.summary.zh
    );
    assert_eq!(append.fields[0].value, "## 补充\n新增导出功能");

    let reply = s
        .preview(
            "reply_message",
            json!({"message_id": "om_unknown", "text": "收到"}),
        )
        .await;
    assert_eq!(reply.summary.zh, "以你的身份回复一条消息");
    assert_eq!(reply.summary.en, "Reply to a message as you");
    assert_eq!(reply.fields[0].value, "收到");
}

#[tokio::test]
async fn every_tool_declares_scopes_and_writes_need_approval() {
    let s = setup().await;
    let writes = [
        "send_message",
        "reply_message",
        "create_calendar_event",
        "update_calendar_event",
        "delete_calendar_event",
        "create_task",
        "complete_task",
        "reopen_task",
        "create_document",
        "append_to_document",
    ];
    assert_eq!(s.tools.len(), 20);
    for tool in &s.tools {
        let is_write = writes.contains(&tool.name());
        assert_eq!(
            tool.requires_approval(&Map::new()),
            is_write,
            "{}",
            tool.name()
        );
        if tool.name() != "whoami" {
            assert!(
                !tool.scopes().is_empty(),
                "{} declares no scope",
                tool.name()
            );
        }
        for scope in tool.scopes() {
            assert!(
                PREFERRED_SCOPES.contains(&scope.as_str()),
                "{} asks for {scope}, which the tenant does not know",
                tool.name()
            );
        }
        assert!(
            jsonschema::validator_for(&tool.parameters()).is_ok(),
            "{}",
            tool.name()
        );
    }
}

#[test]
fn the_readme_tells_users_to_enable_every_scope_the_tools_ask_for() {
    let readme = include_str!("../../../README.md");
    let section = &readme[readme
        .find("## Connecting your own Feishu app")
        .expect("the registration section")..];
    let mut wanted: Vec<&str> = vec![
        "offline_access",
        "contact:contact.base:readonly",
        "docx:document:readonly",
    ];
    wanted.extend(PREFERRED_SCOPES.iter().copied());
    for scope in wanted {
        assert!(
            section.contains(&format!("`{scope}`")),
            "README does not list {scope}"
        );
    }
    assert!(section.contains(&format!(
        "`{}`",
        feishu::listener::redirect_uri(feishu::listener::DEFAULT_PORT)
    )));
}

#[tokio::test]
async fn an_edited_write_naming_someone_feishu_does_not_know_is_refused_before_approval() {
    let s = setup().await;
    let seed = s.emulator.seed();
    let event = |attendees: Value| json!({"summary": "方案评审", "start": "2030-01-07 14:00", "end": "2030-01-07 15:00", "attendees": attendees});
    let known = s
        .tool("create_calendar_event")
        .verify(event(json!([seed.p2p_peer])).as_object().unwrap())
        .await;
    assert_eq!(known, Ok(()), "a colleague who exists is accepted");

    let ghost = "ou_00000000000000000000000000000000";
    let refused = s
        .tool("create_calendar_event")
        .verify(event(json!([seed.p2p_peer, ghost])).as_object().unwrap())
        .await
        .expect_err("an open_id no one has is refused");
    assert!(refused.en.contains(ghost), "{}", refused.en);
    assert!(
        !refused.en.contains(&seed.p2p_peer),
        "only the unknown id is named"
    );
    assert!(refused.zh.contains("找不到"), "{}", refused.zh);

    let direct = s
        .tool("send_message")
        .verify(
            json!({"user_id": ghost, "text": "在吗"})
                .as_object()
                .unwrap(),
        )
        .await;
    assert!(direct.is_err(), "a message to no one is refused too");
    // Reads are never edited by the user: nothing to look up.
    assert_eq!(
        s.tool("get_free_busy")
            .verify(
                json!({"user_id": ghost, "start": "2030-01-07", "end": "2030-01-08"})
                    .as_object()
                    .unwrap()
            )
            .await,
        Ok(())
    );
}

#[tokio::test]
async fn an_unreachable_lookup_is_not_a_refusal() {
    let s = setup().await;
    s.emulator.inject_fault(
        Fault::server_error(500)
            .on("/open-apis/contact/v3/users/ou_00000000000000000000000000000000")
            .times(50),
    );
    let answer = s
        .tool("create_calendar_event")
        .verify(
            json!({"summary": "x", "start": "2030-01-07 14:00", "end": "2030-01-07 15:00", "attendees": ["ou_00000000000000000000000000000000"]})
                .as_object()
                .unwrap(),
        )
        .await;
    assert_eq!(answer, Ok(()), "Feishu failing is not Feishu saying no");
}

#[tokio::test]
async fn a_write_naming_someone_unknown_sends_nothing() {
    let s = setup().await;
    let ghost = "ou_00000000000000000000000000000000";
    let (text, is_error, _) = s
        .run_with_key(
            "create_calendar_event",
            json!({"summary": "方案评审", "start": "2030-01-07 14:00", "end": "2030-01-07 15:00", "attendees": [ghost]}),
            &uuid_key(),
        )
        .await;
    assert!(is_error, "{text}");
    assert!(
        text.contains(ghost) && text.contains("Nothing was sent"),
        "{text}"
    );
    assert_eq!(
        s.emulator.events_created(),
        0,
        "no event left behind without its invitation"
    );
}
