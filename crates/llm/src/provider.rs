//! What a provider is made from: its kind, URL, model, key and options, and [`connect`], which
//! turns settings into an engine [`Model`].

use std::sync::{Arc, Mutex};

use agent::{LlmRequest, Model};

use crate::anthropic::AnthropicProvider;
use crate::errors::Context;
use crate::gemini::GeminiProvider;
use crate::http::{self, ConfigError, HttpSettings, Transport, Usage, UsageCell};
use crate::openai::OpenAiProvider;
use crate::secret::ApiKey;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions, also spoken by DeepSeek, Qwen, Doubao, Kimi, GLM, Ollama, ….
    OpenAiCompatible,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

/// Whether and which tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (every service's default).
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this function.
    Function(String),
}

/// Generation options, sent only when set so each service keeps its own defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOptions {
    /// The tool choice; `None` leaves the service's default (auto).
    pub tool_choice: Option<ToolChoice>,
    /// The most tokens to generate. Anthropic requires a value and gets
    /// [`ModelOptions::ANTHROPIC_DEFAULT_MAX_TOKENS`] when unset.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// OpenAI-compatible only: ask for a final usage chunk (`stream_options.include_usage`).
    /// A few compatible servers refuse unknown options; their presets turn it off.
    pub include_usage: bool,
    /// OpenAI-compatible only: send the model's reasoning back as `reasoning_content` on the
    /// assistant messages of tool-using turns, which DeepSeek and Kimi thinking models require
    /// and OpenAI does not accept. Each preset says; off by default.
    pub send_reasoning: bool,
}

impl ModelOptions {
    /// The `max_tokens` sent to Anthropic when none is set.
    pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            tool_choice: None,
            max_tokens: None,
            temperature: None,
            include_usage: true,
            send_reasoning: false,
        }
    }
}

/// Everything needed to talk to one model.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The protocol.
    pub kind: ProviderKind,
    /// The service's name in messages ("DeepSeek").
    pub label: String,
    /// The API root: `https://api.openai.com/v1`, `https://api.anthropic.com/v1`,
    /// `https://generativelanguage.googleapis.com/v1beta`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The key, when the service needs one.
    pub api_key: Option<ApiKey>,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Generation options.
    pub options: ModelOptions,
}

impl ProviderConfig {
    /// A configuration with default timeouts, retries and options.
    pub fn new(
        kind: ProviderKind,
        label: impl Into<String>,
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        ProviderConfig {
            kind,
            label: label.into(),
            base_url: base_url.into(),
            model: model.into(),
            api_key,
            http: HttpSettings::default(),
            options: ModelOptions::default(),
        }
    }
}

/// Builds the engine model for these settings.
pub fn connect(config: ProviderConfig) -> Result<Arc<dyn Model>, ConfigError> {
    Ok(match config.kind {
        ProviderKind::OpenAiCompatible => Arc::new(OpenAiProvider::new(config)?),
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(config)?),
        ProviderKind::Gemini => Arc::new(GeminiProvider::new(config)?),
    })
}

/// What every provider holds: checked settings, its HTTP client and its last usage.
#[derive(Debug)]
pub(crate) struct Base {
    pub label: String,
    pub base_url: String,
    pub model: String,
    pub key: Option<ApiKey>,
    pub client: reqwest::Client,
    pub settings: HttpSettings,
    pub options: ModelOptions,
    pub usage: UsageCell,
}

impl Base {
    pub fn new(config: ProviderConfig) -> Result<Base, ConfigError> {
        let model = config.model.trim().to_owned();
        if model.is_empty() {
            return Err(ConfigError::MissingModel {
                provider: config.label,
            });
        }
        Ok(Base {
            base_url: http::base_url(&config.base_url)?,
            client: http::client(&config.http)?,
            label: config.label,
            model,
            key: config.api_key.filter(|k| !k.expose().trim().is_empty()),
            settings: config.http,
            options: config.options,
            usage: Arc::new(Mutex::new(None)),
        })
    }

    /// The model a request is for: the request's own, else the configured one.
    pub fn model_for<'a>(&'a self, request: &'a LlmRequest) -> &'a str {
        request
            .model
            .as_deref()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(&self.model)
    }

    pub fn transport(&self, model: &str) -> Transport<'_> {
        Transport {
            settings: &self.settings,
            ctx: Context {
                provider: self.label.clone(),
                model: model.to_owned(),
                key: self.key.clone(),
            },
        }
    }

    pub fn last_usage(&self) -> Option<Usage> {
        http::read_usage(&self.usage)
    }
}
