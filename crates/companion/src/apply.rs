//! Settings and secrets take effect at once: each change that the Feishu client, the model,
//! the approval expiry or the time zone depend on rebuilds them (see [`crate::runtime`]) before
//! the answer comes back, so the next message already uses them. Entering the App ID, App
//! Secret and a model key leaves demo mode; clearing the App ID goes back to it.

use crate::context::Context;
use crate::error::CompanionError;
use crate::settings::Settings;

/// Saves the settings and applies them at once.
pub(crate) async fn apply_settings(
    ctx: &Context,
    settings: Settings,
) -> Result<(), CompanionError> {
    if ctx.update_settings(settings)? {
        ctx.rebuild().await?;
    }
    Ok(())
}

/// Stores the Feishu App Secret in the vault and applies it at once.
pub(crate) async fn apply_app_secret(ctx: &Context, secret: &str) -> Result<(), CompanionError> {
    ctx.set_app_secret(secret)?;
    ctx.rebuild().await
}

/// Stores a model preset's API key in the vault and applies it at once.
pub(crate) async fn apply_model_key(
    ctx: &Context,
    preset: &str,
    key: &str,
) -> Result<(), CompanionError> {
    ctx.set_model_key(preset, key)?;
    ctx.rebuild().await
}
