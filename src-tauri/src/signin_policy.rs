//! Where the sign-in window may go, decided per navigation (WebKit asks again for every hop of
//! a redirect chain): Feishu's and Lark's sign-in hosts by name, https on the default port; the
//! authorize page's own origin (the emulator's in demo mode); and the loopback callback. Another
//! web page (the company's identity provider, a tenant's document host, whatever an open
//! redirector points at) is not shown in the window: the sign-in is handed to the system browser
//! with the same state, PKCE verifier and listener. Anything that is not a web page
//! (`javascript:`, `file:`, `data:`, custom schemes) is refused.
//!
//! A device sign-in, "Connect my Feishu" and an application for a scope the app lacks have no
//! callback: their policy ([`SignInPolicy::verification`]) shows the verification page's own
//! origin, the sign-in hosts, and on Feishu's and Lark's Open Platform hosts only the
//! confirmation pages under `/page/` (`/page/cli`, `/page/scope-apply`); any other web page goes
//! to the system browser, as above.
//!
//! The window also carries a script that reads Feishu's error page ("错误码：20029 …" /
//! "Error code: 20029 …") and reports the code by navigating to a reserved address under
//! `.invalid`, which never resolves and which the policy intercepts: the sign-in window has no
//! IPC, and this needs none.

use url::Url;

/// The hosts of Feishu's and Lark's sign-in pages: the authorize page (`accounts.*`) and the
/// login pages it moves between (`passport.*`). Not every subdomain of the brands' domains:
/// tenant document hosts (`<tenant>.feishu.cn`) and applink redirectors are not sign-in pages.
pub const SIGN_IN_HOSTS: &[&str] = &[
    "accounts.feishu.cn",
    "passport.feishu.cn",
    "accounts.larksuite.com",
    "passport.larksuite.com",
];

/// The Open Platform hosts whose confirmation pages (`/page/…`: creating an app, applying for a
/// scope) a verification window shows; nothing else of them (the developer console, docs).
pub const VERIFICATION_HOSTS: &[&str] = &["open.feishu.cn", "open.larksuite.com"];

/// The reserved host the error-page script reports to (RFC 2606: `.invalid` never resolves).
pub const REPORT_HOST: &str = "feishu-companion.invalid";

/// At most this many scope names are taken from an error page.
const MAX_REPORTED_SCOPES: usize = 50;

/// Where one sign-in's window may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInPolicy {
    authorize: url::Origin,
    /// The loopback listener; none for a verification page (device flow, connect, scope apply).
    callback: Option<url::Origin>,
}

/// A sign-in URL the window cannot be pointed at.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// Not a URL.
    #[error("not a URL: {0}")]
    Parse(#[from] url::ParseError),
    /// Not http(s) (the authorize page), or not plain http on the loopback (the callback).
    #[error("{0} is not a sign-in URL this window opens")]
    Refused(String),
}

impl SignInPolicy {
    /// The policy for a sign-in at `authorize_url` whose redirect is `redirect_uri`.
    pub fn new(authorize_url: &str, redirect_uri: &str) -> Result<SignInPolicy, PolicyError> {
        let authorize = Url::parse(authorize_url)?;
        let callback = Url::parse(redirect_uri)?;
        if !matches!(authorize.scheme(), "http" | "https") {
            return Err(PolicyError::Refused(redacted(&authorize)));
        }
        let loopback = matches!(callback.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback());
        if callback.scheme() != "http" || !loopback {
            return Err(PolicyError::Refused(redacted(&callback)));
        }
        Ok(SignInPolicy {
            authorize: authorize.origin(),
            callback: Some(callback.origin()),
        })
    }

    /// The policy for a verification page with no redirect (a device sign-in's page, the page
    /// that confirms creating an app, a scope application).
    pub fn verification(page_url: &str) -> Result<SignInPolicy, PolicyError> {
        let page = Url::parse(page_url)?;
        if !matches!(page.scheme(), "http" | "https") {
            return Err(PolicyError::Refused(redacted(&page)));
        }
        Ok(SignInPolicy {
            authorize: page.origin(),
            callback: None,
        })
    }

    /// Whether `url` is the loopback listener (the sign-in is then in the core's hands).
    pub fn is_callback(&self, url: &Url) -> bool {
        self.callback.as_ref() == Some(&url.origin())
    }
}

/// What the window does with a navigation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Navigation {
    /// A sign-in page (or an empty frame of one): shown.
    Allow,
    /// The loopback callback: shown, and the sign-in is now the core's to finish.
    Callback,
    /// Feishu's page showed an error code: not a navigation, a report.
    Refused {
        /// Feishu's code.
        code: i64,
        /// Scope names the page showed.
        scopes: Vec<String>,
    },
    /// Another web page: the sign-in continues in the system browser instead.
    HandOff,
    /// Not a web page: refused.
    Block,
}

/// Decides a navigation of the sign-in window.
pub fn navigation(url: &Url, policy: &SignInPolicy) -> Navigation {
    // WebKit asks about frames too: an empty or inline frame of an allowed page (a login
    // widget) stays in that page's origin and goes nowhere.
    if url.scheme() == "about" {
        return if matches!(url.path(), "blank" | "srcdoc") {
            Navigation::Allow
        } else {
            Navigation::Block
        };
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Navigation::Block;
    }
    if url.host_str() == Some(REPORT_HOST) {
        return report(url).unwrap_or(Navigation::Block);
    }
    // Credentials in the address are a disguise (`https://accounts.feishu.cn@evil.example`
    // reads as Feishu to a person), never part of a sign-in page's address.
    if !url.username().is_empty() || url.password().is_some() {
        return Navigation::HandOff;
    }
    let origin = url.origin();
    if policy.callback.as_ref() == Some(&origin) {
        return Navigation::Callback;
    }
    let on = |hosts: &[&str]| {
        url.scheme() == "https"
            && url.port().is_none()
            && matches!(url.host(), Some(url::Host::Domain(host)) if hosts.contains(&host))
    };
    let verification = policy.callback.is_none();
    // On Feishu's Open Platform hosts only the confirmation pages, even when the page the window
    // opened is one of them: the developer console shares their origin.
    if origin == policy.authorize && !(verification && on(VERIFICATION_HOSTS)) {
        return Navigation::Allow;
    }
    let confirmation_page =
        verification && on(VERIFICATION_HOSTS) && url.path().starts_with("/page/");
    if on(SIGN_IN_HOSTS) || confirmation_page {
        Navigation::Allow
    } else {
        Navigation::HandOff
    }
}

/// Whether the window may show `url` (a sign-in page or the callback).
pub fn navigation_allowed(url: &Url, policy: &SignInPolicy) -> bool {
    matches!(
        navigation(url, policy),
        Navigation::Allow | Navigation::Callback
    )
}

/// The error-page script's report, read strictly: a code of digits, and scope-shaped names.
fn report(url: &Url) -> Option<Navigation> {
    if url.path() != "/sign-in-refused" {
        return None;
    }
    let mut code = None;
    let mut scopes = Vec::new();
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "code" if !value.is_empty() && value.len() <= 9 => {
                code = value
                    .chars()
                    .all(|c| c.is_ascii_digit())
                    .then(|| value.parse::<i64>().ok())
                    .flatten();
            }
            "scopes" => {
                scopes = value
                    .split_whitespace()
                    .filter(|s| {
                        s.len() <= 100
                            && s.contains(':')
                            && s.chars().all(|c| {
                                c.is_ascii_lowercase() || c.is_ascii_digit() || "_.:-".contains(c)
                            })
                    })
                    .take(MAX_REPORTED_SCOPES)
                    .map(str::to_owned)
                    .collect();
            }
            _ => {}
        }
    }
    code.map(|code| Navigation::Refused { code, scopes })
}

/// The script every page of the sign-in window runs: when the page shows Feishu's error code
/// (now or once its script has rendered it), it reports the code and the scope names on the
/// page to [`REPORT_HOST`], which the policy turns into [`Navigation::Refused`].
pub const ERROR_PAGE_SCRIPT: &str = r#"(() => {
  if (window.top !== window) return;
  const pattern = /(?:错误码|Error code)\s*[:：]?\s*(\d{4,9})/i;
  const report = () => {
    const text = document.body ? document.body.innerText || '' : '';
    const found = text.match(pattern);
    if (!found) return false;
    const names = text.match(/[a-z_]+:[a-z_.]+(?::[a-z_.]+)?/g) || [];
    const scopes = Array.from(new Set(names)).slice(0, 50).join(' ');
    window.location.href = 'https://feishu-companion.invalid/sign-in-refused?code=' +
      found[1] + '&scopes=' + encodeURIComponent(scopes);
    return true;
  };
  const watch = () => {
    if (report()) return;
    const observer = new MutationObserver(() => { if (report()) observer.disconnect(); });
    observer.observe(document.documentElement, { childList: true, subtree: true, characterData: true });
    setTimeout(() => observer.disconnect(), 60000);
  };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', watch, { once: true });
  } else {
    watch();
  }
})();"#;

/// `scheme://host:port`, without the path and query that carry OAuth secrets.
pub fn redacted(url: &Url) -> String {
    match url.host_str() {
        Some(host) => match url.port() {
            Some(port) => format!("{}://{host}:{port}", url.scheme()),
            None => format!("{}://{host}", url.scheme()),
        },
        None => format!("{}:", url.scheme()),
    }
}

/// The scopes an authorize URL asks for (its `scope` parameter).
pub fn requested_scopes(authorize_url: &str) -> Vec<String> {
    Url::parse(authorize_url)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find(|(k, _)| k == "scope")
                .map(|(_, v)| v.split_whitespace().map(str::to_owned).collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const AUTHORIZE: &str =
        "https://accounts.feishu.cn/open-apis/authen/v1/authorize?client_id=cli_x&state=s3cret";
    const CALLBACK: &str = "http://127.0.0.1:9768/callback";

    fn policy() -> SignInPolicy {
        SignInPolicy::new(AUTHORIZE, CALLBACK).unwrap()
    }

    fn nav(url: &str) -> Navigation {
        navigation(&Url::parse(url).unwrap(), &policy())
    }

    #[test]
    fn a_verification_window_shows_feishus_confirmation_pages_and_nothing_more() {
        let policy = SignInPolicy::verification("https://open.feishu.cn/page/cli?user_code=AB-CD")
            .unwrap_or_else(|e| panic!("{e}"));
        let nav = |u: &str| navigation(&Url::parse(u).unwrap_or_else(|e| panic!("{e}")), &policy);
        for shown in [
            "https://open.feishu.cn/page/cli?user_code=AB-CD",
            "https://open.larksuite.com/page/scope-apply?clientID=cli_x&scopes=a:b",
            "https://accounts.feishu.cn/oauth/v1/device/verify?user_code=X",
            "https://passport.larksuite.com/login",
        ] {
            assert_eq!(nav(shown), Navigation::Allow, "{shown}");
        }
        for elsewhere in [
            "https://open.feishu.cn/app/cli_x/safe",
            "https://open.feishu.cn/document/home",
            "https://open.feishu.cn:8443/page/cli",
            "https://evil.example/page/cli",
            "http://127.0.0.1:9768/callback?code=abc",
        ] {
            assert_eq!(nav(elsewhere), Navigation::HandOff, "{elsewhere}");
        }
        assert_eq!(nav("javascript:alert(1)"), Navigation::Block);
        assert!(!policy.is_callback(
            &Url::parse("http://127.0.0.1:9768/callback").unwrap_or_else(|e| panic!("{e}"))
        ));
        // The redirect sign-in's window does not show the confirmation pages: only a
        // verification window needs them.
        let redirect = SignInPolicy::new(AUTHORIZE, CALLBACK).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            navigation(
                &Url::parse("https://open.feishu.cn/page/cli").unwrap_or_else(|e| panic!("{e}")),
                &redirect
            ),
            Navigation::HandOff
        );
        assert!(SignInPolicy::verification("file:///etc/passwd").is_err());
    }

    #[test]
    fn the_sign_in_hosts_and_the_callback_are_shown() {
        for url in [
            AUTHORIZE,
            "https://accounts.feishu.cn/accounts/page/login?app_id=7",
            "https://passport.feishu.cn/suite/passport/page/login/",
            "https://accounts.larksuite.com/open-apis/authen/v1/authorize",
            "https://passport.larksuite.com/",
            "about:blank",
        ] {
            assert_eq!(nav(url), Navigation::Allow, "{url}");
        }
        assert_eq!(
            nav("http://127.0.0.1:9768/callback?code=abc&state=s3cret"),
            Navigation::Callback
        );
    }

    #[test]
    fn other_web_pages_go_to_the_system_browser() {
        for url in [
            // An identity provider, a tenant's document host, an applink redirector.
            "https://sso.example.com/saml/login",
            "https://bytedance.feishu.cn/docx/abc",
            "https://applink.feishu.cn/client/op/open",
            "https://open.larkoffice.com/",
            "https://feishu.cn/",
            // Look-alikes, other ports, credentials, plain http.
            "https://accounts.feishu.cn.evil.example/",
            "https://evilfeishu.cn/",
            "https://accounts.feishu.cn:8443/",
            "https://user@accounts.feishu.cn/",
            "http://accounts.feishu.cn/open-apis/authen/v1/authorize",
            "https://93.184.216.34/",
            // The loopback, but not the listener.
            "http://127.0.0.1:9769/callback?code=abc",
            "http://localhost:9768/callback?code=abc",
            "https://127.0.0.1:9768/callback",
        ] {
            assert_eq!(nav(url), Navigation::HandOff, "{url}");
        }
    }

    #[test]
    fn what_is_not_a_web_page_is_refused() {
        for url in [
            "feishu-companion://callback?code=abc",
            "lark://applink.feishu.cn/client/op/open",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,<script>1</script>",
            "blob:https://accounts.feishu.cn/0b5c",
            "about:config",
            "ftp://accounts.feishu.cn/",
            "tauri://localhost/",
        ] {
            assert_eq!(nav(url), Navigation::Block, "{url}");
        }
    }

    #[test]
    fn an_error_page_report_is_read_strictly() {
        assert_eq!(
            nav(
                "https://feishu-companion.invalid/sign-in-refused?code=20027&scopes=task%3Atask%3Aread%20%3Cb%3E%20calendar%3Acalendar%3Areadonly"
            ),
            Navigation::Refused {
                code: 20027,
                scopes: vec![
                    "task:task:read".to_owned(),
                    "calendar:calendar:readonly".to_owned()
                ]
            }
        );
        for url in [
            "https://feishu-companion.invalid/sign-in-refused?code=abc",
            "https://feishu-companion.invalid/sign-in-refused?code=1234567890123",
            "https://feishu-companion.invalid/elsewhere?code=20029",
            "https://feishu-companion.invalid/sign-in-refused",
        ] {
            assert_eq!(nav(url), Navigation::Block, "{url}");
        }
    }

    #[test]
    fn the_demo_emulator_origin_is_allowed_only_for_its_own_sign_in() {
        let demo = SignInPolicy::new(
            "http://127.0.0.1:41234/open-apis/authen/v1/authorize?x=1",
            CALLBACK,
        )
        .unwrap();
        let consent = Url::parse("http://127.0.0.1:41234/consent").unwrap();
        assert_eq!(navigation(&consent, &demo), Navigation::Allow);
        assert_eq!(navigation(&consent, &policy()), Navigation::HandOff);
    }

    #[test]
    fn a_policy_needs_an_http_page_and_a_loopback_callback() {
        assert!(SignInPolicy::new("file:///tmp/x.html", CALLBACK).is_err());
        assert!(SignInPolicy::new(AUTHORIZE, "https://example.com/callback").is_err());
        assert!(SignInPolicy::new(AUTHORIZE, "http://192.168.1.2:9768/callback").is_err());
        assert!(SignInPolicy::new("not a url", CALLBACK).is_err());
    }

    #[test]
    fn refusals_are_logged_without_path_or_query() {
        let url = Url::parse("https://evil.example:8443/x?code=secret").unwrap();
        assert_eq!(redacted(&url), "https://evil.example:8443");
        assert_eq!(
            redacted(&Url::parse("javascript:alert(1)").unwrap()),
            "javascript:"
        );
    }

    #[test]
    fn the_requested_scopes_come_from_the_authorize_url() {
        assert_eq!(
            requested_scopes("https://accounts.feishu.cn/x?scope=a%3Ab+offline_access&state=1"),
            ["a:b", "offline_access"]
        );
        assert!(requested_scopes("not a url").is_empty());
    }
}
