//! Where the app keeps its files: the platform's standard directories.

use std::path::{Path, PathBuf};

/// The app's folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPaths {
    /// Settings (`settings.json`).
    pub config_dir: PathBuf,
    /// The database, the key file fallback, Python tools.
    pub data_dir: PathBuf,
}

impl AppPaths {
    /// The platform's standard folders (`~/.config/feishu-companion`, `~/.local/share/…` on
    /// Linux; Application Support on macOS; AppData on Windows).
    pub fn system() -> Option<AppPaths> {
        let dirs = directories::ProjectDirs::from("cn", "FeishuCompanion", "feishu-companion")?;
        Some(AppPaths {
            config_dir: dirs.config_dir().to_path_buf(),
            data_dir: dirs.data_dir().to_path_buf(),
        })
    }

    /// Both folders under one root (tests, portable installs).
    pub fn under(root: &Path) -> AppPaths {
        AppPaths {
            config_dir: root.join("config"),
            data_dir: root.join("data"),
        }
    }

    /// `settings.json`.
    pub fn settings_file(&self) -> PathBuf {
        self.config_dir.join("settings.json")
    }

    /// The user's Python tools and callbacks (`python/` under the config folder).
    pub fn python_dir(&self) -> PathBuf {
        self.config_dir.join("python")
    }

    /// The SQLite database.
    pub fn database(&self) -> PathBuf {
        self.data_dir.join("companion.db")
    }

    /// The master key file, used only where no OS keychain is reachable.
    pub fn key_file(&self) -> PathBuf {
        self.data_dir.join("master.key")
    }

    /// Creates both folders, readable by this user only.
    pub fn create(&self) -> std::io::Result<()> {
        for dir in [&self.config_dir, &self.data_dir] {
            std::fs::create_dir_all(dir)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
        }
        Ok(())
    }
}
