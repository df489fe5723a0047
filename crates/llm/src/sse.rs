//! A server-sent events (SSE) parser, fed with bytes as they arrive from the network.
//!
//! It follows the WHATWG event-stream rules that matter to model APIs: lines end in `\n`, `\r\n`
//! or `\r` (also when the pair is split across two network reads); `data:` lines accumulate, an
//! empty line dispatches the event, `event:` names it, `:` starts a comment (keep-alives), and
//! unknown fields are ignored. An event still unterminated when the stream ends is discarded, as
//! the spec says: for a model stream that means it was cut off, which the providers report as
//! `incomplete` rather than guessing at half a JSON document.
//!
//! Unlike a browser it refuses what would otherwise grow or corrupt silently: bytes that are not
//! UTF-8, and a line or an event larger than a bound. Those are [`SseError`]s, which the providers
//! turn into `malformed_stream`.

use std::fmt;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the server did not name it (the spec's `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why a byte stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line is not UTF-8.
    #[error("the event stream is not valid UTF-8 near byte {offset}")]
    InvalidUtf8 {
        /// Bytes into the stream where the bad line starts.
        offset: u64,
    },
    /// A line, or the data of one event, exceeds the bound.
    #[error("an event of the stream is larger than {limit} bytes")]
    TooLarge {
        /// The bound, in bytes.
        limit: usize,
    },
}

/// The default bound on one line or one event's data: far above any real model chunk, low
/// enough that a misbehaving server cannot make the app buffer without end.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// An incremental event-stream parser. Push bytes with [`SseParser::push`]; complete events come
/// out in order.
pub struct SseParser {
    /// Bytes not yet consumed: at most one unterminated line.
    buf: Vec<u8>,
    /// How many bytes at the start of `buf` are known to hold no line end: a line that arrives
    /// in many small reads is searched once, not again from its start at every read.
    searched: usize,
    /// The previous line ended with `\r`; a `\n` at the start of the next read belongs to it.
    skip_lf: bool,
    /// Nothing has been parsed yet (a leading byte-order mark is dropped).
    at_start: bool,
    /// Bytes consumed so far, for error positions.
    consumed: u64,
    event: String,
    data: String,
    has_data: bool,
    max_bytes: usize,
}

impl fmt::Debug for SseParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseParser")
            .field("buffered", &self.buf.len())
            .field("consumed", &self.consumed)
            .finish_non_exhaustive()
    }
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new()
    }
}

impl SseParser {
    /// A parser with the default size bound.
    pub fn new() -> Self {
        SseParser::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A parser refusing lines or events larger than `max_bytes`.
    pub fn with_max_event_bytes(max_bytes: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            searched: 0,
            skip_lf: false,
            at_start: true,
            consumed: 0,
            event: String::new(),
            data: String::new(),
            has_data: false,
            max_bytes,
        }
    }

    /// Parses `chunk`, appending every event it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut chunk = chunk;
        if self.skip_lf && !chunk.is_empty() {
            self.skip_lf = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
                self.consumed += 1;
            }
        }
        if self.buf.is_empty() {
            // The common case: no partial line left over, so lines are read straight from the
            // chunk without copying it into the buffer first.
            let used = self.lines(chunk, 0, out)?;
            self.keep(&chunk[used..])
        } else {
            let searched = std::mem::take(&mut self.searched);
            self.buf.extend_from_slice(chunk);
            let buf = std::mem::take(&mut self.buf);
            let used = self.lines(&buf, searched, out);
            self.buf = buf;
            let used = used?;
            self.buf.drain(..used);
            self.searched = self.buf.len();
            self.check_len()
        }
    }

    /// Keeps an unterminated tail for the next push.
    fn keep(&mut self, tail: &[u8]) -> Result<(), SseError> {
        self.buf.extend_from_slice(tail);
        self.searched = self.buf.len();
        self.check_len()
    }

    fn check_len(&self) -> Result<(), SseError> {
        if self.buf.len() > self.max_bytes {
            return Err(SseError::TooLarge {
                limit: self.max_bytes,
            });
        }
        Ok(())
    }

    /// Handles every complete line of `bytes`, whose first `searched` bytes hold no line end;
    /// returns how many bytes were consumed.
    fn lines(
        &mut self,
        bytes: &[u8],
        searched: usize,
        out: &mut Vec<SseEvent>,
    ) -> Result<usize, SseError> {
        let mut start = 0;
        let mut from = searched.min(bytes.len());
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &bytes[from..]) {
            let end = from + offset;
            let line = &bytes[start..end];
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    // The `\n` of a `\r\n` may be the first byte of the next read.
                    None => self.skip_lf = true,
                }
            }
            self.line(line, out)?;
            self.consumed += (next - start) as u64;
            start = next;
            from = next;
        }
        Ok(start)
    }

    fn line(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        // The same bound as on a line still waiting for its end (`check_len`), checked first: a
        // stream must fail the same way however the network splits it, and a long line seen
        // whole would otherwise be judged on its UTF-8 (or skipped, as a comment) instead.
        if line.len() > self.max_bytes {
            return Err(SseError::TooLarge {
                limit: self.max_bytes,
            });
        }
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8 {
            offset: self.consumed,
        })?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                // The `\n` joining this line to the previous one counts towards the bound too.
                let added = value.len() + usize::from(self.has_data);
                if self.data.len() + added > self.max_bytes {
                    return Err(SseError::TooLarge {
                        limit: self.max_bytes,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            // `id` and `retry` steer a browser's reconnection, which a model request never does;
            // other fields are ignored by the spec.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            });
        } else {
            self.event.clear();
        }
        self.has_data = false;
    }

    /// Whether bytes of an unfinished event are waiting for more input.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty() || self.has_data
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(piece.max(1)) {
            parser.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn every_split_of_the_input_gives_the_same_events() {
        let input = "\u{feff}: keep-alive\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: 你好\rdata:line2\r\rdata: [DONE]\n\n";
        let expected = vec![
            ev("message_start", "{\"a\":1}"),
            ev("", "你好\nline2"),
            ev("", "[DONE]"),
        ];
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), piece).unwrap(),
                expected,
                "piece {piece}"
            );
        }
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_dispatched() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser
            .push(b"data: {\"x\":1}\n\ndata: {\"cut", &mut out)
            .unwrap();
        assert_eq!(out, vec![ev("", "{\"x\":1}")]);
        assert!(parser.has_pending());
    }

    #[test]
    fn an_event_with_only_a_name_dispatches_nothing() {
        let out = parse_in_pieces(b"event: ping\n\ndata: x\n\n", 3).unwrap();
        assert_eq!(out, vec![ev("", "x")]);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let err = parse_in_pieces(b"data: ok\n\ndata: \xff\xfe\n\n", 4).unwrap_err();
        assert_eq!(err, SseError::InvalidUtf8 { offset: 10 });
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut parser = SseParser::with_max_event_bytes(64);
        let mut out = Vec::new();
        let err = (0..10)
            .find_map(|_| parser.push(&[b'a'; 16], &mut out).err())
            .unwrap();
        assert_eq!(err, SseError::TooLarge { limit: 64 });
    }

    #[test]
    fn endless_data_lines_are_refused() {
        let mut parser = SseParser::with_max_event_bytes(64);
        let mut out = Vec::new();
        let err = (0..10)
            .find_map(|_| parser.push(b"data: 0123456789abcdef\n", &mut out).err())
            .unwrap();
        assert_eq!(err, SseError::TooLarge { limit: 64 });
    }

    fn parse_with_bound(
        input: &[u8],
        piece: usize,
        bound: usize,
    ) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::with_max_event_bytes(bound);
        let mut out = Vec::new();
        for chunk in input.chunks(piece.max(1)) {
            parser.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    /// Found by fuzzing: a line over the bound that arrived whole was judged on its UTF-8 (or
    /// skipped as a comment) while the same line in pieces was refused as too large.
    #[test]
    fn a_line_over_the_bound_is_refused_however_the_stream_is_split() {
        let long_invalid = [
            b"data: ".as_slice(),
            &[0xE4; 70],
            b"

",
        ]
        .concat();
        let long_comment = [
            b": ".as_slice(),
            &[b'k'; 70],
            b"

data: x

",
        ]
        .concat();
        for input in [long_invalid, long_comment] {
            for piece in [1, 7, 64, input.len()] {
                assert_eq!(
                    parse_with_bound(&input, piece, 64),
                    Err(SseError::TooLarge { limit: 64 }),
                    "piece {piece} of {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
        // A line exactly at the bound is fine either way.
        let at_bound = [
            b"data: ".as_slice(),
            &[b'a'; 58],
            b"

",
        ]
        .concat();
        for piece in [1, 7, at_bound.len()] {
            assert_eq!(
                parse_with_bound(&at_bound, piece, 64).unwrap(),
                vec![ev("", &"a".repeat(58))]
            );
        }
    }

    /// Found by fuzzing (libFuzzer): the `\n` joining two data lines was not counted, so an
    /// event one byte over the bound came out.
    #[test]
    fn the_line_breaks_between_data_lines_count_towards_the_bound() {
        // 32 + 1 + 32 = 65 bytes of data: one over.
        let over = [
            b"data: ".as_slice(),
            &[b'a'; 32],
            b"\ndata: ",
            &[b'b'; 32],
            b"\n\n",
        ]
        .concat();
        for piece in [1, 7, over.len()] {
            assert_eq!(
                parse_with_bound(&over, piece, 64),
                Err(SseError::TooLarge { limit: 64 }),
                "piece {piece}"
            );
        }
        // 32 + 1 + 31 = 64: exactly at the bound.
        let at = [
            b"data: ".as_slice(),
            &[b'a'; 32],
            b"\ndata: ",
            &[b'b'; 31],
            b"\n\n",
        ]
        .concat();
        let events = parse_with_bound(&at, 5, 64).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), 64);
    }
}
