//! The core's events, to the UI and the shell: every event the UI shows goes to the main window
//! (only) as `companion://event`; sign-in results close the sign-in window; call changes update
//! the tray and may notify.

use std::time::Duration;

use companion::settings::Lang;
use companion::view::UiEventView;
use companion::{Companion, SignInStatus, UiEvent};
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use crate::state::Shell;
use crate::windows::{EVENT, MAIN};
use crate::{notify, signin, tray};

/// How long the tray waits for a burst of call changes (a batch decision) to end before it
/// counts what is pending once.
const TRAY_SETTLE: Duration = Duration::from_millis(150);

/// Forwards the core's events until the core closes its channel.
pub(crate) fn forward<R: Runtime>(
    app: AppHandle<R>,
    companion: Companion,
    mut events: Receiver<UiEvent>,
) {
    tauri::async_runtime::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => handle(&app, &companion, &event),
                Err(RecvError::Lagged(n)) => {
                    // The UI reloads what it shows on its own; the tray recounts.
                    log::warn!("the shell missed {n} events from the core");
                    app.state::<Shell>().tray_dirty.notify_one();
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

fn handle<R: Runtime>(app: &AppHandle<R>, companion: &Companion, event: &UiEvent) {
    let shell = app.state::<Shell>();
    // A sign-in that ended is settled in the shell (window closed, nothing left to open in the
    // browser) before the UI hears of it, so whatever the UI does next finds it settled.
    // `Waiting` is not taken from here: the `sign_in` command records the waiting page itself,
    // before it returns, and this event can arrive after the user already closed the window.
    if let UiEvent::SignIn(
        SignInStatus::SignedIn { .. }
        | SignInStatus::Declined
        | SignInStatus::Failed { .. }
        | SignInStatus::Refused { .. }
        | SignInStatus::Expired,
    ) = event
    {
        signin::finished(app, &shell);
    }
    // A connect that ended leaves no confirmation page open.
    if let UiEvent::Connect(
        companion::connect::ConnectStatus::Connected { .. }
        | companion::connect::ConnectStatus::Failed(_),
    ) = event
    {
        signin::finished(app, &shell);
    }
    // "Open in app" on a card in Feishu: the window comes forward, and the UI shows the call.
    if let UiEvent::OpenCall { .. } | UiEvent::OpenInbox = event {
        crate::windows::show_main(app);
    }
    if let Some(view) = UiEventView::from_event(event) {
        if let UiEventView::Call { call } = &view {
            shell.tray_dirty.notify_one();
            notify::on_call(app, &shell, call, Lang::of(companion.settings().language));
        }
        if let Err(e) = app.emit_to(MAIN, EVENT, view) {
            log::warn!("cannot send an event to the UI: {e}");
        }
    }
}

/// Keeps the tray's count current, once per burst of changes.
pub(crate) fn update_tray<R: Runtime>(app: AppHandle<R>, companion: Companion) {
    tauri::async_runtime::spawn(async move {
        let shell = app.state::<Shell>();
        loop {
            tray::refresh(&app, &companion).await;
            shell.tray_dirty.notified().await;
            tokio::time::sleep(TRAY_SETTLE).await;
        }
    });
}
