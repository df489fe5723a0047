//! The sandbox's stdout and stderr: bounded in-memory buffers.
//!
//! wasmtime-wasi's own memory pipe traps when it is full, which would turn a chatty `print` loop
//! into a failed call; here output past the bound is dropped (and the truncation noted) while the
//! code goes on, so the bound protects the host without changing what the code does.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much a single WASI write may hand over; the usual WASI stream permit.
const WRITE_PERMIT: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    truncated: bool,
}

/// A bounded capture of one output stream; clones share the buffer.
#[derive(Debug, Clone)]
pub(crate) struct CapturedOutput {
    limit: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl CapturedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        CapturedOutput {
            limit,
            buffer: Arc::default(),
        }
    }

    fn append(&self, bytes: &[u8]) {
        // A poisoned lock only means another writer panicked mid-append; the bytes are still fine.
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.limit.saturating_sub(buffer.bytes.len());
        let take = room.min(bytes.len());
        buffer.bytes.extend_from_slice(&bytes[..take]);
        if take < bytes.len() {
            buffer.truncated = true;
        }
    }

    /// What was written (lossily decoded: Python writes UTF-8, a cut may split a character), and
    /// whether some was dropped.
    pub(crate) fn take(&self) -> (String, bool) {
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&buffer.bytes).into_owned();
        buffer.bytes.clear();
        (text, buffer.truncated)
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always ready: writes past the bound are dropped, never refused.
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_limit_is_dropped_and_noted() {
        let out = CapturedOutput::new(5);
        let mut stream = out.clone();
        assert!(stream.write(Bytes::from_static(b"abc")).is_ok());
        assert!(stream.write(Bytes::from_static(b"defg")).is_ok());
        assert_eq!(stream.check_write().ok(), Some(WRITE_PERMIT));
        assert_eq!(out.take(), ("abcde".to_owned(), true));
    }
}
