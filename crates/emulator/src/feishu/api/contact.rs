//! Contact: searching people by name (`search/v1/user`, `page_size` ≤ 200) and one user
//! (`contact/v3/users/:user_id`).

use std::collections::HashMap;

use axum::Extension;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::tenant::Person;
use super::query::IdType;
use super::{ApiError, ApiResult, Caller, Paging, ok, paged};

fn avatar(person: &Person) -> Value {
    json!({
        "avatar_72": person.avatar("72x72"),
        "avatar_240": person.avatar("240x240"),
        "avatar_640": person.avatar("640x640"),
        "avatar_origin": person.avatar("noop"),
    })
}

/// `GET /search/v1/user?query=`: people whose Chinese or English name contains the query.
pub(crate) async fn search(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let invalid =
        |msg: &str| ApiError::new(400, 99992402, format!("field validation failed: {msg}"));
    let text = query
        .get("query")
        .map(|q| q.trim().to_owned())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| invalid("query is required"))?;
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        20,
        200,
        &format!("users\n{text}"),
    )
    .map_err(|e| invalid(&e))?;
    let state = shared.lock();
    let needle = text.to_lowercase();
    let users: Vec<Value> = state
        .api
        .tenant
        .people
        .iter()
        .filter(|p| p.name.contains(&text) || p.en_name.to_lowercase().contains(&needle))
        .map(|p| {
            json!({
                "avatar": avatar(p),
                "department_ids": [p.department_id],
                "name": p.name,
                "open_id": p.open_id,
                "user_id": p.user_id,
            })
        })
        .collect();
    let (page, next) = paging.page(&users);
    ok(paged(json!({ "users": page }), next, "page_token"))
}

/// `GET /contact/v3/users/:user_id?user_id_type=open_id`, answering in the id type asked for,
/// with the page's documented error codes (contact-v3/user/get: 40001 invalid parameter, 41012
/// user id invalid).
pub(crate) async fn get_user(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(user_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let ids = IdType::from_query(&query)
        .map_err(|e| ApiError::new(400, 40001, format!("invalid parameter: {e}")))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let person = ids
        .to_open_id(tenant, &user_id)
        .and_then(|open_id| tenant.person(&open_id))
        .ok_or_else(|| ApiError::new(400, 41012, "user id invalid error"))?;
    ok(json!({"user": {
        "union_id": person.union_id,
        "user_id": person.user_id,
        "open_id": person.open_id,
        "name": person.name,
        "en_name": person.en_name,
        "nickname": "",
        "email": person.email,
        "enterprise_email": person.email,
        "avatar": avatar(person),
        "status": {
            "is_frozen": false,
            "is_resigned": false,
            "is_activated": true,
            "is_exited": false,
            "is_unjoin": false,
        },
        "department_ids": [person.department_id],
        "city": person.city,
        "country": "CN",
        "work_station": "",
        "join_time": person.join_time,
        "is_tenant_manager": false,
        "employee_no": person.employee_no,
        "employee_type": 1,
        "job_title": person.job_title,
        "time_zone": "Asia/Shanghai",
    }}))
}
