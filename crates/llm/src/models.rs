//! The models a service offers, from its own list endpoint, for the model picker in settings:
//! OpenAI-compatible `GET {base}/models` (`data[].id`), Anthropic `GET {base}/models`
//! (`data[].id`, paged with `after_id`), Gemini `GET {base}/models` (`models[].name`, paged with
//! `pageToken`; only models that can `generateContent`). Errors are the providers' usual
//! [`ModelError`]s, so a wrong key reads the same here as in a conversation.

use std::collections::BTreeSet;

use agent::ModelError;
use serde::Deserialize;

use crate::errors::Context;
use crate::http::{self, ConfigError};
use crate::provider::{ProviderConfig, ProviderKind};

/// The most pages read: a service that keeps handing out page tokens is not followed forever.
const MAX_PAGES: usize = 20;

#[derive(Deserialize)]
struct DataList {
    #[serde(default)]
    data: Vec<IdWire>,
    #[serde(default)]
    has_more: bool,
    #[serde(default)]
    last_id: Option<String>,
}

#[derive(Deserialize)]
struct IdWire {
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiList {
    #[serde(default)]
    models: Vec<GeminiModel>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiModel {
    name: String,
    #[serde(default)]
    supported_generation_methods: Vec<String>,
}

/// Why the list could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ListModelsError {
    /// The settings cannot make a request (no URL, …).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The service refused or could not be reached.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The model ids the service lists for this key, sorted, without duplicates.
pub async fn list_models(config: &ProviderConfig) -> Result<Vec<String>, ListModelsError> {
    let base = http::base_url(&config.base_url)?;
    let client = http::client(&config.http)?;
    let key = config
        .api_key
        .clone()
        .filter(|k| !k.expose().trim().is_empty());
    let ctx = Context {
        provider: config.label.clone(),
        model: config.model.clone(),
        key: key.clone(),
    };
    let endpoint = reqwest::Url::parse(&format!("{base}/models")).map_err(|_| {
        ConfigError::InvalidBaseUrl {
            url: config.base_url.clone(),
        }
    })?;
    let mut ids = BTreeSet::new();
    let mut page: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut url = endpoint.clone();
        match config.kind {
            ProviderKind::OpenAiCompatible => {}
            ProviderKind::Anthropic => {
                let mut query = url.query_pairs_mut();
                query.append_pair("limit", "1000");
                if let Some(after) = &page {
                    query.append_pair("after_id", after);
                }
            }
            ProviderKind::Gemini => {
                let mut query = url.query_pairs_mut();
                query.append_pair("pageSize", "1000");
                if let Some(token) = &page {
                    query.append_pair("pageToken", token);
                }
            }
        }
        let request = client.get(url);
        let request = match config.kind {
            ProviderKind::OpenAiCompatible => match &key {
                Some(key) => request.bearer_auth(key.expose()),
                None => request,
            },
            ProviderKind::Anthropic => with_sensitive(
                request.header("anthropic-version", crate::anthropic::ANTHROPIC_VERSION),
                "x-api-key",
                key.as_ref(),
            ),
            ProviderKind::Gemini => with_sensitive(request, "x-goog-api-key", key.as_ref()),
        };
        let body = fetch(request, &ctx, config).await?;
        page = match config.kind {
            ProviderKind::Gemini => {
                let list: GeminiList = serde_json::from_str(&body)
                    .map_err(|e| ctx.malformed(format!("the model list is not JSON ({e})")))?;
                for model in list.models {
                    let generates = model.supported_generation_methods.is_empty()
                        || model
                            .supported_generation_methods
                            .iter()
                            .any(|m| m == "generateContent");
                    if generates {
                        let id = model.name.strip_prefix("models/").unwrap_or(&model.name);
                        ids.insert(id.to_owned());
                    }
                }
                list.next_page_token.filter(|t| !t.is_empty())
            }
            _ => {
                let list: DataList = serde_json::from_str(&body)
                    .map_err(|e| ctx.malformed(format!("the model list is not JSON ({e})")))?;
                ids.extend(list.data.into_iter().map(|m| m.id));
                match config.kind {
                    ProviderKind::Anthropic if list.has_more => list.last_id,
                    _ => None,
                }
            }
        };
        if page.is_none() {
            break;
        }
    }
    Ok(ids.into_iter().collect())
}

fn with_sensitive(
    request: reqwest::RequestBuilder,
    name: &'static str,
    key: Option<&crate::ApiKey>,
) -> reqwest::RequestBuilder {
    match key.and_then(|k| reqwest::header::HeaderValue::from_str(k.expose()).ok()) {
        Some(mut value) => {
            value.set_sensitive(true);
            request.header(name, value)
        }
        None => request,
    }
}

async fn fetch(
    request: reqwest::RequestBuilder,
    ctx: &Context,
    config: &ProviderConfig,
) -> Result<String, ModelError> {
    let response = request.send().await.map_err(|e| {
        ModelError::new(
            "network",
            format!(
                "{} could not be reached: {}. Check the network and the base URL.",
                config.label,
                http::source_chain(&e)
            ),
        )
    })?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|_| ctx.incomplete("the model list was cut off"))?;
    if !status.is_success() {
        return Err(ctx.status_error(status.as_u16(), &text, None));
    }
    Ok(text)
}
