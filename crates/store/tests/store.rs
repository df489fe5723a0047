#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agent::state::apply_delta;
use agent::{Content, Event, EventActions, StateMap};
use serde_json::{Value, json};
use store::{SCHEMA_VERSION, Store, StoreError};

fn map(value: Value) -> StateMap {
    value.as_object().unwrap().clone()
}

fn text_event(author: &str, text: &str) -> Event {
    let content = if author == "user" {
        Content::user_text(text)
    } else {
        Content::model_text(text)
    };
    Event::new("inv-1", author).with_content(content)
}

fn delta_event(delta: Value) -> Event {
    Event::new("inv-1", "assistant").with_actions(EventActions {
        state_delta: map(delta),
        ..EventActions::default()
    })
}

fn temp_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    (dir, path)
}

#[test]
fn a_new_session_is_empty_and_listed() {
    let store = Store::open_in_memory().unwrap();
    let meta = store
        .create_session("app", "u1", Some("s1"), &StateMap::new())
        .unwrap();
    assert_eq!((meta.id.as_str(), meta.last_seq), ("s1", 0));
    let session = store.load_session("s1").unwrap();
    assert!(session.events.is_empty());
    assert!(session.state.is_empty());
    assert_eq!(session.meta, meta);
    let listed = store.list_sessions("app", "u1").unwrap();
    assert_eq!(listed, vec![meta]);
    assert!(
        store
            .list_sessions("app", "someone-else")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn generated_session_ids_are_unique_and_duplicates_are_refused() {
    let store = Store::open_in_memory().unwrap();
    let a = store
        .create_session("app", "u", None, &StateMap::new())
        .unwrap();
    let b = store
        .create_session("app", "u", None, &StateMap::new())
        .unwrap();
    assert_ne!(a.id, b.id);
    let err = store
        .create_session("app", "u", Some(&a.id), &StateMap::new())
        .unwrap_err();
    assert!(
        matches!(err, StoreError::SessionExists(ref id) if *id == a.id),
        "{err}"
    );
}

#[test]
fn appended_events_come_back_in_order_with_sequences_from_one() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    let events: Vec<Event> = (0..5)
        .map(|i| {
            text_event(
                if i % 2 == 0 { "user" } else { "assistant" },
                &format!("消息 {i}"),
            )
        })
        .collect();
    for (i, event) in events.iter().enumerate() {
        let seq = store.append_event("s", i as u64, event).unwrap();
        assert_eq!(seq, i as u64 + 1);
    }
    let session = store.load_session("s").unwrap();
    assert_eq!(session.events, events);
    assert_eq!(session.meta.last_seq, 5);
    assert_eq!(store.session_meta("s").unwrap().last_seq, 5);
}

#[test]
fn a_stale_append_fails_instead_of_interleaving() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    store
        .append_event("s", 0, &text_event("user", "first writer"))
        .unwrap();
    let err = store
        .append_event("s", 0, &text_event("user", "second writer"))
        .unwrap_err();
    match err {
        StoreError::StaleSequence {
            ref session_id,
            expected,
            actual,
        } => assert_eq!((session_id.as_str(), expected, actual), ("s", 0, 1)),
        other => panic!("expected StaleSequence, got {other}"),
    }
    // Ahead of the session is stale too, and nothing was written by either failure.
    assert!(matches!(
        store.append_event("s", 7, &text_event("user", "x")),
        Err(StoreError::StaleSequence { actual: 1, .. })
    ));
    let session = store.load_session("s").unwrap();
    assert_eq!(session.events.len(), 1);
    assert_eq!(
        session.events[0].content.as_ref().unwrap().text(),
        "first writer"
    );
}

#[test]
fn appending_to_a_missing_session_names_it() {
    let store = Store::open_in_memory().unwrap();
    let err = store
        .append_event("nope", 0, &text_event("user", "x"))
        .unwrap_err();
    assert!(matches!(err, StoreError::SessionNotFound(ref id) if id == "nope"));
    assert!(err.to_string().contains("nope"));
    assert!(matches!(
        store.load_session("nope"),
        Err(StoreError::SessionNotFound(_))
    ));
}

#[test]
fn partial_events_are_refused() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    let mut chunk = text_event("assistant", "half a sent");
    chunk.partial = true;
    assert!(matches!(
        store.append_event("s", 0, &chunk),
        Err(StoreError::PartialEvent)
    ));
    assert_eq!(store.session_meta("s").unwrap().last_seq, 0);
}

#[test]
fn state_is_scoped_by_prefix() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "alice", Some("a1"), &StateMap::new())
        .unwrap();
    store
        .create_session("app", "alice", Some("a2"), &StateMap::new())
        .unwrap();
    store
        .create_session("app", "bob", Some("b1"), &StateMap::new())
        .unwrap();
    store
        .create_session("other-app", "alice", Some("x1"), &StateMap::new())
        .unwrap();
    store
        .append_event(
            "a1",
            0,
            &delta_event(json!({"topic": "周会", "user:lang": "zh", "app:tenant": "acme", "temp:scratch": 1})),
        )
        .unwrap();

    assert_eq!(
        Value::Object(store.load_state("a1").unwrap()),
        json!({"topic": "周会", "user:lang": "zh", "app:tenant": "acme"})
    );
    // Same user, other session: user and app scope, not the session's own key.
    assert_eq!(
        Value::Object(store.load_state("a2").unwrap()),
        json!({"user:lang": "zh", "app:tenant": "acme"})
    );
    // Other user of the same app: app scope only.
    assert_eq!(
        Value::Object(store.load_state("b1").unwrap()),
        json!({"app:tenant": "acme"})
    );
    // Same user of another app: nothing.
    assert!(store.load_state("x1").unwrap().is_empty());
}

#[test]
fn temp_variables_never_reach_the_database() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store
        .create_session(
            "app",
            "u",
            Some("s"),
            &map(json!({"temp:init": 1, "kept": 2})),
        )
        .unwrap();
    store
        .append_event(
            "s",
            0,
            &delta_event(json!({"temp:draft": "秘密草稿", "n": 1})),
        )
        .unwrap();
    let session = store.load_session("s").unwrap();
    assert_eq!(Value::Object(session.state), json!({"kept": 2, "n": 1}));
    assert_eq!(
        Value::Object(session.events[0].actions.state_delta.clone()),
        json!({"n": 1})
    );
    drop(store);
    let bytes = std::fs::read(&path).unwrap();
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
    let needle = "秘密草稿".as_bytes();
    for file in [&bytes, &wal] {
        assert!(
            !file.windows(needle.len()).any(|w| w == needle),
            "temp value found on disk"
        );
    }
}

#[test]
fn null_in_a_delta_removes_the_variable_in_every_scope() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    store
        .append_event(
            "s",
            0,
            &delta_event(json!({"a": 1, "user:b": 2, "app:c": 3})),
        )
        .unwrap();
    store
        .append_event(
            "s",
            1,
            &delta_event(json!({"a": null, "user:b": null, "app:c": null})),
        )
        .unwrap();
    assert!(store.load_state("s").unwrap().is_empty());
    // Removing what was never set is not an error.
    store
        .append_event("s", 2, &delta_event(json!({"never": null})))
        .unwrap();
}

#[test]
fn stored_state_is_the_fold_of_the_deltas() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    let mut expected = StateMap::new();
    // A deterministic pseudo-random walk over keys in all scopes, with sets, overwrites and removals.
    let keys = ["k0", "k1", "user:k2", "app:k3", "temp:k4", "k5"];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for seq in 0..300u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = keys[(x % keys.len() as u64) as usize];
        let value = if x.is_multiple_of(5) {
            Value::Null
        } else {
            json!({"v": x % 1000, "s": "值"})
        };
        let delta = map(json!({ key: value }));
        store
            .append_event("s", seq, &delta_event(Value::Object(delta.clone())))
            .unwrap();
        apply_delta(&mut expected, &agent::state::persisted_delta(&delta));
    }
    let session = store.load_session("s").unwrap();
    assert_eq!(session.state, expected);
    let mut folded = StateMap::new();
    for event in &session.events {
        apply_delta(&mut folded, &event.actions.state_delta);
    }
    assert_eq!(folded, expected);
}

#[test]
fn deleting_a_session_keeps_user_and_app_state() {
    let store = Store::open_in_memory().unwrap();
    store
        .create_session("app", "u", Some("s1"), &StateMap::new())
        .unwrap();
    store
        .create_session("app", "u", Some("s2"), &StateMap::new())
        .unwrap();
    store
        .append_event("s1", 0, &delta_event(json!({"own": 1, "user:shared": 2})))
        .unwrap();
    store.delete_session("s1").unwrap();
    assert!(matches!(
        store.load_session("s1"),
        Err(StoreError::SessionNotFound(_))
    ));
    assert!(matches!(
        store.delete_session("s1"),
        Err(StoreError::SessionNotFound(_))
    ));
    assert_eq!(
        Value::Object(store.load_state("s2").unwrap()),
        json!({"user:shared": 2})
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn sessions_are_listed_most_recent_first() {
    let store = Store::open_in_memory().unwrap();
    for id in ["old", "mid", "new"] {
        store
            .create_session("app", "u", Some(id), &StateMap::new())
            .unwrap();
    }
    let mut late = text_event("user", "x");
    late.timestamp = agent::now_millis() + 60_000;
    store.append_event("old", 0, &late).unwrap();
    let ids: Vec<String> = store
        .list_sessions("app", "u")
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids[0], "old");
    assert_eq!(ids.len(), 3);
}

#[test]
fn a_file_database_survives_reopening() {
    let (_dir, path) = temp_db();
    let events = [
        text_event("user", "帮我看看明天的日程"),
        delta_event(json!({"user:tz": "Asia/Shanghai"})),
    ];
    {
        let store = Store::open(&path).unwrap();
        store
            .create_session("app", "u", Some("s"), &StateMap::new())
            .unwrap();
        store.append_event("s", 0, &events[0]).unwrap();
        store.append_event("s", 1, &events[1]).unwrap();
    }
    let store = Store::open(&path).unwrap();
    let session = store.load_session("s").unwrap();
    assert_eq!(session.events, events);
    assert_eq!(session.state["user:tz"], "Asia/Shanghai");
    assert_eq!(store.integrity_check().unwrap(), "ok");
    assert_eq!(store.path(), path);
}

#[cfg(unix)]
#[test]
fn the_database_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    store
        .append_event("s", 0, &text_event("user", "x"))
        .unwrap();
    for file in [path.clone(), path.with_extension("db-wal")] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", file.display());
    }
}

fn assert_untouched(path: &Path, before: &[u8]) {
    assert!(path.exists(), "the store deleted {}", path.display());
    let after = std::fs::read(path).unwrap();
    // Not assert_eq!: a failure would print megabytes of bytes.
    assert!(after == before, "the store changed {}", path.display());
}

#[test]
fn a_file_that_is_not_a_database_is_reported_and_left_alone() {
    let (_dir, path) = temp_db();
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("move it aside"), "{message}");
    assert_untouched(&path, &garbage);
}

#[test]
fn a_database_from_a_newer_version_is_refused_untouched() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).unwrap();
        store
            .create_session("app", "u", Some("s"), &StateMap::new())
            .unwrap();
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    match &err {
        StoreError::NewerSchema {
            found, supported, ..
        } => assert_eq!((*found, *supported), (99, SCHEMA_VERSION)),
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert!(err.to_string().contains("update the app"), "{err}");
    assert!(err.to_string().contains(&path.display().to_string()));
    assert_untouched(&path, &before);
}

#[test]
fn a_damaged_event_is_reported_with_its_sequence_and_field() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    store
        .append_event("s", 0, &text_event("user", "ok"))
        .unwrap();
    store
        .append_event("s", 1, &text_event("assistant", "ok"))
        .unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            r#"UPDATE events SET data = '{"id":"e","invocation_id":"i","author":"assistant","timestamp":1,"content":{"parts":[{"text":5}]}}' WHERE seq = 2"#,
            [],
        )
        .unwrap();
    }
    let err = store.load_session("s").unwrap_err();
    match &err {
        StoreError::CorruptEvent { seq, source, .. } => {
            assert_eq!(*seq, 2);
            assert!(source.path.contains("content.parts"), "{source}");
        }
        other => panic!("expected CorruptEvent, got {other:?}"),
    }
    assert!(err.to_string().contains("event 2 of session s"), "{err}");
}

/// Long enough that its events are decoded on more than one thread, in chunks.
fn long_session(path: &std::path::Path, events: usize) -> (Store, Vec<Event>) {
    let store = Store::open(path).unwrap();
    store
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    let written: Vec<Event> = (0..events)
        .map(|i| {
            text_event(
                if i % 2 == 0 { "user" } else { "assistant" },
                &format!("第 {i} 条"),
            )
        })
        .collect();
    agent::persist::EngineStore::commit(
        &store,
        &agent::persist::Commit {
            session_id: "s".to_owned(),
            events: written.clone(),
            ..agent::persist::Commit::default()
        },
    )
    .unwrap();
    (store, written)
}

fn corrupt(path: &std::path::Path, seq: i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute(
        r#"UPDATE events SET data = '{"id":"e","invocation_id":"i","author":"assistant","timestamp":1,"content":{"parts":[{"text":5}]}}' WHERE seq = ?1"#,
        [seq],
    )
    .unwrap();
}

#[test]
fn a_long_session_loads_whole_and_in_order() {
    let (_dir, path) = temp_db();
    let (store, written) = long_session(&path, 3_001);
    let session = store.load_session("s").unwrap();
    assert_eq!(session.events, written);
}

#[test]
fn in_a_long_session_the_first_damaged_event_is_the_one_reported() {
    let (_dir, path) = temp_db();
    let (store, _) = long_session(&path, 3_001);
    // Two bad rows in chunks that different threads may decode in either order: the report names
    // the earlier, as a load that stops at the first bad row does.
    corrupt(&path, 2_900);
    corrupt(&path, 1_700);
    match store.load_session("s").unwrap_err() {
        StoreError::CorruptEvent { seq, source, .. } => {
            assert_eq!(seq, 1_700);
            assert!(source.path.contains("content.parts"), "{source}");
        }
        other => panic!("expected CorruptEvent, got {other:?}"),
    }
}

#[test]
fn an_event_that_is_not_text_is_refused_with_its_sqlite_error() {
    let (_dir, path) = temp_db();
    let (store, _) = long_session(&path, 600);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE events SET data = CAST(X'FF' AS TEXT) WHERE seq = 550",
            [],
        )
        .unwrap();
    }
    let err = store.load_session("s").unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
    assert!(
        err.to_string().contains("utf-8") || err.to_string().contains("UTF-8"),
        "{err}"
    );
}

#[test]
fn a_path_that_cannot_be_opened_gives_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    // A missing folder.
    let missing = dir.path().join("no-such-folder").join("companion.db");
    let err = Store::open(&missing).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-folder"), "{err}");
    // A folder where the file should be.
    let err = Store::open(dir.path()).unwrap_err();
    assert!(
        matches!(err, StoreError::Unreadable { .. } | StoreError::Io { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    assert!(dir.path().is_dir());
}

#[test]
fn two_handles_on_one_file_never_interleave() {
    let (_dir, path) = temp_db();
    Store::open(&path)
        .unwrap()
        .create_session("app", "u", Some("s"), &StateMap::new())
        .unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                let mut stale = 0;
                let mut written = 0;
                while written < 50 {
                    let last = store.session_meta("s").unwrap().last_seq;
                    match store.append_event(
                        "s",
                        last,
                        &text_event("user", &format!("w{w}-{written}")),
                    ) {
                        Ok(seq) => {
                            assert_eq!(seq, last + 1);
                            written += 1;
                        }
                        Err(StoreError::StaleSequence { .. }) => stale += 1,
                        Err(other) => panic!("{other}"),
                    }
                }
                stale
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let session = store.load_session("s").unwrap();
    assert_eq!(session.events.len(), 100);
    assert_eq!(session.meta.last_seq, 100);
    for w in 0..2 {
        let mine: Vec<String> = session
            .events
            .iter()
            .map(|e| e.content.as_ref().unwrap().text())
            .filter(|t| t.starts_with(&format!("w{w}-")))
            .collect();
        let expected: Vec<String> = (0..50).map(|i| format!("w{w}-{i}")).collect();
        assert_eq!(mine, expected, "writer {w}'s events lost or reordered");
    }
    assert_eq!(store.integrity_check().unwrap(), "ok");
}
