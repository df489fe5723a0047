//! The user's settings: a JSON file written atomically, readable by the user only. Secrets (the
//! App Secret, model API keys) are not here: they live in the encrypted vault, and the settings
//! only say whether one is set.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Interface language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// Follow the system.
    #[default]
    System,
    /// 简体中文.
    Zh,
    /// English.
    En,
}

/// Colour theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    /// Follow the system.
    #[default]
    System,
    /// Light.
    Light,
    /// Dark.
    Dark,
}

/// Which model to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct ModelSettings {
    /// A preset id from `llm::PRESETS` (`openai`, `deepseek`, `ollama`, `custom`…).
    pub preset: String,
    /// Overrides the preset's base URL (required for `custom`).
    pub base_url: Option<String>,
    /// Overrides the preset's default model.
    pub model: Option<String>,
}

impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            preset: "deepseek".to_owned(),
            base_url: None,
            model: None,
        }
    }
}

/// The user's Feishu app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct FeishuSettings {
    /// Feishu or Lark.
    #[ts(type = "\"feishu\" | \"lark\"")]
    pub brand: feishu::Brand,
    /// The App ID (`cli_…`); empty until the user registers an app.
    pub app_id: String,
    /// The loopback port of the redirect URL registered with the app.
    pub redirect_port: u16,
}

impl Default for FeishuSettings {
    fn default() -> Self {
        FeishuSettings {
            brand: feishu::Brand::Feishu,
            app_id: String::new(),
            redirect_port: feishu::listener::DEFAULT_PORT,
        }
    }
}

impl FeishuSettings {
    /// The redirect URL to register in the Feishu developer console, exactly.
    pub fn redirect_url(&self) -> String {
        feishu::listener::redirect_uri(self.redirect_port)
    }
}

/// Everything the user can set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct Settings {
    /// Interface language.
    pub language: Language,
    /// Colour theme.
    pub theme: Theme,
    /// The model.
    pub model: ModelSettings,
    /// The Feishu app.
    pub feishu: FeishuSettings,
    /// Minutes an approval waits before it expires.
    pub approval_expiry_minutes: u32,
    /// The user's time zone (IANA name); empty: the system's.
    pub time_zone: String,
    /// Whether the app looks for a newer version at start (it installs one only when asked).
    pub check_for_updates: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            language: Language::System,
            theme: Theme::System,
            model: ModelSettings::default(),
            feishu: FeishuSettings::default(),
            approval_expiry_minutes: 24 * 60,
            time_zone: String::new(),
            check_for_updates: true,
        }
    }
}

/// Settings that cannot be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file cannot be read or written.
    #[error("cannot {action} the settings file {}: {source}", path.display())]
    Io {
        /// read or write.
        action: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid settings; it is left as it is.
    #[error("the settings file {} is not valid ({message}); fix or delete it, the app will start with defaults", path.display())]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, by field.
        message: String,
    },
    /// A value is out of range.
    #[error("{0}")]
    Rejected(String),
}

impl Settings {
    /// Reads the settings; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Settings, SettingsError> {
        match std::fs::read_to_string(path) {
            Ok(text) => agent::json::from_str(&text).map_err(|e| SettingsError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(source) => Err(SettingsError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Checks the values a user can get wrong.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.feishu.redirect_port < 1024 {
            return Err(SettingsError::Rejected(format!(
                "redirect port {} is reserved; choose one between 1024 and 65535",
                self.feishu.redirect_port
            )));
        }
        if !self.feishu.app_id.is_empty() && !self.feishu.app_id.starts_with("cli_") {
            return Err(SettingsError::Rejected(
                "a Feishu App ID starts with cli_".to_owned(),
            ));
        }
        if self.approval_expiry_minutes == 0 {
            return Err(SettingsError::Rejected(
                "approvals must wait at least one minute".to_owned(),
            ));
        }
        if llm::preset(&self.model.preset).is_none() {
            return Err(SettingsError::Rejected(format!(
                "unknown model preset {:?}",
                self.model.preset
            )));
        }
        if !self.time_zone.is_empty() && jiff::tz::TimeZone::get(&self.time_zone).is_err() {
            return Err(SettingsError::Rejected(format!(
                "unknown time zone {:?}",
                self.time_zone
            )));
        }
        Ok(())
    }

    /// Writes the settings atomically (a temporary file renamed over the old one), so a crash
    /// mid-write never leaves a half-written file; readable by the user only.
    pub fn save(&self, path: &Path) -> Result<(), SettingsError> {
        self.validate()?;
        let io = |source| SettingsError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        };
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| SettingsError::Rejected(e.to_string()))?;
        let temp = path.with_extension("json.tmp");
        {
            use std::io::Write as _;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&temp).map_err(io)?;
            file.write_all(text.as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        std::fs::rename(&temp, path).map_err(io)
    }

    /// The time zone to show times in.
    pub fn tz(&self) -> jiff::tz::TimeZone {
        if self.time_zone.is_empty() {
            jiff::tz::TimeZone::system()
        } else {
            jiff::tz::TimeZone::get(&self.time_zone)
                .unwrap_or_else(|_| jiff::tz::TimeZone::system())
        }
    }
}
