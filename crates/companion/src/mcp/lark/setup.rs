//! Getting lark-mcp onto the machine: downloads from the npm registry checked against their
//! `sha512` integrity and unpacked, and lark-mcp itself installed into the data folder by npm
//! (`npm install --prefix <data>/lark-mcp @larksuiteoapi/lark-mcp@0.5.1 --ignore-scripts`: its
//! only install script builds keytar, for an OAuth token store the app never uses). Each step
//! reports its progress for the settings page.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use base64::Engine as _;
use sha2::Digest as _;
use tokio::io::AsyncBufReadExt as _;

use super::node::{Node, Npm};
use crate::text::Text;

/// The package and the version the app runs.
pub(crate) const PACKAGE: &str = "@larksuiteoapi/lark-mcp";
/// lark-mcp's version; its tools are those of `tools.tsv`.
pub(crate) const VERSION: &str = "0.5.1";

/// How far a step is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// `node`, `npm` (downloads) or `lark-mcp` (the install).
    pub(crate) step: &'static str,
    /// Bytes, or packages fetched.
    pub(crate) done: u64,
    /// Of how many, when known.
    pub(crate) total: Option<u64>,
    /// What it is doing.
    pub(crate) message: Text,
}

/// Why getting lark-mcp failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SetupError {
    /// The registry could not be read.
    #[error("the npm registry could not be read: {0}")]
    Registry(String),
    /// A download failed or did not match its integrity.
    #[error("the download failed: {0}")]
    Download(String),
    /// A file could not be written.
    #[error("a file could not be written: {0}")]
    Io(String),
    /// What was fetched does not run.
    #[error("the fetched {0} does not run")]
    Broken(String),
    /// No package for this system.
    #[error("no Node.js package for this system ({0}); install Node.js 20 or newer yourself")]
    Platform(String),
    /// npm is missing or failed.
    #[error("npm failed: {0}")]
    Npm(String),
}

impl SetupError {
    /// The failure in both languages, for the settings page.
    pub(crate) fn text(&self) -> Text {
        let zh = match self {
            SetupError::Registry(why) => format!("无法读取 npm 仓库：{why}"),
            SetupError::Download(why) => format!("下载失败：{why}"),
            SetupError::Io(why) => format!("无法写入文件：{why}"),
            SetupError::Broken(what) => format!("下载的 {what} 无法运行"),
            SetupError::Platform(what) => {
                format!("没有适用于此系统（{what}）的 Node.js 包，请自行安装 Node.js 20 或更新版本")
            }
            SetupError::Npm(why) => format!("npm 运行失败：{why}"),
        };
        Text::new(zh, self.to_string())
    }
}

/// Downloads `url`, reporting bytes as `step`, and checks it against `integrity`
/// (`sha512-<base64>`, as the registry gives it).
pub(crate) async fn download(
    client: &reqwest::Client,
    url: &str,
    integrity: &str,
    step: &'static str,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<Vec<u8>, SetupError> {
    use futures::StreamExt as _;
    let failed = |e: reqwest::Error| SetupError::Download(format!("{url}: {e}"));
    let response = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(failed)?;
    let total = response.content_length();
    let mut bytes = Vec::with_capacity(usize::try_from(total.unwrap_or(0)).unwrap_or(0));
    let mut stream = response.bytes_stream();
    let mut shown = 0u64;
    let name = url.rsplit('/').next().unwrap_or(url).to_owned();
    while let Some(chunk) = stream.next().await {
        bytes.extend_from_slice(&chunk.map_err(failed)?);
        let done = bytes.len() as u64;
        // About a hundred reports per file, not one per network chunk.
        if done - shown >= total.unwrap_or(1 << 20) / 100 || Some(done) == total {
            shown = done;
            progress(Progress {
                step,
                done,
                total,
                message: Text::new(format!("正在下载 {name}"), format!("Downloading {name}")),
            });
        }
    }
    let expected = integrity.strip_prefix("sha512-").unwrap_or_default();
    let actual = base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&bytes));
    if expected.is_empty() || expected != actual {
        return Err(SetupError::Download(format!(
            "{name} does not match its integrity"
        )));
    }
    Ok(bytes)
}

/// Unpacks a `.tgz` into `dir` (the tar crate refuses entries that leave it).
pub(crate) fn unpack(tgz: &[u8], dir: &Path) -> Result<(), SetupError> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tgz));
    archive
        .unpack(dir)
        .map_err(|e| SetupError::Io(format!("{}: {e}", dir.display())))
}

/// Where lark-mcp's entry point is under an npm prefix.
pub(crate) fn cli_js(prefix: &Path) -> PathBuf {
    prefix
        .join("node_modules")
        .join(PACKAGE)
        .join("dist/cli.js")
}

/// The lark-mcp version installed under `prefix`, if any.
pub(crate) fn installed_version(prefix: &Path) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(PACKAGE)
        .join("package.json");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    cli_js(prefix)
        .is_file()
        .then(|| doc["version"].as_str().map(str::to_owned))?
}

/// Installs lark-mcp under `prefix` with `node`'s npm (from `registry` when given), reporting
/// each package npm fetches.
pub(crate) async fn install(
    node: &Node,
    prefix: &Path,
    registry: Option<&str>,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<(), SetupError> {
    let mut cmd = match &node.npm {
        Some(Npm::Script(script)) => {
            let mut cmd = tokio::process::Command::new(&node.path);
            cmd.arg(script);
            cmd
        }
        Some(Npm::Program(npm)) => tokio::process::Command::new(npm),
        None => return Err(SetupError::Npm("no npm beside this Node.js".to_owned())),
    };
    std::fs::create_dir_all(prefix)
        .map_err(|e| SetupError::Io(format!("{}: {e}", prefix.display())))?;
    // npm's own scripts find this node first.
    let mut path = node
        .path
        .parent()
        .map(|p| vec![p.to_path_buf()])
        .unwrap_or_default();
    path.extend(
        std::env::var_os("PATH")
            .map_or_else(Vec::new, |p| std::env::split_paths(&p).collect::<Vec<_>>()),
    );
    cmd.arg("install")
        .arg("--prefix")
        .arg(prefix)
        .arg(format!("{PACKAGE}@{VERSION}"))
        .args([
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=http",
        ])
        .current_dir(prefix)
        .env("PATH", std::env::join_paths(path).unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(registry) = registry {
        cmd.arg("--registry").arg(registry);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| SetupError::Npm(format!("cannot run npm: {e}")))?;
    let mut fetched = 0u64;
    let mut last = String::new();
    if let Some(stderr) = child.stderr.take() {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // `npm http fetch GET 200 https://registry.npmjs.org/axios 31ms (cache miss)`
            if let Some(url) = line
                .split_whitespace()
                .find(|w| w.starts_with("http://") || w.starts_with("https://"))
                && line.contains("fetch")
            {
                fetched += 1;
                let name = url.rsplit('/').next().unwrap_or(url).to_owned();
                progress(Progress {
                    step: "lark-mcp",
                    done: fetched,
                    total: None,
                    message: Text::new(format!("正在获取 {name}"), format!("Fetching {name}")),
                });
            } else if !line.trim().is_empty() {
                last = line;
            }
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| SetupError::Npm(e.to_string()))?;
    match installed_version(prefix) {
        Some(v) if status.success() && v == VERSION => Ok(()),
        _ => Err(SetupError::Npm(format!("{status}: {last}"))),
    }
}
