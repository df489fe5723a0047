//! The UI's TypeScript types are generated from the Rust view types. This test regenerates them
//! and fails when the committed files in `ui/src/lib/bindings/` differ, so the UI never compiles
//! against a shape the core no longer sends. `UPDATE_BINDINGS=1` rewrites them instead.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use companion::view::*;
use ts_rs::{Config, TS};

fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/bindings")
}

fn generate(dir: &Path) {
    let cfg = Config::new().with_out_dir(dir).with_large_int("number");
    macro_rules! export {
        ($($t:ty),* $(,)?) => { $( <$t as TS>::export_all(&cfg).expect(stringify!($t)); )* };
    }
    export!(
        AppInfo,
        SessionView,
        TimelineView,
        CallView,
        DecisionInput,
        BatchDecision,
        SettlementInput,
        TurnView,
        RuleView,
        AuditView,
        AuditQuery,
        ExportFormat,
        AccountView,
        SettingsView,
        SavedSettings,
        SignInView,
        SignInTicketView,
        UiEventView,
        companion::check::CheckView,
        AutonomyInput,
        EditCheckView,
        ModelListView,
        companion::Settings,
        companion::updates::UpdateStatusView,
        companion::data::DataView,
        companion::data::ForgetSecretsResult,
        companion::user_error::UiError,
        companion::python::view::AssistantView,
        companion::python::view::AssistantInput,
        companion::python::view::PythonRunView,
        companion::python::view::CallbackTryView,
        companion::remote_approval::RemoteApprovalView,
        companion::mcp::view::McpServerView,
        companion::mcp::view::McpServerInput,
        companion::mcp::view::McpImportView,
        companion::mcp::view::McpImportSourceView,
        companion::mcp::questions::McpQuestionView,
        companion::mcp::questions::McpAnswerInput,
        companion::mcp::view::LarkMcpView,
        companion::agents::view::ConnectedAgentsView,
        companion::agents::view::NewAgentView,
        companion::agents::view::AgentToolsInput,
    );
}

fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "ts") {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(name, std::fs::read_to_string(&path).expect("readable"));
        }
    }
    files
}

#[test]
fn committed_bindings_match_the_rust_types() {
    let fresh = tempfile::tempdir().expect("temp dir");
    generate(fresh.path());
    let generated = read_dir(fresh.path());
    assert!(
        generated.contains_key("CallView.ts") && generated.contains_key("Text.ts"),
        "the generator wrote {:?}",
        generated.keys().collect::<Vec<_>>()
    );
    let target = committed_dir();
    if std::env::var_os("UPDATE_BINDINGS").is_some() {
        std::fs::create_dir_all(&target).expect("bindings folder");
        for old in read_dir(&target).keys() {
            std::fs::remove_file(target.join(old)).expect("remove stale binding");
        }
        for (name, text) in &generated {
            std::fs::write(target.join(name), text).expect("write binding");
        }
        return;
    }
    let committed = read_dir(&target);
    let stale: Vec<&String> = generated
        .iter()
        .filter(|(name, text)| committed.get(*name) != Some(text))
        .map(|(name, _)| name)
        .chain(committed.keys().filter(|n| !generated.contains_key(*n)))
        .collect();
    assert!(
        stale.is_empty(),
        "ui/src/lib/bindings is out of date for {stale:?}; run `UPDATE_BINDINGS=1 cargo nextest run -p companion --test bindings`"
    );
}
