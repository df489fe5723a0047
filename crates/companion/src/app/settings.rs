//! The facade of the settings pages: settings, secrets, the model list, checks, data.

use super::Companion;
use crate::error::CompanionError;
use crate::settings::Settings;
use crate::view::ModelListView;

impl Companion {
    /// Checks the App ID and Secret, the redirect port and the model as the settings hold them
    /// (not the demo's stand-ins), and says how each went; with approving from Feishu on, what
    /// it needs of the app too.
    pub async fn check_connection(&self) -> crate::check::CheckView {
        let mut view = crate::check::check_connection(&self.ctx).await;
        if self.settings().remote_approval.enabled {
            view.items.extend(self.remote.check_remote_approval().await);
        }
        view
    }

    /// The models `preset` offers. `base_url` overrides the preset's (it is required for
    /// `custom`). The stored key is used; none is needed for services that take none.
    pub async fn list_models(
        &self,
        preset: &str,
        base_url: Option<String>,
    ) -> Result<ModelListView, CompanionError> {
        crate::model_list::list_models(&self.ctx, preset, base_url).await
    }
    /// Saves the settings and applies them at once.
    pub async fn apply_settings(&self, settings: Settings) -> Result<(), CompanionError> {
        crate::apply::apply_settings(&self.ctx, settings).await
    }

    /// Stores the Feishu App Secret in the vault and applies it at once.
    pub async fn apply_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        crate::apply::apply_app_secret(&self.ctx, secret).await
    }

    /// Stores a model preset's API key in the vault and applies it at once.
    pub async fn apply_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        crate::apply::apply_model_key(&self.ctx, preset, key).await
    }
}
