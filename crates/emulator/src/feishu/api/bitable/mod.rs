//! Base (多维表格, `bitable/v1`): what Feishu's official MCP server (`@larksuiteoapi/lark-mcp`)
//! calls for its Base tools. Create an app (with a default table), list and create tables, list
//! fields, create a record (idempotent on `client_token`), search records (`filter` with the
//! common operators, `field_names`, paging up to 500) and update one. Errors are Feishu's:
//! 1254040 (no such app), 1254041 (no such table), 1254043 (no such record), 1254045 (no such
//! field name) and the field conversion codes.

pub(crate) mod data;

use std::collections::HashMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post, put};
use serde_json::{Map, Value, json};

use super::super::Shared;
use super::scopes::{Endpoint, ScopeGroup, read, write};
use super::{ApiError, ApiResult, Paging, json_body, ok, paged, random_token};
use data::{Base, BaseField, BaseRecord, BaseTable, FieldKind, empty_table};

/// Create a Base app.
pub const APPS: &str = "/open-apis/bitable/v1/apps";
/// List (GET) or create (POST) an app's tables.
pub const TABLES: &str = "/open-apis/bitable/v1/apps/{app_token}/tables";
/// List a table's fields.
pub const FIELDS: &str = "/open-apis/bitable/v1/apps/{app_token}/tables/{table_id}/fields";
/// Create a record (POST).
pub const RECORDS: &str = "/open-apis/bitable/v1/apps/{app_token}/tables/{table_id}/records";
/// Search records (POST, a read).
pub const RECORD_SEARCH: &str =
    "/open-apis/bitable/v1/apps/{app_token}/tables/{table_id}/records/search";
/// Update a record (PUT).
pub const RECORD: &str =
    "/open-apis/bitable/v1/apps/{app_token}/tables/{table_id}/records/{record_id}";

// Each API page's 权限要求: the whole-Base scopes, or the one narrow `base:` scope.
const APP_CREATE: ScopeGroup = &["bitable:app", "base:app:create"];
const TABLE_READ: ScopeGroup = &["bitable:app", "bitable:app:readonly", "base:table:read"];
const TABLE_CREATE: ScopeGroup = &["bitable:app", "base:table:create"];
const FIELD_READ: ScopeGroup = &["bitable:app", "bitable:app:readonly", "base:field:read"];
const RECORD_READ: ScopeGroup = &[
    "bitable:app",
    "bitable:app:readonly",
    "base:record:retrieve",
];
const RECORD_CREATE: ScopeGroup = &["bitable:app", "base:record:create"];
const RECORD_UPDATE: ScopeGroup = &["bitable:app", "base:record:update"];

/// The narrow scopes an app enables to use every endpoint here as a user.
pub const SCOPES: &[&str] = &[
    "base:app:create",
    "base:table:read",
    "base:table:create",
    "base:field:read",
    "base:record:retrieve",
    "base:record:create",
    "base:record:update",
];

/// The Base endpoints with their scopes (the gateway looks here after [`super::ENDPOINTS`]).
pub const ENDPOINTS: &[Endpoint] = &[
    write("POST", APPS, &[APP_CREATE]),
    read("GET", TABLES, &[TABLE_READ]),
    write("POST", TABLES, &[TABLE_CREATE]),
    read("GET", FIELDS, &[FIELD_READ]),
    write("POST", RECORDS, &[RECORD_CREATE]),
    // POST, but only reads.
    read("POST", RECORD_SEARCH, &[RECORD_READ]),
    write("PUT", RECORD, &[RECORD_UPDATE]),
];

/// The routes, to be put behind the Open API gateway.
pub(crate) fn routes(router: Router<Shared>) -> Router<Shared> {
    router
        .route(APPS, post(create_app))
        .route(TABLES, get(list_tables).post(create_table))
        .route(FIELDS, get(list_fields))
        .route(RECORDS, post(create_record))
        .route(RECORD_SEARCH, post(search_records))
        .route(RECORD, put(update_record))
}

fn invalid(msg: &str) -> ApiError {
    ApiError::new(400, 1254001, format!("WrongRequestBody: {msg}"))
}

fn table_of<'a>(
    bases: &'a mut [Base],
    app_token: &str,
    table_id: &str,
) -> Result<&'a mut BaseTable, ApiError> {
    let base = bases
        .iter_mut()
        .find(|b| b.app_token == app_token)
        .ok_or_else(|| ApiError::new(400, 1254040, "BaseTokenNotFound"))?;
    base.tables
        .iter_mut()
        .find(|t| t.table_id == table_id)
        .ok_or_else(|| ApiError::new(400, 1254041, "TableIdNotFound"))
}

/// The cells of `body.fields`, each checked against the table's field of that name.
fn cells(table: &BaseTable, body: &Value) -> Result<Map<String, Value>, ApiError> {
    let fields = body["fields"]
        .as_object()
        .ok_or_else(|| invalid("fields must be an object"))?;
    for (name, value) in fields {
        let field = table
            .fields
            .iter()
            .find(|f| &f.name == name)
            .ok_or_else(|| ApiError::new(400, 1254045, "FieldNameNotFound"))?;
        field
            .kind
            .check(value)
            .map_err(|(code, what)| ApiError::new(400, code, what))?;
    }
    Ok(fields.clone())
}

/// `POST /bitable/v1/apps`: a Base with one default table.
async fn create_app(State(shared): State<Shared>, body: Bytes) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let name = body["name"].as_str().unwrap_or("未命名多维表格").to_owned();
    let table = empty_table(
        format!("tbl{}", random_token("", 13)),
        "数据表".to_owned(),
        Vec::new(),
    );
    let base = Base {
        app_token: format!("bascn{}", random_token("", 22)),
        name,
        folder_token: body["folder_token"].as_str().unwrap_or_default().to_owned(),
        time_zone: body["time_zone"]
            .as_str()
            .unwrap_or("Asia/Shanghai")
            .to_owned(),
        tables: vec![table],
    };
    let answer = json!({"app": {
        "app_token": base.app_token,
        "default_table_id": base.tables[0].table_id,
        "folder_token": base.folder_token,
        "name": base.name,
        "time_zone": base.time_zone,
        "url": format!("https://demo-corp.feishu.cn/base/{}", base.app_token),
    }});
    shared.lock().api.tenant.bases.push(base);
    ok(answer)
}

/// `GET /bitable/v1/apps/:app_token/tables`.
async fn list_tables(
    State(shared): State<Shared>,
    Path(app_token): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let paging = paging(&query, 20, 100, &app_token)?;
    let state = shared.lock();
    let base = state
        .api
        .tenant
        .bases
        .iter()
        .find(|b| b.app_token == app_token)
        .ok_or_else(|| ApiError::new(400, 1254040, "BaseTokenNotFound"))?;
    let items: Vec<Value> = base
        .tables
        .iter()
        .map(|t| json!({"name": t.name, "revision": t.revision, "table_id": t.table_id}))
        .collect();
    let (page, next) = paging.page(&items);
    ok(paged(
        json!({"items": page, "total": items.len()}),
        next,
        "page_token",
    ))
}

/// `POST /bitable/v1/apps/:app_token/tables`: `table.name` and optional `table.fields`.
async fn create_table(
    State(shared): State<Shared>,
    Path(app_token): Path<String>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let name = body["table"]["name"]
        .as_str()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("table.name is required"))?;
    let fields: Vec<BaseField> = body["table"]["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(n, f)| BaseField {
            field_id: format!("fld{}", random_token("", 10)),
            name: f["field_name"].as_str().unwrap_or_default().to_owned(),
            kind: FieldKind::from_code(f["type"].as_i64().unwrap_or(1)),
            primary: n == 0,
        })
        .collect();
    let table = empty_table(format!("tbl{}", random_token("", 13)), name.into(), fields);
    let answer = json!({
        "table_id": table.table_id,
        "default_view_id": format!("vew{}", random_token("", 10)),
        "field_id_list": table.fields.iter().map(|f| f.field_id.clone()).collect::<Vec<_>>(),
    });
    let mut state = shared.lock();
    let base = state
        .api
        .tenant
        .bases
        .iter_mut()
        .find(|b| b.app_token == app_token)
        .ok_or_else(|| ApiError::new(400, 1254040, "BaseTokenNotFound"))?;
    base.tables.push(table);
    ok(answer)
}

/// `GET …/tables/:table_id/fields`.
async fn list_fields(
    State(shared): State<Shared>,
    Path((app_token, table_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let paging = paging(&query, 20, 100, &table_id)?;
    let mut state = shared.lock();
    let table = table_of(&mut state.api.tenant.bases, &app_token, &table_id)?;
    let items: Vec<Value> = table.fields.iter().map(BaseField::to_json).collect();
    let (page, next) = paging.page(&items);
    ok(paged(
        json!({"items": page, "total": items.len()}),
        next,
        "page_token",
    ))
}

/// `POST …/records`: one record; a repeated `client_token` answers the record it made.
async fn create_record(
    State(shared): State<Shared>,
    Path((app_token, table_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let token = query.get("client_token").filter(|t| !t.is_empty());
    let mut state = shared.lock();
    let table = table_of(&mut state.api.tenant.bases, &app_token, &table_id)?;
    if let Some(id) = token.and_then(|t| table.client_tokens.get(t))
        && let Some(record) = table.records.iter().find(|r| &r.record_id == id)
    {
        return ok(json!({"record": record.written()}));
    }
    let record = BaseRecord {
        record_id: format!("rec{}", random_token("", 10)),
        fields: cells(table, &body)?,
        via_api: true,
    };
    if let Some(token) = token {
        table
            .client_tokens
            .insert(token.clone(), record.record_id.clone());
    }
    let answer = json!({"record": record.written()});
    table.records.push(record);
    table.revision += 1;
    ok(answer)
}

/// `PUT …/records/:record_id`: the cells given replace those of the same names.
async fn update_record(
    State(shared): State<Shared>,
    Path((app_token, table_id, record_id)): Path<(String, String, String)>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let mut state = shared.lock();
    let table = table_of(&mut state.api.tenant.bases, &app_token, &table_id)?;
    let cells = cells(table, &body)?;
    let record = table
        .records
        .iter_mut()
        .find(|r| r.record_id == record_id)
        .ok_or_else(|| ApiError::new(400, 1254043, "RecordIdNotFound"))?;
    record.fields.extend(cells);
    let answer = json!({"record": record.written()});
    table.revision += 1;
    ok(answer)
}

/// `POST …/records/search`: `filter` (`conjunction` and `conditions` of `field_name`,
/// `operator`, `value`) and `field_names`; `page_size` up to 500.
async fn search_records(
    State(shared): State<Shared>,
    Path((app_token, table_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| invalid(&e))?;
    let paging = paging(&query, 20, 500, &format!("{table_id}\n{body}"))?;
    let names: Option<Vec<String>> = body["field_names"].as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    let mut state = shared.lock();
    let table = table_of(&mut state.api.tenant.bases, &app_token, &table_id)?;
    let filter = &body["filter"];
    let conditions = filter["conditions"].as_array().cloned().unwrap_or_default();
    for condition in &conditions {
        let name = condition["field_name"].as_str().unwrap_or_default();
        if !table.fields.iter().any(|f| f.name == name) {
            return Err(ApiError::new(400, 1254045, "FieldNameNotFound"));
        }
    }
    let any = filter["conjunction"].as_str() == Some("or");
    let items: Vec<Value> = table
        .records
        .iter()
        .filter(|r| {
            let mut hits = conditions.iter().map(|c| matches(r, c));
            conditions.is_empty()
                || if any {
                    hits.any(|h| h)
                } else {
                    hits.all(|h| h)
                }
        })
        .map(|r| r.read(table, names.as_deref()))
        .collect();
    let (page, next) = paging.page(&items);
    ok(paged(
        json!({"items": page, "total": items.len()}),
        next,
        "page_token",
    ))
}

/// Whether `record` meets one search condition.
fn matches(record: &BaseRecord, condition: &Value) -> bool {
    let name = condition["field_name"].as_str().unwrap_or_default();
    let cell = record.fields.get(name).filter(|v| !v.is_null());
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let wanted: Vec<String> = condition["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    let is = cell.is_some_and(|c| wanted.iter().any(|w| *w == text(c)));
    let contains = cell.is_some_and(|c| wanted.iter().any(|w| text(c).contains(w.as_str())));
    match condition["operator"].as_str().unwrap_or("is") {
        "isNot" => !is,
        "contains" => contains,
        "doesNotContain" => !contains,
        "isEmpty" => cell.is_none(),
        "isNotEmpty" => cell.is_some(),
        _ => is,
    }
}

fn paging(
    query: &HashMap<String, String>,
    default: usize,
    max: usize,
    context: &str,
) -> Result<Paging, ApiError> {
    Paging::parse(
        query.get("page_size").map(String::as_str),
        query.get("page_token").map(String::as_str),
        default,
        max,
        context,
    )
    .map_err(|e| invalid(&e))
}

/// Test hooks: what the Base holds.
impl super::super::FeishuEmulator {
    /// The cells of the records written through the Open API into `table_id` of `app_token`,
    /// oldest first (none when either is unknown).
    pub fn base_records_created(&self, app_token: &str, table_id: &str) -> Vec<Map<String, Value>> {
        let mut state = self.shared.lock();
        table_of(&mut state.api.tenant.bases, app_token, table_id)
            .map(|t| {
                t.records
                    .iter()
                    .filter(|r| r.via_api)
                    .map(|r| r.fields.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}
