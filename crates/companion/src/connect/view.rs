//! What the UI is sent about connecting and device sign-ins.

use serde::Serialize;
use ts_rs::TS;

use super::qr::QrView;
use super::status::{ConnectFailure, ConnectStatus, DeviceTicket};
use crate::text::Text;

/// A code to confirm on Feishu's page, with its QR code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct DeviceCodeView {
    /// The code the page shows.
    pub user_code: String,
    /// The QR code of the page.
    pub qr: QrView,
    /// The verification page.
    pub url: String,
    /// When the code runs out (Unix ms).
    #[ts(type = "number")]
    pub expires_at: i64,
    /// Seconds between polls.
    #[ts(type = "number")]
    pub interval_secs: u64,
}

impl From<&DeviceTicket> for DeviceCodeView {
    fn from(t: &DeviceTicket) -> DeviceCodeView {
        DeviceCodeView {
            user_code: t.user_code.clone(),
            // A verification URL always fits a QR code; an empty code would only show nothing.
            qr: QrView::of(&t.url).unwrap_or(QrView {
                size: 0,
                path: String::new(),
            }),
            url: t.url.clone(),
            expires_at: t.expires_at,
            interval_secs: t.interval_secs,
        }
    }
}

/// Why a connect failed, for the UI to pick its title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ConnectReason {
    /// The code ran out.
    Expired,
    /// Cancelled on Feishu's page.
    Denied,
    /// Cancelled in the app.
    Cancelled,
    /// Feishu could not be reached.
    Offline,
    /// Anything else.
    Other,
}

/// Where "Connect my Feishu" stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ConnectView {
    /// Waiting for the user to confirm on Feishu's page.
    Waiting {
        /// The confirmation page.
        url: String,
        /// The code it shows.
        user_code: String,
        /// Its QR code.
        qr: QrView,
        /// When it runs out (Unix ms).
        #[ts(type = "number")]
        expires_at: i64,
    },
    /// The app exists and the settings name it.
    Connected {
        /// The new App ID.
        app_id: String,
        /// The tenant's brand.
        #[ts(type = "\"feishu\" | \"lark\"")]
        brand: feishu::Brand,
        /// No model yet: the app stays in demo mode until one is chosen.
        needs_model: bool,
    },
    /// It ended without an app.
    Failed {
        /// Which way.
        reason: ConnectReason,
        /// What happened and what to do.
        message: Text,
    },
}

impl From<&ConnectStatus> for ConnectView {
    fn from(s: &ConnectStatus) -> ConnectView {
        match s {
            ConnectStatus::Waiting(ticket) => {
                let code = DeviceCodeView::from(ticket);
                ConnectView::Waiting {
                    url: code.url,
                    user_code: code.user_code,
                    qr: code.qr,
                    expires_at: code.expires_at,
                }
            }
            ConnectStatus::Connected {
                app_id,
                brand,
                needs_model,
            } => ConnectView::Connected {
                app_id: app_id.clone(),
                brand: *brand,
                needs_model: *needs_model,
            },
            ConnectStatus::Failed(failure) => ConnectView::Failed {
                reason: match failure {
                    ConnectFailure::Expired => ConnectReason::Expired,
                    ConnectFailure::Denied => ConnectReason::Denied,
                    ConnectFailure::Cancelled => ConnectReason::Cancelled,
                    ConnectFailure::Offline => ConnectReason::Offline,
                    ConnectFailure::Other(_) => ConnectReason::Other,
                },
                message: failure.words(),
            },
        }
    }
}
