//! Tasks v2: "my tasks" (tasks the user is assigned, `page_size` ≤ 100), creating a task (a
//! `client_token` is kept five minutes after success: a repeat answers the same task) and patching
//! one (`completed_at` completes or, with `"0"`, reopens; completing a completed task fails).

use std::collections::HashMap;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::tenant::{Task, Tenant};
use super::query::{IdType, flag};
use super::{ApiError, ApiResult, Caller, Paging, json_body, ok, paged};

/// A `client_token` deduplicates task creation for five minutes.
const CLIENT_TOKEN_WINDOW_MS: i64 = 5 * 60 * 1000;

fn invalid(msg: &str) -> ApiError {
    ApiError::new(400, 1470400, format!("invalid param: {msg}"))
}

fn member(tenant: &Tenant, ids: IdType, open_id: &str, role: &str) -> Value {
    json!({"id": ids.of(tenant, open_id), "type": "user", "role": role})
}

fn task_json(tenant: &Tenant, task: &Task, ids: IdType) -> Value {
    let mut members: Vec<Value> = task
        .assignees
        .iter()
        .map(|a| member(tenant, ids, a, "assignee"))
        .collect();
    members.extend(
        task.followers
            .iter()
            .map(|f| member(tenant, ids, f, "follower")),
    );
    let mut value = json!({
        "guid": task.guid,
        "summary": task.summary,
        "description": task.description,
        "reminders": [],
        "creator": member(tenant, ids, &task.creator, "creator"),
        "members": members,
        "completed_at": task.completed_at.to_string(),
        "attachments": [],
        "extra": "",
        "tasklists": [],
        "parent_task_guid": "",
        "mode": 2,
        "source": 6,
        "custom_complete": {},
        "task_id": task.task_id,
        "created_at": task.created_at.to_string(),
        "updated_at": task.updated_at.to_string(),
        "status": if task.completed_at > 0 { "done" } else { "todo" },
        "url": format!(
            "https://applink.feishu.cn/client/todo/detail?guid={}&suite_entity_num={}",
            task.guid, task.task_id
        ),
        "subtask_count": 0,
        "is_milestone": false,
    });
    if let Some((timestamp, is_all_day)) = task.due {
        value["due"] = json!({"timestamp": timestamp.to_string(), "is_all_day": is_all_day});
    }
    value
}

/// `GET /task/v2/tasks?type=my_tasks&completed=&page_size=`.
pub(crate) async fn list(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    if query.get("type").is_some_and(|t| t != "my_tasks") {
        return Err(invalid("type only supports my_tasks"));
    }
    let completed = flag(&query, "completed").map_err(|e| invalid(&e))?;
    let ids = IdType::from_query(&query).map_err(|e| invalid(&e))?;
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        50,
        100,
        &format!("tasks\n{completed:?}"),
    )
    .map_err(|e| invalid(&e))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let me = &state.user.open_id;
    // "我负责的" only: Feishu lists the tasks the user is an assignee of, not those they created
    // (task-v2/task/list: 目前只支持列取任务界面上"我负责的"任务).
    let items: Vec<Value> = tenant
        .tasks
        .iter()
        .filter(|t| t.assignees.contains(me))
        .filter(|t| completed.is_none_or(|c| (t.completed_at > 0) == c))
        .map(|t| task_json(tenant, t, ids))
        .collect();
    let (page, next) = paging.page(&items);
    ok(paged(json!({ "items": page }), next, "page_token"))
}

fn due(value: &Value) -> Result<Option<(i64, bool)>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    let timestamp = match &value["timestamp"] {
        Value::String(text) => text.parse::<i64>().ok(),
        Value::Number(number) => number.as_i64(),
        _ => None,
    }
    .ok_or_else(|| invalid("due.timestamp must be milliseconds"))?;
    Ok(Some((
        timestamp,
        value["is_all_day"].as_bool().unwrap_or(false),
    )))
}

fn summary(value: &Value) -> Result<String, ApiError> {
    value
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.chars().count() <= 3000)
        .map(str::to_owned)
        .ok_or_else(|| invalid("summary must be 1 to 3000 characters"))
}

/// `POST /task/v2/tasks`.
pub(crate) async fn create(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let ids = IdType::from_query(&query).map_err(|e| invalid(&e))?;
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let client_token = body["client_token"].as_str().filter(|t| !t.is_empty());
    if client_token.is_some_and(|t| !(10..=100).contains(&t.chars().count())) {
        return Err(invalid("client_token must be 10 to 100 characters"));
    }
    let summary = summary(&body["summary"])?;
    let description = body["description"].as_str().unwrap_or_default().to_owned();
    if description.chars().count() > 3000 {
        return Err(invalid("description is longer than 3000 characters"));
    }
    let due = due(&body["due"])?;
    let mut state = shared.lock();
    let now = state.api.now_ms();
    let me = state.user.open_id.clone();
    let tenant = &mut state.api.tenant;
    // Per app and user; the emulator has one user, so per app.
    let dedupe = client_token.map(|t| (caller.app_id.clone(), t.to_owned()));
    if let Some(key) = &dedupe
        && let Some((guid, at)) = tenant.task_tokens.get(key)
        && now - at < CLIENT_TOKEN_WINDOW_MS
        && let Some(task) = tenant.tasks.iter().find(|t| t.guid == *guid)
    {
        return ok(json!({ "task": task_json(tenant, task, ids) }));
    }
    // No `members` means a task with no members, which "my tasks" does not list
    // (task-v2/task/create: 不填写表示任务无成员).
    let mut assignees = Vec::new();
    let mut followers = Vec::new();
    for member in body["members"].as_array().into_iter().flatten() {
        let id = member["id"].as_str().unwrap_or_default();
        let open_id = ids
            .to_open_id(tenant, id)
            .ok_or_else(|| invalid(&format!("member {id} does not exist")))?;
        match member["role"].as_str() {
            Some("assignee") => assignees.push(open_id),
            Some("follower") => followers.push(open_id),
            _ => return Err(invalid("member role must be assignee or follower")),
        }
    }
    let task = Task {
        guid: uuid::Uuid::new_v4().to_string(),
        task_id: format!("t{}", 200_000 + tenant.tasks.len()),
        summary,
        description,
        due,
        creator: me,
        assignees,
        followers,
        completed_at: 0,
        created_at: now,
        updated_at: now,
        via_api: true,
    };
    let answer = json!({ "task": task_json(tenant, &task, ids) });
    if let Some(key) = dedupe {
        tenant.task_tokens.insert(key, (task.guid.clone(), now));
    }
    tenant.tasks.push(task);
    ok(answer)
}

/// `GET /task/v2/tasks/:task_guid`.
pub(crate) async fn get(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(guid): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let ids = IdType::from_query(&query).map_err(|e| invalid(&e))?;
    let state = shared.lock();
    let task = state
        .api
        .tenant
        .tasks
        .iter()
        .find(|t| t.guid == guid)
        .ok_or_else(|| ApiError::new(404, 1470404, "task not found or deleted"))?;
    ok(json!({ "task": task_json(&state.api.tenant, task, ids) }))
}

/// `PATCH /task/v2/tasks/:task_guid` with `{"task":{…},"update_fields":[…]}`. A field listed but
/// absent from `task` is cleared.
pub(crate) async fn patch(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(guid): Path<String>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let fields: Vec<&str> = body["update_fields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if fields.is_empty() {
        return Err(invalid("update_fields is required"));
    }
    let input = &body["task"];
    let mut state = shared.lock();
    let now = state.api.now_ms();
    let tenant = &mut state.api.tenant;
    let task = tenant
        .tasks
        .iter_mut()
        .find(|t| t.guid == guid)
        .ok_or_else(|| ApiError::new(404, 1470404, "task not found or deleted"))?;
    let mut updated = task.clone();
    for field in fields {
        match field {
            "summary" => updated.summary = summary(&input["summary"])?,
            "description" => {
                updated.description = input["description"].as_str().unwrap_or_default().to_owned();
            }
            "due" => updated.due = due(&input["due"])?,
            "completed_at" => {
                let at = match &input["completed_at"] {
                    Value::Null => 0,
                    Value::String(text) => text
                        .parse::<i64>()
                        .map_err(|_| invalid("completed_at must be milliseconds"))?,
                    Value::Number(n) => n
                        .as_i64()
                        .ok_or_else(|| invalid("completed_at must be milliseconds"))?,
                    _ => return Err(invalid("completed_at must be milliseconds")),
                };
                if at > 0 && task.completed_at > 0 {
                    return Err(invalid("the task is already completed"));
                }
                updated.completed_at = at.max(0);
            }
            // Fields Feishu accepts that the demo tenant does not model.
            "start" | "extra" | "custom_complete" | "repeat_rule" | "mode" | "is_milestone"
            | "custom_fields" => {}
            other => return Err(invalid(&format!("unknown update field {other}"))),
        }
    }
    updated.updated_at = now;
    *task = updated;
    let task = tenant
        .tasks
        .iter()
        .find(|t| t.guid == guid)
        .ok_or_else(|| ApiError::new(404, 1470404, "task not found or deleted"))?;
    ok(json!({ "task": task_json(tenant, task, IdType::Open) }))
}
