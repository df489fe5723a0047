//! What every command answers, and how it runs the core's synchronous functions: shared by the
//! command files ([`crate::commands`], [`crate::agents`], [`crate::assistant`], [`crate::mcp`]),
//! which import it from here so that none of them depends on another.

use companion::user_error::UiError;

/// What a command answers: its value, or the error as the user should read it (in both
/// languages, with a code the UI can act on: [`UiError`]).
pub(crate) type Answer<T> = Result<T, UiError>;

pub(crate) fn text(e: impl Into<UiError>) -> UiError {
    e.into()
}

/// Runs one of the core's synchronous functions on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Answer<T> + Send + 'static,
) -> Answer<T> {
    tauri::async_runtime::spawn_blocking(f)
        .await
        .map_err(UiError::other)?
}
