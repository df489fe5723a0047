//! The facade's "Connect my Feishu" (the welcome screen and Settings → Feishu app): delegations
//! to [`crate::connect`].

use super::Companion;
use crate::connect::DeviceTicket;
use crate::connect::view;
use crate::error::CompanionError;

impl Companion {
    /// "Connect my Feishu": begins creating the user's own Feishu app and answers the code to
    /// show; the rest arrives as [`crate::UiEvent::Connect`]. On success the app switches to it
    /// at once and, when a model is configured, starts the first sign-in (device flow, the
    /// scopes that need no administrator).
    pub async fn connect_feishu(&self) -> Result<DeviceTicket, CompanionError> {
        self.connect.connect_feishu().await
    }

    /// The user cancelled connecting: polling stops, nothing is saved.
    pub fn cancel_connect(&self) {
        self.connect.cancel_connect()
    }

    /// The page of the connect waiting now, for the sign-in window.
    pub fn connect_page(&self) -> Option<String> {
        self.connect.connect_page()
    }

    /// "Connect my Feishu", for the UI.
    pub async fn connect_feishu_view(&self) -> Result<view::ConnectView, CompanionError> {
        self.connect.connect_feishu_view().await
    }
}
