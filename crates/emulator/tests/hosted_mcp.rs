//! The emulator's stand-in for Feishu's hosted MCP server (`/mcp`), driven by rmcp's client as
//! the app drives it (handshake over Streamable HTTP, the token in `X-Lark-MCP-UAT`) and by a
//! bare JSON-RPC post as lark-cli sends it; documents it writes are read back through the Open
//! API and the other way round (the document tools' own behaviour is in `hosted_mcp/docs.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "hosted_mcp/docs.rs"]
mod docs;

use std::collections::HashMap;

use emulator::feishu::FeishuEmulator;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{ClientInitializeError, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const APP: &str = "cli_hosted_mcp_test";
const READ: &str = "docx:document:readonly";
const CREATE: &str = "docx:document:create";
const WRITE: &str = "docx:document:write_only";

fn http() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

type Client = RunningService<RoleClient, ()>;

async fn connect(
    emulator: &FeishuEmulator,
    headers: &[(&str, &str)],
) -> Result<Client, ClientInitializeError> {
    let custom: HashMap<_, _> = headers
        .iter()
        .map(|(name, value)| {
            (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                reqwest::header::HeaderValue::from_str(value).unwrap(),
            )
        })
        .collect();
    let config =
        StreamableHttpClientTransportConfig::with_uri(emulator.mcp_url()).custom_headers(custom);
    ().serve(StreamableHttpClientTransport::with_client(http(), config))
        .await
}

async fn connect_as(emulator: &FeishuEmulator, token: &str) -> Client {
    connect(emulator, &[("X-Lark-MCP-UAT", token)])
        .await
        .unwrap()
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments(args)))
        .await
}

/// The JSON in the result's first text item, which lark-cli parses.
fn payload(result: &CallToolResult) -> Value {
    let text = &result.content[0].as_text().expect("a text item").text;
    serde_json::from_str(text).unwrap()
}

async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    payload(&result)
}

/// The JSON-RPC error code (Feishu's, for token and scope failures) of a refused request.
fn rpc_code(error: &ServiceError) -> (i32, String) {
    match error {
        ServiceError::McpError(data) => (data.code.0, data.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_handshake_lists_the_four_doc_tools_with_their_hints() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let client = connect_as(&emulator, &emulator.issue_token(APP, &[READ])).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["create-doc", "fetch-doc", "locate-doc", "update-doc"]
    );
    let hint = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        tool.annotations.as_ref().and_then(|a| a.read_only_hint)
    };
    assert_eq!(hint("fetch-doc"), Some(true));
    assert_eq!(hint("locate-doc"), Some(true));
    assert_eq!(hint("create-doc"), Some(false));
    assert_eq!(hint("update-doc"), Some(false));
    let update = tools.iter().find(|t| t.name == "update-doc").unwrap();
    let mut properties: Vec<&String> = update.input_schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    properties.sort_unstable();
    assert_eq!(
        properties,
        [
            "doc_id",
            "markdown",
            "mode",
            "new_title",
            "selection_by_title",
            "selection_with_ellipsis"
        ]
    );
    assert!(
        emulator.count("/mcp", None) >= 3,
        "initialize, initialized, tools/list"
    );
}

#[tokio::test]
async fn missing_unknown_and_expired_tokens_are_refused_with_feishu_codes() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let init_code = |error: ClientInitializeError| match error {
        ClientInitializeError::JsonRpcError(data) => data.code.0,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    };
    let refused = |result: Result<Client, ClientInitializeError>| match result {
        Ok(_) => panic!("the handshake went through"),
        Err(error) => init_code(error),
    };
    assert_eq!(refused(connect(&emulator, &[]).await), 99991661);
    let unknown = connect(&emulator, &[("X-Lark-MCP-UAT", "u-not-issued")]).await;
    assert_eq!(refused(unknown), 99991668);
    // A token that expires after the handshake is refused on the next call.
    let token = emulator.issue_token(APP, &[READ]);
    let client = connect_as(&emulator, &token).await;
    emulator.expire_access_tokens();
    let (code, _) = rpc_code(&client.list_all_tools().await.unwrap_err());
    assert_eq!(code, 99991677);
}

#[tokio::test]
async fn a_token_without_the_docx_scope_gets_99991679_naming_it() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let client = connect_as(&emulator, &emulator.issue_token(APP, &[CREATE])).await;
    let error = call(
        &client,
        "fetch-doc",
        json!({"doc_id": emulator.seed().prd_document_id}),
    )
    .await
    .unwrap_err();
    let (code, message) = rpc_code(&error);
    assert_eq!(code, 99991679);
    assert!(message.contains(READ), "{message}");
    // Creating needs only the create scope, which it holds; updating needs the write scope too.
    let created = ok(&client, "create-doc", json!({"markdown": "x"})).await;
    let error = call(
        &client,
        "update-doc",
        json!({"doc_id": created["doc_id"], "mode": "append", "markdown": "y"}),
    )
    .await
    .unwrap_err();
    let (code, message) = rpc_code(&error);
    assert_eq!(code, 99991679);
    assert!(message.contains(WRITE), "{message}");
}

#[tokio::test]
async fn allowed_tools_header_limits_what_is_listed_and_callable() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let token = emulator.issue_token(APP, &[READ, CREATE]);
    let client = connect(
        &emulator,
        &[
            ("X-Lark-MCP-UAT", &token),
            ("X-Lark-MCP-Allowed-Tools", "fetch-doc, locate-doc"),
        ],
    )
    .await
    .unwrap();
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["fetch-doc", "locate-doc"]);
    let error = call(&client, "create-doc", json!({"markdown": "x"}))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&error).0, -32602);
    assert_eq!(emulator.documents_created(), 0);
}

/// lark-cli's post: no handshake, no `Accept`, the raw token, the one tool allowed.
async fn bare_call(
    emulator: &FeishuEmulator,
    path: &str,
    token: &str,
    tool: &str,
    args: Value,
) -> (reqwest::header::HeaderMap, Value) {
    let response = http()
        .post(format!("{}{path}", emulator.base_url()))
        .header("Content-Type", "application/json")
        .header("X-Lark-MCP-UAT", token)
        .header("X-Lark-MCP-Allowed-Tools", tool)
        .body(
            json!({
                "jsonrpc": "2.0",
                "id": "5f0c2d7e-0000-4000-8000-000000000001",
                "method": "tools/call",
                "params": {"name": tool, "arguments": args},
            })
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    (headers, response.json().await.unwrap())
}

#[tokio::test]
async fn a_bare_tools_call_without_initialize_answers_json() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let token = emulator.issue_token(APP, &[READ, CREATE]);
    let (headers, body) = bare_call(
        &emulator,
        "/mcp",
        &token,
        "create-doc",
        json!({"title": "CLI 建的", "markdown": "正文"}),
    )
    .await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(body["id"], "5f0c2d7e-0000-4000-8000-000000000001");
    // lark-cli JSON-parses the text of a result with exactly one text item.
    assert_eq!(body["result"]["content"].as_array().unwrap().len(), 1);
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    let created: Value = serde_json::from_str(text).unwrap();
    assert!(
        created["doc_url"]
            .as_str()
            .unwrap()
            .contains("feishu.cn/docx/")
    );
    // The Lark host's endpoint links to larksuite.com, over the same documents.
    let (_, body) = bare_call(
        &emulator,
        "/lark/mcp",
        &token,
        "fetch-doc",
        json!({"doc_id": created["doc_id"], "skip_task_detail": true}),
    )
    .await;
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    let fetched: Value = serde_json::from_str(text).unwrap();
    assert_eq!(fetched["title"], "CLI 建的");
    assert_eq!(fetched["markdown"], "正文");
    // A bad token: Feishu's code in the JSON-RPC error, where lark-cli reads it.
    let (_, body) = bare_call(
        &emulator,
        "/mcp",
        "u-bogus",
        "fetch-doc",
        json!({"doc_id": "x"}),
    )
    .await;
    assert_eq!(body["error"]["code"], 99991668, "{body}");
}

#[tokio::test]
async fn a_bot_token_needs_the_scope_enabled_for_its_app() {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.register_app(emulator::feishu::App {
        app_id: APP.to_owned(),
        app_secret: "s".to_owned(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec![READ.to_owned()],
    });
    let tenant = emulator.issue_tenant_token(APP);
    let client = connect(&emulator, &[("X-Lark-MCP-TAT", &tenant)])
        .await
        .unwrap();
    let prd = emulator.seed().prd_document_id;
    let fetched = ok(&client, "fetch-doc", json!({"doc_id": prd})).await;
    assert!(!fetched["markdown"].as_str().unwrap().is_empty());
    let error = call(&client, "create-doc", json!({"markdown": "x"}))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&error).0, 99991672);
}
