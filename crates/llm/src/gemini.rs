//! Google Gemini (`POST {base}/models/{model}:streamGenerateContent?alt=sse`), authenticated
//! with the `x-goog-api-key` header (never the `key=` query parameter, which would put the key in
//! URLs and so in error texts and logs).
//!
//! Function calls are `functionCall` parts of `model` contents and responses `functionResponse`
//! parts of `user` contents; Gemini pairs them by order and name, and may give calls no id, so
//! the decoder makes one (`call_<n>_<name>`, stable for a given response). Every event is a
//! whole `GenerateContentResponse`; there is no end marker, so an answer is whole when a
//! candidate has a `finishReason` and the connection then closes.
//!
//! Newer models attach a `thoughtSignature` to function-call parts and refuse a history in which
//! the call comes back without it. The engine's parts have no room for it, so the provider keeps
//! the signatures it received, keyed by the call's name and arguments, and puts them back.
//! Thought summaries (`thought: true` parts) become [`agent::Part::Reasoning`] for the user to
//! read; they are not sent back, as the signatures carry what the model needs.
//!
//! Every `finishReason` reaches the engine ([`agent::FinishReason`]): `SAFETY` and its kin,
//! `RECITATION`, `MALFORMED_FUNCTION_CALL` and `MAX_TOKENS` are answers that did not end well,
//! not errors, so the engine can retry or tell the user what happened.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use agent::{
    FinishReason, FunctionCall, LlmRequest, Model, ModelError, ModelStream, Part, Reasoning,
    UsageMetadata,
};
use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::errors::{Context, ErrorInfo};
use crate::history;
use crate::http::{self, ConfigError, Usage, UsageCell};
use crate::provider::{Base, ProviderConfig, ToolChoice};
use crate::sse::SseEvent;
use crate::stream::{self, Decoder, Item, PendingCall};

/// The most thought signatures remembered; past that the oldest session's are forgotten first
/// (the map is simply cleared: a lost signature only matters for a call still in the history).
const MAX_SIGNATURES: usize = 1024;

type Signatures = Arc<Mutex<HashMap<String, String>>>;

fn signature_key(name: &str, args: &Map<String, Value>) -> String {
    format!("{name}\u{0}{}", Value::Object(args.clone()))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map holds plain strings that a panic cannot leave half-updated.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A Gemini model behind the Generative Language API.
#[derive(Debug)]
pub struct GeminiProvider {
    base: Base,
    signatures: Signatures,
}

impl GeminiProvider {
    /// A provider for these settings.
    pub fn new(config: ProviderConfig) -> Result<Self, ConfigError> {
        if config.api_key.is_none() {
            return Err(ConfigError::MissingKey {
                provider: config.label,
                key_name: "gemini_api_key".to_owned(),
            });
        }
        Ok(GeminiProvider {
            base: Base::new(config)?,
            signatures: Arc::default(),
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
        body.insert(
            "contents".into(),
            Value::Array(contents(request, &lock(&self.signatures))),
        );
        if let Some(system) = history::system_text(request) {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        let declarations: Vec<Value> = history::declarations(request)
            .into_iter()
            .map(|d| {
                let mut declaration = Map::new();
                declaration.insert("name".into(), json!(d.name));
                if let Some(description) = &d.description {
                    declaration.insert("description".into(), json!(description));
                }
                // `parametersJsonSchema` takes JSON Schema as the tools write it; the older
                // `parameters` field accepts only an OpenAPI subset.
                declaration.insert("parametersJsonSchema".into(), history::parameters(d));
                Value::Object(declaration)
            })
            .collect();
        if !declarations.is_empty() {
            body.insert(
                "tools".into(),
                json!([{"functionDeclarations": declarations}]),
            );
            if let Some(choice) = &options.tool_choice {
                let config = match choice {
                    ToolChoice::Auto => json!({"mode": "AUTO"}),
                    ToolChoice::None => json!({"mode": "NONE"}),
                    ToolChoice::Required => json!({"mode": "ANY"}),
                    ToolChoice::Function(name) => {
                        json!({"mode": "ANY", "allowedFunctionNames": [name]})
                    }
                };
                body.insert(
                    "toolConfig".into(),
                    json!({"functionCallingConfig": config}),
                );
            }
        }
        let mut generation = Map::new();
        if let Some(max_tokens) = options.max_tokens {
            generation.insert("maxOutputTokens".into(), json!(max_tokens));
        }
        if let Some(temperature) = options.temperature {
            generation.insert("temperature".into(), json!(temperature));
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Value::Object(body)
    }
}

fn contents(request: &LlmRequest, signatures: &HashMap<String, String>) -> Vec<Value> {
    let mut out = Vec::new();
    for content in &request.contents {
        let role = if content.is_model() { "model" } else { "user" };
        let mut parts = Vec::new();
        for part in &content.parts {
            match part {
                Part::Text(text) if !text.is_empty() => parts.push(json!({"text": text})),
                Part::Text(_) | Part::Reasoning(_) => {}
                Part::FunctionCall(call) => {
                    let mut wire = json!({
                        "functionCall": {"name": call.name, "args": Value::Object(call.args.clone())}
                    });
                    if let Some(signature) = signatures.get(&signature_key(&call.name, &call.args))
                    {
                        wire["thoughtSignature"] = json!(signature);
                    }
                    parts.push(wire);
                }
                Part::FunctionResponse(response) => parts.push(json!({
                    "functionResponse": {
                        "name": response.name,
                        "response": Value::Object(response.response.clone()),
                    }
                })),
                Part::InlineData(blob) => parts.push(json!({
                    "inlineData": {
                        "mimeType": blob.mime_type.as_deref().unwrap_or("application/octet-stream"),
                        "data": base64::engine::general_purpose::STANDARD.encode(&blob.raw_data),
                    }
                })),
            }
        }
        if !parts.is_empty() {
            out.push(json!({"role": role, "parts": parts}));
        }
    }
    out
}

#[async_trait]
impl Model for GeminiProvider {
    fn name(&self) -> &str {
        &self.base.model
    }

    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError> {
        let model = self.base.model_for(&request).to_owned();
        let body = self.request_body(&request);
        let path_model = model.strip_prefix("models/").unwrap_or(&model);
        let url = format!(
            "{}/models/{}:streamGenerateContent?alt=sse",
            self.base.base_url, path_model
        );
        let key = self.base.key.clone();
        let usage = self.base.usage.clone();
        let signatures = self.signatures.clone();
        let client = &self.base.client;
        http::open(
            &self.base.transport(&model),
            || {
                let mut builder = client.post(&url).json(&body);
                if let Some(key) = &key
                    && let Ok(mut value) = reqwest::header::HeaderValue::from_str(key.expose())
                {
                    value.set_sensitive(true);
                    builder = builder.header("x-goog-api-key", value);
                }
                builder
            },
            || GenerateDecoder::new(usage.clone(), signatures.clone()),
        )
        .await
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseWire {
    #[serde(default)]
    candidates: Vec<CandidateWire>,
    #[serde(default)]
    usage_metadata: Option<UsageWire>,
    #[serde(default)]
    prompt_feedback: Option<FeedbackWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CandidateWire {
    #[serde(default)]
    content: Option<ContentWire>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    index: u32,
}

#[derive(Deserialize)]
struct ContentWire {
    #[serde(default)]
    parts: Vec<PartWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartWire {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<CallWire>,
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct CallWire {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageWire {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FeedbackWire {
    #[serde(default)]
    block_reason: Option<String>,
}

/// A `finishReason` in the engine's words.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::MaxTokens,
        "SAFETY" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        "RECITATION" => FinishReason::Recitation,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => FinishReason::MalformedFunctionCall,
        _ => FinishReason::Other,
    }
}

/// Reads a `streamGenerateContent` stream.
pub(crate) struct GenerateDecoder {
    text: String,
    thoughts: String,
    calls: Vec<(PendingCall, Option<String>)>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    usage_cell: UsageCell,
    signatures: Signatures,
}

impl GenerateDecoder {
    pub fn new(usage_cell: UsageCell, signatures: Signatures) -> Self {
        GenerateDecoder {
            text: String::new(),
            thoughts: String::new(),
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            usage_cell,
            signatures,
        }
    }

    fn finish(&mut self, _ctx: &Context) -> Item {
        if let Some(usage) = self.usage {
            http::store_usage(&self.usage_cell, Usage::from(usage), "gemini");
        }
        let raw = self.finish_reason.as_deref().unwrap_or_default();
        let mut reason = finish_reason(raw);
        if reason == FinishReason::Stop && !self.calls.is_empty() {
            reason = FinishReason::ToolCalls;
        }
        if !reason.is_complete() {
            tracing::info!(finish_reason = %raw, "the model's answer did not end normally");
        }
        let mut parts = Vec::new();
        if !self.thoughts.is_empty() {
            parts.push(Part::Reasoning(Reasoning::new(std::mem::take(
                &mut self.thoughts,
            ))));
        }
        if !self.text.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut self.text)));
        }
        let mut calls = Vec::new();
        for (call, signature) in std::mem::take(&mut self.calls) {
            if let (Some(signature), Ok(FunctionCall { name, args, .. })) =
                (signature, call.clone().finish())
            {
                let mut signatures = lock(&self.signatures);
                if signatures.len() >= MAX_SIGNATURES {
                    signatures.clear();
                }
                signatures.insert(signature_key(&name, &args), signature);
            }
            calls.push(call);
        }
        let mut response = stream::final_response(parts, calls);
        response.finish_reason = Some(reason);
        response.usage_metadata = self.usage;
        Ok(response)
    }
}

impl Decoder for GenerateDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError> {
        let wire: ResponseWire = stream::parse_json(&event.data, ctx)?;
        if let Some(error) = wire.error {
            return Err(ctx.stream_error(&ErrorInfo::from_value(&json!({ "error": error }))));
        }
        if let Some(reason) = wire.prompt_feedback.and_then(|f| f.block_reason) {
            return Err(ModelError::new(
                "blocked",
                format!(
                    "{} refused the request ({reason}). Rephrase the request.",
                    ctx.provider
                ),
            ));
        }
        if let Some(usage) = wire.usage_metadata {
            // Gemini counts thinking apart from the candidates; the engine's count includes it.
            let thoughts = usage.thoughts_token_count;
            self.usage = Some(UsageMetadata {
                prompt_token_count: usage.prompt_token_count,
                candidates_token_count: usage
                    .candidates_token_count
                    .saturating_add(thoughts.unwrap_or(0)),
                thoughts_token_count: thoughts,
                cached_content_token_count: usage.cached_content_token_count,
            });
        }
        for candidate in wire.candidates {
            if candidate.index != 0 {
                continue;
            }
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) = part.function_call {
                    let n = self.calls.len();
                    let id = call
                        .id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("call_{n}_{}", call.name));
                    let arguments = match call.args {
                        None | Some(Value::Null) => String::new(),
                        Some(args) => args.to_string(),
                    };
                    self.calls.push((
                        PendingCall {
                            id: Some(id),
                            name: call.name,
                            arguments,
                        },
                        part.thought_signature,
                    ));
                } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    if part.thought {
                        out.push_back(Ok(stream::partial_reasoning(&text)));
                        self.thoughts.push_str(&text);
                    } else {
                        out.push_back(Ok(stream::partial_text(&text)));
                        self.text.push_str(&text);
                    }
                }
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(false)
    }

    fn end(&mut self, ctx: &Context) -> Item {
        if self.finish_reason.is_some() {
            self.finish(ctx)
        } else {
            Err(ctx.incomplete("no finishReason"))
        }
    }
}
