//! Models as the engine calls them: a request in, a stream of responses out — zero or more
//! partial chunks (streamed text), then exactly one complete response.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};

use crate::content::{Content, Part};
use crate::llm::{LlmRequest, LlmResponse};

/// A model's responses as they arrive.
pub type ModelStream = BoxStream<'static, Result<LlmResponse, ModelError>>;

/// A failure to get a response from a model, with a stable code the UI can translate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct ModelError {
    /// A stable code: `unauthorized`, `rate_limited`, `context_length_exceeded`,
    /// `malformed_stream`, `unavailable`, `incomplete`, `script_exhausted`, …
    pub code: String,
    /// What happened, for people.
    pub message: String,
    /// How long the service asked to wait before trying again (`rate_limited`), when it said.
    pub retry_after_ms: Option<u64>,
}

impl ModelError {
    /// An error with this code and message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError {
            code: code.into(),
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// Sets how long the service asked to wait.
    #[must_use]
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after_ms = Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        self
    }
}

/// A language model.
#[async_trait]
pub trait Model: Send + Sync + fmt::Debug {
    /// The model's name, as shown to the user.
    fn name(&self) -> &str;

    /// Starts generating. Dropping the stream cancels the request.
    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError>;
}

type ScriptFn = dyn Fn(&LlmRequest) -> Result<LlmResponse, ModelError> + Send + Sync;

enum Script {
    Queue(Mutex<VecDeque<Result<LlmResponse, ModelError>>>),
    Function(Box<ScriptFn>),
}

/// A model that answers from a script: a list of responses in order, or a function of the
/// request. Text is streamed in small chunks before the complete response, as real models do.
/// Every request is recorded for tests to inspect, unless [`ScriptedModel::without_recording`].
pub struct ScriptedModel {
    name: String,
    script: Script,
    requests: Mutex<Vec<LlmRequest>>,
    record: bool,
    chunk_chars: usize,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// Answers with these responses, one per request, then fails with `script_exhausted`.
    pub fn new(responses: impl IntoIterator<Item = LlmResponse>) -> Self {
        Self::with_results(responses.into_iter().map(Ok))
    }

    /// Like [`ScriptedModel::new`], with errors among the answers.
    pub fn with_results(
        results: impl IntoIterator<Item = Result<LlmResponse, ModelError>>,
    ) -> Self {
        ScriptedModel {
            name: "scripted".to_owned(),
            script: Script::Queue(Mutex::new(results.into_iter().collect())),
            requests: Mutex::new(Vec::new()),
            record: true,
            chunk_chars: 8,
        }
    }

    /// Answers every request with `respond(request)`.
    pub fn from_fn(
        respond: impl Fn(&LlmRequest) -> Result<LlmResponse, ModelError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel {
            name: "scripted".to_owned(),
            script: Script::Function(Box::new(respond)),
            requests: Mutex::new(Vec::new()),
            record: true,
            chunk_chars: 8,
        }
    }

    /// Streams text in chunks of this many characters (0: no partial chunks).
    #[must_use]
    pub fn with_chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars;
        self
    }

    /// Keeps no requests ([`ScriptedModel::requests`] stays empty): each is dropped once
    /// answered, as a provider drops it once its body is built. A kept request holds a share of
    /// the history the engine reuses, so the engine's next request would have to copy it; the
    /// engine benchmark measures without that cost, which only a test's model has.
    #[must_use]
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<LlmRequest> {
        lock(&self.requests).clone()
    }

    fn next(&self, request: &LlmRequest) -> Result<LlmResponse, ModelError> {
        match &self.script {
            Script::Queue(queue) => lock(queue).pop_front().unwrap_or_else(|| {
                Err(ModelError::new(
                    "script_exhausted",
                    "the scripted model has no more responses",
                ))
            }),
            Script::Function(respond) => respond(request),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded data is plain values that a panic cannot leave half-updated.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The text of `response` cut into partial chunks of `chars` characters.
fn partial_chunks(response: &LlmResponse, chars: usize) -> Vec<LlmResponse> {
    if chars == 0 {
        return Vec::new();
    }
    let text = response.content.text();
    let letters: Vec<char> = text.chars().collect();
    letters
        .chunks(chars)
        .map(|chunk| LlmResponse {
            content: Content::new(
                "model",
                vec![Part::from_text(chunk.iter().collect::<String>())],
            ),
            partial: Some(true),
            ..LlmResponse::default()
        })
        .collect()
}

#[async_trait]
impl Model for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError> {
        let answer = self.next(&request);
        if self.record {
            lock(&self.requests).push(request);
        }
        let response = answer?;
        let mut items: Vec<Result<LlmResponse, ModelError>> =
            partial_chunks(&response, self.chunk_chars)
                .into_iter()
                .map(Ok)
                .collect();
        items.push(Ok(response));
        Ok(stream::iter(items).boxed())
    }
}

/// A model shared between agents and tests.
pub type SharedModel = Arc<dyn Model>;

/// Wraps a model and keeps every request sent through it (tests look at what the engine asked).
#[derive(Debug)]
pub struct RecordingModel {
    inner: Arc<dyn Model>,
    requests: Mutex<Vec<LlmRequest>>,
}

impl RecordingModel {
    /// Records what goes to `inner`.
    pub fn new(inner: Arc<dyn Model>) -> Self {
        RecordingModel {
            inner,
            requests: Mutex::new(Vec::new()),
        }
    }

    /// The requests sent so far.
    pub fn requests(&self) -> Vec<LlmRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl Model for RecordingModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn generate(&self, request: LlmRequest) -> Result<ModelStream, ModelError> {
        lock(&self.requests).push(request.clone());
        self.inner.generate(request).await
    }
}
