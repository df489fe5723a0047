//! The lark-mcp preset through the core, with Feishu's official `@larksuiteoapi/lark-mcp` 0.5.1
//! (installed by scripts/bootstrap in tests/mcp, which `mcp.json`'s `package` points the app
//! at) against the emulator: switched on, it starts and gives the assistant its tools; its reads
//! are what the Feishu API shows to be reads; a call waits for a sign-in and for the scope Feishu
//! names; a Base record it creates is held for approval, approved and written once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use agent::{CallStatus, CallbackContext, Decision, ToolContext, ToolOutcome};
use agent::{ToolReturn, coerce_tool_result};
use companion::{AppPaths, Companion, OpenOptions, Profile, Settings};
use emulator::feishu::api::bitable;
use emulator::feishu::{App, FeishuEmulator, PREFERRED_SCOPES};
use emulator::model_server::{ModelServer, Script, Step};
use serde_json::{Map, Value, json};

const CREATE: &str = "mcp__lark__bitable_v1_appTableRecord_create";
const SEARCH: &str = "mcp__lark__bitable_v1_appTableRecord_search";

/// The npm prefix scripts/bootstrap installs lark-mcp under.
fn tests_mcp() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/@larksuiteoapi/lark-mcp/dist/cli.js")
            .is_file(),
        "lark-mcp is not installed for the tests: run scripts/bootstrap"
    );
    dir
}

/// `mcp.json` with the preset off and lark-mcp found where the tests installed it.
fn point_at_tests_install(paths: &AppPaths) {
    let file = json!({"lark_mcp": {"enabled": false, "package": tests_mcp()}});
    std::fs::write(paths.config_dir.join("mcp.json"), file.to_string()).unwrap();
}

fn agent_tools(app: &Companion) -> Vec<String> {
    app.engine()
        .agent()
        .tools()
        .map(|t| t.name().to_owned())
        .collect()
}

async fn run(app: &Companion, tool: &str, args: Value) -> ToolReturn {
    let tool = app.engine().agent().tool(tool).cloned().expect("the tool");
    let cb = CallbackContext::new(
        "i",
        "assistant",
        "s",
        Default::default(),
        Default::default(),
    );
    let mut ctx = ToolContext::new(cb, "c1");
    tool.run(args.as_object().cloned().unwrap_or_default(), &mut ctx)
        .await
}

fn auth_scopes(answer: ToolReturn) -> Vec<String> {
    match answer {
        ToolReturn::Result(r) if r.outcome == ToolOutcome::NeedsUserAuth => r.auth_scopes,
        other => panic!("expected a sign-in card: {other:?}"),
    }
}

fn base_path(feishu: &FeishuEmulator) -> Value {
    let seed = feishu.seed();
    json!({"app_token": seed.base_app_token, "table_id": seed.base_table_id})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_on_in_demo_mode_it_asks_for_the_scope_feishu_names_then_writes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    point_at_tests_install(&paths);
    let app = common::open(paths.clone()).await;
    let off = app.lark_mcp().await;
    assert!(!off.enabled);
    assert!(off.problem.is_none(), "{:?}", off.problem);
    assert!(off.server.is_none());
    assert!(
        !agent_tools(&app)
            .iter()
            .any(|t| t.starts_with("mcp__lark__"))
    );

    let on = app.set_lark_mcp(true, None).await.unwrap();
    let server = on.server.expect("configured");
    assert_eq!(server.phase, "running", "{:?}", server.error);
    assert!(server.builtin);
    assert!(server.args.contains(&"user_access_token".to_owned()));
    assert!(
        server
            .args
            .contains(&"preset.default,docx.v1.document.create".to_owned())
    );
    let names: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"docx_v1_document_create"), "{names:?}");
    let reads: Vec<&str> = server
        .tools
        .iter()
        .filter(|t| t.runs_without_approval)
        .map(|t| t.name.as_str())
        .collect();
    assert!(reads.contains(&"bitable_v1_appTableRecord_search"));
    assert!(!reads.contains(&"bitable_v1_appTableRecord_create"));
    assert!(
        reads
            .iter()
            .all(|r| on.read_tools.contains(&(*r).to_owned()))
    );
    let tools = agent_tools(&app);
    assert!(tools.contains(&CREATE.to_owned()), "{tools:?}");
    let create = app.engine().agent().tool(CREATE).cloned().unwrap();
    let search = app.engine().agent().tool(SEARCH).cloned().unwrap();
    assert!(create.requires_approval(&Map::new()));
    assert!(!search.requires_approval(&Map::new()));

    let demo = app.demo().unwrap();
    let feishu = &demo.feishu;
    let row = json!({"path": base_path(feishu), "data": {"fields": {"标题": "导出 PDF"}}});
    // Not signed in: the card asks for a sign-in.
    assert!(auth_scopes(run(&app, CREATE, row.clone()).await).is_empty());
    common::sign_in(&app).await;
    // Signed in without Base's scope: Feishu's refusal, through lark-mcp, names it.
    assert_eq!(
        auth_scopes(run(&app, CREATE, row.clone()).await),
        ["base:record:create"]
    );
    assert_eq!(
        auth_scopes(run(&app, SEARCH, json!({"path": base_path(feishu), "data": {}})).await),
        ["base:record:retrieve"]
    );
    common::sign_in_for(&app, vec!["base:record:create".into()]).await;
    let (text, is_error, _) = coerce_tool_result(run(&app, CREATE, row).await);
    assert!(!is_error, "{text}");
    assert!(text.contains("record_id"), "{text}");
    let seed = feishu.seed();
    let written = feishu.base_records_created(&seed.base_app_token, &seed.base_table_id);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["标题"], "导出 PDF");

    // Switched off: its tools leave the assistant; the choice is kept in mcp.json.
    app.set_lark_mcp(false, None).await.unwrap();
    assert!(
        !agent_tools(&app)
            .iter()
            .any(|t| t.starts_with("mcp__lark__"))
    );
    let file = std::fs::read_to_string(paths.config_dir.join("mcp.json")).unwrap();
    assert!(file.contains("\"enabled\": false"), "{file}");
    let refused = app.set_lark_mcp(true, Some("preset.nope".into())).await;
    assert!(refused.unwrap_err().to_string().contains("preset.nope"));
}

const REAL_APP: &str = "cli_lark_mcp_test";

/// The user's own Feishu app (an emulator standing in for open.feishu.cn) with Base's scopes
/// but `lacking`, and a model that searches the Base, then adds a record, then says so.
async fn real_app(dir: &Path, lacking: &[&str]) -> (FeishuEmulator, ModelServer, Companion) {
    let feishu = FeishuEmulator::start().await.unwrap();
    let path = base_path(&feishu);
    let model = ModelServer::start(Script::of_steps(vec![
        Step::call(SEARCH, json!({"path": path, "data": {}})),
        Step::call(
            CREATE,
            json!({"path": path, "data": {"fields": {"标题": "消息撤回", "估分": 3}}}),
        ),
        Step::text("已添加到需求池。"),
    ]))
    .await
    .unwrap();
    let paths = AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = common::free_port();
    settings.feishu.app_id = REAL_APP.into();
    settings.time_zone = "Asia/Shanghai".into();
    settings.model.preset = "custom".into();
    settings.model.base_url = Some(model.base_url());
    settings.model.model = Some("real-model".into());
    settings.save(&paths.settings_file()).unwrap();
    feishu.register_app(App {
        app_id: REAL_APP.into(),
        app_secret: "real-secret".into(),
        redirect_uris: vec![settings.feishu.redirect_url()],
        enabled_scopes: PREFERRED_SCOPES
            .iter()
            .chain(bitable::SCOPES)
            .filter(|s| !lacking.contains(s))
            .map(|s| (*s).to_owned())
            .collect(),
    });
    point_at_tests_install(&paths);
    let app = Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            feishu_base_url: Some(feishu.base_url()),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    app.apply_app_secret("real-secret").await.unwrap();
    assert!(matches!(app.profile(), Profile::Real { .. }));
    (feishu, model, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_engine_a_read_runs_and_a_record_is_held_approved_and_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let (feishu, _model, app) = real_app(dir.path(), &[]).await;
    common::sign_in_for(
        &app,
        vec!["base:record:retrieve".into(), "base:record:create".into()],
    )
    .await;
    let on = app.set_lark_mcp(true, None).await.unwrap();
    let server = on.server.expect("configured");
    assert_eq!(server.phase, "running", "{:?}", server.error);
    // lark-mcp is pointed at the user's Feishu, as the user's app, with a placeholder secret.
    let args = server.args.join(" ");
    assert!(
        args.contains(&format!("-d {}", feishu.base_url())),
        "{args}"
    );
    assert!(args.contains(&format!("-a {REAL_APP}")), "{args}");
    assert!(!args.contains("real-secret"), "{args}");

    let session = app.create_session().await.unwrap();
    let outcome = app
        .send_message(&session, "把消息撤回加到需求池", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let held = app.pending().unwrap().remove(0);
    assert_eq!(held.tool, CREATE, "the search ran without approval");
    assert_eq!(held.status, CallStatus::AwaitingApproval);
    let seed = feishu.seed();
    assert!(
        feishu
            .base_records_created(&seed.base_app_token, &seed.base_table_id)
            .is_empty(),
        "nothing written before approval"
    );
    let searches = feishu
        .requests()
        .iter()
        .filter(|r| r.route.as_deref() == Some(bitable::RECORD_SEARCH) && r.code == Some(0))
        .count();
    assert_eq!(searches, 1);

    let outcome = app.decide(&held.call_id, Decision::Approve).await.unwrap();
    assert_eq!(outcome.status, "completed");
    let written = feishu.base_records_created(&seed.base_app_token, &seed.base_table_id);
    assert_eq!(written.len(), 1, "written once");
    assert_eq!(written[0]["标题"], "消息撤回");
    assert_eq!(feishu.writes_to(bitable::RECORDS), 1);
    assert_eq!(common::last_text(&app, &session), "已添加到需求池。");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_the_app_itself_lacks_gets_the_scope_apply_card() {
    let dir = tempfile::tempdir().unwrap();
    let (feishu, _model, app) = real_app(dir.path(), &["base:record:create"]).await;
    common::sign_in(&app).await;
    let on = app.set_lark_mcp(true, None).await.unwrap();
    assert_eq!(on.server.unwrap().phase, "running");
    let row = json!({"path": base_path(&feishu), "data": {"fields": {"标题": "x"}}});
    // lark-mcp passes Feishu's 99991672 on unchanged; the app reads the scope from it.
    match run(&app, CREATE, row).await {
        ToolReturn::Result(r) => {
            assert_eq!(r.outcome, ToolOutcome::NeedsUserAuth);
            assert_eq!(r.auth_scopes, ["base:record:create"]);
            let url = r.authorize_url.expect("the scope-apply page");
            assert!(url.starts_with(&feishu.base_url()), "{url}");
            assert!(url.contains("page/scope-apply"), "{url}");
            assert!(
                url.contains(REAL_APP) && url.contains("base%3Arecord%3Acreate"),
                "{url}"
            );
        }
        other => panic!("expected the scope-apply card: {other:?}"),
    }
    let seed = feishu.seed();
    assert!(
        feishu
            .base_records_created(&seed.base_app_token, &seed.base_table_id)
            .is_empty()
    );
}

/// The tool list the app classifies is lark-mcp's own: regenerated from the installed package
/// by scripts/lark-mcp-tools, it is the file the app embeds.
#[test]
fn the_embedded_tool_list_is_lark_mcps() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    tests_mcp();
    let out = std::process::Command::new("node")
        .arg(root.join("scripts/lark-mcp-tools"))
        .output()
        .expect("node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let embedded =
        std::fs::read_to_string(root.join("crates/companion/src/mcp/lark/tools.tsv")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == embedded,
        "tools.tsv is not lark-mcp's list: run scripts/lark-mcp-tools > crates/companion/src/mcp/lark/tools.tsv"
    );
}
