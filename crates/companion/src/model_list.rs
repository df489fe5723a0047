//! The model picker of settings: the models a preset's service offers for the key the user
//! stored, read from the service's own list endpoint, with the preset's default (or the model
//! already chosen) preselected.

use crate::context::Context;
use crate::error::CompanionError;
use crate::view::settings::ModelListView;

/// The models `preset` offers. `base_url` overrides the preset's (it is required for
/// `custom`). The stored key is used; none is needed for services that take none.
pub(crate) async fn list_models(
    ctx: &Context,
    preset: &str,
    base_url: Option<String>,
) -> Result<ModelListView, CompanionError> {
    let found = llm::preset(preset)
        .ok_or_else(|| CompanionError::Other(format!("unknown model preset {preset:?}")))?;
    let key = match found.key_name {
        Some(name) => ctx.secret(name)?,
        None => None,
    };
    if key.is_none() && found.key_required {
        return Err(CompanionError::Other(format!(
            "Enter and save the {} API key first. 请先填写并保存 {} 的 API 密钥。",
            found.name_en, found.name_zh
        )));
    }
    let settings = ctx.settings();
    let mut config = found.config(key.map(llm::ApiKey::new));
    if let Some(url) = base_url
        .filter(|u| !u.trim().is_empty())
        .or_else(|| (settings.model.preset == preset).then(|| settings.model.base_url.clone())?)
    {
        config.base_url = url;
    }
    let mut models = llm::list_models(&config)
        .await
        .map_err(|e| CompanionError::Other(e.to_string()))?;
    let selected = settings
        .model
        .model
        .clone()
        .filter(|_| settings.model.preset == preset)
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| found.default_model.to_owned());
    if !selected.is_empty() && !models.contains(&selected) {
        models.push(selected.clone());
        models.sort();
    }
    Ok(ModelListView {
        preset: preset.to_owned(),
        models,
        selected,
        default_model: found.default_model.to_owned(),
    })
}
