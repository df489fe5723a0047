//! The document tools over MCP: what each does to the tenant's documents, read back over MCP
//! and through the Open API path the app's docs tool uses (`docs/v1/content`).

use emulator::feishu::FeishuEmulator;
use serde_json::{Value, json};

use super::{APP, CREATE, READ, WRITE, call, connect_as, http, ok, payload};

async fn open_api_markdown(emulator: &FeishuEmulator, token: &str, document_id: &str) -> String {
    let body: Value = http()
        .get(format!(
            "{}/open-apis/docs/v1/content?doc_token={document_id}&doc_type=docx&content_type=markdown",
            emulator.base_url()
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["code"], 0, "{body}");
    body["data"]["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn create_doc_then_fetch_doc_round_trips_the_markdown() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let client = connect_as(&emulator, &emulator.issue_token(APP, &[READ, CREATE])).await;
    // Blocks come back one blank line apart, as the emulator's docs/v1/content renders them.
    let markdown = "## 目标\n\n- 导出 **Excel**\n\n- 首页 `P95` < 800ms\n\n普通段落";
    let created = ok(
        &client,
        "create-doc",
        json!({"title": "评审纪要", "markdown": markdown}),
    )
    .await;
    let doc_id = created["doc_id"].as_str().unwrap();
    assert!(
        created["doc_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/docx/{doc_id}")),
        "{created}"
    );
    let fetched = ok(
        &client,
        "fetch-doc",
        json!({"doc_id": doc_id, "skip_task_detail": true}),
    )
    .await;
    assert_eq!(fetched["title"], "评审纪要");
    assert_eq!(fetched["markdown"], markdown);
    assert_eq!(fetched["has_more"], false);
    // A URL works as well as a token, and offset/limit page by characters.
    let url = created["doc_url"].as_str().unwrap();
    let page = ok(
        &client,
        "fetch-doc",
        json!({"doc_id": url, "offset": 3, "limit": 2}),
    )
    .await;
    assert_eq!(page["markdown"], "目标");
    assert_eq!(page["has_more"], true);
    // Under a wiki node the link is the new node's, and it reaches the document.
    let node = emulator.seed().onboarding_wiki_node;
    let in_wiki = ok(
        &client,
        "create-doc",
        json!({"title": "知识库页", "markdown": "页内容", "wiki_node": node}),
    )
    .await;
    let wiki_url = in_wiki["doc_url"].as_str().unwrap();
    assert!(wiki_url.contains("/wiki/wikcn"), "{in_wiki}");
    let fetched = ok(&client, "fetch-doc", json!({"doc_id": wiki_url})).await;
    assert_eq!(fetched["markdown"], "页内容");
    let both = call(
        &client,
        "create-doc",
        json!({"markdown": "x", "wiki_space": "my_library", "folder_token": "fldcn1"}),
    )
    .await
    .unwrap();
    assert_eq!(both.is_error, Some(true));
    assert!(
        payload(&both)["error"]
            .as_str()
            .unwrap()
            .starts_with("[VALIDATION:1001]")
    );
}

#[tokio::test]
async fn documents_are_shared_with_the_open_api_both_ways() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let token = emulator.issue_token(APP, &[READ, CREATE, WRITE, "docs:document.content:read"]);
    let client = connect_as(&emulator, &token).await;
    let created = ok(
        &client,
        "create-doc",
        json!({"title": "经 MCP 创建", "markdown": "第一段"}),
    )
    .await;
    let doc_id = created["doc_id"].as_str().unwrap();
    assert_eq!(
        open_api_markdown(&emulator, &token, doc_id).await,
        "# 经 MCP 创建\n\n第一段"
    );
    assert_eq!(emulator.block_count(doc_id), Some(1));
    // A seeded document reads the same through both.
    let prd = emulator.seed().prd_document_id;
    let fetched = ok(&client, "fetch-doc", json!({"doc_id": prd})).await;
    let open_api = open_api_markdown(&emulator, &token, &prd).await;
    let title = fetched["title"].as_str().unwrap();
    assert_eq!(
        open_api,
        format!("# {title}\n\n{}", fetched["markdown"].as_str().unwrap())
    );
    // A wiki node's URL reaches the document behind it.
    let seed = emulator.seed();
    let node_url = format!(
        "https://demo-corp.feishu.cn/wiki/{}",
        seed.onboarding_wiki_node
    );
    let wiki = ok(&client, "fetch-doc", json!({"doc_id": node_url})).await;
    let behind = open_api_markdown(&emulator, &token, &seed.onboarding_document_id).await;
    assert!(behind.ends_with(wiki["markdown"].as_str().unwrap()));
    // A document the Open API makes (as the app's docs tool does) is read over MCP.
    let base = emulator.base_url();
    let made: Value = http()
        .post(format!("{base}/open-apis/docx/v1/documents"))
        .bearer_auth(&token)
        .json(&json!({"title": "经 Open API 创建"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let made = made["data"]["document"]["document_id"].as_str().unwrap();
    let appended: Value = http()
        .post(format!(
            "{base}/open-apis/docx/v1/documents/{made}/blocks/{made}/children"
        ))
        .bearer_auth(&token)
        .json(
            &json!({"children": [{"block_type": 2, "text": {"elements": [
                {"text_run": {"content": "来自 Open API"}}
            ]}}]}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(appended["code"], 0, "{appended}");
    let read = ok(&client, "fetch-doc", json!({"doc_id": made})).await;
    assert_eq!(read["title"], "经 Open API 创建");
    assert_eq!(read["markdown"], "来自 Open API");
    // An MCP update shows in the Open API.
    ok(
        &client,
        "update-doc",
        json!({"doc_id": doc_id, "mode": "append", "markdown": "- 追加的一项"}),
    )
    .await;
    assert_eq!(
        open_api_markdown(&emulator, &token, doc_id).await,
        "# 经 MCP 创建\n\n第一段\n\n- 追加的一项"
    );
}

#[tokio::test]
async fn update_doc_edits_at_the_selection_in_every_mode() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let client = connect_as(
        &emulator,
        &emulator.issue_token(APP, &[READ, CREATE, WRITE]),
    )
    .await;
    let start = "## 背景\n\n张三负责。\n\n## 方案\n\n旧方案，张三评审。\n\n## 废弃\n\n不要了";
    let created = ok(
        &client,
        "create-doc",
        json!({"title": "t", "markdown": start}),
    )
    .await;
    let doc = created["doc_id"].as_str().unwrap().to_owned();
    let update = |args: Value| {
        let mut args = args;
        args["doc_id"] = json!(doc);
        args
    };
    let all = ok(
        &client,
        "update-doc",
        update(
            json!({"mode": "replace_all", "selection_with_ellipsis": "张三", "markdown": "李四"}),
        ),
    )
    .await;
    assert_eq!(all["success"], true);
    assert_eq!(all["replace_count"], 2);
    ok(
        &client,
        "update-doc",
        update(json!({"mode": "replace_range", "selection_by_title": "## 方案", "markdown": "## 方案\n\n新方案。"})),
    )
    .await;
    ok(
        &client,
        "update-doc",
        update(json!({"mode": "delete_range", "selection_by_title": "废弃"})),
    )
    .await;
    ok(
        &client,
        "update-doc",
        update(json!({"mode": "insert_before", "selection_with_ellipsis": "## 背景", "markdown": "> 摘要", "new_title": "t2"})),
    )
    .await;
    ok(
        &client,
        "update-doc",
        update(json!({"mode": "insert_after", "selection_with_ellipsis": "李四...负责。", "markdown": "补充"})),
    )
    .await;
    let fetched = ok(&client, "fetch-doc", json!({"doc_id": doc})).await;
    assert_eq!(fetched["title"], "t2");
    assert_eq!(
        fetched["markdown"],
        "> 摘要\n\n## 背景\n\n李四负责。\n\n补充\n\n## 方案\n\n新方案。"
    );
    // A selection that matches nothing fails as a tool, in the documented error shape.
    let missing = call(
        &client,
        "update-doc",
        update(
            json!({"mode": "replace_range", "selection_with_ellipsis": "不存在", "markdown": "x"}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(missing.is_error, Some(true));
    let error = payload(&missing)["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("[SELECTION:3001]"), "{error}");
    ok(
        &client,
        "update-doc",
        update(json!({"mode": "overwrite", "markdown": "全新"})),
    )
    .await;
    let fetched = ok(&client, "fetch-doc", json!({"doc_id": doc})).await;
    assert_eq!(fetched["markdown"], "全新");
}

#[tokio::test]
async fn locate_doc_names_the_blocks_a_selection_touches() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let client = connect_as(&emulator, &emulator.issue_token(APP, &[READ, CREATE])).await;
    let created = ok(
        &client,
        "create-doc",
        json!({"markdown": "甲段\n\n乙段开始\n\n乙段结束\n\n丙段"}),
    )
    .await;
    let doc = created["doc_id"].as_str().unwrap();
    let located = ok(
        &client,
        "locate-doc",
        json!({"doc_id": doc, "selection_with_ellipsis": "乙段开始...结束", "limit": 5}),
    )
    .await;
    assert_eq!(located["match_count"], 1);
    let found = &located["matches"][0];
    let raw: Vec<&str> = found["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["raw_markdown"].as_str().unwrap())
        .collect();
    assert_eq!(raw, ["乙段开始", "乙段结束"]);
    assert_eq!(found["anchor_block_id"], found["blocks"][0]["block_id"]);
    assert_eq!(found["parent_block_id"], doc);
    let none = ok(
        &client,
        "locate-doc",
        json!({"doc_id": doc, "selection_with_ellipsis": "丁"}),
    )
    .await;
    assert_eq!(none["match_count"], 0);
}
