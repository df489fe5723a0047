//! The user's data as a whole: which secrets cannot be read, forgetting every secret, whether
//! the database is sound, and resetting the app.
//!
//! Nothing here traps the user: a lost or damaged master key, a damaged secret or a damaged
//! sign-in leaves the app running (in demo mode if it must) and says what cannot be read;
//! "forget all secrets" clears them and keeps conversations, rules and the audit trail; "reset"
//! deletes the app's own files, after a confirmation that names each, at the next start (so no
//! file is deleted while it is open).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use ts_rs::TS;

use crate::context::Context;
use crate::error::CompanionError;
use crate::options::APP_SECRET;
use crate::paths::AppPaths;
use crate::text::Text;

/// The file whose presence asks the next start to reset the app.
const RESET_MARKER: &str = "reset-requested";

/// A secret that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct UnreadableSecretView {
    /// The vault's name for it.
    pub name: String,
    /// What it is, for people ("Feishu App Secret").
    pub label: Text,
    /// Why it cannot be read.
    pub problem: String,
}

/// Whether the database file is sound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DatabaseCheckView {
    /// The check is still running (it reads the whole file, off the UI's path).
    Checking,
    /// Sound.
    Ok,
    /// Damaged: what was found, the file, and what the user can do.
    Damaged {
        /// For the user.
        message: String,
    },
    /// The check itself could not run.
    Failed {
        /// For the user.
        message: String,
    },
}

/// One thing "Reset the app" deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct ResetItem {
    /// What it is.
    pub what: Text,
    /// Where.
    pub path: String,
}

/// The Settings page's "Data" section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct DataView {
    /// Why no secret can be read (the master key is lost or unusable), if so.
    pub secrets_locked: Option<String>,
    /// The secrets that cannot be read.
    pub unreadable: Vec<UnreadableSecretView>,
    /// Why the stored sign-in could not be read (the user counts as signed out), if so.
    pub sign_in_problem: Option<String>,
    /// The database check.
    pub database: DatabaseCheckView,
    /// What "Reset the app" deletes, for its confirmation.
    pub reset_deletes: Vec<ResetItem>,
}

/// The answer to forgetting every secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct ForgetSecretsResult {
    /// How many secrets were deleted.
    pub deleted: u32,
    /// The Feishu app and model keys are gone: the app runs in demo mode after a restart.
    pub restart_needed: bool,
}

/// A secret's name in words.
fn secret_label(name: &str) -> Text {
    if name == APP_SECRET {
        return Text::new("飞书应用的 App Secret", "Feishu App Secret");
    }
    if name.starts_with("feishu.user_token.") {
        return Text::new("飞书登录", "Feishu sign-in");
    }
    if let Some(preset) = llm::PRESETS.iter().find(|p| p.key_name == Some(name)) {
        return Text::new(
            format!("{} 的 API 密钥", preset.name_zh),
            format!("{} API key", preset.name_en),
        );
    }
    Text::new(name, name)
}

/// What a reset deletes under `paths`: only the app's own files, never the folders or anything
/// else a user keeps in them.
pub fn reset_items(paths: &AppPaths) -> Vec<ResetItem> {
    let database = paths.database();
    let item = |zh: &str, en: &str, path: &Path| ResetItem {
        what: Text::new(zh, en),
        path: path.display().to_string(),
    };
    vec![
        item(
            "数据库：全部对话、待审批事项、规则、审计记录，以及加密保存的登录信息、App Secret 和模型密钥",
            "The database: every conversation, pending approval, rule and the audit trail, and the encrypted sign-in, App Secret and model keys",
            &database,
        ),
        item(
            "演示模式的数据库",
            "The demo mode's database",
            &crate::runtime::demo_database(paths),
        ),
        item("设置", "Settings", &paths.settings_file()),
        item(
            "主密钥文件（仅在系统钥匙串不可用时使用）",
            "The master key file (used only where no system keychain is available)",
            &paths.key_file(),
        ),
    ]
}

/// Every file a reset removes: the items, and SQLite's companions of the database.
fn reset_files(paths: &AppPaths) -> Vec<PathBuf> {
    let with_suffix = |database: &Path, suffix: &str| {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let mut files = Vec::new();
    for database in [paths.database(), crate::runtime::demo_database(paths)] {
        for suffix in ["-wal", "-shm", "-journal"] {
            files.push(with_suffix(&database, suffix));
        }
        files.push(database);
    }
    files.push(paths.settings_file());
    files.push(paths.key_file());
    files
}

/// Asks the next start to reset the app (see [`perform_pending_reset`]).
pub fn request_reset(paths: &AppPaths) -> Result<(), CompanionError> {
    let marker = paths.data_dir.join(RESET_MARKER);
    std::fs::write(&marker, b"reset requested by the user\n").map_err(|e| {
        CompanionError::Other(format!(
            "cannot ask for a reset ({}): {e}",
            marker.display()
        ))
    })
}

/// If a reset was asked for, deletes the app's files under `paths` (the database, settings and
/// key file; nothing else) before anything opens them. Returns the files deleted.
pub fn perform_pending_reset(paths: &AppPaths) -> Result<Vec<PathBuf>, CompanionError> {
    let marker = paths.data_dir.join(RESET_MARKER);
    if !marker.exists() {
        return Ok(Vec::new());
    }
    let deleted = reset_now(paths)?;
    std::fs::remove_file(&marker).map_err(|e| {
        CompanionError::Other(format!(
            "cannot finish the reset ({}): {e}",
            marker.display()
        ))
    })?;
    tracing::warn!(files = deleted.len(), "the app was reset as the user asked");
    Ok(deleted)
}

/// Deletes the app's files under `paths` now. Only for when nothing has them open (the CLI's
/// `--reset`, or [`perform_pending_reset`] at start).
pub fn reset_now(paths: &AppPaths) -> Result<Vec<PathBuf>, CompanionError> {
    let mut deleted = Vec::new();
    for file in reset_files(paths) {
        match std::fs::remove_file(&file) {
            Ok(()) => deleted.push(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CompanionError::Other(format!(
                    "cannot delete {} while resetting the app: {e}. Nothing else was changed after it.",
                    file.display()
                )));
            }
        }
    }
    Ok(deleted)
}

/// How bad a check's outcome is, to report the worst of several databases.
fn severity(state: &store::check::CheckState) -> u8 {
    match state {
        store::check::CheckState::Sound => 0,
        store::check::CheckState::Running => 1,
        store::check::CheckState::Failed(_) => 2,
        store::check::CheckState::Damaged(_) => 3,
    }
}

/// The check of the main database and, in demo mode, of the demo's: the worst of the two
/// (a damage message names its file, so the user knows which one).
fn database_check(ctx: &Context) -> DatabaseCheckView {
    let mut states = vec![ctx.main_store().check_state()];
    let in_use = ctx.store();
    if !Arc::ptr_eq(&in_use, ctx.main_store()) {
        states.push(in_use.check_state());
    }
    let worst = states
        .into_iter()
        .max_by_key(severity)
        .unwrap_or(store::check::CheckState::Running);
    match worst {
        store::check::CheckState::Running => DatabaseCheckView::Checking,
        store::check::CheckState::Sound => DatabaseCheckView::Ok,
        store::check::CheckState::Damaged(damage) => DatabaseCheckView::Damaged {
            message: damage.to_string(),
        },
        store::check::CheckState::Failed(message) => DatabaseCheckView::Failed { message },
    }
}

/// The Settings page's "Data" section.
pub(crate) async fn data_view(ctx: &Context) -> Result<DataView, CompanionError> {
    let health = ctx.vault().health()?;
    let database = database_check(ctx);
    Ok(DataView {
        secrets_locked: health.locked.clone(),
        unreadable: health
            .unreadable
            .into_iter()
            .map(|u| UnreadableSecretView {
                label: secret_label(&u.name),
                name: u.name,
                problem: u.problem,
            })
            .collect(),
        sign_in_problem: ctx.tokens().load_problem(),
        database,
        reset_deletes: reset_items(ctx.paths()),
    })
}

/// "Sign out and forget all secrets": deletes the sign-in, the App Secret and every model
/// key, and replaces a lost or damaged master key; conversations, approvals, rules and the
/// audit trail are kept.
pub(crate) async fn forget_secrets(ctx: &Context) -> Result<ForgetSecretsResult, CompanionError> {
    let deleted = ctx.vault().forget_all()?;
    // The sign-in is gone from the vault; forget it in memory too.
    ctx.tokens().sign_out().await?;
    Ok(ForgetSecretsResult {
        deleted: u32::try_from(deleted).unwrap_or(u32::MAX),
        restart_needed: !ctx.is_demo(),
    })
}

/// "Reset the app": asks the next start to delete everything [`reset_items`] lists. The
/// caller restarts the app.
pub(crate) fn reset_app(ctx: &Context) -> Result<Vec<ResetItem>, CompanionError> {
    request_reset(ctx.paths())?;
    Ok(reset_items(ctx.paths()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_named_in_words() {
        assert_eq!(secret_label(APP_SECRET).en, "Feishu App Secret");
        assert_eq!(secret_label("feishu.user_token.cli_x").zh, "飞书登录");
        assert!(secret_label("deepseek_api_key").en.ends_with("API key"));
        assert_eq!(secret_label("other").en, "other");
    }
}
