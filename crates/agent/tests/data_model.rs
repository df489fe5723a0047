//! Integration tests of the runtime data model (seed `python-runtime-reference`) and the
//! tool-outcome contract (seed `feishu-agent-result`): wire shapes, round trips, every method, and
//! errors that name the failing field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use agent::content::{CUSTOMIZED_RESPONSE, END_SESSION, TRANSFER_TO_AGENT};
use agent::http::UnknownMethod;
use agent::state::{SESSION_VARIABLE, apply_delta, persisted_delta};
use agent::{
    Blob, CallbackContext, Content, CustomizedResponse, DataError, Event, EventActions,
    ExternalResponse, FunctionCall, FunctionDeclaration, FunctionResponse, GenerateContentConfig,
    HttpMethod, LlmRequest, LlmResponse, Part, ROLE_MODEL, ROLE_USER, SessionInfo, StateMap,
    StateScope, StatusError, Tool, ToolContext, ToolDeclaration, ToolOutcome, ToolResult,
    USER_AUTHOR, coerce_tool_result, now_millis,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The object of a `json!({...})` literal.
fn obj(value: Value) -> StateMap {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Serialises `value`, reads it back both with plain serde_json and with `agent::json`, checks
/// both equal the original, and returns the wire form for shape assertions.
fn round_trip<T>(value: &T) -> Value
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value, "serde_json round trip of {text}");
    let back: T = agent::json::from_str(&text).unwrap();
    assert_eq!(&back, value, "agent::json round trip of {text}");
    let wire: Value = serde_json::from_str(&text).unwrap();
    let back: T = agent::json::from_value(wire.clone()).unwrap();
    assert_eq!(&back, value, "agent::json::from_value round trip of {text}");
    wire
}

/// The keys of a JSON object, in order.
fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn parse_err<T: DeserializeOwned + Debug>(value: Value) -> DataError {
    let text = value.to_string();
    let err = agent::json::from_str::<T>(&text).expect_err("the document should be rejected");
    // The same failure when reading from an already-parsed value, with the same path.
    let via_value = agent::json::from_value::<T>(value).expect_err("rejected as a value too");
    assert_eq!(via_value.path, err.path, "from_value and from_str disagree");
    err
}

fn user_event(text: &str) -> Event {
    Event::new("inv-1", USER_AUTHOR).with_content(Content::user_text(text))
}

fn agent_event(agent: &str, text: &str) -> Event {
    Event::new("inv-1", agent).with_content(Content::model_text(text))
}

fn partial(mut event: Event) -> Event {
    event.partial = true;
    event
}

fn texts(parts: &[Part]) -> Vec<&str> {
    parts
        .iter()
        .map(|p| p.text().expect("a text part"))
        .collect()
}

fn context(state: StateMap, events: Vec<Event>) -> CallbackContext {
    CallbackContext::new("inv-1", "assistant", "session-1", state, Arc::new(events))
}

fn full_event_actions() -> EventActions {
    EventActions {
        skip_summarization: true,
        state_delta: obj(json!({"city": "杭州", "temp:scratch": 1, "gone": null})),
        artifact_delta: BTreeMap::from([("report.pdf".to_owned(), 3), ("a.png".to_owned(), 0)]),
        transfer_to_agent: Some("billing".to_owned()),
        escalate: true,
        requested_auth_configs: BTreeMap::from([(
            "call-1".to_owned(),
            obj(json!({"scopes": ["calendar:calendar"], "type": "oauth2"})),
        )]),
        end_invocation: true,
    }
}

fn full_event() -> Event {
    Event {
        id: "evt-1".to_owned(),
        invocation_id: "inv-1".to_owned(),
        author: "assistant".to_owned(),
        timestamp: 1_700_000_000_123,
        content: Some(Content::new(
            ROLE_MODEL,
            vec![
                Part::from_text("看一下日程"),
                Part::FunctionCall(FunctionCall {
                    id: Some("call-1".to_owned()),
                    name: "list_events".to_owned(),
                    args: obj(json!({"day": "today"})),
                }),
            ],
        )),
        actions: full_event_actions(),
        long_running_tool_ids: BTreeSet::from(["call-1".to_owned(), "call-2".to_owned()]),
        partial: true,
        turn_complete: true,
        error_code: Some("RATE_LIMITED".to_owned()),
        error_message: Some("slow down".to_owned()),
        interrupted: true,
        branch: Some("root.assistant".to_owned()),
        grounding_metadata: Some(json!({"sources": [{"uri": "https://example.test"}]})),
        finish_reason: Some(agent::FinishReason::MaxTokens),
        usage_metadata: Some(agent::UsageMetadata {
            prompt_token_count: 12,
            candidates_token_count: 34,
            thoughts_token_count: Some(20),
            cached_content_token_count: None,
        }),
        retry_after_ms: Some(30_000),
    }
}

fn sample_config() -> GenerateContentConfig {
    GenerateContentConfig {
        system_instruction: Some(Content::new(
            "system",
            vec![Part::from_text("回答时请尽可能简明扼要")],
        )),
        tools: vec![
            ToolDeclaration {
                function_declarations: vec![
                    FunctionDeclaration::new(
                        "send_message",
                        "Send a Feishu message",
                        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                    ),
                    FunctionDeclaration::new("list_events", "List events", json!({})),
                ],
            },
            ToolDeclaration {
                function_declarations: vec![FunctionDeclaration {
                    name: "search_docs".to_owned(),
                    description: None,
                    parameters: None,
                }],
            },
        ],
        excluded_tools: vec!["delete_event".to_owned()],
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips and wire shapes
// ---------------------------------------------------------------------------------------------

#[test]
fn blob_round_trips_with_data_as_base64_of_the_raw_bytes() {
    let blob = Blob {
        display_name: Some("voice.ogg".to_owned()),
        mime_type: Some("audio/ogg".to_owned()),
        raw_data: vec![0, 159, 146, 150, 255],
        cached_transcript: Some("你好".to_owned()),
    };
    let wire = round_trip(&blob);
    assert_eq!(
        wire,
        json!({
            "display_name": "voice.ogg",
            "mime_type": "audio/ogg",
            "data": "AJ+Slv8=",
            "transcript": "你好",
        })
    );
    // No `raw_data` key on the wire: the bytes travel only as base64 `data`.
    assert!(wire.get("raw_data").is_none());
}

#[test]
fn blob_with_nothing_set_is_an_empty_object_on_the_wire() {
    assert_eq!(round_trip(&Blob::default()), json!({}));
    let from_empty_data: Blob = agent::json::from_str(r#"{"data":""}"#).unwrap();
    assert_eq!(from_empty_data, Blob::default());
    let text_blob = Blob::from_bytes(b"hello world".to_vec(), "text/plain");
    assert_eq!(
        round_trip(&text_blob),
        json!({"mime_type": "text/plain", "data": "aGVsbG8gd29ybGQ="})
    );
}

#[test]
fn text_part_is_just_text_on_the_wire() {
    assert_eq!(round_trip(&Part::from_text("hi")), json!({"text": "hi"}));
    // An empty string is still a text part, not "no kind".
    assert_eq!(round_trip(&Part::from_text("")), json!({"text": ""}));
}

#[test]
fn function_call_part_wire_shape_omits_a_missing_id() {
    let part = Part::from_function_call(
        "get_weather",
        obj(json!({"location": "Mountain View", "days": 3})),
    );
    assert_eq!(
        round_trip(&part),
        json!({"function_call": {"name": "get_weather", "args": {"location": "Mountain View", "days": 3}}})
    );

    let with_id = Part::FunctionCall(FunctionCall {
        id: Some("call-7".to_owned()),
        name: "f".to_owned(),
        args: StateMap::new(),
    });
    assert_eq!(
        round_trip(&with_id),
        json!({"function_call": {"id": "call-7", "name": "f", "args": {}}})
    );

    // `args` may be left out and then reads as no arguments.
    let no_args: Part = agent::json::from_str(r#"{"function_call":{"name":"f"}}"#).unwrap();
    assert_eq!(no_args, Part::from_function_call("f", StateMap::new()));
}

#[test]
fn function_response_part_wire_shape() {
    let part = Part::FunctionResponse(
        FunctionResponse::from_output("list_events", json!(["周会"])).with_id("call-1"),
    );
    assert_eq!(
        round_trip(&part),
        json!({"function_response": {"id": "call-1", "name": "list_events", "response": {"output": ["周会"]}}})
    );
    let no_response: Part = agent::json::from_str(r#"{"function_response":{"name":"f"}}"#).unwrap();
    assert_eq!(
        no_response,
        Part::from_function_response("f", StateMap::new())
    );
}

#[test]
fn inline_data_part_wire_shape() {
    let part = Part::from_inline_data(b"hello world".to_vec(), "text/plain");
    assert_eq!(
        round_trip(&part),
        json!({"inline_data": {"mime_type": "text/plain", "data": "aGVsbG8gd29ybGQ="}})
    );
}

#[test]
fn every_part_kind_round_trips_with_its_accessor() {
    let parts = [
        Part::from_text("t"),
        Part::from_function_call("c", obj(json!({"a": [1, {"b": null}]}))),
        Part::from_function_response("r", obj(json!({"error": "boom"}))),
        Part::from_inline_data(vec![1, 2, 3], "application/octet-stream"),
    ];
    for part in &parts {
        let wire = round_trip(part);
        assert_eq!(
            wire.as_object().unwrap().len(),
            1,
            "one kind on the wire: {wire}"
        );
    }
    let kinds: Vec<_> = parts
        .iter()
        .map(|p| keys(&json!(p))[0].to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["text", "function_call", "function_response", "inline_data"]
    );
}

#[test]
fn function_call_and_function_response_round_trip_on_their_own() {
    let call = FunctionCall {
        id: Some("c1".to_owned()),
        name: "send_message".to_owned(),
        args: obj(json!({"text": "你好", "to": ["a", "b"], "urgent": true})),
    };
    assert_eq!(keys(&round_trip(&call)), ["id", "name", "args"]);
    assert_eq!(
        round_trip(&FunctionCall::new("f", StateMap::new())),
        json!({"name": "f", "args": {}})
    );

    let response = FunctionResponse::from_error("send_message", json!({"code": 403})).with_id("c1");
    assert_eq!(
        round_trip(&response),
        json!({"id": "c1", "name": "send_message", "response": {"error": {"code": 403}}})
    );
}

#[test]
fn content_round_trips_and_omits_a_missing_role() {
    let content = Content::new(
        ROLE_USER,
        vec![
            Part::from_text("a"),
            Part::from_inline_data(b"x".to_vec(), "image/png"),
        ],
    );
    assert_eq!(
        round_trip(&content),
        json!({"parts": [{"text": "a"}, {"inline_data": {"mime_type": "image/png", "data": "eA=="}}], "role": "user"})
    );
    assert_eq!(round_trip(&Content::default()), json!({"parts": []}));
    let empty: Content = agent::json::from_str("{}").unwrap();
    assert_eq!(empty, Content::default());
}

#[test]
fn event_with_every_field_set_round_trips_with_snake_case_keys() {
    let event = full_event();
    let wire = round_trip(&event);
    assert_eq!(
        keys(&wire),
        [
            "id",
            "invocation_id",
            "author",
            "timestamp",
            "content",
            "actions",
            "long_running_tool_ids",
            "partial",
            "turn_complete",
            "error_code",
            "error_message",
            "interrupted",
            "branch",
            "grounding_metadata",
            "finish_reason",
            "usage_metadata",
            "retry_after_ms",
        ]
    );
    assert_eq!(wire["finish_reason"], json!("max_tokens"));
    assert_eq!(wire["timestamp"], json!(1_700_000_000_123_i64));
    assert_eq!(wire["long_running_tool_ids"], json!(["call-1", "call-2"]));
    assert_eq!(wire["content"]["role"], json!("model"));
    assert_eq!(
        wire["content"]["parts"][1],
        json!({"function_call": {"id": "call-1", "name": "list_events", "args": {"day": "today"}}})
    );
}

#[test]
fn minimal_event_round_trips_and_omits_every_default() {
    let event = Event {
        id: "e".to_owned(),
        invocation_id: "i".to_owned(),
        author: "user".to_owned(),
        timestamp: 0,
        content: None,
        actions: EventActions::default(),
        long_running_tool_ids: BTreeSet::new(),
        partial: false,
        turn_complete: false,
        error_code: None,
        error_message: None,
        interrupted: false,
        branch: None,
        grounding_metadata: None,
        finish_reason: None,
        usage_metadata: None,
        retry_after_ms: None,
    };
    assert_eq!(
        round_trip(&event),
        json!({"id": "e", "invocation_id": "i", "author": "user", "timestamp": 0})
    );
    // And an `Event::new` reads back equal too (fresh id and timestamp are just data).
    let fresh = Event::new("inv", "assistant");
    assert_eq!(
        keys(&round_trip(&fresh)),
        ["id", "invocation_id", "author", "timestamp"]
    );
}

#[test]
fn event_actions_with_every_field_round_trip() {
    let actions = full_event_actions();
    let wire = round_trip(&actions);
    assert_eq!(
        keys(&wire),
        [
            "skip_summarization",
            "state_delta",
            "artifact_delta",
            "transfer_to_agent",
            "escalate",
            "requested_auth_configs",
            "end_invocation",
        ]
    );
    // A `null` in a delta means removal and must survive the trip as `null`, not vanish.
    assert_eq!(wire["state_delta"]["gone"], Value::Null);
    assert!(actions.state_delta.contains_key("gone"));
    assert_eq!(wire["artifact_delta"], json!({"a.png": 0, "report.pdf": 3}));
    assert_eq!(
        wire["requested_auth_configs"]["call-1"]["scopes"],
        json!(["calendar:calendar"])
    );

    assert!(EventActions::default().is_empty());
    assert!(!actions.is_empty());
    assert_eq!(round_trip(&EventActions::default()), json!({}));
}

#[test]
fn llm_request_and_config_round_trip() {
    let request = LlmRequest {
        model: Some("gemini-2.5-flash".to_owned()),
        contents: vec![
            Content::user_text("明天有什么会？"),
            Content::model_text("我查一下"),
        ]
        .into(),
        config: Some(sample_config()),
    };
    let wire = round_trip(&request);
    assert_eq!(keys(&wire), ["model", "contents", "config"]);
    assert_eq!(
        keys(&wire["config"]),
        ["system_instruction", "tools", "excluded_tools"]
    );
    assert_eq!(
        wire["config"]["tools"][1],
        json!({"function_declarations": [{"name": "search_docs"}]})
    );
    assert_eq!(wire["config"]["excluded_tools"], json!(["delete_event"]));

    assert_eq!(round_trip(&LlmRequest::default()), json!({"contents": []}));
    assert_eq!(round_trip(&GenerateContentConfig::default()), json!({}));
    round_trip(&sample_config());
}

#[test]
fn llm_response_round_trips_with_and_without_partial() {
    let response = LlmResponse::from_parts(vec![Part::from_text("hello world")]);
    assert_eq!(
        round_trip(&response),
        json!({"content": {"parts": [{"text": "hello world"}], "role": "model"}})
    );
    let chunk = LlmResponse {
        partial: Some(true),
        ..response.clone()
    };
    assert_eq!(round_trip(&chunk)["partial"], json!(true));
    let done = LlmResponse {
        partial: Some(false),
        ..response
    };
    assert_eq!(round_trip(&done)["partial"], json!(false));
}

#[test]
fn tool_and_function_declarations_round_trip() {
    let declaration = FunctionDeclaration::new(
        "send_message",
        "Send a message",
        json!({"type": "object", "required": ["text"]}),
    );
    assert_eq!(
        round_trip(&declaration),
        json!({"name": "send_message", "description": "Send a message", "parameters": {"type": "object", "required": ["text"]}})
    );
    let bare: FunctionDeclaration = agent::json::from_str(r#"{"name":"f"}"#).unwrap();
    assert_eq!((bare.description, bare.parameters), (None, None));

    let tool_declaration = ToolDeclaration {
        function_declarations: vec![declaration],
    };
    assert_eq!(
        keys(&round_trip(&tool_declaration)),
        ["function_declarations"]
    );
    assert_eq!(
        round_trip(&ToolDeclaration::default()),
        json!({"function_declarations": []})
    );

    let tool = Tool {
        name: "calendar".to_owned(),
        description: "Reads and writes the Feishu calendar".to_owned(),
    };
    assert_eq!(
        round_trip(&tool),
        json!({"name": "calendar", "description": "Reads and writes the Feishu calendar"})
    );
}

#[test]
fn http_methods_are_uppercase_on_the_wire() {
    let expected = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];
    assert_eq!(HttpMethod::ALL.len(), 7);
    for (method, name) in HttpMethod::ALL.into_iter().zip(expected) {
        assert_eq!(round_trip(&method), json!(name));
        assert_eq!(method.as_str(), name);
        assert_eq!(method.to_string(), name);
    }
    // The wire form is exactly uppercase; leniency is only in `FromStr`.
    assert!(agent::json::from_str::<HttpMethod>(r#""get""#).is_err());
}

#[test]
fn external_response_round_trips_and_reason_defaults_to_empty() {
    let response = ExternalResponse::new(503, "busy").with_reason("Service Unavailable");
    assert_eq!(
        round_trip(&response),
        json!({"text": "busy", "status_code": 503, "reason": "Service Unavailable"})
    );
    let no_reason: ExternalResponse =
        agent::json::from_str(r#"{"text":"{}","status_code":200}"#).unwrap();
    assert_eq!(no_reason, ExternalResponse::new(200, "{}"));
    assert_eq!(no_reason.reason, "");
}

#[test]
fn tool_result_and_every_outcome_round_trip() {
    let wire_names = [
        "completed",
        "failed",
        "blocked",
        "needs_user_auth",
        "cancelled",
        "informational",
    ];
    for (outcome, name) in ToolOutcome::ALL.into_iter().zip(wire_names) {
        assert_eq!(round_trip(&outcome), json!(name));
        let result = ToolResult::new(outcome);
        assert_eq!(
            round_trip(&result),
            json!({"outcome": name, "is_error": false})
        );
    }
    let full = ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content(json!({"需要": ["calendar"]}))
        .with_authorize_url("https://example.test/authorize")
        .with_auth_scopes(["calendar:calendar", "offline_access"])
        .with_is_error(true);
    assert_eq!(
        round_trip(&full),
        json!({
            "outcome": "needs_user_auth",
            "content": {"需要": ["calendar"]},
            "authorize_url": "https://example.test/authorize",
            "auth_scopes": ["calendar:calendar", "offline_access"],
            "is_error": true,
        })
    );
    // The seed's doctest: a COMPLETED result with content is not an error.
    let ok = ToolResult::new(ToolOutcome::Completed).with_content("已列出 3 个日程");
    assert!(!ok.is_error);
    assert_eq!(
        coerce_tool_result(ok.clone()),
        ("已列出 3 个日程".to_owned(), false, Some(ok))
    );
}

// ---------------------------------------------------------------------------------------------
// Blob
// ---------------------------------------------------------------------------------------------

#[test]
fn blob_new_sets_only_the_mime_type() {
    let blob = Blob::new("text/plain");
    assert_eq!(blob.mime_type.as_deref(), Some("text/plain"));
    assert!(blob.raw_data.is_empty());
    assert_eq!(blob.display_name, None);
    assert_eq!(blob.cached_transcript, None);
    assert_eq!(blob.data(), "");
}

#[test]
fn blob_from_bytes_keeps_the_bytes_and_mime_type() {
    let blob = Blob::from_bytes(b"hello world".to_vec(), "text/plain");
    assert_eq!(blob.raw_data, b"hello world");
    assert_eq!(blob.mime_type.as_deref(), Some("text/plain"));
    assert_eq!(blob.data(), "aGVsbG8gd29ybGQ=");
}

#[test]
fn blob_from_json_sets_application_json() {
    let blob = Blob::from_json(r#"{"key": "value"}"#);
    assert_eq!(blob.mime_type.as_deref(), Some("application/json"));
    assert_eq!(blob.raw_data, br#"{"key": "value"}"#);
    assert_eq!(blob.data(), "eyJrZXkiOiAidmFsdWUifQ==");
}

#[test]
fn blob_set_data_decodes_base64_and_keeps_old_bytes_on_error() {
    let mut blob = Blob::new("text/plain");
    blob.set_data("aGVsbG8gd29ybGQ=").unwrap();
    assert_eq!(blob.raw_data, b"hello world");
    assert_eq!(blob.data(), "aGVsbG8gd29ybGQ=");

    assert!(blob.set_data("not base64!").is_err());
    assert_eq!(
        blob.raw_data, b"hello world",
        "a failed set_data changes nothing"
    );

    blob.set_data("").unwrap();
    assert!(blob.raw_data.is_empty());
}

#[test]
fn blob_transcript_is_only_for_audio_mime_types() {
    let mut blob = Blob::from_bytes(vec![1, 2], "audio/wav");
    assert_eq!(blob.transcript(), None, "no cached transcript yet");
    blob.cached_transcript = Some("hello".to_owned());
    assert_eq!(blob.transcript(), Some("hello"));

    for mime in ["text/plain", "video/mp4", "application/audio", "audio"] {
        blob.mime_type = Some(mime.to_owned());
        assert_eq!(blob.transcript(), None, "{mime} is not audio/*");
    }
    blob.mime_type = None;
    assert_eq!(blob.transcript(), None);
}

// ---------------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------------

#[test]
fn content_role_predicates() {
    let user = Content::user_text("hi");
    assert!(user.is_user() && !user.is_model());
    assert_eq!(user.role.as_deref(), Some("user"));
    assert_eq!(user.parts, [Part::from_text("hi")]);

    let model = Content::model_text("hello");
    assert!(model.is_model() && !model.is_user());
    assert_eq!(model.role.as_deref(), Some("model"));

    let none = Content::default();
    assert!(!none.is_user() && !none.is_model());
    // The seed's prose says roles are 'user' or 'agent', but `is_model` checks 'model'.
    let agent_role = Content::new("agent", vec![]);
    assert!(!agent_role.is_user() && !agent_role.is_model());
    // Roles are case-sensitive.
    assert!(!Content::new("User", vec![]).is_user());
}

#[test]
fn content_function_calls_responses_and_text_pick_their_kind_in_order() {
    let content = Content::new(
        ROLE_MODEL,
        vec![
            Part::from_text("Hello, "),
            Part::from_function_call("a", StateMap::new()),
            Part::from_function_response("x", StateMap::new()),
            Part::from_inline_data(b"ignored".to_vec(), "text/plain"),
            Part::from_function_call("b", StateMap::new()),
            Part::from_text("world"),
            Part::from_function_response("y", StateMap::new()),
        ],
    );
    let calls: Vec<_> = content.function_calls().map(|c| c.name.as_str()).collect();
    assert_eq!(calls, ["a", "b"]);
    let responses: Vec<_> = content
        .function_responses()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(responses, ["x", "y"]);
    assert_eq!(content.text(), "Hello, world");

    let empty = Content::default();
    assert_eq!(empty.function_calls().count(), 0);
    assert_eq!(empty.function_responses().count(), 0);
    assert_eq!(empty.text(), "");
}

// ---------------------------------------------------------------------------------------------
// Part
// ---------------------------------------------------------------------------------------------

#[test]
fn part_constructors_build_the_matching_kind() {
    assert_eq!(Part::from_text("x"), Part::Text("x".to_owned()));
    assert_eq!(
        Part::from_function_call("f", obj(json!({"a": 1}))),
        Part::FunctionCall(FunctionCall {
            id: None,
            name: "f".to_owned(),
            args: obj(json!({"a": 1})),
        })
    );
    assert_eq!(
        Part::from_function_response("f", obj(json!({"output": 2}))),
        Part::FunctionResponse(FunctionResponse {
            id: None,
            name: "f".to_owned(),
            response: obj(json!({"output": 2})),
        })
    );
    assert_eq!(
        Part::from_inline_data(vec![9], "image/png"),
        Part::InlineData(Blob::from_bytes(vec![9], "image/png"))
    );
    assert_eq!(
        Part::from_json(r#"{"k":1}"#),
        Part::InlineData(Blob {
            mime_type: Some("application/json".to_owned()),
            raw_data: br#"{"k":1}"#.to_vec(),
            ..Blob::default()
        })
    );
}

#[test]
fn from_agent_transfer_is_a_transfer_to_agent_call_with_agent_name() {
    let part = Part::from_agent_transfer("billing");
    assert_eq!(TRANSFER_TO_AGENT, "transfer_to_agent");
    assert!(part.has_function_call(TRANSFER_TO_AGENT));
    assert_eq!(
        json!(part),
        json!({"function_call": {"name": "transfer_to_agent", "args": {"agent_name": "billing"}}})
    );
}

#[test]
fn from_end_session_carries_reason_and_escalation() {
    assert_eq!(END_SESSION, "end_session");
    let done = Part::from_end_session("user said goodbye", false);
    assert_eq!(
        json!(done),
        json!({"function_call": {"name": "end_session", "args": {"reason": "user said goodbye", "session_escalated": false}}})
    );
    let escalated = Part::from_end_session("needs a human", true);
    assert_eq!(
        escalated.function_call().unwrap().args,
        obj(json!({"reason": "needs a human", "session_escalated": true}))
    );
}

#[test]
fn from_customized_response_uses_the_seeds_defaults_and_overrides() {
    assert_eq!(CUSTOMIZED_RESPONSE, "customized_response");
    let default = Part::from_customized_response(CustomizedResponse::new("请按 1 确认"));
    assert_eq!(
        json!(default),
        json!({"function_call": {"name": "customized_response", "args": {
            "content": "请按 1 确认",
            "disable_barge_in": false,
            "enable_dtmf": false,
            "dtmf_finish_digit": "#",
            "dtmf_endpointing_timeout": 3,
        }}})
    );
    let custom = Part::from_customized_response(CustomizedResponse {
        disable_barge_in: true,
        enable_dtmf: true,
        dtmf_finish_digit: "*".to_owned(),
        dtmf_endpointing_timeout: 10,
        ..CustomizedResponse::new("enter your PIN")
    });
    let call = custom.function_call().unwrap();
    assert_eq!(call.name, CUSTOMIZED_RESPONSE);
    assert_eq!(
        call.args,
        obj(json!({
            "content": "enter your PIN",
            "disable_barge_in": true,
            "enable_dtmf": true,
            "dtmf_finish_digit": "*",
            "dtmf_endpointing_timeout": 10,
        }))
    );
}

#[test]
fn part_accessors_answer_only_for_their_own_kind() {
    let text = Part::from_text("t");
    let call = Part::from_function_call("c", StateMap::new());
    let response = Part::from_function_response("r", StateMap::new());
    let data = Part::from_inline_data(vec![1], "image/png");

    assert_eq!(text.text(), Some("t"));
    assert!(text.function_call().is_none() && text.function_response().is_none());
    assert!(text.inline_data().is_none());

    assert_eq!(call.function_call().map(|c| c.name.as_str()), Some("c"));
    assert!(call.text().is_none() && call.function_response().is_none());
    assert!(call.inline_data().is_none());

    assert_eq!(
        response.function_response().map(|r| r.name.as_str()),
        Some("r")
    );
    assert!(response.text().is_none() && response.function_call().is_none());
    assert!(response.inline_data().is_none());

    assert_eq!(
        data.inline_data().map(|b| b.raw_data.as_slice()),
        Some(&[1u8][..])
    );
    assert!(data.text().is_none() && data.function_call().is_none());
    assert!(data.function_response().is_none());
}

#[test]
fn has_function_call_and_response_match_kind_and_name() {
    let call = Part::from_function_call("get_weather", StateMap::new());
    let response = Part::from_function_response("get_weather", StateMap::new());
    assert!(call.has_function_call("get_weather"));
    assert!(!call.has_function_call("get_time"));
    assert!(!call.has_function_response("get_weather"));
    assert!(response.has_function_response("get_weather"));
    assert!(!response.has_function_response("get_time"));
    assert!(!response.has_function_call("get_weather"));
    let text = Part::from_text("get_weather");
    assert!(!text.has_function_call("get_weather") && !text.has_function_response("get_weather"));
}

#[test]
fn text_or_transcript_prefers_text_then_audio_transcript() {
    assert_eq!(Part::from_text("hi").text_or_transcript(), Some("hi"));

    let mut audio = Blob::from_bytes(vec![1], "audio/ogg");
    audio.cached_transcript = Some("spoken".to_owned());
    assert_eq!(
        Part::InlineData(audio.clone()).text_or_transcript(),
        Some("spoken")
    );

    let mut image = audio;
    image.mime_type = Some("image/png".to_owned());
    assert_eq!(Part::InlineData(image).text_or_transcript(), None);
    assert_eq!(
        Part::from_inline_data(vec![1], "audio/ogg").text_or_transcript(),
        None
    );
    assert_eq!(
        Part::from_function_call("f", StateMap::new()).text_or_transcript(),
        None
    );
    assert_eq!(
        Part::from_function_response("f", StateMap::new()).text_or_transcript(),
        None
    );
}

// ---------------------------------------------------------------------------------------------
// FunctionResponse
// ---------------------------------------------------------------------------------------------

#[test]
fn function_response_from_output_puts_it_under_output() {
    let response = FunctionResponse::from_output("f", json!({"n": 1}));
    assert_eq!(response.name, "f");
    assert_eq!(response.id, None);
    assert_eq!(response.response, obj(json!({"output": {"n": 1}})));
    assert_eq!(response.output(), Some(json!({"n": 1})));
    assert_eq!(response.error(), None);
    // A string output stays a string.
    assert_eq!(
        FunctionResponse::from_output("f", "done").output(),
        Some(json!("done"))
    );
}

#[test]
fn function_response_from_error_has_no_output() {
    let response = FunctionResponse::from_error("f", "permission denied");
    assert_eq!(
        response.response,
        obj(json!({"error": "permission denied"}))
    );
    assert_eq!(response.error(), Some(&json!("permission denied")));
    assert_eq!(response.output(), None);
}

#[test]
fn function_response_without_output_or_error_key_is_all_output() {
    let response = FunctionResponse::new("f", obj(json!({"events": ["周会"], "count": 1})));
    assert_eq!(
        response.output(),
        Some(json!({"events": ["周会"], "count": 1}))
    );
    assert_eq!(response.error(), None);
    assert_eq!(
        FunctionResponse::new("f", StateMap::new()).output(),
        Some(json!({}))
    );
}

#[test]
fn function_response_with_both_keys_reports_each() {
    let response = FunctionResponse::new(
        "f",
        obj(json!({"output": "partial", "error": "timeout", "extra": 1})),
    );
    assert_eq!(response.output(), Some(json!("partial")));
    assert_eq!(response.error(), Some(&json!("timeout")));
    // An explicit null output is still the output, not "the whole response".
    let null_output = FunctionResponse::new("f", obj(json!({"output": null, "x": 1})));
    assert_eq!(null_output.output(), Some(Value::Null));
    assert_eq!(
        FunctionResponse::from_output("f", 1)
            .with_id("call-9")
            .id
            .as_deref(),
        Some("call-9")
    );
}

// ---------------------------------------------------------------------------------------------
// Event
// ---------------------------------------------------------------------------------------------

#[test]
fn event_new_gives_unique_ids_and_the_current_time() {
    let before = now_millis();
    let events: Vec<Event> = (0..200).map(|_| Event::new("inv", "assistant")).collect();
    let after = now_millis();
    let ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "ids must be unique");
    for event in &events {
        assert!(!event.id.is_empty());
        assert!(
            (before..=after).contains(&event.timestamp),
            "{}",
            event.timestamp
        );
        assert_eq!(event.invocation_id, "inv");
        assert_eq!(event.author, "assistant");
        assert!(event.content.is_none() && event.actions.is_empty());
        assert!(!event.partial && !event.turn_complete && !event.interrupted);
        assert!(event.error_code.is_none() && event.branch.is_none());
    }
    // Milliseconds, not seconds: well past 2020-01-01 in ms.
    assert!(before > 1_577_836_800_000);
}

#[test]
fn event_builders_set_content_and_actions() {
    let actions = EventActions {
        escalate: true,
        ..EventActions::default()
    };
    let event = Event::new("i", "a")
        .with_content(Content::model_text("x"))
        .with_actions(actions.clone());
    assert_eq!(event.content, Some(Content::model_text("x")));
    assert_eq!(event.actions, actions);
}

#[test]
fn event_is_user_and_is_agent() {
    let user = user_event("hi");
    assert_eq!(USER_AUTHOR, "user");
    assert!(user.is_user());
    assert!(!user.is_agent(None));
    assert!(!user.is_agent(Some("user")), "the user is never an agent");

    let agent = agent_event("assistant", "hello");
    assert!(!agent.is_user());
    assert!(agent.is_agent(None));
    assert!(agent.is_agent(Some("assistant")));
    assert!(!agent.is_agent(Some("billing")));
    assert!(!agent.is_agent(Some("")));
}

#[test]
fn event_has_error_follows_error_code() {
    let mut event = Event::new("i", "a");
    assert!(!event.has_error());
    event.error_message = Some("message alone is not an error code".to_owned());
    assert!(!event.has_error());
    event.error_code = Some("E".to_owned());
    assert!(event.has_error());
}

#[test]
fn event_parts_is_empty_without_content() {
    let event = Event::new("i", "a");
    assert!(event.parts().is_empty());
    let no_parts = Event::new("i", "a").with_content(Content::new(ROLE_MODEL, vec![]));
    assert!(no_parts.parts().is_empty());
    let two = Event::new("i", "a").with_content(Content::new(
        ROLE_MODEL,
        vec![Part::from_text("a"), Part::from_text("b")],
    ));
    assert_eq!(texts(two.parts()), ["a", "b"]);
}

#[test]
fn event_is_final_response_rules() {
    let text = agent_event("a", "done");
    assert!(text.is_final_response());
    assert!(
        Event::new("i", "a").is_final_response(),
        "no content at all is final"
    );
    assert!(!partial(agent_event("a", "do")).is_final_response());

    let call = Event::new("i", "a").with_content(Content::new(
        ROLE_MODEL,
        vec![
            Part::from_text("let me check"),
            Part::from_function_call("f", StateMap::new()),
        ],
    ));
    assert!(!call.is_final_response(), "a pending call is not final");
    let response = Event::new("i", "a").with_content(Content::new(
        ROLE_USER,
        vec![Part::from_function_response("f", StateMap::new())],
    ));
    assert!(!response.is_final_response());

    let mut skip = response.clone();
    skip.actions.skip_summarization = true;
    assert!(
        skip.is_final_response(),
        "skip_summarization makes it final"
    );

    let mut long_running = call.clone();
    long_running
        .long_running_tool_ids
        .insert("call-1".to_owned());
    assert!(
        long_running.is_final_response(),
        "long-running calls make it final"
    );
    let mut long_running_partial = partial(call);
    long_running_partial
        .long_running_tool_ids
        .insert("c".to_owned());
    assert!(long_running_partial.is_final_response());
}

// ---------------------------------------------------------------------------------------------
// GenerateContentConfig and LlmResponse
// ---------------------------------------------------------------------------------------------

#[test]
fn hide_tool_is_idempotent() {
    let mut config = GenerateContentConfig::default();
    config.hide_tool("send_message");
    config.hide_tool("send_message".to_owned());
    config.hide_tool("delete_event");
    config.hide_tool("send_message");
    assert_eq!(config.excluded_tools, ["send_message", "delete_event"]);
}

#[test]
fn excluded_tools_override_tools_in_visible_declarations() {
    let mut config = sample_config();
    let visible = |c: &GenerateContentConfig| -> Vec<String> {
        c.visible_function_declarations()
            .map(|d| d.name.clone())
            .collect()
    };
    assert_eq!(
        visible(&config),
        ["send_message", "list_events", "search_docs"]
    );
    assert!(config.is_excluded("delete_event"));
    assert!(!config.is_excluded("send_message"));

    config.hide_tool("send_message");
    config.hide_tool("search_docs");
    assert!(config.is_excluded("send_message"));
    assert_eq!(visible(&config), ["list_events"]);
    // The declarations themselves stay; only visibility changes.
    assert_eq!(config.tools[0].function_declarations.len(), 2);
    // Exclusion is by exact name.
    assert!(!config.is_excluded("list_events "));
    assert!(!config.is_excluded("LIST_EVENTS"));
}

#[test]
fn llm_response_from_parts_is_a_complete_model_message() {
    let parts = vec![
        Part::from_text("hello world"),
        Part::from_function_call("f", StateMap::new()),
    ];
    let response = LlmResponse::from_parts(parts.clone());
    assert_eq!(response.content.role.as_deref(), Some(ROLE_MODEL));
    assert!(response.content.is_model());
    assert_eq!(response.content.parts, parts);
    assert_eq!(response.partial, None);
    assert!(!response.is_partial());
    let chunk = LlmResponse {
        partial: Some(true),
        ..response.clone()
    };
    assert!(chunk.is_partial());
    assert!(
        !LlmResponse {
            partial: Some(false),
            ..response
        }
        .is_partial()
    );
}

// ---------------------------------------------------------------------------------------------
// ExternalResponse and HttpMethod
// ---------------------------------------------------------------------------------------------

#[test]
fn external_response_ok_boundary_is_400() {
    for code in [100, 200, 204, 301, 399] {
        let response = ExternalResponse::new(code, "");
        assert!(response.ok(), "{code} is ok");
        assert_eq!(response.raise_for_status(), Ok(()));
    }
    for code in [400, 401, 404, 500, 599] {
        assert!(!ExternalResponse::new(code, "").ok(), "{code} is not ok");
    }
}

#[test]
fn raise_for_status_gives_status_error_with_code_and_reason() {
    let err = ExternalResponse::new(400, "bad")
        .with_reason("Bad Request")
        .raise_for_status()
        .unwrap_err();
    assert_eq!(
        err,
        StatusError {
            status_code: 400,
            reason: "Bad Request".to_owned(),
        }
    );
    assert_eq!(err.to_string(), "status 400: Bad Request");

    let no_reason = ExternalResponse::new(503, "")
        .raise_for_status()
        .unwrap_err();
    assert_eq!(
        (no_reason.status_code, no_reason.reason.as_str()),
        (503, "")
    );
}

#[test]
fn external_response_json_parses_the_text_or_fails() {
    let response = ExternalResponse::new(200, r#"{"items": [1, 2], "名": "值"}"#);
    assert_eq!(
        response.json().unwrap(),
        json!({"items": [1, 2], "名": "值"})
    );
    assert_eq!(ExternalResponse::new(200, "42").json().unwrap(), json!(42));
    // A failed response's body still parses: json() does not look at the status.
    assert_eq!(
        ExternalResponse::new(500, r#"{"error":"x"}"#)
            .json()
            .unwrap()["error"],
        "x"
    );

    for bad in ["<html>", "", "{\"a\":", "{} {}"] {
        let err = ExternalResponse::new(200, bad).json().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("response body is not valid JSON"),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn http_method_parses_case_insensitively() {
    for method in HttpMethod::ALL {
        let upper = method.as_str();
        assert_eq!(upper.parse::<HttpMethod>(), Ok(method));
        assert_eq!(upper.to_lowercase().parse::<HttpMethod>(), Ok(method));
    }
    assert_eq!("gEt".parse::<HttpMethod>(), Ok(HttpMethod::Get));
    assert_eq!("Options".parse::<HttpMethod>(), Ok(HttpMethod::Options));
}

#[test]
fn unknown_http_method_is_an_error_naming_it() {
    let err = "FETCH".parse::<HttpMethod>().unwrap_err();
    assert_eq!(err, UnknownMethod("FETCH".to_owned()));
    let message = err.to_string();
    assert!(message.contains("\"FETCH\""), "{message}");
    assert!(
        message.contains("GET") && message.contains("OPTIONS"),
        "{message}"
    );
    assert!("".parse::<HttpMethod>().is_err());
    assert!(" GET".parse::<HttpMethod>().is_err(), "no trimming");
    assert!("CONNECT".parse::<HttpMethod>().is_err());
}

#[test]
fn http_method_is_write_for_exactly_post_put_delete_patch() {
    let writes: Vec<_> = HttpMethod::ALL
        .into_iter()
        .filter(|m| m.is_write())
        .collect();
    assert_eq!(
        writes,
        [
            HttpMethod::Post,
            HttpMethod::Put,
            HttpMethod::Delete,
            HttpMethod::Patch
        ]
    );
    for read in [HttpMethod::Get, HttpMethod::Head, HttpMethod::Options] {
        assert!(!read.is_write(), "{read}");
    }
}

// ---------------------------------------------------------------------------------------------
// CallbackContext and ToolContext
// ---------------------------------------------------------------------------------------------

#[test]
fn callback_context_keeps_its_identity_fields() {
    let events = Arc::new(vec![user_event("hi")]);
    let ctx = CallbackContext::new("inv-9", "assistant", "s-9", StateMap::new(), events.clone());
    assert_eq!(ctx.invocation_id, "inv-9");
    assert_eq!(ctx.agent_name, "assistant");
    assert_eq!(ctx.session_id, "s-9");
    assert!(
        Arc::ptr_eq(&ctx.events, &events),
        "events are shared, not copied"
    );
}

#[test]
fn variables_and_state_are_the_same_map() {
    let mut ctx = context(obj(json!({"a": 1})), vec![]);
    assert!(std::ptr::eq(ctx.variables(), ctx.state()));
    ctx.set_variable("b", json!(2));
    assert!(std::ptr::eq(ctx.variables(), ctx.state()));
    assert_eq!(ctx.variables(), ctx.state());
    assert_eq!(ctx.state(), &obj(json!({"a": 1, "b": 2})));
}

#[test]
fn get_variable_returns_the_value_or_the_default() {
    let ctx = context(obj(json!({"n": 5, "nothing": false})), vec![]);
    assert_eq!(ctx.get_variable("n", json!(0)), json!(5));
    assert_eq!(ctx.get_variable("missing", json!("dflt")), json!("dflt"));
    assert_eq!(ctx.get_variable("missing", Value::Null), Value::Null);
    // A falsy value is still a value.
    assert_eq!(ctx.get_variable("nothing", json!(true)), json!(false));
}

#[test]
fn set_variable_creates_or_replaces_and_records_the_change() {
    let mut ctx = context(obj(json!({"city": "北京"})), vec![]);
    assert!(ctx.state_delta().is_empty());
    ctx.set_variable("city", json!("杭州"));
    ctx.set_variable("count", json!(1));
    ctx.set_variable("count", json!(2));
    assert_eq!(ctx.get_variable("city", Value::Null), json!("杭州"));
    assert_eq!(ctx.get_variable("count", Value::Null), json!(2));
    assert_eq!(
        ctx.state_delta(),
        &obj(json!({"city": "杭州", "count": 2})),
        "the delta holds the last value of each key"
    );
}

#[test]
fn remove_variable_removes_and_records_null() {
    let mut ctx = context(obj(json!({"a": 1, "b": 2})), vec![]);
    ctx.remove_variable("a");
    assert!(!ctx.variables().contains_key("a"));
    assert_eq!(ctx.get_variable("a", json!("gone")), json!("gone"));
    assert_eq!(ctx.state_delta(), &obj(json!({"a": null})));
    // Removing an unset key is not an error, and still recorded.
    ctx.remove_variable("never-set");
    assert_eq!(ctx.state_delta()["never-set"], Value::Null);
    assert_eq!(ctx.variables(), &obj(json!({"b": 2})));
}

#[test]
fn setting_null_removes_the_variable() {
    let mut ctx = context(obj(json!({"a": 1})), vec![]);
    ctx.set_variable("a", Value::Null);
    assert!(!ctx.variables().contains_key("a"));
    assert!(ctx.state_delta().contains_key("a"));
    assert_eq!(ctx.state_delta()["a"], Value::Null);
}

#[test]
fn set_after_remove_records_the_new_value() {
    let mut ctx = context(obj(json!({"a": 1})), vec![]);
    ctx.remove_variable("a");
    ctx.set_variable("a", json!([3]));
    assert_eq!(ctx.state_delta(), &obj(json!({"a": [3]})));
    assert_eq!(ctx.variables(), &obj(json!({"a": [3]})));
}

#[test]
fn take_state_delta_empties_the_record_but_keeps_the_view() {
    let mut ctx = context(StateMap::new(), vec![]);
    ctx.set_variable("x", json!(1));
    ctx.remove_variable("y");
    let taken = ctx.take_state_delta();
    assert_eq!(taken, obj(json!({"x": 1, "y": null})));
    assert!(ctx.state_delta().is_empty());
    assert!(ctx.take_state_delta().is_empty());
    assert_eq!(ctx.variables(), &obj(json!({"x": 1})));
}

#[test]
fn session_info_defaults_to_text_over_api() {
    let ctx = context(StateMap::new(), vec![]);
    assert_eq!(
        ctx.session_info(),
        SessionInfo {
            modality: "TEXT".to_owned(),
            channel: "API".to_owned(),
        }
    );
    assert_eq!(SessionInfo::default(), ctx.session_info());
}

#[test]
fn session_info_reads_the_session_variable_and_fills_gaps() {
    assert_eq!(SESSION_VARIABLE, "_session");
    let ctx = context(
        obj(json!({"_session": {"modality": "VOICE", "channel": "DESKTOP"}})),
        vec![],
    );
    assert_eq!(
        ctx.session_info(),
        SessionInfo {
            modality: "VOICE".to_owned(),
            channel: "DESKTOP".to_owned(),
        }
    );

    let only_modality = context(obj(json!({"_session": {"modality": "VOICE"}})), vec![]);
    assert_eq!(only_modality.session_info().modality, "VOICE");
    assert_eq!(only_modality.session_info().channel, "API");

    // Values of the wrong type, or a `_session` that is not an object, fall back to the defaults.
    for odd in [
        json!({"modality": 1, "channel": null}),
        json!("VOICE"),
        json!([]),
    ] {
        let ctx = context(obj(json!({ "_session": odd })), vec![]);
        assert_eq!(ctx.session_info(), SessionInfo::default(), "{odd}");
    }

    // A value set through the context is seen at once.
    let mut ctx = context(StateMap::new(), vec![]);
    let voice = SessionInfo {
        modality: "VOICE".to_owned(),
        channel: "FEISHU".to_owned(),
    };
    assert_eq!(
        voice.to_value(),
        json!({"modality": "VOICE", "channel": "FEISHU"})
    );
    ctx.set_variable(SESSION_VARIABLE, voice.to_value());
    assert_eq!(ctx.session_info(), voice);
}

#[test]
fn last_user_input_is_the_last_block_of_user_events_skipping_later_agent_events() {
    let ctx = context(
        StateMap::new(),
        vec![
            user_event("u1"),
            agent_event("assistant", "a1"),
            user_event("u2"),
            Event::new("inv-2", USER_AUTHOR).with_content(Content::new(
                ROLE_USER,
                vec![Part::from_text("u3"), Part::from_text("u4")],
            )),
            agent_event("assistant", "a2"),
            agent_event("helper", "a3"),
        ],
    );
    assert_eq!(texts(&ctx.get_last_user_input()), ["u2", "u3", "u4"]);
    assert_eq!(texts(&ctx.get_last_agent_output()), ["a2", "a3"]);
}

#[test]
fn last_agent_output_skips_later_user_events() {
    let ctx = context(
        StateMap::new(),
        vec![
            agent_event("assistant", "greeting"),
            user_event("u1"),
            agent_event("assistant", "a1"),
            agent_event("assistant", "a2"),
            user_event("u2"),
            user_event("u3"),
        ],
    );
    assert_eq!(texts(&ctx.get_last_agent_output()), ["a1", "a2"]);
    assert_eq!(texts(&ctx.get_last_user_input()), ["u2", "u3"]);
}

#[test]
fn last_blocks_are_empty_when_there_is_no_such_event() {
    let empty = context(StateMap::new(), vec![]);
    assert!(empty.get_last_user_input().is_empty());
    assert!(empty.get_last_agent_output().is_empty());
    assert!(empty.parts().is_empty());

    let only_agent = context(StateMap::new(), vec![agent_event("assistant", "hi")]);
    assert!(only_agent.get_last_user_input().is_empty());
    let only_user = context(StateMap::new(), vec![user_event("hi")]);
    assert!(only_user.get_last_agent_output().is_empty());
}

#[test]
fn last_blocks_include_every_part_kind_and_contentless_events_keep_the_block() {
    let call = Part::from_function_call("f", StateMap::new());
    let response = Part::from_function_response("f", obj(json!({"output": 1})));
    let ctx = context(
        StateMap::new(),
        vec![
            user_event("u1"),
            Event::new("inv-1", "assistant")
                .with_content(Content::new(ROLE_MODEL, vec![call.clone()])),
            // A state-only agent event: no parts, but still part of the agent block.
            Event::new("inv-1", "assistant"),
            Event::new("inv-1", "assistant")
                .with_content(Content::new(ROLE_USER, vec![response.clone()])),
            agent_event("assistant", "done"),
        ],
    );
    assert_eq!(
        ctx.get_last_agent_output(),
        [call, response, Part::from_text("done")]
    );
}

#[test]
fn parts_lists_every_part_of_the_session_in_order() {
    let ctx = context(
        StateMap::new(),
        vec![
            user_event("u1"),
            Event::new("inv-1", "assistant").with_content(Content::new(
                ROLE_MODEL,
                vec![Part::from_text("a1"), Part::from_text("a2")],
            )),
            Event::new("inv-1", "assistant"),
            user_event("u2"),
        ],
    );
    assert_eq!(texts(&ctx.parts()), ["u1", "a1", "a2", "u2"]);
}

#[test]
fn partial_events_are_ignored_by_parts_and_last_blocks() {
    let ctx = context(
        StateMap::new(),
        vec![
            user_event("u1"),
            partial(agent_event("assistant", "Hel")),
            partial(agent_event("assistant", "Hello")),
            agent_event("assistant", "Hello!"),
            user_event("u2"),
            partial(agent_event("assistant", "Th")),
        ],
    );
    assert_eq!(texts(&ctx.parts()), ["u1", "Hello!", "u2"]);
    assert_eq!(texts(&ctx.get_last_agent_output()), ["Hello!"]);
    // The trailing partial chunk does not hide the user's last input.
    assert_eq!(texts(&ctx.get_last_user_input()), ["u2"]);
}

#[test]
fn user_content_is_the_last_user_message() {
    let ctx = context(
        StateMap::new(),
        vec![
            user_event("first"),
            agent_event("assistant", "reply"),
            user_event("second"),
            // A user event without content does not count as a message.
            Event::new("inv-2", USER_AUTHOR),
            agent_event("assistant", "reply 2"),
        ],
    );
    assert_eq!(ctx.user_content, Some(Content::user_text("second")));

    let no_user = context(StateMap::new(), vec![agent_event("assistant", "hi")]);
    assert_eq!(no_user.user_content, None);
}

#[test]
fn tool_context_has_the_call_id_and_derefs_to_the_callback_context() {
    let base = context(obj(json!({"a": 1})), vec![user_event("hi")]);
    let mut tool_ctx = ToolContext::new(base, "call-42");
    assert_eq!(tool_ctx.function_call_id, "call-42");
    // Read access through Deref.
    assert_eq!(tool_ctx.agent_name, "assistant");
    assert_eq!(tool_ctx.get_variable("a", Value::Null), json!(1));
    assert_eq!(texts(&tool_ctx.get_last_user_input()), ["hi"]);
    assert_eq!(tool_ctx.user_content, Some(Content::user_text("hi")));

    // Changes through DerefMut are recorded in the callback context's delta.
    tool_ctx.set_variable("b", json!(2));
    tool_ctx.remove_variable("a");
    assert_eq!(tool_ctx.state_delta(), &obj(json!({"b": 2, "a": null})));
    assert_eq!(tool_ctx.variables(), &obj(json!({"b": 2})));

    let back = tool_ctx.into_callback_context();
    assert_eq!(back.state_delta(), &obj(json!({"b": 2, "a": null})));
    assert_eq!(back.state(), &obj(json!({"b": 2})));
}

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

#[test]
fn state_scope_is_decided_by_the_key_prefix() {
    assert_eq!(StateScope::of("city"), StateScope::Session);
    assert_eq!(StateScope::of("user:lang"), StateScope::User);
    assert_eq!(StateScope::of("app:version"), StateScope::App);
    assert_eq!(StateScope::of("temp:scratch"), StateScope::Temp);
    assert_eq!(StateScope::of(""), StateScope::Session);
    assert_eq!(StateScope::of("user:"), StateScope::User);
    // Only the exact, lowercase prefix with its colon counts.
    assert_eq!(StateScope::of("user"), StateScope::Session);
    assert_eq!(StateScope::of("username"), StateScope::Session);
    assert_eq!(StateScope::of("User:lang"), StateScope::Session);
    assert_eq!(StateScope::of("x:temp:y"), StateScope::Session);
    assert_eq!(StateScope::of("_session"), StateScope::Session);
}

#[test]
fn only_temp_scope_is_not_persisted() {
    assert!(StateScope::Session.is_persisted());
    assert!(StateScope::User.is_persisted());
    assert!(StateScope::App.is_persisted());
    assert!(!StateScope::Temp.is_persisted());
}

#[test]
fn apply_delta_sets_values_and_null_removes() {
    let mut state = obj(json!({"a": 1, "b": 2, "c": 3}));
    apply_delta(
        &mut state,
        &obj(json!({"a": 10, "b": null, "d": {"nested": null}, "missing": null})),
    );
    assert_eq!(state, obj(json!({"a": 10, "c": 3, "d": {"nested": null}})));
    // A null nested inside a value is data, not a removal.
    assert_eq!(state["d"], json!({"nested": null}));
    apply_delta(&mut state, &StateMap::new());
    assert_eq!(state.len(), 3);
}

#[test]
fn apply_delta_keeps_the_order_of_the_remaining_keys() {
    let mut state = obj(json!({"a": 1, "b": 2, "c": 3, "d": 4}));
    apply_delta(&mut state, &obj(json!({"a": null})));
    // Map equality ignores order, so compare the key sequence itself.
    assert_eq!(
        state.keys().map(String::as_str).collect::<Vec<_>>(),
        ["b", "c", "d"]
    );
    assert_eq!(
        serde_json::to_string(&state).unwrap(),
        r#"{"b":2,"c":3,"d":4}"#
    );
}

#[test]
fn persisted_delta_drops_only_temp_keys() {
    let delta = obj(json!({
        "city": "杭州",
        "user:lang": "zh",
        "app:flag": true,
        "temp:scratch": [1, 2],
        "removed": null,
        "temp:removed": null,
    }));
    assert_eq!(
        persisted_delta(&delta),
        obj(json!({"city": "杭州", "user:lang": "zh", "app:flag": true, "removed": null}))
    );
    assert!(persisted_delta(&obj(json!({"temp:a": 1}))).is_empty());
}

#[test]
fn folding_the_taken_deltas_rebuilds_the_context_view() {
    let initial = obj(json!({"a": 1, "b": 2, "user:lang": "en"}));
    let mut ctx = context(initial.clone(), vec![]);
    let mut deltas = Vec::new();

    ctx.set_variable("a", json!(10));
    ctx.remove_variable("b");
    ctx.set_variable("c", json!({"x": [1]}));
    deltas.push(ctx.take_state_delta());

    ctx.set_variable("b", json!("back"));
    ctx.set_variable("c", Value::Null);
    ctx.set_variable("user:lang", json!("zh"));
    ctx.set_variable("temp:scratch", json!(true));
    deltas.push(ctx.take_state_delta());

    ctx.remove_variable("a");
    deltas.push(ctx.take_state_delta());

    let mut folded = initial.clone();
    for delta in &deltas {
        apply_delta(&mut folded, delta);
    }
    assert_eq!(&folded, ctx.variables());
    assert_eq!(
        folded,
        obj(json!({"b": "back", "user:lang": "zh", "temp:scratch": true}))
    );

    // The same, going through stored events: deltas in `actions.state_delta`, written as JSON
    // with `temp:` keys dropped, read back, folded.
    let stored: Vec<String> = deltas
        .iter()
        .map(|delta| {
            let event = Event::new("inv-1", "assistant").with_actions(EventActions {
                state_delta: persisted_delta(delta),
                ..EventActions::default()
            });
            serde_json::to_string(&event).unwrap()
        })
        .collect();
    let mut rebuilt = initial;
    for text in &stored {
        let event: Event = agent::json::from_str(text).unwrap();
        apply_delta(&mut rebuilt, &event.actions.state_delta);
    }
    assert_eq!(&rebuilt, &persisted_delta(ctx.variables()));
    assert_eq!(rebuilt, obj(json!({"b": "back", "user:lang": "zh"})));
}

// ---------------------------------------------------------------------------------------------
// Malformed JSON: errors name the field, never panic
// ---------------------------------------------------------------------------------------------

#[test]
fn part_with_two_kinds_is_rejected_naming_both() {
    let err = parse_err::<Part>(json!({"text": "a", "function_call": {"name": "f"}}));
    assert_eq!(err.what, "Part");
    assert_eq!(err.path, ".");
    let message = err.to_string();
    assert!(message.contains("`text`"), "{message}");
    assert!(message.contains("`function_call`"), "{message}");
    assert!(message.starts_with("invalid Part at `.`: "), "{message}");

    let three = parse_err::<Part>(json!({
        "text": "a",
        "function_response": {"name": "f"},
        "inline_data": {},
    }));
    assert!(
        three
            .message
            .contains("`text` and `function_response` and `inline_data`"),
        "{three}"
    );
}

#[test]
fn part_with_no_kind_is_rejected() {
    let err = parse_err::<Part>(json!({}));
    assert_eq!(err.path, ".");
    assert!(err.message.contains("none is set"), "{err}");
    for kind in ["text", "function_call", "function_response", "inline_data"] {
        assert!(err.message.contains(&format!("`{kind}`")), "{err}");
    }
    // Explicit nulls count as not set.
    let nulls = parse_err::<Part>(json!({"text": null, "function_call": null}));
    assert!(nulls.message.contains("none is set"), "{nulls}");
}

#[test]
fn function_call_without_name_is_rejected_naming_name() {
    let err = parse_err::<FunctionCall>(json!({"args": {"a": 1}}));
    assert_eq!(err.what, "FunctionCall");
    assert_eq!(err.path, ".");
    assert!(err.message.contains("missing field `name`"), "{err}");

    let in_part = parse_err::<Part>(json!({"function_call": {"args": {}}}));
    assert_eq!(in_part.path, "function_call");
    assert!(in_part.to_string().contains("`name`"), "{in_part}");
}

#[test]
fn nested_wrong_type_in_an_event_names_the_full_path() {
    let base = json!({"id": "e", "invocation_id": "i", "author": "user", "timestamp": 1});
    let with = |content: Value| {
        let mut event = base.clone();
        event["content"] = content;
        event
    };

    let err = parse_err::<Event>(with(json!({"parts": [{"text": 5}]})));
    assert_eq!(err.what, "Event");
    assert_eq!(err.path, "content.parts[0].text");
    assert!(err.message.contains("expected a string"), "{err}");
    assert!(
        err.to_string()
            .starts_with("invalid Event at `content.parts[0].text`: "),
        "{err}"
    );

    let err = parse_err::<Event>(with(
        json!({"parts": [{"text": "ok"}, {"function_call": {"name": 3}}]}),
    ));
    assert_eq!(err.path, "content.parts[1].function_call.name");

    // A part-level problem (two kinds) is reported at the part itself.
    let err = parse_err::<Event>(with(
        json!({"parts": [{"text": "a", "function_call": {"name": "f"}}]}),
    ));
    assert_eq!(err.path, "content.parts[0]");
    assert!(err.message.contains("`text` and `function_call`"), "{err}");

    let err = parse_err::<Event>(with(json!({"parts": "not a list"})));
    assert_eq!(err.path, "content.parts");

    let mut bad_actions = base.clone();
    bad_actions["actions"] = json!({"artifact_delta": {"f.txt": "v1"}});
    let err = parse_err::<Event>(bad_actions);
    assert_eq!(err.path, "actions.artifact_delta.f.txt");

    let mut bad_timestamp = base;
    bad_timestamp["timestamp"] = json!("yesterday");
    assert_eq!(parse_err::<Event>(bad_timestamp).path, "timestamp");
}

#[test]
fn missing_required_event_field_is_named() {
    let err = parse_err::<Event>(json!({"id": "e", "author": "user", "timestamp": 1}));
    assert_eq!(err.path, ".");
    assert!(
        err.message.contains("missing field `invocation_id`"),
        "{err}"
    );
}

#[test]
fn invalid_base64_in_blob_data_is_rejected_at_the_blob() {
    let err = parse_err::<Blob>(json!({"mime_type": "image/png", "data": "not base64!"}));
    assert_eq!(err.what, "Blob");
    assert_eq!(err.path, ".");
    assert!(
        err.message.contains("field `data` is not valid base64"),
        "{err}"
    );

    let in_event = parse_err::<Event>(json!({
        "id": "e", "invocation_id": "i", "author": "user", "timestamp": 1,
        "content": {"parts": [{"text": "x"}, {"inline_data": {"data": "%%%"}}]},
    }));
    assert_eq!(in_event.path, "content.parts[1].inline_data");
    assert!(in_event.message.contains("`data`"), "{in_event}");

    // The raw-bytes field name is not accepted on the wire.
    let raw = parse_err::<Blob>(json!({"raw_data": "aGk="}));
    assert!(raw.message.contains("unknown field `raw_data`"), "{raw}");
}

#[test]
fn unknown_fields_are_rejected_naming_them() {
    let err = parse_err::<Part>(json!({"text": "a", "foo": 1}));
    assert_eq!(err.path, "foo");
    assert!(err.message.contains("unknown field `foo`"), "{err}");

    let err = parse_err::<Event>(json!({
        "id": "e", "invocation_id": "i", "author": "user", "timestamp": 1,
        "actions": {"bogus": true},
    }));
    assert_eq!(err.path, "actions.bogus");
    assert!(err.message.contains("unknown field `bogus`"), "{err}");

    // camelCase spellings are not the seed's names.
    let err = parse_err::<Event>(json!({
        "id": "e", "invocation_id": "i", "author": "user", "timestamp": 1,
        "turnComplete": true,
    }));
    assert_eq!(err.path, "turnComplete");

    let err = parse_err::<FunctionCall>(json!({"name": "f", "arguments": {}}));
    assert_eq!(err.path, "arguments");
    let err = parse_err::<LlmRequest>(json!({"contents": [], "config": {"temperature": 0.2}}));
    assert_eq!(err.path, "config.temperature");
}

#[test]
fn trailing_garbage_after_the_document_is_rejected() {
    for text in [
        r#"{"text":"a"} x"#,
        r#"{"text":"a"}{"text":"b"}"#,
        r#"{"text":"a"},"#,
    ] {
        let err = agent::json::from_str::<Part>(text).unwrap_err();
        assert_eq!(err.what, "Part");
        assert_eq!(err.path, ".");
        assert!(err.message.contains("trailing characters"), "{text}: {err}");
    }
    // Trailing whitespace is fine.
    assert_eq!(
        agent::json::from_str::<Part>("{\"text\":\"a\"}  \n").unwrap(),
        Part::from_text("a")
    );
}

#[test]
fn unknown_tool_outcome_string_is_rejected_naming_outcome() {
    let err = parse_err::<ToolResult>(json!({"outcome": "done", "content": "x"}));
    assert_eq!(err.what, "ToolResult");
    assert_eq!(err.path, "outcome");
    assert!(err.message.contains("unknown variant `done`"), "{err}");
    assert!(err.message.contains("`needs_user_auth`"), "{err}");

    // The wire is case-sensitive: the Python enum's member names are not its values.
    let err = parse_err::<ToolOutcome>(json!("COMPLETED"));
    assert_eq!(err.what, "ToolOutcome");
    assert_eq!(err.path, ".");

    let err = parse_err::<ToolResult>(json!({"content": "x"}));
    assert!(err.message.contains("missing field `outcome`"), "{err}");
}

#[test]
fn malformed_text_is_an_error_not_a_panic() {
    for text in [
        "",
        "{",
        "null",
        "[]",
        "\"text\"",
        "{\"text\":}",
        "{\"text\" \"a\"}",
    ] {
        assert!(agent::json::from_str::<Part>(text).is_err(), "{text:?}");
        assert!(agent::json::from_str::<Event>(text).is_err(), "{text:?}");
        // serde lets a struct be written as a JSON array of its fields, so `[]` is an empty
        // Content (every field has a default); every other malformed text is an error.
        if text != "[]" {
            assert!(agent::json::from_str::<Content>(text).is_err(), "{text:?}");
        }
    }
    let err = agent::json::from_str::<Vec<Event>>(r#"[{"id": 1}]"#).unwrap_err();
    assert_eq!(err.path, "[0].id");
}

#[test]
fn null_for_an_optional_list_map_or_flag_reads_as_its_default() {
    // What Python writes for unset Optional fields must be accepted, not rejected.
    let call: FunctionCall = agent::json::from_str(r#"{"name":"f","args":null}"#).unwrap();
    assert!(call.args.is_empty());
    let event: Event = agent::json::from_str(
        r#"{"id":"e","invocation_id":"i","author":"user","timestamp":1,"content":{"parts":null,"role":"user"},
            "actions":{"state_delta":null,"escalate":null,"requested_auth_configs":null},
            "long_running_tool_ids":null,"partial":null,"turn_complete":null,"interrupted":null}"#,
    )
    .unwrap();
    assert!(event.parts().is_empty());
    assert!(event.actions.is_empty());
    assert!(!event.partial && !event.turn_complete && !event.interrupted);
    let config: GenerateContentConfig =
        agent::json::from_str(r#"{"tools":null,"excluded_tools":null}"#).unwrap();
    assert_eq!(config, GenerateContentConfig::default());
    // A wrong type is still an error.
    assert!(agent::json::from_str::<FunctionCall>(r#"{"name":"f","args":[1]}"#).is_err());
}

#[test]
fn the_transcript_is_shown_for_audio_in_any_letter_case() {
    let mut blob = Blob::new("Audio/OGG");
    blob.cached_transcript = Some("明天见".to_owned());
    assert_eq!(blob.transcript(), Some("明天见"));
    blob.mime_type = Some("aud".to_owned());
    assert_eq!(blob.transcript(), None);
}
