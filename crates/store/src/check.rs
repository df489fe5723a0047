//! Which SQLite files are ours, and whether one is sound.
//!
//! A new database is stamped with the app's `application_id`, so a SQLite file some other
//! program wrote (a browser's history, another app's data, a file the user picked by mistake) is
//! recognised and refused before anything writes to it; it is never "migrated" into ours. A file
//! from an earlier version (before the stamp) is adopted only if every table in it is one of ours.
//!
//! [`quick_check`] runs SQLite's `quick_check` on a read-only connection of its own, so it never
//! writes to the file and can run off the UI's critical path.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::StoreError;

/// The app's `PRAGMA application_id`: "FCmp" (Feishu Companion) in ASCII.
pub const APPLICATION_ID: i32 = 0x4643_6d70;

/// Every table the migrations create, for recognising a database written before the stamp.
pub(crate) const OUR_TABLES: &[&str] = &[
    "app_state",
    "audit_log",
    "dispatch_journal",
    "events",
    "invocations",
    "rules",
    "secrets",
    "session_state",
    "sessions",
    "tool_calls",
    "user_state",
];

/// The migrations' own bookkeeping and SQLite's internal tables, present in ours too.
fn is_internal(table: &str) -> bool {
    table.starts_with("sqlite_")
}

/// What opening may do with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Stamped as ours.
    Ours,
    /// Empty, or written by an earlier version: ours, to be stamped.
    Adopt,
}

/// Decides whether `conn`'s file is ours, reading only.
pub(crate) fn ownership(conn: &Connection, path: &Path) -> Result<Ownership, StoreError> {
    let at = |e| StoreError::at_open(path, e);
    let id: i32 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(at)?;
    if id == APPLICATION_ID {
        return Ok(Ownership::Ours);
    }
    let not_ours = |reason: String| StoreError::NotOurs {
        path: path.to_path_buf(),
        reason,
    };
    if id != 0 {
        return Err(not_ours(format!(
            "it belongs to another program (application id {id:#010x})"
        )));
    }
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .map_err(at)?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(Iterator::collect)
        .map_err(at)?;
    let foreign: Vec<&str> = tables
        .iter()
        .map(String::as_str)
        .filter(|t| !is_internal(t) && !OUR_TABLES.contains(t))
        .collect();
    if !foreign.is_empty() {
        let mut shown = foreign
            .iter()
            .take(5)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if foreign.len() > 5 {
            shown.push_str(", …");
        }
        return Err(not_ours(format!(
            "it holds tables this app never makes: {shown}"
        )));
    }
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(at)?;
    if version == 0 && tables.iter().any(|t| !is_internal(t)) {
        return Err(not_ours(
            "it holds tables but no schema version of this app".to_owned(),
        ));
    }
    Ok(Ownership::Adopt)
}

/// What `quick_check` found wrong with a database file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the database {} is damaged: {}. It has been left untouched. Your conversations may be incomplete; close the app and keep a copy of the file, then restore a backup, or move the file aside to start with a new one (Settings → Data can also reset the app).",
    path.display(),
    problems.join("; ")
)]
pub struct Damage {
    /// The database file.
    pub path: PathBuf,
    /// SQLite's findings (the first few).
    pub problems: Vec<String>,
}

/// Runs SQLite's `PRAGMA quick_check` on `path` through a read-only connection of its own:
/// `Ok(None)` for a sound file, `Ok(Some(damage))` for a damaged one.
pub fn quick_check(path: &Path) -> Result<Option<Damage>, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| StoreError::at_open(path, e))?;
    let damaged = |problems: Vec<String>| {
        Some(Damage {
            path: path.to_path_buf(),
            problems,
        })
    };
    let lines: Result<Vec<String>, rusqlite::Error> = conn
        .prepare("PRAGMA quick_check(10)")
        .and_then(|mut stmt| stmt.query_map([], |r| r.get(0))?.collect());
    match lines {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Ok(None),
        Ok(lines) => Ok(damaged(lines)),
        Err(e) => match StoreError::from_sqlite(path, e) {
            StoreError::Corrupt { detail, .. } => Ok(damaged(vec![detail])),
            other => Err(other),
        },
    }
}

/// Where the background check of a store's file stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckState {
    /// Not finished (or not started).
    Running,
    /// The file is sound.
    Sound,
    /// The file is damaged.
    Damaged(Damage),
    /// The check could not run.
    Failed(String),
}

impl crate::Store {
    /// Starts [`quick_check`] of this store's file on a thread of its own: it reads the whole
    /// file, which takes too long on a large one to hold up opening the app.
    /// [`Store::check_state`](crate::Store::check_state) tells how it went.
    pub fn start_quick_check(&self) {
        let state = self.check.clone();
        *lock_state(&state) = CheckState::Running;
        let path = self.path().to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("database check".to_owned())
            .spawn(move || {
                let result = if path == Path::new(":memory:") {
                    CheckState::Sound
                } else {
                    match quick_check(&path) {
                        Ok(None) => CheckState::Sound,
                        Ok(Some(damage)) => {
                            tracing::error!(%damage, "the database is damaged");
                            CheckState::Damaged(damage)
                        }
                        Err(e) => CheckState::Failed(e.to_string()),
                    }
                };
                *lock_state(&state) = result;
            });
        if let Err(e) = spawned {
            *lock_state(&self.check) =
                CheckState::Failed(format!("cannot start the database check: {e}"));
        }
    }

    /// How the check started by [`Store::start_quick_check`](crate::Store::start_quick_check)
    /// went.
    pub fn check_state(&self) -> CheckState {
        lock_state(&self.check).clone()
    }
}

fn lock_state(state: &std::sync::Mutex<CheckState>) -> std::sync::MutexGuard<'_, CheckState> {
    // The state is replaced whole, never left half-written by a panic.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
