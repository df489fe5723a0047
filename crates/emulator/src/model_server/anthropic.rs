//! The Anthropic Messages API over the same script: `POST /v1/messages`, streamed (named SSE
//! events) and not, `POST /v1/messages/count_tokens`, and `HEAD /api/hello`, which Claude Code
//! sends to warm its connection (unless told to send nothing nonessential).
//!
//! A request is read into the OpenAI-shaped message list the matcher already knows, so one
//! script answers both APIs: the `system` prompt becomes a system message, a user's text blocks a
//! user message, an assistant's `tool_use` blocks its `tool_calls` (the input as JSON text), and
//! each `tool_result` block a `tool` message with its `tool_call_id`. A user message that carries
//! tool results and text too (Claude Code may add reminders beside the results) becomes the tool
//! messages followed by a user message with that text, in the order the API gives them.
//! `system` messages inside `messages` (Claude Code sends its environment notes so) join the
//! system prompt.
//!
//! Answers are in the real wire format: `message_start`, a `ping`, per content block
//! `content_block_start`, its deltas (`text_delta`, or `input_json_delta` with the tool's input
//! in fragments) and `content_block_stop`, then `message_delta` with the stop reason (`tool_use`
//! or `end_turn`) and usage, and `message_stop`; each with its `event:` line. Failures use
//! Anthropic's `{"type": "error", "error": {"type": …, "message": …}}`.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

mod translate;

use translate::to_chat;

use super::{
    ErrorReply, RecordedRequest, ResolvedReply, Script, ServerState, error_response,
    estimate_tokens, fallback_step, lock, pick, resolve, stream_response,
};

/// The routes of the Anthropic API, merged into the server's router.
pub(super) fn routes() -> axum::Router<Arc<ServerState>> {
    axum::Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        // `get` answers HEAD too, which is how Claude Code probes the base URL.
        .route("/api/hello", get(hello))
}

async fn hello() -> StatusCode {
    StatusCode::OK
}

/// Whether the request may go on: with no key in the script any request may; else it must carry
/// the key as `x-api-key` (an API key) or `Authorization: Bearer` (an auth token), as the real
/// service accepts both.
fn key_accepted(script: &Script, headers: &HeaderMap) -> bool {
    let Some(key) = &script.api_key else {
        return true;
    };
    let header_is = |name: header::HeaderName, expected: &str| {
        headers.get(name).and_then(|v| v.to_str().ok()) == Some(expected)
    };
    header_is(header::HeaderName::from_static("x-api-key"), key)
        || header_is(header::AUTHORIZATION, &format!("Bearer {key}"))
}

/// The log entry of a request, before a step is picked.
fn record(path: &str, headers: &HeaderMap, body: &Value) -> RecordedRequest {
    RecordedRequest {
        path: path.to_owned(),
        body: body.clone(),
        authorized: headers.contains_key("x-api-key")
            || headers.contains_key(header::AUTHORIZATION),
        step: None,
    }
}

/// What the service checks before anything else, in its order: the key, then that the body is
/// a JSON object with `messages`.
fn refusal(script: &Script, headers: &HeaderMap, body: &Value) -> Option<Response> {
    if !key_accepted(script, headers) {
        Some(error(StatusCode::UNAUTHORIZED, "invalid x-api-key"))
    } else if !body.is_object() || !body["messages"].is_array() {
        Some(error(StatusCode::BAD_REQUEST, "messages: Field required"))
    } else {
        None
    }
}

async fn messages(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut entry = record("/v1/messages", &headers, &body);
    if let Some(refused) = refusal(&state.script, &headers, &body) {
        lock(&state.log).push(entry);
        return refused;
    }
    let chat = json!({"messages": to_chat(&body)});
    let picked = pick(&state, &chat);
    entry.step = picked.as_ref().map(|(index, _)| *index);
    lock(&state.log).push(entry);
    let Some(step) = picked
        .map(|(_, step)| step)
        .or_else(|| fallback_step(&state.script))
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "The model script has no step for this request (script_exhausted).",
        );
    };
    if let Some(failure) = step.error {
        return error_reply(&failure);
    }
    let last = chat["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let scripted = step.reply.unwrap_or_default();
    let mut reply = resolve(&scripted, &state.script, &last);
    // The matcher's ids look like OpenAI's; a client may check that Claude's look like Claude's.
    for (call, resolved) in scripted.tool_calls.iter().zip(reply.calls.iter_mut()) {
        if call.id.is_none() {
            resolved.id = new_id("toolu_");
        }
    }
    let model = body["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .unwrap_or(&state.script.model)
        .to_owned();
    let input_tokens = input_tokens(&body);
    if body["stream"].as_bool() == Some(true) {
        let events = events(&reply, &model, input_tokens, &state.script);
        stream_response(events, Duration::from_millis(state.script.chunk_delay_ms))
    } else {
        (StatusCode::OK, Json(document(&reply, &model, input_tokens))).into_response()
    }
}

async fn count_tokens(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    lock(&state.log).push(record("/v1/messages/count_tokens", &headers, &body));
    if let Some(refused) = refusal(&state.script, &headers, &body) {
        return refused;
    }
    Json(json!({"input_tokens": input_tokens(&body)})).into_response()
}

/// A rough count of what the request sends the model.
fn input_tokens(body: &Value) -> u64 {
    estimate_tokens(&body["system"].to_string())
        + estimate_tokens(&body["messages"].to_string())
        + estimate_tokens(&body["tools"].to_string())
}

fn new_id(prefix: &str) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &hex[..24])
}

fn stop_reason(reply: &ResolvedReply) -> &'static str {
    if reply.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn output_tokens(reply: &ResolvedReply) -> u64 {
    estimate_tokens(&reply.text)
        + reply
            .calls
            .iter()
            .map(|c| estimate_tokens(&c.arguments) + 4)
            .sum::<u64>()
}

/// One named server-sent event.
fn event(data: &Value) -> String {
    let name = data["type"].as_str().unwrap_or("message");
    format!("event: {name}\ndata: {data}\n\n")
}

/// The event stream of a reply.
fn events(reply: &ResolvedReply, model: &str, input_tokens: u64, script: &Script) -> Vec<String> {
    let mut out = vec![event(&json!({"type": "message_start", "message": {
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}}))];
    out.push(event(&json!({"type": "ping"})));
    let mut index = 0;
    let text: Vec<char> = reply.text.chars().collect();
    // Like the real service, an answer with neither text nor calls still has one (empty) block.
    if !text.is_empty() || reply.calls.is_empty() {
        out.push(event(
            &json!({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in text.chunks(script.chunk_chars.max(1)) {
            let piece: String = piece.iter().collect();
            out.push(event(
                &json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        out.push(event(
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for call in &reply.calls {
        out.push(event(
            &json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        // The real service opens a tool's input with an empty fragment.
        let mut pieces = vec![String::new()];
        let arguments: Vec<char> = call.arguments.chars().collect();
        pieces.extend(
            arguments
                .chunks(script.argument_chunk_chars.max(1))
                .map(|p| p.iter().collect::<String>()),
        );
        for piece in pieces {
            out.push(event(
                &json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        out.push(event(
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    out.push(event(&json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
        "usage": {"output_tokens": output_tokens(reply)}})));
    out.push(event(&json!({"type": "message_stop"})));
    out
}

/// The `message` document of a reply.
fn document(reply: &ResolvedReply, model: &str, input_tokens: u64) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for call in &reply.calls {
        // Arguments a script made invalid on purpose are sent as the string they are.
        let input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    json!({
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(reply), "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": output_tokens(reply)},
    })
}

/// A scripted failure; without a body, the body Anthropic sends for its status.
fn error_reply(failure: &ErrorReply) -> Response {
    if failure.body.is_some() {
        return error_response(failure);
    }
    let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, message) = kind_of(status);
    let mut failure = failure.clone();
    failure.body = Some(error_body(kind, message));
    error_response(&failure)
}

/// Anthropic's error type and a typical message for a status.
fn kind_of(status: StatusCode) -> (&'static str, &'static str) {
    match status.as_u16() {
        400 => (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        401 => ("authentication_error", "invalid x-api-key"),
        403 => (
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        404 => ("not_found_error", "model: scripted-model"),
        413 => (
            "request_too_large",
            "Request exceeds the maximum allowed size.",
        ),
        429 => (
            "rate_limit_error",
            "This request would exceed your organization's rate limit.",
        ),
        529 => ("overloaded_error", "Overloaded"),
        s if s >= 500 => ("api_error", "Internal server error"),
        _ => ("invalid_request_error", "The request failed."),
    }
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An error in Anthropic's shape, its type chosen by the status.
fn error(status: StatusCode, message: &str) -> Response {
    let (kind, _) = kind_of(status);
    (status, Json(error_body(kind, message))).into_response()
}
