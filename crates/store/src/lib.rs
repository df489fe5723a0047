//! SQLite persistence for Feishu Companion.
//!
//! The [`Store`] keeps *sessions* (one conversation each), their *events* (append-only, numbered by
//! a per-session *sequence* starting at 1) and the *state* materialised from the events'
//! `state_delta`s in three scopes: session (no prefix), user (`user:`, shared by one user's
//! sessions) and app (`app:`, shared by everyone); `temp:` keys are never written. Appending is a
//! single short transaction whose cost does not depend on the session's length, and it is
//! optimistic: the caller says which sequence it saw last, and a stale caller gets
//! [`StoreError::StaleSequence`] instead of interleaving its events with another writer's.
//!
//! The store also implements the engine's persistence, [`agent::persist::EngineStore`]: the
//! invocations, held calls, rules, dispatch journal and audit trail live in the same database, so a
//! whole engine step (events and records together) is one transaction.
//!
//! The [`vault`] keeps the user's tokens, the app secret and the model API keys in the same
//! database, encrypted (AES-256-GCM) under a master key held in the OS keychain or a private key
//! file.
//!
//! The store never deletes or recreates a user's database file on its own: a damaged file, one it
//! cannot read, or one written by a newer version is reported with the file's path and what to do.
//!
//! Imports: only `agent` (the records and the store trait it implements); nothing above it.

pub mod check;
mod decode;
mod engine;
mod error;
mod schema;
pub mod vault;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use agent::state::{APP_PREFIX, StateScope, USER_PREFIX};
use agent::{Event, StateMap};
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use serde_json::Value;

pub use error::StoreError;
pub use schema::SCHEMA_VERSION;
pub use vault::{SecretString, Vault, VaultError};

/// A session's identity and bookkeeping, without its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMeta {
    /// The session's id.
    pub id: String,
    /// The app the session belongs to; `app:` state is shared within it.
    pub app_name: String,
    /// The user the session belongs to; `user:` state is shared within it.
    pub user_id: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Milliseconds since the Unix epoch of the last append.
    pub updated_at: i64,
    /// The sequence of the last event; 0 for a session with none.
    pub last_seq: u64,
}

/// A session loaded whole: its events in order and its current state in all persisted scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Identity and bookkeeping.
    pub meta: SessionMeta,
    /// Every stored event, in sequence order (event `i` has sequence `i + 1`).
    pub events: Vec<Event>,
    /// Session, `user:` and `app:` variables merged into one map.
    pub state: StateMap,
}

/// The SQLite database of one user's sessions.
///
/// One connection behind a mutex: SQLite serialises writers anyway, and the engine's appends are
/// short, so a pool would add cost without adding throughput.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    check: std::sync::Arc<Mutex<check::CheckState>>,
}

impl Store {
    /// Opens the database at `path`, creating it (readable by this user only) when missing, and
    /// brings its schema up to date.
    ///
    /// ```
    /// use agent::{Content, Event, StateMap};
    /// use store::{Store, StoreError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path().join("companion.db"))?;
    /// let session = store.create_session("app", "me", None, &StateMap::new())?;
    /// let hello = Event::new("inv-1", "user").with_content(Content::user_text("你好"));
    /// assert_eq!(store.append_event(&session.id, 0, &hello)?, 1);
    /// // A writer that has not seen event 1 cannot append after 0 again.
    /// let stale = store.append_event(&session.id, 0, &hello);
    /// assert!(matches!(stale, Err(StoreError::StaleSequence { actual: 1, .. })));
    /// assert_eq!(store.load_session(&session.id)?.events, vec![hello]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_private_file(&path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn =
            Connection::open_with_flags(&path, flags).map_err(|e| StoreError::at_open(&path, e))?;
        Store::init(conn, path)
    }

    /// A private in-memory database, for tests and throwaway sessions.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()
            .map_err(|e| StoreError::at_open(Path::new(":memory:"), e))?;
        Store::init(conn, PathBuf::from(":memory:"))
    }

    fn init(mut conn: Connection, path: PathBuf) -> Result<Store, StoreError> {
        let at = |e| StoreError::at_open(&path, e);
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(at)?;
        // Reading the schema touches the header and first page, so a file that is not a database
        // fails here, before anything is written to it.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(at)?;
        // Before anything writes to the file: another program's database, or a newer version's,
        // must stay byte-for-byte as it was (even switching the journal mode rewrites its header).
        let ownership = check::ownership(&conn, &path)?;
        schema::refuse_newer(&conn, &path)?;
        // WAL: readers never block the writer, and a commit is one append to the log. NORMAL sync
        // in WAL mode survives any crash of the app; only a power cut can lose the last commits.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(at)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(at)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(at)?;
        schema::migrate(&mut conn, &path)?;
        if ownership == check::Ownership::Adopt {
            conn.pragma_update(None, "application_id", check::APPLICATION_ID)
                .map_err(at)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
            path,
            check: std::sync::Arc::new(Mutex::new(check::CheckState::Running)),
        })
    }

    /// The database file's path (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written (transactions roll
        // back on drop), so the connection is still good after poisoning.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn db_err(&self, err: rusqlite::Error) -> StoreError {
        StoreError::from_sqlite(&self.path, err)
    }

    /// Creates a session. `id` defaults to a fresh UUID; `initial_state` is applied like a first
    /// delta (its `temp:` keys are dropped, its `user:` and `app:` keys are shared as usual).
    pub fn create_session(
        &self,
        app_name: &str,
        user_id: &str,
        id: Option<&str>,
        initial_state: &StateMap,
    ) -> Result<SessionMeta, StoreError> {
        let id = id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let now = agent::now_millis();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        let inserted = tx
            .execute(
                "INSERT INTO sessions (id, app_name, user_id, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO NOTHING",
                params![id, app_name, user_id, now],
            )
            .map_err(|e| self.db_err(e))?;
        if inserted == 0 {
            return Err(StoreError::SessionExists(id));
        }
        write_state(&tx, &id, app_name, user_id, initial_state).map_err(|e| self.db_err(e))?;
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(SessionMeta {
            id,
            app_name: app_name.to_owned(),
            user_id: user_id.to_owned(),
            created_at: now,
            updated_at: now,
            last_seq: 0,
        })
    }

    /// Appends `event` after sequence `expected_seq` (the last sequence the caller saw) and
    /// applies its state delta. Returns the event's sequence, `expected_seq + 1`.
    ///
    /// Fails with [`StoreError::StaleSequence`] when another writer appended since, so two writers
    /// can never interleave. Partial (streamed) events are previews and are refused.
    pub fn append_event(
        &self,
        session_id: &str,
        expected_seq: u64,
        event: &Event,
    ) -> Result<u64, StoreError> {
        let events = std::slice::from_ref(event);
        let data = serialize_events(events)?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        let seq = self.append_in(&tx, session_id, expected_seq, events, &data)?;
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(seq)
    }

    /// The session's last sequence (0 for none), read inside `tx`.
    fn last_seq_in(&self, tx: &Transaction<'_>, session_id: &str) -> Result<u64, StoreError> {
        // Reads the end of the events index and writes nothing: a session row rewritten on every
        // append would double the pages each commit puts in the WAL.
        let last: Option<i64> = tx
            .prepare_cached("SELECT max(seq) FROM events WHERE session_id = ?1")
            .and_then(|mut stmt| stmt.query_row([session_id], |r| r.get(0)))
            .map_err(|e| self.db_err(e))?;
        match last {
            Some(last) => Ok(u64::try_from(last).unwrap_or(0)),
            None if session_exists(tx, session_id).map_err(|e| self.db_err(e))? => Ok(0),
            None => Err(StoreError::SessionNotFound(session_id.to_owned())),
        }
    }

    /// Appends `events` (serialised as `data` by [`serialize_events`]) after `expected_seq` and
    /// applies their state deltas, inside the caller's IMMEDIATE transaction: it holds the write
    /// lock, so nobody appends between the sequence check and the inserts. Returns the new last
    /// sequence (`expected_seq` when `events` is empty, after checking it all the same).
    fn append_in(
        &self,
        tx: &Transaction<'_>,
        session_id: &str,
        expected_seq: u64,
        events: &[Event],
        data: &[String],
    ) -> Result<u64, StoreError> {
        let actual = self.last_seq_in(tx, session_id)?;
        if actual != expected_seq {
            return Err(StoreError::StaleSequence {
                session_id: session_id.to_owned(),
                expected: expected_seq,
                actual,
            });
        }
        // Scoped state needs the session's app and user; most steps change no state at all.
        let owner = if events.iter().any(|e| !e.actions.state_delta.is_empty()) {
            Some(session_owner(tx, session_id).map_err(|e| self.db_err(e))?)
        } else {
            None
        };
        let mut seq = expected_seq;
        for (event, data) in events.iter().zip(data) {
            seq = seq
                .checked_add(1)
                .ok_or(StoreError::SequenceOverflow(seq))?;
            let seq_sql = to_sql_seq(seq)?;
            tx.prepare_cached(
                "INSERT INTO events (session_id, seq, id, invocation_id, author, timestamp, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    session_id,
                    seq_sql,
                    event.id,
                    event.invocation_id,
                    event.author,
                    event.timestamp,
                    data
                ])
            })
            .map_err(|e| self.db_err(e))?;
            if let Some((app_name, user_id)) = &owner
                && !event.actions.state_delta.is_empty()
            {
                write_state(
                    tx,
                    session_id,
                    app_name,
                    user_id,
                    &event.actions.state_delta,
                )
                .map_err(|e| self.db_err(e))?;
            }
        }
        Ok(seq)
    }

    /// A session's identity and last sequence, without loading its events.
    pub fn session_meta(&self, session_id: &str) -> Result<SessionMeta, StoreError> {
        let conn = self.conn();
        conn.query_row(
            &format!("{META_SELECT} WHERE s.id = ?1"),
            [session_id],
            meta_from_row,
        )
        .optional()
        .map_err(|e| self.db_err(e))?
        .ok_or_else(|| StoreError::SessionNotFound(session_id.to_owned()))
    }

    /// Loads a session whole: its events and its state.
    pub fn load_session(&self, session_id: &str) -> Result<Session, StoreError> {
        let meta = self.session_meta(session_id)?;
        let conn = self.conn();
        let events = decode::load_events(
            &conn,
            &self.path,
            session_id,
            usize::try_from(meta.last_seq).unwrap_or(0),
        )?;
        let state = read_state(&conn, &meta).map_err(|e| self.db_err(e))?;
        Ok(Session {
            meta,
            events,
            state,
        })
    }

    /// The current state of a session in all persisted scopes, without loading its events.
    pub fn load_state(&self, session_id: &str) -> Result<StateMap, StoreError> {
        let meta = self.session_meta(session_id)?;
        read_state(&self.conn(), &meta).map_err(|e| self.db_err(e))
    }

    /// One user's sessions, most recently active first.
    pub fn list_sessions(
        &self,
        app_name: &str,
        user_id: &str,
    ) -> Result<Vec<SessionMeta>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "{META_SELECT} WHERE s.app_name = ?1 AND s.user_id = ?2 ORDER BY 5 DESC, s.id"
            ))
            .map_err(|e| self.db_err(e))?;
        stmt.query_map([app_name, user_id], meta_from_row)
            .and_then(Iterator::collect)
            .map_err(|e| self.db_err(e))
    }

    /// Moves every session of `from` to `to` (conversations started before anyone signed in
    /// become the first person's). Returns how many moved.
    pub fn reassign_sessions(
        &self,
        app_name: &str,
        from: &str,
        to: &str,
    ) -> Result<usize, StoreError> {
        self.conn()
            .execute(
                "UPDATE sessions SET user_id = ?3 WHERE app_name = ?1 AND user_id = ?2",
                [app_name, from, to],
            )
            .map_err(|e| self.db_err(e))
    }

    /// Deletes a session with its events and session-scoped state. `user:` and `app:` state stay:
    /// they belong to the user and the app, not to this session.
    pub fn delete_session(&self, session_id: &str) -> Result<(), StoreError> {
        let deleted = self
            .conn()
            .execute("DELETE FROM sessions WHERE id = ?1", [session_id])
            .map_err(|e| self.db_err(e))?;
        if deleted == 0 {
            return Err(StoreError::SessionNotFound(session_id.to_owned()));
        }
        Ok(())
    }

    /// SQLite's `quick_check` of this store's file through a read-only connection of its own
    /// (see [`check::quick_check`]); `None` for a sound file or an in-memory store.
    pub fn quick_check(&self) -> Result<Option<check::Damage>, StoreError> {
        if self.path == Path::new(":memory:") {
            return Ok(None);
        }
        check::quick_check(&self.path)
    }

    /// SQLite's full `PRAGMA integrity_check`: `"ok"` for a sound file, otherwise what is wrong.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| self.db_err(e))?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(|e| self.db_err(e))?;
        Ok(lines.join("\n"))
    }
}

/// Creates the file with owner-only permissions before SQLite sees it; SQLite gives its `-wal` and
/// `-shm` files the same permissions as the database, so those stay private too.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn to_sql_seq(seq: u64) -> Result<i64, StoreError> {
    i64::try_from(seq).map_err(|_| StoreError::SequenceOverflow(seq))
}

/// Serialises events for [`Store::append_in`], before any lock is taken. Partial (streamed) events
/// are previews of a complete event and are refused.
fn serialize_events(events: &[Event]) -> Result<Vec<String>, StoreError> {
    events
        .iter()
        .map(|event| {
            if event.partial {
                Err(StoreError::PartialEvent)
            } else {
                serialize_event(event)
            }
        })
        .collect()
}

/// Serialises an event as stored: `temp:` variables live for one invocation and never reach disk.
fn serialize_event(event: &Event) -> Result<String, StoreError> {
    let has_temp = event
        .actions
        .state_delta
        .keys()
        .any(|k| !StateScope::of(k).is_persisted());
    let json = if has_temp {
        let mut stored = event.clone();
        stored.actions.state_delta = agent::state::persisted_delta(&event.actions.state_delta);
        serde_json::to_string(&stored)
    } else {
        serde_json::to_string(event)
    };
    json.map_err(StoreError::Serialize)
}

/// Writes a delta into the scoped state tables; `null` deletes, `temp:` keys are skipped.
fn write_state(
    conn: &Connection,
    session_id: &str,
    app_name: &str,
    user_id: &str,
    delta: &StateMap,
) -> rusqlite::Result<()> {
    for (key, value) in delta {
        // Each scope's table is keyed by its owner columns, then the variable's key.
        let (owner, upsert, delete): (&[&dyn rusqlite::ToSql], &str, &str) =
            match StateScope::of(key) {
                StateScope::Temp => continue,
                StateScope::Session => (
                    &[&session_id],
                    "INSERT INTO session_state (session_id, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value",
                    "DELETE FROM session_state WHERE session_id = ?1 AND key = ?2",
                ),
                StateScope::User => (
                    &[&app_name, &user_id],
                    "INSERT INTO user_state (app_name, user_id, key, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (app_name, user_id, key) DO UPDATE SET value = excluded.value",
                    "DELETE FROM user_state WHERE app_name = ?1 AND user_id = ?2 AND key = ?3",
                ),
                StateScope::App => (
                    &[&app_name],
                    "INSERT INTO app_state (app_name, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (app_name, key) DO UPDATE SET value = excluded.value",
                    "DELETE FROM app_state WHERE app_name = ?1 AND key = ?2",
                ),
            };
        let mut args = owner.to_vec();
        args.push(key);
        if value.is_null() {
            conn.prepare_cached(delete)?.execute(args.as_slice())?;
        } else {
            let text = value.to_string();
            args.push(&text);
            conn.prepare_cached(upsert)?.execute(args.as_slice())?;
        }
    }
    Ok(())
}

fn read_state(conn: &Connection, meta: &SessionMeta) -> rusqlite::Result<StateMap> {
    let mut state = StateMap::new();
    let mut collect =
        |sql: &str, args: &[&dyn rusqlite::ToSql], prefix: &str| -> rusqlite::Result<()> {
            let mut stmt = conn.prepare_cached(sql)?;
            let mut rows = stmt.query(args)?;
            while let Some(row) = rows.next()? {
                let key: String = row.get(0)?;
                let text: String = row.get(1)?;
                // Keys are stored with their prefix; the check only guards against rows written by
                // hand into the wrong table.
                if prefix.is_empty() || key.starts_with(prefix) {
                    let value: Value = serde_json::from_str(&text).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            1,
                            rusqlite::types::Type::Text,
                            Box::new(e),
                        )
                    })?;
                    state.insert(key, value);
                }
            }
            Ok(())
        };
    collect(
        "SELECT key, value FROM app_state WHERE app_name = ?1",
        &[&meta.app_name],
        APP_PREFIX,
    )?;
    collect(
        "SELECT key, value FROM user_state WHERE app_name = ?1 AND user_id = ?2",
        &[&meta.app_name, &meta.user_id],
        USER_PREFIX,
    )?;
    collect(
        "SELECT key, value FROM session_state WHERE session_id = ?1",
        &[&meta.id],
        "",
    )?;
    Ok(state)
}

/// A session's bookkeeping, derived from its newest event (one index probe each) rather than
/// stored, so appends never rewrite the session row.
const META_SELECT: &str = "SELECT s.id, s.app_name, s.user_id, s.created_at,
        coalesce((SELECT e.timestamp FROM events e WHERE e.session_id = s.id
                  ORDER BY e.seq DESC LIMIT 1), s.created_at),
        coalesce((SELECT max(e.seq) FROM events e WHERE e.session_id = s.id), 0)
    FROM sessions s";

fn session_exists(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row([session_id], |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
}

fn session_owner(conn: &Connection, session_id: &str) -> rusqlite::Result<(String, String)> {
    conn.prepare_cached("SELECT app_name, user_id FROM sessions WHERE id = ?1")?
        .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?)))
}

fn meta_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionMeta> {
    Ok(SessionMeta {
        id: row.get(0)?,
        app_name: row.get(1)?,
        user_id: row.get(2)?,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        last_seq: u64::try_from(row.get::<_, i64>(5)?).unwrap_or(0),
    })
}
