//! The emulator's card preview: a card's JSON 2.0 drawn as plain HTML, roughly as Feishu's
//! client shows it, so people can look at what a bot sent (and screenshot it) without Feishu.
//! It draws the header (title, subtitle, template colour), markdown and `div` text, column
//! sets, forms with their input fields, buttons (primary, danger, default, and grey when
//! disabled), rules, collapsible panels and interactive containers; any other component shows as
//! a labelled placeholder. Everything from the card is escaped.
//!
//! Pages: `GET /_emulator/cards/preview?open_id=` (the bot's chat: every card, newest last, with
//! its versions and toasts), `GET /_emulator/cards/{message_id}/preview`, and
//! `POST /_emulator/cards/preview` with a card's JSON as the body (nothing sent).

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Shared;
use super::api::bot::cards_of;
use super::cards::{self, BotCard};

pub(crate) fn routes() -> axum::Router<Shared> {
    use axum::routing::get;
    axum::Router::new()
        .route("/_emulator/cards/preview", get(chat_page).post(draft_page))
        .route("/_emulator/cards/{message_id}/preview", get(card_page))
}

/// Escapes text for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Feishu's lark_md subset, on escaped text: `**bold**`, `*italic*`, `~~strike~~`, `` `code` ``,
/// `[text](url)`, line breaks and `- ` list lines.
fn markdown(source: &str) -> String {
    let mut html = String::new();
    for (i, line) in source.lines().enumerate() {
        if i > 0 {
            html.push_str("<br>");
        }
        let line = esc(line);
        let (bullet, line) = match line.strip_prefix("- ") {
            Some(rest) => ("• ", rest.to_owned()),
            None => ("", line),
        };
        html.push_str(bullet);
        html.push_str(&inline(&line));
    }
    html
}

fn inline(text: &str) -> String {
    let mut out = text.to_owned();
    for (mark, open, close) in [
        ("**", "<b>", "</b>"),
        ("~~", "<s>", "</s>"),
        ("`", "<code>", "</code>"),
        ("*", "<i>", "</i>"),
    ] {
        out = pairs(&out, mark, open, close);
    }
    links(&out)
}

/// Replaces `mark…mark` pairs with `open…close`.
fn pairs(text: &str, mark: &str, open: &str, close: &str) -> String {
    let parts: Vec<&str> = text.split(mark).collect();
    if parts.len() < 3 {
        return text.to_owned();
    }
    let mut out = String::new();
    let last_pair = if parts.len() % 2 == 1 {
        parts.len()
    } else {
        parts.len() - 1
    };
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            if i < last_pair {
                out.push_str(if i % 2 == 1 { open } else { close });
            } else {
                out.push_str(mark);
            }
        }
        out.push_str(part);
    }
    out
}

/// `[text](url)` → a link (the text and URL are already escaped).
fn links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        let Some(mid) = rest[start..].find("](").map(|m| start + m) else {
            break;
        };
        let Some(end) = rest[mid..].find(')').map(|e| mid + e) else {
            break;
        };
        out.push_str(&rest[..start]);
        let label = &rest[start + 1..mid];
        let url = &rest[mid + 2..end];
        let safe = url.starts_with("http://") || url.starts_with("https://");
        if safe {
            let _ = write!(out, "<a href=\"{url}\">{label}</a>");
        } else {
            out.push_str(label);
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The text of a `plain_text` / `lark_md` object (or a bare string).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => esc(s),
        Value::Object(o) => {
            let content = o.get("content").and_then(Value::as_str).unwrap_or_default();
            if o.get("tag").and_then(Value::as_str) == Some("lark_md") {
                markdown(content)
            } else {
                esc(content).replace('\n', "<br>")
            }
        }
        _ => String::new(),
    }
}

/// Header colours: (background, title colour), light as Feishu draws its templates.
fn template_colours(template: &str) -> (&'static str, &'static str) {
    match template {
        "blue" => ("#e1eaff", "#1f4aa8"),
        "wathet" => ("#d9f3fd", "#0d6d8c"),
        "turquoise" => ("#d5f6f2", "#067064"),
        "green" => ("#d9f5d6", "#237b19"),
        "yellow" => ("#faf1d1", "#7a5c00"),
        "orange" => ("#feead2", "#a44904"),
        "red" => ("#fde2e2", "#a61d24"),
        "carmine" => ("#fddde9", "#a1134a"),
        "violet" => ("#f8def8", "#7b1a7b"),
        "purple" => ("#ece2fe", "#5c26b5"),
        "indigo" => ("#e0e9ff", "#2c3e9e"),
        "grey" => ("#eff0f1", "#646a73"),
        _ => ("#ffffff", "#1f2329"),
    }
}

/// The inline style of a text's `text_size`, `text_color` and `text_align` (an empty string when
/// it sets none). Only known values pass, so nothing from the card reaches the CSS unchecked.
fn text_style(text: &Value) -> String {
    let mut style = String::new();
    let size = match text["text_size"].as_str() {
        Some("notation") => Some("12px"),
        Some("normal" | "normal_v2") => Some("14px"),
        Some("heading-4" | "heading") => Some("16px"),
        Some("heading-3") => Some("18px"),
        Some("heading-2") => Some("20px"),
        Some("heading-1" | "heading-0") => Some("24px"),
        _ => None,
    };
    if let Some(size) = size {
        let _ = write!(style, "font-size:{size};");
    }
    let color = match text["text_color"].as_str() {
        Some("grey" | "grey-600") => Some("#8f959e"),
        Some("red") => Some("#f54a45"),
        Some("orange") => Some("#ff8800"),
        Some("green") => Some("#34c724"),
        Some("blue") => Some("#3370ff"),
        Some("purple" | "violet") => Some("#7f3bf5"),
        _ => None,
    };
    if let Some(color) = color {
        let _ = write!(style, "color:{color};");
    }
    if let Some(align @ ("left" | "center" | "right")) = text["text_align"].as_str() {
        let _ = write!(style, "text-align:{align};");
    }
    if style.is_empty() {
        style
    } else {
        format!(" style=\"{style}\"")
    }
}

fn element(out: &mut String, e: &Value) {
    let tag = e["tag"].as_str().unwrap_or_default();
    match tag {
        "markdown" => {
            let _ = write!(
                out,
                "<div class=\"md\"{}>{}</div>",
                text_style(e),
                markdown(e["content"].as_str().unwrap_or_default())
            );
        }
        "div" | "plain_text" => {
            let text_obj = if tag == "div" { &e["text"] } else { e };
            let _ = write!(
                out,
                "<div class=\"md\"{}>{}</div>",
                text_style(text_obj),
                text_of(text_obj)
            );
            if let Some(fields) = e["fields"].as_array() {
                out.push_str("<div class=\"fields\">");
                for f in fields {
                    let _ = write!(out, "<div>{}</div>", text_of(&f["text"]));
                }
                out.push_str("</div>");
            }
        }
        "hr" => out.push_str("<hr>"),
        "column_set" => {
            out.push_str("<div class=\"columns\">");
            for column in e["columns"].as_array().into_iter().flatten() {
                let weight = column["weight"].as_u64().unwrap_or(1);
                let _ = write!(out, "<div class=\"column\" style=\"flex:{weight}\">");
                elements(out, &column["elements"]);
                out.push_str("</div>");
            }
            out.push_str("</div>");
        }
        "form" => {
            let _ = write!(
                out,
                "<form class=\"form\" data-name=\"{}\" onsubmit=\"return false\">",
                esc(e["name"].as_str().unwrap_or_default())
            );
            elements(out, &e["elements"]);
            out.push_str("</form>");
        }
        "collapsible_panel" => {
            let open = if e["expanded"].as_bool().unwrap_or(false) {
                " open"
            } else {
                ""
            };
            let _ = write!(
                out,
                "<details class=\"panel\"{open}><summary>{}</summary>",
                text_of(&e["header"]["title"])
            );
            elements(out, &e["elements"]);
            out.push_str("</details>");
        }
        "interactive_container" | "column" => {
            out.push_str("<div class=\"container\">");
            elements(out, &e["elements"]);
            out.push_str("</div>");
        }
        "button" => {
            let disabled = e["disabled"].as_bool().unwrap_or(false);
            let kind = if disabled {
                "disabled"
            } else {
                match e["type"].as_str().unwrap_or("default") {
                    "primary" | "primary_filled" => "primary",
                    "danger" | "danger_filled" => "danger",
                    "text" | "primary_text" | "danger_text" | "laser" => "text",
                    _ => "default",
                }
            };
            let _ = write!(
                out,
                "<button class=\"btn {kind}\" data-name=\"{}\"{}>{}</button>",
                esc(e["name"].as_str().unwrap_or_default()),
                if disabled { " disabled" } else { "" },
                text_of(&e["text"])
            );
        }
        "input" => {
            let disabled = e["disabled"].as_bool().unwrap_or(false);
            let label = text_of(&e["label"]);
            if !label.is_empty() {
                let _ = write!(out, "<label class=\"label\">{label}</label>");
            }
            let _ = write!(
                out,
                "<input class=\"input\" name=\"{}\" placeholder=\"{}\" value=\"{}\"{}>",
                esc(e["name"].as_str().unwrap_or_default()),
                esc(e["placeholder"]["content"].as_str().unwrap_or_default()),
                esc(e["default_value"].as_str().unwrap_or_default()),
                if disabled { " disabled" } else { "" }
            );
        }
        "img" => {
            let _ = write!(
                out,
                "<div class=\"placeholder\">🖼 {}</div>",
                text_of(&e["alt"])
            );
        }
        other => {
            let _ = write!(out, "<div class=\"placeholder\">[{}]</div>", esc(other));
        }
    }
}

fn elements(out: &mut String, list: &Value) {
    for e in list.as_array().into_iter().flatten() {
        element(out, e);
    }
}

/// One card as an HTML fragment.
pub(crate) fn render_card(card: &Value) -> String {
    let mut out = String::from("<div class=\"card\">");
    if let Some(header) = card.get("header").filter(|h| h.is_object()) {
        let (bg, fg) = template_colours(header["template"].as_str().unwrap_or("default"));
        let _ = write!(
            out,
            "<div class=\"header\" style=\"background:{bg};color:{fg}\"><div class=\"title\">{}</div>",
            text_of(&header["title"])
        );
        let subtitle = text_of(&header["subtitle"]);
        if !subtitle.is_empty() {
            let _ = write!(out, "<div class=\"subtitle\">{subtitle}</div>");
        }
        out.push_str("</div>");
    }
    out.push_str("<div class=\"body\">");
    if cards::is_v2(card) {
        elements(&mut out, &card["body"]["elements"]);
    } else {
        elements(&mut out, &card["elements"]);
    }
    out.push_str("</div></div>");
    out
}

const STYLE: &str = "
body{font-family:-apple-system,'PingFang SC','Noto Sans CJK SC','Microsoft YaHei',sans-serif;background:#f2f3f5;margin:0;padding:24px;color:#1f2329;font-size:14px}
h1{font-size:16px;font-weight:600;margin:0 0 16px}
.message{margin-bottom:28px;max-width:560px}
.meta{font-size:12px;color:#8f959e;margin:0 0 6px 4px}
.card{background:#fff;border:1px solid #dee0e3;border-radius:8px;overflow:hidden;box-shadow:0 1px 2px rgba(31,35,41,.06)}
.header{padding:12px 16px}
.title{font-size:16px;font-weight:600;line-height:24px}
.subtitle{font-size:13px;opacity:.8;margin-top:2px}
.body{padding:12px 16px;display:flex;flex-direction:column;gap:10px}
.md{line-height:22px;word-break:break-word}
.md code{background:#f2f3f5;border-radius:4px;padding:0 4px;font-size:13px}
.md a{color:#3370ff;text-decoration:none}
.fields{display:grid;grid-template-columns:1fr 1fr;gap:6px}
hr{border:0;border-top:1px solid #dee0e3;margin:2px 0;width:100%}
.columns{display:flex;gap:8px}
.column,.container{display:flex;flex-direction:column;gap:8px;min-width:0}
.form{display:flex;flex-direction:column;gap:10px;margin:0}
.label{font-size:13px;color:#646a73}
.input{border:1px solid #d0d3d6;border-radius:6px;padding:7px 10px;font-size:14px;font-family:inherit}
.input:disabled{background:#f2f3f5;color:#a6a9ad}
.btn{border-radius:6px;padding:6px 14px;font-size:14px;font-family:inherit;border:1px solid #d0d3d6;background:#fff;color:#1f2329;cursor:pointer;width:100%}
.btn.primary{background:#3370ff;border-color:#3370ff;color:#fff}
.btn.danger{background:#fff;border-color:#f54a45;color:#f54a45}
.btn.text{border-color:transparent;color:#3370ff}
.btn.disabled{background:#f2f3f5;border-color:#e4e5e7;color:#bbbfc4;cursor:not-allowed}
.panel summary{cursor:pointer;font-weight:500}
.placeholder{background:#f5f6f7;border:1px dashed #d0d3d6;border-radius:6px;padding:8px;color:#8f959e;font-size:12px}
.toast{display:inline-block;margin:8px 0 0 4px;padding:4px 10px;border-radius:14px;font-size:12px;background:#1f2329;color:#fff}
.versions{font-size:12px;color:#8f959e;margin:6px 0 0 4px}
";

fn page(title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"zh-CN\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        esc(title)
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

fn message(out: &mut String, card: &BotCard) {
    let _ = write!(
        out,
        "<div class=\"message\" id=\"{0}\"><div class=\"meta\">{0}</div>{1}",
        esc(&card.message_id),
        render_card(&card.card)
    );
    if let Some(toast) = card.toasts.last() {
        let text = toast["content"].as_str().unwrap_or_default();
        let _ = write!(out, "<div class=\"toast\">{}</div>", esc(text));
    }
    let sources: Vec<&str> = card.versions.iter().map(|v| v.source.as_str()).collect();
    let _ = write!(
        out,
        "<div class=\"versions\">{} version(s): {}</div></div>",
        card.versions.len(),
        esc(&sources.join(" → "))
    );
}

/// `GET /_emulator/cards/preview?open_id=`: the cards bots sent (to one person), oldest first.
async fn chat_page(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let cards = cards_of(&shared, query.get("open_id").map(String::as_str));
    let mut body = format!("<h1>Cards from the bot ({})</h1>", cards.len());
    for card in &cards {
        message(&mut body, card);
    }
    page("Cards", &body)
}

/// `GET /_emulator/cards/{message_id}/preview`.
async fn card_page(State(shared): State<Shared>, Path(message_id): Path<String>) -> Response {
    let Some(card) = shared.lock().bot.cards.get(&message_id).cloned() else {
        return (StatusCode::NOT_FOUND, format!("no card {message_id}")).into_response();
    };
    let mut body = String::new();
    message(&mut body, &card);
    page(&message_id, &body)
}

/// `POST /_emulator/cards/preview` with a card's JSON: drawn if Feishu would take it, else the
/// refusal (as `PATCH`/send would answer it).
async fn draft_page(body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    match cards::validate(&text) {
        Ok(card) => page(
            "Card",
            &format!("<div class=\"message\">{}</div>", render_card(&card)),
        ),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn markdown_is_escaped_then_formatted() {
        assert_eq!(
            markdown("**批准** <script>x</script>\n- `a` [doc](https://e.x/d) [bad](javascript:x)"),
            "<b>批准</b> &lt;script&gt;x&lt;/script&gt;<br>• <code>a</code> <a href=\"https://e.x/d\">doc</a> bad"
        );
        assert_eq!(markdown("2 * 3 = 6"), "2 * 3 = 6", "a lone mark stays");
    }

    #[test]
    fn a_card_draws_its_header_fields_and_button_states() {
        let card = json!({
            "schema": "2.0",
            "header": {"title": {"tag": "plain_text", "content": "<审批>"}, "template": "grey"},
            "body": {"elements": [
                {"tag": "form", "name": "f", "elements": [
                    {"tag": "input", "name": "reason", "placeholder": {"tag": "plain_text", "content": "理由"}},
                    {"tag": "button", "name": "ok", "type": "primary", "text": {"tag": "plain_text", "content": "批准"}},
                    {"tag": "button", "name": "no", "disabled": true, "text": {"tag": "plain_text", "content": "拒绝"}}
                ]},
                {"tag": "chart"}
            ]}
        });
        let html = render_card(&card);
        assert!(html.contains("background:#eff0f1"), "grey template: {html}");
        assert!(html.contains("&lt;审批&gt;"), "{html}");
        assert!(html.contains("placeholder=\"理由\""), "{html}");
        assert!(
            html.contains("class=\"btn primary\" data-name=\"ok\">批准"),
            "{html}"
        );
        assert!(
            html.contains("class=\"btn disabled\" data-name=\"no\" disabled>拒绝"),
            "{html}"
        );
        assert!(html.contains("[chart]"), "{html}");
        let note = json!({"schema": "2.0", "body": {"elements": [
            {"tag": "div", "text": {"tag": "plain_text", "content": "过期", "text_color": "grey", "text_size": "notation"}},
            {"tag": "div", "text": {"tag": "plain_text", "content": "x", "text_color": "red;background:url(x)"}}
        ]}});
        let html = render_card(&note);
        assert!(
            html.contains("style=\"font-size:12px;color:#8f959e;\">过期"),
            "{html}"
        );
        assert!(
            !html.contains("url(x)"),
            "unknown values stay out of the CSS: {html}"
        );
    }
}
