//! The model picker of settings asks the service itself which models it offers, with the
//! preset's default preselected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::open_demo as open;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_come_from_the_service_with_the_default_preselected() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    // The demo's model server speaks the OpenAI-compatible `GET /v1/models`, as Ollama does.
    let url = app.demo().unwrap().model.base_url();
    let list = app.list_models("ollama", Some(url)).await.unwrap();
    assert_eq!(list.preset, "ollama");
    assert_eq!(list.selected, llm::preset("ollama").unwrap().default_model);
    assert_eq!(list.default_model, list.selected);
    assert!(list.models.contains(&list.selected), "{list:?}");
    assert!(
        list.models.len() >= 2,
        "the service's own model too: {list:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preset_needing_a_key_asks_for_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let error = app
        .list_models("openai", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("API key"), "{error}");
    assert!(error.contains("API 密钥"), "{error}");
}
