//! What stopped a sign-in, and the view of it the auth card shows.

use serde::Serialize;
use ts_rs::TS;

use crate::text::Text;

/// What stopped a sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInProblem {
    /// 20027: the app's console has not enabled these scopes.
    ScopesNotEnabled {
        /// The scopes to enable (those the page named, else all the sign-in asked for).
        scopes: Vec<String>,
    },
    /// 20029: the redirect URL is not registered with the app.
    RedirectNotRegistered {
        /// The URL to register, exactly.
        redirect_url: String,
    },
    /// 20009: no version of the app is published (so it is not installed in the tenant).
    AppNotPublished,
    /// 20069: the app is disabled.
    AppDisabled,
    /// 20010: the user is outside the app's availability range.
    OutsideAvailability,
    /// 20048: no app has this App ID.
    AppNotFound {
        /// The App ID the settings hold.
        app_id: String,
    },
    /// Nobody finished the sign-in in time.
    TimedOut {
        /// How long it waited.
        minutes: u64,
    },
    /// Another code Feishu showed.
    Other {
        /// Feishu's code.
        code: i64,
    },
}

impl SignInProblem {
    /// The problem Feishu's `code` means, for a sign-in that asked for `requested` scopes
    /// (`named`: scope names the page showed) and redirects to `redirect_url`.
    pub fn from_code(
        code: i64,
        requested: &[String],
        named: &[String],
        redirect_url: &str,
        app_id: &str,
    ) -> SignInProblem {
        match code {
            20027 => {
                // The page's words are not ours to trust: only scopes this sign-in asked for.
                let mut scopes: Vec<String> = requested
                    .iter()
                    .filter(|s| named.contains(s))
                    .cloned()
                    .collect();
                if scopes.is_empty() {
                    scopes = requested
                        .iter()
                        .filter(|s| s.as_str() != feishu::oauth::OFFLINE_ACCESS)
                        .cloned()
                        .collect();
                }
                SignInProblem::ScopesNotEnabled { scopes }
            }
            20029 | 20071 => SignInProblem::RedirectNotRegistered {
                redirect_url: redirect_url.to_owned(),
            },
            20009 => SignInProblem::AppNotPublished,
            20069 => SignInProblem::AppDisabled,
            20010 => SignInProblem::OutsideAvailability,
            20048 => SignInProblem::AppNotFound {
                app_id: app_id.to_owned(),
            },
            other => SignInProblem::Other { code: other },
        }
    }

    /// Feishu's code, when Feishu gave one.
    pub fn code(&self) -> Option<i64> {
        match self {
            SignInProblem::ScopesNotEnabled { .. } => Some(20027),
            SignInProblem::RedirectNotRegistered { .. } => Some(20029),
            SignInProblem::AppNotPublished => Some(20009),
            SignInProblem::AppDisabled => Some(20069),
            SignInProblem::OutsideAvailability => Some(20010),
            SignInProblem::AppNotFound { .. } => Some(20048),
            SignInProblem::TimedOut { .. } => None,
            SignInProblem::Other { code } => Some(*code),
        }
    }

    /// The problem in words, with what to change where, for an app on `console` (the
    /// developer console's base URL) with this App ID.
    pub fn view(&self, console: &str, app_id: &str) -> SignInProblemView {
        SignInProblemView {
            kind: self.kind().to_owned(),
            code: self.code(),
            title: self.title(),
            fix: self.fix(),
            value: self.value(app_id),
            console_url: self.console_page(console, app_id),
        }
    }

    /// The stable name a surface tells the problems apart by.
    fn kind(&self) -> &'static str {
        match self {
            SignInProblem::ScopesNotEnabled { .. } => "scopes_not_enabled",
            SignInProblem::RedirectNotRegistered { .. } => "redirect_not_registered",
            SignInProblem::AppNotPublished => "app_not_published",
            SignInProblem::AppDisabled => "app_disabled",
            SignInProblem::OutsideAvailability => "outside_availability",
            SignInProblem::AppNotFound { .. } => "app_not_found",
            SignInProblem::TimedOut { .. } => "timed_out",
            SignInProblem::Other { .. } => "other",
        }
    }

    /// What happened, with Feishu's code when Feishu gave one: it is what Feishu's documentation
    /// and support go by.
    fn title(&self) -> Text {
        match self {
            SignInProblem::ScopesNotEnabled { .. } => Text::new(
                "飞书拒绝了登录：应用尚未开通所需的权限（错误码 20027）",
                "Feishu refused the sign-in: the app has not enabled a permission it asks for (error 20027)",
            ),
            SignInProblem::RedirectNotRegistered { .. } => Text::new(
                "飞书拒绝了登录：重定向 URL 未在应用中登记（错误码 20029）",
                "Feishu refused the sign-in: the redirect URL is not registered with the app (error 20029)",
            ),
            SignInProblem::AppNotPublished => Text::new(
                "飞书拒绝了登录：应用还没有发布版本（错误码 20009）",
                "Feishu refused the sign-in: no version of the app is published (error 20009)",
            ),
            SignInProblem::AppDisabled => Text::new(
                "飞书拒绝了登录：应用已停用（错误码 20069）",
                "Feishu refused the sign-in: the app is disabled (error 20069)",
            ),
            SignInProblem::OutsideAvailability => Text::new(
                "飞书拒绝了登录：你不在应用的可用范围内（错误码 20010）",
                "Feishu refused the sign-in: you are outside the app's availability range (error 20010)",
            ),
            SignInProblem::AppNotFound { .. } => Text::new(
                "飞书拒绝了登录：找不到这个 App ID 的应用（错误码 20048）",
                "Feishu refused the sign-in: no app has this App ID (error 20048)",
            ),
            SignInProblem::TimedOut { minutes } => Text::new(
                format!("登录在 {minutes} 分钟内没有完成，已停止等待"),
                format!("The sign-in was not finished within {minutes} minutes and has stopped"),
            ),
            SignInProblem::Other { code } => Text::new(
                format!("飞书拒绝了登录（错误码 {code}）"),
                format!("Feishu refused the sign-in (error {code})"),
            ),
        }
    }

    /// Which setting to change and where (the console's menu path), or whom to ask when the
    /// change is not the user's to make (an admin, the app's developer).
    fn fix(&self) -> Text {
        match self {
            SignInProblem::ScopesNotEnabled { .. } => Text::new(
                "在飞书开发者后台打开你的应用 → 开发配置 → 权限管理，开通下面的权限（用户身份），然后创建并发布一个版本，再重新登录。",
                "In the Feishu developer console open your app → Development configuration → Permissions & Scopes, enable the permissions below (user identity), then create and publish a version and sign in again.",
            ),
            SignInProblem::RedirectNotRegistered { .. } => Text::new(
                "在飞书开发者后台打开你的应用 → 开发配置 → 安全设置 → 重定向 URL，原样添加下面的地址（127.0.0.1 不能写成 localhost），保存后重新登录。",
                "In the Feishu developer console open your app → Development configuration → Security settings → Redirect URLs, add the URL below exactly (127.0.0.1, not localhost), save, and sign in again.",
            ),
            SignInProblem::AppNotPublished => Text::new(
                "在飞书开发者后台打开你的应用 → 应用发布 → 版本管理与发布，创建一个版本并申请发布；企业管理员审核通过后再重新登录。",
                "In the Feishu developer console open your app → App release → Version management & release, create a version and submit it; sign in again once your organisation's admin has approved it.",
            ),
            SignInProblem::AppDisabled => Text::new(
                "请企业管理员在飞书管理后台 → 工作台 → 应用管理中启用这个应用，或在开发者后台重新启用后再登录。",
                "Ask your organisation's admin to enable the app under Feishu Admin → Workplace → App management (or re-enable it in the developer console), then sign in again.",
            ),
            SignInProblem::OutsideAvailability => Text::new(
                "请应用的开发者在开发者后台 → 应用发布 → 版本管理与发布中把你加入可用范围并发布版本，或请企业管理员在管理后台调整可用范围，然后重新登录。",
                "Ask the app's developer to add you to its availability range (developer console → App release → Version management & release, then publish), or your admin to change it in Feishu Admin; then sign in again.",
            ),
            SignInProblem::AppNotFound { .. } => Text::new(
                "在设置 → 飞书应用中核对 App ID（开发者后台 → 凭证与基础信息），并确认选择的是飞书还是 Lark。",
                "Check the App ID under Settings → Feishu app against the developer console's Credentials & Basic Info, and whether the app is on Feishu or Lark.",
            ),
            SignInProblem::TimedOut { .. } => Text::new(
                "再点一次「登录飞书」重新开始。如果授权页一直没有跳回应用，检查重定向 URL 是否登记正确。",
                "Press Sign in with Feishu to start again. If Feishu's page never came back to the app, check that the redirect URL is registered exactly.",
            ),
            SignInProblem::Other { .. } => Text::new(
                "在飞书开放平台文档中搜索这个错误码，按说明修改应用设置后重新登录。",
                "Search Feishu's open platform documentation for this code, change the app's settings as it says, and sign in again.",
            ),
        }
    }

    /// The exact value the fix needs, for the Copy button: what to enter (scopes, the redirect
    /// URL), or the App ID the admin or the settings must find. None when there is nothing to
    /// copy, or the App ID is not set.
    fn value(&self, app_id: &str) -> Option<String> {
        match self {
            SignInProblem::ScopesNotEnabled { scopes } => Some(scopes.join("\n")),
            SignInProblem::RedirectNotRegistered { redirect_url } => Some(redirect_url.clone()),
            SignInProblem::AppDisabled | SignInProblem::OutsideAvailability => {
                Some(app_id.to_owned()).filter(|a| !a.is_empty())
            }
            SignInProblem::AppNotFound { app_id } => Some(app_id.clone()).filter(|a| !a.is_empty()),
            SignInProblem::AppNotPublished
            | SignInProblem::TimedOut { .. }
            | SignInProblem::Other { .. } => None,
        }
    }

    /// The app's own page of the developer console where the fix is made, for the fixes made on
    /// one page of it; it needs the App ID, so none without one.
    fn console_page(&self, console: &str, app_id: &str) -> Option<String> {
        let page = match self {
            SignInProblem::ScopesNotEnabled { .. } => "auth",
            SignInProblem::RedirectNotRegistered { .. } => "safe",
            SignInProblem::AppNotPublished
            | SignInProblem::AppDisabled
            | SignInProblem::OutsideAvailability
            | SignInProblem::AppNotFound { .. }
            | SignInProblem::TimedOut { .. }
            | SignInProblem::Other { .. } => return None,
        };
        (!app_id.is_empty()).then(|| format!("{console}/app/{app_id}/{page}"))
    }
}

/// A sign-in problem as the auth card shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct SignInProblemView {
    /// `scopes_not_enabled`, `redirect_not_registered`, `app_not_published`, `app_disabled`,
    /// `outside_availability`, `app_not_found`, `timed_out` or `other`.
    pub kind: String,
    /// Feishu's code, when Feishu gave one.
    pub code: Option<i64>,
    /// What happened.
    pub title: Text,
    /// Which setting to change, where.
    pub fix: Text,
    /// The exact value to enter (scope names one per line, the redirect URL, the App ID), for
    /// the Copy button.
    pub value: Option<String>,
    /// The developer console's page for the fix, when there is one.
    pub console_url: Option<String>,
}

/// The developer console of the app's brand (the emulator's apps live on Feishu's).
pub fn console_base(brand: feishu::Brand) -> &'static str {
    match brand {
        feishu::Brand::Feishu => "https://open.feishu.cn",
        feishu::Brand::Lark => "https://open.larksuite.com",
    }
}
