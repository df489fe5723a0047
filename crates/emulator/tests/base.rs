//! The emulator's Base (多维表格) endpoints over plain HTTP, as Feishu's official MCP server
//! calls them: the seeded Base, records created once per `client_token`, searched with a filter
//! and updated, tables and apps created, and the permission errors of a token without the scope.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use emulator::feishu::FeishuEmulator;
use emulator::feishu::api::bitable;
use serde_json::{Value, json};

const APP: &str = "cli_base_test";

async fn call(
    emulator: &FeishuEmulator,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", emulator.base_url()))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn records_are_created_once_searched_and_updated() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let seed = emulator.seed();
    let token = emulator.issue_token(APP, bitable::SCOPES);
    let app = &seed.base_app_token;
    let table = &seed.base_table_id;
    let records = format!("/open-apis/bitable/v1/apps/{app}/tables/{table}/records");

    let (status, tables) = call(
        &emulator,
        &token,
        "GET",
        &format!("/open-apis/bitable/v1/apps/{app}/tables"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{tables}");
    assert_eq!(tables["data"]["items"][0]["name"], "需求");
    assert_eq!(tables["data"]["has_more"], false);
    let (_, fields) = call(
        &emulator,
        &token,
        "GET",
        &format!("/open-apis/bitable/v1/apps/{app}/tables/{table}/fields"),
        None,
    )
    .await;
    let names: Vec<&str> = fields["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["标题", "状态", "估分"]);
    assert_eq!(fields["data"]["items"][1]["type"], 3);

    let row = json!({"fields": {"标题": "导出 PDF", "状态": "待评审", "估分": 2}});
    let path = format!("{records}?client_token=8f0b2a64-5f37-4d2c-9c1c-0d1e2f3a4b5c");
    let (status, first) = call(&emulator, &token, "POST", &path, Some(row.clone())).await;
    assert_eq!((status, first["code"].as_i64()), (200, Some(0)), "{first}");
    let record = &first["data"]["record"];
    assert_eq!(record["fields"]["标题"], "导出 PDF", "written cells echo");
    assert_eq!(record["id"], record["record_id"]);
    // The same client_token answers the same record; nothing new is written.
    let (_, again) = call(&emulator, &token, "POST", &path, Some(row)).await;
    assert_eq!(again["data"]["record"]["record_id"], record["record_id"]);
    assert_eq!(emulator.base_records_created(app, table).len(), 1);
    assert_eq!(emulator.writes_to(bitable::RECORDS), 2);

    let search = json!({"filter": {"conjunction": "and", "conditions": [
        {"field_name": "状态", "operator": "is", "value": ["待评审"]}]},
        "field_names": ["标题"]});
    let (status, found) = call(
        &emulator,
        &token,
        "POST",
        &format!("{records}/search?page_size=1"),
        Some(search),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["data"]["total"], 2, "the seeded one and the new one");
    assert_eq!(found["data"]["has_more"], true);
    let cell = &found["data"]["items"][0]["fields"];
    assert_eq!(
        cell["标题"],
        json!([{"text": "首页改版 v3", "type": "text"}])
    );
    assert!(cell.get("状态").is_none(), "only the fields asked for");

    let id = record["record_id"].as_str().unwrap();
    let (status, updated) = call(
        &emulator,
        &token,
        "PUT",
        &format!("{records}/{id}"),
        Some(json!({"fields": {"状态": "开发中"}})),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["data"]["record"]["fields"]["标题"], "导出 PDF");
    let created = emulator.base_records_created(app, table);
    assert_eq!(created[0]["状态"], "开发中");

    let (status, wrong) = call(
        &emulator,
        &token,
        "POST",
        &records,
        Some(json!({"fields": {"优先级": "高"}})),
    )
    .await;
    assert_eq!((status, wrong["code"].as_i64()), (400, Some(1254045)));
    let (_, mistyped) = call(
        &emulator,
        &token,
        "POST",
        &records,
        Some(json!({"fields": {"估分": "很多"}})),
    )
    .await;
    assert_eq!(mistyped["code"], 1254061);
    let (_, missing) = call(
        &emulator,
        &token,
        "POST",
        "/open-apis/bitable/v1/apps/bascnNope/tables/tblNope/records",
        Some(json!({"fields": {}})),
    )
    .await;
    assert_eq!(missing["code"], 1254040);
}

#[tokio::test]
async fn apps_and_tables_are_created() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let token = emulator.issue_token(APP, bitable::SCOPES);
    let (status, app) = call(
        &emulator,
        &token,
        "POST",
        bitable::APPS,
        Some(json!({"name": "周报汇总"})),
    )
    .await;
    assert_eq!(status, 200, "{app}");
    let app_token = app["data"]["app"]["app_token"].as_str().unwrap();
    assert!(app_token.starts_with("bascn"));
    let (_, table) = call(
        &emulator,
        &token,
        "POST",
        &format!("/open-apis/bitable/v1/apps/{app_token}/tables"),
        Some(json!({"table": {"name": "本周", "fields": [
            {"field_name": "事项", "type": 1}, {"field_name": "工时", "type": 2}]}})),
    )
    .await;
    assert_eq!(table["data"]["field_id_list"].as_array().unwrap().len(), 2);
    let (_, tables) = call(
        &emulator,
        &token,
        "GET",
        &format!("/open-apis/bitable/v1/apps/{app_token}/tables"),
        None,
    )
    .await;
    assert_eq!(
        tables["data"]["total"], 2,
        "the default table and the new one"
    );
}

#[tokio::test]
async fn a_token_without_the_scope_is_told_every_scope_that_would_do() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let seed = emulator.seed();
    let reader = emulator.issue_token(APP, &["base:record:retrieve"]);
    let records = format!(
        "/open-apis/bitable/v1/apps/{}/tables/{}/records",
        seed.base_app_token, seed.base_table_id
    );
    let (status, refused) = call(
        &emulator,
        &reader,
        "POST",
        &records,
        Some(json!({"fields": {"标题": "x"}})),
    )
    .await;
    assert_eq!((status, refused["code"].as_i64()), (400, Some(99991679)));
    let named: Vec<&str> = refused["error"]["permission_violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["subject"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["bitable:app", "base:record:create"]);
    // The read the same token holds goes through.
    let (status, _) = call(
        &emulator,
        &reader,
        "POST",
        &format!("{records}/search"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        emulator
            .base_records_created(&seed.base_app_token, &seed.base_table_id)
            .is_empty()
    );
}
