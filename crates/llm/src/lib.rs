//! Model providers for Feishu Companion: the engine's [`agent::Model`] over HTTP.
//!
//! Three protocols cover the models the product's users have: OpenAI-compatible Chat Completions
//! ([`OpenAiProvider`]: OpenAI, DeepSeek, Qwen, Doubao, Kimi, GLM, Ollama, any compatible URL),
//! Anthropic Messages ([`AnthropicProvider`]) and Gemini ([`GeminiProvider`]). Each streams its
//! answer over server-sent events ([`sse`]) and hands the engine what it expects: zero or more
//! *partial* responses carrying text deltas, then exactly one *complete* response with the whole
//! text and the function calls. Tool-call arguments that arrive in fragments are assembled;
//! arguments that are not a JSON object become [`agent::MalformedCall`]s for the engine to answer,
//! never an error.
//!
//! Failures are [`agent::ModelError`]s with stable codes (see [`errors`]). A busy service (429,
//! 5xx) is retried with backoff before anything reached the engine ([`RetryPolicy`]). Dropping a
//! stream closes its connection; no task outlives it. Keys ([`ApiKey`]) come from the app's vault
//! and never appear in a message or a log line. [`PRESETS`] lists the services offered in settings,
//! and [`list_models`] asks a service which models it offers.
//!
//! What real services send beyond the happy path is carried through rather than lost: thinking
//! models' reasoning becomes [`agent::Part::Reasoning`] (and goes back where the service requires
//! it), every finish reason becomes an [`agent::FinishReason`], token usage an
//! [`agent::UsageMetadata`] wherever the service put it, and a rate limit's requested wait
//! rides on the `rate_limited` error ([`agent::ModelError::retry_after_ms`]).
//!
//! ```
//! use llm::{ApiKey, preset};
//! // The settings screen picked DeepSeek; the key comes from the vault.
//! let deepseek = preset("deepseek").expect("a listed preset");
//! let mut config = deepseek.config(Some(ApiKey::new("sk-from-the-vault")));
//! config.model = "deepseek-v4-pro".to_owned();
//! assert!(config.options.send_reasoning, "DeepSeek wants its reasoning back");
//! let model = llm::connect(config)?; // an Arc<dyn agent::Model> for LlmAgent::builder
//! assert_eq!(model.name(), "deepseek-v4-pro");
//! # Ok::<(), llm::ConfigError>(())
//! ```
//!
//! Imports: only `agent` (the `Model` trait it implements); nothing above it.

pub mod anthropic;
pub mod errors;
pub mod gemini;
mod history;
pub mod http;
pub mod models;
pub mod openai;
pub mod presets;
pub mod provider;
pub mod secret;
pub mod sse;
mod stream;

pub use anthropic::AnthropicProvider;
pub use gemini::GeminiProvider;
pub use http::{ConfigError, HttpSettings, RetryPolicy, Usage};
pub use models::{ListModelsError, list_models};
pub use openai::{ChatStreamParser, OpenAiProvider};
pub use presets::{PRESETS, Preset, preset};
pub use provider::{ModelOptions, ProviderConfig, ProviderKind, ToolChoice, connect};
pub use secret::ApiKey;
