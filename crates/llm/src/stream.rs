//! Reading a provider's answer: bytes from the connection → SSE events → the provider's
//! [`Decoder`] → items of the engine's [`ModelStream`], and the assembly of streamed tool calls
//! that two of the three providers share.

use std::collections::VecDeque;
use std::time::Duration;

use agent::{Content, FunctionCall, LlmResponse, MalformedCall, ModelError, Part, ROLE_MODEL};
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
        self.parser
            .push(bytes, events)
            .map_err(|e| ctx.malformed(e))?;
        for event in events.drain(..) {
            if self.decoder.event(event, ctx, out)? {
                return Ok(true);
            }
        }
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
    LlmResponse {
        content: Content::new(ROLE_MODEL, vec![Part::from_text(text)]),
        partial: Some(true),
        malformed_calls: Vec::new(),
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
