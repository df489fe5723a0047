//! The user's settings: a JSON file written atomically, readable by the user only. Secrets (the
//! App Secret, model API keys) are not here: they live in the encrypted vault, and the settings
//! only say whether one is set.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub mod assistant;
mod language;
pub mod remote;

pub use language::{Lang, Language, system_locale};

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

/// How the user signs in to Feishu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum SignInFlow {
    /// The device flow (a QR code) for an app the companion created, the browser redirect for
    /// an app made in the developer console (which has a redirect URL registered).
    #[default]
    Auto,
    /// Always the device flow: confirm on Feishu's page, by QR code or in the sign-in window.
    Device,
    /// Always the browser redirect to the loopback listener (needs the redirect URL registered).
    Browser,
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
    /// How sign-ins go (Settings can override the automatic choice).
    pub sign_in_flow: SignInFlow,
    /// Whether the companion created the app ("Connect my Feishu"): it then has no redirect URL,
    /// so the automatic choice is the device flow.
    pub created_by_app: bool,
}

impl Default for FeishuSettings {
    fn default() -> Self {
        FeishuSettings {
            brand: feishu::Brand::Feishu,
            app_id: String::new(),
            redirect_port: feishu::listener::DEFAULT_PORT,
            sign_in_flow: SignInFlow::Auto,
            created_by_app: false,
        }
    }
}

impl FeishuSettings {
    /// Whether a sign-in uses the device flow rather than the redirect to the listener.
    pub fn uses_device_flow(&self) -> bool {
        match self.sign_in_flow {
            SignInFlow::Auto => self.created_by_app,
            SignInFlow::Device => true,
            SignInFlow::Browser => false,
        }
    }

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
    /// The assistant as the user shaped it: instruction, built-in tools, Python files.
    pub assistant: assistant::AssistantSettings,
    /// Approving from Feishu: cards from the app's bot, decided over the long connection.
    pub remote_approval: remote::RemoteApprovalSettings,
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
            assistant: assistant::AssistantSettings::default(),
            remote_approval: remote::RemoteApprovalSettings::default(),
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
    #[error("the settings file {} is not valid: {message}. The file was left as it is: fix it, or delete it and the app will start with defaults", path.display())]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, by field, with the accepted values when known.
        message: String,
    },
    /// A value is out of range (when saving from the app).
    #[error("{0}")]
    Rejected(FieldError),
}

/// One setting with a value the app cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} is {found}, but {accepted}")]
pub struct FieldError {
    /// The field's path in the file (`feishu.redirect_port`).
    pub field: &'static str,
    /// The value found, quoted.
    pub found: String,
    /// What it may be.
    pub accepted: String,
}

/// The lowest redirect port: below 1024 a port is reserved for system services.
pub const MIN_REDIRECT_PORT: u16 = 1024;
/// The longest an approval may wait: a year.
pub const MAX_APPROVAL_EXPIRY_MINUTES: u32 = 366 * 24 * 60;

/// What a field accepts, in words, for the error message.
fn accepted(field: &str) -> Option<String> {
    Some(match field {
        "language" => "it must be one of \"system\", \"zh\", \"en\"".to_owned(),
        "theme" => "it must be one of \"system\", \"light\", \"dark\"".to_owned(),
        "feishu.brand" => "it must be \"feishu\" or \"lark\"".to_owned(),
        "feishu.redirect_port" => {
            format!("it must be a port from {MIN_REDIRECT_PORT} to 65535")
        }
        "feishu.app_id" => {
            "it must be empty or a Feishu App ID: cli_ followed by letters, digits and _".to_owned()
        }
        "model.preset" => format!(
            "it must be one of {}",
            llm::PRESETS
                .iter()
                .map(|p| format!("\"{}\"", p.id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "model.base_url" | "model.model" => "it must be text, or null".to_owned(),
        "approval_expiry_minutes" => {
            format!("it must be a whole number of minutes from 1 to {MAX_APPROVAL_EXPIRY_MINUTES}")
        }
        "remote_approval.away_minutes" => format!(
            "it must be a whole number of minutes from 1 to {}",
            remote::MAX_AWAY_MINUTES
        ),
        "remote_approval.when" => "it must be \"always\" or \"away\"".to_owned(),
        "time_zone" => {
            "it must be empty (the system's) or a time zone name such as \"Asia/Shanghai\""
                .to_owned()
        }
        _ => return None,
    })
}

fn app_id_ok(app_id: &str) -> bool {
    app_id.is_empty()
        || app_id.strip_prefix("cli_").is_some_and(|rest| {
            (1..=64).contains(&rest.len())
                && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

impl Settings {
    /// Reads and checks the settings; a missing file gives the defaults. A file that cannot be
    /// used is an error naming the file, the field and what it accepts; it is never rewritten.
    pub fn load(path: &Path) -> Result<Settings, SettingsError> {
        match std::fs::read(path) {
            Ok(bytes) => Settings::parse(&bytes).map_err(|message| SettingsError::Invalid {
                path: path.to_path_buf(),
                message,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(source) => Err(SettingsError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Parses and checks the settings file's bytes; the error says which field is wrong and
    /// what it accepts. Total over every input (the settings fuzz target holds it to that).
    pub fn parse(bytes: &[u8]) -> Result<Settings, String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| format!("it is not UTF-8 text (byte {})", e.valid_up_to()))?;
        // serde reads a struct from an array too; a settings file is an object, as are its
        // sections.
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            if !value.is_object() {
                return Err("it must hold one JSON object of settings".to_owned());
            }
            for section in ["model", "feishu", "remote_approval"] {
                if value.get(section).is_some_and(|v| !v.is_object()) {
                    return Err(format!("{section}: it must be an object"));
                }
            }
        }
        let settings: Settings = agent::json::from_str(text).map_err(|e| {
            let field = e.path.as_str();
            match accepted(field) {
                Some(accepted) => format!("{field}: {}; {accepted}", e.message),
                None if field == "." => e.message.clone(),
                None => format!("{field}: {}", e.message),
            }
        })?;
        settings.check().map_err(|e| e.to_string())?;
        Ok(settings)
    }

    /// Checks the values a user can get wrong.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.check().map_err(SettingsError::Rejected)
    }

    fn check(&self) -> Result<(), FieldError> {
        let refuse = |field: &'static str, found: String| FieldError {
            field,
            found,
            accepted: accepted(field).unwrap_or_default(),
        };
        if self.feishu.redirect_port < MIN_REDIRECT_PORT {
            return Err(refuse(
                "feishu.redirect_port",
                self.feishu.redirect_port.to_string(),
            ));
        }
        if !app_id_ok(&self.feishu.app_id) {
            return Err(refuse("feishu.app_id", format!("{:?}", self.feishu.app_id)));
        }
        if !(1..=MAX_APPROVAL_EXPIRY_MINUTES).contains(&self.approval_expiry_minutes) {
            return Err(refuse(
                "approval_expiry_minutes",
                self.approval_expiry_minutes.to_string(),
            ));
        }
        if llm::preset(&self.model.preset).is_none() {
            return Err(refuse("model.preset", format!("{:?}", self.model.preset)));
        }
        if !self.time_zone.is_empty() && jiff::tz::TimeZone::get(&self.time_zone).is_err() {
            return Err(refuse("time_zone", format!("{:?}", self.time_zone)));
        }
        if !(1..=remote::MAX_AWAY_MINUTES).contains(&self.remote_approval.away_minutes) {
            return Err(refuse(
                "remote_approval.away_minutes",
                self.remote_approval.away_minutes.to_string(),
            ));
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
        let text = serde_json::to_string_pretty(self).map_err(|e| SettingsError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        write_private(path, text.as_bytes()).map_err(io)
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

/// Writes `bytes` to `path` whole, readable by the owner only: a temporary file beside it,
/// synced, then renamed over it, so a crash leaves the old file or the new one, never half.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temp = path.with_extension("json.tmp");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temp, path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Each damaged file is refused with the file, the field and the accepted values named, and
    /// is left byte for byte as it was.
    #[test]
    fn a_bad_settings_file_names_the_file_the_field_and_what_it_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let cases: [(&[u8], &str, &str); 12] = [
            (
                br#"{"remote_approval": {"enabled": true, "away_minutes": 0}}"#,
                "remote_approval.away_minutes",
                "from 1 to 1440",
            ),
            (
                br#"{"feishu": {"redirect_port": 80}}"#,
                "feishu.redirect_port",
                "from 1024 to 65535",
            ),
            (
                br#"{"feishu": {"redirect_port": 70000}}"#,
                "feishu.redirect_port",
                "from 1024 to 65535",
            ),
            (
                br#"{"feishu": {"redirect_port": "9768"}}"#,
                "feishu.redirect_port",
                "from 1024 to 65535",
            ),
            (
                br#"{"feishu": {"app_id": "abc"}}"#,
                "feishu.app_id",
                "cli_ followed by letters, digits and _",
            ),
            (
                br#"{"feishu": {"app_id": "cli_../x"}}"#,
                "feishu.app_id",
                "cli_ followed by letters, digits and _",
            ),
            (
                br#"{"feishu": {"brand": "weixin"}}"#,
                "feishu.brand",
                r#""feishu" or "lark""#,
            ),
            (
                br#"{"model": {"preset": "gpt-5"}}"#,
                "model.preset",
                r#""deepseek""#,
            ),
            (
                br#"{"language": "fr"}"#,
                "language",
                r#""system", "zh", "en""#,
            ),
            (
                br#"{"time_zone": "Mars/Olympus"}"#,
                "time_zone",
                "Asia/Shanghai",
            ),
            (
                br#"{"approval_expiry_minutes": 0}"#,
                "approval_expiry_minutes",
                "from 1 to",
            ),
            (
                br#"{"approval_expiry_minutes": "soon"}"#,
                "approval_expiry_minutes",
                "from 1 to",
            ),
        ];
        for (bytes, field, accepted) in cases {
            std::fs::write(&path, bytes).unwrap();
            let message = Settings::load(&path).unwrap_err().to_string();
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains(field), "{field}: {message}");
            assert!(message.contains(accepted), "{field}: {message}");
            assert!(message.contains("left as it is"), "{message}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "the file is untouched"
            );
        }
        for (bytes, says) in [
            (&b"\xff\xfe{}"[..], "not UTF-8"),
            (&b"{\"language\": "[..], "EOF"),
            (&b"[]"[..], "one JSON object"),
            (&br#"{"feishu": [1]}"#[..], "feishu: it must be an object"),
        ] {
            std::fs::write(&path, bytes).unwrap();
            let message = Settings::load(&path).unwrap_err().to_string();
            assert!(message.contains(says), "{message}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
    }

    #[test]
    fn good_files_and_a_missing_file_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        assert_eq!(Settings::load(&path).unwrap(), Settings::default());
        std::fs::write(
            &path,
            br#"{"feishu": {"app_id": "cli_a1b2c3d4e5f6a7b8", "redirect_port": 1024}, "time_zone": "Asia/Shanghai"}"#,
        )
        .unwrap();
        let settings = Settings::load(&path).unwrap();
        assert_eq!(settings.feishu.redirect_port, 1024);
        assert_eq!(settings.feishu.app_id, "cli_a1b2c3d4e5f6a7b8");
        settings.save(&path).unwrap();
        assert_eq!(Settings::load(&path).unwrap(), settings);
    }
}
