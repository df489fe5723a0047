//! Drive: listing a folder (`drive/v1/files`). Unlike the other lists it answers
//! `next_page_token`; an empty `folder_token` lists the root folder whole, without paging.

use std::collections::HashMap;

use axum::Extension;
use axum::extract::{Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::tenant::DriveFile;
use super::{ApiError, ApiResult, Caller, Paging, ok, paged};

fn file_json(file: &DriveFile) -> Value {
    json!({
        "token": file.token,
        "name": file.name,
        "type": file.kind,
        "parent_token": file.parent_token,
        "url": file.url(),
        "created_time": file.created_at.to_string(),
        "modified_time": file.modified_at.to_string(),
        "owner_id": file.owner,
    })
}

/// `GET /drive/v1/files?folder_token=&page_size=&page_token=&order_by=&direction=`.
pub(crate) async fn list(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let invalid = |msg: &str| ApiError::new(400, 1061002, format!("params error: {msg}"));
    let order_by = query.get("order_by").map_or("EditedTime", String::as_str);
    let direction = query.get("direction").map_or("DESC", String::as_str);
    if !["EditedTime", "CreatedTime"].contains(&order_by) || !["ASC", "DESC"].contains(&direction) {
        return Err(invalid("order_by or direction"));
    }
    let folder = query
        .get("folder_token")
        .map(|f| f.trim().to_owned())
        .unwrap_or_default();
    let paging = Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        100,
        200,
        &format!("files\n{folder}\n{order_by}\n{direction}"),
    )
    .map_err(|e| {
        if e.starts_with("page_size") {
            ApiError::new(400, 1064001, "page size out of limit.")
        } else {
            invalid(&e)
        }
    })?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let parent = if folder.is_empty() {
        tenant.root_folder.clone()
    } else {
        if !tenant
            .files
            .iter()
            .any(|f| f.token == folder && f.kind == "folder")
        {
            return Err(ApiError::new(404, 1061003, "not found."));
        }
        folder.clone()
    };
    let mut files: Vec<&DriveFile> = tenant
        .files
        .iter()
        .filter(|f| f.parent_token == parent)
        .collect();
    files.sort_by_key(|f| {
        if order_by == "CreatedTime" {
            f.created_at
        } else {
            f.modified_at
        }
    });
    if direction == "DESC" {
        files.reverse();
    }
    let items: Vec<Value> = files.into_iter().map(file_json).collect();
    if folder.is_empty() {
        // The root folder is listed whole, without paging.
        return ok(json!({ "files": items, "has_more": false }));
    }
    let (page, next) = paging.page(&items);
    ok(paged(json!({ "files": page }), next, "next_page_token"))
}
