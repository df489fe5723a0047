//! Docs, wiki and drive: search, read as Markdown, list a folder, create and append.

use std::sync::Arc;

use agent::{Localized, Preview, PreviewField, Risk};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::{FeishuTool, Spec, ToolEnv, object_schema, opt_text, pick, text_arg};
use crate::api::{ApiError, PageStyle};
use crate::ids::{ApiPath, IdKind};

const SEARCH: &str = "search:docs:read";
const CONTENT: &str = "docs:document.content:read";
const DRIVE: &str = "drive:drive:readonly";
const CREATE: &str = "docx:document:create";
const WRITE: &str = "docx:document:write_only";
const CONVERT: &str = "docx:document.block:convert";

/// The longest Markdown handed to the model from one document, in characters.
const MAX_MARKDOWN: usize = 60_000;

pub(crate) fn tools(env: &Arc<ToolEnv>) -> Vec<FeishuTool> {
    vec![
        FeishuTool::read(
            Spec {
                name: "search_docs",
                description: "Search the user's docs and wiki pages by keywords (at most 50 characters).",
                parameters: object_schema(
                    json!({"query": {"type": "string", "maxLength": 50}}),
                    &["query"],
                ),
                scopes: &[SEARCH],
                dedup: false,
                ids: &[],
            },
            env,
            |env, args, _| Box::pin(search(env, args)),
        ),
        FeishuTool::read(
            Spec {
                name: "read_document",
                description: "Read a Feishu document (docx) as Markdown.",
                parameters: object_schema(
                    json!({"document_id": IdKind::Document.schema("As search_docs returned its token.")}),
                    &["document_id"],
                ),
                scopes: &[CONTENT],
                dedup: false,
                ids: &[("document_id", IdKind::Document)],
            },
            env,
            |env, args, _| Box::pin(read(env, args)),
        ),
        FeishuTool::read(
            Spec {
                name: "list_drive_folder",
                description: "List the files of a drive folder (omit folder_token for the root).",
                parameters: object_schema(
                    json!({"folder_token": IdKind::Folder.schema("As list_drive_folder returned it.")}),
                    &[],
                ),
                scopes: &[DRIVE],
                dedup: false,
                ids: &[("folder_token", IdKind::Folder)],
            },
            env,
            |env, args, _| Box::pin(list_folder(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "create_document",
                description: "Create a new, empty Feishu document with a title. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "title": {"type": "string"},
                        "folder_token": IdKind::Folder.schema("As list_drive_folder returned it.")
                    }),
                    &["title"],
                ),
                scopes: &[CREATE],
                // Feishu has no idempotency key for document creation.
                dedup: false,
                ids: &[("folder_token", IdKind::Folder)],
            },
            env,
            |env, args, _| Box::pin(create(env, args)),
            |env, args| Box::pin(preview_create(env, args)),
        ),
        FeishuTool::write(
            Spec {
                name: "append_to_document",
                description: "Append Markdown (headings, paragraphs, lists) to the end of a document. Needs the user's approval.",
                parameters: object_schema(
                    json!({
                        "document_id": IdKind::Document.schema("As search_docs or create_document returned it."),
                        "markdown": {"type": "string"}
                    }),
                    &["document_id", "markdown"],
                ),
                scopes: &[WRITE, CONVERT],
                dedup: true,
                ids: &[("document_id", IdKind::Document)],
            },
            env,
            |env, args, key| Box::pin(append(env, args, key)),
            |env, args| Box::pin(preview_append(env, args)),
        ),
    ]
}

async fn search(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let query = text_arg(&args, "query")?;
    let body = json!({"query": query, "doc_filter": {}, "wiki_filter": {}, "page_size": 15});
    let data = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("search/v2/doc_wiki/search"),
            &[],
            Some(&body),
        )
        .await?;
    let results: Vec<Value> = data
        .get("res_units")
        .or_else(|| data.get("items"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let meta = r.get("result_meta").unwrap_or(r);
            json!({
                "title": r.get("title_highlighted").or_else(|| r.get("title")),
                "type": r.get("entity_type"),
                "token": meta.get("token"),
                "url": meta.get("url"),
                "summary": r.get("summary_highlighted"),
            })
        })
        .collect();
    Ok(json!({"results": results}))
}

async fn read(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let document = text_arg(&args, "document_id")?;
    let query = [
        ("doc_token", document.clone()),
        ("doc_type", "docx".to_owned()),
        ("content_type", "markdown".to_owned()),
    ];
    let data = env
        .api
        .call(Method::GET, &ApiPath::new("docs/v1/content"), &query, None)
        .await?;
    let mut markdown = data
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let truncated = markdown.chars().count() > MAX_MARKDOWN;
    if truncated {
        markdown = markdown.chars().take(MAX_MARKDOWN).collect();
    }
    Ok(json!({"document_id": document, "markdown": markdown, "truncated": truncated}))
}

async fn list_folder(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let mut query = vec![("page_size", "50".to_owned())];
    if let Some(folder) = opt_text(&args, "folder_token") {
        query.push(("folder_token", folder));
    }
    // The drive list pages with `next_page_token`, unlike the rest of the Open API.
    let files = env
        .api
        .collect(
            &ApiPath::new("drive/v1/files"),
            query,
            "files",
            PageStyle::NextPageToken,
            Some(500),
        )
        .await?;
    let files: Vec<Value> = files
        .iter()
        .map(|f| pick(f, &["name", "type", "token", "url", "modified_time"]))
        .collect();
    Ok(json!({"files": files}))
}

async fn create(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let title = text_arg(&args, "title")?;
    let mut body = json!({"title": title});
    if let Some(folder) = opt_text(&args, "folder_token") {
        body["folder_token"] = json!(folder);
    }
    // No idempotency key exists for this call: never send it twice on a doubtful failure.
    let data = env
        .api
        .call_unrepeatable(
            Method::POST,
            &ApiPath::new("docx/v1/documents"),
            &[],
            Some(&body),
        )
        .await?;
    Ok(pick(
        data.get("document").unwrap_or(&Value::Null),
        &["document_id", "title", "revision_id"],
    ))
}

async fn append(
    env: Arc<ToolEnv>,
    args: Map<String, Value>,
    key: String,
) -> Result<Value, ApiError> {
    let document = text_arg(&args, "document_id")?;
    let markdown = text_arg(&args, "markdown")?;
    let converted = env
        .api
        .call(
            Method::POST,
            &ApiPath::new("docx/v1/documents/blocks/convert"),
            &[],
            Some(&json!({"content_type": "markdown", "content": markdown})),
        )
        .await?;
    let first_level: Vec<Value> = converted
        .get("first_level_block_ids")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let blocks: Vec<Value> = converted
        .get("blocks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            first_level.is_empty() || b.get("block_id").is_some_and(|id| first_level.contains(id))
        })
        .map(|b| {
            let mut block = b.clone();
            if let Value::Object(map) = &mut block {
                // Ids and parents are assigned by the document on insertion.
                map.remove("block_id");
                map.remove("parent_id");
                map.remove("children");
            }
            block
        })
        .collect();
    let count = blocks.len();
    let data = env
        .api
        .call(
            Method::POST,
            &document_path(&document)?
                .then("blocks")
                .id(IdKind::Document, "document_id", &document)?
                .then("children"),
            // `client_token`: the same append sent twice after a crash lands once.
            &[("document_revision_id", "-1".into()), ("client_token", key)],
            Some(&json!({"children": blocks, "index": -1})),
        )
        .await?;
    Ok(
        json!({"document_id": document, "blocks_added": count, "revision_id": data.get("document_revision_id")}),
    )
}

/// `docx/v1/documents/{document_id}`.
fn document_path(document: &str) -> Result<ApiPath, ApiError> {
    Ok(ApiPath::new("docx/v1/documents").id(IdKind::Document, "document_id", document)?)
}

async fn doc_title(env: &ToolEnv, document: &str) -> String {
    let answer = match document_path(document) {
        Ok(path) => env.api.call(Method::GET, &path, &[], None).await.ok(),
        Err(_) => None,
    };
    answer
        .and_then(|d| {
            d.pointer("/document/title")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| document.to_owned())
}

async fn preview_create(_env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let title = opt_text(&args, "title").unwrap_or_default();
    Preview {
        summary: Localized::new(
            format!("新建文档「{title}」"),
            format!("Create the document “{title}”"),
        ),
        risk: Risk::Normal,
        fields: Vec::new(),
        changes: Vec::new(),
    }
}

async fn preview_append(env: Arc<ToolEnv>, args: Map<String, Value>) -> Preview {
    let document = opt_text(&args, "document_id").unwrap_or_default();
    let title = doc_title(&env, &document).await;
    let markdown = opt_text(&args, "markdown").unwrap_or_default();
    let shown: String = markdown.chars().take(500).collect();
    let ellipsis = if markdown.chars().count() > 500 {
        "…"
    } else {
        ""
    };
    Preview {
        summary: Localized::new(
            format!("在文档「{title}」末尾追加内容"),
            format!("Append to the end of “{title}”"),
        ),
        risk: Risk::Normal,
        fields: vec![PreviewField {
            label: Localized::new("追加内容", "Text to add"),
            value: format!("{shown}{ellipsis}"),
        }],
        changes: Vec::new(),
    }
}
