//! Settings and secrets take effect at once: each change that the Feishu client, the model,
//! the approval expiry or the time zone depend on rebuilds them (see [`crate::runtime`]) before
//! the answer comes back, so the next message already uses them. Entering the App ID, App
//! Secret and a model key leaves demo mode; clearing the App ID goes back to it.

use crate::app::Companion;
use crate::error::CompanionError;
use crate::settings::Settings;

impl Companion {
    /// Saves the settings and applies them at once.
    pub async fn apply_settings(&self, settings: Settings) -> Result<(), CompanionError> {
        if self.update_settings(settings)? {
            self.rebuild().await?;
        }
        Ok(())
    }

    /// Stores the Feishu App Secret in the vault and applies it at once.
    pub async fn apply_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        self.set_app_secret(secret)?;
        self.rebuild().await
    }

    /// Stores a model preset's API key in the vault and applies it at once.
    pub async fn apply_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        self.set_model_key(preset, key)?;
        self.rebuild().await
    }
}
