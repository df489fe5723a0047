//! Anthropic Messages (`POST {base}/messages`, `stream: true`), authenticated with `x-api-key`
//! and versioned with `anthropic-version`.
//!
//! Function calls are `tool_use` content blocks of the assistant; function responses are
//! `tool_result` blocks of the next user message, placed first as the API requires. The stream is
//! named events: `message_start`, then per content block `content_block_start`, `…_delta`
//! (`text_delta` or `input_json_delta` fragments of a tool's input), `…_stop`, then
//! `message_delta` (stop reason, usage) and `message_stop`. `ping` keeps the connection alive and
//! `error` reports a failure (often `overloaded_error`) inside a successful response.
//!
//! Models that think (adaptive thinking is on by default on current Claude models) stream
//! `thinking` blocks (`thinking_delta`, then a `signature_delta`) or `redacted_thinking` blocks.
//! They become [`agent::Part::Reasoning`] with their signature, and go back, unchanged and
//! before the `tool_use` blocks, in the assistant message: the API requires the thinking of a
//! tool-using turn to come back with the tool results. Thinking without a signature is shown
//! but never sent, as the API would refuse it.

use std::collections::{BTreeMap, VecDeque};

use agent::{
    Content, FinishReason, LlmRequest, Model, ModelError, ModelStream, Part, Reasoning,
    UsageMetadata,
};
use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::errors::{Context, ErrorInfo};
use crate::history::{self, CallIds};
use crate::http::{self, ConfigError, Usage, UsageCell};
use crate::provider::{Base, ModelOptions, ProviderConfig, ToolChoice};
use crate::sse::SseEvent;
use crate::stream::{self, Decoder, Item, PendingCall};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The image types the Messages API accepts inline.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// A Claude model behind the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    base: Base,
}

impl AnthropicProvider {
    /// A provider for these settings.
    pub fn new(config: ProviderConfig) -> Result<Self, ConfigError> {
        let label = config.label.clone();
        if config.api_key.is_none() {
            return Err(ConfigError::MissingKey {
                provider: label,
                key_name: "anthropic_api_key".to_owned(),
            });
        }
        Ok(AnthropicProvider {
            base: Base::new(config)?,
        })
    }

    /// The token counts of the last complete response.
    pub fn last_usage(&self) -> Option<Usage> {
        self.base.last_usage()
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let options = &self.base.options;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.base.model_for(request)));
        body.insert(
            "max_tokens".into(),
            json!(
                options
                    .max_tokens
                    .unwrap_or(ModelOptions::ANTHROPIC_DEFAULT_MAX_TOKENS)
            ),
        );
        if let Some(system) = history::system_text(request) {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(messages(request)));
        let tools: Vec<Value> = history::declarations(request)
            .into_iter()
            .map(|d| {
                let mut tool = Map::new();
                tool.insert("name".into(), json!(d.name));
                if let Some(description) = &d.description {
                    tool.insert("description".into(), json!(description));
                }
                tool.insert("input_schema".into(), history::parameters(d));
                Value::Object(tool)
            })
            .collect();
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
            if let Some(choice) = &options.tool_choice {
                body.insert(
                    "tool_choice".into(),
                    match choice {
                        ToolChoice::Auto => json!({"type": "auto"}),
                        ToolChoice::None => json!({"type": "none"}),
                        ToolChoice::Required => json!({"type": "any"}),
                        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
                    },
                );
            }
        }
        if let Some(temperature) = options.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }
}

fn messages(request: &LlmRequest) -> Vec<Value> {
    let mut ids = CallIds::default();
    let mut out = Vec::new();
    for content in &request.contents {
        let (role, blocks) = if content.is_model() {
            ("assistant", assistant_blocks(content, &mut ids))
        } else {
            ("user", user_blocks(content, &mut ids))
        };
        if !blocks.is_empty() {
            out.push(json!({"role": role, "content": blocks}));
        }
    }
    out
}

fn assistant_blocks(content: &Content, ids: &mut CallIds) -> Vec<Value> {
    let mut blocks = Vec::new();
    for part in &content.parts {
        match part {
            Part::Reasoning(Reasoning {
                signature: Some(signature),
                redacted: true,
                ..
            }) => blocks.push(json!({"type": "redacted_thinking", "data": signature})),
            Part::Reasoning(Reasoning {
                text,
                signature: Some(signature),
                ..
            }) => blocks.push(json!({
                "type": "thinking",
                "thinking": text,
                "signature": signature,
            })),
            // The API refuses empty text blocks.
            Part::Text(text) if !text.is_empty() => {
                blocks.push(json!({"type": "text", "text": text}));
            }
            Part::FunctionCall(call) => blocks.push(json!({
                "type": "tool_use",
                "id": ids.call(call),
                "name": call.name,
                "input": Value::Object(call.args.clone()),
            })),
            _ => {}
        }
    }
    blocks
}

fn user_blocks(content: &Content, ids: &mut CallIds) -> Vec<Value> {
    // Tool results first: the API wants them at the start of the message after the tool use.
    let mut blocks: Vec<Value> = content
        .function_responses()
        .map(|response| {
            json!({
                "type": "tool_result",
                "tool_use_id": ids.response(response),
                "content": history::response_text(response),
                "is_error": history::is_error(response),
            })
        })
        .collect();
    for part in &content.parts {
        match part {
            Part::Text(text) if !text.is_empty() => {
                blocks.push(json!({"type": "text", "text": text}));
            }
            Part::InlineData(blob) => {
                let mime = blob.mime_type.as_deref().unwrap_or_default().to_lowercase();
                if IMAGE_TYPES.contains(&mime.as_str()) {
                    blocks.push(json!({
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": mime,
                            "data": base64::engine::general_purpose::STANDARD.encode(&blob.raw_data),
                        },
                    }));
                } else if let Some(text) = history::blob_text(blob) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
            }
            _ => {}
        }
    }
    blocks
}

#[async_trait]
impl Model for AnthropicProvider {
    fn name(&self) -> &str {
        &self.base.model
    }

    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError> {
        let model = self.base.model_for(&request).to_owned();
        let body = self.request_body(&request);
        let url = format!("{}/messages", self.base.base_url);
        let key = self.base.key.clone();
        let usage = self.base.usage.clone();
        let client = &self.base.client;
        http::open(
            &self.base.transport(&model),
            || {
                let mut builder = client
                    .post(&url)
                    .header("anthropic-version", ANTHROPIC_VERSION)
                    .json(&body);
                if let Some(key) = &key
                    && let Ok(mut value) = reqwest::header::HeaderValue::from_str(key.expose())
                {
                    value.set_sensitive(true);
                    builder = builder.header("x-api-key", value);
                }
                builder
            },
            || MessagesDecoder::new(usage.clone()),
        )
        .await
    }
}

#[derive(Deserialize)]
struct EventWire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    message: Option<MessageWire>,
    #[serde(default)]
    content_block: Option<BlockWire>,
    #[serde(default)]
    delta: Option<DeltaWire>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct MessageWire {
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct BlockWire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    /// `redacted_thinking`: the encrypted reasoning.
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct DeltaWire {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct UsageWire {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

/// A Messages stop reason in the engine's words.
fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::MaxTokens,
        "refusal" => FinishReason::Refusal,
        _ => FinishReason::Other,
    }
}

enum Block {
    Text(String),
    Thinking(Reasoning),
    ToolUse {
        call: PendingCall,
        /// The `input` of `content_block_start`, used when no fragment follows.
        initial: Option<Value>,
    },
    /// Thinking and other blocks the engine has no part for.
    Other,
}

/// Reads a Messages stream.
pub(crate) struct MessagesDecoder {
    blocks: BTreeMap<u32, Block>,
    started: bool,
    usage: UsageMetadata,
    /// Input tokens of all kinds: the API counts cache reads and writes apart from `input_tokens`.
    input: [Option<u64>; 3],
    stop_reason: Option<String>,
    usage_cell: UsageCell,
}

impl MessagesDecoder {
    pub fn new(usage_cell: UsageCell) -> Self {
        MessagesDecoder {
            blocks: BTreeMap::new(),
            started: false,
            usage: UsageMetadata::default(),
            input: [None; 3],
            stop_reason: None,
            usage_cell,
        }
    }

    /// Usage comes in `message_start` (input, first output count) and again, cumulative, in
    /// `message_delta`; a later value replaces an earlier one.
    fn add_usage(&mut self, usage: Option<UsageWire>) {
        let usage = usage.unwrap_or_default();
        for (slot, value) in self.input.iter_mut().zip([
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        ]) {
            if value.is_some() {
                *slot = value;
            }
        }
        self.usage.prompt_token_count = self.input.iter().flatten().sum();
        if let Some(cached) = self.input[1] {
            self.usage.cached_content_token_count = Some(cached);
        }
        if let Some(output) = usage.output_tokens {
            self.usage.candidates_token_count = output;
        }
    }

    fn finish(&mut self) -> agent::LlmResponse {
        http::store_usage(&self.usage_cell, Usage::from(self.usage), "anthropic");
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for block in std::mem::take(&mut self.blocks).into_values() {
            match block {
                Block::Thinking(reasoning)
                    if !reasoning.text.is_empty() || reasoning.signature.is_some() =>
                {
                    parts.push(Part::Reasoning(reasoning));
                }
                Block::Text(text) if !text.is_empty() => parts.push(Part::Text(text)),
                Block::ToolUse { mut call, initial } => {
                    if call.arguments.trim().is_empty()
                        && let Some(initial) = initial
                    {
                        call.arguments = initial.to_string();
                    }
                    calls.push(call);
                }
                _ => {}
            }
        }
        let reason = self.stop_reason.as_deref().map(stop_reason);
        if let Some(raw) = &self.stop_reason
            && !reason.is_some_and(FinishReason::is_complete)
        {
            tracing::info!(stop_reason = %raw, "the model's answer did not end normally");
        }
        let mut response = stream::final_response(parts, calls);
        response.finish_reason = reason;
        response.usage_metadata = self.started.then_some(self.usage);
        response
    }
}

impl Decoder for MessagesDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError> {
        let wire: EventWire = stream::parse_json(&event.data, ctx)?;
        match wire.kind.as_str() {
            "message_start" => {
                self.started = true;
                self.add_usage(wire.message.and_then(|m| m.usage));
            }
            "content_block_start" => {
                let (Some(index), Some(block)) = (wire.index, wire.content_block) else {
                    return Err(ctx.malformed("content_block_start without index or block"));
                };
                let block = match block.kind.as_str() {
                    "text" => {
                        let text = block.text.unwrap_or_default();
                        if !text.is_empty() {
                            out.push_back(Ok(stream::partial_text(&text)));
                        }
                        Block::Text(text)
                    }
                    "thinking" => {
                        let text = block.thinking.unwrap_or_default();
                        if !text.is_empty() {
                            out.push_back(Ok(stream::partial_reasoning(&text)));
                        }
                        Block::Thinking(Reasoning {
                            text,
                            signature: block.signature.filter(|s| !s.is_empty()),
                            redacted: false,
                        })
                    }
                    "redacted_thinking" => Block::Thinking(Reasoning {
                        text: String::new(),
                        signature: block.data,
                        redacted: true,
                    }),
                    "tool_use" => Block::ToolUse {
                        call: PendingCall {
                            id: block.id,
                            name: block.name.unwrap_or_default(),
                            arguments: String::new(),
                        },
                        initial: block
                            .input
                            .filter(|v| v.as_object().is_some_and(|m| !m.is_empty())),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let (Some(index), Some(delta)) = (wire.index, wire.delta) else {
                    return Err(ctx.malformed("content_block_delta without index or delta"));
                };
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(ctx.malformed(format!("a delta for block {index}, never started")));
                };
                match (delta.kind.as_deref(), block) {
                    (Some("text_delta"), Block::Text(text)) => {
                        let fragment = delta.text.unwrap_or_default();
                        if !fragment.is_empty() {
                            out.push_back(Ok(stream::partial_text(&fragment)));
                            text.push_str(&fragment);
                        }
                    }
                    (Some("input_json_delta"), Block::ToolUse { call, .. }) => {
                        call.arguments
                            .push_str(delta.partial_json.as_deref().unwrap_or_default());
                    }
                    (Some("thinking_delta"), Block::Thinking(reasoning)) => {
                        let fragment = delta.thinking.unwrap_or_default();
                        if !fragment.is_empty() {
                            out.push_back(Ok(stream::partial_reasoning(&fragment)));
                            reasoning.text.push_str(&fragment);
                        }
                    }
                    (Some("signature_delta"), Block::Thinking(reasoning)) => {
                        if let Some(signature) = delta.signature {
                            reasoning
                                .signature
                                .get_or_insert_with(String::new)
                                .push_str(&signature);
                        }
                    }
                    // Citations and kinds added later: nothing the engine shows.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = wire.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                self.add_usage(wire.usage);
            }
            "message_stop" => {
                out.push_back(Ok(self.finish()));
                return Ok(true);
            }
            "error" => {
                let error = wire.error.unwrap_or(Value::Null);
                return Err(ctx.stream_error(&ErrorInfo::from_value(&json!({"error": error}))));
            }
            // `ping`, `content_block_stop` and event types added later.
            _ => {}
        }
        Ok(false)
    }

    fn end(&mut self, ctx: &Context) -> Item {
        Err(ctx.incomplete(if self.started {
            "no message_stop"
        } else {
            "no message_start"
        }))
    }
}
