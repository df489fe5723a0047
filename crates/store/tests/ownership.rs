//! Only our database is adopted, and damage is found without writing to the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agent::{Content, Event, StateMap};
use rusqlite::Connection;
use store::check::{APPLICATION_ID, quick_check};
use store::{Store, StoreError};

fn application_id(path: &Path) -> i32 {
    Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .unwrap()
}

#[test]
fn a_new_database_is_stamped_as_ours_and_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    drop(Store::open(&path).unwrap());
    assert_eq!(application_id(&path), APPLICATION_ID);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.quick_check().unwrap(), None);
}

#[test]
fn another_programs_database_is_refused_and_left_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 3] = [
        // A browser's history: other tables, no application id.
        (
            "places.sqlite",
            "CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT);",
        ),
        // Our table names, but another program's stamp.
        (
            "other.db",
            "CREATE TABLE sessions (id TEXT); PRAGMA application_id = 1234;",
        ),
        // Tables of ours mixed with one that is not.
        (
            "mixed.db",
            "CREATE TABLE sessions (id TEXT); CREATE TABLE accounts (x); PRAGMA user_version = 3;",
        ),
    ];
    for (name, sql) in cases {
        let path = dir.path().join(name);
        Connection::open(&path).unwrap().execute_batch(sql).unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::NotOurs { .. }), "{name}: {err}");
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(
            message.contains("not a Feishu Companion database"),
            "{message}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{name} was written to"
        );
        assert!(!dir.path().join(format!("{name}-wal")).exists());
    }
    // Tables but no schema version: not something this app wrote.
    let path = dir.path().join("unversioned.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE sessions (id TEXT);")
        .unwrap();
    assert!(matches!(
        Store::open(&path).unwrap_err(),
        StoreError::NotOurs { .. }
    ));
}

#[test]
fn a_database_of_an_earlier_version_without_the_stamp_is_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    let session = {
        let store = Store::open(&path).unwrap();
        store
            .create_session("app", "me", None, &StateMap::new())
            .unwrap()
    };
    // As an earlier build left it: every table ours, no application id.
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "application_id", 0)
        .unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.load_session(&session.id).unwrap().meta.id, session.id);
    drop(store);
    assert_eq!(application_id(&path), APPLICATION_ID);
}

#[test]
fn damage_is_reported_with_the_path_and_what_to_do_without_writing_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    {
        let store = Store::open(&path).unwrap();
        let session = store
            .create_session("app", "me", None, &StateMap::new())
            .unwrap();
        for i in 0..400 {
            let event = Event::new("inv", "user").with_content(Content::user_text(format!(
                "message {i} {}",
                "x".repeat(200)
            )));
            store.append_event(&session.id, i, &event).unwrap();
        }
    }
    // Fold the WAL into the file, then damage a page in its middle.
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "journal_mode", "DELETE")
        .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    assert!(bytes.len() > 8 * page, "{}", bytes.len());
    for b in &mut bytes[5 * page..5 * page + 200] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();

    let damage = quick_check(&path).unwrap().expect("the damage is found");
    let message = damage.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains("left untouched") && message.contains("backup"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the check wrote to the file"
    );
    assert!(!dir.path().join("companion.db-wal").exists());
}
