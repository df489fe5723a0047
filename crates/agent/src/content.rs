//! Message content: [`Content`] is one message, made of [`Part`]s; a part is text, a function call,
//! a function response or inline bytes ([`Blob`]) — the seed's four kinds — or the model's
//! [`Reasoning`], a fifth kind for thinking models.
//!
//! The seed says only one field of a part may be set; here [`Part`] is an enum, so a part with two
//! kinds cannot be built, and a JSON part with two (or zero) kinds is rejected when read.
//!
//! Reasoning is kept in the model's turn because some services (DeepSeek and Kimi in thinking
//! mode, Claude with thinking) refuse a later request whose history drops it. It is not text:
//! [`Part::text`] and [`Content::text`] skip it, so it never reaches the answer the user reads
//! or the text a tool or callback sees as the model's words.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The role of user-authored content.
pub const ROLE_USER: &str = "user";
/// The role of model-authored content.
pub const ROLE_MODEL: &str = "model";

/// Function-call name of an agent transfer ([`Part::from_agent_transfer`]).
pub const TRANSFER_TO_AGENT: &str = "transfer_to_agent";
/// Function-call name that ends the session ([`Part::from_end_session`]).
pub const END_SESSION: &str = "end_session";
/// Function-call name of a customised response ([`Part::from_customized_response`]).
pub const CUSTOMIZED_RESPONSE: &str = "customized_response";

/// Inline bytes. On the wire `data` is base64; in memory the decoded bytes are [`Blob::raw_data`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "BlobWire", into = "BlobWire")]
pub struct Blob {
    /// A label or file name that tells blobs apart.
    pub display_name: Option<String>,
    /// The IANA MIME type of the data.
    pub mime_type: Option<String>,
    /// The decoded bytes.
    pub raw_data: Vec<u8>,
    /// A cached transcript, meaningful for audio only (see [`Blob::transcript`]).
    pub cached_transcript: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlobWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transcript: Option<String>,
}

impl TryFrom<BlobWire> for Blob {
    type Error = String;

    fn try_from(wire: BlobWire) -> Result<Self, Self::Error> {
        let raw_data = match wire.data {
            Some(data) => BASE64
                .decode(data.as_bytes())
                .map_err(|e| format!("field `data` is not valid base64: {e}"))?,
            None => Vec::new(),
        };
        Ok(Blob {
            display_name: wire.display_name,
            mime_type: wire.mime_type,
            raw_data,
            cached_transcript: wire.transcript,
        })
    }
}

impl From<Blob> for BlobWire {
    fn from(blob: Blob) -> Self {
        BlobWire {
            display_name: blob.display_name,
            mime_type: blob.mime_type,
            data: (!blob.raw_data.is_empty()).then(|| BASE64.encode(&blob.raw_data)),
            transcript: blob.cached_transcript,
        }
    }
}

impl Blob {
    /// An empty blob of this MIME type, as the seed's `Blob(mime_type='text/plain')`.
    pub fn new(mime_type: impl Into<String>) -> Self {
        Blob {
            mime_type: Some(mime_type.into()),
            ..Blob::default()
        }
    }

    /// A blob holding these bytes.
    pub fn from_bytes(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Blob {
            raw_data: data.into(),
            ..Blob::new(mime_type)
        }
    }

    /// A blob holding a JSON string, with `mime_type` set to `application/json`.
    ///
    /// ```
    /// let blob = agent::Blob::from_json(r#"{"key": "value"}"#);
    /// assert_eq!(blob.mime_type.as_deref(), Some("application/json"));
    /// assert_eq!(blob.raw_data, br#"{"key": "value"}"#);
    /// ```
    pub fn from_json(data: &str) -> Self {
        Blob::from_bytes(data.as_bytes(), "application/json")
    }

    /// The bytes base64-encoded, as the seed's `data` attribute.
    pub fn data(&self) -> String {
        BASE64.encode(&self.raw_data)
    }

    /// Replaces the bytes with the decoding of base64 `data`.
    pub fn set_data(&mut self, data: &str) -> Result<(), base64::DecodeError> {
        self.raw_data = BASE64.decode(data.as_bytes())?;
        Ok(())
    }

    /// The cached transcript, for audio blobs only.
    pub fn transcript(&self) -> Option<&str> {
        let is_audio = self
            .mime_type
            .as_deref()
            .is_some_and(|m| m.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("audio/")));
        if is_audio {
            self.cached_transcript.as_deref()
        } else {
            None
        }
    }
}

/// A function call predicted by the model: a name and JSON arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionCall {
    /// The call's unique id; responses refer to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The arguments as a JSON object.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub args: Map<String, Value>,
}

impl FunctionCall {
    /// A call with no id yet.
    pub fn new(name: impl Into<String>, args: Map<String, Value>) -> Self {
        FunctionCall {
            id: None,
            name: name.into(),
            args,
        }
    }
}

/// The result of a [`FunctionCall`], given back to the model.
///
/// The seed: put the output under `"output"` and error details under `"error"`; when neither key
/// is present the whole `response` is the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionResponse {
    /// The id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The response as a JSON object.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub response: Map<String, Value>,
}

impl FunctionResponse {
    /// A response with no id yet.
    pub fn new(name: impl Into<String>, response: Map<String, Value>) -> Self {
        FunctionResponse {
            id: None,
            name: name.into(),
            response,
        }
    }

    /// `{"output": value}`.
    pub fn from_output(name: impl Into<String>, output: impl Into<Value>) -> Self {
        FunctionResponse::new(name, single("output", output.into()))
    }

    /// `{"error": value}`.
    pub fn from_error(name: impl Into<String>, error: impl Into<Value>) -> Self {
        FunctionResponse::new(name, single("error", error.into()))
    }

    /// Sets the id of the call this answers.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The function's output: `response["output"]`, or the whole response when it has neither an
    /// `output` nor an `error` key. `None` when only an error was given.
    pub fn output(&self) -> Option<Value> {
        match self.response.get("output") {
            Some(output) => Some(output.clone()),
            None if self.response.contains_key("error") => None,
            None => Some(Value::Object(self.response.clone())),
        }
    }

    /// The error details, if the response has an `error` key.
    pub fn error(&self) -> Option<&Value> {
        self.response.get("error")
    }
}

fn single(key: &str, value: Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    map
}

/// What a thinking model reasoned before it answered (DeepSeek's and Kimi's `reasoning_content`,
/// Claude's `thinking` blocks, Gemini's thought summaries). Shown to the user collapsed, apart
/// from the answer; sent back to the model only where its service requires it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    /// The reasoning as the model wrote it; empty when the service sent it encrypted.
    #[serde(default)]
    pub text: String,
    /// An opaque token the service attached to the reasoning (Claude's `signature`) and checks
    /// when it comes back, so it is kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Reasoning the service returned only in encrypted form (Claude's `redacted_thinking`,
    /// whose `data` is then in `signature`): nothing to show, only to send back.
    #[serde(
        default,
        deserialize_with = "crate::json::null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub redacted: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Reasoning {
    /// Reasoning text with no signature.
    pub fn new(text: impl Into<String>) -> Self {
        Reasoning {
            text: text.into(),
            ..Reasoning::default()
        }
    }
}

/// One piece of a message. Exactly one kind, as the seed requires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PartWire", into = "PartWire")]
pub enum Part {
    /// Message text.
    Text(String),
    /// A function call predicted by the model.
    FunctionCall(FunctionCall),
    /// The result of a function call.
    FunctionResponse(FunctionResponse),
    /// Inline bytes.
    InlineData(Blob),
    /// The model's reasoning before its answer; not text (see the module's documentation).
    Reasoning(Reasoning),
}

/// The seed's wire shape: four optional fields (and `reasoning`) of which exactly one is set.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PartWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inline_data: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
}

impl TryFrom<PartWire> for Part {
    type Error = String;

    fn try_from(wire: PartWire) -> Result<Self, Self::Error> {
        // Every stored event's parts come through here when a session loads, so the common case
        // (exactly one field) allocates nothing; the names are only gathered for the error.
        let set = [
            ("text", wire.text.is_some()),
            ("function_call", wire.function_call.is_some()),
            ("function_response", wire.function_response.is_some()),
            ("inline_data", wire.inline_data.is_some()),
            ("reasoning", wire.reasoning.is_some()),
        ];
        let count = set.iter().filter(|(_, is_set)| *is_set).count();
        if count > 1 {
            let names: Vec<&str> = set
                .iter()
                .filter(|(_, is_set)| *is_set)
                .map(|(name, _)| *name)
                .collect();
            return Err(format!(
                "a part may set only one field, but sets `{}`",
                names.join("` and `")
            ));
        }
        let part = if let Some(text) = wire.text {
            Part::Text(text)
        } else if let Some(call) = wire.function_call {
            Part::FunctionCall(call)
        } else if let Some(response) = wire.function_response {
            Part::FunctionResponse(response)
        } else if let Some(blob) = wire.inline_data {
            Part::InlineData(blob)
        } else if let Some(reasoning) = wire.reasoning {
            Part::Reasoning(reasoning)
        } else {
            return Err(
                "a part must set one of `text`, `function_call`, `function_response`, `inline_data`, `reasoning`; none is set"
                    .to_owned(),
            );
        };
        Ok(part)
    }
}

impl From<Part> for PartWire {
    fn from(part: Part) -> Self {
        match part {
            Part::Text(text) => PartWire {
                text: Some(text),
                ..PartWire::default()
            },
            Part::FunctionCall(call) => PartWire {
                function_call: Some(call),
                ..PartWire::default()
            },
            Part::FunctionResponse(response) => PartWire {
                function_response: Some(response),
                ..PartWire::default()
            },
            Part::InlineData(blob) => PartWire {
                inline_data: Some(blob),
                ..PartWire::default()
            },
            Part::Reasoning(reasoning) => PartWire {
                reasoning: Some(reasoning),
                ..PartWire::default()
            },
        }
    }
}

impl Part {
    /// A text part.
    ///
    /// ```
    /// let part = agent::Part::from_text("Hello from the user!");
    /// assert_eq!(part.text(), Some("Hello from the user!"));
    /// ```
    pub fn from_text(text: impl Into<String>) -> Self {
        Part::Text(text.into())
    }

    /// A function-call part.
    ///
    /// ```
    /// let part = agent::Part::from_function_call(
    ///     "get_weather",
    ///     serde_json::json!({"location": "Mountain View"}).as_object().unwrap().clone(),
    /// );
    /// assert!(part.has_function_call("get_weather"));
    /// ```
    pub fn from_function_call(name: impl Into<String>, args: Map<String, Value>) -> Self {
        Part::FunctionCall(FunctionCall::new(name, args))
    }

    /// A function-response part.
    pub fn from_function_response(name: impl Into<String>, response: Map<String, Value>) -> Self {
        Part::FunctionResponse(FunctionResponse::new(name, response))
    }

    /// An inline-data part.
    pub fn from_inline_data(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Part::InlineData(Blob::from_bytes(data, mime_type))
    }

    /// An inline-data part holding a JSON string (`application/json`).
    pub fn from_json(data: &str) -> Self {
        Part::InlineData(Blob::from_json(data))
    }

    /// A part that transfers the conversation to another agent: a `transfer_to_agent` call.
    pub fn from_agent_transfer(agent: impl Into<String>) -> Self {
        Part::from_function_call(
            TRANSFER_TO_AGENT,
            object(json!({ "agent_name": agent.into() })),
        )
    }

    /// A part that ends the session: an `end_session` call with the reason and whether the
    /// session is escalated to a person.
    pub fn from_end_session(reason: impl Into<String>, escalated: bool) -> Self {
        Part::from_function_call(
            END_SESSION,
            object(json!({ "reason": reason.into(), "session_escalated": escalated })),
        )
    }

    /// A part asking for a response with customised behaviour (barge-in, DTMF input).
    pub fn from_customized_response(response: CustomizedResponse) -> Self {
        Part::from_function_call(CUSTOMIZED_RESPONSE, object(json!(response)))
    }

    /// The text, if this is a text part.
    pub fn text(&self) -> Option<&str> {
        match self {
            Part::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The function call, if this is one.
    pub fn function_call(&self) -> Option<&FunctionCall> {
        match self {
            Part::FunctionCall(call) => Some(call),
            _ => None,
        }
    }

    /// The function response, if this is one.
    pub fn function_response(&self) -> Option<&FunctionResponse> {
        match self {
            Part::FunctionResponse(response) => Some(response),
            _ => None,
        }
    }

    /// A reasoning part.
    ///
    /// ```
    /// let part = agent::Part::from_reasoning("The user asks about tomorrow; list the events.");
    /// assert_eq!(part.text(), None, "reasoning is not text");
    /// assert!(part.reasoning().is_some());
    /// ```
    pub fn from_reasoning(text: impl Into<String>) -> Self {
        Part::Reasoning(Reasoning::new(text))
    }

    /// The reasoning, if this is some.
    pub fn reasoning(&self) -> Option<&Reasoning> {
        match self {
            Part::Reasoning(reasoning) => Some(reasoning),
            _ => None,
        }
    }

    /// The inline data, if this is some.
    pub fn inline_data(&self) -> Option<&Blob> {
        match self {
            Part::InlineData(blob) => Some(blob),
            _ => None,
        }
    }

    /// The text if there is some, otherwise the inline data's transcript.
    pub fn text_or_transcript(&self) -> Option<&str> {
        match self {
            Part::Text(text) => Some(text),
            Part::InlineData(blob) => blob.transcript(),
            _ => None,
        }
    }

    /// Whether this part is a call of the function `name`.
    pub fn has_function_call(&self, name: &str) -> bool {
        self.function_call().is_some_and(|c| c.name == name)
    }

    /// Whether this part is a response of the function `name`.
    pub fn has_function_response(&self, name: &str) -> bool {
        self.function_response().is_some_and(|r| r.name == name)
    }
}

/// The options of [`Part::from_customized_response`], with the seed's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomizedResponse {
    /// What to say.
    pub content: String,
    /// Do not let the user interrupt.
    pub disable_barge_in: bool,
    /// Accept keypad (DTMF) input.
    pub enable_dtmf: bool,
    /// The digit that ends DTMF input.
    pub dtmf_finish_digit: String,
    /// Seconds of silence that end DTMF input.
    pub dtmf_endpointing_timeout: u32,
}

impl CustomizedResponse {
    /// A response with this content and the seed's defaults for everything else.
    pub fn new(content: impl Into<String>) -> Self {
        CustomizedResponse {
            content: content.into(),
            disable_barge_in: false,
            enable_dtmf: false,
            dtmf_finish_digit: "#".to_owned(),
            dtmf_endpointing_timeout: 3,
        }
    }
}

/// The object inside a `json!({...})` literal; those literals are objects by construction.
fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// One message of the user or the model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Content {
    /// The parts of the message.
    #[serde(default, deserialize_with = "crate::json::null_as_default")]
    pub parts: Vec<Part>,
    /// Who wrote it: `user` or `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl Content {
    /// A message with this role and these parts.
    pub fn new(role: impl Into<String>, parts: Vec<Part>) -> Self {
        Content {
            parts,
            role: Some(role.into()),
        }
    }

    /// A user message with one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Content::new(ROLE_USER, vec![Part::from_text(text)])
    }

    /// A model message with one text part.
    pub fn model_text(text: impl Into<String>) -> Self {
        Content::new(ROLE_MODEL, vec![Part::from_text(text)])
    }

    /// Whether the role is `user`.
    pub fn is_user(&self) -> bool {
        self.role.as_deref() == Some(ROLE_USER)
    }

    /// Whether the role is `model`.
    pub fn is_model(&self) -> bool {
        self.role.as_deref() == Some(ROLE_MODEL)
    }

    /// The function calls among the parts.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.parts.iter().filter_map(Part::function_call)
    }

    /// The function responses among the parts.
    pub fn function_responses(&self) -> impl Iterator<Item = &FunctionResponse> {
        self.parts.iter().filter_map(Part::function_response)
    }

    /// All text parts joined, for display. Reasoning is not included.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(Part::text).collect()
    }

    /// The reasoning parts' text joined, for showing apart from the answer.
    pub fn reasoning_text(&self) -> String {
        self.parts
            .iter()
            .filter_map(Part::reasoning)
            .map(|r| r.text.as_str())
            .collect()
    }
}

#[cfg(test)]
mod reasoning_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn reasoning_is_a_part_of_its_own_and_never_text() {
        let content = Content::new(
            ROLE_MODEL,
            vec![
                Part::Reasoning(Reasoning {
                    text: "先查日历。".to_owned(),
                    signature: Some("sig-1".to_owned()),
                    redacted: false,
                }),
                Part::from_text("明天有两个会。"),
            ],
        );
        assert_eq!(
            content.text(),
            "明天有两个会。",
            "the answer holds no reasoning"
        );
        assert_eq!(content.reasoning_text(), "先查日历。");
        let wire = serde_json::to_value(&content).unwrap();
        assert_eq!(
            wire["parts"][0],
            json!({"reasoning": {"text": "先查日历。", "signature": "sig-1"}})
        );
        let back: Content = serde_json::from_value(wire).unwrap();
        assert_eq!(back, content);
        let two: Result<Part, _> =
            serde_json::from_value(json!({"text": "a", "reasoning": {"text": "b"}}));
        assert!(
            two.unwrap_err()
                .to_string()
                .contains("`text` and `reasoning`")
        );
    }
}
