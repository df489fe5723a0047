//! Getting the preset ready without the network: Node.js fetched from a stand-in npm registry on
//! 127.0.0.1 serving tarballs built here (the newest of the LTS line, checked against its
//! integrity, laid out and run before it replaces anything), and lark-mcp installed by a
//! stand-in npm that says what it fetches the way npm does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::json;
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::node::{self, Node, Npm};
use super::setup::{self, Progress, SetupError};

/// A `.tgz` of `files` (path, mode, content).
fn tarball(files: &[(&str, u32, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, mode, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(*mode);
        header.set_cksum();
        tar.append_data(&mut header, path, content.as_bytes())
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn integrity(bytes: &[u8]) -> String {
    let sum = sha2::Sha512::digest(bytes);
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(sum)
    )
}

/// Serves `files` (path → body) on `listener` until the task is dropped with the test.
fn serve(listener: tokio::net::TcpListener, files: HashMap<String, Vec<u8>>) {
    let files = Arc::new(files);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let files = files.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap_or(0) == 1
                {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or("/");
                let (status, body) = match files.get(path) {
                    Some(body) => ("200 OK", body.clone()),
                    None => ("404 Not Found", b"{}".to_vec()),
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            });
        }
    });
}

/// A registry with Node.js 24.1.0, 24.9.0 and 26.0.0 for this platform, and npm 10 and 11
/// (latest); `spoil` breaks the integrity of Node.js 24.9.0. Answers its base URL.
async fn registry(spoil: bool) -> String {
    let platform = node::platform_package().unwrap();
    let node_tgz = tarball(&[("package/bin/node", 0o755, "#!/bin/sh\necho v24.9.0\n")]);
    let npm_tgz = tarball(&[
        (
            "package/package.json",
            0o644,
            r#"{"name":"npm","version":"11.0.0"}"#,
        ),
        ("package/bin/npm-cli.js", 0o644, "// npm\n"),
    ]);
    // Bound first: the documents name the tarballs by the server's own URL.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let node_sum = if spoil {
        integrity(b"something else")
    } else {
        integrity(&node_tgz)
    };
    let dist = |url: String, sum: &str| json!({"dist": {"tarball": url, "integrity": sum}});
    let node_doc = json!({
        "dist-tags": {"latest": "26.0.0"},
        "versions": {
            "24.1.0": dist(format!("{base}/old.tgz"), "sha512-x"),
            "24.9.0": dist(format!("{base}/node.tgz"), &node_sum),
            "26.0.0": dist(format!("{base}/new.tgz"), "sha512-x"),
        }
    });
    let npm_doc = json!({
        "dist-tags": {"latest": "11.0.0"},
        "versions": {
            "10.0.0": dist(format!("{base}/npm10.tgz"), "sha512-x"),
            "11.0.0": dist(format!("{base}/npm.tgz"), &integrity(&npm_tgz)),
        }
    });
    let files = HashMap::from([
        (format!("/{platform}"), node_doc.to_string().into_bytes()),
        ("/npm".to_owned(), npm_doc.to_string().into_bytes()),
        ("/node.tgz".to_owned(), node_tgz),
        ("/npm.tgz".to_owned(), npm_tgz),
    ]);
    serve(listener, files);
    base
}

fn recorder() -> (Arc<Mutex<Vec<Progress>>>, impl Fn(Progress) + Send + Sync) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (seen, move |p: Progress| sink.lock().unwrap().push(p))
}

#[cfg(unix)]
#[tokio::test]
async fn node_is_fetched_from_the_registry_checked_and_laid_out() {
    let base = registry(false).await;
    let dir = tempfile::tempdir().unwrap();
    let (seen, progress) = recorder();
    let node = node::fetch(&base, dir.path(), &progress).await.unwrap();
    assert_eq!(node.version, "v24.9.0", "the newest of the LTS line");
    assert_eq!(node.path, dir.path().join("node/bin/node"));
    assert_eq!(
        node.npm,
        Some(Npm::Script(
            dir.path().join("node/lib/node_modules/npm/bin/npm-cli.js")
        ))
    );
    assert!(!dir.path().join("node.partial").exists());
    let seen = seen.lock().unwrap();
    let last_node = seen.iter().rfind(|p| p.step == "node").unwrap();
    assert_eq!(
        Some(last_node.done),
        last_node.total,
        "the bar reaches its end"
    );
    assert!(seen.iter().any(|p| p.step == "npm"));
    // What the app finds next time.
    let found = node::find(dir.path());
    assert!(found.is_ok(), "{found:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_tarball_that_does_not_match_its_integrity_is_refused() {
    let base = registry(true).await;
    let dir = tempfile::tempdir().unwrap();
    let (_, progress) = recorder();
    let error = node::fetch(&base, dir.path(), &progress).await.unwrap_err();
    assert!(matches!(error, SetupError::Download(_)), "{error:?}");
    assert!(error.text().zh.contains("下载失败"));
    assert!(!dir.path().join("node").exists(), "nothing laid out");
}

/// A stand-in npm: checks how it is called, says what it fetches as `npm --loglevel=http`
/// does, and installs a lark-mcp of `version` (or fails).
fn stand_in_npm(dir: &Path, version: &str, fail: bool) -> Node {
    let script = dir.join("npm-cli.js");
    let body = format!(
        r#"const fs = require('fs'), path = require('path');
const args = process.argv.slice(2);
const prefix = args[args.indexOf('--prefix') + 1];
if (!args.includes('--ignore-scripts') || !args.includes('@larksuiteoapi/lark-mcp@0.5.1')) process.exit(3);
if ({fail}) {{ console.error('npm error code E404'); process.exit(1); }}
for (const p of ['@larksuiteoapi%2flark-mcp', 'axios', 'zod'])
  console.error(`npm http fetch GET 200 https://registry.npmjs.org/${{p}} 12ms (cache miss)`);
const pkg = path.join(prefix, 'node_modules/@larksuiteoapi/lark-mcp');
fs.mkdirSync(path.join(pkg, 'dist'), {{recursive: true}});
fs.writeFileSync(path.join(pkg, 'dist/cli.js'), '');
fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({{version: '{version}'}}));
"#
    );
    std::fs::write(&script, body).unwrap();
    let system = node::find(dir).expect("Node.js 20+ for the tests: run scripts/bootstrap");
    Node {
        npm: Some(Npm::Script(script)),
        ..system
    }
}

#[tokio::test]
async fn lark_mcp_is_installed_by_npm_with_each_fetch_reported() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("lark-mcp");
    let node = stand_in_npm(dir.path(), setup::VERSION, false);
    let (seen, progress) = recorder();
    setup::install(&node, &prefix, None, &progress)
        .await
        .unwrap();
    assert_eq!(
        setup::installed_version(&prefix).as_deref(),
        Some(setup::VERSION)
    );
    let steps: Vec<(u64, String)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|p| (p.done, p.message.en.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            (1, "Fetching @larksuiteoapi%2flark-mcp".to_owned()),
            (2, "Fetching axios".to_owned()),
            (3, "Fetching zod".to_owned()),
        ]
    );

    // npm failing, or installing another version, is a failure in npm's words.
    let other = dir.path().join("other");
    let failing = stand_in_npm(dir.path(), setup::VERSION, true);
    let error = setup::install(&failing, &other, None, &progress)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("E404"), "{error}");
    let wrong = stand_in_npm(dir.path(), "0.4.0", false);
    assert!(
        setup::install(&wrong, &other, None, &progress)
            .await
            .is_err()
    );
}
