//! The main window: the embedded UI, and nothing else. A link the UI renders (an assistant's
//! answer may hold any URL) opens in the system browser; it never replaces the app's page,
//! which would leave the user with a remote page in the app's window.

use companion::view::CallView;
use serde::Serialize;
use tauri::webview::NewWindowResponse;
use tauri::{AppHandle, Manager as _, Runtime, WebviewUrl, WebviewWindow, WebviewWindowBuilder};
use tauri_plugin_opener::OpenerExt as _;
use url::Url;

/// The main window's label: the only window a capability names.
pub const MAIN: &str = "main";
/// Its title.
pub const TITLE: &str = "飞书助手 · Feishu Companion";
/// The event carrying every [`companion::view::UiEventView`] to the UI.
pub const EVENT: &str = "companion://event";
/// The event asking the UI to show an item (tray, notification).
pub const OPEN_EVENT: &str = "companion://open";

/// What the UI should show (the `companion://open` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenTarget {
    /// The conversation; empty for the inbox.
    pub session_id: String,
    /// The call to show in it.
    pub call_id: Option<String>,
    /// `inbox` for the inbox; absent for a call in its conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

impl OpenTarget {
    /// The inbox of everything pending.
    pub fn inbox() -> OpenTarget {
        OpenTarget {
            session_id: String::new(),
            call_id: None,
            view: Some("inbox".to_owned()),
        }
    }

    /// A call, in its conversation.
    pub fn call(call: &CallView) -> OpenTarget {
        OpenTarget {
            session_id: call.session_id.clone(),
            call_id: Some(call.call_id.clone()),
            view: None,
        }
    }
}

/// What a navigation of the main window does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainNavigation {
    /// The app's own page (`tauri://localhost`, `http://tauri.localhost` on Windows).
    Stay,
    /// A web link: opened in the system browser instead.
    OpenInBrowser,
    /// Anything else (custom schemes, files): refused.
    Refuse,
}

/// Decides a navigation of the main window.
pub fn main_navigation(url: &Url) -> MainNavigation {
    match (url.scheme(), url.host_str()) {
        ("tauri", Some("localhost")) => MainNavigation::Stay,
        ("http" | "https", Some("tauri.localhost")) => MainNavigation::Stay,
        ("http" | "https", Some(_)) => MainNavigation::OpenInBrowser,
        _ => MainNavigation::Refuse,
    }
}

/// `text` as a link for the system browser, if it is one: http(s) to a host other than the
/// app's own.
pub fn external_link(text: &str) -> Option<Url> {
    let url = Url::parse(text).ok()?;
    (main_navigation(&url) == MainNavigation::OpenInBrowser).then_some(url)
}

/// Opens the main window on the embedded UI.
pub fn create_main<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<WebviewWindow<R>> {
    let on_navigation = app.clone();
    let on_new_window = app.clone();
    WebviewWindowBuilder::new(app, MAIN, WebviewUrl::App("index.html".into()))
        .title(TITLE)
        .inner_size(1200.0, 800.0)
        .min_inner_size(900.0, 600.0)
        .center()
        .on_navigation(move |url| match main_navigation(url) {
            MainNavigation::Stay => true,
            MainNavigation::OpenInBrowser => {
                open_in_browser(&on_navigation, url);
                false
            }
            MainNavigation::Refuse => {
                log::warn!("main window: refused to go to a {}: URL", url.scheme());
                false
            }
        })
        .on_new_window(move |url, _features| {
            if main_navigation(&url) == MainNavigation::OpenInBrowser {
                open_in_browser(&on_new_window, &url);
            }
            NewWindowResponse::Deny
        })
        .build()
}

fn open_in_browser<R: Runtime>(app: &AppHandle<R>, url: &Url) {
    if let Err(e) = app.opener().open_url(url.as_str(), None::<&str>) {
        log::warn!("cannot open a link in the system browser: {e}");
    }
}

/// Brings the main window to the front (tray, second launch, notification click).
pub fn show_main<R: Runtime>(app: &AppHandle<R>) {
    let Some(window) = app.get_webview_window(MAIN) else {
        return;
    };
    for (what, result) in [
        ("unminimize", window.unminimize()),
        ("show", window.show()),
        ("focus", window.set_focus()),
    ] {
        if let Err(e) = result {
            log::warn!("cannot {what} the main window: {e}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn nav(url: &str) -> MainNavigation {
        main_navigation(&Url::parse(url).unwrap())
    }

    #[test]
    fn the_app_page_stays_links_go_to_the_browser_and_the_rest_is_refused() {
        assert_eq!(nav("tauri://localhost/index.html"), MainNavigation::Stay);
        assert_eq!(nav("http://tauri.localhost/"), MainNavigation::Stay);
        assert_eq!(
            nav("https://open.feishu.cn/document"),
            MainNavigation::OpenInBrowser
        );
        assert_eq!(nav("http://example.com/"), MainNavigation::OpenInBrowser);
        assert_eq!(nav("tauri://evil/"), MainNavigation::Refuse);
        assert_eq!(nav("file:///etc/passwd"), MainNavigation::Refuse);
        assert_eq!(nav("lark://applink.feishu.cn/"), MainNavigation::Refuse);
        assert_eq!(nav("javascript:alert(1)"), MainNavigation::Refuse);
    }

    #[test]
    fn only_web_links_go_to_the_browser() {
        assert!(external_link("https://open.feishu.cn/document").is_some());
        assert!(external_link("http://example.com/a?b=c").is_some());
        for refused in [
            "file:///etc/passwd",
            "lark://applink.feishu.cn/",
            "javascript:alert(1)",
            "mailto:a@example.com",
            "tauri://localhost/",
            "http://tauri.localhost/",
            "/relative/path",
            "not a url",
        ] {
            assert!(external_link(refused).is_none(), "{refused}");
        }
    }
}
