//! Updates of the app itself, with Tauri's updater plugin: the release server's manifest names
//! the newest version, its notes, and per platform a download and its minisign signature; the
//! plugin accepts a download only when the signature verifies against the public key compiled in
//! from `tauri.conf.json` (`plugins.updater.pubkey`) and was made for the version announced
//! (`requireSignedVersion`), so neither a tampered file nor an older release passed off as new is
//! ever installed. The private key never enters the repository (docs/releasing.md).
//!
//! The app looks once at start when the user lets it (Settings → check for updates), tells the
//! window (`companion://update`), and installs only when the user asks, after the window showed
//! the release notes. A build with no update server configured reports updates as off.

use std::path::PathBuf;
use std::sync::Mutex;

use companion::sync::lock;
use companion::updates::{UpdateStatusView, UpdateView};
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime};
use tauri_plugin_updater::{Update, UpdaterExt as _};

use crate::windows::MAIN;

/// The event carrying every [`UpdateStatusView`] to the main window.
pub const EVENT: &str = "companion://update";

/// What the shell knows about updates, managed by Tauri.
pub struct Updates {
    status: Mutex<UpdateStatusView>,
    /// The update found by the last check, until it is installed.
    pending: Mutex<Option<Update>>,
    /// What an update replaces, when not the running executable (see [`install_into`]).
    executable: Mutex<Option<PathBuf>>,
}

impl std::fmt::Debug for Updates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Updates")
            .field("status", &*lock(&self.status))
            .finish_non_exhaustive()
    }
}

impl Default for Updates {
    fn default() -> Self {
        Updates {
            status: Mutex::new(UpdateStatusView::Off),
            pending: Mutex::new(None),
            executable: Mutex::new(None),
        }
    }
}

/// Makes later checks install into `executable` instead of the running program: for a portable
/// copy kept elsewhere, and for the tests, which must not overwrite their own binary.
pub fn install_into<R: Runtime>(app: &AppHandle<R>, executable: PathBuf) {
    *lock(&app.state::<Updates>().executable) = Some(executable);
}

/// Where updating stands now.
pub fn status<R: Runtime>(app: &AppHandle<R>) -> UpdateStatusView {
    lock(&app.state::<Updates>().status).clone()
}

fn set<R: Runtime>(app: &AppHandle<R>, status: UpdateStatusView) {
    *lock(&app.state::<Updates>().status) = status.clone();
    if let Err(e) = app.emit_to(MAIN, EVENT, status) {
        log::warn!("cannot tell the window about updates: {e}");
    }
}

fn view(update: &Update) -> UpdateView {
    UpdateView {
        version: update.version.clone(),
        current_version: update.current_version.clone(),
        notes: update.body.clone().unwrap_or_default(),
        // As the manifest wrote it (RFC 3339).
        date: update
            .raw_json
            .get("pub_date")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    }
}

/// Words for a failed check or install; a signature that does not verify says so plainly.
fn message(e: &tauri_plugin_updater::Error) -> String {
    use tauri_plugin_updater::Error;
    match e {
        Error::Minisign(_) | Error::SignedVersionMismatch { .. } | Error::MissingSignedVersion => {
            format!(
                "下载的更新未通过签名校验，已拒绝安装。/ The downloaded update failed its signature check and was not installed. ({e})"
            )
        }
        _ => format!("无法更新 / Could not update: {e}"),
    }
}

/// Looks for a newer version on the release server and tells the window what it found.
pub async fn check<R: Runtime>(app: &AppHandle<R>) -> UpdateStatusView {
    set(app, UpdateStatusView::Checking);
    let mut builder = app.updater_builder();
    if let Some(executable) = lock(&app.state::<Updates>().executable).clone() {
        builder = builder.executable_path(executable);
    }
    let found = match builder.build() {
        Ok(updater) => updater.check().await,
        Err(e) => Err(e),
    };
    let status = match found {
        Ok(Some(update)) => {
            let status = UpdateStatusView::Available {
                update: view(&update),
            };
            *lock(&app.state::<Updates>().pending) = Some(update);
            status
        }
        Ok(None) => UpdateStatusView::UpToDate,
        // No update server in this build's configuration.
        Err(tauri_plugin_updater::Error::EmptyEndpoints) => UpdateStatusView::Off,
        Err(e) => {
            log::warn!("update check failed: {e}");
            UpdateStatusView::Failed {
                message: message(&e),
            }
        }
    };
    set(app, status.clone());
    status
}

/// At start: checks once, in the background, unless the user turned checks off.
pub fn check_at_start<R: Runtime>(app: AppHandle<R>, enabled: bool) {
    if !enabled {
        set(&app, UpdateStatusView::Off);
        return;
    }
    // Said before the check starts, so whoever asks from now on hears "checking", not "off".
    set(&app, UpdateStatusView::Checking);
    tauri::async_runtime::spawn(async move {
        check(&app).await;
    });
}

/// Downloads the update the last check found, verifies its signature, and installs it; the new
/// version runs from the next start. A download that fails verification is dropped, and the app
/// keeps the version it has.
pub async fn install<R: Runtime>(app: &AppHandle<R>) -> UpdateStatusView {
    let Some(update) = lock(&app.state::<Updates>().pending).take() else {
        return UpdateStatusView::Failed {
            message: "没有可安装的更新，请先检查更新。/ There is no update to install; check for updates first.".to_owned(),
        };
    };
    let version = update.version.clone();
    let mut received = 0u64;
    let progress = app.clone();
    let downloaded = update
        .download(
            |chunk, total| {
                received += chunk as u64;
                set(
                    &progress,
                    UpdateStatusView::Installing {
                        version: version.clone(),
                        received,
                        total,
                    },
                );
            },
            || {},
        )
        .await;
    // `download` verified the bytes; `install` verifies them again before it touches anything.
    let result = downloaded.and_then(|bytes| update.install(bytes));
    let status = match result {
        Ok(()) => {
            log::info!("update {version} installed");
            UpdateStatusView::Installed { version }
        }
        Err(e) => {
            log::warn!("update {version} refused or failed: {e}");
            UpdateStatusView::Failed {
                message: message(&e),
            }
        }
    };
    set(app, status.clone());
    status
}

// The commands, each one step the user takes in the update dialog.

/// Where updating stands (the status bar asks at start; later changes arrive as events).
#[tauri::command]
pub(crate) async fn update_status<R: Runtime>(
    app: AppHandle<R>,
) -> Result<UpdateStatusView, String> {
    Ok(status(&app))
}

/// Looks for a newer version now (the status bar's "check again").
#[tauri::command]
pub(crate) async fn check_for_update<R: Runtime>(
    app: AppHandle<R>,
) -> Result<UpdateStatusView, String> {
    Ok(check(&app).await)
}

/// Installs the update the window showed the notes of.
#[tauri::command]
pub(crate) async fn install_update<R: Runtime>(
    app: AppHandle<R>,
) -> Result<UpdateStatusView, String> {
    Ok(install(&app).await)
}

/// Restarts into the installed update.
#[tauri::command]
pub(crate) async fn restart_to_update<R: Runtime>(app: AppHandle<R>) -> Result<(), String> {
    if matches!(status(&app), UpdateStatusView::Installed { .. }) {
        app.restart();
    }
    Err("没有已安装、待重启的更新。/ No installed update waits for a restart.".to_owned())
}
