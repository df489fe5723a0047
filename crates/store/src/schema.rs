//! The schema and its migrations. A migration is never edited once released: changes are new
//! migrations appended to the list, so every existing database can be brought forward.

use std::path::Path;

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use crate::StoreError;

const MIGRATIONS: &[M<'static>] = &[
    M::up(
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
    ),
    // The engine's durable suspension (design.md §2). Each record is kept whole as JSON in `data`;
    // the other columns copy the fields the engine looks rows up by, so every hot query is an
    // index range and a record's shape can grow without a migration.
    M::up(
        r#"
-- One row per turn. Goes with its session.
CREATE TABLE invocations (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status      TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    data        TEXT NOT NULL
) STRICT;
-- Open turns at start-up (running → interrupted, suspended → listed).
CREATE INDEX invocations_by_status ON invocations (status, started_at, id);
-- Keeps deleting a session from scanning every turn.
CREATE INDEX invocations_by_session ON invocations (session_id);

-- One row per function call the engine holds or has held. `version` is the optimistic lock.
CREATE TABLE tool_calls (
    call_id        TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    invocation_id  TEXT NOT NULL,
    status         TEXT NOT NULL,
    version        INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    data           TEXT NOT NULL
) STRICT;
-- Pending approvals and sign-ins across every session.
CREATE INDEX tool_calls_by_status ON tool_calls (status, created_at);
-- A turn's calls, when it resumes.
CREATE INDEX tool_calls_by_invocation ON tool_calls (invocation_id, created_at);
-- A session's calls, and deleting a session without a scan.
CREATE INDEX tool_calls_by_session ON tool_calls (session_id, created_at);

-- Always-allow and never-allow rules; revoked ones stay, for the record.
CREATE TABLE rules (
    id          TEXT PRIMARY KEY,
    tool        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    data        TEXT NOT NULL
) STRICT;
CREATE INDEX rules_by_age ON rules (created_at, id);

-- One row per dispatch of a write: inserted before it runs, finished after it returns. Goes with
-- its session, like the call it belongs to.
CREATE TABLE dispatch_journal (
    call_id      TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    data         TEXT NOT NULL,
    PRIMARY KEY (call_id, attempt)
) STRICT;
-- Only the rows recovery looks at: the index stays as small as the writes in flight.
CREATE INDEX dispatch_journal_unfinished ON dispatch_journal (started_at, call_id, attempt)
    WHERE finished_at IS NULL;
CREATE INDEX dispatch_journal_by_session ON dispatch_journal (session_id);

-- The audit trail. No foreign key: it outlives the sessions it mentions. Rows are never deleted,
-- so the rowid only grows without AUTOINCREMENT's extra write to sqlite_sequence on every insert.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,
    session_id  TEXT,
    call_id     TEXT,
    tool        TEXT,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL
) STRICT;
CREATE INDEX audit_by_time ON audit_log (at, id);
CREATE INDEX audit_by_session ON audit_log (session_id, at, id);
CREATE INDEX audit_by_tool ON audit_log (tool, at, id);
"#,
    ),
    // The token vault (design.md §3, crate::vault). Only ciphertext is stored: the master key lives
    // in the OS keychain or a key file, never in this database.
    M::up(
        r#"
-- One row per secret, AES-256-GCM encrypted with a fresh 96-bit nonce on every write. The name is
-- the associated data, so a ciphertext copied under another name does not decrypt. `key_id` is the
-- fingerprint of the master key that wrote the row: it tells which key to look for and lets a
-- later version re-encrypt under a new key.
CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    nonce       BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    key_id      TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
"#,
    ),
];

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
#[allow(clippy::unwrap_used)]
mod tests {
    use agent::persist::{AuditFilter, Commit, EngineStore};
    use agent::{Content, Event};

    use super::*;
    use crate::Store;

    #[test]
    fn migrations_are_valid() {
        assert!(super::migrations().validate().is_ok());
    }

    /// A database written before the engine tables existed is brought forward with its sessions.
    #[test]
    fn a_version_1_database_is_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("companion.db");
        let hello = Event::new("inv-1", "user").with_content(Content::user_text("你好"));
        {
            // Exactly what a build that knew only migration 1 wrote.
            let mut conn = Connection::open(&path).unwrap();
            Migrations::from_slice(&MIGRATIONS[..1])
                .to_latest(&mut conn)
                .unwrap();
            conn.execute(
                "INSERT INTO sessions (id, app_name, user_id, created_at) VALUES ('s', 'app', 'u', 1)",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (session_id, seq, id, invocation_id, author, timestamp, data)
                 VALUES ('s', 1, ?1, 'inv-1', 'user', ?2, ?3)",
                rusqlite::params![
                    hello.id,
                    hello.timestamp,
                    serde_json::to_string(&hello).unwrap()
                ],
            )
            .unwrap();
            let version: i64 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .unwrap();
            assert_eq!(version, 1);
        }
        let store = Store::open(&path).unwrap();
        let version: i64 = store
            .conn()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(usize::try_from(version).unwrap(), SCHEMA_VERSION);
        assert_eq!(store.load_session("s").unwrap().events, vec![hello]);
        let seq = store
            .commit(&Commit {
                session_id: "s".to_owned(),
                expected_seq: 1,
                events: vec![Event::new("inv-2", "user")],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(seq, 2);
        assert!(store.audit(&AuditFilter::default()).unwrap().is_empty());
    }
}
