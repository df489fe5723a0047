//! The summary card of a burst: when more calls wait than [`super::MAX_OPEN_CARDS`] cards may
//! show in the chat, the ones held back are not silent. One extra card from the bot says how
//! many more wait, names the first few, and opens the app's inbox; it is updated in place as the
//! count changes (never a second card for the same burst), and turns final without buttons once
//! nothing waits beyond the open cards. Held-back calls get their own card, oldest first, as the
//! open ones are decided (the loop in [`super`] does that before this runs, in the same round).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::RemoteApproval;
use super::card::{self, Action, Lang, grey_line, header, line, plain};
use super::refused_for_good;
use crate::sync::lock;
use crate::view::call::CallView;

/// How many of the held-back calls the summary names, one line each.
pub const SUMMARY_LINES: usize = 3;

/// The summary card in the chat, as last shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct SummaryCard {
    /// The message.
    pub(super) message_id: String,
    /// How many more it says wait.
    pub(super) count: u32,
    /// The one-line summaries it names.
    pub(super) lines: Vec<String>,
}

/// What a summary shows: how many more wait, and the first few of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// Calls waiting without a card of their own.
    pub count: u32,
    /// The one-line summaries of the first [`SUMMARY_LINES`] of them, oldest first.
    pub lines: Vec<String>,
    /// The oldest one's call id, which names the burst.
    pub first: Option<String>,
}

impl Burst {
    /// The calls held back (waiting without a card), oldest first, in `lang`.
    pub fn of(held_back: &[CallView], lang: Lang) -> Burst {
        Burst {
            count: u32::try_from(held_back.len()).unwrap_or(u32::MAX),
            lines: held_back
                .iter()
                .take(SUMMARY_LINES)
                .map(|c| card::summary(c, lang))
                .collect(),
            first: held_back.first().map(|c| c.call_id.clone()),
        }
    }
}

/// The value of the summary's "Open in app" button.
pub fn open_inbox_value() -> Value {
    json!({"action": Action::OpenInbox.name()})
}

/// The summary of `burst`: how many more wait, the first few, and "Open in app" (the inbox).
pub fn summary_card(burst: &Burst, lang: Lang) -> Value {
    let title = match lang {
        Lang::Zh => format!("还有 {} 项等待你批准", burst.count),
        Lang::En => format!("{} more waiting for your approval", burst.count),
    };
    let mut elements: Vec<Value> = burst.lines.iter().map(|l| line(format!("· {l}"))).collect();
    let unnamed = burst.count as usize - burst.lines.len().min(burst.count as usize);
    if unnamed > 0 {
        elements.push(grey_line(match lang {
            Lang::Zh => format!("以及另外 {unnamed} 项"),
            Lang::En => format!("and {unnamed} more"),
        }));
    }
    elements.push(grey_line(lang.t(
        "处理上面的卡片后，它们会逐一发到这里；也可以在应用的收件箱里一次处理。",
        "Each follows here as you decide the cards above, or decide them all in the app's inbox.",
    )));
    elements.push(json!({
        "tag": "button",
        "name": "open_inbox",
        "text": plain(lang.t("在应用中打开", "Open in app")),
        "type": "default",
        "width": "fill",
        "behaviors": [{"type": "callback", "value": open_inbox_value()}],
    }));
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": title.clone()}},
        "header": header(
            title,
            // The title already says they wait for approval.
            lang.t("飞书助手", "Feishu Companion"),
            "orange",
            None,
        ),
        "body": {"elements": elements},
    })
}

/// The summary once nothing waits beyond the open cards: no buttons.
pub fn all_handled_card(lang: Lang) -> Value {
    let title = lang.t("都已处理", "All handled");
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": title.clone()}},
        "header": header(title, lang.t("飞书助手", "Feishu Companion"), "grey", None),
        "body": {"elements": [grey_line(lang.t(
            "没有更多等待的请求了：其余的都有各自的卡片，或已经处理。",
            "Nothing more waits: the rest have their own cards or have been decided.",
        ))]},
    })
}

/// The summary when approving from Feishu was turned off: no buttons, decide in the app.
pub fn retired_summary_card(lang: Lang) -> Value {
    let title = lang.t("请在应用中处理", "Decide in the app");
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": title.clone()}},
        "header": header(title, lang.t("飞书助手", "Feishu Companion"), "grey", None),
        "body": {"elements": [line(lang.t(
            "已关闭在飞书中审批：请在飞书助手应用中处理等待的请求。",
            "Approving from Feishu was turned off: decide the waiting requests in the Feishu Companion app.",
        ))]},
    })
}

impl RemoteApproval {
    /// Makes the summary card match `burst` (the calls waiting without a card of their own):
    /// sent when the cap holds some back and cards go out, updated as the count changes, final
    /// once none wait beyond the open cards. What fails is left for the next round.
    pub(super) async fn sync_summary(
        &self,
        bot: &feishu::BotClient,
        open_id: &str,
        burst: &Burst,
        may_send: bool,
        errors: &mut Vec<String>,
    ) -> bool {
        let remote = self.remote();
        let lang = Lang::of(self.settings().language);
        let current = lock(&remote.state).summary.clone();
        match current {
            Some(shown) if burst.count == 0 => {
                match bot
                    .update_card(&shown.message_id, &all_handled_card(lang))
                    .await
                {
                    Ok(()) => lock(&remote.state).summary = None,
                    Err(e) if refused_for_good(&e) => {
                        tracing::warn!(error = %e, "the summary card cannot be updated; left as it is");
                        lock(&remote.state).summary = None;
                    }
                    Err(e) => {
                        errors.push(e.to_string());
                        return false;
                    }
                }
            }
            Some(shown) if shown.count != burst.count || shown.lines != burst.lines => {
                match bot
                    .update_card(&shown.message_id, &summary_card(burst, lang))
                    .await
                {
                    Ok(()) => {
                        lock(&remote.state).summary = Some(SummaryCard {
                            message_id: shown.message_id,
                            count: burst.count,
                            lines: burst.lines.clone(),
                        });
                    }
                    Err(e) if refused_for_good(&e) => {
                        // Gone from the chat: a new one goes out next round.
                        tracing::warn!(error = %e, "the summary card cannot be updated; a new one follows");
                        lock(&remote.state).summary = None;
                    }
                    Err(e) => {
                        errors.push(e.to_string());
                        return false;
                    }
                }
            }
            Some(_) => {}
            None if burst.count > 0 && may_send => {
                // One uuid per burst (named by its oldest held-back call), so a send whose
                // answer was lost and is tried again does not make a second summary.
                let first = burst.first.as_deref().unwrap_or_default();
                let uuid = super::send_uuid(&format!("summary:{first}"));
                match bot
                    .send_card(open_id, &summary_card(burst, lang), &uuid)
                    .await
                {
                    Ok(message_id) => {
                        lock(&remote.state).summary = Some(SummaryCard {
                            message_id,
                            count: burst.count,
                            lines: burst.lines.clone(),
                        });
                    }
                    Err(e) => {
                        errors.push(e.to_string());
                        return false;
                    }
                }
            }
            None => {}
        }
        true
    }

    /// Approving from Feishu was turned off: the summary loses its button.
    pub(super) async fn retire_summary(&self, bot: &feishu::BotClient) {
        let remote = self.remote();
        let Some(shown) = lock(&remote.state).summary.take() else {
            return;
        };
        let lang = Lang::of(self.settings().language);
        if let Err(e) = bot
            .update_card(&shown.message_id, &retired_summary_card(lang))
            .await
        {
            tracing::warn!(error = %e, "the summary card could not be retired");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(count: u32, lines: &[&str]) -> Burst {
        Burst {
            count,
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            first: Some("fc_1".into()),
        }
    }

    #[test]
    fn the_summary_says_how_many_more_names_the_first_few_and_opens_the_inbox() {
        let zh = summary_card(&burst(5, &["约评审会", "发消息", "改日程"]), Lang::Zh);
        assert_eq!(zh["schema"], "2.0");
        assert_eq!(zh["header"]["title"]["content"], "还有 5 项等待你批准");
        let text = zh.to_string();
        assert!(
            text.contains("· 约评审会") && text.contains("· 改日程"),
            "{text}"
        );
        assert!(text.contains("以及另外 2 项"), "{text}");
        let buttons = card::buttons(&zh);
        assert_eq!(buttons, [("open_inbox".to_owned(), open_inbox_value())]);
        assert_eq!(
            Action::parse(buttons[0].1["action"].as_str().unwrap_or_default()),
            Some(Action::OpenInbox)
        );
        let en = summary_card(&burst(1, &["Send a message"]), Lang::En);
        assert_eq!(
            en["header"]["title"]["content"],
            "1 more waiting for your approval"
        );
        assert!(!en.to_string().contains("and 0 more"));
        assert!(en.to_string().contains("Open in app"));
    }

    #[test]
    fn the_final_and_retired_summaries_have_no_buttons() {
        for lang in [Lang::Zh, Lang::En] {
            assert!(card::buttons(&all_handled_card(lang)).is_empty());
            assert!(card::buttons(&retired_summary_card(lang)).is_empty());
        }
        assert_eq!(
            all_handled_card(Lang::Zh)["header"]["title"]["content"],
            "都已处理"
        );
        assert_eq!(
            all_handled_card(Lang::En)["header"]["title"]["content"],
            "All handled"
        );
    }
}
