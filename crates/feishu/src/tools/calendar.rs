//! Calendar: the agenda (recurring events expanded), free/busy, and event writes.

use std::sync::Arc;

use agent::{Localized, Preview, PreviewChange, PreviewField, Risk};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::time::{feishu_seconds, from_feishu_seconds, local, parse_instant, span};
use super::{FeishuTool, Spec, ToolEnv, object_schema, opt_text, people, text_arg};
use crate::api::ApiError;
use crate::ids::{ApiPath, IdKind};

const READ: &str = "calendar:calendar:readonly";
const FREE_BUSY: &str = "calendar:calendar.free_busy:read";
const CREATE: &str = "calendar:calendar.event:create";
const UPDATE: &str = "calendar:calendar.event:update";
const DELETE: &str = "calendar:calendar.event:delete";

pub(crate) fn tools(env: &Arc<ToolEnv>) -> Vec<FeishuTool> {
    let range = json!({
        "start": {"type": "string", "description": "Start, ISO 8601 (e.g. 2026-12-01T09:00:00+08:00); a date alone means that day's start."},
        "end": {"type": "string", "description": "End, ISO 8601; at most 40 days after start."}
    });
    vec![
        FeishuTool::read(
            Spec {
                name: "list_calendar_events",
                description: "List the user's calendar events between two times, recurring events expanded into their occurrences.",
                parameters: object_schema(range.clone(), &["start", "end"]),
                scopes: &[READ],
                dedup: false,
                ids: &[],
            },
            env,
            |env, args, _| Box::pin(list_events(env, args)),
        ),
        FeishuTool::read(
            Spec {
                name: "get_free_busy",
                description: "When a person (default: the user) is busy between two times (at most 90 days).",
                parameters: object_schema(
                    json!({
                        "start": range["start"], "end": range["end"],
                        "user_id": IdKind::OpenId.schema("The person's open_id; omit for the user.")
                    }),
                    &["start", "end"],
                ),
                scopes: &[FREE_BUSY],
                dedup: false,
                ids: &[("user_id", IdKind::OpenId)],
            },
            env,
            |env, args, _| Box::pin(free_busy(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "create_calendar_event",
                description: "Create an event in the user's calendar and invite attendees. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "summary": {"type": "string", "description": "Title."},
                        "start": range["start"], "end": range["end"],
                        "attendees": {"type": "array", "items": IdKind::OpenId.schema(""), "description": "open_ids of people to invite."},
                        "description": {"type": "string"},
                        "location": {"type": "string"}
                    }),
                    &["summary", "start", "end"],
                ),
                scopes: &[CREATE, UPDATE, READ],
                dedup: true,
                ids: &[("attendees", IdKind::OpenId)],
            },
            env,
            |env, args, key| Box::pin(create_event(env, args, key)),
            |env, args| Box::pin(preview_create(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "update_calendar_event",
                description: "Change an event's title, time, description or location. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "event_id": IdKind::Event.schema("As list_calendar_events returned it."),
                        "summary": {"type": "string"},
                        "start": range["start"], "end": range["end"],
                        "description": {"type": "string"},
                        "location": {"type": "string"}
                    }),
                    &["event_id"],
                ),
                scopes: &[UPDATE, READ],
                dedup: false,
                ids: &[("event_id", IdKind::Event)],
            },
            env,
            |env, args, _| Box::pin(update_event(env, args)),
            |env, args| Box::pin(preview_update(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "delete_calendar_event",
                description: "Delete an event from the user's calendar. Needs the user's approval.",
                parameters: object_schema(
                    json!({"event_id": IdKind::Event.schema("As list_calendar_events returned it.")}),
                    &["event_id"],
                ),
                scopes: &[DELETE, READ],
                dedup: false,
                ids: &[("event_id", IdKind::Event)],
            },
            env,
            |env, args, _| Box::pin(delete_event(env, args)),
            |env, args| Box::pin(preview_delete(env, args)),
        ),
    ]
}

/// The user's primary calendar.
async fn primary_calendar(env: &ToolEnv) -> Result<String, ApiError> {
    let data = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("calendar/v4/calendars/primary"),
            &[],
            Some(&json!({})),
        )
        .await?;
    data.pointer("/calendars/0/calendar/calendar_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::Malformed("the primary calendar has no id".into()))
}

fn event_summary(event: &Value, env: &ToolEnv) -> Value {
    let start = event
        .pointer("/start_time/timestamp")
        .and_then(from_feishu_seconds);
    let end = event
        .pointer("/end_time/timestamp")
        .and_then(from_feishu_seconds);
    let mut out = Map::new();
    out.insert(
        "event_id".into(),
        event.get("event_id").cloned().unwrap_or(Value::Null),
    );
    out.insert(
        "summary".into(),
        event.get("summary").cloned().unwrap_or(Value::Null),
    );
    if let Some(start) = start {
        out.insert("start".into(), json!(local(start, &env.tz)));
    }
    if let Some(end) = end {
        out.insert("end".into(), json!(local(end, &env.tz)));
    }
    for field in ["location", "status", "description"] {
        let value = match field {
            "location" => event.pointer("/location/name").cloned(),
            other => event.get(other).cloned(),
        };
        if let Some(v) = value.filter(|v| !v.is_null() && v != "") {
            out.insert(field.into(), v);
        }
    }
    Value::Object(out)
}

async fn list_events(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let start = parse_instant(&text_arg(&args, "start")?, &env.tz)?;
    let end = parse_instant(&text_arg(&args, "end")?, &env.tz)?;
    let calendar = primary_calendar(&env).await?;
    let data = env
        .api
        .call(
            Method::GET,
            &calendar_path(&calendar)?.then("events/instance_view"),
            &[
                ("start_time", feishu_seconds(start)),
                ("end_time", feishu_seconds(end)),
            ],
            None,
        )
        .await?;
    let events: Vec<Value> = data
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| event_summary(e, &env))
        .collect();
    Ok(json!({"time_zone": env.tz.iana_name(), "events": events}))
}

async fn free_busy(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let start = parse_instant(&text_arg(&args, "start")?, &env.tz)?;
    let end = parse_instant(&text_arg(&args, "end")?, &env.tz)?;
    let user = match opt_text(&args, "user_id") {
        Some(user) => user,
        None => people::my_open_id(&env).await?,
    };
    let body = json!({"time_min": start.to_string(), "time_max": end.to_string(), "user_id": user});
    let data = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("calendar/v4/freebusy/list"),
            &[("user_id_type", "open_id".into())],
            Some(&body),
        )
        .await?;
    let busy: Vec<Value> = data
        .get("freebusy_list")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|slot| {
            let a = slot
                .get("start_time")
                .and_then(Value::as_str)?
                .parse::<jiff::Timestamp>()
                .ok()?;
            let b = slot
                .get("end_time")
                .and_then(Value::as_str)?
                .parse::<jiff::Timestamp>()
                .ok()?;
            Some(json!({"start": local(a, &env.tz), "end": local(b, &env.tz)}))
        })
        .collect();
    Ok(json!({"time_zone": env.tz.iana_name(), "busy": busy}))
}

fn event_body(args: &Map<String, Value>, env: &ToolEnv) -> Result<Map<String, Value>, ApiError> {
    let mut body = Map::new();
    if let Some(summary) = opt_text(args, "summary") {
        body.insert("summary".into(), json!(summary));
    }
    if let Some(description) = opt_text(args, "description") {
        body.insert("description".into(), json!(description));
    }
    if let Some(location) = opt_text(args, "location") {
        body.insert("location".into(), json!({"name": location}));
    }
    for (arg, field) in [("start", "start_time"), ("end", "end_time")] {
        if let Some(text) = opt_text(args, arg) {
            let ts = parse_instant(&text, &env.tz)?;
            body.insert(
                field.into(),
                json!({"timestamp": feishu_seconds(ts), "timezone": env.tz.iana_name()}),
            );
        }
    }
    Ok(body)
}

fn attendees(args: &Map<String, Value>) -> Vec<String> {
    args.get("attendees")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

async fn create_event(
    env: Arc<ToolEnv>,
    args: Map<String, Value>,
    key: String,
) -> Result<Value, ApiError> {
    let calendar = primary_calendar(&env).await?;
    let mut body = event_body(&args, &env)?;
    body.insert("need_notification".into(), json!(true));
    let data = env
        .api
        .call(
            Method::POST,
            &calendar_path(&calendar)?.then("events"),
            // Feishu keeps one event per key and calendar: a retry after a crash cannot duplicate.
            &[("idempotency_key", key)],
            Some(&Value::Object(body)),
        )
        .await?;
    let event = data.get("event").cloned().unwrap_or(Value::Null);
    let event_id = event
        .get("event_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let invited = attendees(&args);
    if !invited.is_empty() {
        let list: Vec<Value> = invited
            .iter()
            .map(|id| json!({"type": "user", "user_id": id}))
            .collect();
        env.api
            .call(
                Method::POST,
                &event_path(&calendar, &event_id)?.then("attendees"),
                &[("user_id_type", "open_id".into())],
                Some(&json!({"attendees": list, "need_notification": true})),
            )
            .await?;
    }
    let mut result = event_summary(&event, &env);
    if let Value::Object(map) = &mut result {
        map.insert("attendees_invited".into(), json!(invited.len()));
    }
    Ok(result)
}

/// `calendar/v4/calendars/{calendar}`: the calendar id comes from Feishu, checked all the same.
fn calendar_path(calendar: &str) -> Result<ApiPath, ApiError> {
    Ok(ApiPath::new("calendar/v4/calendars").id(IdKind::Calendar, "calendar_id", calendar)?)
}

/// `calendar/v4/calendars/{calendar}/events/{event_id}`.
fn event_path(calendar: &str, event_id: &str) -> Result<ApiPath, ApiError> {
    Ok(calendar_path(calendar)?
        .then("events")
        .id(IdKind::Event, "event_id", event_id)?)
}

async fn get_event(env: &ToolEnv, event_id: &str) -> Result<(String, Value), ApiError> {
    let calendar = primary_calendar(env).await?;
    let data = env
        .api
        .call(Method::GET, &event_path(&calendar, event_id)?, &[], None)
        .await?;
    Ok((calendar, data.get("event").cloned().unwrap_or(Value::Null)))
}

async fn update_event(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let event_id = text_arg(&args, "event_id")?;
    let calendar = primary_calendar(&env).await?;
    let body = event_body(&args, &env)?;
    let data = env
        .api
        .call(
            Method::PATCH,
            &event_path(&calendar, &event_id)?,
            &[],
            Some(&Value::Object(body)),
        )
        .await?;
    Ok(event_summary(
        &data.get("event").cloned().unwrap_or(Value::Null),
        &env,
    ))
}

async fn delete_event(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let event_id = text_arg(&args, "event_id")?;
    let calendar = primary_calendar(&env).await?;
    env.api
        .call(
            Method::DELETE,
            &event_path(&calendar, &event_id)?,
            &[],
            None,
        )
        .await?;
    Ok(json!({"deleted": event_id}))
}

fn time_span(args: &Map<String, Value>, env: &ToolEnv) -> Option<String> {
    let start = parse_instant(&opt_text(args, "start")?, &env.tz).ok()?;
    let end = parse_instant(&opt_text(args, "end")?, &env.tz).ok()?;
    Some(span(start, end, &env.tz))
}

async fn preview_create(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let summary = opt_text(&args, "summary").unwrap_or_default();
    let mut fields = Vec::new();
    if let Some(when) = time_span(&args, &env) {
        fields.push(PreviewField {
            label: Localized::new("时间", "When"),
            value: when,
        });
    }
    let invited = attendees(&args);
    if !invited.is_empty() {
        fields.push(PreviewField {
            label: Localized::new("参与人", "Attendees"),
            value: people::names(&env, &invited).await.join("、"),
        });
    }
    if let Some(location) = opt_text(&args, "location") {
        fields.push(PreviewField {
            label: Localized::new("地点", "Where"),
            value: location,
        });
    }
    Preview {
        summary: Localized::new(
            format!("在你的日历中创建日程「{summary}」并发送邀请"),
            format!("Create the event “{summary}” in your calendar and send invitations"),
        ),
        risk: Risk::Normal,
        fields,
        changes: Vec::new(),
    }
}

async fn preview_update(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let event_id = opt_text(&args, "event_id").unwrap_or_default();
    let current = get_event(&env, &event_id)
        .await
        .map(|(_, e)| e)
        .unwrap_or(Value::Null);
    let title = current
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or(&event_id)
        .to_owned();
    let mut changes = Vec::new();
    if let Some(to) = opt_text(&args, "summary") {
        changes.push(PreviewChange {
            field: Localized::new("标题", "Title"),
            from: title.clone(),
            to,
        });
    }
    let old_start = current
        .pointer("/start_time/timestamp")
        .and_then(from_feishu_seconds);
    let old_end = current
        .pointer("/end_time/timestamp")
        .and_then(from_feishu_seconds);
    if args.contains_key("start") || args.contains_key("end") {
        let new_start = opt_text(&args, "start")
            .and_then(|t| parse_instant(&t, &env.tz).ok())
            .or(old_start);
        let new_end = opt_text(&args, "end")
            .and_then(|t| parse_instant(&t, &env.tz).ok())
            .or(old_end);
        let show = |a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>| match (a, b) {
            (Some(a), Some(b)) => span(a, b, &env.tz),
            _ => "?".to_owned(),
        };
        changes.push(PreviewChange {
            field: Localized::new("时间", "When"),
            from: show(old_start, old_end),
            to: show(new_start, new_end),
        });
    }
    for (arg, zh, en, pointer) in [
        ("location", "地点", "Where", "/location/name"),
        ("description", "描述", "Description", "/description"),
    ] {
        if let Some(to) = opt_text(&args, arg) {
            let from = current
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            changes.push(PreviewChange {
                field: Localized::new(zh, en),
                from,
                to,
            });
        }
    }
    Preview {
        summary: Localized::new(
            format!("修改日程「{title}」"),
            format!("Change the event “{title}”"),
        ),
        risk: Risk::Normal,
        fields: Vec::new(),
        changes,
    }
}

async fn preview_delete(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let event_id = opt_text(&args, "event_id").unwrap_or_default();
    let current = get_event(&env, &event_id)
        .await
        .map(|(_, e)| e)
        .unwrap_or(Value::Null);
    let title = current
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or(&event_id)
        .to_owned();
    let mut fields = Vec::new();
    let start = current
        .pointer("/start_time/timestamp")
        .and_then(from_feishu_seconds);
    let end = current
        .pointer("/end_time/timestamp")
        .and_then(from_feishu_seconds);
    if let (Some(a), Some(b)) = (start, end) {
        fields.push(PreviewField {
            label: Localized::new("时间", "When"),
            value: span(a, b, &env.tz),
        });
    }
    Preview {
        summary: Localized::new(
            format!("删除日程「{title}」（无法撤销）"),
            format!("Delete the event “{title}” (cannot be undone)"),
        ),
        risk: Risk::High,
        fields,
        changes: Vec::new(),
    }
}
