//! What the shell keeps while it runs: the application core once it is open (or why it could
//! not open), the sign-in window's state, exported files, notifications and timings.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use companion::Companion;
use companion::sync::lock;
use tokio::sync::{Notify, watch};

use crate::launch::Launch;
use crate::notify::Notices;
use crate::signin::SignInState;
use crate::timing::Timing;

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
