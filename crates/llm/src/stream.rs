//! Reading a provider's answer: bytes from the connection → SSE events → the provider's
//! [`Decoder`] → items of the engine's [`ModelStream`], and the assembly of streamed tool calls
//! that two of the three providers share.

use std::collections::VecDeque;
use std::time::Duration;

use agent::{
    Content, FunctionCall, LlmResponse, MalformedCall, ModelError, Part, ROLE_MODEL, Reasoning,
};
use bytes::Bytes;
use futures::stream::{self, BoxStream, Stream, StreamExt};
use serde_json::{Map, Value};

use crate::errors::Context;
use crate::http::HttpSettings;
use crate::sse::{SseEvent, SseParser};

/// One item of a model stream.
pub(crate) type Item = Result<LlmResponse, ModelError>;

/// The largest non-streamed (JSON) answer read.
const MAX_JSON_BODY: usize = 32 * 1024 * 1024;

/// A provider's reading of its event stream.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event, pushing the items it yields onto `out`. Returns `true` when the event
    /// ends the stream (the final response is then in `out`).
    fn event(
        &mut self,
        event: SseEvent,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError>;

    /// The connection closed without an end event: the final response if what arrived is a
    /// whole answer, else `incomplete`.
    fn end(&mut self, ctx: &Context) -> Item;

    /// The service answered with one JSON document instead of a stream.
    fn whole(&mut self, body: &str, ctx: &Context) -> Item {
        let _ = body;
        Err(ctx.malformed("expected an event stream, got a JSON document"))
    }
}

/// Bytes → events → a decoder: the parsing path of every streamed answer (and of the benchmark).
pub(crate) struct Pipeline<D> {
    parser: SseParser,
    decoder: D,
    events: Vec<SseEvent>,
}

impl<D: Decoder> Pipeline<D> {
    pub fn new(decoder: D) -> Self {
        Pipeline {
            parser: SseParser::new(),
            decoder,
            events: Vec::new(),
        }
    }

    /// Feeds bytes; items go to `out`. Returns `true` once the end event was seen (bytes after
    /// it are not read).
    pub fn push(
        &mut self,
        bytes: &[u8],
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError> {
        let mut events = std::mem::take(&mut self.events);
        let result = self.parse(bytes, &mut events, ctx, out);
        events.clear();
        self.events = events;
        result
    }

    fn parse(
        &mut self,
        bytes: &[u8],
        events: &mut Vec<SseEvent>,
        ctx: &Context,
        out: &mut VecDeque<Item>,
    ) -> Result<bool, ModelError> {
        // The events completed before a malformed line come first, as they would have had the
        // bytes arrived in smaller reads: whether the answer ends (or fails) on one of them must
        // not depend on how the network split the stream.
        let parsed = self.parser.push(bytes, events);
        for event in events.drain(..) {
            if self.decoder.event(event, ctx, out)? {
                return Ok(true);
            }
        }
        parsed.map_err(|e| ctx.malformed(e))?;
        Ok(false)
    }

    /// The bytes ended without an end event.
    pub fn end(&mut self, ctx: &Context) -> Item {
        self.decoder.end(ctx)
    }
}

/// The state of one answer being read. Owns the connection: dropping it closes the connection.
pub(crate) struct Driver<D> {
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    json: bool,
    pipeline: Pipeline<D>,
    ctx: Context,
    read_timeout: Duration,
    queue: VecDeque<Item>,
    finished: bool,
}

impl<D: Decoder> Driver<D> {
    pub fn new(
        response: reqwest::Response,
        decoder: D,
        ctx: Context,
        settings: &HttpSettings,
    ) -> Self {
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut driver = Driver {
            body: Some(response.bytes_stream().boxed()),
            json: content_type.starts_with("application/json"),
            pipeline: Pipeline::new(decoder),
            ctx,
            read_timeout: settings.read_timeout,
            queue: VecDeque::new(),
            finished: false,
        };
        if content_type.starts_with("text/html") {
            // A proxy or captive portal answering in place of the service.
            let error = driver
                .ctx
                .malformed("expected an event stream, got an HTML page");
            driver.fail(error);
        }
        driver
    }

    /// The next item, or `None` after the final response or an error.
    pub async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_err() {
                    self.queue.clear();
                    self.close();
                }
                return Some(item);
            }
            if self.finished {
                self.close();
                return None;
            }
            if self.json {
                let item = self.read_whole().await;
                self.finished = true;
                self.queue.push_back(item);
                continue;
            }
            let body = self.body.as_mut()?;
            match body.next().await {
                Some(Ok(bytes)) => self.feed(&bytes),
                Some(Err(error)) => {
                    let why = if error.is_timeout() {
                        format!("nothing arrived for {} s", self.read_timeout.as_secs_f64())
                    } else {
                        format!(
                            "the connection broke: {}",
                            crate::http::source_chain(&error)
                        )
                    };
                    let error = self.ctx.incomplete(&why);
                    self.fail(error);
                }
                None => {
                    self.finished = true;
                    let item = self.pipeline.end(&self.ctx);
                    self.queue.push_back(item);
                }
            }
        }
    }

    /// The items as a stream, starting with `first` (already read).
    pub fn into_stream(self, first: VecDeque<Item>) -> impl Stream<Item = Item> + Send + 'static {
        let mut driver = self;
        let mut first = first;
        first.append(&mut driver.queue);
        driver.queue = first;
        stream::unfold(driver, |mut driver| async move {
            driver.next().await.map(|item| (item, driver))
        })
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self.pipeline.push(bytes, &self.ctx, &mut self.queue) {
            Ok(false) => {}
            // The end event: whatever follows (there should be nothing) is not read.
            Ok(true) => self.finished = true,
            Err(error) => self.fail(error),
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.finished = true;
        self.queue.push_back(Err(error));
    }

    fn close(&mut self) {
        self.body = None;
    }

    async fn read_whole(&mut self) -> Item {
        let Some(mut body) = self.body.take() else {
            return Err(self.ctx.incomplete("the connection was closed"));
        };
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() > MAX_JSON_BODY {
                        return Err(self.ctx.malformed("the response is too large"));
                    }
                }
                Err(_) => return Err(self.ctx.incomplete("the connection broke")),
            }
        }
        match String::from_utf8(bytes) {
            Ok(text) => self.pipeline.decoder.whole(&text, &self.ctx),
            Err(_) => Err(self.ctx.malformed("the response is not UTF-8")),
        }
    }
}

/// Parses one event's JSON, or says why the stream is malformed.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    data: &str,
    ctx: &Context,
) -> Result<T, ModelError> {
    serde_json::from_str(data)
        .map_err(|e| ctx.malformed(format!("an event is not valid JSON ({e})")))
}

/// A streamed text delta as the engine wants it.
pub(crate) fn partial_text(text: &str) -> LlmResponse {
    partial(Part::from_text(text))
}

/// A streamed reasoning delta: shown live as the model thinks, never as answer text.
pub(crate) fn partial_reasoning(text: &str) -> LlmResponse {
    partial(Part::Reasoning(Reasoning::new(text)))
}

fn partial(part: Part) -> LlmResponse {
    LlmResponse {
        content: Content::new(ROLE_MODEL, vec![part]),
        partial: Some(true),
        ..LlmResponse::default()
    }
}

/// One tool call being received: its id and name come first, its arguments in fragments.
#[derive(Debug, Default, Clone)]
pub(crate) struct PendingCall {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

impl PendingCall {
    /// The finished call, or why its arguments cannot be used.
    pub fn finish(self) -> Result<FunctionCall, MalformedCall> {
        let malformed = |call: &PendingCall, error: String| MalformedCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            error,
        };
        if self.name.is_empty() {
            return Err(malformed(&self, "the call has no function name".to_owned()));
        }
        let args = match parse_arguments(&self.arguments) {
            Ok(args) => args,
            Err(error) => return Err(malformed(&self, error)),
        };
        Ok(FunctionCall {
            id: self.id,
            name: self.name,
            args,
        })
    }
}

/// Arguments as a JSON object. Empty arguments are an empty object: models send nothing at all
/// for a function without parameters.
pub(crate) fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the arguments are JSON but not an object (found {})",
            json_kind(&other)
        )),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The final response: text first, then the calls in the order the model made them; calls with
/// unusable arguments go to `malformed_calls` for the engine to answer.
pub(crate) fn final_response(
    parts: Vec<Part>,
    calls: impl IntoIterator<Item = PendingCall>,
) -> LlmResponse {
    let mut parts = parts;
    let mut malformed_calls = Vec::new();
    for call in calls {
        match call.finish() {
            Ok(call) => parts.push(Part::FunctionCall(call)),
            Err(bad) => {
                tracing::warn!(function = %bad.name, error = %bad.error, "model sent unusable tool-call arguments");
                malformed_calls.push(bad);
            }
        }
    }
    LlmResponse {
        content: Content::new(ROLE_MODEL, parts),
        partial: None,
        malformed_calls,
        ..LlmResponse::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn arguments_must_be_an_object_or_nothing() {
        assert!(parse_arguments("").unwrap().is_empty());
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap()["a"], 1);
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
        assert!(
            parse_arguments(r#"{"a":"#)
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}

/// Damaged streams of every provider: whatever the bytes, reading ends in a response or an
/// error with a known code — never a panic, never something after the error.
#[cfg(test)]
mod damaged_streams {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::anthropic::MessagesDecoder;
    use crate::gemini::GenerateDecoder;
    use crate::openai::ChatDecoder;

    const OPENAI: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"明天\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"日\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n",
        "data: [DONE]\n\n",
    );

    const ANTHROPIC: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"明天\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": \\\"日\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    const GEMINI: &str = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"明天\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n",
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":\"日\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2}}\r\n\r\n",
    );

    const CODES: [&str; 8] = [
        "malformed_stream",
        "incomplete",
        "unavailable",
        "rate_limited",
        "unauthorized",
        "model_not_found",
        "provider_error",
        "blocked",
    ];

    fn ctx() -> Context {
        Context {
            provider: "Test".to_owned(),
            model: "m".to_owned(),
            key: None,
        }
    }

    fn damage(rng: &mut fastrand::Rng, original: &[u8]) -> Vec<u8> {
        let mut bytes = original.to_vec();
        for _ in 0..rng.usize(1..4) {
            if bytes.is_empty() {
                break;
            }
            let at = rng.usize(..bytes.len());
            match rng.u8(..5) {
                0 => bytes.truncate(at),
                1 => bytes[at] = rng.u8(..),
                2 => {
                    let noise: Vec<u8> = (0..rng.usize(1..8)).map(|_| rng.u8(..)).collect();
                    bytes.splice(at..at, noise);
                }
                3 => {
                    let end = (at + rng.usize(1..40)).min(bytes.len());
                    bytes.drain(at..end);
                }
                _ => {
                    let end = (at + rng.usize(1..60)).min(bytes.len());
                    let copy = bytes[at..end].to_vec();
                    bytes.splice(at..at, copy);
                }
            }
        }
        bytes
    }

    fn read_damaged<D: Decoder>(original: &str, make: impl Fn() -> D) {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let ctx = ctx();
        for round in 0..1500 {
            let bytes = if round == 0 {
                original.as_bytes().to_vec()
            } else {
                damage(&mut rng, original.as_bytes())
            };
            let mut pipeline = Pipeline::new(make());
            let mut out = VecDeque::new();
            let mut ended = false;
            let mut failure = None;
            let mut rest = bytes.as_slice();
            while !rest.is_empty() && !ended && failure.is_none() {
                let take = rng.usize(1..=rest.len().min(64));
                match pipeline.push(&rest[..take], &ctx, &mut out) {
                    Ok(done) => ended = done,
                    Err(e) => failure = Some(e),
                }
                rest = &rest[take..];
            }
            if !ended && failure.is_none() {
                out.push_back(pipeline.end(&ctx));
            }
            if let Some(error) = failure {
                out.push_back(Err(error));
            }
            let last = out.pop_back().unwrap();
            assert!(
                out.iter()
                    .all(|item| item.as_ref().is_ok_and(|r| r.is_partial()))
            );
            match last {
                Ok(response) => assert!(!response.is_partial()),
                Err(error) => assert!(CODES.contains(&error.code.as_str()), "{error:?}"),
            }
            if round == 0 {
                let response = last_ok(&bytes, &make, &ctx);
                assert_eq!(response.content.text(), "明天");
                assert_eq!(response.content.function_calls().count(), 1);
            }
        }
    }

    fn last_ok<D: Decoder>(bytes: &[u8], make: &impl Fn() -> D, ctx: &Context) -> LlmResponse {
        let mut pipeline = Pipeline::new(make());
        let mut out = VecDeque::new();
        if !pipeline.push(bytes, ctx, &mut out).unwrap() {
            out.push_back(pipeline.end(ctx));
        }
        out.pop_back().unwrap().unwrap()
    }

    /// Found by fuzzing: a whole answer followed by a line that is not UTF-8 was read as a
    /// malformed stream when it arrived in one read, and as the answer when in several.
    #[test]
    fn events_before_a_malformed_line_are_read_however_the_stream_is_split() {
        let ctx = ctx();
        let bytes = [OPENAI.as_bytes(), b"data: \xff\xfe\n\n"].concat();
        for piece in [1, 5, 64, bytes.len()] {
            let mut pipeline = Pipeline::new(ChatDecoder::new(Default::default()));
            let mut out = VecDeque::new();
            let mut done = false;
            for chunk in bytes.chunks(piece) {
                done = pipeline
                    .push(chunk, &ctx, &mut out)
                    .unwrap_or_else(|e| panic!("piece {piece}: {e:?}"));
                if done {
                    break;
                }
            }
            assert!(done, "piece {piece}: [DONE] not seen");
            let last = out.pop_back().unwrap().unwrap();
            assert_eq!(last.content.text(), "明天", "piece {piece}");
        }
        // An event that fails before the bad line fails the same way in one read as in many.
        let bytes = b"data: {chunk}\n\ndata: \xff\n\n";
        let errors: Vec<String> = [1, bytes.len()]
            .into_iter()
            .map(|piece| {
                let mut pipeline = Pipeline::new(ChatDecoder::new(Default::default()));
                let mut out = VecDeque::new();
                bytes
                    .chunks(piece)
                    .find_map(|chunk| pipeline.push(chunk, &ctx, &mut out).err())
                    .unwrap()
                    .message
            })
            .collect();
        assert!(errors[0].contains("not valid JSON"), "{errors:?}");
        assert_eq!(errors[0], errors[1]);
    }

    #[test]
    fn openai_streams() {
        read_damaged(OPENAI, || ChatDecoder::new(Default::default()));
    }

    #[test]
    fn anthropic_streams() {
        read_damaged(ANTHROPIC, || MessagesDecoder::new(Default::default()));
    }

    #[test]
    fn gemini_streams() {
        read_damaged(GEMINI, || {
            GenerateDecoder::new(Default::default(), Default::default())
        });
    }
}
