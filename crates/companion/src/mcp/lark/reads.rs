//! Which of lark-mcp's tools only read. Its tools carry no MCP annotations, and the app would not
//! take a server's word for it anyway: a tool reads only when the Feishu API it calls says so by
//! its HTTP method and path, from lark-mcp's own tool definitions (`tools.tsv`, written by
//! `scripts/lark-mcp-tools` from its `dist/mcp-tool/tools`):
//!
//! - `GET`: a read, by HTTP's rules and Feishu's (every change goes by another method);
//! - `POST` to an action whose last path segment is a search or a listing (`…/records/search`,
//!   `…/batch_get`, `…/freebusy/list`), and whose SDK method is that same action
//!   (`appTableRecord.search`): Feishu takes a POST there only for the size of the query.
//!   The second condition keeps out a write that lands on such a path (`spreadsheetSheetFilter.create`
//!   is `POST …/filter`);
//! - everything else is held for the user's approval, an unknown tool included.
//!
//! The built-in tools have no method or path in their definitions; [`BUILTIN_READS`] names the
//! one whose handler only searches.

use std::collections::BTreeSet;

/// lark-mcp's tools and presets, as its 0.5.1 defines them.
const TOOLS: &str = include_str!("tools.tsv");

/// Last path segments of POST endpoints that only search, query, list or fetch by ids.
const READ_ACTIONS: &[&str] = &[
    "search",
    "query",
    "list",
    "filter",
    "match",
    "mget",
    "batch_get",
    "batch_query",
    "batch_get_id",
];

/// Built-in tools that only read: `docx.builtin.search` POSTs a query to
/// `/open-apis/suite/docs-api/search/object` (Feishu's document search) and nothing else.
const BUILTIN_READS: &[&str] = &["docx.builtin.search"];

/// The tools the preset's switch turns on: the default preset plus creating a document.
pub(crate) const DEFAULT_TOOLS: &str = "preset.default,docx.v1.document.create";

/// One tool of lark-mcp: its dot-form name and the API it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
}

/// Every tool lark-mcp defines.
pub(crate) fn tools() -> impl Iterator<Item = ToolDef> {
    TOOLS.lines().filter_map(|line| {
        let mut cells = line.split('\t');
        (cells.next()? == "tool").then_some(())?;
        Some(ToolDef {
            name: cells.next()?,
            method: cells.next().unwrap_or_default(),
            path: cells.next().unwrap_or_default(),
        })
    })
}

/// The tools of `preset`, if it is one.
fn preset(name: &str) -> Option<Vec<&'static str>> {
    let tools: Vec<&'static str> = TOOLS
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('\t');
            (cells.next()? == "preset" && cells.next()? == name).then_some(())?;
            cells.next()
        })
        .collect();
    (!tools.is_empty()).then_some(tools)
}

/// `appTableRecord` → `app_table_record`: how Feishu's paths spell an SDK method.
fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `tool` only reads (see the module's rules).
pub(crate) fn is_read(tool: &ToolDef) -> bool {
    match tool.method {
        "GET" => true,
        "POST" => {
            let action = tool.path.rsplit('/').next().unwrap_or_default();
            let method = tool.name.rsplit('.').next().unwrap_or_default();
            READ_ACTIONS.contains(&action) && snake(method) == action
        }
        "" => BUILTIN_READS.contains(&tool.name),
        _ => false,
    }
}

/// Why a `-t` selection cannot be used: the names it holds that are neither a tool nor a preset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lark-mcp knows no tool or preset {}", .0.join(", "))]
pub(crate) struct UnknownTools(pub(crate) Vec<String>);

/// The dot-form tools a `-t` selection (names and presets, split by commas or spaces) turns on.
pub(crate) fn expand(selection: &str) -> Result<BTreeSet<&'static str>, UnknownTools> {
    let known: Vec<ToolDef> = tools().collect();
    let mut chosen = BTreeSet::new();
    let mut unknown = Vec::new();
    for item in selection.split([',', ' ']).filter(|s| !s.is_empty()) {
        if let Some(tools) = preset(item) {
            chosen.extend(tools);
        } else if let Some(tool) = known.iter().find(|t| t.name == item) {
            chosen.insert(tool.name);
        } else {
            unknown.push(item.to_owned());
        }
    }
    if unknown.is_empty() {
        Ok(chosen)
    } else {
        Err(UnknownTools(unknown))
    }
}

/// The tools of `selection` that only read, as the server names them (snake case: `.` → `_`),
/// for the server's `read_tools`.
pub(crate) fn read_tools(selection: &str) -> Result<Vec<String>, UnknownTools> {
    let chosen = expand(selection)?;
    Ok(tools()
        .filter(|t| chosen.contains(t.name) && is_read(t))
        .map(|t| t.name.replace('.', "_"))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn def(name: &str) -> ToolDef {
        tools().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn the_real_tool_list_is_classified_by_method_and_path() {
        let all: Vec<ToolDef> = tools().collect();
        assert_eq!(all.len(), 1274, "lark-mcp 0.5.1's tools");
        let reads: Vec<&ToolDef> = all.iter().filter(|t| is_read(t)).collect();
        // Nothing that changes by its method is a read, and every POST read is a search-like
        // action named like its SDK method.
        for t in &reads {
            assert!(matches!(t.method, "GET" | "POST" | ""), "{t:?}");
        }
        let gets = all.iter().filter(|t| t.method == "GET").count();
        assert_eq!(gets, 435);
        let posts = reads.iter().filter(|t| t.method == "POST").count();
        assert!((80..140).contains(&posts), "{posts} POST reads");
        for read in [
            "bitable.v1.appTableRecord.search",
            "bitable.v1.appTable.list",
            "bitable.v1.appTableField.list",
            "bitable.v1.appTableRecord.batchGet",
            "contact.v3.user.batchGetId",
            "calendar.v4.freebusy.list",
            "wiki.v1.node.search",
            "docx.v1.document.rawContent",
            "docx.builtin.search",
        ] {
            assert!(is_read(&def(read)), "{read}");
        }
        for write in [
            "bitable.v1.appTableRecord.create",
            "bitable.v1.appTableRecord.update",
            "bitable.v1.appTableRecord.delete",
            "bitable.v1.app.create",
            "docx.v1.document.create",
            "docx.builtin.import",
            "im.v1.message.create",
            "im.builtin.batchSend",
            // POST …/filter, but it creates a filter.
            "sheets.v3.spreadsheetSheetFilter.create",
            // POST …/search, but its method is another: held rather than guessed.
            "hire.v1.jobRequirement.listById",
        ] {
            assert!(!is_read(&def(write)), "{write}");
        }
    }

    #[test]
    fn the_default_selection_reads_what_the_api_says() {
        let reads = read_tools(DEFAULT_TOOLS).unwrap();
        assert_eq!(
            reads,
            [
                "bitable_v1_appTableField_list",
                "bitable_v1_appTable_list",
                "bitable_v1_appTableRecord_search",
                "contact_v3_user_batchGetId",
                "docx_v1_document_rawContent",
                "im_v1_chat_list",
                "im_v1_chatMembers_get",
                "im_v1_message_list",
                "wiki_v1_node_search",
                "wiki_v2_space_getNode",
                "docx_builtin_search",
            ]
        );
        let all = expand(DEFAULT_TOOLS).unwrap();
        assert!(all.contains("docx.v1.document.create"));
        assert!(all.contains("bitable.v1.appTableRecord.create"));
        assert_eq!(
            expand("preset.nope, bitable.v1.app.create x").unwrap_err(),
            UnknownTools(vec!["preset.nope".into(), "x".into()])
        );
    }
}
