//! The settings page and signing in: the account, the model presets and their models, the
//! settings with what goes with them, and where a sign-in stands.

use serde::Serialize;
use ts_rs::TS;

use super::call::ScopeView;
use crate::connect::view::DeviceCodeView;
use crate::events::SignInStatus;
use crate::labels;
use crate::settings::Settings;
use crate::sign_in_help::problem::SignInProblemView;
use crate::text::Text;

/// The signed-in Feishu account, without its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AccountView {
    /// The user's name.
    pub name: String,
    /// The user's open_id.
    pub open_id: String,
    /// Every permission granted.
    pub scopes: Vec<ScopeView>,
    /// When the access token expires (it is refreshed ahead of time).
    #[ts(type = "number")]
    pub expires_at: i64,
    /// When the user must sign in again at the latest.
    #[ts(type = "number | null")]
    pub refresh_expires_at: Option<i64>,
}

impl From<feishu::Account> for AccountView {
    fn from(a: feishu::Account) -> AccountView {
        let (name, open_id) = match a.user {
            Some(u) => (u.name, u.open_id),
            None => (String::new(), String::new()),
        };
        AccountView {
            name,
            open_id,
            scopes: a.scopes.iter().map(|s| labels::scope(s)).collect(),
            expires_at: a.expires_at,
            refresh_expires_at: a.refresh_expires_at,
        }
    }
}

/// A model preset the user can pick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PresetView {
    /// The id stored in settings.
    pub id: String,
    /// Its name.
    pub name: Text,
    /// `openai_compatible`, `anthropic`, `gemini`.
    pub kind: String,
    /// The API root; empty when the user enters it.
    pub base_url: String,
    /// The model used unless the user names another.
    pub default_model: String,
    /// Whether it takes an API key.
    pub takes_key: bool,
    /// Whether its API key is stored.
    pub key_set: bool,
}

/// The models a preset's service offers, for the model picker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct ModelListView {
    /// The preset asked.
    pub preset: String,
    /// The model ids the service listed (with the selected one, even if unlisted), sorted.
    pub models: Vec<String>,
    /// The one to preselect: the model saved for this preset, else the preset's default.
    pub selected: String,
    /// The preset's default model.
    pub default_model: String,
}

/// The settings page: the settings and what goes with them.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct SettingsView {
    /// What the user set.
    pub settings: Settings,
    /// The redirect URL to register with the Feishu app for the chosen port, exactly.
    pub redirect_url: String,
    /// The model presets.
    pub presets: Vec<PresetView>,
    /// Whether the App Secret is stored.
    pub app_secret_set: bool,
    /// The system's time zone, shown when the setting is empty.
    pub system_time_zone: String,
    /// The user scopes to enable for a self-built Feishu app, in plain words.
    pub app_scopes: Vec<ScopeView>,
}

/// The answer to saving settings: nothing beyond success, as settings apply at once. An object
/// still, so that the answer can grow a field without the command changing shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct SavedSettings {}

/// Where a sign-in stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SignInView {
    /// Waiting for the user on Feishu's page.
    Waiting {
        /// The authorize page (a device sign-in's verification page).
        url: String,
        /// A device sign-in's code and QR code: shown on the card instead of a window.
        device: Option<DeviceCodeView>,
    },
    /// A device sign-in's code ran out before anyone confirmed.
    Expired,
    /// Signed in; held calls run again.
    SignedIn {
        /// Who.
        name: String,
        /// What they granted.
        scopes: Vec<ScopeView>,
        /// Who was signed in before, when it was someone else (their data is now kept apart).
        switched_from: Option<String>,
    },
    /// The user declined on Feishu's page.
    Declined,
    /// It failed.
    Failed {
        /// Why, and what to do.
        message: String,
    },
    /// Feishu refused it, or it timed out: which setting to change, with the exact value.
    Refused {
        /// The problem in words.
        problem: SignInProblemView,
    },
    /// It continues in the system browser (the company's own sign-in page).
    InBrowser,
}

impl From<&SignInStatus> for SignInView {
    fn from(s: &SignInStatus) -> SignInView {
        match s {
            SignInStatus::Waiting { url, device } => SignInView::Waiting {
                url: url.clone(),
                device: device.as_ref().map(Into::into),
            },
            SignInStatus::Expired => SignInView::Expired,
            SignInStatus::SignedIn {
                name,
                scopes,
                switched_from,
            } => SignInView::SignedIn {
                name: name.clone(),
                scopes: scopes.iter().map(|s| labels::scope(s)).collect(),
                switched_from: switched_from.clone(),
            },
            SignInStatus::Declined => SignInView::Declined,
            SignInStatus::Failed { message } => SignInView::Failed {
                message: message.clone(),
            },
            SignInStatus::Refused { problem } => SignInView::Refused {
                problem: problem.clone(),
            },
            SignInStatus::InBrowser => SignInView::InBrowser,
        }
    }
}

/// A sign-in started: the page to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct SignInTicketView {
    /// The authorize page (embedded window or system browser).
    pub url: String,
    /// Where Feishu sends the browser back (empty for a device sign-in).
    pub redirect_uri: String,
    /// A device sign-in's code and QR code.
    pub device: Option<DeviceCodeView>,
}
