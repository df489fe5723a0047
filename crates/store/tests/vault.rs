//! The token vault: encryption at rest, tamper detection, and where the master key is kept.
//! (The real OS keychain is exercised by `vault_keychain.rs`; nothing secret in logs or errors by
//! `vault_logging.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use store::Store;
use store::vault::{
    FallbackChain, KeyFile, KeySourceError, MasterKey, MasterKeySource, MemoryKeySource,
    SecretString, Vault, VaultError,
};

const PLAINTEXT: &str = "u-7d1f0c9e-RECOGNISABLE-access-token-0123456789abcdef";

fn temp_store() -> (tempfile::TempDir, PathBuf, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    let store = Arc::new(Store::open(&path).unwrap());
    (dir, path, store)
}

fn key(byte: u8) -> MasterKey {
    MasterKey::from_bytes([byte; 32])
}

fn memory(byte: u8) -> Box<MemoryKeySource> {
    Box::new(MemoryKeySource::with_key(key(byte)))
}

/// A second connection to the database, to look at and tamper with rows as an attacker with the
/// file would.
fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
    key_id: String,
    updated_at: i64,
}

fn row(path: &Path, name: &str) -> Row {
    raw(path)
        .query_row(
            "SELECT nonce, ciphertext, key_id, updated_at FROM secrets WHERE name = ?1",
            [name],
            |r| {
                Ok(Row {
                    nonce: r.get(0)?,
                    ciphertext: r.get(1)?,
                    key_id: r.get(2)?,
                    updated_at: r.get(3)?,
                })
            },
        )
        .unwrap()
}

fn write_row(path: &Path, name: &str, row: &Row) {
    raw(path)
        .execute(
            "INSERT INTO secrets (name, nonce, ciphertext, key_id, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce,
                 ciphertext = excluded.ciphertext, key_id = excluded.key_id",
            rusqlite::params![name, row.nonce, row.ciphertext, row.key_id, row.updated_at],
        )
        .unwrap();
}

fn get_text(vault: &Vault, name: &str) -> Option<String> {
    vault
        .get(name)
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

/// A keychain that can never be reached, counting how often it was asked.
#[derive(Debug, Default)]
struct NoKeychain {
    calls: Arc<AtomicUsize>,
}

impl MasterKeySource for NoKeychain {
    fn description(&self) -> String {
        "the test keychain".to_owned()
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(KeySourceError::Unavailable {
            place: self.description(),
            reason: "no Secret Service on the session bus".to_owned(),
        })
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        self.load().map(|_| key(0))
    }
}

#[test]
fn a_secret_round_trips_and_can_be_listed_replaced_and_deleted() {
    let (_dir, _path, store) = temp_store();
    let vault = Vault::open(store, Box::new(MemoryKeySource::new())).unwrap();
    assert_eq!(vault.get("feishu.tokens").unwrap(), None);

    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    vault.put("feishu.app_secret", b"").unwrap();
    vault.put("llm.api_key", &[0u8, 255, 1, 2]).unwrap();
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
    assert_eq!(vault.get("feishu.app_secret").unwrap().unwrap().len(), 0);
    assert_eq!(
        vault.get("llm.api_key").unwrap().unwrap().as_slice(),
        &[0u8, 255, 1, 2]
    );
    assert_eq!(
        vault.names().unwrap(),
        ["feishu.app_secret", "feishu.tokens", "llm.api_key"]
    );

    vault.put("feishu.tokens", b"rotated").unwrap();
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some("rotated")
    );

    assert!(vault.delete("feishu.tokens").unwrap());
    assert!(!vault.delete("feishu.tokens").unwrap());
    assert_eq!(vault.get("feishu.tokens").unwrap(), None);
    assert_eq!(vault.names().unwrap(), ["feishu.app_secret", "llm.api_key"]);
}

/// The app shares one vault between its tasks.
#[test]
fn a_vault_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let vault = Arc::new(
        Vault::open(
            Arc::new(Store::open_in_memory().unwrap()),
            Box::new(MemoryKeySource::new()),
        )
        .unwrap(),
    );
    shareable(&vault);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let vault = vault.clone();
            std::thread::spawn(move || {
                let name = format!("secret.{i}");
                vault.put(&name, name.as_bytes()).unwrap();
                assert_eq!(get_text(&vault, &name), Some(name));
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(vault.names().unwrap().len(), 4);
}

#[test]
fn names_must_be_short_and_non_empty() {
    let vault = Vault::open(
        Arc::new(Store::open_in_memory().unwrap()),
        Box::new(MemoryKeySource::new()),
    )
    .unwrap();
    assert!(matches!(
        vault.put("", b"x"),
        Err(VaultError::InvalidName(_))
    ));
    assert!(matches!(
        vault.put(&"n".repeat(201), b"x"),
        Err(VaultError::InvalidName(_))
    ));
    vault.put(&"n".repeat(200), b"x").unwrap();
}

#[derive(Debug, Serialize, Deserialize)]
struct Tokens {
    #[serde(with = "store::vault::expose_secret")]
    access_token: SecretString,
    #[serde(with = "store::vault::expose_secret")]
    refresh_token: SecretString,
    expires_at: i64,
    scopes: Vec<String>,
}

#[test]
fn typed_values_round_trip_as_json_with_secret_strings() {
    let (_dir, _path, store) = temp_store();
    let vault = Vault::open(store, memory(1)).unwrap();
    let tokens = Tokens {
        access_token: SecretString::from(PLAINTEXT),
        refresh_token: SecretString::from("ur-refresh".to_owned()),
        expires_at: 1_700_000_000_000,
        scopes: vec!["offline_access".to_owned(), "calendar:calendar".to_owned()],
    };
    vault.put_json("feishu.tokens", &tokens).unwrap();
    let back: Tokens = vault.get_json("feishu.tokens").unwrap().unwrap();
    assert_eq!(back.access_token.expose_secret(), PLAINTEXT);
    assert_eq!(back.refresh_token.expose_secret(), "ur-refresh");
    assert_eq!(back.expires_at, tokens.expires_at);
    assert_eq!(back.scopes, tokens.scopes);
    assert_eq!(
        vault.get_json::<Tokens>("absent").unwrap().map(|_| ()),
        None
    );

    // Printing the tokens shows no token.
    let printed = format!("{back:?} {}", back.access_token);
    assert!(!printed.contains(PLAINTEXT), "{printed}");
    assert!(printed.contains("access_token: ***"), "{printed}");

    // The wrong type is an error naming the secret and the type, not quoting the value.
    let err = vault.get_json::<u64>("feishu.tokens").unwrap_err();
    assert!(matches!(err, VaultError::Decode { ref name, .. } if name == "feishu.tokens"));
    let message = err.to_string();
    assert!(
        message.contains("feishu.tokens") && message.contains("u64"),
        "{message}"
    );
    vault.put("feishu.raw", PLAINTEXT.as_bytes()).unwrap();
    let err = vault.get_json::<Tokens>("feishu.raw").unwrap_err();
    assert!(!format!("{err} {err:?}").contains(PLAINTEXT));
}

#[test]
fn secret_strings_print_as_stars() {
    let secret = SecretString::from(PLAINTEXT);
    assert_eq!(format!("{secret}"), "***");
    assert_eq!(format!("{secret:?}"), "***");
    assert_eq!(format!("{:?}", Some(secret.clone())), "Some(***)");
    assert_eq!(secret.expose_secret(), PLAINTEXT);
    assert!(SecretString::default().is_empty());
    let parsed: SecretString = serde_json::from_str("\"abc\"").unwrap();
    assert_eq!(parsed.expose_secret(), "abc");
}

#[test]
fn the_database_file_and_its_wal_never_contain_the_plaintext() {
    let (dir, path, store) = temp_store();
    let vault = Vault::open(store, Box::new(MemoryKeySource::new())).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    vault
        .put_json(
            "feishu.session",
            &Tokens {
                access_token: PLAINTEXT.into(),
                refresh_token: PLAINTEXT.into(),
                expires_at: 0,
                scopes: vec![],
            },
        )
        .unwrap();

    let on_disk = |label: &str| {
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        assert!(!bytes.is_empty(), "{label}: nothing on disk to look at");
        bytes
    };
    let contains =
        |haystack: &[u8], needle: &[u8]| haystack.windows(needle.len()).any(|w| w == needle);

    // While open, the rows are in the WAL.
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap();
    assert!(contains(&wal, b"feishu.tokens"), "the WAL holds the row");
    let bytes = on_disk("open");
    assert!(!contains(&bytes, PLAINTEXT.as_bytes()));
    // A part of the value would do as well as the whole.
    assert!(!contains(&bytes, b"RECOGNISABLE"));

    // After closing, SQLite has checkpointed the WAL into the database file.
    drop(vault);
    let bytes = on_disk("closed");
    assert!(contains(&bytes, b"feishu.tokens"), "the file holds the row");
    assert!(!contains(&bytes, b"RECOGNISABLE"));
}

#[test]
fn every_write_uses_a_fresh_nonce() {
    let (_dir, path, store) = temp_store();
    let vault = Vault::open(store, memory(1)).unwrap();
    vault.put("a", PLAINTEXT.as_bytes()).unwrap();
    let first = row(&path, "a");
    vault.put("a", PLAINTEXT.as_bytes()).unwrap();
    let second = row(&path, "a");
    vault.put("b", PLAINTEXT.as_bytes()).unwrap();
    let other = row(&path, "b");
    assert_eq!(first.nonce.len(), 12);
    assert_ne!(first.nonce, second.nonce);
    assert_ne!(first.ciphertext, second.ciphertext);
    assert_ne!(second.nonce, other.nonce);
    // Ciphertext = plaintext + the 16-byte tag.
    assert_eq!(first.ciphertext.len(), PLAINTEXT.len() + 16);
    assert_eq!(first.key_id, vault.key_id());
}

#[test]
fn values_survive_reopening_the_store() {
    let (dir, path, store) = temp_store();
    let keys = MemoryKeySource::new();
    let vault = Vault::open(store, Box::new(keys.clone())).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let key_id = vault.key_id().to_owned();
    drop(vault);

    let vault = Vault::open(Arc::new(Store::open(&path).unwrap()), Box::new(keys)).unwrap();
    assert_eq!(vault.key_id(), key_id);
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
    drop(dir);
}

#[test]
fn a_different_master_key_cannot_open_the_vault_and_changes_nothing() {
    let (_dir, path, store) = temp_store();
    let vault = Vault::open(store.clone(), memory(1)).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let before = row(&path, "feishu.tokens");
    drop(vault);

    let other = MemoryKeySource::with_key(key(2));
    let err = Vault::open(store.clone(), Box::new(other.clone())).unwrap_err();
    let VaultError::NoMatchingKey {
        ref stored,
        ref found,
        ..
    } = err
    else {
        panic!("expected NoMatchingKey, got {err:?}");
    };
    assert_eq!(stored, &[key(1).id().to_owned()]);
    assert_eq!(found, &[key(2).id().to_owned()]);
    let message = err.to_string();
    assert!(
        message.contains(key(1).id()) && message.contains("left untouched"),
        "{message}"
    );
    assert_eq!(row(&path, "feishu.tokens"), before);
    // The wrong key was not replaced by a new one either.
    assert_eq!(other.load().unwrap().unwrap().id(), key(2).id());

    // The right key still reads it.
    let vault = Vault::open(store, memory(1)).unwrap();
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
}

#[test]
fn a_row_written_under_another_key_is_refused_by_name_and_left_untouched() {
    // A row encrypted under key 2, planted among key 1's rows.
    let (_dir2, path2, store2) = temp_store();
    let vault2 = Vault::open(store2, memory(2)).unwrap();
    vault2.put("planted", PLAINTEXT.as_bytes()).unwrap();
    let planted = row(&path2, "planted");

    let (_dir, path, store) = temp_store();
    let vault = Vault::open(store.clone(), memory(1)).unwrap();
    vault.put("mine", b"ok").unwrap();
    write_row(&path, "planted", &planted);

    let err = vault.get("planted").unwrap_err();
    assert!(
        matches!(&err, VaultError::OtherKey { name, found, current, .. }
            if name == "planted" && found == key(2).id() && current == key(1).id()),
        "{err:?}"
    );
    assert_eq!(row(&path, "planted"), planted);

    // Relabelled with key 1's id, it still does not decrypt: key 1 is not the key that wrote it.
    let relabelled = Row {
        key_id: key(1).id().to_owned(),
        ..planted
    };
    write_row(&path, "planted", &relabelled);
    let err = vault.get("planted").unwrap_err();
    assert!(
        matches!(&err, VaultError::Undecryptable { name, .. } if name == "planted"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"planted\""), "{err}");
    assert_eq!(row(&path, "planted"), relabelled);
    assert_eq!(get_text(&vault, "mine").as_deref(), Some("ok"));
}

#[test]
fn tampering_with_the_nonce_or_the_ciphertext_is_detected() {
    let (_dir, path, store) = temp_store();
    let vault = Vault::open(store, memory(1)).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let good = row(&path, "feishu.tokens");

    let flip = |bytes: &[u8], at: usize| {
        let mut bytes = bytes.to_vec();
        bytes[at] ^= 0x01;
        bytes
    };
    let last = good.ciphertext.len() - 1;
    let tampered = [
        (
            "a nonce bit",
            Row {
                nonce: flip(&good.nonce, 0),
                ..good.clone()
            },
        ),
        (
            "the first ciphertext bit",
            Row {
                ciphertext: flip(&good.ciphertext, 0),
                ..good.clone()
            },
        ),
        (
            "a tag bit",
            Row {
                ciphertext: flip(&good.ciphertext, last),
                ..good.clone()
            },
        ),
        (
            "the tag cut off",
            Row {
                ciphertext: good.ciphertext[..last - 15].to_vec(),
                ..good.clone()
            },
        ),
        (
            "an empty ciphertext",
            Row {
                ciphertext: Vec::new(),
                ..good.clone()
            },
        ),
        (
            "a byte appended",
            Row {
                ciphertext: [good.ciphertext.as_slice(), &[0]].concat(),
                ..good.clone()
            },
        ),
    ];
    for (what, bad) in tampered {
        write_row(&path, "feishu.tokens", &bad);
        let err = vault.get("feishu.tokens").unwrap_err();
        assert!(
            matches!(&err, VaultError::Undecryptable { name, .. } if name == "feishu.tokens"),
            "{what}: {err:?}"
        );
        assert_eq!(
            row(&path, "feishu.tokens"),
            bad,
            "{what}: the row must be left as it is"
        );
    }

    let short_nonce = Row {
        nonce: good.nonce[..8].to_vec(),
        ..good.clone()
    };
    write_row(&path, "feishu.tokens", &short_nonce);
    let err = vault.get("feishu.tokens").unwrap_err();
    assert!(
        matches!(&err, VaultError::Damaged { name, .. } if name == "feishu.tokens"),
        "{err:?}"
    );

    write_row(&path, "feishu.tokens", &good);
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
}

#[test]
fn a_ciphertext_moved_or_copied_under_another_name_does_not_decrypt() {
    let (_dir, path, store) = temp_store();
    let vault = Vault::open(store, memory(1)).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    vault.put("llm.api_key", b"sk-model").unwrap();

    // Copied over another secret: the model key's row now holds the Feishu token's ciphertext.
    let tokens = row(&path, "feishu.tokens");
    write_row(&path, "llm.api_key", &tokens);
    let err = vault.get("llm.api_key").unwrap_err();
    assert!(
        matches!(&err, VaultError::Undecryptable { name, .. } if name == "llm.api_key"),
        "{err:?}"
    );

    // Renamed in place.
    raw(&path)
        .execute(
            "UPDATE secrets SET name = 'feishu.tokens.old' WHERE name = 'feishu.tokens'",
            [],
        )
        .unwrap();
    assert!(matches!(
        vault.get("feishu.tokens.old"),
        Err(VaultError::Undecryptable { .. })
    ));
    assert_eq!(vault.get("feishu.tokens").unwrap(), None);

    // Renamed back, it decrypts again: the name is what was bound, nothing else changed.
    raw(&path)
        .execute(
            "UPDATE secrets SET name = 'feishu.tokens' WHERE name = 'feishu.tokens.old'",
            [],
        )
        .unwrap();
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn the_key_file_is_created_readable_by_its_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config").join("master.key");
    let file = KeyFile::new(&path);
    assert!(file.load().unwrap().is_none());
    let created = file.load_or_create().unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    // One line of base64, 32 bytes, and no temporary file left beside it.
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.len(), 45, "{} bytes", text.len());
    let bytes: [u8; 32] =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text.trim_end())
            .unwrap()
            .try_into()
            .unwrap();
    assert_eq!(MasterKey::from_bytes(bytes).id(), created.id());
    let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["master.key"]);

    // Creating again never replaces it.
    assert!(matches!(
        file.create(),
        Err(KeySourceError::AlreadyExists { .. })
    ));
    assert_eq!(file.load().unwrap().unwrap().id(), created.id());
}

#[cfg(unix)]
#[test]
fn a_key_file_others_can_read_is_refused_and_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("master.key");
    let key_id = KeyFile::new(&path)
        .load_or_create()
        .unwrap()
        .id()
        .to_owned();
    let content = std::fs::read(&path).unwrap();

    for loose in [0o644, 0o640, 0o604, 0o660] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).unwrap();
        let err = KeyFile::new(&path).load().unwrap_err();
        assert!(
            matches!(err, KeySourceError::KeyFileTooOpen { mode, .. } if mode == loose),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("chmod 600 {}", path.display())),
            "{message}"
        );
        // Through the vault as well, and nothing is created in its place.
        let (_db_dir, _db, store) = temp_store();
        let err = Vault::open(store, Box::new(KeyFile::new(&path))).unwrap_err();
        assert!(
            matches!(
                err,
                VaultError::KeySource(KeySourceError::KeyFileTooOpen { .. })
            ),
            "{err:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), content);
        assert_eq!(mode(&path), loose);
    }

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(KeyFile::new(&path).load().unwrap().unwrap().id(), key_id);
    // A read-only key file is fine too.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
    assert_eq!(KeyFile::new(&path).load().unwrap().unwrap().id(), key_id);
}

#[test]
fn a_damaged_key_file_is_reported_and_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("master.key");
    for (content, problem) in [
        (&b"not base64 at all!"[..], "not base64"),
        (b"AAAA\n", "3 bytes instead of 32"),
        (b"", "0 bytes instead of 32"),
        (&[0xff, 0xfe, 0x00][..], "not text"),
    ] {
        let _ = std::fs::remove_file(&path);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        std::io::Write::write_all(&mut options.open(&path).unwrap(), content).unwrap();

        let err = KeyFile::new(&path).load_or_create().unwrap_err();
        assert!(
            matches!(&err, KeySourceError::Damaged { problem: p, .. } if p.contains(problem)),
            "{err:?}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
        assert_eq!(std::fs::read(&path).unwrap(), content);
    }
}

#[cfg(unix)]
#[test]
fn a_symlinked_key_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.key");
    KeyFile::new(&real).load_or_create().unwrap();
    let link = dir.path().join("master.key");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(matches!(
        KeyFile::new(&link).load(),
        Err(KeySourceError::KeyFileNotRegular { .. })
    ));
}

#[test]
fn an_existing_key_file_is_reused_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let db_path = dir.path().join("companion.db");

    let vault = Vault::open(
        Arc::new(Store::open(&db_path).unwrap()),
        Box::new(KeyFile::new(&key_path)),
    )
    .unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let key_id = vault.key_id().to_owned();
    let key_file = std::fs::read(&key_path).unwrap();
    drop(vault);

    for _ in 0..2 {
        let vault = Vault::open(
            Arc::new(Store::open(&db_path).unwrap()),
            Box::new(KeyFile::new(&key_path)),
        )
        .unwrap();
        assert_eq!(vault.key_id(), key_id);
        assert_eq!(
            get_text(&vault, "feishu.tokens").as_deref(),
            Some(PLAINTEXT)
        );
        assert_eq!(std::fs::read(&key_path).unwrap(), key_file);
    }
}

#[test]
fn without_a_keychain_the_chain_uses_the_key_file_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let calls = Arc::new(AtomicUsize::new(0));
    let chain = FallbackChain::new(
        Box::new(NoKeychain {
            calls: calls.clone(),
        }),
        KeyFile::new(&key_path),
    );
    assert_eq!(chain.notice(), None);

    let logs = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let writer = {
        let logs = logs.clone();
        move || LogWriter(logs.clone())
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let (store, vault) = tracing::subscriber::with_default(subscriber, || {
        let (_db_dir, _db, store) = temp_store();
        let vault = Vault::open(store.clone(), Box::new(chain)).unwrap();
        vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
        (store, vault)
    });

    // The key went to the key file, the keychain was asked once, and the notice says why.
    assert!(key_path.exists());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let notice = vault.key_notice().expect("a notice for the app to show");
    assert_eq!(notice.key_file, key_path);
    assert_eq!(notice.keychain, "the test keychain");
    assert_eq!(notice.reason, "no Secret Service on the session bus");
    let shown = notice.to_string();
    assert!(
        shown.contains("not available") && shown.contains(&key_path.display().to_string()),
        "{shown}"
    );
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    assert_eq!(
        logs.matches("no keychain is available").count(),
        1,
        "one warning, logged once:\n{logs}"
    );
    assert!(logs.contains("WARN"), "{logs}");

    // The next start falls back again, to the same key.
    let chain = FallbackChain::new(Box::new(NoKeychain::default()), KeyFile::new(&key_path));
    let key_id = vault.key_id().to_owned();
    drop(vault);
    let vault = Vault::open(store, Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), key_id);
    assert!(vault.key_notice().is_some());
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
}

/// Collects a `tracing` subscriber's output.
struct LogWriter(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_reachable_keychain_is_used_and_no_key_file_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let keychain = MemoryKeySource::new();
    let chain = FallbackChain::new(Box::new(keychain.clone()), KeyFile::new(&key_path));
    let vault = Vault::open(Arc::new(Store::open_in_memory().unwrap()), Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), keychain.load().unwrap().unwrap().id());
    assert_eq!(vault.key_notice(), None);
    assert!(!key_path.exists());
}

#[test]
fn an_existing_key_is_used_wherever_it_is_and_no_second_one_is_made() {
    let dir = tempfile::tempdir().unwrap();

    // The keychain is reachable but empty, the key file has the key: the key file's is used.
    let key_path = dir.path().join("file.key");
    let from_file = KeyFile::new(&key_path).load_or_create().unwrap();
    let keychain = MemoryKeySource::new();
    let chain = FallbackChain::new(Box::new(keychain.clone()), KeyFile::new(&key_path));
    let vault = Vault::open(Arc::new(Store::open_in_memory().unwrap()), Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), from_file.id());
    assert!(
        keychain.load().unwrap().is_none(),
        "no second key in the keychain"
    );

    // The keychain has the key, the key file is absent: the keychain's is used, no file is made.
    let absent = dir.path().join("absent.key");
    let chain = FallbackChain::new(memory(7), KeyFile::new(&absent));
    let vault = Vault::open(Arc::new(Store::open_in_memory().unwrap()), Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), key(7).id());
    assert!(!absent.exists());
    assert!(matches!(
        FallbackChain::new(memory(7), KeyFile::new(&absent)).create(),
        Err(KeySourceError::AlreadyExists { .. })
    ));
}

#[test]
fn the_key_the_secrets_were_written_with_is_found_in_either_place() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let (_db_dir, _db, store) = temp_store();

    // Written while the keychain was unreachable: under the key file's key.
    let chain = FallbackChain::new(Box::new(NoKeychain::default()), KeyFile::new(&key_path));
    let vault = Vault::open(store.clone(), Box::new(chain)).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let file_key = vault.key_id().to_owned();
    drop(vault);

    // Later the keychain is back, holding another key: the secrets' key is still the one used.
    let chain = FallbackChain::new(memory(9), KeyFile::new(&key_path));
    let vault = Vault::open(store, Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), file_key);
    assert_eq!(
        get_text(&vault, "feishu.tokens").as_deref(),
        Some(PLAINTEXT)
    );
}

#[test]
fn secrets_whose_key_is_nowhere_make_an_error_and_no_new_key() {
    let (_db_dir, db_path, store) = temp_store();
    let vault = Vault::open(store.clone(), memory(1)).unwrap();
    vault.put("feishu.tokens", PLAINTEXT.as_bytes()).unwrap();
    let before = row(&db_path, "feishu.tokens");
    drop(vault);

    // The keychain that held key 1 is unreachable and there is no key file.
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let chain = FallbackChain::new(Box::new(NoKeychain::default()), KeyFile::new(&key_path));
    let err = Vault::open(store, Box::new(chain)).unwrap_err();
    assert!(
        matches!(&err, VaultError::NoMatchingKey { stored, found, .. }
            if stored == &[key(1).id().to_owned()] && found.is_empty()),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("the test keychain") && message.contains("holds no master key"),
        "{message}"
    );
    assert!(
        !key_path.exists(),
        "no new key may be made while secrets exist"
    );
    assert_eq!(row(&db_path, "feishu.tokens"), before);
}
