//! Fetching what lark-mcp needs from the npm registry (Node.js itself and the package): a
//! download checked against its `sha512` integrity, unpacked, each step reporting its progress.
//! A leaf both the Node finder ([`super::node`]) and the installer ([`super::setup`]) use.

use std::path::Path;

use base64::Engine as _;
use sha2::Digest as _;

use crate::text::Text;

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
