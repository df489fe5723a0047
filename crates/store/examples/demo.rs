//! The engine demo that `scripts/run` starts until the desktop app exists: a short conversation
//! with a tool call is written through the data model into SQLite, read back and printed.
//!
//! Usage: `demo [DATABASE]` — without a path the database goes in a temporary folder.
#![allow(clippy::print_stdout)]

use agent::{
    Content, Event, EventActions, FunctionCall, FunctionResponse, Part, StateMap, ToolOutcome,
    ToolResult, coerce_tool_result,
};
use anyhow::Context as _;
use serde_json::json;
use store::Store;

fn main() -> anyhow::Result<()> {
    let temp = tempfile::tempdir().context("cannot create a temporary folder")?;
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| temp.path().join("demo.db"), std::path::PathBuf::from);
    let store = Store::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let session = store.create_session("feishu-companion", "demo-user", None, &StateMap::new())?;

    let args = json!({"start": "2026-12-01", "end": "2026-12-01"});
    let call = FunctionCall {
        id: Some("call-1".to_owned()),
        ..FunctionCall::new(
            "list_calendar_events",
            args.as_object().cloned().unwrap_or_default(),
        )
    };
    // The tool needs a permission the user has not granted yet: the engine will show an auth card.
    let needs_auth = ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content("需要日历读取权限 / calendar read permission needed")
        .with_auth_scopes(["calendar:calendar:readonly"]);
    let (text, is_error, _) = coerce_tool_result(needs_auth);
    let response = if is_error {
        FunctionResponse::from_error(&call.name, text)
    } else {
        FunctionResponse::from_output(&call.name, text)
    };

    let events = [
        Event::new("inv-1", "user").with_content(Content::user_text("明天我有哪些会？")),
        Event::new("inv-1", "assistant")
            .with_content(Content::new("model", vec![Part::FunctionCall(call)])),
        Event::new("inv-1", "assistant")
            .with_content(Content::new(
                "user",
                vec![Part::FunctionResponse(response.with_id("call-1"))],
            ))
            .with_actions(EventActions {
                state_delta: json!({"user:language": "zh-CN", "temp:draft": "not stored"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                ..EventActions::default()
            }),
    ];
    for (i, event) in events.iter().enumerate() {
        store.append_event(&session.id, i as u64, event)?;
    }

    let loaded = store.load_session(&session.id)?;
    println!("Feishu Companion — engine demo / 引擎演示");
    println!("database: {}", path.display());
    println!(
        "session {} · {} events",
        loaded.meta.id, loaded.meta.last_seq
    );
    for (seq, event) in loaded.events.iter().enumerate() {
        for part in event.parts() {
            let shown = match part {
                Part::Text(text) => text.clone(),
                Part::FunctionCall(call) => format!(
                    "→ {}({})",
                    call.name,
                    serde_json::Value::Object(call.args.clone())
                ),
                Part::FunctionResponse(r) => format!(
                    "← {}: {}",
                    r.name,
                    serde_json::Value::Object(r.response.clone())
                ),
                Part::InlineData(blob) => format!("[{} bytes]", blob.raw_data.len()),
                Part::Reasoning(r) => format!("(thinking) {}", r.text),
            };
            println!("  #{} {:<9} {shown}", seq + 1, event.author);
        }
    }
    println!("state: {}", serde_json::Value::Object(loaded.state));
    println!("integrity_check: {}", store.integrity_check()?);
    Ok(())
}
