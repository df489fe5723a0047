//! What goes to a model and what comes back: [`LlmRequest`], [`LlmResponse`], the model settings
//! [`GenerateContentConfig`], and the tool declarations the model is shown.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::content::{Content, Part, ROLE_MODEL};

/// A tool as the model sees it: a name and what it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// What the tool is for.
    pub description: String,
}

/// One function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDeclaration {
    /// The function's name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its parameters as a JSON Schema object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

impl FunctionDeclaration {
    /// A declaration with a description and a parameter schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        FunctionDeclaration {
            name: name.into(),
            description: Some(description.into()),
            parameters: Some(parameters),
        }
    }
}

/// A tool's schema as shown to the model: the functions it supports.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDeclaration {
    /// The functions.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub function_declarations: Vec<FunctionDeclaration>,
}

/// Optional model settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateContentConfig {
    /// Instructions that steer the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    /// The tools the model may use.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tools: Vec<ToolDeclaration>,
    /// Names of tools the model must ignore; this overrides `tools`.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub excluded_tools: Vec<String>,
}

impl GenerateContentConfig {
    /// Adds `tool_name` to `excluded_tools` (once).
    ///
    /// ```
    /// use agent::{FunctionDeclaration, GenerateContentConfig, ToolDeclaration};
    /// let mut config = GenerateContentConfig::default();
    /// config.tools.push(ToolDeclaration {
    ///     function_declarations: vec![
    ///         FunctionDeclaration::new("send_message", "", serde_json::json!({})),
    ///         FunctionDeclaration::new("list_events", "", serde_json::json!({})),
    ///     ],
    /// });
    /// config.hide_tool("send_message");
    /// let visible: Vec<_> = config.visible_function_declarations().map(|d| d.name.as_str()).collect();
    /// assert_eq!(visible, ["list_events"]);
    /// ```
    pub fn hide_tool(&mut self, tool_name: impl Into<String>) {
        let tool_name = tool_name.into();
        if !self.excluded_tools.contains(&tool_name) {
            self.excluded_tools.push(tool_name);
        }
    }

    /// Whether the model must ignore this tool.
    pub fn is_excluded(&self, tool_name: &str) -> bool {
        self.excluded_tools.iter().any(|t| t == tool_name)
    }

    /// The declarations the model is shown: every declared function not excluded.
    pub fn visible_function_declarations(&self) -> impl Iterator<Item = &FunctionDeclaration> {
        self.tools
            .iter()
            .flat_map(|t| t.function_declarations.iter())
            .filter(|d| !self.is_excluded(&d.name))
    }
}

/// A request to a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmRequest {
    /// The model's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation sent to the model.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub contents: Contents,
    /// Model settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<GenerateContentConfig>,
}

/// The conversation of a request: a list of [`Content`]s, read and changed like a `Vec` and
/// serialized as the same JSON array, but shared copy-on-write. The engine keeps the history it
/// last sent and hands each request a share of it, so a long conversation is not copied for every
/// model call (issue 26); the first change through a share that is not the only one copies it,
/// so a callback editing its request never alters what the engine keeps.
#[derive(Clone, Default, PartialEq)]
pub struct Contents(Arc<Vec<Content>>);

impl Deref for Contents {
    type Target = Vec<Content>;

    fn deref(&self) -> &Vec<Content> {
        &self.0
    }
}

impl DerefMut for Contents {
    fn deref_mut(&mut self) -> &mut Vec<Content> {
        Arc::make_mut(&mut self.0)
    }
}

impl fmt::Debug for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.as_slice().fmt(f)
    }
}

impl From<Vec<Content>> for Contents {
    fn from(contents: Vec<Content>) -> Self {
        Contents(Arc::new(contents))
    }
}

impl<'a> IntoIterator for &'a Contents {
    type Item = &'a Content;
    type IntoIter = std::slice::Iter<'a, Content>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Serialize for Contents {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Contents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Content>::deserialize(deserializer).map(Contents::from)
    }
}

/// A model's response (or one streamed chunk of it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmResponse {
    /// The first content of the response.
    pub content: Content,
    /// The content is an incomplete chunk; the agent goes on after emitting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// Function calls whose arguments were not valid JSON. The engine answers each with an error
    /// so the model can correct itself, rather than failing the turn.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub malformed_calls: Vec<MalformedCall>,
    /// Why the model stopped, on the complete response; `None` when the service did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// The tokens this response cost, wherever the service reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
}

/// Why a model stopped generating, each service's own reason mapped onto one vocabulary. Only
/// [`FinishReason::Stop`] and [`FinishReason::ToolCalls`] mean the answer is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The answer is complete (`stop`, `end_turn`, `STOP`).
    Stop,
    /// The model asks for its function calls to be run (`tool_calls`, `tool_use`).
    ToolCalls,
    /// Cut off at the output token limit (`length`, `max_tokens`, `MAX_TOKENS`).
    MaxTokens,
    /// The service's content or safety filter withheld or cut the answer (OpenAI-compatible
    /// `content_filter`, Gemini `SAFETY`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`).
    ContentFilter,
    /// The model declined to answer (Anthropic `refusal`).
    Refusal,
    /// Withheld because it would repeat protected material (Gemini `RECITATION`).
    Recitation,
    /// The model wrote a function call the service could not read (Gemini
    /// `MALFORMED_FUNCTION_CALL`); asking again usually succeeds.
    MalformedFunctionCall,
    /// Any other reason.
    Other,
}

impl FinishReason {
    /// Whether an answer that ended this way is whole.
    pub fn is_complete(self) -> bool {
        matches!(self, FinishReason::Stop | FinishReason::ToolCalls)
    }
}

/// Token counts of one model response (the names of Gemini's `usageMetadata`, which ADK uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageMetadata {
    /// Tokens of the request.
    #[serde(default)]
    pub prompt_token_count: u64,
    /// Tokens generated, reasoning included.
    #[serde(default)]
    pub candidates_token_count: u64,
    /// Of the generated tokens, those spent reasoning, when the service says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u64>,
    /// Of the request's tokens, those read from the service's cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content_token_count: Option<u64>,
}

impl UsageMetadata {
    /// Request and generated tokens together.
    pub fn total_token_count(&self) -> u64 {
        self.prompt_token_count
            .saturating_add(self.candidates_token_count)
    }
}

/// A function call the model made with arguments that do not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MalformedCall {
    /// The call's id, as the model gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The function the model tried to call.
    pub name: String,
    /// The arguments exactly as received.
    pub arguments: String,
    /// Why they do not parse.
    pub error: String,
}

impl LlmResponse {
    /// A complete model response made of these parts.
    ///
    /// ```
    /// use agent::{LlmResponse, Part};
    /// let response = LlmResponse::from_parts(vec![Part::from_text("hello world")]);
    /// assert!(response.content.is_model());
    /// assert_eq!(response.content.text(), "hello world");
    /// ```
    pub fn from_parts(parts: Vec<Part>) -> Self {
        LlmResponse {
            content: Content::new(ROLE_MODEL, parts),
            partial: None,
            malformed_calls: Vec::new(),
            finish_reason: None,
            usage_metadata: None,
        }
    }

    /// Whether this is an incomplete streamed chunk.
    pub fn is_partial(&self) -> bool {
        self.partial == Some(true)
    }
}
