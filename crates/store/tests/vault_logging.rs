//! Nothing secret is ever logged or put in an error: every vault path, the happy ones and the
//! failing ones, is driven with a recognisable secret and a known master key while a `tracing`
//! subscriber records everything at TRACE level; neither the secret nor the key may appear in the
//! log, nor in any error's `Display` or `Debug`, nor in the `Debug` of the types that hold them.
//!
//! A test binary of its own: the subscriber is the process's global one, so events from every
//! thread are caught.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use store::Store;
use store::vault::{
    FallbackChain, KeyFile, KeySourceError, MasterKey, MasterKeySource, MemoryKeySource,
    SecretString, Vault,
};

const SECRET: &str = "SECRET-7f3a9c-do-not-log-me";
const KEY_BYTES: [u8; 32] = *b"0123456789abcdef-master-key-1234";
const OTHER_KEY_BYTES: [u8; 32] = *b"fedcba9876543210-other-key-56789";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
struct NoKeychain;

impl MasterKeySource for NoKeychain {
    fn description(&self) -> String {
        "the test keychain".to_owned()
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        Err(KeySourceError::Unavailable {
            place: self.description(),
            reason: "no Secret Service on the session bus".to_owned(),
        })
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        self.load().map(|_| MasterKey::from_bytes([0; 32]))
    }
}

/// Everything printed about `value`: `Display` (errors) and `Debug`, the sources included.
fn printed_error(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = format!("{err} {err:?}");
    let mut source = err.source();
    while let Some(inner) = source {
        out.push_str(&format!(" {inner} {inner:?}"));
        source = inner.source();
    }
    out
}

fn printed_debug(value: &dyn Debug) -> String {
    format!("{value:?} {value:#?}")
}

#[test]
fn no_secret_reaches_the_log_or_any_error() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish(),
    )
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("companion.db");
    let mut printed = Vec::<String>::new();
    let mut check_err = |err: &(dyn std::error::Error + 'static)| printed.push(printed_error(err));

    // Happy paths: put, get, JSON, delete, list.
    let store = Arc::new(Store::open(&db_path).unwrap());
    let keys = MemoryKeySource::with_key(MasterKey::from_bytes(KEY_BYTES));
    let vault = Vault::open(store.clone(), Box::new(keys.clone())).unwrap();
    vault.put("feishu.tokens", SECRET.as_bytes()).unwrap();
    assert_eq!(
        vault.get("feishu.tokens").unwrap().unwrap().as_slice(),
        SECRET.as_bytes()
    );
    let token = SecretString::from(SECRET);
    vault.put_json("llm.api_key", &vec![SECRET]).unwrap();
    let back: Vec<SecretString> = vault.get_json("llm.api_key").unwrap().unwrap();
    assert_eq!(back[0].expose_secret(), SECRET);
    vault.names().unwrap();
    assert!(vault.delete("llm.api_key").unwrap());
    let debugs = vec![
        printed_debug(&vault),
        printed_debug(&keys),
        printed_debug(&MasterKey::from_bytes(KEY_BYTES)),
        printed_debug(&token),
        printed_debug(&back),
        format!("{token}"),
    ];

    // A value of the wrong type: serde's own message would quote it.
    vault
        .put("feishu.raw", format!("\"{SECRET}\"").as_bytes())
        .unwrap();
    check_err(&vault.get_json::<u64>("feishu.raw").unwrap_err());
    vault.put("feishu.raw", SECRET.as_bytes()).unwrap();
    check_err(&vault.get_json::<Vec<String>>("feishu.raw").unwrap_err());

    // Tampered rows.
    let raw = rusqlite::Connection::open(&db_path).unwrap();
    raw.execute(
        "INSERT INTO secrets (name, nonce, ciphertext, key_id, updated_at)
         SELECT 'copied', nonce, ciphertext, key_id, updated_at FROM secrets WHERE name = 'feishu.tokens'",
        [],
    )
    .unwrap();
    check_err(&vault.get("copied").unwrap_err());
    raw.execute("UPDATE secrets SET nonce = x'00' WHERE name = 'copied'", [])
        .unwrap();
    check_err(&vault.get("copied").unwrap_err());
    raw.execute(
        "UPDATE secrets SET key_id = 'k1-0000000000000000' WHERE name = 'copied'",
        [],
    )
    .unwrap();
    check_err(&vault.get("copied").unwrap_err());
    raw.execute("DELETE FROM secrets WHERE name = 'copied'", [])
        .unwrap();
    drop(vault);

    // The wrong master key.
    let wrong = MemoryKeySource::with_key(MasterKey::from_bytes(OTHER_KEY_BYTES));
    check_err(&Vault::open(store.clone(), Box::new(wrong)).unwrap_err());

    // Key files: too open, damaged (holding the secret itself), and the fallback chain.
    let key_path = dir.path().join("master.key");
    let good_key = KeyFile::new(&key_path).load_or_create().unwrap();
    let key_file_text = std::fs::read_to_string(&key_path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
        check_err(&KeyFile::new(&key_path).load().unwrap_err());
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let damaged_path = dir.path().join("damaged.key");
    std::fs::write(&damaged_path, SECRET).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&damaged_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    check_err(&KeyFile::new(&damaged_path).load().unwrap_err());
    let chain = FallbackChain::new(Box::new(NoKeychain), KeyFile::new(&key_path));
    let (_other_dir, other_store) = {
        let d = tempfile::tempdir().unwrap();
        let s = Arc::new(Store::open(d.path().join("other.db")).unwrap());
        (d, s)
    };
    let vault = Vault::open(other_store, Box::new(chain)).unwrap();
    assert_eq!(vault.key_id(), good_key.id());
    vault.put("feishu.tokens", SECRET.as_bytes()).unwrap();
    let chain_debug = printed_debug(&vault);
    drop(vault);

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    // The capture works and saw the vault at work, with the secrets' names.
    assert!(log.contains("stored a secret"), "{log}");
    assert!(log.contains("feishu.tokens"), "{log}");
    assert!(log.contains("no keychain is available"), "{log}");
    assert_eq!(printed.len(), 8, "every failing path produced an error");

    let forbidden: Vec<(&str, String)> = vec![
        ("the secret", SECRET.to_owned()),
        ("a piece of the secret", "7f3a9c-do-not".to_owned()),
        (
            "the master key",
            String::from_utf8_lossy(&KEY_BYTES).into_owned(),
        ),
        ("the master key in base64", BASE64.encode(KEY_BYTES)),
        ("the master key in hex", hex::encode(KEY_BYTES)),
        (
            "the other key",
            String::from_utf8_lossy(&OTHER_KEY_BYTES).into_owned(),
        ),
        ("the other key in base64", BASE64.encode(OTHER_KEY_BYTES)),
        ("the key file's key", key_file_text.trim().to_owned()),
    ];
    let texts = std::iter::once(("the log", log))
        .chain(printed.into_iter().map(|p| ("an error", p)))
        .chain(debugs.into_iter().map(|d| ("a Debug", d)))
        .chain(std::iter::once(("the chain's Debug", chain_debug)));
    for (where_, text) in texts {
        for (what, needle) in &forbidden {
            assert!(
                !text.contains(needle.as_str()),
                "{what} appears in {where_}:\n{text}"
            );
        }
    }
}
