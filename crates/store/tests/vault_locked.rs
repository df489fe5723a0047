//! A lost, replaced or damaged master key locks the vault instead of stopping the app, and
//! forgetting every secret unlocks it again without deleting anything else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agent::StateMap;
use store::vault::{KeyFile, MemoryKeySource};
use store::{Store, Vault, VaultError};

fn store(dir: &std::path::Path) -> Arc<Store> {
    Arc::new(Store::open(dir.join("companion.db")).unwrap())
}

#[test]
fn a_damaged_key_file_locks_the_vault_and_forgetting_sets_it_aside() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let session = {
        let store = store(dir.path());
        let vault = Vault::open(store.clone(), Box::new(KeyFile::new(&key_path))).unwrap();
        vault.put("feishu.app_secret", b"s3cret").unwrap();
        store
            .create_session("app", "me", None, &StateMap::new())
            .unwrap()
    };
    std::fs::write(&key_path, "this is not a key\n").unwrap();

    let store = store(dir.path());
    // The strict opening refuses, as before.
    assert!(matches!(
        Vault::open(store.clone(), Box::new(KeyFile::new(&key_path))),
        Err(VaultError::KeySource(_))
    ));
    let vault = Vault::open_or_locked(store.clone(), Box::new(KeyFile::new(&key_path))).unwrap();
    let health = vault.health().unwrap();
    let reason = health.locked.expect("locked");
    assert!(reason.contains("damaged"), "{reason}");
    assert_eq!(health.unreadable.len(), 1);
    assert!(matches!(
        vault.get("feishu.app_secret"),
        Err(VaultError::Locked { .. })
    ));
    assert!(matches!(
        vault.put("feishu.app_secret", b"x"),
        Err(VaultError::Locked { .. })
    ));

    assert_eq!(vault.forget_all().unwrap(), 1);
    // The damaged key is kept beside, renamed; a new key took its place.
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("master.key.unusable-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(aside[0].path()).unwrap(),
        "this is not a key\n"
    );
    vault.put("feishu.app_secret", b"new").unwrap();
    assert_eq!(
        vault.get("feishu.app_secret").unwrap().unwrap().as_slice(),
        b"new"
    );
    assert_eq!(store.load_session(&session.id).unwrap().meta.id, session.id);
    // And it opens normally next time.
    drop(vault);
    let vault = Vault::open(store, Box::new(KeyFile::new(&key_path))).unwrap();
    assert!(vault.health().unwrap().unreadable.is_empty());
}

#[test]
fn a_replaced_key_locks_the_vault_until_the_secrets_are_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    {
        let vault = Vault::open(store(dir.path()), Box::new(MemoryKeySource::new())).unwrap();
        vault.put("a", b"1").unwrap();
        vault.put("b", b"2").unwrap();
    }
    let other_key = MemoryKeySource::new();
    let vault = Vault::open_or_locked(store(dir.path()), Box::new(other_key)).unwrap();
    assert!(vault.health().unwrap().locked.is_some());
    assert_eq!(vault.names().unwrap(), ["a", "b"]);
    assert_eq!(vault.forget_all().unwrap(), 2);
    assert!(vault.names().unwrap().is_empty());
    vault.put("a", b"3").unwrap();
    assert_eq!(vault.get("a").unwrap().unwrap().as_slice(), b"3");
}
