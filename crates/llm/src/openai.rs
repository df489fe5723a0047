//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`, `stream: true`).
//!
//! The history maps as the API wants it: the system instruction becomes a `system` message, model
//! contents become `assistant` messages whose `tool_calls` carry the engine's call ids, and each
//! function response becomes a `tool` message with the same id in `tool_call_id`.
//!
//! The stream is a series of `chat.completion.chunk` events ended by `data: [DONE]`. Text comes
//! as `delta.content`; a tool call comes as `delta.tool_calls[]` items keyed by `index`, the first
//! carrying `id` and `function.name`, later ones fragments of `function.arguments`, which only
//! parse once all have arrived. With `stream_options.include_usage` a last chunk with no choices
//! carries the token counts; Moonshot puts them in `choices[0].usage` of the last chunk instead,
//! and several services send them unasked.
//!
//! Thinking models (DeepSeek in thinking mode, Kimi K2 thinking, Qwen, GLM) stream their
//! reasoning as `delta.reasoning_content` (some servers: `delta.reasoning`) before the answer; it
//! becomes a [`agent::Part::Reasoning`]. DeepSeek and Kimi refuse (HTTP 400, "Missing
//! `reasoning_content` field in the assistant message") a history in which an assistant message
//! of a tool-using turn comes back without it, so with [`ModelOptions::send_reasoning`] it is
//! sent back on every assistant message of a user turn that called tools — and never elsewhere:
//! OpenAI itself does not know the field.
//!
//! [`ModelOptions::send_reasoning`]: crate::ModelOptions::send_reasoning

use std::collections::{BTreeMap, VecDeque};

use agent::{
    Content, FinishReason, LlmRequest, LlmResponse, Model, ModelError, ModelStream, Part,
    Reasoning, UsageMetadata,
};
use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::errors::{Context, ErrorInfo};
use crate::history::{self, CallIds};
use crate::http::{self, ConfigError, Usage, UsageCell};
use crate::provider::{Base, ProviderConfig, ToolChoice};
use crate::stream::{self, Decoder, Item, PendingCall, Pipeline};

/// A model behind an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    base: Base,
}

impl OpenAiProvider {
    /// A provider for these settings. The key is optional (Ollama needs none).
    pub fn new(config: ProviderConfig) -> Result<Self, ConfigError> {
        Ok(OpenAiProvider {
            base: Base::new(config)?,
        })
    }

    /// The token counts of the last complete response, when the service reported them.
    pub fn last_usage(&self) -> Option<Usage> {
        self.base.last_usage()
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let model = self.base.model_for(request);
        let options = &self.base.options;
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert(
            "messages".into(),
            Value::Array(messages(request, options.send_reasoning)),
        );
        body.insert("stream".into(), json!(true));
        if options.include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let tools: Vec<Value> = history::declarations(request)
            .into_iter()
            .map(|d| {
                let mut function = Map::new();
                function.insert("name".into(), json!(d.name));
                if let Some(description) = &d.description {
                    function.insert("description".into(), json!(description));
                }
                function.insert("parameters".into(), history::parameters(d));
                json!({"type": "function", "function": function})
            })
            .collect();
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
            if let Some(choice) = &options.tool_choice {
                body.insert("tool_choice".into(), tool_choice(choice));
            }
        }
        if let Some(max_tokens) = options.max_tokens {
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        if let Some(temperature) = options.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        Value::Object(body)
    }
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// The conversation as Chat Completions messages.
fn messages(request: &LlmRequest, send_reasoning: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = history::system_text(request) {
        out.push(json!({"role": "system", "content": system}));
    }
    let echo = if send_reasoning {
        tool_turns(&request.contents)
    } else {
        vec![false; request.contents.len()]
    };
    let mut ids = CallIds::default();
    for (content, echo) in request.contents.iter().zip(echo) {
        if content.is_model() {
            if let Some(message) = assistant_message(content, &mut ids, echo) {
                out.push(message);
            }
        } else {
            user_messages(content, &mut ids, &mut out);
        }
    }
    out
}

/// For each content, whether it belongs to a user turn (from one message of the user to the
/// next) in which the model called a tool: DeepSeek's rule for which assistant messages must
/// carry their `reasoning_content` back.
fn tool_turns(contents: &[Content]) -> Vec<bool> {
    let mut marks = vec![false; contents.len()];
    let mut start = 0;
    let starts_turn = |c: &Content| {
        !c.is_model()
            && c.parts
                .iter()
                .any(|p| !matches!(p, Part::FunctionResponse(_)))
    };
    for end in 1..=contents.len() {
        if end == contents.len() || starts_turn(&contents[end]) {
            let turn = &contents[start..end];
            let called = turn
                .iter()
                .any(|c| c.is_model() && c.function_calls().next().is_some());
            if called {
                for mark in &mut marks[start..end] {
                    *mark = true;
                }
            }
            start = end;
        }
    }
    marks
}

fn assistant_message(content: &Content, ids: &mut CallIds, echo_reasoning: bool) -> Option<Value> {
    let text: String = content.parts.iter().filter_map(Part::text).collect();
    let reasoning = content.reasoning_text();
    let calls: Vec<Value> = content
        .function_calls()
        .map(|call| {
            json!({
                "id": ids.call(call),
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": Value::Object(call.args.clone()).to_string(),
                },
            })
        })
        .collect();
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    if echo_reasoning {
        // Always present on these messages, empty if the model gave none: the services check
        // for the field.
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    // `null` rather than "" beside tool calls: some compatible servers reject empty content.
    message.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

/// A user content: its function responses as `tool` messages (they must directly follow the
/// assistant message that made the calls), then its text and images as one `user` message.
fn user_messages(content: &Content, ids: &mut CallIds, out: &mut Vec<Value>) {
    for response in content.function_responses() {
        out.push(json!({
            "role": "tool",
            "tool_call_id": ids.response(response),
            "content": history::response_text(response),
        }));
    }
    let mut items = Vec::new();
    let mut has_image = false;
    for part in &content.parts {
        match part {
            Part::Text(text) => items.push(json!({"type": "text", "text": text})),
            Part::InlineData(blob) if history::is_image(blob) => {
                has_image = true;
                let url = format!(
                    "data:{};base64,{}",
                    blob.mime_type.as_deref().unwrap_or("image/png"),
                    base64::engine::general_purpose::STANDARD.encode(&blob.raw_data)
                );
                items.push(json!({"type": "image_url", "image_url": {"url": url}}));
            }
            Part::InlineData(blob) => {
                if let Some(text) = history::blob_text(blob) {
                    items.push(json!({"type": "text", "text": text}));
                }
            }
            Part::FunctionCall(_) | Part::FunctionResponse(_) | Part::Reasoning(_) => {}
        }
    }
    if items.is_empty() {
        return;
    }
    // Plain text goes as a string: not every compatible server accepts content arrays.
    let content = if has_image {
        Value::Array(items)
    } else {
        json!(
            items
                .iter()
                .filter_map(|i| i["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    out.push(json!({"role": "user", "content": content}));
}

#[async_trait]
impl Model for OpenAiProvider {
    fn name(&self) -> &str {
        &self.base.model
    }

    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError> {
        let model = self.base.model_for(&request).to_owned();
        let body = self.request_body(&request);
        let url = format!("{}/chat/completions", self.base.base_url);
        let key = self.base.key.clone();
        let usage = self.base.usage.clone();
        let client = &self.base.client;
        http::open(
            &self.base.transport(&model),
            || {
                let mut builder = client.post(&url).json(&body);
                if let Some(key) = &key {
                    builder = builder.bearer_auth(key.expose());
                }
                builder
            },
            || ChatDecoder::new(usage.clone()),
        )
        .await
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
    /// Moonshot reports usage here, on the last chunk, rather than at the top level.
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// DeepSeek, Kimi, Qwen, GLM.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM, OpenRouter, Ollama.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment per the spec; a few compatible servers send the whole object.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl UsageWire {
    fn metadata(self) -> UsageMetadata {
        UsageMetadata {
            prompt_token_count: self.prompt_tokens,
            candidates_token_count: self.completion_tokens,
            thoughts_token_count: self
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens),
            cached_content_token_count: self
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(self.prompt_cache_hit_tokens),
        }
    }
}

/// A Chat Completions finish reason in the engine's words. Besides OpenAI's own, GLM says
/// `sensitive` for its content filter and `model_context_window_exceeded` when cut off.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" | "model_context_window_exceeded" => FinishReason::MaxTokens,
        "content_filter" | "sensitive" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Reads a Chat Completions stream.
pub(crate) struct ChatDecoder {
    text: String,
    reasoning: String,
    calls: BTreeMap<u32, PendingCall>,
    last_index: Option<u32>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    usage_cell: UsageCell,
}

impl ChatDecoder {
    pub fn new(usage_cell: UsageCell) -> Self {
        ChatDecoder {
            text: String::new(),
            reasoning: String::new(),
            calls: BTreeMap::new(),
            last_index: None,
            finish_reason: None,
            usage: None,
            usage_cell,
        }
    }

    fn tool_call(&mut self, delta: ToolCallDelta) {
        // Servers that omit `index` send one call per id: a new id starts a new call.
        let index = match delta.index {
            Some(index) => index,
            None => match (self.last_index, &delta.id) {
                (Some(last), Some(id))
                    if self.calls.get(&last).and_then(|c| c.id.as_ref()) != Some(id) =>
                {
                    last + 1
                }
                (Some(last), _) => last,
                (None, _) => 0,
            },
        };
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = delta.id.filter(|id| !id.is_empty())
            && call.id.is_none()
        {
            call.id = Some(id);
        }
        let Some(function) = delta.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty())
            && call.name.is_empty()
        {
            call.name = name;
        }
        match function.arguments {
            Some(Value::String(fragment)) => call.arguments.push_str(&fragment),
            Some(Value::Null) | None => {}
            Some(whole) => call.arguments = whole.to_string(),
        }
    }

    fn finish(&mut self) -> LlmResponse {
        if let Some(usage) = self.usage {
            http::store_usage(&self.usage_cell, Usage::from(usage), "openai");
        }
        let reason = self.finish_reason.as_deref().map(finish_reason);
        if let Some(raw) = &self.finish_reason
            && !reason.is_some_and(FinishReason::is_complete)
        {
            tracing::info!(finish_reason = %raw, "the model's answer did not end normally");
        }
        let mut parts = Vec::new();
        if !self.reasoning.is_empty() {
            parts.push(Part::Reasoning(Reasoning::new(std::mem::take(
                &mut self.reasoning,
            ))));
        }
        if !self.text.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut self.text)));
        }
        let mut response =
            stream::final_response(parts, std::mem::take(&mut self.calls).into_values());
        response.finish_reason = reason;
        response.usage_metadata = self.usage;
        response
    }

    fn chunk(
        &mut self,
        chunk: Chunk,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(ctx.stream_error(&ErrorInfo::from_value(&error)));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.metadata());
        }
        for choice in chunk.choices {
            // One answer is asked for (n = 1); other indexes would be extra candidates.
            if choice.index != 0 {
                continue;
            }
            if let Some(usage) = choice.usage {
                self.usage = Some(usage.metadata());
            }
            if let Some(delta) = choice.delta.or(choice.message) {
                if let Some(thought) = delta
                    .reasoning_content
                    .or(delta.reasoning)
                    .filter(|t| !t.is_empty())
                {
                    out.push_back(Ok(stream::partial_reasoning(&thought)));
                    self.reasoning.push_str(&thought);
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push_back(Ok(stream::partial_text(&text)));
                    self.text.push_str(&text);
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_call(call);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }
}

impl Decoder for ChatDecoder {
    fn event(
        &mut self,
        event: crate::sse::SseEvent,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            out.push_back(Ok(self.finish()));
            return Ok(true);
        }
        if event.event == "error" {
            return Err(ctx.stream_error(&ErrorInfo::parse(data)));
        }
        let chunk: Chunk = stream::parse_json(data, ctx)?;
        self.chunk(chunk, ctx, out)?;
        Ok(false)
    }

    fn end(&mut self, ctx: &Context) -> Item {
        // A few compatible servers end without `[DONE]`; a finish reason says the answer is whole.
        if self.finish_reason.is_some() {
            Ok(self.finish())
        } else {
            Err(ctx.incomplete("no finish reason and no [DONE]"))
        }
    }

    fn whole(&mut self, body: &str, ctx: &Context) -> Item {
        // The server ignored `stream: true` and sent a `chat.completion` document.
        let chunk: Chunk = stream::parse_json(body, ctx)?;
        let mut ignored = VecDeque::new();
        self.chunk(chunk, ctx, &mut ignored)?;
        if self.finish_reason.is_none()
            && self.text.is_empty()
            && self.reasoning.is_empty()
            && self.calls.is_empty()
        {
            return Err(ctx.malformed("the response has no choices"));
        }
        Ok(self.finish())
    }
}

/// The parser of Chat Completions streams exactly as the provider runs it, for measuring and
/// for tools that replay recorded streams: feed bytes, get the engine's items.
pub struct ChatStreamParser {
    pipeline: Pipeline<ChatDecoder>,
    ctx: Context,
    ended: bool,
}

impl std::fmt::Debug for ChatStreamParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStreamParser")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Default for ChatStreamParser {
    fn default() -> Self {
        ChatStreamParser::new()
    }
}

impl ChatStreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        ChatStreamParser {
            pipeline: Pipeline::new(ChatDecoder::new(UsageCell::default())),
            ctx: Context {
                provider: "OpenAI-compatible".to_owned(),
                model: String::new(),
                key: None,
            },
            ended: false,
        }
    }

    /// Feeds bytes; the items they complete go to `out`. Returns `true` once `[DONE]` was seen.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut VecDeque<Result<LlmResponse, ModelError>>,
    ) -> Result<bool, ModelError> {
        if self.ended {
            return Ok(true);
        }
        self.ended = self.pipeline.push(bytes, &self.ctx, out)?;
        Ok(self.ended)
    }

    /// The bytes ended before `push` returned `true`: the final response if the answer is whole
    /// anyway (a finish reason arrived), or `incomplete` if the stream was cut off.
    pub fn end(&mut self) -> Result<LlmResponse, ModelError> {
        self.pipeline.end(&self.ctx)
    }
}
