//! The embedded sign-in window (design §3): a second webview showing Feishu's authorize page
//! until the core's loopback listener has caught the redirect.
//!
//! It is locked down three ways. No capability names it, so Tauri's ACL refuses every command
//! it could send, the app's and the plugins' alike (the tests prove it). It runs in a private,
//! ephemeral data store (`incognito`): no cookie or storage shared with the main window, none
//! kept after it closes. And it may only go where signing in happens ([`crate::signin_policy`]):
//! popups are refused, another web page hands the sign-in to the system browser (enterprise
//! single sign-on), anything else is blocked and logged by scheme and host only, since sign-in
//! URLs carry the OAuth `state` and `code`. When Feishu's page shows an error code, the card
//! says what to fix and the window closes.

use std::sync::{Arc, Mutex};

use companion::sync::lock;
use companion::view::{SignInTicketView, SignInView, UiEventView};
use serde::Serialize;
use tauri::webview::{NewWindowResponse, PageLoadEvent};
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime, WebviewUrl, WebviewWindowBuilder};
use tauri_plugin_opener::OpenerExt as _;
use url::Url;

use crate::signin_policy::{ERROR_PAGE_SCRIPT, redacted, requested_scopes};
pub use crate::signin_policy::{
    Navigation, PolicyError, SIGN_IN_HOSTS, SignInPolicy, navigation, navigation_allowed,
};
use crate::state::{Shell, SignInState};
use crate::windows::{EVENT, MAIN};

/// The sign-in window's label. No file in `capabilities/` lists it.
pub const LABEL: &str = "signin";
/// Its title.
pub const TITLE: &str = "登录飞书 · Sign in to Feishu";
/// What the UI hears when the user closes the window before signing in.
pub const CLOSED_MESSAGE: &str =
    "登录窗口已关闭，登录已取消。/ The sign-in window was closed; the sign-in was cancelled.";

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

/// A sign-in started: show its page in the embedded window, or in the system browser.
pub(crate) fn started<R: Runtime>(
    app: &AppHandle<R>,
    shell: &Shell,
    ticket: &SignInTicketView,
    embedded: bool,
) -> Result<(), String> {
    if ticket.device.is_some() {
        // A device sign-in shows its QR code on the card; the window opens only when asked.
        return verification(app, shell, &ticket.url, false);
    }
    let policy = SignInPolicy::new(&ticket.url, &ticket.redirect_uri).map_err(|e| e.to_string())?;
    remember(shell, &ticket.url, policy, false);
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

/// The page a new sign-in's window shows, and where that window may go.
fn remember(shell: &Shell, url: &str, policy: SignInPolicy, verification: bool) {
    let mut state = lock(&shell.sign_in);
    state.url = Some(url.to_owned());
    state.policy = Some(policy);
    state.reached_callback = false;
    state.handed_off = false;
    state.verification = verification;
}

/// A verification page with no redirect (device sign-in, connect, scope apply): remembered
/// with its policy, and shown in the sign-in window now when `show`.
pub(crate) fn verification<R: Runtime>(
    app: &AppHandle<R>,
    shell: &Shell,
    url: &str,
    show: bool,
) -> Result<(), String> {
    let policy = SignInPolicy::verification(url).map_err(|e| e.to_string())?;
    remember(shell, url, policy, true);
    if show {
        open_window(app, shell, url)
            .map(drop)
            .map_err(|e| e.to_string())
    } else {
        Ok(())
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
    let on_navigation = app.clone();
    let on_load = app.clone();
    let mut builder = WebviewWindowBuilder::new(app, LABEL, WebviewUrl::External(url))
        .title(TITLE)
        .inner_size(480.0, 640.0)
        .min_inner_size(360.0, 480.0)
        .center()
        .incognito(true)
        .initialization_script(ERROR_PAGE_SCRIPT)
        .on_new_window(|_url, _features| NewWindowResponse::Deny)
        .on_navigation(move |url| decide(&on_navigation, &state, url))
        // WebKit asks about each hop of a redirect; a page that finished loading anywhere else
        // (a hop it did not ask about) is decided again, and left if it may not be shown.
        .on_page_load(move |window, payload| {
            if payload.event() != PageLoadEvent::Finished {
                return;
            }
            let shell = on_load.state::<Shell>();
            let allowed = decide(&on_load, &shell.sign_in, payload.url());
            if !allowed && payload.url().scheme() != "about" {
                log::warn!(
                    "sign-in window: left {}, which it may not show",
                    redacted(payload.url())
                );
                if let Ok(blank) = Url::parse("about:blank") {
                    let _ = window.navigate(blank);
                }
            }
        });
    if shell.attach_sign_in
        && let Some(main) = app.get_webview_window(MAIN)
    {
        builder = builder.parent(&main)?;
    }
    Ok(builder.build()?)
}

/// Decides one navigation of the sign-in window (see [`crate::signin_policy`]) and acts on it.
fn decide<R: Runtime>(app: &AppHandle<R>, state: &Mutex<SignInState>, url: &Url) -> bool {
    let mut state = lock(state);
    let Some(policy) = state.policy.clone() else {
        return false;
    };
    match navigation(url, &policy) {
        Navigation::Allow => true,
        Navigation::Callback => {
            state.reached_callback = true;
            true
        }
        Navigation::Refused { code, scopes } => {
            let requested = state
                .url
                .as_deref()
                .map(requested_scopes)
                .unwrap_or_default();
            let app = app.clone();
            // Not from inside WebKit's policy callback: the core closes this window.
            tauri::async_runtime::spawn(async move {
                if let Some(companion) = app.state::<Shell>().companion_now() {
                    companion.sign_in_refused(code, requested, scopes).await;
                }
            });
            false
        }
        Navigation::HandOff => {
            if state.handed_off {
                return false;
            }
            let Some(authorize) = state.url.clone() else {
                return false;
            };
            state.handed_off = true;
            log::info!(
                "sign-in window: {} is not a Feishu sign-in page; the sign-in continues in the system browser",
                redacted(url)
            );
            let app = app.clone();
            tauri::async_runtime::spawn(async move { hand_off(&app, &authorize) });
            false
        }
        Navigation::Block => {
            log::warn!("sign-in window: refused to go to {}", redacted(url));
            false
        }
    }
}

/// The sign-in left Feishu's pages (the tenant's identity provider): the same authorize URL
/// (same state, same PKCE challenge, same listener) opens in the system browser, and the window
/// and the card say so.
fn hand_off<R: Runtime>(app: &AppHandle<R>, authorize: &str) {
    if let Err(e) = app.opener().open_url(authorize, None::<&str>) {
        log::warn!("cannot open the system browser: {e}");
    }
    // The refused hop left the window without a document to write into: an empty page
    // first, then the message.
    if let Some(window) = app.get_webview_window(LABEL) {
        if let Ok(blank) = Url::parse("about:blank") {
            let _ = window.navigate(blank);
        }
        let window = window.clone();
        tauri::async_runtime::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            if let Err(e) = window.eval(HANDED_OFF_PAGE) {
                log::warn!("cannot tell the sign-in window: {e}");
            }
        });
    }
    if let Some(companion) = app.state::<Shell>().companion_now() {
        companion.sign_in_continues_in_browser();
    }
}

/// What the sign-in window shows once the sign-in moved to the browser.
const HANDED_OFF_PAGE: &str = r#"document.documentElement.innerHTML = '<head><meta charset="utf-8"><title>登录飞书 · Sign in to Feishu</title></head><body style="margin:0;background:#f5f6f7;color:#1f2329;font:14px/1.6 system-ui,sans-serif"><main data-testid="handed-off" style="max-width:400px;margin:32px auto;background:#fff;border:1px solid #dee0e3;border-radius:8px;padding:24px"><h1 style="font-size:18px;margin:0 0 12px">登录已转到浏览器中继续</h1><p>你的企业使用自己的登录页面，已在浏览器中打开。请在浏览器中完成登录，完成后回到飞书助手；这个窗口可以关闭。</p><h1 style="font-size:18px;margin:16px 0 12px">Signing in continues in your browser</h1><p>Your organisation signs in on its own page, which opened in your browser. Finish signing in there, then come back to Feishu Companion; you can close this window.</p></main></body>';"#;

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

/// The waiting verification page (a device sign-in's) in the sign-in window.
pub(crate) fn open_waiting<R: Runtime>(app: &AppHandle<R>, shell: &Shell) -> Result<(), String> {
    let url = {
        let state = lock(&shell.sign_in);
        state.url.clone().filter(|_| state.verification)
    }
    .ok_or_else(|| "没有等待中的扫码登录。/ No QR sign-in is waiting.".to_owned())?;
    open_window(app, shell, &url)
        .map(drop)
        .map_err(|e| e.to_string())
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
        let by_hand = !state.expect_close
            && !state.reached_callback
            && !state.handed_off
            && !state.verification
            && state.policy.is_some();
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
