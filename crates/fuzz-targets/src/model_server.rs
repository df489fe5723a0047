//! A loopback HTTP server that answers every request with the fuzz input as an event stream, so
//! a provider's stream decoder runs exactly as in the app, through the llm crate's public API.

use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

struct Server {
    runtime: tokio::runtime::Runtime,
    body: Arc<Mutex<Vec<u8>>>,
    anthropic: Arc<dyn agent::Model>,
    gemini: Arc<dyn agent::Model>,
}

fn lock(body: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    body.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads one request (head and `content-length` body), answers with `body`, closes.
async fn answer(mut stream: tokio::net::TcpStream, body: Vec<u8>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while request.len() < head_end + length {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    let _ = stream.write_all(&response).await;
    let _ = stream.shutdown().await;
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        let body = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap_or_else(|e| panic!("a loopback port: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("its address: {e}"))
            .port();
        let served = body.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let bytes = lock(&served).clone();
                tokio::spawn(answer(stream, bytes));
            }
        });
        let base_url = format!("http://127.0.0.1:{port}");
        let connect = |kind: llm::ProviderKind| {
            let mut config = llm::ProviderConfig::new(
                kind,
                "Fuzz",
                base_url.clone(),
                "fuzz-model",
                Some(llm::ApiKey::new("fuzz-key")),
            );
            // A busy answer is reported, not waited out: one input, one request.
            config.http.retry = llm::RetryPolicy::none();
            config.http.read_timeout = std::time::Duration::from_secs(10);
            llm::connect(config).unwrap_or_else(|e| panic!("a provider: {e}"))
        };
        let anthropic = connect(llm::ProviderKind::Anthropic);
        let gemini = connect(llm::ProviderKind::Gemini);
        Server {
            runtime,
            body,
            anthropic,
            gemini,
        }
    })
}

/// Everything the provider's stream yields when the service answers with `data`.
pub(crate) fn generate(
    kind: llm::ProviderKind,
    data: &[u8],
) -> Vec<Result<agent::LlmResponse, agent::ModelError>> {
    let server = server();
    *lock(&server.body) = data.to_vec();
    let model = match kind {
        llm::ProviderKind::Anthropic => server.anthropic.clone(),
        llm::ProviderKind::Gemini => server.gemini.clone(),
        llm::ProviderKind::OpenAiCompatible => {
            panic!("the OpenAI-compatible decoder has a public parser; use it directly")
        }
    };
    let request = agent::LlmRequest {
        contents: vec![agent::Content::user_text("fuzz")].into(),
        ..agent::LlmRequest::default()
    };
    server.runtime.block_on(async move {
        match model.generate(request).await {
            Ok(mut stream) => {
                let mut items = Vec::new();
                while let Some(item) = stream.next().await {
                    items.push(item);
                }
                items
            }
            Err(e) => vec![Err(e)],
        }
    })
}
