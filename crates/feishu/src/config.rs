//! Which Feishu: the brand decides the hosts; tests and demo mode point them at the emulator.

use secrecy::SecretString;
use url::Url;

/// Feishu (China) or Lark (international).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Brand {
    /// open.feishu.cn / accounts.feishu.cn
    Feishu,
    /// open.larksuite.com / accounts.larksuite.com
    Lark,
}

/// The two hosts the app talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Where the user signs in (authorize page).
    pub accounts: Url,
    /// The Open API, including the token endpoint.
    pub open: Url,
}

fn fixed(url: &str) -> Url {
    // These literals are valid URLs; a test below parses every one of them.
    Url::parse(url).unwrap_or_else(|_| unreachable!("{url} is a valid URL"))
}

impl Endpoints {
    /// The real hosts of a brand.
    pub fn for_brand(brand: Brand) -> Self {
        match brand {
            Brand::Feishu => Endpoints {
                accounts: fixed("https://accounts.feishu.cn"),
                open: fixed("https://open.feishu.cn"),
            },
            Brand::Lark => Endpoints {
                accounts: fixed("https://accounts.larksuite.com"),
                open: fixed("https://open.larksuite.com"),
            },
        }
    }

    /// One host serving both roles, as the emulator does.
    pub fn single(base: Url) -> Self {
        Endpoints {
            accounts: base.clone(),
            open: base,
        }
    }

    /// `{accounts}/open-apis/authen/v1/authorize`
    pub fn authorize_url(&self) -> Url {
        join(&self.accounts, "open-apis/authen/v1/authorize")
    }

    /// `{open}/open-apis/authen/v2/oauth/token`
    pub fn token_url(&self) -> Url {
        join(&self.open, "open-apis/authen/v2/oauth/token")
    }

    /// `{open}/open-apis/authen/v1/user_info`
    pub fn user_info_url(&self) -> Url {
        join(&self.open, "open-apis/authen/v1/user_info")
    }

    /// The brand's hosts served from one base, as the emulator serves them: Feishu at `base`,
    /// Lark under `base/lark/` (a stand-in for a real tenant can then answer for both brands).
    pub fn emulated(base: &Url, brand: Brand) -> Self {
        match brand {
            Brand::Feishu => Endpoints::single(base.clone()),
            Brand::Lark => {
                let mut lark = base.clone();
                let path = format!("{}/lark/", base.path().trim_end_matches('/'));
                lark.set_path(&path);
                Endpoints::single(lark)
            }
        }
    }

    /// Feishu's hosted MCP server (Markdown documents, with the user's token in
    /// `X-Lark-MCP-UAT`): `mcp.feishu.cn/mcp` for Feishu's Open API host, `mcp.larksuite.com/mcp`
    /// for Lark's, and `{open}/mcp` for a stand-in such as the emulator.
    pub fn hosted_mcp_url(&self) -> Url {
        match self.open.host_str() {
            Some("open.feishu.cn") => fixed("https://mcp.feishu.cn/mcp"),
            Some("open.larksuite.com") => fixed("https://mcp.larksuite.com/mcp"),
            _ => join(&self.open, "mcp"),
        }
    }

    /// `{accounts}/oauth/v1/device_authorization`: where a device sign-in begins.
    pub fn device_authorization_url(&self) -> Url {
        join(&self.accounts, "oauth/v1/device_authorization")
    }

    /// `{accounts}/oauth/v1/app/registration`: app self-registration's begin and poll.
    pub fn app_registration_url(&self) -> Url {
        join(&self.accounts, "oauth/v1/app/registration")
    }

    /// `{open}/page/cli?user_code=…`: where the user confirms a registration.
    pub fn registration_page(&self, user_code: &str) -> Url {
        let mut url = join(&self.open, "page/cli");
        url.query_pairs_mut().append_pair("user_code", user_code);
        url
    }

    /// `{open}/page/scope-apply?clientID=…&scopes=…`: where the user applies for a scope the
    /// app itself lacks (99991672); an administrator may have to approve it.
    pub fn scope_apply_url(&self, app_id: &str, scopes: &[String]) -> Url {
        let mut url = join(&self.open, SCOPE_APPLY_PAGE);
        url.query_pairs_mut()
            .append_pair("clientID", app_id)
            .append_pair("scopes", &scopes.join(","));
        url
    }

    /// `{open}/callback/ws/endpoint`: where an app asks for its long connection's URL.
    pub fn long_connection_url(&self) -> Url {
        join(&self.open, "callback/ws/endpoint")
    }

    /// `{open}/open-apis/{path}`: the one place an API URL is made, from checked segments.
    pub fn api(&self, path: &crate::ids::ApiPath) -> Url {
        path.url(&self.open)
    }
}

/// The path of Feishu's scope-apply page under the Open Platform host.
const SCOPE_APPLY_PAGE: &str = "page/scope-apply";

/// Whether `url` is Feishu's scope-apply page ([`Endpoints::scope_apply_url`]): a call whose
/// link it is waits for the app to be granted a scope, not for a sign-in.
pub fn is_scope_apply_page(url: &str) -> bool {
    Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.path().ends_with(&format!("/{SCOPE_APPLY_PAGE}"))
    })
}

fn join(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    let prefix = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("{prefix}/{path}"));
    url
}

/// The app's credentials. The secret is required by Feishu's token endpoint even with PKCE.
#[derive(Debug, Clone)]
pub struct AppCredentials {
    /// `cli_…`
    pub app_id: String,
    /// Never logged or shown: `Debug` prints a placeholder.
    pub app_secret: SecretString,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brand_endpoints_are_the_documented_hosts() {
        let feishu = Endpoints::for_brand(Brand::Feishu);
        assert_eq!(
            feishu.authorize_url().as_str(),
            "https://accounts.feishu.cn/open-apis/authen/v1/authorize"
        );
        assert_eq!(
            feishu.token_url().as_str(),
            "https://open.feishu.cn/open-apis/authen/v2/oauth/token"
        );
        let lark = Endpoints::for_brand(Brand::Lark);
        assert_eq!(
            lark.user_info_url().as_str(),
            "https://open.larksuite.com/open-apis/authen/v1/user_info"
        );
    }

    #[test]
    fn the_device_and_registration_pages_are_where_feishus_tool_finds_them() {
        let feishu = Endpoints::for_brand(Brand::Feishu);
        assert_eq!(
            feishu.device_authorization_url().as_str(),
            "https://accounts.feishu.cn/oauth/v1/device_authorization"
        );
        assert_eq!(
            feishu.app_registration_url().as_str(),
            "https://accounts.feishu.cn/oauth/v1/app/registration"
        );
        assert_eq!(
            feishu.registration_page("AB CD").as_str(),
            "https://open.feishu.cn/page/cli?user_code=AB+CD"
        );
        let apply = Endpoints::for_brand(Brand::Lark)
            .scope_apply_url("cli_x", &["drive:drive:readonly".to_owned()]);
        assert_eq!(
            apply.as_str(),
            "https://open.larksuite.com/page/scope-apply?clientID=cli_x&scopes=drive%3Adrive%3Areadonly"
        );
        assert!(is_scope_apply_page(apply.as_str()));
        assert!(!is_scope_apply_page(feishu.authorize_url().as_str()));
        let base = Url::parse("http://127.0.0.1:4000").unwrap_or_else(|_| unreachable!());
        assert_eq!(
            Endpoints::emulated(&base, Brand::Lark)
                .app_registration_url()
                .as_str(),
            "http://127.0.0.1:4000/lark/oauth/v1/app/registration"
        );
        assert_eq!(
            Endpoints::emulated(&base, Brand::Feishu)
                .token_url()
                .as_str(),
            "http://127.0.0.1:4000/open-apis/authen/v2/oauth/token"
        );
    }

    #[test]
    fn a_base_with_a_path_keeps_it() {
        let emulator = Endpoints::single(
            Url::parse("http://127.0.0.1:4000/feishu/").unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(
            emulator
                .api(&crate::ids::ApiPath::new("calendar/v4/calendars"))
                .as_str(),
            "http://127.0.0.1:4000/feishu/open-apis/calendar/v4/calendars"
        );
    }

    #[test]
    fn the_hosted_mcp_server_is_on_its_own_host_for_each_brand() {
        let url = |e: Endpoints| e.hosted_mcp_url().to_string();
        assert_eq!(
            url(Endpoints::for_brand(Brand::Feishu)),
            "https://mcp.feishu.cn/mcp"
        );
        assert_eq!(
            url(Endpoints::for_brand(Brand::Lark)),
            "https://mcp.larksuite.com/mcp"
        );
        let base = Url::parse("http://127.0.0.1:4000").unwrap_or_else(|_| unreachable!());
        assert_eq!(
            url(Endpoints::emulated(&base, Brand::Feishu)),
            "http://127.0.0.1:4000/mcp"
        );
        assert_eq!(
            url(Endpoints::emulated(&base, Brand::Lark)),
            "http://127.0.0.1:4000/lark/mcp"
        );
    }
}
