//! The schema and its migrations. A migration is never edited once released: changes are new
//! migrations appended to the list, so every existing database can be brought forward.

use std::path::Path;

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use crate::StoreError;

const MIGRATIONS: &[M<'static>] = &[M::up(
    r#"
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_by_user ON sessions (app_name, user_id);

-- Append-only. The primary key is the per-session sequence, so loading a session is one range
-- scan and an append touches one index whatever the session's length.
CREATE TABLE events (
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    id             TEXT NOT NULL,
    invocation_id  TEXT NOT NULL,
    author         TEXT NOT NULL,
    timestamp      INTEGER NOT NULL,
    data           TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT;

-- State materialised from the deltas, one table per persisted scope. Keys keep their prefix.
CREATE TABLE session_state (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE user_state (
    app_name  TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE app_state (
    app_name  TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (app_name, key)
) STRICT, WITHOUT ROWID;
"#,
)];

/// The schema version this build writes (SQLite's `user_version`).
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::from_slice(MIGRATIONS)
}

/// Refuses a database written by a newer version of the app, before anything touches it.
pub(crate) fn refuse_newer(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| StoreError::at_open(path, e))?;
    if usize::try_from(found).map_or(true, |v| v > SCHEMA_VERSION) {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Brings the schema up to date.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    refuse_newer(conn, path)?;
    migrations().to_latest(conn).map_err(|e| match e {
        rusqlite_migration::Error::RusqliteError { err, .. } => StoreError::at_open(path, err),
        other => StoreError::Migration {
            path: path.to_path_buf(),
            detail: other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_are_valid() {
        assert!(super::migrations().validate().is_ok());
    }
}
