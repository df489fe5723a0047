//! The bodies of the fuzz targets, as plain functions of the input bytes. `fuzz/` (a cargo-fuzz
//! project) runs each under libFuzzer; this crate's test replays every input of the committed
//! corpus (`fuzz/corpus/<target>/`) through them on the stable toolchain, so CI keeps them
//! passing without a fuzzer, and its mutation test ([`mutate`]) runs a short, counted fuzzing
//! run of each on stable, seeded from that corpus.
//!
//! A target fails by panicking. Besides "never panics", each checks a property of what it
//! decodes: the SSE and OpenAI-compatible decoders give the same result however the bytes are
//! split across reads; a model stream ends with exactly one complete answer or one error; a
//! callback is accepted only at the right host, path and state; a Feishu answer is data only
//! for code 0; an id argument that passes validation stays one path segment; settings that
//! parse are valid and survive a round trip. The providers are driven only through the llm
//! crate's public API (the Anthropic and Gemini decoders over a loopback HTTP server).

mod model_server;
pub mod mutate;

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use agent::AgentTool as _;
use feishu::{ApiPath, IdKind};
use serde_json::{Map, Value};

/// A target: a function of the input bytes that panics on a failure.
pub type Target = fn(&[u8]);

/// Every target, by the name its corpus folder and libFuzzer binary carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("sse", sse),
    ("openai_stream", openai_stream),
    ("anthropic_stream", anthropic_stream),
    ("gemini_stream", gemini_stream),
    ("callback_request", callback_request),
    ("feishu_answer", feishu_answer),
    ("tool_arguments", tool_arguments),
    ("settings_file", settings_file),
];

/// Splits `data` into pieces of `size` bytes (the whole when `size` is 0).
fn pieces(data: &[u8], size: usize) -> Vec<&[u8]> {
    if size == 0 || data.is_empty() {
        vec![data]
    } else {
        data.chunks(size).collect()
    }
}

/// The first byte chooses how the rest is split: the piece size and, for SSE, the size bound.
fn split_control(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((control, rest)) => (*control, rest),
        None => (0, data),
    }
}

type SseRun = (Vec<llm::sse::SseEvent>, Option<llm::sse::SseError>, bool);

fn run_sse(data: &[u8], piece: usize, limit: usize) -> SseRun {
    let mut parser = llm::sse::SseParser::with_max_event_bytes(limit);
    let mut events = Vec::new();
    for chunk in pieces(data, piece) {
        if let Err(e) = parser.push(chunk, &mut events) {
            return (events, Some(e), parser.has_pending());
        }
    }
    let pending = parser.has_pending();
    (events, None, pending)
}

/// The SSE decoder: the same events (and the same error) whether the stream arrives whole or in
/// pieces of any size.
pub fn sse(data: &[u8]) {
    let (control, body) = split_control(data);
    let limit = if control & 0x80 != 0 {
        64
    } else {
        llm::sse::DEFAULT_MAX_EVENT_BYTES
    };
    let piece = usize::from(control & 0x7f);
    let (events, error, _) = run_sse(body, 0, limit);
    let (split_events, split_error, _) = run_sse(body, piece.max(1), limit);
    assert_eq!(
        error, split_error,
        "the error depends on how the bytes were split"
    );
    assert_eq!(
        events, split_events,
        "the events depend on how the bytes were split"
    );
    for event in &events {
        assert!(
            event.data.len() <= limit,
            "an event beyond the bound came out"
        );
    }
}

/// What a model stream produced, as text to compare.
fn describe(items: &VecDeque<Result<agent::LlmResponse, agent::ModelError>>) -> Vec<String> {
    items.iter().map(|i| format!("{i:?}")).collect()
}

fn run_openai(data: &[u8], piece: usize) -> (Vec<String>, String) {
    let mut parser = llm::ChatStreamParser::new();
    let mut out = VecDeque::new();
    for chunk in pieces(data, piece) {
        match parser.push(chunk, &mut out) {
            Ok(true) => return (describe(&out), "done".to_owned()),
            Ok(false) => {}
            Err(e) => return (describe(&out), format!("error {e:?}")),
        }
    }
    let end = parser.end();
    (describe(&out), format!("end {end:?}"))
}

/// The OpenAI-compatible stream decoder (its public replay parser): the same answer however the
/// bytes are split.
pub fn openai_stream(data: &[u8]) {
    let (control, body) = split_control(data);
    let whole = run_openai(body, 0);
    let split = run_openai(body, usize::from(control).max(1));
    assert_eq!(
        whole, split,
        "the answer depends on how the bytes were split"
    );
}

/// Checks the model stream contract: partial responses, then one complete response or one
/// error, and nothing after it.
fn check_model_stream(items: &[Result<agent::LlmResponse, agent::ModelError>]) {
    let last = items.len().saturating_sub(1);
    for (i, item) in items.iter().enumerate() {
        let terminal = match item {
            Ok(response) => response.partial != Some(true),
            Err(_) => true,
        };
        assert!(
            !terminal || i == last,
            "item {i} of {} ends the stream but more follow: {items:?}",
            items.len()
        );
    }
    if let Some(Ok(response)) = items.last() {
        assert_ne!(
            response.partial,
            Some(true),
            "the stream ended on a partial response"
        );
    }
}

fn provider_stream(kind: llm::ProviderKind, data: &[u8]) {
    let items = model_server::generate(kind, data);
    assert!(!items.is_empty(), "the stream ended with nothing at all");
    check_model_stream(&items);
}

/// The Anthropic Messages stream decoder, through the provider over loopback HTTP.
pub fn anthropic_stream(data: &[u8]) {
    provider_stream(llm::ProviderKind::Anthropic, data);
}

/// The Gemini stream decoder, through the provider over loopback HTTP.
pub fn gemini_stream(data: &[u8]) {
    provider_stream(llm::ProviderKind::Gemini, data);
}

const HOST: &str = "127.0.0.1:9768";
const STATE: &str = "Zm9vYmFyYmF6cXV4";

/// The loopback listener's request classification: `<method byte><target>\0<host>`.
pub fn callback_request(data: &[u8]) {
    let (control, rest) = split_control(data);
    let method = ["GET", "POST", "HEAD", "get"][usize::from(control % 4)];
    let (target, host) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let target = String::from_utf8_lossy(target);
    let request = feishu::listener::classify(method, &target, host, HOST, STATE);
    if let feishu::listener::Request::Callback(outcome) = &request {
        assert_eq!(host, Some(HOST.as_bytes()), "a callback at another host");
        assert_eq!(method, "GET");
        assert_eq!(target.split('?').next(), Some("/callback"));
        assert!(target.contains("state="), "a callback without a state");
        if let feishu::CallbackOutcome::Code(code) = outcome {
            assert!(!code.is_empty());
        }
    }
}

/// Feishu's answer decoder: `<status: 2 bytes><reset header>\0<body>`.
pub fn feishu_answer(data: &[u8]) {
    let status = match data {
        [a, b, ..] => u16::from_be_bytes([*a, *b]) % 600,
        _ => 200,
    };
    let rest = data.get(2..).unwrap_or_default();
    let (reset, body) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (Some(String::from_utf8_lossy(&rest[..at])), &rest[at + 1..]),
        None => (None, rest),
    };
    let body = String::from_utf8_lossy(body);
    let answer = feishu::api::decode_answer(status, reset.as_deref(), None, &body);
    let code = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("code").and_then(Value::as_i64));
    match answer {
        feishu::api::Answer::Data(_) => {
            assert_eq!(code, Some(0), "data from an answer whose code is not 0");
            assert!(status < 500 && status != 429);
        }
        feishu::api::Answer::RateLimited { .. } => {
            assert!(status == 429 || code == Some(99991400));
        }
        feishu::api::Answer::ServerError => assert!(status >= 500),
        feishu::api::Answer::TokenRejected(_) => {
            assert!(matches!(code, Some(99991677 | 99991668)));
        }
        feishu::api::Answer::Failed(error) => {
            // Worded for a person: never empty.
            assert!(!error.to_string().is_empty());
        }
    }
}

fn tools() -> &'static Vec<feishu::FeishuTool> {
    static TOOLS: OnceLock<Vec<feishu::FeishuTool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        // No request is ever made: only the tools' declarations and argument checks are used.
        let endpoints = feishu::Endpoints::for_brand(feishu::Brand::Feishu);
        let credentials = feishu::AppCredentials {
            app_id: "cli_fuzz".to_owned(),
            app_secret: secrecy::SecretString::from("fuzz".to_owned()),
        };
        let oauth = feishu::OAuthClient::new(endpoints.clone(), credentials)
            .unwrap_or_else(|e| panic!("the OAuth client: {e}"));
        let tokens = Arc::new(feishu::TokenManager::new(
            oauth,
            Arc::new(feishu::MemoryTokenStore::default()),
            Arc::new(agent::SystemClock),
        ));
        let api = feishu::ApiClient::new(endpoints, tokens, feishu::RetryPolicy::default())
            .unwrap_or_else(|e| panic!("the API client: {e}"));
        feishu::all_tools(feishu::ToolEnv {
            api,
            tz: jiff::tz::TimeZone::UTC,
        })
    })
}

fn validators() -> &'static Vec<jsonschema::Validator> {
    static VALIDATORS: OnceLock<Vec<jsonschema::Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        tools()
            .iter()
            .map(|t| {
                jsonschema::validator_for(&t.parameters())
                    .unwrap_or_else(|e| panic!("{}'s schema: {e}", t.name()))
            })
            .collect()
    })
}

/// Checks that an id that passed validation is exactly one path segment, itself.
fn assert_one_segment(kind: IdKind, argument: &str, value: &str) {
    let base = url::Url::parse("https://open.feishu.cn/").unwrap_or_else(|e| panic!("{e}"));
    let path = ApiPath::new("x")
        .id(kind, argument, value)
        .unwrap_or_else(|e| panic!("validated, then refused by the path: {e}"));
    let url = path.url(&base);
    let segments: Vec<&str> = url
        .path_segments()
        .map(Iterator::collect)
        .unwrap_or_default();
    assert_eq!(
        segments,
        ["open-apis", "x", value],
        "{argument} = {value:?} left its segment"
    );
    assert_eq!(url.query(), None);
    assert_eq!(url.fragment(), None);
    assert_eq!(url.host_str(), Some("open.feishu.cn"));
}

/// Tool-argument validation: `<tool byte><JSON arguments, or one raw id>`. Whatever passes both
/// the schema and the tool's own check keeps every id within its one path segment.
pub fn tool_arguments(data: &[u8]) {
    let tools = tools();
    let (control, rest) = split_control(data);
    let index = usize::from(control) % tools.len();
    let tool = &tools[index];
    let args: Map<String, Value> = match serde_json::from_slice::<Value>(rest) {
        Ok(Value::Object(map)) => map,
        _ => {
            // Raw bytes as the value of the tool's first id argument (or of `query`).
            let name = tool
                .id_arguments()
                .first()
                .map_or("query", |(name, _)| *name);
            let mut map = Map::new();
            map.insert(
                name.to_owned(),
                Value::String(String::from_utf8_lossy(rest).into_owned()),
            );
            map
        }
    };
    // Every id shape, on the raw text: a match is one segment, a refusal says why.
    let text = String::from_utf8_lossy(rest);
    for kind in [
        IdKind::Calendar,
        IdKind::Event,
        IdKind::Chat,
        IdKind::Message,
        IdKind::OpenId,
        IdKind::Document,
        IdKind::Folder,
        IdKind::Task,
    ] {
        match kind.check("id", &text) {
            Ok(_) => assert_one_segment(kind, "id", &text),
            Err(e) => assert!(e.to_string().contains(kind.noun())),
        }
    }
    let schema_ok = validators()[index].is_valid(&Value::Object(args.clone()));
    let check = tool.check_args(&args);
    if schema_ok && check.is_ok() {
        for (name, kind) in tool.id_arguments() {
            let values: Vec<&str> = match args.get(*name) {
                Some(Value::String(s)) => vec![s.as_str()],
                Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            for value in values {
                assert_one_segment(*kind, name, value);
            }
        }
    }
    if let Err(message) = check {
        assert!(!message.is_empty());
    }
}

/// The settings file: what parses is valid and survives a save and a read.
pub fn settings_file(data: &[u8]) {
    let Ok(settings) = companion::Settings::parse(data) else {
        return;
    };
    assert!(
        settings.validate().is_ok(),
        "parsed settings that are not valid: {settings:?}"
    );
    let text = serde_json::to_vec(&settings).unwrap_or_else(|e| panic!("{e}"));
    let again = companion::Settings::parse(&text).unwrap_or_else(|e| panic!("round trip: {e}"));
    assert_eq!(again, settings);
}
