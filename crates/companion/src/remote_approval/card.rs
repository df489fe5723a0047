//! The approval card in Feishu (card JSON 2.0), made from the same [`CallView`] the app's own
//! card shows: its one-line summary, particulars, risk and expiry, in the user's language.
//!
//! Every text goes in as `plain_text`, never markdown: a preview's values come from the model
//! and the tenant (a message text, a title), and in Feishu's markdown `<at id=all></at>` would
//! notify a whole group from a card meant for one person.

use serde_json::{Value, json};

use crate::text::Text;
use crate::view::call::CallView;

/// The language of a card: the one the window, tray and notifications speak too.
pub use crate::settings::Lang;

// A card's own wording helpers, on the shared language type.
impl Lang {
    /// One of `text`'s two languages.
    pub fn pick(self, text: &Text) -> String {
        match self {
            Lang::Zh => text.zh.clone(),
            Lang::En => text.en.clone(),
        }
    }

    /// What separates a label from its value.
    fn colon(self) -> &'static str {
        match self {
            Lang::Zh => "：",
            Lang::En => ": ",
        }
    }

    pub(super) fn t(self, zh: &str, en: &str) -> String {
        match self {
            Lang::Zh => zh.to_owned(),
            Lang::En => en.to_owned(),
        }
    }
}

/// What a card's button asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Approve the call.
    Approve,
    /// Reject it (with the form's reason, if any).
    Reject,
    /// Bring the app to the front, at this call.
    Open,
    /// Bring the app to the front, at its inbox (the summary card of calls held back).
    OpenInbox,
}

impl Action {
    /// The name in the button's `value`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::Reject => "reject",
            Action::Open => "open",
            Action::OpenInbox => "open_inbox",
        }
    }

    /// The action a `value` names.
    pub fn parse(name: &str) -> Option<Action> {
        match name {
            "approve" => Some(Action::Approve),
            "reject" => Some(Action::Reject),
            "open" => Some(Action::Open),
            "open_inbox" => Some(Action::OpenInbox),
            _ => None,
        }
    }
}

/// The particulars a card needs beyond the call.
#[derive(Debug, Clone)]
pub struct CardContext {
    /// The card's language.
    pub lang: Lang,
    /// The user's time zone, for the expiry and the decision's time.
    pub tz: jiff::tz::TimeZone,
    /// The hash of the call's arguments now (what a click must carry back).
    pub args_hash: String,
}

/// The form's field for a rejection's reason.
pub const REASON_FIELD: &str = "reason";

pub(super) fn plain(content: impl Into<String>) -> Value {
    json!({"tag": "plain_text", "content": content.into()})
}

pub(super) fn line(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": plain(content)})
}

pub(super) fn grey_line(content: impl Into<String>) -> Value {
    json!({"tag": "div", "text": {"tag": "plain_text", "content": content.into(), "text_color": "grey", "text_size": "notation"}})
}

/// A time in the user's zone, `12-02 14:32`.
pub fn clock(ms: i64, tz: &jiff::tz::TimeZone) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| {
            t.to_zoned_datetime(tz.clone())
                .strftime("%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_default()
}

/// A call's one-line summary (its tool's title when it has none).
pub(super) fn summary(call: &CallView, lang: Lang) -> String {
    call.preview
        .as_ref()
        .map(|p| lang.pick(&p.summary))
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| lang.pick(&call.title))
}

/// The particulars, one line each, as the app's card lists them.
fn particulars(call: &CallView, lang: Lang) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(preview) = &call.preview {
        for f in &preview.fields {
            out.push(line(format!(
                "{}{}{}",
                lang.pick(&f.label),
                lang.colon(),
                f.value
            )));
        }
        for c in &preview.changes {
            out.push(line(format!(
                "{}{}{} → {}",
                lang.pick(&c.field),
                lang.colon(),
                c.from,
                c.to
            )));
        }
    }
    if out.is_empty() {
        // No preview: the arguments themselves, as the app's card shows them then.
        for (k, v) in &call.args {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            out.push(line(format!("{k}{}{v}", lang.colon())));
        }
    }
    out
}

fn high_risk(call: &CallView) -> bool {
    call.preview.as_ref().is_some_and(|p| p.risk == "high")
}

pub(super) fn header(
    title: String,
    subtitle: String,
    template: &str,
    tag: Option<(String, &str)>,
) -> Value {
    let mut header = json!({
        "title": plain(title),
        "subtitle": plain(subtitle),
        "template": template,
    });
    if let Some((text, color)) = tag {
        header["text_tag_list"] = json!([{"tag": "text_tag", "text": plain(text), "color": color}]);
    }
    header
}

fn button(name: &str, text: String, kind: &str, value: Value) -> Value {
    json!({
        "tag": "button",
        "name": name,
        "text": plain(text),
        "type": kind,
        "width": "fill",
        "form_action_type": "submit",
        "behaviors": [{"type": "callback", "value": value}],
    })
}

/// The value a button carries: which call, the hash of its arguments, and what to do.
pub fn button_value(call_id: &str, args_hash: &str, action: Action) -> Value {
    json!({"call_id": call_id, "args_hash": args_hash, "action": action.name()})
}

/// The card of a call waiting for approval, with Approve, Reject (and its reason) and Open in
/// app.
pub fn pending_card(call: &CallView, cx: &CardContext) -> Value {
    let lang = cx.lang;
    let high = high_risk(call);
    let mut elements = particulars(call, lang);
    let mut notes = vec![lang.pick(&call.title)];
    if let Some(requester) = &call.requester {
        // Another agent asked: the person deciding must know which.
        notes.insert(
            0,
            match lang {
                Lang::Zh => format!("来自 {requester}"),
                Lang::En => format!("from {requester}"),
            },
        );
    }
    if let Some(at) = call.expires_at {
        notes.push(match lang {
            Lang::Zh => format!("将于 {} 过期", clock(at, &cx.tz)),
            Lang::En => format!("expires {}", clock(at, &cx.tz)),
        });
    }
    elements.push(grey_line(notes.join(" · ")));
    let value = |action| button_value(&call.call_id, &cx.args_hash, action);
    elements.push(json!({
        "tag": "form",
        "name": "decide",
        "elements": [
            {
                "tag": "input",
                "name": REASON_FIELD,
                "placeholder": plain(lang.t("拒绝理由（可选）", "Reason for rejecting (optional)")),
                "max_length": 500,
            },
            {
                "tag": "column_set",
                "flex_mode": "none",
                "columns": [
                    {"tag": "column", "width": "weighted", "weight": 1, "elements": [
                        button("approve", lang.t("批准", "Approve"), if high { "danger_filled" } else { "primary_filled" }, value(Action::Approve)),
                    ]},
                    {"tag": "column", "width": "weighted", "weight": 1, "elements": [
                        button("reject", lang.t("拒绝", "Reject"), "danger", value(Action::Reject)),
                    ]},
                    {"tag": "column", "width": "weighted", "weight": 1, "elements": [
                        button("open", lang.t("在应用中打开", "Open in app"), "default", value(Action::Open)),
                    ]},
                ],
            },
        ],
    }));
    let tag = high.then(|| (lang.t("高风险", "High risk"), "red"));
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": summary(call, lang)}},
        "header": header(
            summary(call, lang),
            lang.t("飞书助手 · 等待你批准", "Feishu Companion · waiting for your approval"),
            if high { "red" } else { "blue" },
            tag,
        ),
        "body": {"elements": elements},
    })
}

/// Who decided, in words (`user`: in the app; `user:feishu`: here in Feishu).
fn by_whom(decided_by: Option<&str>, lang: Lang) -> String {
    match decided_by {
        Some("user:feishu") => lang.t("你（在飞书中）", "you (in Feishu)"),
        Some("user") => lang.t("你（在应用中）", "you (in the app)"),
        Some(r) if r.starts_with("rule:") => lang.t("规则", "a rule"),
        _ => lang.t("应用", "the app"),
    }
}

/// The card of a call no longer waiting: what became of it, by whom and when; no buttons.
/// Approved cards are green, everything else grey.
pub fn final_card(call: &CallView, cx: &CardContext) -> Value {
    let lang = cx.lang;
    let verdict = call.verdict.as_deref().unwrap_or("");
    let (word, template) = match verdict {
        "approved" | "approved_edited" => (lang.t("已批准", "Approved"), "green"),
        "rejected" => (lang.t("已拒绝", "Rejected"), "grey"),
        "expired" => (lang.t("已过期", "Expired"), "grey"),
        "superseded" => (
            lang.t("已被新消息取代", "Superseded by a new message"),
            "grey",
        ),
        _ => (lang.t("已取消", "Cancelled"), "grey"),
    };
    let mut elements = particulars(call, lang);
    let mut outcome = vec![word.clone()];
    if matches!(verdict, "approved" | "approved_edited" | "rejected") {
        outcome.push(by_whom(call.decided_by.as_deref(), lang));
    }
    outcome.push(clock(call.updated_at, &cx.tz));
    elements.push(line(outcome.join(" · ")));
    if verdict == "rejected"
        && let Some(reason) = call.reason.as_deref().filter(|r| !r.trim().is_empty())
    {
        elements.push(grey_line(format!(
            "{}{}{reason}",
            lang.t("理由", "Reason"),
            lang.colon()
        )));
    }
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": format!("{word} · {}", summary(call, lang))}},
        "header": header(
            summary(call, lang),
            format!("{} · {word}", lang.t("飞书助手", "Feishu Companion")),
            template,
            Some((word.clone(), if template == "green" { "green" } else { "neutral" })),
        ),
        "body": {"elements": elements},
    })
}

/// The card of a call still waiting when approving from Feishu was turned off: no buttons, and
/// where to decide it instead.
pub fn retired_card(call: &CallView, cx: &CardContext) -> Value {
    let lang = cx.lang;
    let mut elements = particulars(call, lang);
    elements.push(line(lang.t(
        "已关闭在飞书中审批：请在飞书助手应用中处理这个请求。",
        "Approving from Feishu was turned off: decide this request in the Feishu Companion app.",
    )));
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": summary(call, lang)}},
        "header": header(
            summary(call, lang),
            lang.t("飞书助手 · 请在应用中处理", "Feishu Companion · decide in the app"),
            "grey",
            None,
        ),
        "body": {"elements": elements},
    })
}

/// Every button of a card, with its value (for tests and the card's own checks).
pub fn buttons(card: &Value) -> Vec<(String, Value)> {
    fn walk(v: &Value, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                if map.get("tag").and_then(Value::as_str) == Some("button") {
                    let name = map
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    let value = map
                        .get("behaviors")
                        .and_then(|b| b.get(0))
                        .and_then(|b| b.get("value"))
                        .cloned()
                        .unwrap_or_default();
                    out.push((name, value));
                }
                map.values().for_each(|v| walk(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(card, &mut out);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::view::call::{PreviewFieldView, PreviewView};

    fn call(risk: &str) -> CallView {
        CallView {
            call_id: "fc_1".into(),
            session_id: "s".into(),
            invocation_id: "i".into(),
            tool: "send_message".into(),
            title: Text::new("发送消息", "Send a message"),
            args: serde_json::Map::new(),
            original_args: None,
            status: "awaiting_approval".into(),
            pending: true,
            requires_approval: true,
            preview: Some(PreviewView {
                summary: Text::new(
                    "以你的身份向「产品周会」发送消息",
                    "Send a message to 产品周会 as you",
                ),
                risk: risk.into(),
                fields: vec![PreviewFieldView {
                    label: Text::new("内容", "Text"),
                    value: "<at id=all></at> hi".into(),
                }],
                changes: vec![],
            }),
            scopes: vec![],
            authorize_url: None,
            scope_apply_url: None,
            verdict: None,
            decided_by: None,
            reason: None,
            reason_text: None,
            outcome: None,
            created_at: 0,
            expires_at: Some(1_800_000_000_000),
            updated_at: 1_800_000_000_000,
            requester: None,
        }
    }

    fn cx(lang: Lang) -> CardContext {
        CardContext {
            lang,
            tz: jiff::tz::TimeZone::get("Asia/Shanghai").unwrap(),
            args_hash: "h1".into(),
        }
    }

    #[test]
    fn another_agent_s_request_names_it_on_the_card() {
        let mut view = call("normal");
        assert!(
            !pending_card(&view, &cx(Lang::En))
                .to_string()
                .contains("from ")
        );
        view.requester = Some("Claude Code".into());
        for (lang, said) in [
            (Lang::Zh, "来自 Claude Code"),
            (Lang::En, "from Claude Code"),
        ] {
            let card = pending_card(&view, &cx(lang)).to_string();
            assert!(card.contains(said), "{card}");
        }
    }

    #[test]
    fn the_pending_card_says_what_the_apps_card_says_with_three_buttons() {
        let card = pending_card(&call("normal"), &cx(Lang::Zh));
        assert_eq!(card["schema"], "2.0");
        assert_eq!(
            card["header"]["title"]["content"],
            "以你的身份向「产品周会」发送消息"
        );
        assert_eq!(card["header"]["template"], "blue");
        let text = card.to_string();
        assert!(text.contains("内容：<at id=all></at> hi"), "{text}");
        assert!(
            !text.contains("\"markdown\""),
            "model text never goes in as markdown"
        );
        assert!(text.contains("将于 01-15 16:00 过期"), "{text}");
        let buttons = buttons(&card);
        let names: Vec<&str> = buttons.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["approve", "reject", "open"]);
        for (name, value) in &buttons {
            assert_eq!(value["call_id"], "fc_1");
            assert_eq!(value["args_hash"], "h1");
            assert_eq!(value["action"], name.as_str());
        }
        let en = pending_card(&call("high"), &cx(Lang::En));
        assert_eq!(
            en["header"]["title"]["content"],
            "Send a message to 产品周会 as you"
        );
        assert_eq!(en["header"]["template"], "red", "high risk shows red");
        assert!(en.to_string().contains("High risk"));
        assert!(en.to_string().contains("Open in app"));
    }

    #[test]
    fn a_final_card_says_what_became_of_it_by_whom_and_when_without_buttons() {
        let mut c = call("normal");
        c.verdict = Some("approved".into());
        c.decided_by = Some("user:feishu".into());
        let card = final_card(&c, &cx(Lang::Zh));
        assert!(buttons(&card).is_empty());
        assert_eq!(card["header"]["template"], "green");
        assert!(
            card.to_string()
                .contains("已批准 · 你（在飞书中） · 01-15 16:00")
        );
        c.verdict = Some("expired".into());
        let card = final_card(&c, &cx(Lang::En));
        assert_eq!(card["header"]["template"], "grey");
        assert!(card.to_string().contains("Expired · 01-15 16:00"));
        c.verdict = Some("rejected".into());
        c.decided_by = Some("user".into());
        c.reason = Some("not now".into());
        let text = final_card(&c, &cx(Lang::En)).to_string();
        assert!(text.contains("Rejected · you (in the app)") && text.contains("Reason: not now"));
    }
}
