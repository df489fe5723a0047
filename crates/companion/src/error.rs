//! The core's one error type, worded for the person using the app.

use crate::settings::SettingsError;

/// An application failure, worded for the person using the app.
#[derive(Debug, thiserror::Error)]
pub enum CompanionError {
    /// Settings.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The database.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The vault.
    #[error(transparent)]
    Vault(#[from] store::VaultError),
    /// The engine.
    #[error(transparent)]
    Engine(#[from] agent::EngineError),
    /// Sign-in.
    #[error(transparent)]
    SignIn(#[from] feishu::SignInError),
    /// Tokens.
    #[error(transparent)]
    Token(#[from] feishu::TokenError),
    /// Anything else, already worded.
    #[error("{0}")]
    Other(String),
}
