//! The look every page the emulator shows a person shares (the authorize page, the app-creation
//! page, the device verification page, the scope-apply page): one stylesheet, one frame with the
//! brand line, and HTML escaping. Pages are bilingual, Chinese first, because the people who
//! see them in a demo read either.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};

/// Styled like Feishu's own pages closely enough that a demo user recognises the step; the
/// markup tests parse (ids, `data-testid`s, form fields) stays plain.
pub(crate) const CSS: &str = "body{margin:0;background:#f5f6f7;color:#1f2329;\
font:14px/1.6 -apple-system,'PingFang SC','Microsoft YaHei','Noto Sans CJK SC',system-ui,sans-serif}\
main{max-width:400px;margin:32px auto;background:#fff;border:1px solid #dee0e3;border-radius:8px;padding:24px}\
.brand{font-weight:600;color:#3370ff}.brand span{color:#8f959e;font-weight:400;font-size:12px;margin-left:4px}\
h1{font-size:18px;margin:16px 0 8px}.who{color:#646a73;margin:0 0 8px}\
ul{padding:8px 12px 8px 28px;background:#f5f6f7;border-radius:6px}code{font-size:12px}\
button{font:inherit;border-radius:6px;padding:6px 20px;border:1px solid #d0d3d6;background:#fff;cursor:pointer}\
#allow,.primary{background:#3370ff;border-color:#3370ff;color:#fff}.note{color:#8f959e;font-size:12px;margin-top:16px}";

/// The line under every page: this is not real Feishu.
pub(crate) const DEMO_NOTE: &str = "<p class=\"note\">这是内置的演示环境，不会访问真实的飞书。 · \
A built-in demo; nothing reaches real Feishu.</p>";

/// Escapes text for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A whole page: `title` in the tab, the brand line, then `main` (already HTML).
pub(crate) fn shell(title: &str, main: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
         <style>{CSS}</style></head><body><main>\
         <div class=\"brand\">飞书 · Feishu <span>模拟器 Emulator</span></div>{main}</main></body></html>",
        title = escape(title),
    )
}

/// A page answered with `status`.
pub(crate) fn respond(status: StatusCode, title: &str, main: &str) -> Response {
    (status, Html(shell(title, main))).into_response()
}

/// A page saying the link or code is not (or no longer) good, in both languages, with
/// `id="error"` for tests.
pub(crate) fn invalid(status: StatusCode, zh: &str, en: &str) -> Response {
    respond(
        status,
        "链接已失效 · Link not valid",
        &format!(
            "<h1 id=\"error\" data-testid=\"error\">{}</h1><p class=\"who\">{}</p>{DEMO_NOTE}",
            escape(zh),
            escape(en)
        ),
    )
}

/// The list of scopes a page shows, one `<li>` each, with the list's `id`.
pub(crate) fn scope_list<'a>(id: &str, scopes: impl IntoIterator<Item = &'a str>) -> String {
    let items: String = scopes
        .into_iter()
        .map(|s| format!("<li><code>{}</code></li>", escape(s)))
        .collect();
    format!("<ul id=\"{id}\" data-testid=\"{id}\">{items}</ul>")
}

/// Put into the requests of the Lark brand's routes (those under `/lark`, see [`super`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LarkHost;

/// Which brand's host a request came in on, for handlers whose answers differ by brand.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Host {
    pub(crate) lark: bool,
}

impl Host {
    /// The path prefix of this host's routes: `/lark` for Lark, empty for Feishu.
    pub(crate) fn prefix(self) -> &'static str {
        if self.lark { "/lark" } else { "" }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Host {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Host {
            lark: parts.extensions.get::<LarkHost>().is_some(),
        })
    }
}
