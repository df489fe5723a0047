//! The vault's master key in the real OS keychain (the Secret Service, on Linux).
//!
//! With `COMPANION_SECRET_SERVICE_TEST=1` (as `scripts/test` runs it, under
//! `scripts/with-secret-service`), a real, unlocked Secret Service is required and used: any
//! failure fails the test. Without it, the same test checks what a machine without one gets: a
//! clear "not available" error, in bounded time, never a panic or a hang. That check, and the
//! fallback to the key file, run in a child process whose session bus is missing or silent, so
//! they are the same on a desktop with a keychain and on CI.
//!
//! Linux only: the Secret Service and its session bus are Linux's; macOS and Windows always have
//! their keychain.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::Store;
use store::vault::{KeySourceError, MasterKey, MasterKeySource, OsKeychain, Vault, fallback_chain};

const REAL: &str = "COMPANION_SECRET_SERVICE_TEST";
/// Set in a child process: which scenario to play instead of spawning.
const CHILD: &str = "COMPANION_KEYCHAIN_TEST_CHILD";
/// In the child: a socket path to listen on and never answer, posing as the session bus.
const SILENT_BUS: &str = "COMPANION_KEYCHAIN_TEST_SILENT_BUS";
/// Never the app's real service, so a test cannot touch a user's key.
const TEST_SERVICE: &str = "feishu-companion-test";

fn test_entry() -> OsKeychain {
    OsKeychain::with_entry(TEST_SERVICE, format!("vault-test-{}", uuid::Uuid::new_v4()))
}

fn real_secret_service_required() -> bool {
    std::env::var(REAL).is_ok_and(|v| v == "1")
}

#[test]
fn os_keychain_stores_and_reads_the_master_key_through_secret_service() {
    if real_secret_service_required() {
        against_the_real_secret_service();
    } else {
        eprintln!(
            "{REAL} is not 1: checking that a missing or silent Secret Service is reported as unavailable (scripts/test also runs the real one)"
        );
        in_child("missing_bus", None);
        in_child("silent_bus", Some("silent"));
    }
}

#[test]
fn without_a_secret_service_the_key_file_is_used_and_the_app_told_once() {
    in_child("fallback", None);
}

fn against_the_real_secret_service() {
    let fail = |what: &str, err: &dyn std::fmt::Display| -> ! {
        panic!(
            "{REAL}=1 but the Secret Service failed to {what}: {err}\n\
             Run this test under scripts/with-secret-service (it needs dbus and gnome-keyring; scripts/bootstrap installs them)."
        )
    };
    let keychain = test_entry().with_timeout(Duration::from_secs(30));
    let second = test_entry().with_timeout(Duration::from_secs(30));
    let cleanup = Cleanup(vec![keychain.clone(), second.clone()]);

    assert!(
        keychain
            .load()
            .unwrap_or_else(|e| fail("look up an entry", &e))
            .is_none(),
        "a fresh entry must be empty"
    );
    let created = keychain
        .load_or_create()
        .unwrap_or_else(|e| fail("store a key", &e));
    let loaded = keychain
        .load()
        .unwrap_or_else(|e| fail("read the key back", &e))
        .expect("the key just stored");
    assert_eq!(loaded.id(), created.id());
    assert!(matches!(
        keychain.create(),
        Err(KeySourceError::AlreadyExists { .. })
    ));

    // Really in the Secret Service, as base64 of 32 bytes, under service and account: read it
    // with another client, libsecret's secret-tool.
    let account = keychain_account(&keychain);
    let out = Command::new("secret-tool")
        .args(["lookup", "service", TEST_SERVICE, "username", &account])
        .output()
        .unwrap_or_else(|e| fail("run secret-tool (libsecret-tools)", &e));
    assert!(out.status.success(), "secret-tool: {out:?}");
    let bytes: [u8; 32] = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        String::from_utf8(out.stdout).unwrap().trim(),
    )
    .unwrap()
    .try_into()
    .unwrap();
    assert_eq!(MasterKey::from_bytes(bytes).id(), created.id());

    // The app's chain uses the keychain: no notice, no key file.
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("master.key");
    let db_path = dir.path().join("companion.db");
    let vault = Vault::open(
        Arc::new(Store::open(&db_path).unwrap()),
        Box::new(fallback_chain(keychain.clone(), &key_path)),
    )
    .unwrap_or_else(|e| fail("open a vault", &e));
    assert_eq!(vault.key_id(), created.id());
    assert_eq!(vault.key_notice(), None);
    vault.put("feishu.tokens", b"u-token").unwrap();
    drop(vault);
    assert!(!key_path.exists(), "no key file while the keychain works");
    let vault = Vault::open(
        Arc::new(Store::open(&db_path).unwrap()),
        Box::new(fallback_chain(keychain.clone(), &key_path)),
    )
    .unwrap_or_else(|e| fail("reopen the vault", &e));
    assert_eq!(
        vault.get("feishu.tokens").unwrap().unwrap().as_slice(),
        b"u-token"
    );

    // An empty vault on an empty entry: the chain creates the key in the keychain.
    let vault = Vault::open(
        Arc::new(Store::open_in_memory().unwrap()),
        Box::new(fallback_chain(second.clone(), &key_path)),
    )
    .unwrap_or_else(|e| fail("create a key through the chain", &e));
    assert_eq!(
        second.load().unwrap().map(|k| k.id().to_owned()).as_deref(),
        Some(vault.key_id().as_str())
    );
    assert!(!key_path.exists());

    // From inside an async runtime, as the app calls it: the keychain client runs its own
    // runtime, which must never be started on a thread that is already inside one.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let id_in_runtime = runtime.block_on(async {
        Vault::open(
            Arc::new(Store::open(&db_path).unwrap()),
            Box::new(fallback_chain(keychain.clone(), &key_path)),
        )
        .unwrap_or_else(|e| fail("open the vault inside an async runtime", &e))
        .key_id()
        .to_owned()
    });
    assert_eq!(id_in_runtime, created.id());

    drop(cleanup);
    assert!(keychain.load().unwrap().is_none(), "deleted");
}

/// The account of a test entry, read back from its description.
fn keychain_account(keychain: &OsKeychain) -> String {
    let description = keychain.description();
    description
        .rsplit_once("account ")
        .map(|(_, rest)| rest.trim_end_matches(')').to_owned())
        .unwrap()
}

/// Removes the test entries even when an assertion fails.
struct Cleanup(Vec<OsKeychain>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for keychain in &self.0 {
            let _ = keychain.delete();
        }
    }
}

/// Runs this test binary again as a child with a broken session bus, playing `scenario`, and
/// requires it to pass within a minute.
fn in_child(scenario: &str, silent: Option<&str>) {
    if let Ok(playing) = std::env::var(CHILD) {
        if playing == scenario {
            play(scenario);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join(silent.unwrap_or("no-bus"));
    let test_name = match scenario {
        "fallback" => "without_a_secret_service_the_key_file_is_used_and_the_app_told_once",
        _ => "os_keychain_stores_and_reads_the_master_key_through_secret_service",
    };
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .env_remove(REAL)
        .env_remove("DBUS_STARTER_ADDRESS")
        .env_remove("DISPLAY")
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", bus.display()),
        )
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if silent.is_some() {
        command.env(SILENT_BUS, &bus);
    }
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the {scenario} scenario hung for a minute:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        status.success() && stdout.contains("1 passed"),
        "the {scenario} scenario failed ({status}):\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn play(scenario: &str) {
    match scenario {
        "missing_bus" => {
            let keychain = test_entry().with_timeout(Duration::from_secs(20));
            let started = Instant::now();
            let err = keychain.load().unwrap_err();
            assert_unavailable(&err);
            assert!(started.elapsed() < Duration::from_secs(15), "{err}");
        }
        "silent_bus" => {
            // A socket that accepts and never answers: only the timeout can end the call.
            let path = std::env::var(SILENT_BUS).unwrap();
            let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming() {
                    held.push(stream);
                }
            });
            let keychain = test_entry().with_timeout(Duration::from_secs(2));
            let started = Instant::now();
            let err = keychain.load().unwrap_err();
            assert_unavailable(&err);
            assert!(
                err.to_string().contains("did not answer within 2 s"),
                "{err}"
            );
            assert!(started.elapsed() < Duration::from_secs(10));
        }
        "fallback" => fallback(),
        other => panic!("no scenario {other}"),
    }
}

fn assert_unavailable(err: &KeySourceError) {
    eprintln!("as expected: {err}");
    assert!(
        matches!(err, KeySourceError::Unavailable { place, .. }
            if place.contains("OS keychain") && place.contains(TEST_SERVICE)),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("is not available"), "{message}");
}

fn fallback() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("config").join("master.key");
    let db_path = dir.path().join("companion.db");
    let keychain = test_entry().with_timeout(Duration::from_secs(20));

    let chain = fallback_chain(keychain.clone(), &key_path);
    let vault = Vault::open(Arc::new(Store::open(&db_path).unwrap()), Box::new(chain)).unwrap();
    let notice = vault.key_notice().expect("the app is told").clone();
    assert_eq!(notice.key_file, key_path);
    assert!(notice.keychain.contains("OS keychain"), "{notice:?}");
    assert!(!notice.reason.is_empty());
    eprintln!("the notice: {notice}");
    assert_private(&key_path);
    vault.put("feishu.tokens", b"u-token").unwrap();
    let key_id = vault.key_id().to_owned();
    drop(vault);

    let vault = Vault::open(
        Arc::new(Store::open(&db_path).unwrap()),
        Box::new(fallback_chain(keychain, &key_path)),
    )
    .unwrap();
    assert_eq!(vault.key_id(), key_id);
    assert!(vault.key_notice().is_some());
    assert_eq!(
        vault.get("feishu.tokens").unwrap().unwrap().as_slice(),
        b"u-token"
    );
}

#[cfg(unix)]
fn assert_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
}

#[cfg(not(unix))]
fn assert_private(path: &Path) {
    assert!(path.exists());
}
