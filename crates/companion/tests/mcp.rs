//! Settings → Tools → MCP servers through the core: a server saved with its secret in the vault
//! and only the name in `mcp.json`, its tools given to the agent once started (and at the next
//! start of the app without starting it), marked reads, imports, removal with its secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use companion::mcp::view::{McpSecretInput, McpServerInput};

fn probe() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/probe-server.mjs");
    assert!(
        path.parent()
            .unwrap()
            .join("node_modules/@modelcontextprotocol/sdk")
            .is_dir(),
        "the MCP test servers are not installed: run scripts/bootstrap"
    );
    path
}

fn probe_input(secret: Option<&str>) -> McpServerInput {
    McpServerInput {
        id: None,
        name: "Probe Server".into(),
        transport: "stdio".into(),
        command: "node".into(),
        args: vec![probe().to_string_lossy().into_owned()],
        cwd: None,
        url: String::new(),
        env: vec![McpSecretInput {
            name: "PROBE_TOKEN".into(),
            value: secret.map(str::to_owned),
        }],
        headers: vec![],
        enabled: true,
        trusted: false,
        timeout_secs: 30,
    }
}

/// The user's servers, without the built-in one.
fn own(app: &companion::Companion) -> Vec<companion::mcp::view::McpServerView> {
    app.mcp_servers()
        .into_iter()
        .filter(|s| !s.builtin)
        .collect()
}

fn agent_tools(app: &companion::Companion) -> Vec<String> {
    app.engine()
        .agent()
        .tools()
        .map(|t| t.name().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_server_keeps_its_secret_in_the_vault_and_gives_the_agent_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let app = common::open(paths.clone()).await;
    let saved = app
        .save_mcp_server(probe_input(Some("tok-123")))
        .await
        .unwrap();
    assert_eq!(saved.id, "probe-server");
    // A new server is started at once in the background to list its tools (the assistant
    // needs them before it can call any); see the test below.
    assert!(saved.missing_values.is_empty());
    let file = std::fs::read_to_string(paths.config_dir.join("mcp.json")).unwrap();
    assert!(
        file.contains("PROBE_TOKEN") && !file.contains("tok-123"),
        "{file}"
    );
    let settings = std::fs::read_to_string(paths.settings_file()).unwrap();
    assert!(!settings.contains("tok-123"));

    let running = app.restart_mcp_server("probe-server").await.unwrap();
    assert_eq!(running.phase, "running", "{:?}", running.error);
    let write = running
        .tools
        .iter()
        .find(|t| t.name == "write_note")
        .unwrap();
    assert_eq!(write.agent_name, "mcp__probe-server__write_note");
    assert!(!write.runs_without_approval);
    assert!(agent_tools(&app).contains(&"mcp__probe-server__write_note".to_owned()));
    assert!(
        app.mcp_server_log("probe-server")
            .unwrap()
            .contains("probe server up")
    );

    // The user marks `slow` a read: it runs without approval from now on.
    let marked = app
        .set_mcp_tool_read("probe-server", "slow", true)
        .await
        .unwrap();
    assert!(
        marked
            .tools
            .iter()
            .find(|t| t.name == "slow")
            .unwrap()
            .runs_without_approval
    );

    // Saving again without a new value keeps the stored secret.
    let mut again = probe_input(None);
    again.id = Some("probe-server".into());
    let kept = app.save_mcp_server(again).await.unwrap();
    assert!(kept.missing_values.is_empty());
    assert!(
        kept.tools
            .iter()
            .find(|t| t.name == "slow")
            .unwrap()
            .marked_read,
        "marks kept"
    );
    drop(app);

    // The next start knows the tools without starting the server.
    let app = common::open(paths.clone()).await;
    let view = own(&app);
    assert_eq!(view[0].phase, "idle");
    assert!(agent_tools(&app).contains(&"mcp__probe-server__write_note".to_owned()));

    app.remove_mcp_server("probe-server").await.unwrap();
    assert!(own(&app).is_empty());
    assert!(
        !agent_tools(&app)
            .iter()
            .any(|t| t.starts_with("mcp__probe"))
    );
    // Its secret went with it: a server added again under the same id has none.
    let readded = app.save_mcp_server(probe_input(None)).await.unwrap();
    assert_eq!(readded.id, "probe-server");
    assert_eq!(
        readded.missing_values,
        ["PROBE_TOKEN"],
        "secrets deleted with the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_apps_configuration_is_imported_untrusted_with_its_secrets_apart() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let app = common::open(paths.clone()).await;
    let config = serde_json::json!({"mcpServers": {
        "probe": {"command": "node", "args": [probe()], "env": {"API_KEY": "sk-imported"}},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}}
    }});
    let path = dir.path().join("claude_desktop_config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let imported = app.import_mcp_file(&path.to_string_lossy()).await.unwrap();
    assert_eq!(imported.added, ["probe", "remote"]);
    let servers = own(&app);
    assert!(
        servers
            .iter()
            .all(|s| !s.trusted && s.missing_values.is_empty())
    );
    let file = std::fs::read_to_string(paths.config_dir.join("mcp.json")).unwrap();
    assert!(
        !file.contains("sk-imported") && !file.contains("Bearer x"),
        "{file}"
    );
    // A second import of the same file does not overwrite: new ids.
    let twice = app.import_mcp_file(&path.to_string_lossy()).await.unwrap();
    assert_eq!(twice.added, ["probe-2", "remote-2"]);
    // A damaged file is refused with the reason, and nothing is added.
    let bad = app.import_mcp_servers("{\"other\": 1}").await.unwrap_err();
    assert!(bad.to_string().contains("mcpServers"), "{bad}");
    assert_eq!(own(&app).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_server_list_is_reported_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    std::fs::write(paths.config_dir.join("mcp.json"), "{ not json").unwrap();
    let app = common::open(paths.clone()).await;
    assert!(own(&app).is_empty());
    let err = app
        .save_mcp_server(probe_input(Some("x")))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("mcp.json"), "{err}");
    assert_eq!(
        std::fs::read_to_string(paths.config_dir.join("mcp.json")).unwrap(),
        "{ not json"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_feishu_docs_server_asks_for_a_sign_in_then_writes_with_it() {
    use agent::{CallbackContext, ToolContext, ToolOutcome, ToolReturn};
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let builtin = app
        .mcp_servers()
        .into_iter()
        .find(|s| s.builtin)
        .expect("listed");
    assert_eq!(builtin.id, "feishu");
    let names: Vec<_> = builtin.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["create-doc", "fetch-doc", "locate-doc", "update-doc"]
    );
    let reads: Vec<_> = builtin
        .tools
        .iter()
        .filter(|t| t.runs_without_approval)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        reads,
        ["fetch-doc", "locate-doc"],
        "the app says which read"
    );
    // Someone else's server cannot take its id.
    let mut clash = probe_input(None);
    clash.name = "Feishu".into();
    assert_eq!(app.save_mcp_server(clash).await.unwrap().id, "feishu-2");

    let tool = app
        .engine()
        .agent()
        .tool("mcp__feishu__create-doc")
        .cloned()
        .expect("given to the agent");
    assert!(tool.requires_approval(&serde_json::Map::new()));
    let args = serde_json::json!({"title": "周报", "markdown": "# 周报\n\n本周完成了 MCP。"});
    let args = args.as_object().unwrap().clone();
    let ctx = || {
        let cb = CallbackContext::new(
            "i",
            "assistant",
            "s",
            Default::default(),
            Default::default(),
        );
        ToolContext::new(cb, "c1")
    };
    match tool.run(args.clone(), &mut ctx()).await {
        ToolReturn::Result(r) => {
            assert_eq!(r.outcome, ToolOutcome::NeedsUserAuth);
            assert_eq!(r.auth_scopes, ["docx:document:create"]);
        }
        other => panic!("{other:?}"),
    }
    // What the authorization card does for the held call: sign in for its scopes.
    common::sign_in_for(&app, vec!["docx:document:create".into()]).await;
    let created = tool.run(args, &mut ctx()).await;
    let (text, is_error, _) = agent::coerce_tool_result(created);
    assert!(!is_error, "{text}");
    assert!(text.contains("doc_id"), "{text}");
    let running = app.mcp_servers().into_iter().find(|s| s.builtin).unwrap();
    assert_eq!(running.phase, "running");
    assert!(running.server_info.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_user_has_a_weekly_report_written_through_feishus_docs_server() {
    use agent::{CallStatus, Decision};
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let session = app.create_session().await.unwrap();
    let before = app.demo().unwrap().feishu.documents_created();

    // A write of an MCP server: held for approval like any write, and said so.
    let outcome = app
        .send_message(&session, "帮我写一份周报", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let held = app.pending().unwrap().remove(0);
    assert_eq!(held.tool, "mcp__feishu__create-doc");
    assert_eq!(held.status, CallStatus::AwaitingApproval);
    let preview = held.preview.clone().unwrap();
    assert!(
        preview.summary.zh.contains("飞书文档"),
        "{}",
        preview.summary.zh
    );

    // Approved; then the server needs the user's sign-in, asked on the same card.
    let outcome = app.decide(&held.call_id, Decision::Approve).await.unwrap();
    assert_eq!(outcome.status, "suspended");
    let again = app.pending().unwrap().remove(0);
    assert_eq!(again.status, CallStatus::AwaitingAuth);
    assert_eq!(again.auth_scopes, ["docx:document:create"]);
    common::sign_in(&app).await;
    assert!(app.pending().unwrap().is_empty());
    assert_eq!(
        app.demo().unwrap().feishu.documents_created(),
        before + 1,
        "written once"
    );
    assert_eq!(
        common::last_text(&app, &session),
        "好了：周报已经写进你的飞书文档。"
    );
    let audit = app.audit(&Default::default()).unwrap();
    let dispatched = audit
        .iter()
        .filter(|a| {
            a.kind == "call.dispatched" && a.tool.as_deref() == Some("mcp__feishu__create-doc")
        })
        .count();
    assert!(dispatched >= 1);
    let requested = audit
        .iter()
        .find(|a| a.kind == "approval.requested")
        .unwrap();
    assert_eq!(requested.detail["source"]["mcp_server"], "feishu");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_lists_its_tools_in_the_background_so_the_assistant_can_use_them() {
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    app.save_mcp_server(probe_input(Some("x"))).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !agent_tools(&app).contains(&"mcp__probe-server__write_note".to_owned()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the tools never reached the agent"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let view = own(&app).remove(0);
    assert_eq!(view.phase, "running");
    assert!(view.tools.iter().any(|t| t.name == "write_note"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_question_waits_for_the_users_answer_and_the_call_goes_on_with_it() {
    use companion::mcp::questions::McpAnswerInput;
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut input = probe_input(None);
    input.name = "Everything".into();
    input.args = vec![everything.to_string_lossy().into_owned(), "stdio".into()];
    input.env = vec![];
    let saved = app.save_mcp_server(input).await.unwrap();
    let view = app.restart_mcp_server(&saved.id).await.unwrap();
    assert!(
        view.tools
            .iter()
            .any(|t| t.name == "trigger-elicitation-request"),
        "the server offers its form tool only to a client that can ask the user"
    );
    let tool = app
        .engine()
        .agent()
        .tool("mcp__everything__trigger-elicitation-request")
        .cloned()
        .unwrap();
    let running = tokio::spawn(async move {
        let cb = agent::CallbackContext::new("i", "a", "s", Default::default(), Default::default());
        tool.run(
            serde_json::Map::new(),
            &mut agent::ToolContext::new(cb, "c1"),
        )
        .await
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let question = loop {
        if let Some(q) = app.mcp_questions().into_iter().next() {
            break q;
        }
        assert!(std::time::Instant::now() < deadline, "no question arrived");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        (question.kind.as_str(), question.server_id.as_str()),
        ("form", "everything")
    );
    assert_eq!(
        question.defaults["integer"], 42,
        "the form starts with the schema's defaults"
    );
    // Without the required name the answer is refused and the question keeps waiting.
    let mut values = question.defaults.clone();
    let refused = app.answer_mcp_question(
        &question.id,
        McpAnswerInput {
            action: "accept".into(),
            content: Some(values.clone()),
        },
    );
    assert!(refused.unwrap_err().to_string().contains("name"));
    assert_eq!(app.mcp_questions().len(), 1);
    values.insert("name".into(), serde_json::json!("林晓"));
    app.answer_mcp_question(
        &question.id,
        McpAnswerInput {
            action: "accept".into(),
            content: Some(values),
        },
    )
    .unwrap();
    let (text, is_error, _) = agent::coerce_tool_result(running.await.unwrap());
    assert!(!is_error, "{text}");
    assert!(text.contains("林晓"), "{text}");
    assert!(app.mcp_questions().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_the_core_cannot_use_is_refused_with_the_reason_and_nothing_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let app = common::open(paths.clone()).await;
    let mut input = probe_input(Some("secret-value"));
    input.transport = "http".into();
    input.url = "file:///etc/passwd".into();
    input.headers = vec![McpSecretInput {
        name: "Authorization".into(),
        value: Some("Bearer kept-nowhere".into()),
    }];
    let err = app.save_mcp_server(input).await.unwrap_err();
    assert!(err.to_string().contains("file:///etc/passwd"), "{err}");
    assert!(own(&app).is_empty(), "nothing was added");
    assert!(
        !paths.config_dir.join("mcp.json").exists(),
        "nothing was written"
    );
    let mut unknown = probe_input(None);
    unknown.transport = "carrier-pigeon".into();
    let err = app.save_mcp_server(unknown).await.unwrap_err();
    assert!(err.to_string().contains("carrier-pigeon"), "{err}");
}
