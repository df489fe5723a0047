//! What the status bar and the Settings page read: the running app (version, demo or not, the
//! model, where the data lives, who is signed in) and the settings with what the page offers
//! (the model presets, the app's scopes, the system's time zone). Secrets are named, never shown.

use crate::context::Context;
use crate::error::CompanionError;
use crate::text::{Text, snake};
use crate::view::settings::{PresetView, SettingsView};
use crate::view::timeline::{AppInfo, PersonView};

/// About the running app, for the status bar and the demo banner.
pub(crate) fn app_info(ctx: &Context) -> AppInfo {
    let settings = ctx.settings();
    let (key_source, key_notice) = ctx.key_source();
    let model = if ctx.is_demo() {
        "Demo".to_owned()
    } else {
        match llm::preset(&settings.model.preset) {
            Some(p) => format!(
                "{} · {}",
                p.name_en,
                settings.model.model.as_deref().unwrap_or(p.default_model)
            ),
            None => settings.model.preset.clone(),
        }
    };
    AppInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        demo: ctx.is_demo(),
        model,
        brand: snake(&settings.feishu.brand),
        key_source,
        // Demo mode keeps nothing worth protecting (the emulator's tokens die with it), so a
        // key file there is no reason to warn.
        key_notice: key_notice.filter(|_| !ctx.is_demo()),
        data_dir: ctx.paths().data_dir.display().to_string(),
        redirect_url: settings.feishu.redirect_url(),
        person: crate::person::person(ctx)
            .ok()
            .flatten()
            .map(|p| PersonView {
                name: p.name,
                open_id: p.open_id,
            }),
    }
}

/// The settings page.
pub(crate) fn settings_view(ctx: &Context) -> Result<SettingsView, CompanionError> {
    let settings = ctx.settings();
    let secrets = ctx.secrets_present()?;
    let presets = llm::PRESETS
        .iter()
        .map(|p| PresetView {
            id: p.id.to_owned(),
            name: Text::new(p.name_zh, p.name_en),
            kind: snake(&p.kind),
            base_url: p.base_url.to_owned(),
            default_model: p.default_model.to_owned(),
            takes_key: p.key_name.is_some(),
            key_set: p.key_name.is_some_and(|k| secrets.iter().any(|s| s == k)),
        })
        .collect();
    Ok(SettingsView {
        redirect_url: settings.feishu.redirect_url(),
        app_secret_set: secrets.iter().any(|s| s == crate::options::APP_SECRET),
        settings,
        presets,
        app_scopes: crate::labels::APP_SCOPES
            .iter()
            .map(|s| crate::labels::scope(s))
            .collect(),
        system_time_zone: jiff::tz::TimeZone::system()
            .iana_name()
            .unwrap_or("UTC")
            .to_owned(),
    })
}
