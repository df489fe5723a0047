//! Docs, docx and wiki: search (`search/v2/doc_wiki/search`), a document as Markdown
//! (`docs/v1/content`), a document's metadata, creating a document, Markdown → blocks (`blocks/convert`), appending
//! blocks (idempotent per `client_token`) and resolving a wiki node to its document.
//!
//! The Markdown converter handles a faithful subset: headings 1–9, paragraphs, bullets, ordered
//! items, to-dos, quotes, code fences and dividers, with bold, italic, strikethrough, inline code
//! and links inside text. Nested lists are flattened.

use std::collections::HashMap;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use super::super::Shared;
use super::super::tenant::{Block, Document, DriveFile, Tenant};
use super::{ApiError, ApiResult, Caller, Paging, json_body, ok, paged, random_token};

/// The key Feishu stores a block's body under, by block type.
fn block_key(block_type: u32) -> Option<String> {
    match block_type {
        2 => Some("text".to_owned()),
        3..=11 => Some(format!("heading{}", block_type - 2)),
        12 => Some("bullet".to_owned()),
        13 => Some("ordered".to_owned()),
        14 => Some("code".to_owned()),
        15 => Some("quote".to_owned()),
        17 => Some("todo".to_owned()),
        22 => Some("divider".to_owned()),
        _ => None,
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Style {
    bold: bool,
    italic: bool,
    strikethrough: bool,
    inline_code: bool,
    link: Option<String>,
}

fn text_run(content: &str, style: &Style) -> Value {
    let mut element_style = json!({
        "bold": style.bold,
        "italic": style.italic,
        "strikethrough": style.strikethrough,
        "underline": false,
        "inline_code": style.inline_code,
    });
    if let Some(url) = &style.link {
        element_style["link"] = json!({ "url": url });
    }
    json!({"text_run": {"content": content, "text_element_style": element_style}})
}

/// An emphasis marker and the style flag it flips.
type Toggle = (&'static str, fn(&mut Style) -> &mut bool);

/// Whether `marker` closes again later in `rest`.
fn closes(rest: &str, marker: &str) -> bool {
    rest.find(marker).is_some_and(|at| at > 0)
}

/// Inline Markdown → text elements.
fn inline_elements(text: &str) -> Vec<Value> {
    let mut elements = Vec::new();
    let mut style = Style::default();
    let mut buffer = String::new();
    let mut rest = text;
    let flush = |buffer: &mut String, style: &Style, elements: &mut Vec<Value>| {
        if !buffer.is_empty() {
            elements.push(text_run(buffer, style));
            buffer.clear();
        }
    };
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        if c == '\\'
            && let Some(escaped) = after.chars().next()
        {
            buffer.push(escaped);
            rest = &after[escaped.len_utf8()..];
            continue;
        }
        if c == '`' && closes(after, "`") {
            let end = after.find('`').unwrap_or(0);
            flush(&mut buffer, &style, &mut elements);
            let code = Style {
                inline_code: true,
                ..style.clone()
            };
            elements.push(text_run(&after[..end], &code));
            rest = &after[end + 1..];
            continue;
        }
        let toggles: [Toggle; 3] = [
            ("**", |s| &mut s.bold),
            ("~~", |s| &mut s.strikethrough),
            ("*", |s| &mut s.italic),
        ];
        if let Some((marker, field)) = toggles.iter().find(|(m, _)| rest.starts_with(m)) {
            let open = *field(&mut style.clone());
            let inner = &rest[marker.len()..];
            // CommonMark's flanking rule, simplified: an opening marker is followed by a
            // non-space and closes later; a closing marker follows a non-space.
            let can_open =
                inner.chars().next().is_some_and(|n| !n.is_whitespace()) && closes(inner, marker);
            let can_close = buffer.chars().last().is_some_and(|p| !p.is_whitespace())
                || elements.last().is_some() && buffer.is_empty();
            if (open && can_close) || (!open && can_open) {
                flush(&mut buffer, &style, &mut elements);
                let flag = field(&mut style);
                *flag = !*flag;
                rest = &rest[marker.len()..];
                continue;
            }
        }
        if c == '['
            && let Some(close) = after.find("](")
            && let Some(end) = after[close + 2..].find(')')
        {
            flush(&mut buffer, &style, &mut elements);
            let label = &after[..close];
            let url = &after[close + 2..close + 2 + end];
            let linked = Style {
                link: Some(url::form_urlencoded::byte_serialize(url.as_bytes()).collect()),
                ..style.clone()
            };
            elements.push(text_run(label, &linked));
            rest = &after[close + 2 + end + 1..];
            continue;
        }
        buffer.push(c);
        rest = after;
    }
    flush(&mut buffer, &style, &mut elements);
    if elements.is_empty() {
        elements.push(text_run("", &Style::default()));
    }
    elements
}

fn code_language(name: &str) -> u32 {
    match name.trim().to_ascii_lowercase().as_str() {
        "bash" => 7,
        "c++" | "cpp" => 9,
        "c" => 10,
        "css" => 12,
        "go" | "golang" => 22,
        "html" => 24,
        "json" => 28,
        "java" => 29,
        "javascript" | "js" => 30,
        "kotlin" => 32,
        "markdown" | "md" => 39,
        "python" | "py" => 49,
        "rust" | "rs" => 53,
        "sql" => 56,
        "shell" | "sh" => 60,
        "swift" => 61,
        "typescript" | "ts" => 63,
        "xml" => 66,
        "yaml" | "yml" => 67,
        "toml" => 75,
        _ => 1,
    }
}

fn text_block(block_type: u32, elements: Vec<Value>, mut style: Value) -> (u32, Value) {
    if style.is_null() {
        style = json!({"align": 1, "folded": false});
    }
    (block_type, json!({"style": style, "elements": elements}))
}

/// `1. `, `2) ` → the text after the marker.
fn ordered_item(line: &str) -> Option<&str> {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "))
}

/// Markdown → top-level blocks, each given an id by `next_id`.
pub(crate) fn markdown_to_blocks(
    markdown: &str,
    next_id: &mut dyn FnMut() -> String,
) -> Vec<Block> {
    let mut parsed: Vec<(u32, Value)> = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut in_ordered_run = false;
    let flush = |paragraph: &mut Vec<&str>, parsed: &mut Vec<(u32, Value)>| {
        if !paragraph.is_empty() {
            parsed.push(text_block(
                2,
                inline_elements(&paragraph.join("\n")),
                Value::Null,
            ));
            paragraph.clear();
        }
    };
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        let was_ordered = std::mem::replace(&mut in_ordered_run, false);
        if let Some(language) = trimmed.strip_prefix("```") {
            flush(&mut paragraph, &mut parsed);
            let mut code: Vec<&str> = Vec::new();
            for code_line in lines.by_ref() {
                if code_line.trim_start().starts_with("```") {
                    break;
                }
                code.push(code_line);
            }
            let elements = vec![text_run(&code.join("\n"), &Style::default())];
            let style = json!({"language": code_language(language), "wrap": false});
            parsed.push((14, json!({"style": style, "elements": elements})));
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut paragraph, &mut parsed);
            // A blank line between items keeps an ordered list going (Feishu exports it so).
            in_ordered_run = was_ordered;
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=9).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            flush(&mut paragraph, &mut parsed);
            let level = u32::try_from(hashes).unwrap_or(1);
            parsed.push(text_block(
                2 + level,
                inline_elements(trimmed[hashes..].trim()),
                Value::Null,
            ));
        } else if ["---", "***", "___"].contains(&trimmed) {
            flush(&mut paragraph, &mut parsed);
            parsed.push((22, json!({})));
        } else if let Some((done, text)) = ["- [ ] ", "* [ ] ", "- [x] ", "* [x] ", "- [X] "]
            .iter()
            .find_map(|m| {
                trimmed
                    .strip_prefix(m)
                    .map(|t| (m.contains('x') || m.contains('X'), t))
            })
        {
            flush(&mut paragraph, &mut parsed);
            let style = json!({"align": 1, "folded": false, "done": done});
            parsed.push(text_block(17, inline_elements(text), style));
        } else if let Some(text) = ["- ", "* ", "+ "]
            .iter()
            .find_map(|m| trimmed.strip_prefix(m))
        {
            flush(&mut paragraph, &mut parsed);
            parsed.push(text_block(12, inline_elements(text), Value::Null));
        } else if let Some(text) = ordered_item(trimmed) {
            flush(&mut paragraph, &mut parsed);
            let sequence = if was_ordered { "auto" } else { "1" };
            let style = json!({"align": 1, "folded": false, "sequence": sequence});
            parsed.push(text_block(13, inline_elements(text), style));
            in_ordered_run = true;
        } else if let Some(text) = trimmed.strip_prefix('>') {
            flush(&mut paragraph, &mut parsed);
            parsed.push(text_block(
                15,
                inline_elements(text.trim_start()),
                Value::Null,
            ));
        } else {
            paragraph.push(trimmed);
        }
    }
    flush(&mut paragraph, &mut parsed);
    parsed
        .into_iter()
        .map(|(block_type, body)| Block {
            block_id: next_id(),
            block_type,
            body,
        })
        .collect()
}

/// Text elements → inline Markdown.
fn render_elements(body: &Value) -> String {
    let mut out = String::new();
    for element in body["elements"].as_array().into_iter().flatten() {
        if let Some(run) = element.get("text_run") {
            let content = run["content"].as_str().unwrap_or_default();
            let style = &run["text_element_style"];
            let flag = |name: &str| style[name].as_bool().unwrap_or(false);
            let mut text = if flag("inline_code") {
                format!("`{content}`")
            } else {
                content.to_owned()
            };
            if let Some(url) = style["link"]["url"].as_str() {
                text = format!("[{text}]({url})");
            }
            if flag("bold") {
                text = format!("**{text}**");
            }
            if flag("italic") {
                text = format!("*{text}*");
            }
            if flag("strikethrough") {
                text = format!("~~{text}~~");
            }
            out.push_str(&text);
        } else if let Some(mention) = element.get("mention_doc") {
            let title = mention["title"].as_str().unwrap_or_default();
            let url = mention["url"].as_str().unwrap_or_default();
            out.push_str(&format!("[{title}]({url})"));
        }
    }
    out
}

/// Each block a document's Markdown shows, with its index in `blocks`: blocks of types the
/// emulator does not render are left out.
pub(crate) fn rendered_blocks(blocks: &[Block]) -> Vec<(usize, String)> {
    let mut rendered = Vec::new();
    let mut number = 0;
    for (index, block) in blocks.iter().enumerate() {
        if block_key(block.block_type).is_none() {
            continue;
        }
        let body = &block.body;
        if block.block_type != 13 {
            number = 0;
        }
        let text = render_elements(body);
        let markdown = match block.block_type {
            3..=11 => format!(
                "{} {text}",
                "#".repeat(usize::try_from(block.block_type - 2).unwrap_or(1))
            ),
            12 => format!("- {text}"),
            13 => {
                number = body["style"]["sequence"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(number + 1);
                format!("{number}. {text}")
            }
            14 => format!("```\n{text}\n```"),
            15 => format!("> {text}"),
            17 => {
                let done = body["style"]["done"].as_bool().unwrap_or(false);
                format!("- [{}] {text}", if done { "x" } else { " " })
            }
            22 => "---".to_owned(),
            _ => text,
        };
        rendered.push((index, markdown));
    }
    rendered
}

/// A document as `docs/v1/content` renders it: the title as a heading, then each block,
/// separated by blank lines.
fn render_markdown(document: &Document) -> String {
    let mut parts = vec![format!("# {}", document.title)];
    parts.extend(
        rendered_blocks(&document.blocks)
            .into_iter()
            .map(|(_, md)| md),
    );
    parts.join("\n\n")
}

/// A document's text, for search.
fn plain_text(document: &Document) -> String {
    document
        .blocks
        .iter()
        .map(|b| {
            b.body["elements"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["text_run"]["content"].as_str())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A block as the API shows it.
fn block_json(block: &Block, parent_id: &str) -> Value {
    let mut value = json!({
        "block_id": block.block_id,
        "block_type": block.block_type,
        "parent_id": parent_id,
    });
    if let Some(key) = block_key(block.block_type) {
        value[key] = block.body.clone();
    }
    value
}

fn search_error(msg: &str) -> ApiError {
    ApiError::new(400, 1274001, format!("invalid param: {msg}"))
}

/// Case-insensitive containment.
fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The query wrapped in `<h>…</h>` where it first occurs (Feishu's highlight markup).
fn highlight(text: &str, query: &str) -> String {
    if query.is_empty() {
        return text.to_owned();
    }
    let lower = text.to_lowercase();
    match lower.find(&query.to_lowercase()) {
        Some(at) if lower.len() == text.len() => format!(
            "{}<h>{}</h>{}",
            &text[..at],
            &text[at..at + query.len()],
            &text[at + query.len()..]
        ),
        _ => text.to_owned(),
    }
}

/// About 80 characters of `text` around the first match.
fn snippet(text: &str, query: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<char> = text.to_lowercase().chars().collect();
    let needle: Vec<char> = query.to_lowercase().chars().collect();
    let at = if needle.is_empty() || lower.len() != chars.len() {
        0
    } else {
        lower
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .unwrap_or(0)
    };
    let start = at.saturating_sub(20);
    let piece: String = chars[start.min(chars.len())..].iter().take(80).collect();
    highlight(&piece, query)
}

fn string_list(filter: &Value, field: &str) -> Vec<String> {
    filter[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn result_meta(tenant: &Tenant, document: &Document, token: &str, url: String) -> Value {
    json!({
        "doc_types": "DOCX",
        "update_time": document.updated_at,
        "url": url,
        "owner_name": tenant.name_of(&document.owner),
        "owner_id": document.owner,
        "is_cross_tenant": false,
        "create_time": document.created_at,
        "last_open_time": document.updated_at,
        "edit_user_id": document.owner,
        "edit_user_name": tenant.name_of(&document.owner),
        "token": token,
    })
}

/// `POST /search/v2/doc_wiki/search`.
pub(crate) async fn search(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| search_error(&e))?;
    let query = body["query"]
        .as_str()
        .ok_or_else(|| search_error("missing required fields: query"))?
        .trim()
        .to_owned();
    if query.chars().count() > 50 {
        return Err(search_error("query is longer than 50 characters"));
    }
    let doc_filter = body.get("doc_filter").filter(|f| f.is_object());
    let wiki_filter = body.get("wiki_filter").filter(|f| f.is_object());
    if doc_filter.is_none() && wiki_filter.is_none() {
        return Err(search_error(
            "one of doc_filter and wiki_filter is required",
        ));
    }
    let size = body["page_size"].as_i64().map(|n| n.to_string());
    let context = format!(
        "search\n{query}\n{}\n{}",
        doc_filter.map(Value::to_string).unwrap_or_default(),
        wiki_filter.map(Value::to_string).unwrap_or_default()
    );
    let paging = Paging::parse(
        size.as_deref(),
        body["page_token"].as_str(),
        20,
        20,
        &context,
    )
    .map_err(|e| search_error(&e))?;
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let matches = |document: &Document, title: &str, filter: &Value| {
        let only_title = filter["only_title"].as_bool().unwrap_or(false);
        let creators = string_list(filter, "creator_ids");
        let types = string_list(filter, "doc_types");
        (creators.is_empty() || creators.contains(&document.owner))
            && (types.is_empty() || types.iter().any(|t| t == "DOCX"))
            && (contains(title, &query) || (!only_title && contains(&plain_text(document), &query)))
    };
    let mut units: Vec<(i64, Value)> = Vec::new();
    if let Some(filter) = doc_filter {
        let folders = string_list(filter, "folder_tokens");
        for document in &tenant.documents {
            let in_wiki = tenant
                .wiki_nodes
                .iter()
                .any(|n| n.obj_token == document.document_id);
            if in_wiki
                || !matches(document, &document.title, filter)
                || (!folders.is_empty() && !folders.contains(&document.folder_token))
            {
                continue;
            }
            let url = format!("https://demo-corp.feishu.cn/docx/{}", document.document_id);
            units.push((
                document.updated_at,
                json!({
                    "title_highlighted": highlight(&document.title, &query),
                    "summary_highlighted": snippet(&plain_text(document), &query),
                    "entity_type": "DOC",
                    "result_meta": result_meta(tenant, document, &document.document_id, url),
                }),
            ));
        }
    }
    if let Some(filter) = wiki_filter {
        let spaces = string_list(filter, "space_ids");
        for node in &tenant.wiki_nodes {
            let Some(document) = tenant
                .documents
                .iter()
                .find(|d| d.document_id == node.obj_token)
            else {
                continue;
            };
            if !matches(document, &node.title, filter)
                || (!spaces.is_empty() && !spaces.contains(&node.space_id))
            {
                continue;
            }
            let url = format!("https://demo-corp.feishu.cn/wiki/{}", node.node_token);
            units.push((
                document.updated_at,
                json!({
                    "title_highlighted": highlight(&node.title, &query),
                    "summary_highlighted": snippet(&plain_text(document), &query),
                    "entity_type": "WIKI",
                    "result_meta": result_meta(tenant, document, &node.node_token, url),
                }),
            ));
        }
    }
    units.sort_by_key(|(updated, _)| std::cmp::Reverse(*updated));
    let units: Vec<Value> = units.into_iter().map(|(_, unit)| unit).collect();
    let (page, next) = paging.page(&units);
    ok(paged(
        json!({"total": units.len(), "res_units": page}),
        next,
        "page_token",
    ))
}

/// `GET /docs/v1/content?doc_token=&doc_type=docx&content_type=markdown`.
pub(crate) async fn content(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let invalid = |msg: &str| ApiError::new(400, 2889904, format!("invalid param: {msg}"));
    let token = query
        .get("doc_token")
        .ok_or_else(|| invalid("doc_token is required"))?;
    if query.get("doc_type").map(String::as_str) != Some("docx") {
        return Err(invalid("doc_type must be docx"));
    }
    if query.get("content_type").map(String::as_str) != Some("markdown") {
        return Err(invalid("content_type must be markdown"));
    }
    let state = shared.lock();
    let document = state
        .api
        .tenant
        .documents
        .iter()
        .find(|d| d.document_id == *token)
        .ok_or_else(|| ApiError::new(400, 2889914, "doc token not found"))?;
    ok(json!({ "content": render_markdown(document) }))
}

fn docx_error(msg: &str) -> ApiError {
    ApiError::new(400, 1770001, format!("invalid param: {msg}"))
}

/// `POST /docx/v1/documents`. Feishu offers no idempotency here: each call makes a document.
pub(crate) async fn create(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| docx_error(&e))?;
    let title = match body.get("title") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(title)) if (1..=800).contains(&title.chars().count()) => title.clone(),
        Some(_) => return Err(docx_error("title must be 1 to 800 characters")),
    };
    let mut state = shared.lock();
    let now = state.api.now_ms() / 1000;
    let tenant = &mut state.api.tenant;
    let folder = resolve_folder(tenant, body["folder_token"].as_str())?;
    let document_id = add_document(tenant, &title, Some(folder), now);
    ok(json!({"document": {"document_id": document_id, "revision_id": 1, "title": title}}))
}

/// The folder a new document goes to: `folder` if it exists (1770039 otherwise), else the
/// drive's root.
pub(crate) fn resolve_folder(tenant: &Tenant, folder: Option<&str>) -> Result<String, ApiError> {
    match folder.filter(|f| !f.is_empty()) {
        None => Ok(tenant.root_folder.clone()),
        Some(folder) => {
            let exists = *folder == tenant.root_folder
                || tenant
                    .files
                    .iter()
                    .any(|f| f.token == folder && f.kind == "folder");
            if exists {
                Ok(folder.to_owned())
            } else {
                Err(ApiError::new(400, 1770039, "folder not found"))
            }
        }
    }
}

/// Adds an empty document owned by the signed-in user and answers its id; with a folder it is
/// also a file in the drive (a wiki page is not).
pub(crate) fn add_document(
    tenant: &mut Tenant,
    title: &str,
    folder: Option<String>,
    now: i64,
) -> String {
    let owner = tenant
        .people
        .first()
        .map(|p| p.open_id.clone())
        .unwrap_or_default();
    let document_id = random_token("", 27);
    tenant.documents.push(Document {
        document_id: document_id.clone(),
        title: title.to_owned(),
        blocks: Vec::new(),
        revision_id: 1,
        owner: owner.clone(),
        created_at: now,
        updated_at: now,
        folder_token: folder.clone().unwrap_or_default(),
        via_api: true,
    });
    if let Some(folder) = folder {
        tenant.files.push(DriveFile {
            token: document_id.clone(),
            name: if title.is_empty() {
                "未命名文档".to_owned()
            } else {
                title.to_owned()
            },
            kind: "docx".to_owned(),
            parent_token: folder,
            created_at: now,
            modified_at: now,
            owner,
        });
    }
    document_id
}

/// `GET /docx/v1/documents/:document_id`: the title and revision.
pub(crate) async fn get_document(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path(document_id): Path<String>,
) -> ApiResult {
    let state = shared.lock();
    let document = state
        .api
        .tenant
        .documents
        .iter()
        .find(|d| d.document_id == document_id)
        .ok_or_else(|| ApiError::new(404, 1770002, "not found"))?;
    ok(json!({"document": {
        "document_id": document.document_id,
        "revision_id": document.revision_id,
        "title": document.title,
        "display_setting": {
            "show_authors": true,
            "show_create_time": false,
            "show_pv": false,
            "show_uv": false,
            "show_like_count": false,
            "show_comment_count": false,
            "show_related_matters": false,
        },
    }}))
}

/// `POST /docx/v1/documents/blocks/convert`: Markdown → blocks with temporary ids, not yet in
/// any document.
pub(crate) async fn convert(Extension(_caller): Extension<Caller>, body: Bytes) -> ApiResult {
    let body = json_body(&body).map_err(|e| docx_error(&e))?;
    let content = body["content"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| docx_error("content is required"))?;
    if content.chars().count() > 10_485_760 {
        return Err(ApiError::new(400, 1770033, "content size exceed limit"));
    }
    match body["content_type"].as_str() {
        Some("markdown") => {}
        // The emulator converts Markdown only; Feishu also takes HTML.
        Some("html") => return Err(docx_error("the emulator converts markdown only")),
        _ => return Err(docx_error("content_type must be markdown or html")),
    }
    let blocks = markdown_to_blocks(content, &mut || uuid::Uuid::new_v4().to_string());
    let ids: Vec<&str> = blocks.iter().map(|b| b.block_id.as_str()).collect();
    let blocks_json: Vec<Value> = blocks
        .iter()
        .map(|b| {
            let mut value = block_json(b, "");
            value["revision_id"] = json!(0);
            value
        })
        .collect();
    ok(json!({
        "first_level_block_ids": ids,
        "blocks": blocks_json,
        "block_id_to_image_urls": [],
    }))
}

/// The body a client sent for one child block, checked.
fn child_block(child: &Value) -> Result<(u32, Value), ApiError> {
    let block_type = child["block_type"]
        .as_u64()
        .and_then(|t| u32::try_from(t).ok())
        .ok_or_else(|| docx_error("block_type is required"))?;
    let key = block_key(block_type)
        .ok_or_else(|| ApiError::new(400, 1770029, "block not support to create"))?;
    let body = child.get(&key).cloned().unwrap_or_else(|| json!({}));
    if !body.is_object() {
        return Err(docx_error(&format!("{key} must be an object")));
    }
    if block_type != 22 && !body["elements"].is_array() {
        return Err(docx_error(&format!("{key}.elements is required")));
    }
    Ok((block_type, body))
}

/// `POST /docx/v1/documents/:document_id/blocks/:block_id/children`. A repeated `client_token`
/// answers as the first call did and appends nothing.
pub(crate) async fn append_children(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Path((document_id, block_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> ApiResult {
    let body = json_body(&body).map_err(|e| docx_error(&e))?;
    let mut state = shared.lock();
    let now = state.api.now_ms() / 1000;
    let tenant = &mut state.api.tenant;
    let client_token = query.get("client_token").filter(|t| !t.is_empty()).cloned();
    if let Some(token) = &client_token
        && let Some(answer) = tenant
            .block_tokens
            .get(&(document_id.clone(), token.clone()))
    {
        return ok(answer.clone());
    }
    let document = tenant
        .documents
        .iter_mut()
        .find(|d| d.document_id == document_id)
        .ok_or_else(|| ApiError::new(404, 1770002, "not found"))?;
    if block_id != document_id {
        return Err(if document.blocks.iter().any(|b| b.block_id == block_id) {
            ApiError::new(400, 1770028, "block not support create children")
        } else {
            ApiError::new(404, 1770002, "not found")
        });
    }
    let revision = match query.get("document_revision_id") {
        None => -1,
        Some(text) => text
            .parse::<i64>()
            .map_err(|_| docx_error("document_revision_id must be an integer"))?,
    };
    if revision < -1 || revision > document.revision_id {
        return Err(docx_error("document_revision_id is out of range"));
    }
    let children = body["children"]
        .as_array()
        .filter(|c| (1..=50).contains(&c.len()))
        .ok_or_else(|| docx_error("children must hold 1 to 50 blocks"))?;
    let parsed = children
        .iter()
        .map(child_block)
        .collect::<Result<Vec<_>, _>>()?;
    let index = match body["index"].as_i64() {
        None | Some(-1) => document.blocks.len(),
        Some(i) => usize::try_from(i)
            .ok()
            .filter(|i| *i <= document.blocks.len())
            .ok_or_else(|| docx_error("index is out of range"))?,
    };
    let created: Vec<Block> = parsed
        .into_iter()
        .map(|(block_type, body)| Block {
            block_id: random_token("doxcn", 22),
            block_type,
            body,
        })
        .collect();
    let created_json: Vec<Value> = created
        .iter()
        .map(|b| block_json(b, &document_id))
        .collect();
    for (offset, block) in created.into_iter().enumerate() {
        document.blocks.insert(index + offset, block);
    }
    document.revision_id += 1;
    document.updated_at = now;
    let client_token = client_token.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let answer = json!({
        "children": created_json,
        "document_revision_id": document.revision_id,
        "client_token": client_token,
    });
    tenant
        .block_tokens
        .insert((document_id, client_token), answer.clone());
    ok(answer)
}

/// `GET /wiki/v2/spaces/get_node?token=`: the document behind a wiki node (or, with
/// `obj_type=docx`, the node of a document).
pub(crate) async fn get_node(
    State(shared): State<Shared>,
    Extension(_caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let token = query
        .get("token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::new(400, 131002, "param err: token is required"))?;
    let by_object = query.get("obj_type").is_some_and(|t| t != "wiki");
    let state = shared.lock();
    let tenant = &state.api.tenant;
    let node = tenant
        .wiki_nodes
        .iter()
        .find(|n| {
            if by_object {
                n.obj_token == *token
            } else {
                n.node_token == *token
            }
        })
        .ok_or_else(|| ApiError::new(404, 131005, "not found"))?;
    let edited = tenant
        .documents
        .iter()
        .find(|d| d.document_id == node.obj_token)
        .map_or(node.created_at, |d| d.updated_at);
    ok(json!({"node": {
        "space_id": node.space_id,
        "node_token": node.node_token,
        "obj_token": node.obj_token,
        "obj_type": "docx",
        "parent_node_token": "",
        "node_type": "origin",
        "origin_node_token": node.node_token,
        "origin_space_id": node.space_id,
        "has_child": false,
        "title": node.title,
        "obj_create_time": node.created_at.to_string(),
        "obj_edit_time": edited.to_string(),
        "node_create_time": node.created_at.to_string(),
        "creator": node.creator,
        "owner": node.creator,
        "node_creator": node.creator,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("b{n}")
        }
    }

    #[test]
    fn markdown_round_trips_through_blocks() {
        let markdown = "## 目标\n\n- 导出 **Excel**\n- 首页 `P95` < 800ms\n\n1. 第一步\n2. 第二步\n\n普通段落，见[文档](https://x.cn/a)。\n\n> 引用\n\n---";
        let blocks = markdown_to_blocks(markdown, &mut ids());
        let types: Vec<u32> = blocks.iter().map(|b| b.block_type).collect();
        assert_eq!(types, [4, 12, 12, 13, 13, 2, 15, 22]);
        let document = Document {
            document_id: "d".into(),
            title: "标题".into(),
            blocks,
            revision_id: 1,
            owner: String::new(),
            created_at: 0,
            updated_at: 0,
            folder_token: String::new(),
            via_api: false,
        };
        let rendered = render_markdown(&document);
        assert_eq!(
            rendered,
            "# 标题\n\n## 目标\n\n- 导出 **Excel**\n\n- 首页 `P95` < 800ms\n\n1. 第一步\n\n2. 第二步\n\n普通段落，见[文档](https%3A%2F%2Fx.cn%2Fa)。\n\n> 引用\n\n---"
        );
    }

    #[test]
    fn unmatched_markers_stay_literal() {
        let elements = inline_elements("a * b ** c");
        assert_eq!(elements.len(), 1);
        assert_eq!(elements[0]["text_run"]["content"], "a * b ** c");
    }
}
