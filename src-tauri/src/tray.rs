//! The tray icon: open the app, see how much waits for approval, quit. Optional: where the
//! desktop has no tray (no StatusNotifier host, e.g. under Xvfb) the app runs without one.

use companion::{Companion, Language};
use tauri::menu::{Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime};

use crate::windows::{MAIN, OPEN_EVENT, OpenTarget, show_main};

/// The tray icon's id.
pub const TRAY_ID: &str = "main";
const OPEN_ID: &str = "open";
const PENDING_ID: &str = "pending";
const QUIT_ID: &str = "quit";

/// The language of the shell's own words (tray, notifications): the core's, so that they
/// resolve "system" as the window and the cards in Feishu do.
pub use companion::settings::Lang;

/// Every word the tray shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrayText {
    /// The "open" item.
    pub open: String,
    /// The pending-approvals item.
    pub pending: String,
    /// The "quit" item.
    pub quit: String,
    /// The icon's tooltip.
    pub tooltip: String,
}

/// The tray's words with `pending` items waiting.
pub fn tray_text(lang: Lang, pending: usize) -> TrayText {
    match lang {
        Lang::Zh => TrayText {
            open: "打开飞书助手".to_owned(),
            pending: match pending {
                0 => "没有待审批".to_owned(),
                n => format!("待审批 {n} 项"),
            },
            quit: "退出".to_owned(),
            tooltip: match pending {
                0 => "飞书助手".to_owned(),
                n => format!("飞书助手 · {n} 项待审批"),
            },
        },
        Lang::En => {
            let count = match pending {
                0 => "No pending approvals".to_owned(),
                1 => "1 pending approval".to_owned(),
                n => format!("{n} pending approvals"),
            };
            TrayText {
                open: "Open Feishu Companion".to_owned(),
                tooltip: match pending {
                    0 => "Feishu Companion".to_owned(),
                    _ => format!("Feishu Companion · {count}"),
                },
                pending: count,
                quit: "Quit".to_owned(),
            }
        }
    }
}

/// The tray and its items, kept to update them.
struct TrayHandles<R: Runtime> {
    tray: TrayIcon<R>,
    open: MenuItem<R>,
    pending: MenuItem<R>,
    quit: MenuItem<R>,
}

/// Creates the tray icon. Fails where the desktop has no tray; the caller carries on.
pub(crate) fn create<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<()> {
    let text = tray_text(Lang::of(Language::System), 0);
    let open = MenuItem::with_id(app, OPEN_ID, &text.open, true, None::<&str>)?;
    let pending = MenuItem::with_id(app, PENDING_ID, &text.pending, true, None::<&str>)?;
    let quit = MenuItem::with_id(app, QUIT_ID, &text.quit, true, None::<&str>)?;
    let separator = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&open, &pending, &separator, &quit])?;
    let mut builder = TrayIconBuilder::with_id(TRAY_ID)
        .menu(&menu)
        .tooltip(&text.tooltip)
        .show_menu_on_left_click(false)
        .on_menu_event(|app, event| match event.id.as_ref() {
            OPEN_ID => show_main(app),
            PENDING_ID => {
                show_main(app);
                if let Err(e) = app.emit_to(MAIN, OPEN_EVENT, OpenTarget::inbox()) {
                    log::warn!("cannot open the inbox: {e}");
                }
            }
            QUIT_ID => app.exit(0),
            _ => {}
        })
        .on_tray_icon_event(|tray, event| {
            // Linux trays report no clicks on the icon itself; the menu covers it there.
            if let TrayIconEvent::Click {
                button: MouseButton::Left,
                button_state: MouseButtonState::Up,
                ..
            } = event
            {
                show_main(tray.app_handle());
            }
        });
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    let tray = builder.build(app)?;
    app.manage(TrayHandles {
        tray,
        open,
        pending,
        quit,
    });
    Ok(())
}

/// Shows the current count of pending items, in the user's language.
pub(crate) async fn refresh<R: Runtime>(app: &AppHandle<R>, companion: &Companion) {
    let Some(handles) = app.try_state::<TrayHandles<R>>() else {
        return;
    };
    let core = companion.clone();
    let count = tauri::async_runtime::spawn_blocking(move || {
        core.pending_calls()
            .map(|p| p.len())
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|counted| counted);
    let count = match count {
        Ok(n) => n,
        Err(e) => {
            log::warn!("cannot count pending approvals: {e}");
            return;
        }
    };
    let text = tray_text(Lang::of(companion.settings().language), count);
    let results = [
        handles.open.set_text(&text.open),
        handles.pending.set_text(&text.pending),
        handles.quit.set_text(&text.quit),
        handles.tray.set_tooltip(Some(&text.tooltip)),
    ];
    for e in results.into_iter().filter_map(Result::err) {
        log::warn!("cannot update the tray: {e}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn chinese_labels_for_none_one_and_many() {
        let none = tray_text(Lang::Zh, 0);
        assert_eq!(none.open, "打开飞书助手");
        assert_eq!(none.pending, "没有待审批");
        assert_eq!(none.quit, "退出");
        assert_eq!(none.tooltip, "飞书助手");
        let one = tray_text(Lang::Zh, 1);
        assert_eq!(one.pending, "待审批 1 项");
        assert_eq!(one.tooltip, "飞书助手 · 1 项待审批");
        let many = tray_text(Lang::Zh, 12);
        assert_eq!(many.pending, "待审批 12 项");
        assert_eq!(many.tooltip, "飞书助手 · 12 项待审批");
    }

    #[test]
    fn english_labels_for_none_one_and_many() {
        let none = tray_text(Lang::En, 0);
        assert_eq!(none.open, "Open Feishu Companion");
        assert_eq!(none.pending, "No pending approvals");
        assert_eq!(none.quit, "Quit");
        assert_eq!(none.tooltip, "Feishu Companion");
        let one = tray_text(Lang::En, 1);
        assert_eq!(one.pending, "1 pending approval");
        assert_eq!(one.tooltip, "Feishu Companion · 1 pending approval");
        let many = tray_text(Lang::En, 3);
        assert_eq!(many.pending, "3 pending approvals");
        assert_eq!(many.tooltip, "Feishu Companion · 3 pending approvals");
    }
}
