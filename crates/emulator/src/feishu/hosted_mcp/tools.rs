//! The hosted server's document tools over the emulator's tenant, with the argument names and
//! result fields lark-cli sends and reads (`shortcuts/doc/docs_{create,fetch,update}.go`,
//! `shortcuts/drive/drive_add_comment.go`, the `lark-doc` skill's references). A document made
//! here is an Open API document too, and the other way round.

use std::ops::Range;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use super::super::EmulatorState;
use super::super::api::docs::{add_document, markdown_to_blocks, resolve_folder};
use super::super::api::{new_logid, random_token};
use super::super::tenant::{Tenant, WikiNode};
use super::args::{ToolError, integer, required, text, title, token_of};
use super::selection::{Layout, Selection};

/// The space `wiki_space: "my_library"` names: the user's own library.
const MY_LIBRARY_SPACE: &str = "7300000000000000001";

/// How many matches `locate-doc` lists unless told.
const DEFAULT_LOCATE_LIMIT: usize = 10;

/// The update modes, as `update-doc` takes them.
pub(super) const MODES: [&str; 7] = [
    "append",
    "overwrite",
    "replace_range",
    "replace_all",
    "insert_before",
    "insert_after",
    "delete_range",
];

type ToolResult = Result<Value, ToolError>;

/// Runs tool `name` (one of [`super::TOOLS`]).
pub(super) fn call(
    state: &mut EmulatorState,
    name: &str,
    args: &JsonObject,
    lark: bool,
) -> ToolResult {
    match name {
        "create-doc" => create_doc(state, args, lark),
        "fetch-doc" => fetch_doc(state, args),
        "update-doc" => update_doc(state, args),
        "locate-doc" => locate_doc(state, args),
        _ => Err(ToolError::invalid(format!("unknown tool {name}"))),
    }
}

/// The index in the tenant of the document `doc_id` names: a docx token or URL, or a wiki
/// node's token or URL.
fn document_index(tenant: &Tenant, doc_id: &str) -> Result<usize, ToolError> {
    let (kind, token) = token_of(doc_id);
    if kind.as_deref() == Some("doc") {
        return Err(ToolError::legacy_document());
    }
    let token = tenant
        .wiki_nodes
        .iter()
        .find(|n| n.node_token == token)
        .map_or(token, |n| n.obj_token.clone());
    tenant
        .documents
        .iter()
        .position(|d| d.document_id == token)
        .ok_or_else(|| ToolError::not_found(format!("document {doc_id} not found")))
}

fn doc_url(lark: bool, kind: &str, token: &str) -> String {
    let host = if lark {
        "demo-corp.larksuite.com"
    } else {
        "demo-corp.feishu.cn"
    };
    format!("https://{host}/{kind}/{token}")
}

fn new_block_id() -> String {
    random_token("doxcn", 22)
}

/// `create-doc`: `markdown`, `title`?, and at most one of `folder_token`, `wiki_node`,
/// `wiki_space` (`my_library` is the user's own library).
fn create_doc(state: &mut EmulatorState, args: &JsonObject, lark: bool) -> ToolResult {
    let markdown =
        text(args, "markdown")?.ok_or_else(|| ToolError::invalid("markdown is required"))?;
    let title = title(args, "title")?.unwrap_or_default();
    let folder = text(args, "folder_token")?.filter(|s| !s.is_empty());
    let wiki_node = text(args, "wiki_node")?.filter(|s| !s.is_empty());
    let wiki_space = text(args, "wiki_space")?.filter(|s| !s.is_empty());
    if [folder, wiki_node, wiki_space].iter().flatten().count() > 1 {
        return Err(ToolError::invalid(
            "folder_token, wiki_node and wiki_space are mutually exclusive",
        ));
    }
    let now = state.api.now_ms() / 1000;
    let tenant = &mut state.api.tenant;
    let owner = tenant
        .people
        .first()
        .map(|p| p.open_id.clone())
        .unwrap_or_default();
    let space = match (wiki_node, wiki_space) {
        (Some(node), _) => {
            let token = token_of(node).1;
            let node = tenant.wiki_nodes.iter().find(|n| n.node_token == token);
            Some(
                node.ok_or_else(|| ToolError::not_found(format!("wiki node {token} not found")))?
                    .space_id
                    .clone(),
            )
        }
        (None, Some("my_library")) => Some(MY_LIBRARY_SPACE.to_owned()),
        (None, Some(space)) => {
            if !tenant.wiki_nodes.iter().any(|n| n.space_id == space) && space != MY_LIBRARY_SPACE {
                return Err(ToolError::not_found(format!(
                    "wiki space {space} not found"
                )));
            }
            Some(space.to_owned())
        }
        (None, None) => None,
    };
    let folder = match space {
        Some(_) => None,
        None => Some(resolve_folder(tenant, folder).map_err(|e| ToolError::not_found(e.msg()))?),
    };
    let document_id = add_document(tenant, &title, folder, now);
    let blocks = markdown_to_blocks(markdown, &mut new_block_id);
    if let Some(document) = tenant
        .documents
        .iter_mut()
        .find(|d| d.document_id == document_id)
    {
        document.blocks = blocks;
    }
    let url = match space {
        None => doc_url(lark, "docx", &document_id),
        Some(space_id) => {
            let node_token = random_token("wikcn", 22);
            tenant.wiki_nodes.push(WikiNode {
                space_id,
                node_token: node_token.clone(),
                obj_token: document_id.clone(),
                title: title.clone(),
                creator: owner,
                created_at: now,
            });
            doc_url(lark, "wiki", &node_token)
        }
    };
    Ok(json!({"doc_id": document_id, "doc_url": url, "message": "文档创建成功"}))
}

/// `fetch-doc`: `doc_id`, `skip_task_detail` (no tasks here to expand), and `offset`/`limit`
/// in characters of the Markdown.
fn fetch_doc(state: &EmulatorState, args: &JsonObject) -> ToolResult {
    let tenant = &state.api.tenant;
    let document = &tenant.documents[document_index(tenant, required(args, "doc_id")?)?];
    let offset = integer(args, "offset", 0)?.unwrap_or(0);
    let limit = integer(args, "limit", 1)?;
    let markdown = Layout::of(&document.blocks).text;
    let total = markdown.chars().count();
    let end = limit.map_or(total, |l| offset.saturating_add(l).min(total));
    let page: String = markdown
        .chars()
        .skip(offset)
        .take(end.saturating_sub(offset))
        .collect();
    Ok(json!({"title": document.title, "markdown": page, "has_more": end < total}))
}

/// The one selection an update names: `selection_with_ellipsis` or `selection_by_title`.
fn selection(args: &JsonObject) -> Result<Selection, ToolError> {
    let ellipsis = text(args, "selection_with_ellipsis")?.filter(|s| !s.is_empty());
    let title = text(args, "selection_by_title")?.filter(|s| !s.trim().is_empty());
    match (ellipsis, title) {
        (Some(e), None) => Ok(Selection::with_ellipsis(e)),
        (None, Some(t)) => Ok(Selection::by_title(t)),
        _ => Err(ToolError::invalid(
            "give exactly one of selection_with_ellipsis and selection_by_title",
        )),
    }
}

/// The single match of a selection that must be unique.
fn unique(found: Vec<Range<usize>>) -> Result<Range<usize>, ToolError> {
    match <[Range<usize>; 1]>::try_from(found) {
        Ok([range]) => Ok(range),
        Err(found) => Err(ToolError::no_match(!found.is_empty(), found.len())),
    }
}

/// `update-doc`: `doc_id`, `mode`, `markdown` (not for `delete_range`), a selection for the
/// modes that need one, and `new_title`?.
fn update_doc(state: &mut EmulatorState, args: &JsonObject) -> ToolResult {
    let doc_id = required(args, "doc_id")?;
    let mode = required(args, "mode")?;
    if !MODES.contains(&mode) {
        return Err(ToolError::invalid(format!(
            "mode must be one of {}",
            MODES.join(", ")
        )));
    }
    let markdown = text(args, "markdown")?;
    // replace_all may replace with nothing (deleting every match); other modes need content.
    let markdown = match (mode, markdown) {
        ("delete_range", _) => "",
        ("replace_all", Some(m)) => m,
        (_, Some(m)) if !m.is_empty() => m,
        _ => {
            return Err(ToolError::invalid(format!(
                "markdown is required in mode {mode}"
            )));
        }
    };
    let new_title = title(args, "new_title")?;
    let now = state.api.now_ms() / 1000;
    let tenant = &mut state.api.tenant;
    let index = document_index(tenant, doc_id)?;
    let document = &mut tenant.documents[index];
    let layout = Layout::of(&document.blocks);
    let mut replace_count = None;
    match mode {
        "append" => document
            .blocks
            .extend(markdown_to_blocks(markdown, &mut new_block_id)),
        "overwrite" => document.blocks = markdown_to_blocks(markdown, &mut new_block_id),
        "insert_before" | "insert_after" => {
            let range = unique(layout.find(&selection(args)?))?;
            let at = layout.insertion_point(&range, mode == "insert_after");
            let new = markdown_to_blocks(markdown, &mut new_block_id);
            document.blocks.splice(at..at, new);
        }
        _ => {
            let found = layout.find(&selection(args)?);
            let ranges = if mode == "replace_all" {
                if found.is_empty() {
                    return Err(ToolError::no_match(false, 0));
                }
                replace_count = Some(found.len());
                found
            } else {
                vec![unique(found)?]
            };
            let edits = ranges
                .into_iter()
                .map(|r| (r, markdown.to_owned()))
                .collect();
            layout.apply(&mut document.blocks, edits, &mut new_block_id);
        }
    }
    if let Some(title) = new_title {
        document.title.clone_from(&title);
        if let Some(file) = tenant
            .files
            .iter_mut()
            .find(|f| f.token == tenant.documents[index].document_id)
        {
            file.name = title;
            file.modified_at = now;
        }
    }
    let document = &mut tenant.documents[index];
    document.revision_id += 1;
    document.updated_at = now;
    let mut answer = json!({
        "success": true,
        "doc_id": document.document_id,
        "mode": mode,
        "message": format!("文档更新成功（{mode}模式）"),
        "warnings": [],
        "log_id": new_logid(),
    });
    if let Some(count) = replace_count {
        answer["replace_count"] = json!(count);
    }
    Ok(answer)
}

/// `locate-doc`: `doc_id`, `selection_with_ellipsis`, `limit`?: the blocks each match touches.
fn locate_doc(state: &EmulatorState, args: &JsonObject) -> ToolResult {
    let tenant = &state.api.tenant;
    let document = &tenant.documents[document_index(tenant, required(args, "doc_id")?)?];
    let selection = Selection::with_ellipsis(required(args, "selection_with_ellipsis")?);
    let limit = integer(args, "limit", 1)?.unwrap_or(DEFAULT_LOCATE_LIMIT);
    let layout = Layout::of(&document.blocks);
    let found = layout.find(&selection);
    let matches: Vec<Value> = found
        .iter()
        .take(limit)
        .map(|range| {
            let blocks: Vec<Value> = layout
                .blocks_of(range)
                .into_iter()
                .filter_map(|(i, md)| document.blocks.get(i).map(|b| (b, md)))
                .map(|(b, md)| json!({"block_id": b.block_id, "raw_markdown": md}))
                .collect();
            json!({
                "anchor_block_id": blocks.first().map(|b| b["block_id"].clone()),
                "parent_block_id": document.document_id,
                "blocks": blocks,
            })
        })
        .collect();
    Ok(json!({"match_count": found.len(), "matches": matches}))
}
