//! A token store that fails at the wrong moment, and a stored sign-in that cannot be read: the
//! user stays signed in where that is possible, and is never locked out where it is not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use emulator::feishu::{App, FeishuEmulator};
use feishu::{MemoryTokenStore, StoredToken, TokenError, TokenStore, VaultTokenStore};
use secrecy::ExposeSecret as _;

fn app() -> App {
    App {
        app_id: "cli_token_faults".into(),
        app_secret: "secret".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec!["calendar:calendar:readonly".into(), "offline_access".into()],
    }
}

/// A store whose next `fail_saves` saves fail, as a full disk or a locked database would.
#[derive(Debug, Default)]
struct FlakyStore {
    inner: MemoryTokenStore,
    fail_saves: AtomicUsize,
    saves: AtomicUsize,
}

impl TokenStore for FlakyStore {
    fn load(&self) -> Result<Option<StoredToken>, TokenError> {
        self.inner.load()
    }
    fn save(&self, token: &StoredToken) -> Result<(), TokenError> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        if self
            .fail_saves
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(TokenError::Store("database is locked".into()));
        }
        self.inner.save(token)
    }
    fn clear(&self) -> Result<(), TokenError> {
        self.inner.clear()
    }
}

#[tokio::test]
async fn a_failed_save_after_a_refresh_keeps_the_user_signed_in_and_is_retried() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let store = Arc::new(FlakyStore::default());
    let manager = common::sign_in_with_store(
        &emulator,
        app(),
        &["calendar:calendar:readonly"],
        store.clone(),
    )
    .await;
    let first_refresh = store.inner.load().unwrap().unwrap().refresh_token.unwrap();

    // Feishu rejects the access token; the refresh rotates the refresh token, and saving the
    // new one fails twice.
    let stale = manager.access_token().await.unwrap();
    emulator.expire_access_tokens();
    store.fail_saves.store(2, Ordering::SeqCst);
    let token = manager
        .refresh_after_rejection(&stale)
        .await
        .expect("a failed save signed the user out");
    assert!(emulator.token_has_scope(token.expose_secret(), "calendar:calendar:readonly"));
    let account = manager.account().await.unwrap();
    assert!(account.is_some(), "still signed in");

    // The next uses try the save again until it lands; the stored token is the rotated one.
    manager.access_token().await.unwrap();
    manager.access_token().await.unwrap();
    let stored = store.inner.load().unwrap().unwrap();
    assert_eq!(stored.access_token.expose_secret(), token.expose_secret());
    let second_refresh = stored.refresh_token.clone().unwrap();
    assert_ne!(
        second_refresh.expose_secret(),
        first_refresh.expose_secret()
    );

    // Another refresh uses the rotated token: reusing the old one would be answered 20073 by
    // Feishu and end the sign-in.
    emulator.expire_access_tokens();
    let again = manager.refresh_after_rejection(&token).await.unwrap();
    assert_ne!(again.expose_secret(), token.expose_secret());
    assert!(emulator.token_has_scope(again.expose_secret(), "calendar:calendar:readonly"));
    assert!(manager.account().await.unwrap().is_some());
}

#[tokio::test]
async fn a_damaged_stored_sign_in_counts_as_signed_out_and_signing_in_again_replaces_it() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    let vault = Arc::new(
        store::Vault::open(
            Arc::new(store::Store::open(&db).unwrap()),
            Box::new(store::vault::MemoryKeySource::new()),
        )
        .unwrap(),
    );
    let token_store = Arc::new(VaultTokenStore::new(vault.clone(), &app().app_id));
    let name = format!("feishu.user_token.{}", app().app_id);

    for damage in ["not json", "{\"access_token\": 5}"] {
        vault.put(&name, damage.as_bytes()).unwrap();
        let manager = Arc::new(feishu::TokenManager::new(
            common::oauth(&emulator, &app().app_id, &app().app_secret),
            token_store.clone(),
            Arc::new(agent::SystemClock),
        ));
        // Not an error on every call: signed out, with the reason kept for Settings.
        assert!(matches!(
            manager.access_token().await,
            Err(TokenError::NotSignedIn)
        ));
        assert_eq!(manager.account().await.unwrap(), None);
        let problem = manager.load_problem().expect("the damage is reported");
        assert!(problem.contains("sign in again"), "{problem}");
        // Signing in again replaces the damaged row.
        common::sign_in_again(&emulator, app(), &["calendar:calendar:readonly"], &manager).await;
        assert!(manager.access_token().await.is_ok());
        assert_eq!(manager.load_problem(), None);
        assert!(token_store.load().unwrap().is_some());
    }

    // Signing out of a damaged sign-in removes the row.
    vault.put(&name, b"garbage").unwrap();
    let manager = feishu::TokenManager::new(
        common::oauth(&emulator, &app().app_id, &app().app_secret),
        token_store.clone(),
        Arc::new(agent::SystemClock),
    );
    assert!(manager.load_problem().is_none());
    assert_eq!(manager.account().await.unwrap(), None);
    assert!(manager.load_problem().is_some());
    manager.sign_out().await.unwrap();
    assert!(vault.get(&name).unwrap().is_none());
    assert_eq!(manager.load_problem(), None);
}
