//! What can go wrong in the store, worded for the person who has to act on it.

use std::path::{Path, PathBuf};

use agent::DataError;
use rusqlite::ErrorCode;

/// A store failure. Messages name the database file and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file (or its folder) cannot be created, opened or read.
    #[error(
        "cannot open the database {}: {source}. Check that its folder exists and that this user may read and write it.",
        path.display()
    )]
    Io {
        /// The database file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// SQLite cannot open the file.
    #[error(
        "cannot open the database {}: {source}. Check that the file is not locked by another program and that this user may read and write it.",
        path.display()
    )]
    Unreadable {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file is damaged or is not a database at all.
    #[error(
        "the database {} is damaged or is not a Feishu Companion database ({detail}). It has been left untouched: move it aside or restore a backup, then start the app again to create a new one.",
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite reported.
        detail: String,
    },
    /// The file is a SQLite database of another program: never migrated, never written.
    #[error(
        "{} is not a Feishu Companion database: {reason}. It has been left untouched; the app keeps its data in its own file, so check the --data-dir folder or move this file out of the way.",
        path.display()
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// How it was recognised.
        reason: String,
    },
    /// The file was written by a newer version of the app.
    #[error(
        "the database {} was written by a newer version of Feishu Companion (schema {found}; this version knows up to {supported}). It has been left untouched: update the app to open it.",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The schema version found in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: usize,
    },
    /// A migration could not be applied.
    #[error("cannot upgrade the database {}: {detail}. It has been left as it was.", path.display())]
    Migration {
        /// The database file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// One stored event cannot be read back.
    #[error(
        "event {seq} of session {session_id} in {} cannot be read ({source}); the database has been left untouched.",
        path.display()
    )]
    CorruptEvent {
        /// The database file.
        path: PathBuf,
        /// The session.
        session_id: String,
        /// The event's sequence.
        seq: u64,
        /// Which field is wrong.
        source: DataError,
    },
    /// One stored engine record (an invocation, call, rule, journal or audit row) cannot be read
    /// back.
    #[error(
        "{table} row {key} in {} cannot be read ({source}); the database has been left untouched.",
        path.display()
    )]
    CorruptRecord {
        /// The database file.
        path: PathBuf,
        /// The table holding the row.
        table: &'static str,
        /// The row's key (a call id, an invocation id, `call_id/attempt`, an audit id…).
        key: String,
        /// Which field is wrong. Boxed to keep every `Result<_, StoreError>` small.
        source: Box<DataError>,
    },
    /// An engine record could not be turned into JSON.
    #[error("cannot serialise {what} {key}: {source}")]
    SerializeRecord {
        /// The kind of record.
        what: &'static str,
        /// Its key.
        key: String,
        /// serde's description of the problem.
        source: serde_json::Error,
    },
    /// No session has this id.
    #[error("session {0} does not exist")]
    SessionNotFound(String),
    /// A session with this id already exists.
    #[error("session {0} already exists")]
    SessionExists(String),
    /// Another writer appended since the caller last looked.
    #[error(
        "session {session_id} has moved on: the append expected event {expected} to be the last, but the last is {actual}. Reload the session and try again."
    )]
    StaleSequence {
        /// The session.
        session_id: String,
        /// The last sequence the caller saw.
        expected: u64,
        /// The session's actual last sequence.
        actual: u64,
    },
    /// Streamed chunks are previews of a complete event and are never stored.
    #[error("partial (streamed) events are not stored; append the complete event instead")]
    PartialEvent,
    /// A sequence number beyond SQLite's integer range.
    #[error("sequence {0} is out of range")]
    SequenceOverflow(u64),
    /// An event could not be turned into JSON.
    #[error("cannot serialise the event: {0}")]
    Serialize(serde_json::Error),
    /// Any other SQLite failure.
    #[error("database error in {}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

fn code(err: &rusqlite::Error) -> Option<ErrorCode> {
    err.sqlite_error_code()
}

impl StoreError {
    /// Classifies an error met while opening: damage and "not a database" are [`StoreError::Corrupt`],
    /// anything else [`StoreError::Unreadable`].
    pub(crate) fn at_open(path: &Path, source: rusqlite::Error) -> StoreError {
        match code(&source) {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: source.to_string(),
            },
            _ => StoreError::Unreadable {
                path: path.to_path_buf(),
                source,
            },
        }
    }

    /// Classifies an error met while working: damage is still [`StoreError::Corrupt`].
    pub(crate) fn from_sqlite(path: &Path, source: rusqlite::Error) -> StoreError {
        match code(&source) {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: source.to_string(),
            },
            _ => StoreError::Sqlite {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}
