//! How the app is opened, and the names of the things every part refers to. A leaf.

/// The vault entry of the Feishu App Secret.
pub const APP_SECRET: &str = "feishu.app_secret";

/// Requested with every sign-in, so approval cards can name the people a write involves.
pub const PEOPLE_NAMES_SCOPE: &str = "contact:contact.base:readonly";

/// The demo app's id in the emulator.
pub const DEMO_APP_ID: &str = "cli_demo_companion";

/// How to open the app.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Use this master-key source instead of the OS keychain (tests).
    pub memory_keys: bool,
    /// Force demo mode even when Feishu and a model are configured.
    pub force_demo: bool,
    /// Where the user's own Feishu app is served, instead of the brand's hosts (tests, and a
    /// local emulator standing in for a real tenant).
    pub feishu_base_url: Option<String>,
    /// The shell's folder of packaged resources (Tauri's resource folder), where an installed
    /// app finds the Python sandbox's component (see [`crate::resources`]).
    pub resource_dir: Option<std::path::PathBuf>,
    /// Keep the compiled Python sandbox here instead of the data folder (tests share one).
    pub python_cache_dir: Option<std::path::PathBuf>,
    /// Serve connected agents on this port instead of the registry's (`Some(0)`: any free
    /// port; tests).
    pub agents_port: Option<u16>,
}
