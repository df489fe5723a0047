//! The services a user picks from in settings. A preset fills in the protocol, base URL and a
//! default model; the user may change the model (and, for "Custom", the URL). Keys are not here:
//! each preset names the vault entry its key is kept under.

use crate::provider::{ProviderConfig, ProviderKind};
use crate::secret::ApiKey;

/// One service the user can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Stable id, stored in settings.
    pub id: &'static str,
    /// Name shown in Chinese.
    pub name_zh: &'static str,
    /// Name shown in English; also the label in error messages.
    pub name_en: &'static str,
    /// The protocol.
    pub kind: ProviderKind,
    /// The API root; empty for "Custom", where the user enters it.
    pub base_url: &'static str,
    /// The model chosen unless the user picks another; empty when the user must choose.
    pub default_model: &'static str,
    /// The vault entry holding the key; `None` for services that take no key.
    pub key_name: Option<&'static str>,
    /// Whether a request without a key is certain to fail (so settings can ask for it first).
    pub key_required: bool,
    /// OpenAI-compatible: whether the service accepts `stream_options.include_usage`
    /// ([`crate::ModelOptions::include_usage`]).
    pub include_usage: bool,
    /// OpenAI-compatible: whether the service wants thinking models' `reasoning_content` back
    /// on tool-using turns ([`crate::ModelOptions::send_reasoning`]).
    pub send_reasoning: bool,
}

impl Preset {
    /// The provider settings for this preset with its default model, timeouts and options.
    pub fn config(&self, api_key: Option<ApiKey>) -> ProviderConfig {
        let mut config = ProviderConfig::new(
            self.kind,
            self.name_en,
            self.base_url,
            self.default_model,
            api_key,
        );
        config.options.include_usage = self.include_usage;
        config.options.send_reasoning = self.send_reasoning;
        config
    }
}

// Default models as the providers' own pages listed them on 2026-12-01 (looked up, not
// recalled):
// - OpenAI: gpt-4.1-mini shuts down 2027-01-14, replacement `gpt-6-luna`
//   (developers.openai.com/api/docs/deprecations).
// - DeepSeek: `deepseek-chat` / `deepseek-reasoner` were retired 2026-07-24; the model to use is
//   `deepseek-flash`, base URL https://api.deepseek.com (api-docs.deepseek.com/quick_start/pricing).
// - Qwen: `qwen-plus` is the rolling Plus alias on both regions; the international (Singapore)
//   endpoint is dashscope-intl.aliyuncs.com (alibabacloud.com/help/en/model-studio/
//   compatibility-of-openai-with-dashscope). Keys are per region.
// - Doubao: the 1.5/1.6 series is discontinued; `doubao-seed-1-8-251228` (volcengine Ark model list).
// - Moonshot: kimi-k2-0905-preview and the other 2025 ids were discontinued in 2026; `kimi-k2.6`;
//   international host api.moonshot.ai (platform.moonshot.ai docs; `GET /v1/models`).
// - Zhipu: `glm-5.3` (docs.bigmodel.cn API reference). GLM rejects `stream_options`.
// - Anthropic: Claude Sonnet 4.5 retired 2026-11-30; current Sonnet `claude-sonnet-5-5`
//   (platform.claude.com/docs/en/models/sonnet-5-5/overview).
// - Gemini: gemini-2.5-flash was shut down (requests routed elsewhere since 2026-12-01); GA
//   `gemini-3.8-flash` (ai.google.dev/gemini-api/docs/deprecations).

/// Every preset, in the order settings lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        id: "openai",
        name_zh: "OpenAI",
        name_en: "OpenAI",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://api.openai.com/v1",
        default_model: "gpt-6-luna",
        key_name: Some("openai_api_key"),
        key_required: true,
        include_usage: true,
        // OpenAI's Chat Completions has no `reasoning_content` on messages.
        send_reasoning: false,
    },
    Preset {
        id: "deepseek",
        name_zh: "深度求索 DeepSeek",
        name_en: "DeepSeek",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://api.deepseek.com",
        default_model: "deepseek-flash",
        key_name: Some("deepseek_api_key"),
        key_required: true,
        include_usage: true,
        send_reasoning: true,
    },
    Preset {
        id: "qwen",
        name_zh: "通义千问（阿里云百炼·北京）",
        name_en: "Qwen (Alibaba Cloud Model Studio, Beijing)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://dashscope.aliyuncs.com/compatible-mode/v1",
        default_model: "qwen-plus",
        key_name: Some("dashscope_api_key"),
        key_required: true,
        include_usage: true,
        send_reasoning: false,
    },
    Preset {
        id: "qwen_intl",
        name_zh: "通义千问（阿里云百炼·国际站）",
        name_en: "Qwen (Alibaba Cloud Model Studio, international)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        default_model: "qwen-plus",
        key_name: Some("dashscope_intl_api_key"),
        key_required: true,
        include_usage: true,
        send_reasoning: false,
    },
    Preset {
        id: "doubao",
        name_zh: "豆包（火山方舟）",
        name_en: "Doubao (Volcengine Ark)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://ark.cn-beijing.volces.com/api/v3",
        default_model: "doubao-seed-1-8-251228",
        key_name: Some("ark_api_key"),
        key_required: true,
        include_usage: true,
        // Ark serves DeepSeek and Kimi thinking models too, with their rule.
        send_reasoning: true,
    },
    Preset {
        id: "moonshot",
        name_zh: "月之暗面 Kimi（中国站）",
        name_en: "Moonshot Kimi (China)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://api.moonshot.cn/v1",
        default_model: "kimi-k2.6",
        key_name: Some("moonshot_api_key"),
        key_required: true,
        include_usage: true,
        send_reasoning: true,
    },
    Preset {
        id: "moonshot_intl",
        name_zh: "月之暗面 Kimi（国际站）",
        name_en: "Moonshot Kimi (international)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://api.moonshot.ai/v1",
        default_model: "kimi-k2.6",
        key_name: Some("moonshot_intl_api_key"),
        key_required: true,
        include_usage: true,
        send_reasoning: true,
    },
    Preset {
        id: "zhipu",
        name_zh: "智谱 GLM",
        name_en: "Zhipu GLM",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "https://open.bigmodel.cn/api/paas/v4",
        default_model: "glm-5.3",
        key_name: Some("zhipu_api_key"),
        key_required: true,
        // GLM does not accept `stream_options`; it sends usage on its last chunk unasked.
        include_usage: false,
        send_reasoning: true,
    },
    Preset {
        id: "anthropic",
        name_zh: "Anthropic Claude",
        name_en: "Anthropic Claude",
        kind: ProviderKind::Anthropic,
        base_url: "https://api.anthropic.com/v1",
        default_model: "claude-sonnet-5-5",
        key_name: Some("anthropic_api_key"),
        key_required: true,
        include_usage: false,
        send_reasoning: false,
    },
    Preset {
        id: "gemini",
        name_zh: "Google Gemini",
        name_en: "Google Gemini",
        kind: ProviderKind::Gemini,
        base_url: "https://generativelanguage.googleapis.com/v1beta",
        default_model: "gemini-3.8-flash",
        key_name: Some("gemini_api_key"),
        key_required: true,
        include_usage: false,
        send_reasoning: false,
    },
    Preset {
        id: "ollama",
        name_zh: "Ollama（本机）",
        name_en: "Ollama (this computer)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "http://localhost:11434/v1",
        default_model: "qwen3:8b",
        key_name: None,
        key_required: false,
        include_usage: true,
        send_reasoning: false,
    },
    Preset {
        id: "custom",
        name_zh: "自定义（OpenAI 兼容）",
        name_en: "Custom (OpenAI-compatible)",
        kind: ProviderKind::OpenAiCompatible,
        base_url: "",
        default_model: "",
        key_name: Some("custom_api_key"),
        key_required: false,
        include_usage: true,
        // Gateways in front of DeepSeek or Kimi need it; the others ignore a field they do not know.
        send_reasoning: true,
    },
];

/// The preset with this id.
pub fn preset(id: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.id == id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_and_key_names_are_unique_and_urls_valid() {
        let ids: HashSet<_> = PRESETS.iter().map(|p| p.id).collect();
        assert_eq!(ids.len(), PRESETS.len());
        let keys: Vec<_> = PRESETS.iter().filter_map(|p| p.key_name).collect();
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len());
        for p in PRESETS.iter().filter(|p| p.id != "custom") {
            crate::http::base_url(p.base_url).unwrap();
            assert!(!p.default_model.is_empty(), "{}", p.id);
            assert_eq!(p.key_required, p.key_name.is_some(), "{}", p.id);
        }
    }

    #[test]
    fn the_requested_services_are_all_there() {
        for id in [
            "openai", "deepseek", "qwen", "doubao", "moonshot", "zhipu", "ollama", "custom",
        ] {
            assert!(preset(id).is_some(), "{id}");
        }
        assert_eq!(preset("ollama").unwrap().key_name, None);
        assert!(
            preset("ollama")
                .unwrap()
                .base_url
                .starts_with("http://localhost")
        );
        assert!(preset("nope").is_none());
    }

    #[test]
    fn a_preset_builds_a_working_provider() {
        let model = crate::connect(preset("ollama").unwrap().config(None)).unwrap();
        assert_eq!(model.name(), "qwen3:8b");
        let custom = crate::connect(preset("custom").unwrap().config(None));
        assert!(custom.is_err(), "custom needs a URL and a model first");
    }
}
