//! Tasks v2: list, create, complete and reopen.

use std::sync::Arc;

use agent::{Localized, Preview, PreviewChange, PreviewField, Risk};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::time::{local, parse_instant};
use super::{FeishuTool, Spec, ToolEnv, object_schema, opt_text, text_arg};
use crate::api::{ApiError, PageStyle};
use crate::ids::{ApiPath, IdKind};

const READ: &str = "task:task:read";
const WRITE: &str = "task:task:write";

pub(crate) fn tools(env: &Arc<ToolEnv>) -> Vec<FeishuTool> {
    let guid = json!({"task_guid": IdKind::Task.schema("As list_tasks returned it.")});
    vec![
        FeishuTool::read(
            Spec {
                name: "list_tasks",
                description: "List the user's tasks (default: the open ones).",
                parameters: object_schema(json!({"completed": {"type": "boolean"}}), &[]),
                scopes: &[READ],
                dedup: false,
                ids: &[],
            },
            env,
            |env, args, _| Box::pin(list(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "create_task",
                description: "Create a task for the user, optionally with a due time. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "summary": {"type": "string"},
                        "description": {"type": "string"},
                        "due": {"type": "string", "description": "ISO 8601 time or date."}
                    }),
                    &["summary"],
                ),
                scopes: &[WRITE],
                dedup: true,
                ids: &[],
            },
            env,
            |env, args, key| Box::pin(create(env, args, key)),
            |env, args| Box::pin(preview_create(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "complete_task",
                description: "Mark a task as done. Needs the user's approval.",
                parameters: object_schema(guid.clone(), &["task_guid"]),
                scopes: &[WRITE, READ],
                dedup: false,
                ids: &[("task_guid", IdKind::Task)],
            },
            env,
            |env, args, _| Box::pin(set_completed(env, args, true)),
            |env, args| Box::pin(preview_completion(env, args, true)),
        ),
        FeishuTool::write(
            Spec {
                name: "reopen_task",
                description: "Mark a done task as not done. Needs the user's approval.",
                parameters: object_schema(guid, &["task_guid"]),
                scopes: &[WRITE, READ],
                dedup: false,
                ids: &[("task_guid", IdKind::Task)],
            },
            env,
            |env, args, _| Box::pin(set_completed(env, args, false)),
            |env, args| Box::pin(preview_completion(env, args, false)),
        ),
    ]
}

fn task_summary(task: &Value, env: &ToolEnv) -> Value {
    let done = task
        .get("completed_at")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "0" && !t.is_empty());
    let due = task
        .pointer("/due/timestamp")
        .and_then(Value::as_str)
        .and_then(|ms| ms.parse::<i64>().ok())
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| local(t, &env.tz));
    json!({"task_guid": task.get("guid"), "summary": task.get("summary"), "completed": done, "due": due})
}

async fn list(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let completed = args
        .get("completed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let query = vec![
        ("type", "my_tasks".to_owned()),
        ("completed", completed.to_string()),
        ("page_size", "50".to_owned()),
    ];
    let items = env
        .api
        .collect(
            &ApiPath::new("task/v2/tasks"),
            query,
            "items",
            PageStyle::PageToken,
            Some(200),
        )
        .await?;
    let tasks: Vec<Value> = items.iter().map(|t| task_summary(t, &env)).collect();
    Ok(json!({"time_zone": env.tz.iana_name(), "tasks": tasks}))
}

async fn create(
    env: Arc<ToolEnv>,
    args: Map<String, Value>,
    key: String,
) -> Result<Value, ApiError> {
    // Feishu lists as "my tasks" only the tasks the user is assigned (task-v2/task/list:
    // 目前只支持列取"我负责的"任务), and a task created without `members` has none
    // (task-v2/task/create: 不填写表示任务无成员): the user is its assignee, or `list_tasks`
    // would never show it.
    let me = super::people::my_open_id(&env).await?;
    let mut body = json!({
        "summary": text_arg(&args, "summary")?,
        "client_token": key,
        "members": [{"id": me, "type": "user", "role": "assignee"}],
    });
    if let Some(description) = opt_text(&args, "description") {
        body["description"] = json!(description);
    }
    if let Some(due) = opt_text(&args, "due") {
        let at = parse_instant(&due, &env.tz)?;
        let all_day = !due.contains(':');
        body["due"] = json!({"timestamp": at.as_millisecond().to_string(), "is_all_day": all_day});
    }
    // `client_token`: Feishu returns the same task for the same token for five minutes.
    let data = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("task/v2/tasks"),
            &[("user_id_type", "open_id".to_owned())],
            Some(&body),
        )
        .await?;
    Ok(task_summary(data.get("task").unwrap_or(&Value::Null), &env))
}

async fn set_completed(
    env: Arc<ToolEnv>,
    args: Map<String, Value>,
    done: bool,
) -> Result<Value, ApiError> {
    let guid = text_arg(&args, "task_guid")?;
    let at = if done {
        jiff::Timestamp::now().as_millisecond().to_string()
    } else {
        "0".to_owned()
    };
    let body = json!({"task": {"completed_at": at}, "update_fields": ["completed_at"]});
    let data = env
        .api
        .call(Method::PATCH, &task_path(&guid)?, &[], Some(&body))
        .await?;
    Ok(task_summary(data.get("task").unwrap_or(&Value::Null), &env))
}

/// `task/v2/tasks/{task_guid}`.
fn task_path(guid: &str) -> Result<ApiPath, ApiError> {
    Ok(ApiPath::new("task/v2/tasks").id(IdKind::Task, "task_guid", guid)?)
}

async fn preview_create(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let summary = opt_text(&args, "summary").unwrap_or_default();
    let mut fields = Vec::new();
    if let Some(due) = opt_text(&args, "due").and_then(|d| parse_instant(&d, &env.tz).ok()) {
        fields.push(PreviewField {
            label: Localized::new("截止", "Due"),
            value: local(due, &env.tz),
        });
    }
    if let Some(description) = opt_text(&args, "description") {
        fields.push(PreviewField {
            label: Localized::new("描述", "Description"),
            value: description,
        });
    }
    Preview {
        summary: Localized::new(
            format!("创建任务「{summary}」"),
            format!("Create the task “{summary}”"),
        ),
        risk: Risk::Normal,
        fields,
        changes: Vec::new(),
    }
}

async fn preview_completion(env: Arc<ToolEnv>, args: Map<String, Value>, done: bool) -> Preview {
    let guid = opt_text(&args, "task_guid").unwrap_or_default();
    let answer = match task_path(&guid) {
        Ok(path) => env.api.call(Method::GET, &path, &[], None).await.ok(),
        Err(_) => None,
    };
    let title = answer
        .and_then(|d| {
            d.pointer("/task/summary")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or(guid);
    let (zh, en) = if done {
        ("完成", "Complete")
    } else {
        ("重新打开", "Reopen")
    };
    let (from, to) = if done {
        ("未完成 / open", "已完成 / done")
    } else {
        ("已完成 / done", "未完成 / open")
    };
    Preview {
        summary: Localized::new(
            format!("{zh}任务「{title}」"),
            format!("{en} the task “{title}”"),
        ),
        risk: Risk::Normal,
        fields: Vec::new(),
        changes: vec![PreviewChange {
            field: Localized::new("状态", "Status"),
            from: from.into(),
            to: to.into(),
        }],
    }
}
