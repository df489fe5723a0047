//! Where "Connect my Feishu" stands, as the UI event carries it.

use feishu::{Brand, DeviceFlowError};

use crate::text::Text;

/// A code the user confirms on Feishu's page: what the QR code and the countdown show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTicket {
    /// The verification page (with the user code): the QR code's content.
    pub url: String,
    /// The code the page shows.
    pub user_code: String,
    /// When the code runs out (Unix ms).
    pub expires_at: i64,
    /// Seconds between polls.
    pub interval_secs: u64,
}

impl DeviceTicket {
    pub(crate) fn new(code: &feishu::DeviceCode) -> DeviceTicket {
        let now = jiff::Timestamp::now().as_millisecond();
        DeviceTicket {
            url: code.verification_uri_complete.clone(),
            user_code: code.user_code.clone(),
            expires_at: now + i64::try_from(code.expires_in.as_millis()).unwrap_or(i64::MAX / 2),
            interval_secs: code.interval.as_secs(),
        }
    }
}

/// Why a connect ended without an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectFailure {
    /// Nobody confirmed before the code ran out.
    Expired,
    /// The user pressed Cancel on Feishu's page.
    Denied,
    /// The user cancelled in the app.
    Cancelled,
    /// Feishu could not be reached.
    Offline,
    /// Anything else; the words say what.
    Other(String),
}

/// Where a connect stands (the `connect` UI event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectStatus {
    /// Waiting for the user to confirm on Feishu's page.
    Waiting(DeviceTicket),
    /// The app exists and the settings name it.
    Connected {
        /// The new App ID.
        app_id: String,
        /// The tenant's brand.
        brand: Brand,
        /// No model is configured yet, so the app stays in demo mode until one is chosen.
        needs_model: bool,
    },
    /// It ended without an app.
    Failed(ConnectFailure),
}

impl ConnectFailure {
    pub(crate) fn from_flow(error: &DeviceFlowError) -> ConnectFailure {
        match error {
            DeviceFlowError::Denied => ConnectFailure::Denied,
            DeviceFlowError::Expired => ConnectFailure::Expired,
            DeviceFlowError::Offline { .. } => ConnectFailure::Offline,
            other => ConnectFailure::Other(other.to_string()),
        }
    }

    /// What happened and what to do, in both languages.
    pub fn words(&self) -> Text {
        match self {
            ConnectFailure::Expired => Text::new(
                "二维码已过期，还没有人确认。请重试，获取新的二维码。",
                "The QR code expired before anyone confirmed. Try again for a new one.",
            ),
            ConnectFailure::Denied => Text::new(
                "已在飞书中取消创建应用。如需连接，请重试并点“创建并授权”。",
                "Creating the app was cancelled in Feishu. To connect, try again and confirm.",
            ),
            ConnectFailure::Cancelled => Text::new(
                "已取消连接飞书，没有保存任何设置。",
                "Connecting to Feishu was cancelled; nothing was saved.",
            ),
            ConnectFailure::Offline => Text::new(
                "连不上飞书。请检查网络后重试。",
                "Cannot reach Feishu. Check the network connection, then try again.",
            ),
            ConnectFailure::Other(message) => Text::new(
                format!("连接飞书失败：{message}。请重试。"),
                format!("Connecting to Feishu failed: {message}. Try again."),
            ),
        }
    }
}
