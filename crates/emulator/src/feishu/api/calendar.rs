//! Calendar v4: the primary calendar, the instance view (recurring events expanded, range under
//! 40 days), get/create/patch/delete an event, adding attendees, and free/busy.
//!
//! Event ids are `<uuid>_0`; an instance of a recurring event is `<uuid>_<start seconds>`.
//! Changing or deleting one instance works as in Feishu: a change makes an exception event with
//! the instance's id, a deletion removes just that instance. Creating with the same
//! `idempotency_key` (per app and calendar) returns the first event.

use std::collections::HashMap;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::datetime::{
    DAY, Rule, TIME_ZONE, format_date, format_rfc3339_local, local_day, local_midnight, parse_date,
    parse_rfc3339,
};
use super::super::tenant::{Attendee, Event, EventTime, Tenant};
use super::query::{IdType, flag};
use super::{ApiError, ApiResult, Caller, json_body, ok, random_hex};

/// Feishu refuses instance views of 40 days or more.
const MAX_VIEW_SECS: i64 = 40 * DAY;
/// …and free/busy queries over more than 90 days.
const MAX_FREEBUSY_SECS: i64 = 90 * DAY;
/// The instance view holds fewer than 1000 instances.
const MAX_INSTANCES: usize = 1000;

fn invalid(msg: &str) -> ApiError {
    ApiError::new(400, 190002, format!("invalid parameters in request: {msg}"))
}

fn not_found() -> ApiError {
    ApiError::new(404, 193001, "event not found")
}

fn check_calendar(tenant: &Tenant, calendar_id: &str) -> Result<(), ApiError> {
    if calendar_id == tenant.calendar_id {
        Ok(())
    } else {
        Err(ApiError::new(404, 191000, "calendar not found"))
    }
}

/// `(start, end)` in seconds. An all-day event covers whole local days; an end date equal to the
/// start date still covers that day.
fn span(start: &EventTime, end: &EventTime) -> (i64, i64) {
    let from = match start {
        EventTime::Timestamp { ts, .. } => *ts,
        EventTime::Date(day) => local_midnight(*day),
    };
    let to = match (start, end) {
        (_, EventTime::Timestamp { ts, .. }) => *ts,
        (EventTime::Date(first), EventTime::Date(last)) => {
            local_midnight(if last > first { *last } else { first + 1 })
        }
        (EventTime::Timestamp { .. }, EventTime::Date(last)) => local_midnight(*last + 1),
    };
    (from, to)
}

fn time_info(time: &EventTime) -> Value {
    match time {
        EventTime::Timestamp { ts, timezone } => {
            json!({"timestamp": ts.to_string(), "timezone": timezone})
        }
        // Feishu pins all-day events to UTC.
        EventTime::Date(day) => json!({"date": format_date(*day), "timezone": "UTC"}),
    }
}

/// The same kind of time as `like`, moved to `at`.
fn moved(like: &EventTime, at: i64) -> EventTime {
    match like {
        EventTime::Timestamp { timezone, .. } => EventTime::Timestamp {
            ts: at,
            timezone: timezone.clone(),
        },
        EventTime::Date(_) => EventTime::Date(local_day(at)),
    }
}

/// `<uuid>` of `<uuid>_<n>`.
fn series_of(event_id: &str) -> &str {
    event_id.rsplit_once('_').map_or(event_id, |(uuid, _)| uuid)
}

/// Start times of `event`'s instances overlapping `[from, to)`.
fn instance_starts(event: &Event, from: i64, to: i64) -> Vec<i64> {
    let (start, end) = span(&event.start, &event.end);
    match event.recurrence.as_deref().and_then(Rule::parse) {
        None => {
            if start < to && end > from {
                vec![start]
            } else {
                Vec::new()
            }
        }
        Some(rule) => rule
            .occurrences(start, end - start, from, to, MAX_INSTANCES)
            .into_iter()
            .filter(|s| !event.cancelled_instances.contains(s))
            .collect(),
    }
}

/// An event (or one instance of it, when `instance` gives its start) as Feishu shows it.
fn event_json(
    tenant: &Tenant,
    event: &Event,
    instance: Option<i64>,
    max_attendees: Option<usize>,
    ids: IdType,
) -> Value {
    let (start, end) = span(&event.start, &event.end);
    let (event_id, start_time, end_time) = match instance {
        Some(at) if event.recurrence.is_some() => (
            format!("{}_{at}", series_of(&event.event_id)),
            moved(&event.start, at),
            moved(&event.end, at + end - start),
        ),
        _ => (
            event.event_id.clone(),
            event.start.clone(),
            event.end.clone(),
        ),
    };
    let instance_start = span(&start_time, &end_time).0;
    let mut value = json!({
        "event_id": event_id,
        "organizer_calendar_id": event.organizer_calendar_id,
        "summary": event.summary,
        "description": event.description,
        "start_time": time_info(&start_time),
        "end_time": time_info(&end_time),
        "vchat": {
            "vc_type": "vc",
            "icon_type": "vc",
            "description": "",
            "meeting_url": format!("https://vc.feishu.cn/j/{}", &random_digits(&event.event_id)),
        },
        "visibility": event.visibility,
        "attendee_ability": event.attendee_ability,
        "free_busy_status": event.free_busy_status,
        "color": -1,
        "reminders": [{"minutes": 5}],
        "status": "confirmed",
        "is_exception": event.recurring_event_id.is_some(),
        "create_time": event.create_time.to_string(),
        "event_organizer": {
            "user_id": ids.of(tenant, &event.organizer),
            "display_name": tenant.name_of(&event.organizer),
        },
        "app_link": format!(
            "https://applink.feishu.cn/client/calendar/event/detail?calendarId={}&key={}&originalTime={}&startTime={instance_start}",
            event.calendar_id,
            series_of(&event.event_id),
            if event.recurrence.is_some() { instance_start } else { 0 },
        ),
    });
    if let Some(location) = &event.location {
        value["location"] = json!({ "name": location });
    }
    if let Some(recurrence) = &event.recurrence {
        value["recurrence"] = json!(recurrence);
    }
    if let Some(series) = &event.recurring_event_id {
        value["recurring_event_id"] = json!(series);
    }
    if let Some(max) = max_attendees {
        let shown: Vec<Value> = event
            .attendees
            .iter()
            .take(max)
            .map(|a| attendee_json(tenant, a, ids))
            .collect();
        value["attendees"] = json!(shown);
        value["has_more_attendee"] = json!(event.attendees.len() > max);
    }
    value
}

/// Nine digits derived from an id, for a stable meeting URL.
fn random_digits(seed: &str) -> String {
    let sum = seed.bytes().fold(7u64, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    format!("{:09}", sum % 1_000_000_000)
}

fn attendee_json(tenant: &Tenant, attendee: &Attendee, ids: IdType) -> Value {
    json!({
        "type": "user",
        "attendee_id": attendee.attendee_id,
        "rsvp_status": attendee.rsvp_status,
        "is_optional": attendee.is_optional,
        "is_organizer": attendee.is_organizer,
        "is_external": false,
        "display_name": tenant.name_of(&attendee.open_id),
        "user_id": ids.of(tenant, &attendee.open_id),
    })
}

/// `POST /calendar/v4/calendars/primary`.
pub(crate) async fn primary(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
) -> ApiResult {
    let state = shared.lock();
    let tenant = &state.api.tenant;
    ok(json!({"calendars": [{
        "calendar": {
            "calendar_id": tenant.calendar_id,
            "summary": tenant.calendar_summary,
            "description": "",
            "permissions": "private",
            "color": -1,
            "type": "primary",
            "summary_alias": "",
            "is_deleted": false,
            "is_third_party": false,
            "role": "owner",
        },
        "user_id": state.user.open_id,
    }]}))
}

fn seconds(query: &HashMap<String, String>, field: &str) -> Result<i64, ApiError> {
    query
        .get(field)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .ok_or_else(|| invalid(&format!("{field} must be a Unix timestamp in seconds")))
}

/// `GET /calendar/v4/calendars/:calendar_id/events/instance_view?start_time=&end_time=`.
pub(crate) async fn instance_view(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(calendar_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let from = seconds(&query, "start_time")?;
    let to = seconds(&query, "end_time")?;
    if to <= from {
        return Err(invalid("end_time must be after start_time"));
    }
    if to - from >= MAX_VIEW_SECS {
        return Err(ApiError::new(
            400,
            193103,
            "requested time exceeds the allowed range",
        ));
    }
    let state = shared.lock();
    let tenant = &state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    let mut items: Vec<(i64, Value)> = Vec::new();
    for event in tenant.events.iter().filter(|e| !e.deleted) {
        for start in instance_starts(event, from, to) {
            items.push((
                start,
                event_json(tenant, event, Some(start), None, IdType::Open),
            ));
        }
    }
    if items.len() >= MAX_INSTANCES {
        return Err(invalid("the range holds 1000 instances or more"));
    }
    items.sort_by_key(|(start, _)| *start);
    let items: Vec<Value> = items.into_iter().map(|(_, item)| item).collect();
    ok(json!({ "items": items }))
}

/// What an event id in a path names.
enum Target {
    /// A stored event (single, recurring series or exception).
    Event(usize),
    /// One instance of a recurring series, by its start.
    Instance { series: usize, start: i64 },
}

fn resolve(tenant: &Tenant, event_id: &str) -> Result<Target, ApiError> {
    if let Some(index) = tenant.events.iter().position(|e| e.event_id == event_id) {
        if tenant.events.get(index).is_some_and(|e| e.deleted) {
            return Err(ApiError::new(403, 193003, "event is deleted"));
        }
        return Ok(Target::Event(index));
    }
    let (uuid, start) = event_id.rsplit_once('_').ok_or_else(not_found)?;
    let start: i64 = start.parse().map_err(|_| not_found())?;
    let series_id = format!("{uuid}_0");
    let series = tenant
        .events
        .iter()
        .position(|e| e.event_id == series_id && e.recurrence.is_some())
        .ok_or_else(not_found)?;
    let event = tenant.events.get(series).ok_or_else(not_found)?;
    if event.deleted {
        return Err(ApiError::new(403, 193003, "event is deleted"));
    }
    if !instance_starts(event, start, start + 1).contains(&start) {
        return Err(not_found());
    }
    Ok(Target::Instance { series, start })
}

/// `GET /calendar/v4/calendars/:calendar_id/events/:event_id`.
pub(crate) async fn get_event(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path((calendar_id, event_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let ids = IdType::from_query(&query).map_err(|e| invalid(&e))?;
    // `need_attendee` as the SDKs send it (`true`, or Python's `True`): absent or false leaves
    // the attendees out, as Feishu does.
    let need_attendee = flag(&query, "need_attendee").map_err(|e| invalid(&e))?;
    let max_attendees = if need_attendee == Some(true) {
        let max = match query.get("max_attendee_num") {
            None => 10,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| invalid("max_attendee_num must be between 1 and 100"))?,
        };
        Some(max)
    } else {
        None
    };
    let state = shared.lock();
    let tenant = &state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    let (index, instance) = match resolve(tenant, &event_id)? {
        Target::Event(index) => (index, None),
        Target::Instance { series, start } => (series, Some(start)),
    };
    let event = tenant.events.get(index).ok_or_else(not_found)?;
    ok(json!({ "event": event_json(tenant, event, instance, max_attendees, ids) }))
}

/// A `time_info` from a request body.
fn parse_time(value: &Value, field: &str) -> Result<EventTime, ApiError> {
    let date = value["date"].as_str().filter(|d| !d.is_empty());
    let timestamp = match &value["timestamp"] {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    };
    match (date, timestamp) {
        (Some(_), Some(_)) => Err(invalid(&format!(
            "{field}: date and timestamp cannot both be set"
        ))),
        (Some(date), None) => parse_date(date)
            .map(EventTime::Date)
            .ok_or_else(|| invalid(&format!("{field}.date must be YYYY-MM-DD"))),
        (None, Some(timestamp)) => Ok(EventTime::Timestamp {
            ts: timestamp
                .parse()
                .map_err(|_| invalid(&format!("{field}.timestamp must be in seconds")))?,
            timezone: value["timezone"]
                .as_str()
                .filter(|z| !z.is_empty())
                .unwrap_or(TIME_ZONE)
                .to_owned(),
        }),
        (None, None) => Err(invalid(&format!("{field} needs a date or a timestamp"))),
    }
}

fn check_times(start: &EventTime, end: &EventTime) -> Result<(), ApiError> {
    match (start, end) {
        (EventTime::Timestamp { ts: from, .. }, EventTime::Timestamp { ts: to, .. })
            if to > from =>
        {
            Ok(())
        }
        (EventTime::Date(from), EventTime::Date(to)) if to >= from => Ok(()),
        (EventTime::Timestamp { .. }, EventTime::Timestamp { .. })
        | (EventTime::Date(_), EventTime::Date(_)) => {
            Err(invalid("end_time must not be before start_time"))
        }
        _ => Err(invalid(
            "start_time and end_time must both be dates or both be timestamps",
        )),
    }
}

/// Applies the writable fields present in `body` to `event`.
fn apply(event: &mut Event, body: &Value, is_exception: bool) -> Result<(), ApiError> {
    let text = |field: &str, max: usize| -> Result<Option<String>, ApiError> {
        match body.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
            Some(_) => Err(invalid(&format!(
                "{field} must be a string of at most {max} characters"
            ))),
        }
    };
    let choice = |field: &str, allowed: &[&str]| -> Result<Option<String>, ApiError> {
        match body.get(field).and_then(Value::as_str) {
            None => Ok(None),
            Some(v) if allowed.contains(&v) => Ok(Some(v.to_owned())),
            Some(_) => Err(invalid(&format!("{field} must be one of {allowed:?}"))),
        }
    };
    if let Some(summary) = text("summary", 1000)? {
        event.summary = summary;
    }
    if let Some(description) = text("description", 40_960)? {
        event.description = description;
    }
    let start = match body.get("start_time") {
        Some(v) if v.is_object() => parse_time(v, "start_time")?,
        _ => event.start.clone(),
    };
    let end = match body.get("end_time") {
        Some(v) if v.is_object() => parse_time(v, "end_time")?,
        _ => event.end.clone(),
    };
    check_times(&start, &end)?;
    event.start = start;
    event.end = end;
    if let Some(location) = body.get("location") {
        event.location = location["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
    }
    if let Some(visibility) = choice("visibility", &["default", "public", "private"])? {
        event.visibility = visibility;
    }
    if let Some(status) = choice("free_busy_status", &["busy", "free"])? {
        event.free_busy_status = status;
    }
    let abilities = [
        "none",
        "can_see_others",
        "can_invite_others",
        "can_modify_event",
    ];
    if let Some(ability) = choice("attendee_ability", &abilities)? {
        event.attendee_ability = ability;
    }
    if let Some(recurrence) = text("recurrence", 2000)? {
        if is_exception {
            return Err(invalid("an exception of a recurring event cannot recur"));
        }
        if recurrence.is_empty() {
            event.recurrence = None;
        } else if Rule::parse(&recurrence).is_some() {
            event.recurrence = Some(recurrence);
        } else {
            return Err(invalid("recurrence is not a supported RRULE"));
        }
    }
    Ok(())
}

/// `POST /calendar/v4/calendars/:calendar_id/events?idempotency_key=`.
pub(crate) async fn create_event(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(calendar_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let key = query
        .get("idempotency_key")
        .filter(|k| !k.is_empty())
        .cloned();
    if key
        .as_ref()
        .is_some_and(|k| !(32..=128).contains(&k.chars().count()))
    {
        return Err(invalid("idempotency_key must be 32 to 128 characters"));
    }
    if !body["start_time"].is_object() || !body["end_time"].is_object() {
        return Err(invalid("start_time and end_time are required"));
    }
    let mut state = shared.lock();
    let now = state.api.now_ms() / 1000;
    let organizer = state.user.open_id.clone();
    let tenant = &mut state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    let dedupe = key.map(|k| (caller.app_id.clone(), calendar_id.clone(), k));
    if let Some(dedupe) = &dedupe
        && let Some(existing) = tenant.event_keys.get(dedupe)
        && let Some(event) = tenant.events.iter().find(|e| e.event_id == *existing)
    {
        return ok(json!({ "event": event_json(tenant, event, None, None, IdType::Open) }));
    }
    let mut event = Event {
        event_id: format!("{}_0", uuid::Uuid::new_v4()),
        calendar_id: calendar_id.clone(),
        organizer_calendar_id: calendar_id,
        organizer,
        summary: String::new(),
        description: String::new(),
        start: EventTime::Date(0),
        end: EventTime::Date(0),
        location: None,
        recurrence: None,
        visibility: "default".to_owned(),
        free_busy_status: "busy".to_owned(),
        attendee_ability: "none".to_owned(),
        attendees: Vec::new(),
        cancelled_instances: Vec::new(),
        recurring_event_id: None,
        create_time: now,
        via_api: true,
        deleted: false,
    };
    apply(&mut event, &body, false)?;
    let answer = json!({ "event": event_json(tenant, &event, None, None, IdType::Open) });
    if let Some(dedupe) = dedupe {
        tenant.event_keys.insert(dedupe, event.event_id.clone());
    }
    tenant.events.push(event);
    ok(answer)
}

/// `PATCH /calendar/v4/calendars/:calendar_id/events/:event_id`. Patching one instance of a
/// recurring event turns it into an exception.
pub(crate) async fn patch_event(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path((calendar_id, event_id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let mut state = shared.lock();
    let tenant = &mut state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    let index = match resolve(tenant, &event_id)? {
        Target::Event(index) => {
            let event = tenant.events.get_mut(index).ok_or_else(not_found)?;
            let mut updated = event.clone();
            apply(&mut updated, &body, event.recurring_event_id.is_some())?;
            *event = updated;
            index
        }
        Target::Instance { series, start } => {
            let base = tenant.events.get(series).cloned().ok_or_else(not_found)?;
            let (from, to) = span(&base.start, &base.end);
            let mut exception = Event {
                event_id: format!("{}_{start}", series_of(&base.event_id)),
                start: moved(&base.start, start),
                end: moved(&base.end, start + to - from),
                recurrence: None,
                cancelled_instances: Vec::new(),
                recurring_event_id: Some(base.event_id.clone()),
                ..base
            };
            apply(&mut exception, &body, true)?;
            if let Some(series) = tenant.events.get_mut(series) {
                series.cancelled_instances.push(start);
            }
            tenant.events.push(exception);
            tenant.events.len() - 1
        }
    };
    let event = tenant.events.get(index).ok_or_else(not_found)?;
    ok(json!({ "event": event_json(tenant, event, None, None, IdType::Open) }))
}

/// `DELETE /calendar/v4/calendars/:calendar_id/events/:event_id`. Deleting one instance of a
/// recurring event removes only that instance.
pub(crate) async fn delete_event(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path((calendar_id, event_id)): Path<(String, String)>,
) -> ApiResult {
    let mut state = shared.lock();
    let tenant = &mut state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    match resolve(tenant, &event_id)? {
        Target::Event(index) => {
            let id = tenant
                .events
                .get(index)
                .map(|e| e.event_id.clone())
                .unwrap_or_default();
            for event in &mut tenant.events {
                if event.event_id == id || event.recurring_event_id.as_deref() == Some(&id) {
                    event.deleted = true;
                }
            }
        }
        Target::Instance { series, start } => {
            if let Some(series) = tenant.events.get_mut(series) {
                series.cancelled_instances.push(start);
            }
        }
    }
    ok(json!({}))
}

/// `POST /calendar/v4/calendars/:calendar_id/events/:event_id/attendees`. Answers the event's
/// attendees after the addition; adding someone twice keeps one entry.
pub(crate) async fn add_attendees(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path((calendar_id, event_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let ids = IdType::from_query(&query).map_err(|e| invalid(&e))?;
    let mut state = shared.lock();
    let tenant = &mut state.api.tenant;
    check_calendar(tenant, &calendar_id)?;
    let index = match resolve(tenant, &event_id)? {
        Target::Event(index) => index,
        // Attendees belong to the whole series.
        Target::Instance { series, .. } => series,
    };
    let mut added: Vec<(String, bool)> = Vec::new();
    for attendee in body["attendees"].as_array().into_iter().flatten() {
        if attendee["type"].as_str().unwrap_or("user") != "user" {
            // The demo tenant has no meeting rooms and no chat or e-mail attendees.
            return Err(ApiError::new(400, 194004, "invalid attendee type"));
        }
        let id = attendee["user_id"].as_str().unwrap_or_default();
        let open_id = ids.to_open_id(tenant, id).ok_or_else(|| {
            ApiError::new(404, 195100, "user is dismiss or not exist in the tenant")
        })?;
        added.push((open_id, attendee["is_optional"].as_bool().unwrap_or(false)));
    }
    let event = tenant.events.get_mut(index).ok_or_else(not_found)?;
    if event.attendees.is_empty() && !added.is_empty() {
        // The organizer joins the list with the first attendee, as Feishu shows it.
        event.attendees.push(Attendee {
            attendee_id: format!("user_{}", &random_hex()[..16]),
            open_id: event.organizer.clone(),
            rsvp_status: "accept".to_owned(),
            is_optional: false,
            is_organizer: true,
        });
    }
    for (open_id, is_optional) in added {
        if event.attendees.iter().all(|a| a.open_id != open_id) {
            event.attendees.push(Attendee {
                attendee_id: format!("user_{}", &random_hex()[..16]),
                open_id,
                rsvp_status: "needs_action".to_owned(),
                is_optional,
                is_organizer: false,
            });
        }
    }
    let event = tenant.events.get(index).ok_or_else(not_found)?;
    let attendees: Vec<Value> = event
        .attendees
        .iter()
        .map(|a| attendee_json(tenant, a, ids))
        .collect();
    ok(json!({ "attendees": attendees }))
}

/// `POST /calendar/v4/freebusy/list`: busy periods of a user's events in a range (≤ 90 days).
pub(crate) async fn freebusy(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let time = |field: &str| {
        body[field]
            .as_str()
            .and_then(parse_rfc3339)
            .ok_or_else(|| invalid(&format!("{field} must be an RFC 3339 date-time")))
    };
    let from = time("time_min")?;
    let to = time("time_max")?;
    if to <= from || to - from > MAX_FREEBUSY_SECS {
        return Err(invalid(
            "time_max must be after time_min and at most 90 days later",
        ));
    }
    let only_busy = body["only_busy"].as_bool().unwrap_or(true);
    let need_rsvp = body["need_rsvp_status"].as_bool().unwrap_or(false);
    let id_type = query.get("user_id_type").map_or("open_id", String::as_str);
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let Some(user_id) = body["user_id"].as_str().filter(|u| !u.is_empty()) else {
        return Err(if body["room_id"].as_str().is_some() {
            // The demo tenant has no meeting rooms.
            ApiError::new(404, 190002, "invalid parameters in request: room not found")
        } else {
            invalid("user_id or room_id is required")
        });
    };
    let person = tenant
        .people
        .iter()
        .find(|p| match id_type {
            "union_id" => p.union_id == user_id,
            "user_id" => p.user_id == user_id,
            _ => p.open_id == user_id,
        })
        .ok_or_else(|| ApiError::new(404, 195100, "user is dismiss or not exist in the tenant"))?;
    let mut busy: Vec<(i64, Value)> = Vec::new();
    for event in tenant.events.iter().filter(|e| !e.deleted) {
        let rsvp = if event.organizer == person.open_id {
            Some("accept".to_owned())
        } else {
            event
                .attendees
                .iter()
                .find(|a| a.open_id == person.open_id)
                .map(|a| a.rsvp_status.clone())
        };
        let Some(rsvp) = rsvp else {
            continue;
        };
        if only_busy && event.free_busy_status != "busy" {
            continue;
        }
        let (start, end) = span(&event.start, &event.end);
        for at in instance_starts(event, from, to) {
            let mut entry = json!({
                "start_time": format_rfc3339_local(at),
                "end_time": format_rfc3339_local(at + end - start),
            });
            if need_rsvp {
                entry["rsvp_status"] = json!(rsvp);
            }
            busy.push((at, entry));
        }
    }
    busy.sort_by_key(|(at, _)| *at);
    let list: Vec<Value> = busy.into_iter().map(|(_, entry)| entry).collect();
    ok(json!({ "freebusy_list": list }))
}
