//! An Anthropic Messages request read as the OpenAI-shaped message list the script's matcher
//! knows (the parent module tells the mapping), so one script answers both APIs.

use serde_json::{Value, json};

/// The request's conversation as the OpenAI-shaped messages the matcher reads.
pub(super) fn to_chat(body: &Value) -> Vec<Value> {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Claude Code sends its environment notes as `system` messages inside `messages`, after the
    // user's: they are instructions, not turns, so they join the system prompt and the last
    // message stays the conversation's last turn, which is what steps match.
    let system: Vec<String> = std::iter::once(text_of(&body["system"]))
        .chain(
            messages
                .iter()
                .filter(|m| m["role"] == "system")
                .map(|m| text_of(&m["content"])),
        )
        .filter(|text| !text.is_empty())
        .collect();
    let mut chat = Vec::new();
    if !system.is_empty() {
        chat.push(json!({"role": "system", "content": system.join("\n")}));
    }
    for message in messages.iter().filter(|m| m["role"] != "system") {
        let blocks = blocks(&message["content"]);
        if message["role"] == "assistant" {
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| {
                    json!({"id": b["id"], "type": "function",
                           "function": {"name": b["name"], "arguments": b["input"].to_string()}})
                })
                .collect();
            let text = text_of(&Value::Array(blocks));
            let mut out = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            chat.push(out);
            continue;
        }
        for result in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let mut out = json!({"role": "tool", "tool_call_id": result["tool_use_id"],
                                 "content": text_of(&result["content"])});
            if result["is_error"] == true {
                out["is_error"] = json!(true);
            }
            chat.push(out);
        }
        let text = text_of(&Value::Array(blocks.clone()));
        let only_results = !blocks.is_empty() && blocks.iter().all(|b| b["type"] == "tool_result");
        if !only_results {
            chat.push(json!({"role": "user", "content": text}));
        }
    }
    chat
}

/// A message's content as blocks: a string is one text block.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    }
}

/// The text of a string, or of the text blocks of a block list, one block a line.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_conversation_reads_as_the_matcher_knows_it() {
        let body = json!({
            "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                             {"type": "text", "text": "run it"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Running."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                    "content": [{"type": "text", "text": "not on the list"}]}]},
                {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "done"},
                                             {"type": "text", "text": "and now?"}]},
            ],
        });
        assert_eq!(
            to_chat(&body),
            vec![
                json!({"role": "system", "content": "You are Claude Code.\nBe brief.\n# Environment"}),
                json!({"role": "user", "content": "<system-reminder>x</system-reminder>\nrun it"}),
                json!({"role": "assistant", "content": "Running.", "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}]}),
                json!({"role": "tool", "tool_call_id": "toolu_1", "content": "not on the list", "is_error": true}),
                json!({"role": "assistant", "content": "ok"}),
                json!({"role": "tool", "tool_call_id": "toolu_2", "content": "done"}),
                json!({"role": "user", "content": "and now?"}),
            ]
        );
    }
}
