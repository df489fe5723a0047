//! A tiny local HTTP server answering provider requests from canned replies, written from the
//! providers' public API references, and helpers to read a model stream with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::{LlmResponse, Model, ModelError, ModelStream};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use llm::{HttpSettings, RetryPolicy};
use serde_json::Value;

/// A piece of a reply body.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Bytes written as they are (one write each).
    Bytes(Vec<u8>),
    /// A pause.
    Wait(Duration),
    /// Break the connection (the client sees an error mid-body).
    Abort,
    /// Never finish: a keep-alive comment every 20 ms, so a closed client is noticed.
    Hang,
    /// Never finish and send nothing.
    Stall,
}

/// One canned answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub pieces: Vec<Piece>,
}

impl Reply {
    /// An event stream, written in pieces of `piece` bytes (0: all at once).
    pub fn sse(body: &str, piece: usize) -> Reply {
        let bytes = body.as_bytes();
        let pieces = if piece == 0 {
            vec![Piece::Bytes(bytes.to_vec())]
        } else {
            bytes
                .chunks(piece)
                .map(|c| Piece::Bytes(c.to_vec()))
                .collect()
        };
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            pieces,
        }
    }

    /// A JSON document with this status.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            pieces: vec![Piece::Bytes(body.as_bytes().to_vec())],
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn then(mut self, piece: Piece) -> Reply {
        self.pieces.push(piece);
        self
    }
}

/// A request the fixture server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    /// Bodies dropped by the server before they finished: the client went away.
    dropped: AtomicUsize,
}

/// The fixture server.
pub struct Fixture {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fixture {
    pub async fn start(replies: Vec<Reply>) -> Fixture {
        Fixture::start_at("", replies).await
    }

    /// Serves on 127.0.0.1 with `prefix` as the API root path (`/v1`).
    pub async fn start_at(prefix: &str, replies: Vec<Reply>) -> Fixture {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            ..Shared::default()
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Fixture {
            base: format!("http://{addr}{prefix}"),
            shared,
            task,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.shared.received.lock().unwrap().len()
    }

    pub fn last_body(&self) -> Value {
        self.received().last().unwrap().body.clone()
    }

    pub fn dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Waits until the server saw a body dropped unfinished (the client closed), or panics.
    pub async fn wait_dropped(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while self.dropped() == 0 {
            assert!(
                Instant::now() < deadline,
                "the server never saw the connection close"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Counts a body dropped before its end.
struct DropGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl DropGuard {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path_and_query = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let headers = request.headers().clone();
    let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    shared.received.lock().unwrap().push(Received {
        path_and_query,
        headers,
        body,
        at: Instant::now(),
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder()
            .status(StatusCode::IM_A_TEAPOT)
            .body(Body::from("the fixture has no more replies"))
            .unwrap();
    };
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    let guard = DropGuard {
        shared: shared.clone(),
        finished: false,
    };
    let pieces: VecDeque<Piece> = reply.pieces.into();
    let stream = futures::stream::unfold(
        (pieces, guard, false),
        |(mut pieces, mut guard, hanging)| async move {
            if hanging {
                tokio::time::sleep(Duration::from_millis(20)).await;
                return Some((
                    Ok::<Bytes, std::io::Error>(Bytes::from_static(b": keep-alive\n\n")),
                    (pieces, guard, true),
                ));
            }
            loop {
                match pieces.pop_front() {
                    None => {
                        guard.finish();
                        return None;
                    }
                    Some(Piece::Bytes(bytes)) => {
                        return Some((Ok(Bytes::from(bytes)), (pieces, guard, false)));
                    }
                    Some(Piece::Wait(wait)) => tokio::time::sleep(wait).await,
                    Some(Piece::Abort) => {
                        guard.finish();
                        return Some((
                            Err(std::io::Error::other("fixture abort")),
                            (pieces, guard, false),
                        ));
                    }
                    Some(Piece::Hang) => {
                        return Some((
                            Ok(Bytes::from_static(b": keep-alive\n\n")),
                            (pieces, guard, true),
                        ));
                    }
                    Some(Piece::Stall) => futures::future::pending::<()>().await,
                }
            }
        },
    );
    builder.body(Body::from_stream(stream)).unwrap()
}

/// Settings that keep tests fast: short timeouts, millisecond backoff.
pub fn fast() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(3),
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(2),
        },
    }
}

/// What a stream produced: the texts of its partial items and the final item.
#[derive(Debug)]
pub struct Outcome {
    pub partials: Vec<String>,
    /// The reasoning of the partial items, in order (thinking models).
    pub reasoning: Vec<String>,
    pub last: Result<LlmResponse, ModelError>,
    /// Items after the final one (there must be none).
    pub extra: usize,
}

impl Outcome {
    pub fn response(&self) -> &LlmResponse {
        match &self.last {
            Ok(response) => response,
            Err(e) => panic!("expected a response, got {e:?}"),
        }
    }

    pub fn error(&self) -> &ModelError {
        match &self.last {
            Err(e) => e,
            Ok(r) => panic!("expected an error, got {r:?}"),
        }
    }

    pub fn text(&self) -> String {
        self.partials.concat()
    }
}

/// Runs `generate` and reads the whole stream, all within a deadline so nothing can hang.
pub async fn run(model: &dyn Model, request: agent::LlmRequest) -> Outcome {
    tokio::time::timeout(Duration::from_secs(10), async {
        let stream = match model.generate(request).await {
            Ok(stream) => stream,
            Err(e) => {
                return Outcome {
                    partials: Vec::new(),
                    reasoning: Vec::new(),
                    last: Err(e),
                    extra: 0,
                };
            }
        };
        read(stream).await
    })
    .await
    .expect("the model stream hung")
}

async fn read(mut stream: ModelStream) -> Outcome {
    let mut partials = Vec::new();
    let mut reasoning = Vec::new();
    let mut last = None;
    let mut extra = 0;
    while let Some(item) = stream.next().await {
        if last.is_some() {
            extra += 1;
            continue;
        }
        match item {
            Ok(response) if response.is_partial() => {
                assert!(response.content.is_model());
                assert!(response.content.function_calls().next().is_none());
                let thought = response.content.reasoning_text();
                if thought.is_empty() {
                    partials.push(response.content.text());
                } else {
                    reasoning.push(thought);
                }
            }
            other => last = Some(other),
        }
    }
    Outcome {
        partials,
        reasoning,
        last: last.expect("the stream ended without a final item"),
        extra,
    }
}

/// A user question with a system instruction and two tools (a read and a write).
pub fn request(text: &str) -> agent::LlmRequest {
    use agent::{Content, FunctionDeclaration, GenerateContentConfig, ToolDeclaration};
    agent::LlmRequest {
        model: None,
        contents: vec![Content::user_text(text)].into(),
        config: Some(GenerateContentConfig {
            system_instruction: Some(Content::user_text("你是飞书助手。")),
            tools: vec![ToolDeclaration {
                function_declarations: vec![
                    FunctionDeclaration::new(
                        "list_events",
                        "List calendar events in a time range.",
                        serde_json::json!({"type": "object", "properties": {"start": {"type": "string"}, "end": {"type": "string"}}, "required": ["start", "end"]}),
                    ),
                    FunctionDeclaration::new(
                        "send_message",
                        "Send a chat message.",
                        serde_json::json!({"type": "object", "properties": {"chat": {"type": "string"}, "text": {"type": "string"}}}),
                    ),
                ],
            }],
            excluded_tools: Vec::new(),
        }),
    }
}

/// A history with a finished tool round trip: user → model call (id `fc_1`) → tool result →
/// the next user question.
pub fn request_with_history() -> agent::LlmRequest {
    use agent::{Content, FunctionCall, FunctionResponse, Part};
    let mut req = request("明天有什么安排？");
    let args = serde_json::json!({"start": "2026-12-01", "end": "2026-12-02"})
        .as_object()
        .unwrap()
        .clone();
    req.contents.push(Content::new(
        "model",
        vec![
            Part::from_text("我查一下。"),
            Part::FunctionCall(FunctionCall {
                id: Some("fc_1".into()),
                name: "list_events".into(),
                args,
            }),
        ],
    ));
    req.contents.push(Content::new(
        "user",
        vec![Part::FunctionResponse(
            FunctionResponse::from_output("list_events", serde_json::json!([{"summary": "周会"}]))
                .with_id("fc_1"),
        )],
    ));
    req.contents.push(Content::model_text("明天 10 点有周会。"));
    req.contents.push(Content::user_text("谢谢"));
    req
}

/// The function calls of a final response as (name, args).
pub fn calls(response: &LlmResponse) -> Vec<(String, Value)> {
    response
        .content
        .function_calls()
        .map(|c| (c.name.clone(), Value::Object(c.args.clone())))
        .collect()
}

/// A port on which nothing listens.
pub async fn dead_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

/// A provider's configuration against `fixture`, with test timeouts, edited by `change`.
pub fn config(
    fixture: &Fixture,
    kind: llm::ProviderKind,
    label: &str,
    model: &str,
    key: &str,
    change: impl FnOnce(&mut llm::ProviderConfig),
) -> llm::ProviderConfig {
    let mut config = llm::ProviderConfig::new(
        kind,
        label,
        &fixture.base,
        model,
        Some(llm::ApiKey::new(key)),
    );
    config.http = fast();
    change(&mut config);
    config
}

/// The test key of the provider constructors below.
pub const TEST_KEY: &str = "sk-test-0123456789abcdef";

/// The openai provider against `fixture`, with a test model and key.
pub fn openai(fixture: &Fixture) -> llm::OpenAiProvider {
    let config = config(
        fixture,
        llm::ProviderKind::OpenAiCompatible,
        "OpenAI",
        "gpt-6-luna",
        TEST_KEY,
        |_| {},
    );
    llm::OpenAiProvider::new(config).unwrap()
}

/// The claude provider against `fixture`, with a test model and key.
pub fn claude(fixture: &Fixture) -> llm::AnthropicProvider {
    let config = config(
        fixture,
        llm::ProviderKind::Anthropic,
        "Anthropic Claude",
        "claude-sonnet-5-5",
        TEST_KEY,
        |_| {},
    );
    llm::AnthropicProvider::new(config).unwrap()
}

/// The gemini provider against `fixture`, with a test model and key.
pub fn gemini(fixture: &Fixture) -> llm::GeminiProvider {
    let config = config(
        fixture,
        llm::ProviderKind::Gemini,
        "Google Gemini",
        "gemini-3.8-flash",
        TEST_KEY,
        |_| {},
    );
    llm::GeminiProvider::new(config).unwrap()
}
