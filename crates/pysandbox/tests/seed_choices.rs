//! What the runtime does where the seed is ambiguous (documented in the crate's "Where the seed
//! leaves a choice"), and where the seed is explicit but Google's offline library differs: each
//! test pins one choice, so that changing it is deliberate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agent::{CustomizedResponse, Part};
use common::run_tool;
use serde_json::json;

async fn run(body: &str) -> serde_json::Value {
    let mut source = String::from("def probe():\n");
    for line in body.lines() {
        source.push_str("    ");
        source.push_str(line);
        source.push('\n');
    }
    let (run, _) = run_tool(&source, "probe", json!({}), json!({})).await;
    run.unwrap().value
}

#[tokio::test]
async fn from_inline_data_takes_the_raw_bytes() {
    let value = run(
        r#"part = Part.from_inline_data(data=b"hi", mime_type="text/plain")
assert part.inline_data.raw_data == b"hi", part.inline_data.raw_data
assert part.inline_data.data == b"aGk=", part.inline_data.data
return part"#,
    )
    .await;
    let part: Part = serde_json::from_value(value).unwrap();
    assert_eq!(part, Part::from_inline_data(b"hi".to_vec(), "text/plain"));
}

#[tokio::test]
async fn hiding_a_tool_twice_lists_it_once() {
    let value = run(r#"config = GenerateContentConfig()
config.hide_tool("send")
config.hide_tool("send")
config.hide_tool("delete")
return config.excluded_tools"#)
    .await;
    assert_eq!(value, json!(["send", "delete"]));
}

#[tokio::test]
async fn a_customized_response_is_a_call_of_the_engines_function_and_needs_content() {
    let value = run(r#"try:
    Part.from_customized_response()
    raise AssertionError("content was not required")
except TypeError:
    pass
part = Part.from_customized_response(content="Press 1", disable_barge_in=True)
assert part.function_call.name == "customized_response" and part.inline_data is None
return part"#)
    .await;
    let part: Part = serde_json::from_value(value).unwrap();
    let mut expected = CustomizedResponse::new("Press 1");
    expected.disable_barge_in = true;
    assert_eq!(part, Part::from_customized_response(expected));
}

#[tokio::test]
async fn the_seed_is_followed_where_it_is_explicit() {
    let value = run(r#"try:
    Part(text="a", function_call=FunctionCall(name="f", args={}))
    raise AssertionError("two fields were accepted")
except ValueError:
    pass
actions = EventActions()
flags = [actions.skip_summarization, actions.escalate, actions.end_invocation]
user = Event(author="user")
return {"flags": flags, "user_is_agent": user.is_agent("user"), "agent": Event(author="a").is_agent()}"#)
    .await;
    assert_eq!(
        value,
        json!({"flags": [false, false, false], "user_is_agent": false, "agent": true})
    );
}
