//! The facade's approving-from-Feishu part of Settings, and what the window tells it (focus):
//! delegations to [`crate::remote_approval`].

use super::Companion;
use crate::remote_approval::RemoteApprovalView;

impl Companion {
    /// The window gained or lost focus (the shell calls this): "away" counts from the moment
    /// it lost it.
    pub fn window_focus_changed(&self, focused: bool) {
        self.remote.window_focus_changed(focused)
    }

    /// Where approving from Feishu stands.
    pub fn remote_approval_view(&self) -> RemoteApprovalView {
        self.remote.remote_approval_view()
    }

    /// One round: the connection as the settings want it, then every card as the app's calls
    /// are. What fails is left for the next round.
    pub async fn remote_sync(&self) {
        self.remote.remote_sync().await
    }

    /// The message id of a call's card, if one was sent.
    pub fn remote_card_message(&self, call_id: &str) -> Option<String> {
        self.remote.remote_card_message(call_id)
    }

    /// Checks what approving from Feishu needs, for "Check connection": the bot capability,
    /// the scope to send as the bot, and that the long connection opens.
    pub async fn check_remote_approval(&self) -> Vec<crate::check::CheckItemView> {
        self.remote.check_remote_approval().await
    }
}
