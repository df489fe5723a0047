//! The preset's actions: one core function each (read it, switch it, get it ready), used by the
//! UI, the CLI and the tests. Getting it ready reports each step as `McpEvent::Setup`.

use super::node::{LTS_MAJOR, NodeProblem};
use super::setup::{self, Progress, VERSION};
use super::{ID, reads};
use crate::error::CompanionError;
use crate::events::UiEvent;
use crate::mcp::McpEvent;
use crate::mcp::api::Mcp;
use crate::mcp::view::LarkMcpView;
use crate::text::Text;

/// The npm registry: npm's own setting when the environment gives one (a mirror), else npm's.
fn registry() -> String {
    ["npm_config_registry", "NPM_CONFIG_REGISTRY"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "https://registry.npmjs.org".to_owned())
}

fn failed(text: &Text) -> CompanionError {
    CompanionError::Other(format!("{} / {}", text.zh, text.en))
}

impl Mcp {
    /// The lark-mcp preset: switched on or not, what it needs, its server.
    pub async fn lark_mcp(&self) -> LarkMcpView {
        // Kept by the servers, for the view and the server.
        let _ = self.find_node().await;
        self.lark_view()
    }

    /// Switches the preset on or off; `tools` is lark-mcp's `-t` selection (`None` keeps the
    /// current one, an empty one goes back to the default). Switched on and ready, it is started
    /// at once so the assistant has its tools.
    pub async fn set_lark_mcp(
        &self,
        enabled: bool,
        tools: Option<String>,
    ) -> Result<LarkMcpView, CompanionError> {
        let tools = tools.map(|t| t.trim().to_owned());
        if let Some(chosen) = tools.as_deref().filter(|t| !t.is_empty()) {
            reads::expand(chosen).map_err(|e| {
                failed(&Text::new(
                    format!("lark-mcp 没有这些工具或预设：{}", e.0.join(", ")),
                    e.to_string(),
                ))
            })?;
        }
        self.mcp().update_lark(|lark| {
            lark.enabled = enabled;
            if let Some(tools) = tools {
                lark.tools = (!tools.is_empty()).then_some(tools);
            }
        })?;
        // Kept by the servers, for the view and the server.
        let _ = self.find_node().await;
        self.lark_changed().await?;
        Ok(self.lark_view())
    }

    /// Gets the preset ready: fetches Node.js from the npm registry into the data folder when
    /// none will do, then installs lark-mcp there with npm; each step reports its progress.
    pub async fn install_lark_mcp(&self) -> Result<LarkMcpView, CompanionError> {
        let data_dir = self.mcp().data_dir().to_path_buf();
        let me = self.clone();
        let progress = move |p: Progress| {
            me.emit(UiEvent::Mcp(McpEvent::Setup {
                step: p.step.to_owned(),
                done: p.done,
                total: p.total,
                message: p.message,
            }));
        };
        let node = match self.find_node().await {
            Ok(node) if node.npm.is_some() => node,
            _ => super::node::fetch(&registry(), &data_dir, &progress)
                .await
                .map_err(|e| failed(&e.text()))?,
        };
        let prefix = self.mcp().lark_settings().prefix(&data_dir);
        if setup::installed_version(&prefix).as_deref() != Some(VERSION) {
            setup::install(&node, &prefix, None, &progress)
                .await
                .map_err(|e| failed(&e.text()))?;
        }
        // Kept by the servers, for the view and the server.
        let _ = self.find_node().await;
        self.lark_changed().await?;
        Ok(self.lark_view())
    }

    async fn find_node(&self) -> Result<super::node::Node, NodeProblem> {
        let mcp = self.mcp().clone();
        tokio::task::spawn_blocking(move || mcp.find_lark_node())
            .await
            .unwrap_or(Err(NodeProblem::Missing))
    }

    /// The preset changed: the hub takes it, and a server that is on and ready starts now, so
    /// its tools reach the assistant before the first call.
    async fn lark_changed(&self) -> Result<(), CompanionError> {
        self.mcp_changed()?;
        if let Some(conn) = self.mcp().hub().connection(ID) {
            if let Err(e) = conn.start().await {
                tracing::info!(error = %e, "lark-mcp did not start");
            }
            self.mcp().save_catalogue();
            self.recompose()?;
            self.emit(UiEvent::Mcp(McpEvent::Servers));
        }
        Ok(())
    }

    fn lark_view(&self) -> LarkMcpView {
        let mcp = self.mcp();
        let settings = mcp.lark_settings();
        let prefix = settings.prefix(mcp.data_dir());
        let installed = setup::installed_version(&prefix);
        let found = mcp.find_lark_node_cached();
        let node = found.as_ref().ok();
        let node_ready = node.is_some_and(|n| n.npm.is_some());
        let problem = match (&found, installed.as_deref()) {
            (Err(NodeProblem::Missing), _) => Some(Text::new(
                format!(
                    "未找到 Node.js 20 或更新版本。飞书助手可以从 npm 仓库下载 Node.js {LTS_MAJOR} 到它的数据文件夹。"
                ),
                format!(
                    "No Node.js 20 or newer was found. Feishu Companion can fetch Node.js {LTS_MAJOR} from the npm registry into its data folder."
                ),
            )),
            (Err(NodeProblem::TooOld { path, version }), _) => Some(Text::new(
                format!(
                    "找到的 Node.js（{}，{version}）太旧，lark-mcp 需要 20 或更新版本。飞书助手可以下载 Node.js {LTS_MAJOR}。",
                    path.display()
                ),
                format!(
                    "The Node.js found ({}, {version}) is too old; lark-mcp needs 20 or newer. Feishu Companion can fetch Node.js {LTS_MAJOR}.",
                    path.display()
                ),
            )),
            (Ok(n), _) if n.npm.is_none() => Some(Text::new(
                format!(
                    "Node.js {} 旁没有 npm。飞书助手可以下载带 npm 的 Node.js {LTS_MAJOR}。",
                    n.version
                ),
                format!(
                    "Node.js {} has no npm beside it. Feishu Companion can fetch Node.js {LTS_MAJOR} with npm.",
                    n.version
                ),
            )),
            (Ok(_), Some(VERSION)) => None,
            (Ok(_), _) => Some(Text::new(
                format!("lark-mcp {VERSION} 尚未安装。可以用 npm 安装到数据文件夹。"),
                format!(
                    "lark-mcp {VERSION} is not installed yet. It can be installed into the data folder with npm."
                ),
            )),
        };
        let server = mcp
            .hub()
            .connection(ID)
            .map(|c| mcp.view(&c.resolved().config, self.vault()));
        LarkMcpView {
            enabled: settings.enabled,
            tools: settings.selection().to_owned(),
            default_tools: reads::DEFAULT_TOOLS.to_owned(),
            node_path: node.map(|n| n.path.to_string_lossy().into_owned()),
            node_version: node.map(|n| n.version.clone()),
            node_ready,
            installed,
            version: VERSION.to_owned(),
            package_dir: prefix.to_string_lossy().into_owned(),
            problem,
            read_tools: reads::read_tools(settings.selection()).unwrap_or_default(),
            server,
        }
    }
}
