//! The interface language: the user's setting, and the one place "system" becomes Chinese or
//! English. The cards in Feishu and the desktop shell's tray and notifications all resolve it
//! here, so they never disagree with each other or with the window (`resolveLang` in
//! `ui/src/lib/i18n.ts`, which reads `navigator.language` the same way).

use serde::{Deserialize, Serialize};

/// Interface language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// Follow the system.
    #[default]
    System,
    /// 简体中文.
    Zh,
    /// English.
    En,
}

/// The language the app speaks, once "system" is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// 简体中文.
    Zh,
    /// English.
    En,
}

impl Language {
    /// The language to speak when the system's locale is `locale`.
    pub fn resolve(self, locale: Option<&str>) -> Lang {
        match self {
            Language::Zh => Lang::Zh,
            Language::En => Lang::En,
            Language::System => Lang::from_locale(locale),
        }
    }
}

impl Lang {
    /// The language to speak for the setting `language`, in this environment.
    pub fn of(language: Language) -> Lang {
        language.resolve(system_locale().as_deref())
    }

    /// Chinese for a `zh*` locale in any case (`zh_CN.UTF-8`, `zh-TW`), else English. A
    /// locale that says nothing (unset, `C`) gets English too: the window falls back to
    /// English, and a card or tray in another language than the window would look broken.
    pub fn from_locale(locale: Option<&str>) -> Lang {
        match locale {
            Some(l) if l.to_ascii_lowercase().starts_with("zh") => Lang::Zh,
            _ => Lang::En,
        }
    }
}

/// The environment's locale: the first locale variable set, in POSIX precedence; on macOS and
/// Windows, where an app started from the Finder or the Start menu has none, the desktop's own
/// language (what the window's `navigator.language` says too).
pub fn system_locale() -> Option<String> {
    let from_env = ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|value| !value.is_empty());
    #[cfg(any(target_os = "macos", target_os = "windows"))]
    let from_env = from_env.or_else(sys_locale::get_locale);
    from_env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chinese_locales_resolve_to_chinese() {
        for locale in ["zh-CN", "zh_TW", "zh_CN.UTF-8", "zh-Hans-CN", "ZH-cn"] {
            assert_eq!(Language::System.resolve(Some(locale)), Lang::Zh, "{locale}");
        }
    }

    #[test]
    fn other_locales_resolve_to_english() {
        for locale in [
            "en-US",
            "en_GB.UTF-8",
            "fr_FR.UTF-8",
            "C",
            "C.UTF-8",
            "POSIX",
            "",
        ] {
            assert_eq!(Language::System.resolve(Some(locale)), Lang::En, "{locale}");
        }
    }

    #[test]
    fn no_locale_resolves_to_english_as_the_window_does() {
        assert_eq!(Language::System.resolve(None), Lang::En);
    }

    #[test]
    fn a_chosen_language_ignores_the_locale() {
        for locale in [None, Some("zh_CN.UTF-8"), Some("en_US.UTF-8")] {
            assert_eq!(Language::Zh.resolve(locale), Lang::Zh);
            assert_eq!(Language::En.resolve(locale), Lang::En);
        }
        assert_eq!(Lang::of(Language::Zh), Lang::Zh);
        assert_eq!(Lang::of(Language::En), Lang::En);
    }
}
