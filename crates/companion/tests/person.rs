//! Conversations belong to the person, not to a sign-in (issue 13): they, their waiting
//! approvals and their titles stay listed across sign-out and token loss; a different person
//! signing in is told, and does not see the first person's data, which comes back with them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use companion::Companion;

mod common;

/// Signs in as whoever the emulator signs in; answers who was signed in before, if someone else.
async fn sign_in(app: &Companion) -> Option<String> {
    common::sign_in(app).await.1
}

async fn open(dir: &std::path::Path) -> Companion {
    common::open_demo(dir).await
}

async fn titles(app: &Companion) -> Vec<String> {
    let mut titles: Vec<String> = app
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.title)
        .collect();
    titles.sort();
    titles
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_stay_with_the_person_across_sign_out_and_apart_from_another_person() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    assert!(app.app_info().person.is_none(), "nobody signed in yet");

    // Before any sign-in: a conversation, whose read needs a sign-in.
    let first = app.create_session().await.unwrap();
    app.send_message(&first, "明天我有什么安排？", false)
        .await
        .unwrap();
    assert_eq!(
        sign_in(&app).await,
        None,
        "the first person switches from nobody"
    );
    assert_eq!(app.app_info().person.unwrap().name, "林晓");
    // A second conversation, with an approval waiting.
    let second = app.create_session().await.unwrap();
    app.send_message(&second, "帮我约个产品评审会", false)
        .await
        .unwrap();
    assert_eq!(app.pending_calls().unwrap().len(), 1);
    let before = titles(&app).await;
    assert_eq!(before.len(), 2, "{before:?}");

    // Signing out ends the sign-in, not the person: everything stays listed, with titles.
    app.sign_out().await.unwrap();
    assert!(app.account().await.unwrap().is_none());
    assert_eq!(titles(&app).await, before);
    assert_eq!(app.pending_calls().unwrap().len(), 1);
    assert_eq!(
        app.app_info().person.unwrap().name,
        "林晓",
        "the status bar still knows whose conversations these are"
    );

    // Someone else signs in: told so, and 林晓's conversations and approvals are kept apart.
    let demo = app.demo().unwrap();
    let mut other = emulator::feishu::demo_user();
    other.name = "张伟".into();
    other.open_id = "ou_demo_zhangwei".into();
    other.union_id = "on_demo_zhangwei".into();
    demo.feishu.set_user(other);
    assert_eq!(sign_in(&app).await.as_deref(), Some("林晓"));
    assert_eq!(app.app_info().person.unwrap().name, "张伟");
    assert!(
        titles(&app).await.is_empty(),
        "张伟 sees 林晓's conversations"
    );
    assert!(
        app.pending_calls().unwrap().is_empty(),
        "张伟 sees 林晓's approvals"
    );
    let theirs = app.create_session().await.unwrap();
    app.send_message(&theirs, "帮我约个产品评审会", false)
        .await
        .unwrap();
    assert_eq!(titles(&app).await.len(), 1);

    // 林晓 signs in again: her conversations and her waiting approval are back, 张伟's are not.
    demo.feishu.set_user(emulator::feishu::demo_user());
    assert_eq!(sign_in(&app).await.as_deref(), Some("张伟"));
    assert_eq!(titles(&app).await, before);
    let pending = app.pending_calls().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].session_id, second);
}
