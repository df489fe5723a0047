//! The embedded sign-in window (design §3): a second webview showing Feishu's authorize page
//! until the core's loopback listener has caught the redirect.
//!
//! It is locked down three ways. No capability names it, so Tauri's ACL refuses every command
//! it could send, the app's and the plugins' alike (the tests prove it). It runs in a private,
//! ephemeral data store (`incognito`): no cookie or storage shared with the main window, none
//! kept after it closes. And it may only go where signing in needs: the authorize page's own
//! origin, Feishu's and Lark's https sign-in domains, and the loopback callback; popups are
//! refused and any other navigation (another host, a custom scheme, `file:`, `data:`) is
//! blocked and logged by scheme and host only, since sign-in URLs carry the OAuth `state` and
//! `code`.

use std::sync::{Arc, Mutex};

use companion::view::{SignInTicketView, SignInView, UiEventView};
use serde::Serialize;
use tauri::webview::NewWindowResponse;
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime, WebviewUrl, WebviewWindowBuilder};
use tauri_plugin_opener::OpenerExt as _;
use url::Url;

use crate::state::{Shell, lock};
use crate::windows::{EVENT, MAIN};

/// The sign-in window's label. No file in `capabilities/` lists it.
pub const LABEL: &str = "signin";
/// Its title.
pub const TITLE: &str = "登录飞书 · Sign in to Feishu";
/// The https domains (and their subdomains) Feishu's and Lark's sign-in pages move between:
/// `accounts.*` for the authorize page, `passport.*` and the like for logging in.
pub const SIGN_IN_DOMAINS: &[&str] = &["feishu.cn", "larksuite.com", "larkoffice.com"];
/// What the UI hears when the user closes the window before signing in.
pub const CLOSED_MESSAGE: &str =
    "登录窗口已关闭，登录已取消。/ The sign-in window was closed; the sign-in was cancelled.";

/// Where the sign-in window may go, for one sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInPolicy {
    authorize: url::Origin,
    callback: url::Origin,
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
            callback: callback.origin(),
        })
    }

    /// Whether `url` is the loopback listener (the sign-in is then in the core's hands).
    pub fn is_callback(&self, url: &Url) -> bool {
        url.origin() == self.callback
    }
}

/// Whether the sign-in window may navigate to `url`: http(s) only (and empty frames), and then
/// only the authorize page's origin, the loopback callback's origin, or https on a sign-in
/// domain.
pub fn navigation_allowed(url: &Url, policy: &SignInPolicy) -> bool {
    // WebKit asks about frames too: an empty or inline frame of an allowed page (a login
    // widget) stays in that page's origin and goes nowhere, so it is not refused.
    if url.scheme() == "about" {
        return matches!(url.path(), "blank" | "srcdoc");
    }
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    let origin = url.origin();
    if origin == policy.authorize || origin == policy.callback {
        return true;
    }
    url.scheme() == "https"
        && matches!(url.host(), Some(url::Host::Domain(host))
        if SIGN_IN_DOMAINS.iter().any(|d| {
            host == *d || host.strip_suffix(d).is_some_and(|rest| rest.ends_with('.'))
        }))
}

/// `scheme://host:port`, without the path and query that carry OAuth secrets.
fn redacted(url: &Url) -> String {
    match url.host_str() {
        Some(host) => match url.port() {
            Some(port) => format!("{}://{host}:{port}", url.scheme()),
            None => format!("{}://{host}", url.scheme()),
        },
        None => format!("{}:", url.scheme()),
    }
}

/// The sign-in window cannot show the page.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The sign-in URL is not a URL.
    #[error("the sign-in URL is not a URL: {0}")]
    Url(#[from] url::ParseError),
    /// The window system refused.
    #[error("cannot open the sign-in window: {0}")]
    Window(#[from] tauri::Error),
}

/// The window's side of the sign-in in progress.
#[derive(Debug, Default)]
pub(crate) struct SignInState {
    /// The authorize page of the sign-in in progress (for "open in browser").
    url: Option<String>,
    policy: Option<SignInPolicy>,
    /// The shell is closing the window itself: its closing is not the user cancelling.
    expect_close: bool,
    /// The window reached the callback: the core is finishing the sign-in, which closing the
    /// window must not cut short.
    reached_callback: bool,
}

/// A sign-in started: show its page in the embedded window, or in the system browser.
pub(crate) fn started<R: Runtime>(
    app: &AppHandle<R>,
    shell: &Shell,
    ticket: &SignInTicketView,
    embedded: bool,
) -> Result<(), String> {
    let policy = SignInPolicy::new(&ticket.url, &ticket.redirect_uri).map_err(|e| e.to_string())?;
    {
        let mut state = lock(&shell.sign_in);
        state.url = Some(ticket.url.clone());
        state.policy = Some(policy);
        state.reached_callback = false;
    }
    if embedded {
        open_window(app, shell, &ticket.url)
            .map(drop)
            .map_err(|e| e.to_string())
    } else {
        close_window(app, shell);
        app.opener()
            .open_url(ticket.url.as_str(), None::<&str>)
            .map_err(|e| format!("cannot open the system browser: {e}"))
    }
}

/// Shows `url` in the sign-in window: navigates and focuses the window if it is open,
/// otherwise opens it. The sign-in's policy must be set first.
pub fn open_window<R: Runtime>(
    app: &AppHandle<R>,
    shell: &Shell,
    url: &str,
) -> Result<tauri::WebviewWindow<R>, WindowError> {
    let url = Url::parse(url)?;
    lock(&shell.sign_in).expect_close = false;
    if let Some(window) = app.get_webview_window(LABEL) {
        window.navigate(url)?;
        // Best effort: a window manager may refuse focus, and the page is shown regardless.
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
        return Ok(window);
    }
    let state: Arc<Mutex<SignInState>> = shell.sign_in.clone();
    let mut builder = WebviewWindowBuilder::new(app, LABEL, WebviewUrl::External(url))
        .title(TITLE)
        .inner_size(480.0, 640.0)
        .min_inner_size(360.0, 480.0)
        .center()
        .incognito(true)
        .on_new_window(|_url, _features| NewWindowResponse::Deny)
        .on_navigation(move |url| {
            let mut state = lock(&state);
            let Some(policy) = state.policy.clone() else {
                return false;
            };
            let allowed = navigation_allowed(url, &policy);
            if !allowed {
                log::warn!("sign-in window: refused to go to {}", redacted(url));
            } else if policy.is_callback(url) {
                state.reached_callback = true;
            }
            allowed
        });
    if shell.attach_sign_in
        && let Some(main) = app.get_webview_window(MAIN)
    {
        builder = builder.parent(&main)?;
    }
    Ok(builder.build()?)
}

/// Closes the sign-in window, if open, as the shell's own doing (not the user cancelling).
pub(crate) fn close_window<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    if let Some(window) = app.get_webview_window(LABEL) {
        lock(&shell.sign_in).expect_close = true;
        if let Err(e) = window.close() {
            log::warn!("cannot close the sign-in window: {e}");
        }
    }
}

/// The core reports the sign-in finished (signed in, declined or failed).
pub(crate) fn finished<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    {
        let mut state = lock(&shell.sign_in);
        state.url = None;
        state.policy = None;
    }
    close_window(app, shell);
    // Back to the conversation the user signed in for: the card has moved on and the call
    // resumes there. (WebKit also stops painting a window that lost focus to a closed one.)
    crate::windows::show_main(app);
}

/// The user cancelled from the UI; the caller cancelled the core's sign-in.
pub(crate) fn cancelled<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    finished(app, shell);
}

/// The sign-in page, in the system browser; the embedded window closes, since both would
/// wait on the same listener.
pub(crate) fn open_in_browser<R: Runtime>(app: &AppHandle<R>, shell: &Shell) -> Result<(), String> {
    let url = lock(&shell.sign_in)
        .url
        .clone()
        .ok_or_else(|| "没有等待中的登录。/ No sign-in is waiting.".to_owned())?;
    app.opener()
        .open_url(url, None::<&str>)
        .map_err(|e| format!("cannot open the system browser: {e}"))?;
    close_window(app, shell);
    Ok(())
}

/// The sign-in window is gone. Unless the shell closed it, or the redirect already reached
/// the listener, the user closed it by hand: the sign-in is cancelled and the UI told, in the
/// shape of the core's own sign-in events. Runs on the window's `Destroyed` event (public for
/// the tests: the mock runtime reports no window events).
pub fn on_destroyed<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    let by_hand = {
        let mut state = lock(&shell.sign_in);
        let by_hand = !state.expect_close && !state.reached_callback && state.policy.is_some();
        state.expect_close = false;
        state.reached_callback = false;
        if by_hand {
            state.url = None;
            state.policy = None;
        }
        by_hand
    };
    if !by_hand {
        return;
    }
    if let Some(companion) = shell.companion_now() {
        companion.cancel_sign_in();
    }
    log::info!("the sign-in window was closed by hand; sign-in cancelled");
    emit_closed(app);
}

fn emit_closed<R: Runtime>(app: &AppHandle<R>) {
    let view = UiEventView::SignIn {
        status: SignInView::Failed {
            message: CLOSED_MESSAGE.to_owned(),
        },
    };
    emit_to_main(app, &view);
}

fn emit_to_main<R: Runtime, T: Serialize + Clone>(app: &AppHandle<R>, payload: &T) {
    if let Err(e) = app.emit_to(MAIN, EVENT, payload.clone()) {
        log::warn!("cannot tell the UI: {e}");
    }
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

    fn allowed(url: &str) -> bool {
        navigation_allowed(&Url::parse(url).unwrap(), &policy())
    }

    #[test]
    fn the_authorize_page_its_sign_in_pages_and_the_callback_are_allowed() {
        assert!(allowed(AUTHORIZE));
        assert!(allowed(
            "https://accounts.feishu.cn/accounts/page/login?app_id=7"
        ));
        assert!(allowed(
            "https://passport.feishu.cn/suite/passport/page/login/"
        ));
        assert!(allowed(
            "https://accounts.larksuite.com/open-apis/authen/v1/authorize"
        ));
        assert!(allowed("https://open.larkoffice.com/"));
        assert!(allowed("https://feishu.cn/"));
        assert!(allowed(
            "http://127.0.0.1:9768/callback?code=abc&state=s3cret"
        ));
        assert!(allowed("about:blank"));
    }

    #[test]
    fn other_schemes_are_refused() {
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
            assert!(!allowed(url), "{url} should be refused");
        }
    }

    #[test]
    fn unknown_and_look_alike_hosts_are_refused() {
        for url in [
            "https://evil.example/",
            "https://accounts.feishu.cn.evil.example/",
            "https://evilfeishu.cn/",
            "https://accounts.feishu.cn@evil.example/",
            "https://93.184.216.34/",
            // Plain http to a Feishu host: only the loopback callback may be plain http.
            "http://accounts.feishu.cn/open-apis/authen/v1/authorize",
            // The loopback, but not the listener's port.
            "http://127.0.0.1:9769/callback?code=abc",
            "http://localhost:9768/callback?code=abc",
            "https://127.0.0.1:9768/callback",
        ] {
            assert!(!allowed(url), "{url} should be refused");
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
        assert!(navigation_allowed(&consent, &demo));
        assert!(!navigation_allowed(&consent, &policy()));
    }

    #[test]
    fn a_policy_needs_an_http_page_and_a_loopback_callback() {
        assert!(SignInPolicy::new("file:///tmp/x.html", CALLBACK).is_err());
        assert!(SignInPolicy::new(AUTHORIZE, "https://example.com/callback").is_err());
        assert!(SignInPolicy::new(AUTHORIZE, "http://192.168.1.2:9768/callback").is_err());
        assert!(SignInPolicy::new("not a url", CALLBACK).is_err());
    }

    #[test]
    fn the_callback_is_recognised() {
        let p = policy();
        assert!(p.is_callback(&Url::parse("http://127.0.0.1:9768/callback?code=1").unwrap()));
        assert!(!p.is_callback(&Url::parse(AUTHORIZE).unwrap()));
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
}
