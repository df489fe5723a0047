//! Desktop notifications for calls that start waiting on the user while the app is not in
//! front, and the way back to them: a click on the notification where the notification server
//! reports it, and in any case the next time the main window gains focus.

use std::time::{Duration, Instant};

use companion::settings::Lang;
use companion::sync::lock;
use companion::view::CallView;
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime};
use tauri_plugin_notification::NotificationExt as _;

use crate::state::Shell;
use crate::windows::{MAIN, OPEN_EVENT, OpenTarget, show_main};

/// At most one notification this often: a batch of held calls (or a model proposing many
/// writes) makes one interruption, not dozens, and on Linux each shown notification keeps a
/// blocking thread waiting for its click.
const QUIET_FOR: Duration = Duration::from_secs(10);

/// A notification's title and body for `call`, or `None` when the call does not newly wait
/// on the user (outcome-unknown writes surface in the inbox, not as an interruption).
pub fn notification_text(lang: Lang, call: &CallView) -> Option<(String, String)> {
    let title = match (call.status.as_str(), lang) {
        ("awaiting_approval", Lang::Zh) => "需要你的批准",
        ("awaiting_approval", Lang::En) => "Approval needed",
        ("awaiting_auth", Lang::Zh) => "需要登录飞书",
        ("awaiting_auth", Lang::En) => "Sign-in needed",
        _ => return None,
    };
    let pick = |t: &companion::view::Text| match lang {
        Lang::Zh => t.zh.clone(),
        Lang::En => t.en.clone(),
    };
    let body = call
        .preview
        .as_ref()
        .map(|p| pick(&p.summary))
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| pick(&call.title));
    Some((title.to_owned(), body))
}

/// A call changed: notify if it newly waits on the user, the main window is not in front, and
/// no notification was shown just before (the focus jump still goes to the newest call).
pub(crate) fn on_call<R: Runtime>(app: &AppHandle<R>, shell: &Shell, call: &CallView, lang: Lang) {
    let Some((title, body)) = notification_text(lang, call) else {
        return;
    };
    let focused = app
        .get_webview_window(MAIN)
        .and_then(|w| w.is_focused().ok())
        .unwrap_or(false);
    let id = {
        let mut notices = lock(&shell.notices);
        if !notices.seen.insert(call.call_id.clone()) || focused {
            return;
        }
        let target = OpenTarget::call(call);
        notices.latest = Some(target.clone());
        if notices
            .last_shown
            .is_some_and(|at| at.elapsed() < QUIET_FOR)
        {
            return;
        }
        notices.last_shown = Some(Instant::now());
        notices.next_id = notices.next_id.wrapping_add(1);
        let id = notices.next_id;
        notices.by_id.insert(id, target);
        id
    };
    let shown = app
        .notification()
        .builder()
        .id(id)
        .title(title)
        .body(body)
        .show();
    if let Err(e) = shown {
        log::warn!("cannot show a notification: {e}");
    }
}

/// Listens for clicks on the app's notifications.
pub(crate) fn listen_for_clicks<R: Runtime>(app: &AppHandle<R>) {
    let handle = app.clone();
    let registered = app.notification().on_action(move |action| {
        if action.action_id() != "tap" {
            return;
        }
        let shell = handle.state::<Shell>();
        let target = {
            let mut notices = lock(&shell.notices);
            let target = action
                .notification()
                .and_then(|n| notices.by_id.remove(&n.id()))
                .or_else(|| notices.latest.clone());
            notices.latest = None;
            target
        };
        show_main(&handle);
        if let Some(target) = target {
            open(&handle, &target);
        }
    });
    if let Err(e) = registered {
        log::warn!("notification clicks will not be reported: {e}");
    }
}

/// The main window gained focus: show the most recent notified call, once.
pub(crate) fn on_main_focused<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    let target = lock(&shell.notices).latest.take();
    if let Some(target) = target {
        open(app, &target);
    }
}

fn open<R: Runtime>(app: &AppHandle<R>, target: &OpenTarget) {
    if let Err(e) = app.emit_to(MAIN, OPEN_EVENT, target.clone()) {
        log::warn!("cannot ask the UI to open an item: {e}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use companion::view::{PreviewView, Text};

    fn call(status: &str, summary: Option<(&str, &str)>) -> CallView {
        CallView {
            call_id: "call_1".into(),
            session_id: "s1".into(),
            invocation_id: "i1".into(),
            tool: "send_message".into(),
            title: Text::new("发送消息", "Send a message"),
            args: Default::default(),
            original_args: None,
            status: status.into(),
            pending: true,
            requires_approval: true,
            preview: summary.map(|(zh, en)| PreviewView {
                summary: Text::new(zh, en),
                risk: "normal".into(),
                fields: vec![],
                changes: vec![],
            }),
            scopes: vec![],
            authorize_url: None,
            scope_apply_url: None,
            verdict: None,
            requester: None,
            decided_by: None,
            reason: None,
            reason_text: None,
            outcome: None,
            created_at: 0,
            expires_at: None,
            updated_at: 0,
        }
    }

    #[test]
    fn approvals_show_the_preview_summary() {
        let c = call(
            "awaiting_approval",
            Some((
                "以你的身份向 产品周会 发送消息",
                "Send a message to 产品周会 as you",
            )),
        );
        assert_eq!(
            notification_text(Lang::Zh, &c),
            Some((
                "需要你的批准".to_owned(),
                "以你的身份向 产品周会 发送消息".to_owned()
            ))
        );
        assert_eq!(
            notification_text(Lang::En, &c),
            Some((
                "Approval needed".to_owned(),
                "Send a message to 产品周会 as you".to_owned()
            ))
        );
    }

    #[test]
    fn sign_ins_without_a_preview_show_the_tool() {
        let c = call("awaiting_auth", None);
        assert_eq!(
            notification_text(Lang::Zh, &c),
            Some(("需要登录飞书".to_owned(), "发送消息".to_owned()))
        );
        assert_eq!(
            notification_text(Lang::En, &c),
            Some(("Sign-in needed".to_owned(), "Send a message".to_owned()))
        );
    }

    #[test]
    fn nothing_for_calls_that_do_not_newly_wait() {
        for status in ["approved", "dispatching", "done", "outcome_unknown"] {
            assert_eq!(notification_text(Lang::Zh, &call(status, None)), None);
        }
    }

    #[test]
    fn open_targets_have_the_ui_shape() {
        assert_eq!(
            serde_json::to_value(OpenTarget::inbox()).unwrap(),
            serde_json::json!({"session_id": "", "call_id": null, "view": "inbox"})
        );
        assert_eq!(
            serde_json::to_value(OpenTarget::call(&call("awaiting_approval", None))).unwrap(),
            serde_json::json!({"session_id": "s1", "call_id": "call_1"})
        );
    }
}
