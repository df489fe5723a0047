//! What the UI shows about updates of the app itself. Finding, verifying and installing an update
//! is the desktop shell's (Tauri's updater plugin, signed manifests); whether to look at all is
//! the user's setting ([`crate::Settings::check_for_updates`]), and these are the views the shell
//! sends the window, so the UI's types are generated with the rest.

use serde::Serialize;
use ts_rs::TS;

/// A newer version the update server offers, verified only once downloaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct UpdateView {
    /// The version offered (`0.2.0`).
    pub version: String,
    /// The version running now.
    pub current_version: String,
    /// The release notes, as the release wrote them (plain text or Markdown).
    pub notes: String,
    /// When it was published (RFC 3339), when the server says.
    pub date: Option<String>,
}

/// Where updating stands, for the status bar and the update dialog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum UpdateStatusView {
    /// Update checks are turned off in Settings, or this build has no update server.
    Off,
    /// Looking.
    Checking,
    /// Nothing newer.
    UpToDate,
    /// A newer version waits for the user's go-ahead.
    Available {
        /// What it is.
        update: UpdateView,
    },
    /// Downloading (then verifying and installing) the update.
    Installing {
        /// The version being installed.
        version: String,
        /// Bytes received so far.
        received: u64,
        /// The download's size, when the server says.
        total: Option<u64>,
    },
    /// Installed; it runs from the next start (the app offers to restart).
    Installed {
        /// The version installed.
        version: String,
    },
    /// Checking or installing failed; the app keeps running the version it has.
    Failed {
        /// What went wrong, for the user (a download that does not match its signature says so).
        message: String,
    },
}
