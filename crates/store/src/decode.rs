//! Reading a session's events: the rows are stepped on the caller's thread, which holds the
//! connection, and decoded into [`Event`]s on as many cores as there are.
//!
//! Decoding the JSON is five to six times the cost of stepping the rows (design.md §5 keeps the
//! load within 2× of the raw read), and one connection can only be stepped by one thread, so the
//! rows are copied out in chunks as they are stepped and the chunks are decoded while the rest are
//! still being read. A session too short to be worth a thread is decoded in line.

use std::path::Path;
use std::sync::{Mutex, mpsc};

use agent::Event;
use rusqlite::Connection;
use rusqlite::types::{FromSqlError, ValueRef};

use crate::StoreError;

/// Rows per chunk: large enough that handing a chunk over costs nothing next to decoding it,
/// small enough that the last chunk read does not leave one core decoding alone for long.
const CHUNK_ROWS: usize = 256;

/// Sessions shorter than this are decoded on the caller's thread: starting a thread costs about
/// as much as decoding a few hundred events.
const PARALLEL_FROM: usize = 2 * CHUNK_ROWS;

/// Most decoding threads besides the caller's; past a few the single reader is the bottleneck.
const MAX_HELPERS: usize = 3;

/// Consecutive rows as read: every `data` column back to back in one buffer, so reading a row
/// costs a copy and no allocation.
#[derive(Debug, Default)]
struct Chunk {
    index: usize,
    seqs: Vec<i64>,
    ends: Vec<usize>,
    data: Vec<u8>,
}

impl Chunk {
    /// `bytes` is the size of the chunk before, which the rows of a session are close to: the
    /// buffer is not regrown (and recopied) as it fills.
    fn new(index: usize, bytes: usize) -> Chunk {
        Chunk {
            index,
            seqs: Vec::with_capacity(CHUNK_ROWS),
            ends: Vec::with_capacity(CHUNK_ROWS),
            data: Vec::with_capacity(bytes),
        }
    }

    fn len(&self) -> usize {
        self.seqs.len()
    }
}

/// Where decoding happens and what an error names.
struct Decoder<'a> {
    path: &'a Path,
    session_id: &'a str,
}

impl Decoder<'_> {
    /// The chunk's events in order, or the error of its first bad row, as the load reported one
    /// row at a time.
    fn decode(&self, chunk: &Chunk) -> Result<Vec<Event>, StoreError> {
        let mut events = Vec::with_capacity(chunk.len());
        let mut start = 0;
        for (&seq, &end) in chunk.seqs.iter().zip(&chunk.ends) {
            let bytes = chunk.data.get(start..end).unwrap_or_default();
            start = end;
            events.push(self.event(seq, bytes)?);
        }
        Ok(events)
    }

    /// One row's event. sonic-rs (SIMD, and checking UTF-8 as it parses) reads the rows, which
    /// serde_json wrote and which are almost always valid; only a row it refuses is read again by
    /// the engine's own reader, so a bad row is reported exactly as before: which field is wrong,
    /// or that the text is not UTF-8.
    fn event(&self, seq: i64, bytes: &[u8]) -> Result<Event, StoreError> {
        if let Ok(event) = sonic_rs::from_slice::<Event>(bytes) {
            return Ok(event);
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| StoreError::from_sqlite(self.path, FromSqlError::Utf8Error(e).into()))?;
        agent::json::from_str::<Event>(text).map_err(|source| StoreError::CorruptEvent {
            path: self.path.to_path_buf(),
            session_id: self.session_id.to_owned(),
            seq: u64::try_from(seq).unwrap_or(0),
            source,
        })
    }
}

/// Reads up to a chunk of rows. A row that cannot be read ends the chunk early with its error,
/// and the rows before it still come back: they are decoded first, so a bad event before the
/// unreadable row is what gets reported, as when rows were read and decoded one at a time.
fn read_chunk(
    rows: &mut rusqlite::Rows<'_>,
    path: &Path,
    index: usize,
    bytes: usize,
) -> (Chunk, Result<(), StoreError>) {
    let mut chunk = Chunk::new(index, bytes);
    let db_err = |e| StoreError::from_sqlite(path, e);
    while chunk.len() < CHUNK_ROWS {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => return (chunk, Err(db_err(e))),
        };
        let read = row
            .get::<_, i64>(0)
            .and_then(|seq| Ok((seq, row.get_ref(1)?)));
        match read {
            Ok((seq, ValueRef::Text(bytes))) => {
                chunk.seqs.push(seq);
                chunk.data.extend_from_slice(bytes);
                chunk.ends.push(chunk.data.len());
            }
            // What `ValueRef::as_str` says of a value that is not text.
            Ok(_) => return (chunk, Err(db_err(FromSqlError::InvalidType.into()))),
            Err(e) => return (chunk, Err(db_err(e))),
        }
    }
    (chunk, Ok(()))
}

/// Every event of `session_id` in sequence order; `expected` (the last sequence) sizes the result
/// and decides whether decoding is shared out.
pub(crate) fn load_events(
    conn: &Connection,
    path: &Path,
    session_id: &str,
    expected: usize,
) -> Result<Vec<Event>, StoreError> {
    let db_err = |e| StoreError::from_sqlite(path, e);
    let decoder = Decoder { path, session_id };
    let mut stmt = conn
        .prepare_cached("SELECT seq, data FROM events WHERE session_id = ?1 ORDER BY seq")
        .map_err(db_err)?;
    let mut rows = stmt.query([session_id]).map_err(db_err)?;
    let helpers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .saturating_sub(1)
        .min(MAX_HELPERS);

    let mut events = Vec::with_capacity(expected);
    if expected < PARALLEL_FROM || helpers == 0 {
        // Decoded straight from SQLite's buffer: no chunk to copy into, nor out of.
        while let Some(row) = rows.next().map_err(db_err)? {
            let seq = row.get::<_, i64>(0).map_err(db_err)?;
            match row.get_ref(1).map_err(db_err)? {
                ValueRef::Text(bytes) => events.push(decoder.event(seq, bytes)?),
                // What `ValueRef::as_str` says of a value that is not text.
                _ => return Err(db_err(FromSqlError::InvalidType.into())),
            }
        }
        return Ok(events);
    }

    let (send, receive) = mpsc::channel::<Chunk>();
    let receive = Mutex::new(receive);
    // Each decoder takes the next chunk read; the caller's thread joins them once it has read the
    // last row. Results come back tagged with their chunk's place.
    let work = |decoder: &Decoder<'_>| {
        let mut done = Vec::new();
        loop {
            let next = receive
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .recv();
            let Ok(chunk) = next else { break };
            done.push((chunk.index, decoder.decode(&chunk)));
        }
        done
    };
    let (unread, mut done) = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..helpers)
            .map(|_| scope.spawn(|| work(&decoder)))
            .collect();
        let (mut index, mut bytes) = (0, 0);
        let unread = loop {
            let (chunk, read) = read_chunk(&mut rows, path, index, bytes);
            bytes = chunk.data.len();
            if let Err(err) = read {
                break Some((chunk, err));
            }
            let last = chunk.len() < CHUNK_ROWS;
            // A send fails only once every decoder has gone, and only a panic, which the
            // join below passes on, makes one go early.
            let _ = send.send(chunk);
            if last {
                break None;
            }
            index += 1;
        };
        drop(send);
        let mut done = work(&decoder);
        for thread in threads {
            match thread.join() {
                Ok(theirs) => done.extend(theirs),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        (unread, done)
    });
    done.sort_unstable_by_key(|(index, _)| *index);
    for (_, decoded) in done {
        events.extend(decoded?);
    }
    match unread {
        None => Ok(events),
        Some((partial, err)) => {
            decoder.decode(&partial)?;
            Err(err)
        }
    }
}
