//! The facade of the settings pages: settings, secrets, the model list, checks, data.

use super::Companion;
use crate::error::CompanionError;
use crate::settings::Settings;
use crate::view::settings::{ModelListView, SavedSettings, SettingsView};

impl Companion {
    /// The current settings.
    pub fn settings(&self) -> Settings {
        self.ctx.settings()
    }

    /// The settings page: the settings, which secrets are set, the presets and scopes offered.
    pub fn settings_view(&self) -> Result<SettingsView, CompanionError> {
        crate::settings_page::settings_view(&self.ctx)
    }

    /// Saves settings from the settings page and applies them at once.
    pub async fn save_settings(
        &self,
        mut settings: Settings,
    ) -> Result<SavedSettings, CompanionError> {
        // The assistant's part belongs to its own page (and the editor's saves): a general save
        // made from an older copy must not undo what was set there meanwhile.
        settings.assistant = self.settings().assistant;
        self.apply_settings(settings).await?;
        Ok(SavedSettings {})
    }

    /// Saves new settings without applying them; the answer says whether what the settings
    /// build must be rebuilt ([`Companion::apply_settings`] does both).
    pub fn update_settings(&self, settings: Settings) -> Result<bool, CompanionError> {
        self.ctx.update_settings(settings)
    }

    /// Stores the Feishu App Secret in the vault (never in the settings file), not applied yet.
    pub fn set_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        self.ctx.set_app_secret(secret)
    }

    /// Stores a model preset's API key in the vault, not applied yet.
    pub fn set_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        self.ctx.set_model_key(preset, key)
    }

    /// Which secrets are set and readable, without their values (one that cannot be read is
    /// asked for again).
    pub fn secrets_present(&self) -> Result<Vec<String>, CompanionError> {
        self.ctx.secrets_present()
    }

    /// How the master key is kept, and a warning if it fell back to a key file.
    pub fn key_source(&self) -> (String, Option<String>) {
        self.ctx.key_source()
    }

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

    /// The Settings page's "Data" section.
    pub async fn data_view(&self) -> Result<crate::data::DataView, CompanionError> {
        crate::data::data_view(&self.ctx).await
    }

    /// "Sign out and forget all secrets": deletes the sign-in, the App Secret and every model
    /// key, and replaces a lost or damaged master key; conversations, approvals, rules and the
    /// audit trail are kept.
    pub async fn forget_secrets(&self) -> Result<crate::data::ForgetSecretsResult, CompanionError> {
        crate::data::forget_secrets(&self.ctx).await
    }

    /// "Reset the app": asks the next start to delete everything [`reset_items`] lists. The
    /// caller restarts the app.
    pub fn reset_app(&self) -> Result<Vec<crate::data::ResetItem>, CompanionError> {
        crate::data::reset_app(&self.ctx)
    }
}
