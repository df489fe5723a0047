//! When approval cards go to Feishu, as the settings file keeps it; [`crate::remote_approval`]
//! acts on it.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// When cards go to Feishu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum RemoteWhen {
    /// For every call held for approval.
    Always,
    /// Only once the app's window has been unfocused for `away_minutes`.
    #[default]
    Away,
}

/// Settings → Approve from Feishu.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(default)]
pub struct RemoteApprovalSettings {
    /// Off by default.
    pub enabled: bool,
    /// Always, or when away.
    pub when: RemoteWhen,
    /// Minutes the window must have been unfocused (in "away" mode).
    pub away_minutes: u32,
}

impl Default for RemoteApprovalSettings {
    fn default() -> Self {
        RemoteApprovalSettings {
            enabled: false,
            when: RemoteWhen::Away,
            away_minutes: 10,
        }
    }
}

/// The most minutes "away" may be set to: a day.
pub const MAX_AWAY_MINUTES: u32 = 24 * 60;
