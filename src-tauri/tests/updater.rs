//! Updates, against a release server on the loopback: the app (its real updater plugin, state and
//! commands, on Tauri's mock runtime) reads a manifest signed with a throwaway key made here,
//! finds the newer version with its notes, installs a download whose signature verifies, and
//! refuses a download that was tampered with, a release signed for another version, and a
//! signature from another key. Turned off in Settings, it asks the server nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Cursor, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use feishu_companion::{Launch, Shell};
use serde_json::{Value, json};
use tauri::App;
use tauri::test::{MockRuntime, mock_builder};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A minisign key pair, as `tauri signer generate` makes one; the public key in the form
/// `plugins.updater.pubkey` takes (base64 of the public key file).
struct Key {
    public: String,
    pk: minisign::PublicKey,
    sk: minisign::SecretKey,
}

fn key() -> Key {
    let minisign::KeyPair { pk, sk } = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let public = B64.encode(pk.to_box().unwrap().to_string());
    Key { public, pk, sk }
}

/// Signs `bytes` as `tauri signer sign` does for a release of `version`: the trusted comment
/// names the version, and the manifest carries the signature file base64-encoded.
fn sign(key: &Key, bytes: &[u8], version: &str) -> String {
    let trusted =
        format!("timestamp:1764576000\tfile:feishu-companion.AppImage\tversion:{version}");
    let signature = minisign::sign(
        Some(&key.pk),
        &key.sk,
        Cursor::new(bytes),
        Some(&trusted),
        Some("signature from tauri secret key"),
    )
    .unwrap();
    B64.encode(signature.to_string())
}

/// A release server: fixed answers by path, and a count of the requests it got.
#[derive(Clone, Default)]
struct Server {
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    hits: Arc<AtomicUsize>,
    base: String,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut server = Server {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..Server::default()
        };
        let (files, hits) = (server.files.clone(), server.hits.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    continue;
                }
                // The rest of the head; these requests have no body.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                hits.fetch_add(1, Ordering::SeqCst);
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let body = files.lock().unwrap().get(&path).cloned();
                let (status, body) = match body {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", b"{}".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        server.base.push('/');
        server
    }

    fn put(&self, path: &str, body: Vec<u8>) {
        self.files.lock().unwrap().insert(format!("/{path}"), body);
    }

    /// Publishes `build` as `version`, signed with `signature`.
    fn publish(&self, version: &str, build: &[u8], signature: &str) {
        let file = format!("feishu-companion-{version}.AppImage");
        let platform = json!({ "url": format!("{}{file}", self.base), "signature": signature });
        let manifest = json!({
            "version": version,
            "notes": "- 审批卡片显示参会人的姓名\n- Fixes the inbox count after a restart",
            "pub_date": "2026-11-30T08:00:00Z",
            "platforms": {
                "linux-x86_64": platform,
                "linux-x86_64-appimage": platform,
                "linux-aarch64": platform,
            }
        });
        self.put("latest.json", serde_json::to_vec(&manifest).unwrap());
        self.put(&file, build.to_vec());
    }
}

/// The newer build: an ELF file, as an AppImage is (the updater checks that before installing).
fn newer_build() -> Vec<u8> {
    let mut build = std::fs::read("/bin/true").unwrap();
    build.extend_from_slice(b"\nfeishu-companion 0.2.0");
    build
}

/// The app as `run` builds it, its updater pointed at `server` and trusting `public_key`, with an
/// "installed app" file the update replaces instead of the test's own binary.
fn app(
    dir: &Path,
    server: &Server,
    public_key: &str,
    check_for_updates: bool,
) -> (App<MockRuntime>, PathBuf) {
    let paths = companion::AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = companion::Settings {
        check_for_updates,
        ..companion::Settings::default()
    };
    settings.feishu.redirect_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    settings.save(&paths.settings_file()).unwrap();

    let mut context = feishu_companion::context::<MockRuntime>();
    let updater = context
        .config_mut()
        .plugins
        .0
        .get_mut("updater")
        .expect("tauri.conf.json configures the updater");
    assert!(
        updater["pubkey"].as_str().is_some_and(|k| !k.is_empty()),
        "the release public key is in the config"
    );
    // Only the server and the key differ from the shipped configuration (which also requires
    // the signed version); plain http is allowed for the loopback server alone.
    updater["endpoints"] = json!([format!("{}latest.json", server.base)]);
    updater["pubkey"] = json!(public_key);
    updater["dangerousInsecureTransportProtocol"] = json!(true);
    assert_eq!(updater["requireSignedVersion"], json!(true));

    let launch = Launch {
        data_dir: Some(dir.to_path_buf()),
        ephemeral_keys: true,
        demo: true,
        ..Launch::default()
    };
    let shell = Shell::new(launch, Instant::now()).without_native_windows();
    let app = feishu_companion::configure(mock_builder(), shell)
        .build(context)
        .unwrap();
    feishu_companion::windows::create_main(app.handle()).unwrap();
    let installed = dir.join("feishu-companion.AppImage");
    std::fs::write(&installed, b"the installed 0.1.0").unwrap();
    feishu_companion::updates::install_into(app.handle(), installed.clone());
    (app, installed)
}

fn call(app: &App<MockRuntime>, cmd: &str) -> Value {
    common::call(app, cmd, json!({})).unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

#[test]
fn a_newer_signed_release_is_found_with_its_notes_and_installed_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let server = Server::start();
    let build = newer_build();
    server.publish("0.2.0", &build, &sign(&key, &build, "0.2.0"));
    let (app, installed) = app(dir.path(), &server, &key.public, true);

    let found = call(&app, "check_for_update");
    assert_eq!(found["state"], "available", "{found}");
    assert_eq!(found["update"]["version"], "0.2.0");
    assert_eq!(
        found["update"]["current_version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        found["update"]["notes"]
            .as_str()
            .unwrap()
            .contains("参会人的姓名")
    );
    assert_eq!(found["update"]["date"], "2026-11-30T08:00:00Z");
    assert_eq!(
        call(&app, "update_status"),
        found,
        "the status bar reads the same"
    );
    // Finding it downloaded nothing and changed nothing.
    assert_eq!(std::fs::read(&installed).unwrap(), b"the installed 0.1.0");

    let done = call(&app, "install_update");
    assert_eq!(done, json!({ "state": "installed", "version": "0.2.0" }));
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        build,
        "the verified build replaced the app"
    );
}

#[test]
fn a_tampered_download_is_refused_and_the_app_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let server = Server::start();
    let build = newer_build();
    let signature = sign(&key, &build, "0.2.0");
    let mut tampered = build.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    server.publish("0.2.0", &tampered, &signature);
    let (app, installed) = app(dir.path(), &server, &key.public, true);

    assert_eq!(call(&app, "check_for_update")["state"], "available");
    let refused = call(&app, "install_update");
    assert_eq!(refused["state"], "failed", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("signature check"),
        "{refused}"
    );
    assert_eq!(std::fs::read(&installed).unwrap(), b"the installed 0.1.0");
    // Nothing is left to install: a second press does not retry the tampered file.
    assert_eq!(call(&app, "install_update")["state"], "failed");
    assert_eq!(std::fs::read(&installed).unwrap(), b"the installed 0.1.0");
}

#[test]
fn a_release_signed_by_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, other) = (key(), key());
    let server = Server::start();
    let build = newer_build();
    server.publish("0.2.0", &build, &sign(&other, &build, "0.2.0"));
    let (app, installed) = app(dir.path(), &server, &trusted.public, true);

    assert_eq!(call(&app, "check_for_update")["state"], "available");
    let refused = call(&app, "install_update");
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(std::fs::read(&installed).unwrap(), b"the installed 0.1.0");
}

#[test]
fn an_older_release_announced_as_newer_is_refused() {
    // A genuine, correctly signed 0.0.9 behind a manifest that calls it 0.2.0: the signature
    // names the version it was made for, and that is not the one announced.
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let server = Server::start();
    let old = newer_build();
    server.publish("0.2.0", &old, &sign(&key, &old, "0.0.9"));
    let (app, installed) = app(dir.path(), &server, &key.public, true);

    assert_eq!(call(&app, "check_for_update")["state"], "available");
    let refused = call(&app, "install_update");
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(std::fs::read(&installed).unwrap(), b"the installed 0.1.0");
}

#[test]
fn the_same_version_is_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let server = Server::start();
    let build = newer_build();
    let current = env!("CARGO_PKG_VERSION");
    server.publish(current, &build, &sign(&key, &build, current));
    let (app, _) = app(dir.path(), &server, &key.public, true);
    assert_eq!(
        call(&app, "check_for_update"),
        json!({ "state": "up_to_date" })
    );
    assert_eq!(
        call(&app, "install_update")["state"],
        "failed",
        "nothing to install"
    );
}

/// Starts the core as the app does at launch; once it is open, waits for the check to end.
fn start_and_settle(app: &App<MockRuntime>) -> Value {
    feishu_companion::start(app.handle().clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::call(app, "app_info", json!({})).is_err() {
        assert!(Instant::now() < deadline, "the core never opened");
        std::thread::sleep(Duration::from_millis(50));
    }
    loop {
        let status = call(app, "update_status");
        if status["state"] != "checking" {
            return status;
        }
        assert!(Instant::now() < deadline, "the update check never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn at_start_the_app_checks_once_unless_checks_are_turned_off() {
    let key = key();
    let build = newer_build();

    let on = tempfile::tempdir().unwrap();
    let server = Server::start();
    server.publish("0.2.0", &build, &sign(&key, &build, "0.2.0"));
    let (app_on, _) = app(on.path(), &server, &key.public, true);
    let status = start_and_settle(&app_on);
    assert_eq!(status["state"], "available", "{status}");
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        1,
        "one request for the manifest"
    );

    let off = tempfile::tempdir().unwrap();
    let quiet = Server::start();
    quiet.publish("0.2.0", &build, &sign(&key, &build, "0.2.0"));
    let (app_off, _) = app(off.path(), &quiet, &key.public, false);
    let status = start_and_settle(&app_off);
    assert_eq!(status, json!({ "state": "off" }));
    assert_eq!(
        quiet.hits.load(Ordering::SeqCst),
        0,
        "turned off: not even a request"
    );
}
