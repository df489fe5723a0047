//! Getting lark-mcp onto the machine: downloads from the npm registry checked against their
//! `sha512` integrity and unpacked, and lark-mcp itself installed into the data folder by npm
//! (`npm install --prefix <data>/lark-mcp @larksuiteoapi/lark-mcp@0.5.1 --ignore-scripts`: its
//! only install script builds keytar, for an OAuth token store the app never uses). Each step
//! reports its progress for the settings page.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncBufReadExt as _;

pub(crate) use super::fetch::{Progress, SetupError};
use super::node::{Node, Npm};
use crate::text::Text;

/// The package and the version the app runs.
pub(crate) const PACKAGE: &str = "@larksuiteoapi/lark-mcp";
/// lark-mcp's version; its tools are those of `tools.tsv`.
pub(crate) const VERSION: &str = "0.5.1";

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
