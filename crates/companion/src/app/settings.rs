//! The facade of the settings pages: settings, secrets, the model list, checks, data.

use super::Companion;
use crate::error::CompanionError;
use crate::view::settings::ModelListView;

impl Companion {
    /// The models `preset` offers. `base_url` overrides the preset's (it is required for
    /// `custom`). The stored key is used; none is needed for services that take none.
    pub async fn list_models(
        &self,
        preset: &str,
        base_url: Option<String>,
    ) -> Result<ModelListView, CompanionError> {
        crate::model_list::list_models(&self.ctx, preset, base_url).await
    }
}
