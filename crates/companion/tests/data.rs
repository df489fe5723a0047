//! Nothing traps the user: a lost master key or a damaged secret leaves the app running and
//! says what cannot be read; "forget all secrets" keeps conversations, rules and the audit trail;
//! "reset the app" deletes exactly what its confirmation names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agent::persist::AuditFilter;
use companion::data::DatabaseCheckView;
use companion::{AppPaths, Companion, OpenOptions, Settings};

fn paths(dir: &std::path::Path) -> AppPaths {
    let paths = AppPaths::under(dir);
    paths.create().unwrap();
    if !paths.settings_file().exists() {
        let mut settings = Settings::default();
        settings.feishu.redirect_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        settings.feishu.app_id = "cli_a1b2c3d4".into();
        settings.save(&paths.settings_file()).unwrap();
    }
    paths
}

/// Opens with a master key that lives only as long as this `Companion`: the next open has lost
/// it, as a user whose keychain was wiped or whose key file was replaced.
async fn open(dir: &std::path::Path) -> Companion {
    Companion::open(
        paths(dir),
        OpenOptions {
            memory_keys: true,
            ..OpenOptions::default()
        },
    )
    .await
    .expect("the app opens")
}

async fn database_checked(app: &Companion) -> DatabaseCheckView {
    for _ in 0..200 {
        let view = app.data_view().await.unwrap().database;
        if view != DatabaseCheckView::Checking {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the database check never finished")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_master_key_leaves_the_app_running_and_forgetting_the_secrets_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let session = {
        let app = open(dir.path()).await;
        app.set_app_secret("s3cret").unwrap();
        app.set_model_key("deepseek", "sk-test").unwrap();
        let session = app.create_session().await.unwrap();
        app.send_message(&session, "明天我有什么安排？", false)
            .await
            .unwrap();
        session
    };
    let audit_before;
    {
        // The key is gone: before, opening failed here and the app showed only an error.
        let app = open(dir.path()).await;
        assert!(app.is_demo(), "nothing readable: demo mode");
        let data = app.data_view().await.unwrap();
        let locked = data.secrets_locked.expect("the vault says it is locked");
        assert!(locked.contains("master key"), "{locked}");
        let mut names: Vec<&str> = data.unreadable.iter().map(|u| u.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["deepseek_api_key", "feishu.app_secret"]);
        assert!(
            data.unreadable
                .iter()
                .any(|u| u.label.en == "Feishu App Secret")
        );
        let page = app.settings_view().unwrap();
        assert!(
            !page.app_secret_set,
            "an unreadable secret is asked for again"
        );
        assert!(page.presets.iter().all(|p| !p.key_set));
        // A secret cannot be written under a lost key; the error says how to get out.
        let refused = app.set_app_secret("new").unwrap_err().to_string();
        assert!(refused.contains("forget all secrets"), "{refused}");
        audit_before = app.audit(&AuditFilter::default()).unwrap().len();
        assert!(audit_before > 0);

        let forgotten = app.forget_secrets().await.unwrap();
        assert_eq!(forgotten.deleted, 2);
        let data = app.data_view().await.unwrap();
        assert_eq!(data.secrets_locked, None);
        assert!(data.unreadable.is_empty());
        // Conversations and the audit trail are kept.
        assert!(app.session_events(&session).unwrap().len() > 1);
        assert_eq!(
            app.audit(&AuditFilter::default()).unwrap().len(),
            audit_before
        );
        // And secrets can be entered again.
        app.set_app_secret("again").unwrap();
        assert!(app.settings_view().unwrap().app_secret_set);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_secret_row_is_named_in_settings_and_can_be_entered_again() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(dir.path());
    // A key file of the test's own (never the OS keychain), so the key survives the reopen.
    let open_with_file = || {
        let store = std::sync::Arc::new(store::Store::open(paths.database()).unwrap());
        store::Vault::open_or_locked(
            store,
            Box::new(store::vault::KeyFile::new(paths.key_file())),
        )
        .unwrap()
    };
    let vault = open_with_file();
    vault.put("feishu.app_secret", b"s3cret").unwrap();
    vault.put("deepseek_api_key", b"sk-test").unwrap();
    drop(vault);
    // Flip a byte of one ciphertext: it no longer decrypts.
    let conn = rusqlite::Connection::open(paths.database()).unwrap();
    conn.execute(
        "UPDATE secrets SET ciphertext = x'00112233445566778899aabbccddeeff00' WHERE name = 'deepseek_api_key'",
        [],
    )
    .unwrap();
    drop(conn);
    let vault = open_with_file();
    let health = vault.health().unwrap();
    assert_eq!(health.locked, None);
    assert_eq!(health.unreadable.len(), 1);
    assert_eq!(health.unreadable[0].name, "deepseek_api_key");
    assert!(health.unreadable[0].problem.contains("cannot be decrypted"));
    // Entering it again replaces the damaged row.
    vault.put("deepseek_api_key", b"sk-new").unwrap();
    assert!(vault.health().unwrap().unreadable.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_deletes_what_its_confirmation_names_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let session = app.create_session().await.unwrap();
    assert_eq!(database_checked(&app).await, DatabaseCheckView::Ok);
    let named = app.reset_app().unwrap();
    let paths = app.paths().clone();
    let named_paths: Vec<String> = named.iter().map(|i| i.path.clone()).collect();
    assert!(named_paths.contains(&paths.database().display().to_string()));
    assert!(named_paths.contains(&paths.settings_file().display().to_string()));
    assert!(
        named
            .iter()
            .all(|i| !i.what.zh.is_empty() && !i.what.en.is_empty())
    );
    // Nothing is deleted while the app has it open.
    assert!(paths.database().exists());
    drop(app);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A file of the user's own in the same folder is not the app's to delete.
    std::fs::write(paths.data_dir.join("notes.txt"), "mine").unwrap();
    let app = Companion::open(
        paths.clone(),
        OpenOptions {
            memory_keys: true,
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(
        app.list_sessions().await.unwrap().is_empty(),
        "{session} survived the reset"
    );
    assert_eq!(app.settings(), Settings::default());
    assert!(paths.data_dir.join("notes.txt").exists());
    assert!(!paths.data_dir.join("reset-requested").exists());
    // Opening again does not reset again.
    let kept = app.create_session().await.unwrap();
    drop(app);
    let app = open(dir.path()).await;
    assert!(
        app.list_sessions()
            .await
            .unwrap()
            .iter()
            .any(|s| s.id == kept)
    );
}

/// Fills `path` with a database of a few hundred events, then damages a page in its middle.
fn damaged_database(path: &std::path::Path) {
    {
        let store = store::Store::open(path).unwrap();
        let session = store
            .create_session("app", "me", None, &agent::StateMap::new())
            .unwrap();
        for i in 0..400 {
            let event = agent::Event::new("inv", "user").with_content(agent::Content::user_text(
                format!("message {i} {}", "x".repeat(200)),
            ));
            store.append_event(&session.id, i, &event).unwrap();
        }
    }
    // Fold the WAL into the file, so the damage is in the file itself.
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_update(None, "journal_mode", "DELETE")
        .unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let page = 4096;
    assert!(bytes.len() > 8 * page, "{}", bytes.len());
    for b in &mut bytes[5 * page..5 * page + 200] {
        *b = 0xA5;
    }
    std::fs::write(path, &bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_demo_database_is_reported_in_settings_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(dir.path());
    let demo_db = companion::runtime::demo_database(&paths);
    damaged_database(&demo_db);
    let before = std::fs::read(&demo_db).unwrap();
    // No App Secret: the app starts in demo mode, on demo.db.
    let app = open(dir.path()).await;
    assert!(app.is_demo());
    match database_checked(&app).await {
        DatabaseCheckView::Damaged { message } => {
            assert!(
                message.contains(&demo_db.display().to_string()),
                "{message}"
            );
        }
        other => panic!("the damaged demo database was not reported: {other:?}"),
    }
    drop(app);
    // The check only reads: the damaged page is as it was.
    let after = std::fs::read(&demo_db).unwrap();
    assert_eq!(
        after[5 * 4096..5 * 4096 + 200],
        before[5 * 4096..5 * 4096 + 200]
    );
}
