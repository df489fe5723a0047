//! What the shell keeps while it runs: the application core once it is open (or why it could
//! not open), the sign-in window's state, exported files, notifications and timings.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use companion::Companion;
use companion::sync::lock;
use tokio::sync::{Notify, watch};

use crate::launch::Launch;
use crate::signin_policy::SignInPolicy;
use crate::timing::Timing;
use crate::windows::OpenTarget;

/// The shell's state, managed by Tauri.
#[derive(Debug)]
pub struct Shell {
    pub(crate) launch: Launch,
    /// `None` while the core opens; then the core, or the message saying why it did not open.
    ready: watch::Sender<Option<Result<Companion, String>>>,
    /// Shared with the sign-in window's navigation handler, which runs outside any command.
    pub(crate) sign_in: Arc<Mutex<SignInState>>,
    /// Files `export_audit` wrote: the only paths `reveal_path` shows.
    exports: Mutex<HashSet<PathBuf>>,
    pub(crate) notices: Mutex<Notices>,
    /// Set on every change to what is pending; the tray task coalesces bursts.
    pub(crate) tray_dirty: Notify,
    pub(crate) timing: Timing,
    /// Make the sign-in window transient for the main one (off under the mock runtime, which
    /// has no GTK window to attach to).
    pub(crate) attach_sign_in: bool,
}

/// The window's side of the sign-in in progress; [`crate::signin`] acts on it. Kept here, not
/// there, because the sign-in window's code reads the rest of the shell's state too.
#[derive(Debug, Default)]
pub(crate) struct SignInState {
    /// The authorize page of the sign-in in progress (for "open in browser").
    pub(crate) url: Option<String>,
    pub(crate) policy: Option<SignInPolicy>,
    /// The shell is closing the window itself: its closing is not the user cancelling.
    pub(crate) expect_close: bool,
    /// The window reached the callback: the core is finishing the sign-in, which closing the
    /// window must not cut short.
    pub(crate) reached_callback: bool,
    /// The sign-in moved to the system browser: closing the window must not cancel it.
    pub(crate) handed_off: bool,
    /// The window shows a verification page (device sign-in, connect, scope apply): the app
    /// polls, or the user scans the QR code instead, so closing it cancels nothing.
    pub(crate) verification: bool,
}

/// What was notified; [`crate::notify`] acts on it (kept here for the same reason).
#[derive(Debug, Default)]
pub(crate) struct Notices {
    /// Calls already notified (or seen pending while the app was in front): never twice.
    pub(crate) seen: HashSet<String>,
    /// The most recent notified call, shown when the main window next gains focus.
    pub(crate) latest: Option<OpenTarget>,
    /// Notification id → its call, for clicks.
    pub(crate) by_id: HashMap<i32, OpenTarget>,
    pub(crate) next_id: i32,
    pub(crate) last_shown: Option<Instant>,
}

impl Shell {
    /// The state for a run with these options; `started` is when `main` began.
    pub fn new(launch: Launch, started: Instant) -> Shell {
        Shell {
            launch,
            ready: watch::Sender::new(None),
            sign_in: Arc::default(),
            exports: Mutex::default(),
            notices: Mutex::default(),
            tray_dirty: Notify::new(),
            timing: Timing::new(started),
            attach_sign_in: true,
        }
    }

    /// The same, for a runtime without native windows (Tauri's mock runtime in tests).
    pub fn without_native_windows(mut self) -> Shell {
        self.attach_sign_in = false;
        self
    }

    /// The core, waiting while it opens; or why it could not open (for the user, naming the
    /// data folder).
    pub async fn companion(&self) -> Result<Companion, String> {
        let mut rx = self.ready.subscribe();
        let ready = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| "the app is shutting down".to_owned())?;
        match &*ready {
            Some(Ok(companion)) => Ok(companion.clone()),
            Some(Err(message)) => Err(message.clone()),
            None => Err("the app is still starting".to_owned()),
        }
    }

    /// The core if it is open now, without waiting.
    pub(crate) fn companion_now(&self) -> Option<Companion> {
        match &*self.ready.borrow() {
            Some(Ok(companion)) => Some(companion.clone()),
            _ => None,
        }
    }

    pub(crate) fn set_ready(&self, result: Result<Companion, String>) {
        self.ready.send_replace(Some(result));
    }

    pub(crate) fn remember_export(&self, path: PathBuf) {
        lock(&self.exports).insert(path);
    }

    pub(crate) fn was_exported(&self, path: &Path) -> bool {
        lock(&self.exports).contains(path)
    }
}
