//! The scripted model server: an OpenAI-compatible Chat Completions endpoint on a loopback port
//! that answers from a [`Script`] instead of a model, so the real provider code runs in tests and
//! in demo mode. It also speaks the Anthropic Messages API (`POST /v1/messages`, see the
//! `anthropic` module), answering from the same steps, so Anthropic clients such as the Claude
//! Code CLI can be driven by a script too.
//!
//! It streams exactly as the real service does: a first chunk with the assistant role, content
//! deltas a few characters at a time, for each tool call a chunk with its `index`, `id` and
//! function `name` (arguments empty) followed by chunks carrying the arguments in fragments, a
//! chunk with the `finish_reason`, the usage chunk when `stream_options.include_usage` is set, and
//! `data: [DONE]`. With `stream: false` it answers with one `chat.completion` document.
//!
//! A script is a list of steps. Each request takes the first step that is still available and
//! whose `when` (if any) matches the last message of the conversation; a step is used once unless
//! it says `"repeat": true`. A step is a reply (text and/or tool calls) or an error (status, body,
//! headers). Texts and string arguments may use `{{today}}`, `{{tomorrow}}`,
//! `{{day_after_tomorrow}}` (dates as `YYYY-MM-DD`) and `{{tz}}` (`+08:00`), resolved at request
//! time in the script's UTC offset, so a demo always talks about the real "tomorrow". A reply to
//! a tool's answer may quote it with `{{result.<field>}}` (a dotted path into the answer's JSON,
//! or into its `result` object), so what the scripted model says matches what the tool did —
//! after the user edited the call's arguments, too.
//!
//! A step's `when` may also name the `language` the user writes in, `zh` or `en`, so one script
//! answers each user in their own language, after a tool's answer too (where the last message
//! is the tool's, not the user's). The user's language is that of their latest message with
//! words in it: `zh` when it has a Chinese character, else `en` when it has a letter. Messages
//! the app writes in the user's place are not the user's words and never decide it: those that
//! begin with one of the script's `notes` (the engine's "Update on the earlier call …"). With no
//! such message, no step naming a language applies, so a script lists the steps of a language
//! before the steps without one that answer everyone else.
//!
//! ```json
//! {"notes": ["Update on the earlier call"],
//!  "steps": [
//!   {"when": {"role": "user", "language": "en", "contains_any": ["agenda", "calendar"]},
//!    "reply": {"text": "Let me look.", "tool_calls": [
//!      {"name": "list_calendar_events", "arguments": {"start_time": "{{tomorrow}}T00:00:00{{tz}}"}}]}},
//!   {"when": {"role": "user", "contains_any": ["日程", "安排"]},
//!    "reply": {"text": "我看一下。", "tool_calls": [
//!      {"name": "list_calendar_events", "arguments": {"start_time": "{{tomorrow}}T00:00:00{{tz}}"}}]}},
//!   {"when": {"role": "tool", "tool": "list_calendar_events", "language": "en"},
//!    "reply": {"text": "You have two meetings tomorrow."}},
//!   {"when": {"role": "tool", "tool": "list_calendar_events"}, "reply": {"text": "明天有两个会。"}},
//!   {"error": {"status": 429, "headers": {"retry-after": "1"}}}
//! ]}
//! ```
//!
//! A request no step answers fails (`script_exhausted`), unless the script has a `fallback` text:
//! then it gets that text. Clients that send side requests of their own need it, since a script
//! cannot foresee them all: Claude Code has a dozen kinds (a session title, a summary of tool
//! use, a quota check, …), sent as its version and settings decide.
//!
//! Every request is kept in a log ([`ModelServer::requests`]) for tests to count and inspect.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

mod anthropic;

/// The demo script shipped with the app: reading the agenda, proposing a meeting (approval) and
/// a tool that needs a permission not granted yet (sign-in card).
pub const DEMO_SCRIPT: &str = include_str!("../scripts/demo.json");

/// A script the server answers from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The model name reported in answers when the request names none.
    #[serde(default = "default_model")]
    pub model: String,
    /// Characters of text per content chunk.
    #[serde(default = "default_text_chunk")]
    pub chunk_chars: usize,
    /// Characters of a tool call's arguments per chunk.
    #[serde(default = "default_argument_chunk")]
    pub argument_chunk_chars: usize,
    /// A pause between chunks, in milliseconds, so a demo looks like a model typing.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// The offset from UTC of the dates in `{{today}}` and friends, in minutes.
    #[serde(default = "default_offset")]
    pub utc_offset_minutes: i32,
    /// When set, requests must carry `Authorization: Bearer <api_key>` (else 401).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Beginnings of user messages that the app writes, not the user (the engine's notes):
    /// they never decide the user's [`Language`].
    #[serde(default)]
    pub notes: Vec<String>,
    /// The text answered to a request that no step answers; `None`: such a request fails.
    #[serde(default)]
    pub fallback: Option<String>,
    /// The steps.
    pub steps: Vec<Step>,
}

fn default_model() -> String {
    "scripted-model".to_owned()
}

fn default_text_chunk() -> usize {
    4
}

fn default_argument_chunk() -> usize {
    8
}

fn default_offset() -> i32 {
    480
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// When this step applies; `None`: to any request.
    #[serde(default)]
    pub when: Option<Matcher>,
    /// Whether the step stays available after it is used.
    #[serde(default)]
    pub repeat: bool,
    /// The answer, unless this is an error step.
    #[serde(default)]
    pub reply: Option<Reply>,
    /// A failure to answer with instead.
    #[serde(default)]
    pub error: Option<ErrorReply>,
}

/// Conditions on the last message of the request; all that are set must hold.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// Its role: `user`, `assistant`, `tool` or `system`.
    #[serde(default)]
    pub role: Option<String>,
    /// Text its content must contain.
    #[serde(default)]
    pub contains: Option<String>,
    /// Texts of which its content must contain at least one (case-insensitive).
    #[serde(default)]
    pub contains_any: Vec<String>,
    /// For a tool message: the function whose result it is.
    #[serde(default)]
    pub tool: Option<String>,
    /// The language the user writes in (see the module's documentation).
    #[serde(default)]
    pub language: Option<Language>,
}

/// The language a user writes in, as far as a script tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// Chinese: the message has a Chinese character.
    Zh,
    /// English: the message has letters and no Chinese character.
    En,
}

impl Language {
    /// The language of one message's text; `None` when it has no words (only digits, marks or
    /// emoji) to tell by.
    ///
    /// Telling two languages apart by their scripts is exact where a statistical detector is
    /// not: a short Chinese request that quotes an English name ("帮我 review 一下") is still
    /// Chinese, and a two-word English one is never mistaken for another language.
    pub fn of_text(text: &str) -> Option<Language> {
        if text.chars().any(is_han) {
            Some(Language::Zh)
        } else if text.chars().any(char::is_alphabetic) {
            Some(Language::En)
        } else {
            None
        }
    }

    /// The language of the user's latest message with words in it, skipping the app's `notes`.
    pub fn of_user(messages: &[Value], notes: &[String]) -> Option<Language> {
        messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .map(message_text)
            .filter(|text| !notes.iter().any(|note| text.starts_with(note.as_str())))
            .find_map(|text| Language::of_text(&text))
    }
}

/// A Chinese character (a CJK unified or compatibility ideograph).
fn is_han(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{3FFFF}')
}

/// A scripted reply.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The text; empty for none.
    #[serde(default)]
    pub text: String,
    /// The tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The function.
    pub name: String,
    /// The arguments: an object (sent as its JSON), or a string sent as it is — which may be
    /// invalid JSON on purpose.
    #[serde(default)]
    pub arguments: Value,
    /// The call id; generated (`call_…`) when absent.
    #[serde(default)]
    pub id: Option<String>,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// The HTTP status.
    pub status: u16,
    /// The body: JSON, or a string sent as text. Absent: an OpenAI-style error for the status.
    #[serde(default)]
    pub body: Option<Value>,
    /// Extra headers, such as `retry-after`.
    #[serde(default)]
    pub headers: Map<String, Value>,
}

/// Why a script cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The JSON does not describe a script.
    #[error("the model script is not valid: {0}")]
    Invalid(#[from] serde_json::Error),
    /// A step is neither a reply nor an error, or both.
    #[error("step {index} of the model script must have exactly one of `reply` and `error`")]
    Ambiguous {
        /// The step's position, from 0.
        index: usize,
    },
    /// An error step's status is not an HTTP status.
    #[error("step {index} of the model script has an invalid status {status}")]
    BadStatus {
        /// The step's position, from 0.
        index: usize,
        /// The status given.
        status: u16,
    },
}

impl Script {
    /// Reads a script from JSON and checks it.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let script: Script = serde_json::from_str(text)?;
        for (index, step) in script.steps.iter().enumerate() {
            if step.reply.is_some() == step.error.is_some() {
                return Err(ScriptError::Ambiguous { index });
            }
            if let Some(error) = &step.error
                && StatusCode::from_u16(error.status).is_err()
            {
                return Err(ScriptError::BadStatus {
                    index,
                    status: error.status,
                });
            }
        }
        Ok(script)
    }

    /// The demo script.
    pub fn demo() -> Result<Script, ScriptError> {
        Script::from_json(DEMO_SCRIPT)
    }

    /// A script of these steps, answered in order, with the defaults for everything else.
    pub fn of_steps(steps: Vec<Step>) -> Script {
        Script {
            model: default_model(),
            chunk_chars: default_text_chunk(),
            argument_chunk_chars: default_argument_chunk(),
            chunk_delay_ms: 0,
            utc_offset_minutes: default_offset(),
            api_key: None,
            notes: Vec::new(),
            fallback: None,
            steps,
        }
    }
}

impl Step {
    /// A reply with text only.
    pub fn text(text: impl Into<String>) -> Step {
        Step::reply(Reply {
            text: text.into(),
            tool_calls: Vec::new(),
        })
    }

    /// A reply with one tool call.
    pub fn call(name: impl Into<String>, arguments: Value) -> Step {
        Step::reply(Reply {
            text: String::new(),
            tool_calls: vec![ToolCall {
                name: name.into(),
                arguments,
                id: None,
            }],
        })
    }

    /// This reply.
    pub fn reply(reply: Reply) -> Step {
        Step {
            when: None,
            repeat: false,
            reply: Some(reply),
            error: None,
        }
    }

    /// An error with this status and the default body.
    pub fn error(status: u16) -> Step {
        Step {
            when: None,
            repeat: false,
            reply: None,
            error: Some(ErrorReply {
                status,
                body: None,
                headers: Map::new(),
            }),
        }
    }

    /// The same step, applying only when `matcher` matches.
    #[must_use]
    pub fn when(mut self, matcher: Matcher) -> Step {
        self.when = Some(matcher);
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The path, such as `/v1/chat/completions`.
    pub path: String,
    /// The JSON body (`null` when it was not JSON).
    pub body: Value,
    /// Whether an `Authorization` header (or, on the Anthropic endpoints, `x-api-key`) was sent
    /// (its value is not kept).
    pub authorized: bool,
    /// The index of the script step that answered, if one did.
    pub step: Option<usize>,
}

impl RecordedRequest {
    /// The `messages` of the request.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

pub(super) struct ServerState {
    pub(super) script: Script,
    used: Mutex<Vec<bool>>,
    pub(super) log: Mutex<Vec<RecordedRequest>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded values are plain data that a panic cannot leave half-updated.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running scripted model server. Stops when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Starts serving `script` on 127.0.0.1 at a free port.
    pub async fn start(script: Script) -> std::io::Result<ModelServer> {
        ModelServer::start_on(script, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts serving `script` on `addr` (port 0: any free port).
    pub async fn start_on(script: Script, addr: SocketAddr) -> std::io::Result<ModelServer> {
        let state = Arc::new(ServerState {
            used: Mutex::new(vec![false; script.steps.len()]),
            script,
            log: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .merge(anthropic::routes())
            .fallback(not_found)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "the scripted model server stopped");
            }
        });
        tracing::info!(%addr, "scripted model server listening");
        Ok(ModelServer {
            addr,
            state,
            shutdown: Some(shutdown),
            task: Some(task),
        })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give an OpenAI-compatible client: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.log).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.state.log).len()
    }

    /// How many steps can still answer (repeating steps always count).
    pub fn remaining_steps(&self) -> usize {
        let used = lock(&self.state.used);
        self.state
            .script
            .steps
            .iter()
            .zip(used.iter())
            .filter(|(step, used)| step.repeat || !**used)
            .count()
    }

    /// Stops serving and waits for the server to finish.
    pub async fn shutdown(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn models(State(state): State<Arc<ServerState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": state.script.model, "object": "model", "created": now_secs(), "owned_by": "emulator"}],
    }))
}

async fn not_found() -> Response {
    openai_error(
        StatusCode::NOT_FOUND,
        "Unknown request URL. Only /v1/chat/completions and /v1/models are served.",
        "invalid_request_error",
        Some("unknown_url"),
    )
}

async fn chat_completions(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let mut record = RecordedRequest {
        path: "/v1/chat/completions".to_owned(),
        body: body.clone(),
        authorized: authorization.is_some(),
        step: None,
    };
    if let Some(key) = &state.script.api_key
        && authorization != Some(format!("Bearer {key}").as_str())
    {
        lock(&state.log).push(record);
        return openai_error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided.",
            "invalid_request_error",
            Some("invalid_api_key"),
        );
    }
    if !body.is_object() || !body["messages"].is_array() {
        lock(&state.log).push(record);
        return openai_error(
            StatusCode::BAD_REQUEST,
            "The request body must be a JSON object with `messages`.",
            "invalid_request_error",
            None,
        );
    }
    let picked = pick(&state, &body);
    record.step = picked.as_ref().map(|(index, _)| *index);
    lock(&state.log).push(record);
    let Some(step) = picked
        .map(|(_, step)| step)
        .or_else(|| fallback_step(&state.script))
    else {
        return openai_error(
            StatusCode::BAD_REQUEST,
            "The model script has no step for this request.",
            "invalid_request_error",
            Some("script_exhausted"),
        );
    };
    if let Some(error) = step.error {
        return error_response(&error);
    }
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let reply = resolve(&step.reply.unwrap_or_default(), &state.script, &last);
    let model = body["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .unwrap_or(&state.script.model)
        .to_owned();
    let answer = Answer::new(reply, model, &body);
    if body["stream"].as_bool() == Some(true) {
        let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
        let events = answer.events(&state.script, include_usage);
        stream_response(events, Duration::from_millis(state.script.chunk_delay_ms))
    } else {
        (StatusCode::OK, Json(answer.document())).into_response()
    }
}

/// The script's `fallback` as a step, for a request no step answers.
pub(super) fn fallback_step(script: &Script) -> Option<Step> {
    script
        .fallback
        .as_ref()
        .map(|text| Step::text(text.clone()))
}

/// The first available step that matches the request's last message, marked used.
pub(super) fn pick(state: &ServerState, body: &Value) -> Option<(usize, Step)> {
    let messages = body["messages"].as_array()?;
    let mut used = lock(&state.used);
    for (index, step) in state.script.steps.iter().enumerate() {
        if used.get(index).copied().unwrap_or(true) && !step.repeat {
            continue;
        }
        if step
            .when
            .as_ref()
            .is_none_or(|m| matches(m, messages, &state.script.notes))
        {
            if let Some(flag) = used.get_mut(index) {
                *flag = true;
            }
            return Some((index, step.clone()));
        }
    }
    None
}

fn matches(matcher: &Matcher, messages: &[Value], notes: &[String]) -> bool {
    let Some(last) = messages.last() else {
        return false;
    };
    let role = last["role"].as_str().unwrap_or_default();
    if matcher.role.as_deref().is_some_and(|r| r != role) {
        return false;
    }
    let text = message_text(last);
    if matcher
        .contains
        .as_deref()
        .is_some_and(|needle| !text.contains(needle))
    {
        return false;
    }
    if !matcher.contains_any.is_empty() {
        let lower = text.to_lowercase();
        if !matcher
            .contains_any
            .iter()
            .any(|needle| lower.contains(&needle.to_lowercase()))
        {
            return false;
        }
    }
    if let Some(tool) = &matcher.tool {
        let id = last["tool_call_id"].as_str().unwrap_or_default();
        if role != "tool" || tool_name(messages, id).as_deref() != Some(tool.as_str()) {
            return false;
        }
    }
    if let Some(language) = matcher.language
        && Language::of_user(messages, notes) != Some(language)
    {
        return false;
    }
    true
}

/// A message's text: its string content, or the text items of a content array.
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The function of the call with this id, found in the assistant messages.
fn tool_name(messages: &[Value], id: &str) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|call| call["id"] == id)
        .and_then(|call| call["function"]["name"].as_str().map(str::to_owned))
}

/// A reply with its placeholders filled in and its calls given ids; `last` is the request's last
/// message, whose tool answer `{{result.…}}` quotes.
pub(super) fn resolve(reply: &Reply, script: &Script, last: &Value) -> ResolvedReply {
    let dates = Dates::now(script.utc_offset_minutes);
    ResolvedReply {
        text: fill_result(&dates.fill(&reply.text), last),
        calls: reply
            .tool_calls
            .iter()
            .map(|call| ResolvedCall {
                id: call.id.clone().unwrap_or_else(new_call_id),
                name: call.name.clone(),
                arguments: match &call.arguments {
                    Value::String(raw) => dates.fill(raw),
                    Value::Null => "{}".to_owned(),
                    other => dates.fill_json(other).to_string(),
                },
            })
            .collect(),
    }
}

/// `{{result.a.b}}` replaced by that field of the tool answer in `last` (looked for in the
/// answer, its `result`, then the JSON text of its `output`; a string as it is,
/// anything else as JSON); a field the answer lacks, or a message that is not a tool's JSON
/// answer, leaves nothing in its place.
fn fill_result(text: &str, last: &Value) -> String {
    const OPEN: &str = "{{result.";
    if !text.contains(OPEN) {
        return text.to_owned();
    }
    let answer: Value = if last["role"] == "tool" {
        serde_json::from_str(&message_text(last)).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    // The engine sends a tool's answer as `{"output": "<the tool's JSON, as text>"}`.
    let output: Option<Value> = answer
        .get("output")
        .and_then(Value::as_str)
        .and_then(|o| serde_json::from_str(o).ok());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let pointer = format!("/{}", after[..end].replace('.', "/"));
        let value = answer
            .pointer(&pointer)
            .or_else(|| answer.get("result").and_then(|r| r.pointer(&pointer)))
            .or_else(|| output.as_ref().and_then(|o| o.pointer(&pointer)));
        match value {
            Some(Value::String(s)) => out.push_str(s),
            Some(Value::Null) | None => {}
            Some(other) => out.push_str(&other.to_string()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

pub(super) struct ResolvedReply {
    pub(super) text: String,
    pub(super) calls: Vec<ResolvedCall>,
}

pub(super) struct ResolvedCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// One answer, rendered as a stream or a document.
struct Answer {
    id: String,
    created: u64,
    model: String,
    reply: ResolvedReply,
    prompt_tokens: u64,
}

impl Answer {
    fn new(reply: ResolvedReply, model: String, request: &Value) -> Answer {
        Answer {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: now_secs(),
            model,
            reply,
            prompt_tokens: estimate_tokens(&request["messages"].to_string()),
        }
    }

    fn finish_reason(&self) -> &'static str {
        if self.reply.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    fn usage(&self) -> Value {
        let completion = estimate_tokens(&self.reply.text)
            + self
                .reply
                .calls
                .iter()
                .map(|c| estimate_tokens(&c.arguments) + 4)
                .sum::<u64>();
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    fn chunk(&self, delta: Value, finish: Option<&str>, include_usage: bool) -> String {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_emulator",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        format!("data: {chunk}\n\n")
    }

    /// The event stream of this answer.
    fn events(&self, script: &Script, include_usage: bool) -> Vec<String> {
        let mut events = Vec::new();
        let text: Vec<char> = self.reply.text.chars().collect();
        if !text.is_empty() || self.reply.calls.is_empty() {
            events.push(self.chunk(
                json!({"role": "assistant", "content": "", "refusal": null}),
                None,
                include_usage,
            ));
            for piece in text.chunks(script.chunk_chars.max(1)) {
                let piece: String = piece.iter().collect();
                events.push(self.chunk(json!({"content": piece}), None, include_usage));
            }
        }
        for (index, call) in self.reply.calls.iter().enumerate() {
            let head = json!({"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}});
            // Like the real service, the first chunk of an answer that opens with a tool call
            // also carries the role.
            let delta = if events.is_empty() {
                json!({"role": "assistant", "content": null, "tool_calls": [head], "refusal": null})
            } else {
                json!({"tool_calls": [head]})
            };
            events.push(self.chunk(delta, None, include_usage));
            let arguments: Vec<char> = call.arguments.chars().collect();
            for piece in arguments.chunks(script.argument_chunk_chars.max(1)) {
                let piece: String = piece.iter().collect();
                events.push(self.chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                    include_usage,
                ));
            }
        }
        events.push(self.chunk(json!({}), Some(self.finish_reason()), include_usage));
        if include_usage {
            let usage = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": "fp_emulator",
                "choices": [],
                "usage": self.usage(),
            });
            events.push(format!("data: {usage}\n\n"));
        }
        events.push("data: [DONE]\n\n".to_owned());
        events
    }

    /// The `chat.completion` document of this answer.
    fn document(&self) -> Value {
        let mut message = json!({
            "role": "assistant",
            "content": if self.reply.text.is_empty() { Value::Null } else { json!(self.reply.text) },
            "refusal": null,
        });
        if !self.reply.calls.is_empty() {
            message["tool_calls"] = self
                .reply
                .calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect();
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_emulator",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        })
    }
}

pub(super) fn stream_response(events: Vec<String>, delay: Duration) -> Response {
    let events = std::collections::VecDeque::from(events);
    let body = futures::stream::unfold((events, true), move |(mut events, first)| async move {
        let event = events.pop_front()?;
        if !first && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Some((
            Ok::<Bytes, std::convert::Infallible>(Bytes::from(event)),
            (events, false),
        ))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

pub(super) fn error_response(error: &ErrorReply) -> Response {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match &error.body {
        Some(Value::String(text)) => (status, text.clone()).into_response(),
        Some(body) => (status, Json(body.clone())).into_response(),
        None => default_error(status),
    };
    for (name, value) in &error.headers {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            header::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The body the real service sends for a status.
fn default_error(status: StatusCode) -> Response {
    match status.as_u16() {
        401 => openai_error(
            status,
            "Incorrect API key provided.",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        404 => openai_error(
            status,
            "The model does not exist or you do not have access to it.",
            "invalid_request_error",
            Some("model_not_found"),
        ),
        429 => openai_error(
            status,
            "Rate limit reached for requests.",
            "requests",
            Some("rate_limit_exceeded"),
        ),
        400 => openai_error(
            status,
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
            "invalid_request_error",
            Some("context_length_exceeded"),
        ),
        s if s >= 500 => openai_error(
            status,
            "The server had an error while processing your request.",
            "server_error",
            None,
        ),
        _ => openai_error(status, "The request failed.", "invalid_request_error", None),
    }
}

fn openai_error(status: StatusCode, message: &str, kind: &str, code: Option<&str>) -> Response {
    (
        status,
        Json(json!({"error": {"message": message, "type": kind, "param": null, "code": code}})),
    )
        .into_response()
}

fn new_call_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &hex[..24])
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A rough token count (a token is about four bytes of English, one or two CJK characters).
pub(super) fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The dates the placeholders stand for.
struct Dates {
    today: String,
    tomorrow: String,
    day_after_tomorrow: String,
    tz: String,
}

impl Dates {
    fn now(offset_minutes: i32) -> Dates {
        let secs = now_secs() as i64 + i64::from(offset_minutes) * 60;
        let day = secs.div_euclid(86_400);
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let abs = offset_minutes.unsigned_abs();
        Dates {
            today: civil_date(day),
            tomorrow: civil_date(day + 1),
            day_after_tomorrow: civil_date(day + 2),
            tz: format!("{sign}{:02}:{:02}", abs / 60, abs % 60),
        }
    }

    fn fill(&self, text: &str) -> String {
        if !text.contains("{{") {
            return text.to_owned();
        }
        text.replace("{{today}}", &self.today)
            .replace("{{tomorrow}}", &self.tomorrow)
            .replace("{{day_after_tomorrow}}", &self.day_after_tomorrow)
            .replace("{{tz}}", &self.tz)
    }

    fn fill_json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.fill(s)),
            Value::Array(items) => items.iter().map(|v| self.fill_json(v)).collect(),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.fill_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (the proleptic Gregorian "civil from days"
/// conversion), so no date crate is needed for three placeholders.
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn civil_dates_are_right_across_leap_years_and_eras() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(-1), "1969-12-31");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_819), "2027-01-01");
        assert_eq!(civil_date(20_513), "2026-03-01");
    }

    #[test]
    fn result_placeholders_quote_the_tool_answer() {
        let tool =
            |content: &str| json!({"role": "tool", "tool_call_id": "c1", "content": content});
        let answer =
            tool(r#"{"summary": "评审会", "start": "2030-01-07 16:00", "attendees_invited": 2}"#);
        assert_eq!(
            fill_result(
                "已创建「{{result.summary}}」，{{result.start}}，邀请 {{result.attendees_invited}} 人{{result.nope}}。",
                &answer
            ),
            "已创建「评审会」，2030-01-07 16:00，邀请 2 人。"
        );
        let wrapped = tool(r#"{"result": {"summary": "周会"}}"#);
        assert_eq!(fill_result("{{result.summary}}", &wrapped), "周会");
        let engine = tool(r#"{"output": "{\"summary\": \"站会\", \"start\": \"09:30\"}"}"#);
        assert_eq!(
            fill_result("{{result.summary}} {{result.start}}", &engine),
            "站会 09:30"
        );
        assert_eq!(
            fill_result(
                "x {{result.summary}}",
                &json!({"role": "user", "content": "{\"summary\": 1}"})
            ),
            "x ",
            "only a tool's answer is quoted"
        );
        assert_eq!(
            fill_result("open {{result.summary", &answer),
            "open {{result.summary"
        );
    }

    #[test]
    fn placeholders_fill_strings_inside_arguments() {
        let dates = Dates {
            today: "2026-11-30".into(),
            tomorrow: "2026-12-01".into(),
            day_after_tomorrow: "2026-12-02".into(),
            tz: "+08:00".into(),
        };
        assert_eq!(
            dates.fill_json(&json!({"a": ["{{tomorrow}}T09:00:00{{tz}}"], "n": 1})),
            json!({"a": ["2026-12-01T09:00:00+08:00"], "n": 1})
        );
    }

    #[test]
    fn a_step_must_be_a_reply_or_an_error() {
        let err = Script::from_json(r#"{"steps": [{"when": {"role": "user"}}]}"#).unwrap_err();
        assert!(matches!(err, ScriptError::Ambiguous { index: 0 }));
        let err = Script::from_json(r#"{"steps": [{"error": {"status": 1000}}]}"#).unwrap_err();
        assert!(matches!(err, ScriptError::BadStatus { .. }));
        assert!(Script::from_json(r#"{"steps": [{"reply": {"txt": "typo"}}]}"#).is_err());
    }

    #[test]
    fn the_users_language_is_told_by_script_from_their_latest_words() {
        assert_eq!(Language::of_text("帮我 review 一下"), Some(Language::Zh));
        assert_eq!(Language::of_text("Set up a review"), Some(Language::En));
        assert_eq!(
            Language::of_text("𠀀"),
            Some(Language::Zh),
            "beyond the BMP"
        );
        assert_eq!(Language::of_text("12:30 ?! 👍"), None);
        let notes = vec!["Update on the earlier call".to_owned()];
        let user = |text: &str| json!({"role": "user", "content": text});
        let conversation = [
            json!({"role": "system", "content": "你是飞书助手。"}),
            user("hello"),
            json!({"role": "assistant", "content": "好的。"}),
            user("👍"),
            user("Update on the earlier call x (c1): it answered: {\"summary\": \"周会\"}"),
            json!({"role": "tool", "tool_call_id": "c1", "content": "{\"summary\": \"周会\"}"}),
        ];
        assert_eq!(
            Language::of_user(&conversation, &notes),
            Some(Language::En),
            "the system's, the assistant's, the tool's and the app's words never count"
        );
        assert_eq!(
            Language::of_user(&conversation, &[]),
            Some(Language::Zh),
            "without the note, the note is taken for the user's"
        );
        assert_eq!(Language::of_user(&conversation[..1], &notes), None);
        let switched = [user("hello"), user("那就明天吧")];
        assert_eq!(Language::of_user(&switched, &notes), Some(Language::Zh));
    }

    #[test]
    fn the_demo_script_is_valid() {
        let script = Script::demo().unwrap();
        assert!(script.steps.len() >= 6);
    }
}
