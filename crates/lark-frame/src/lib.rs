//! The frames of Feishu's long connection ("长连接"): the WebSocket an app opens with its App ID
//! and App Secret to receive events and card callbacks without a public URL.
//!
//! Every WebSocket message is one binary protobuf `pbbp2.Frame` (proto2). Terms:
//! - **method**: `0` a control frame (`ping` / `pong`), `1` a data frame (an event or callback).
//! - **headers**: key/value strings; `type` says what the frame is (`ping`, `pong`, `event`,
//!   `card`), `message_id`, `sum` and `seq` split a large payload into parts, `trace_id` follows
//!   it through Feishu, and `biz_rt` is the milliseconds the client took to handle it. Card
//!   callbacks (`card.action.trigger`) come as `event` frames: the official Python SDK
//!   (`lark-oapi` 1.7.5, `ws/client.py`) drops frames of type `card` unanswered.
//! - **payload**: the event's JSON (data frames) or the client config (a `pong`'s JSON). The client
//!   answers a data frame by sending the same frame back with a JSON response as its payload.
//!
//! The message definitions follow Feishu's `pbbp2.proto` field for field (numbers, proto2
//! `required`/`optional`), so the official SDKs' clients and ours read the same bytes.
//!
//! Imports: no crate of this workspace.

use prost::Message;

/// `Frame.method` of a control frame (ping/pong).
pub const METHOD_CONTROL: i32 = 0;
/// `Frame.method` of a data frame (event, card callback).
pub const METHOD_DATA: i32 = 1;

/// Header keys Feishu uses.
pub mod header {
    pub const TYPE: &str = "type";
    pub const MESSAGE_ID: &str = "message_id";
    pub const SUM: &str = "sum";
    pub const SEQ: &str = "seq";
    pub const TRACE_ID: &str = "trace_id";
    pub const BIZ_RT: &str = "biz_rt";
}

/// Values of the `type` header.
pub mod kind {
    pub const PING: &str = "ping";
    pub const PONG: &str = "pong";
    pub const EVENT: &str = "event";
    /// The old style of card callback; Feishu's SDKs ignore these.
    pub const CARD: &str = "card";
}

/// `pbbp2.Header`.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Header {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// `pbbp2.Frame`. Field names keep Rust's case; their tags are the proto's.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Frame {
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

/// A frame that could not be read. prost does not insist on proto2's `required` fields (absent
/// ones read as zero), so a frame is judged by its `type` header and payload, not their presence.
pub use prost::DecodeError;

impl Frame {
    /// The value of header `key`, if the frame carries it.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// Sets header `key`, replacing an earlier value.
    pub fn set_header(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.headers.iter_mut().find(|h| h.key == key) {
            Some(h) => h.value = value,
            None => self.headers.push(Header {
                key: key.to_owned(),
                value,
            }),
        }
    }

    /// The frame's `type` header (`ping`, `pong`, `event`, `card`).
    pub fn kind(&self) -> Option<&str> {
        self.header(header::TYPE)
    }

    /// The bytes to send as one binary WebSocket message.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Reads one binary WebSocket message.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode(bytes)
    }

    /// A control frame of the given `type` (a client's `ping`, a server's `pong`).
    pub fn control(kind: &str, service: i32) -> Self {
        Self {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![Header {
                key: header::TYPE.to_owned(),
                value: kind.to_owned(),
            }],
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_survives_the_wire_with_its_headers_and_payload() {
        let mut frame = Frame::control(kind::PING, 7);
        frame.method = METHOD_DATA;
        frame.set_header(header::TYPE, kind::EVENT);
        frame.set_header(header::MESSAGE_ID, "m1");
        frame.payload = Some(br#"{"a":1}"#.to_vec());
        let back = Frame::from_bytes(&frame.to_bytes()).expect("decodes");
        assert_eq!(back, frame);
        assert_eq!(back.kind(), Some(kind::EVENT));
        assert_eq!(back.header(header::MESSAGE_ID), Some("m1"));
        assert_eq!(
            back.headers.len(),
            2,
            "set_header replaced `type` rather than adding one"
        );
    }

    #[test]
    fn a_truncated_frame_is_refused() {
        // A header (tag 5) announcing 12 bytes of which only 2 arrive.
        let err = Frame::from_bytes(&[0x08, 0x01, 0x2a, 0x0c, 0x0a, 0x04]).expect_err("truncated");
        assert!(!err.to_string().is_empty());
    }

    #[test]
    fn bytes_from_feishus_proto_decode_field_for_field() {
        // Hand-encoded per pbbp2.proto: SeqID=1, LogID=2, service=3, method=0,
        // headers=[{type: pong}], payload=b"{}".
        let bytes = [
            0x08, 0x01, 0x10, 0x02, 0x18, 0x03, 0x20, 0x00, 0x2a, 0x0c, 0x0a, 0x04, b't', b'y',
            b'p', b'e', 0x12, 0x04, b'p', b'o', b'n', b'g', 0x42, 0x02, b'{', b'}',
        ];
        let frame = Frame::from_bytes(&bytes).expect("decodes");
        assert_eq!(
            (frame.seq_id, frame.log_id, frame.service, frame.method),
            (1, 2, 3, METHOD_CONTROL)
        );
        assert_eq!(frame.kind(), Some(kind::PONG));
        assert_eq!(frame.payload.as_deref(), Some(&b"{}"[..]));
        assert_eq!(frame.to_bytes(), bytes, "encodes back to the same bytes");
    }
}
