//! Issue 16: the agent the user shapes is swapped in for the next turn, without a restart, and
//! a user's tool is named in the audit trail by its source.

use super::*;
use agent::{AgentTool, ToolContext};

fn tool_names(request: &LlmRequest) -> Vec<String> {
    let mut names: Vec<String> = request
        .config
        .as_ref()
        .unwrap()
        .visible_function_declarations()
        .map(|d| d.name.clone())
        .collect();
    names.sort();
    names
}

fn instruction(request: &LlmRequest) -> String {
    request
        .config
        .as_ref()
        .unwrap()
        .system_instruction
        .as_ref()
        .unwrap()
        .text()
}

#[tokio::test]
async fn a_swapped_agent_answers_the_next_turn_and_a_waiting_approval_survives_the_swap() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "hi"})),
        call("find_note", json!({})),
        say("找到了。"),
        say("消息已发出。"),
    ]);
    let first = h.send("给 a 发 hi").await;
    assert_eq!(first.status, InvocationStatus::Suspended);
    let held = h.only_pending();

    // The user changes the instruction, turns list_events off and adds a tool of their own.
    let notes: Runs = Arc::default();
    let swapped = LlmAgent::builder("assistant", h.model.clone())
        .instruction("Answer in one word.")
        .tool(recording_tool("send_message", Approval::Always, &h.writes))
        .tool(recording_tool("find_note", Approval::Never, &notes))
        .build()
        .unwrap();
    h.engine.set_agent(swapped).unwrap();
    assert_eq!(h.engine.agent().instruction, "Answer in one word.");

    let second = h.send("找一下笔记").await;
    assert_eq!(second.status, InvocationStatus::Completed);
    assert_eq!(notes.lock().unwrap().len(), 1, "the new tool ran");
    let requests = h.model.requests();
    assert_eq!(instruction(&requests[0]), "You help with Feishu.");
    assert_eq!(tool_names(&requests[0]), ["list_events", "send_message"]);
    assert_eq!(instruction(&requests[1]), "Answer in one word.");
    assert_eq!(tool_names(&requests[1]), ["find_note", "send_message"]);

    // The approval held before the swap is still waiting, in the same session, and runs.
    assert_eq!(h.only_pending().call_id, held.call_id);
    assert_eq!(
        h.events()[0].content.as_ref().unwrap().text(),
        "给 a 发 hi",
        "the session's history is kept"
    );
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(h.writes.lock().unwrap().len(), 1);
    assert!(h.pending().is_empty());
}

#[tokio::test]
async fn a_held_call_whose_tool_the_swap_removed_is_answered_not_run() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "hi"})),
        say("没有发出。"),
    ]);
    h.send("给 a 发 hi").await;
    let held = h.only_pending();
    let without = LlmAgent::builder("assistant", h.model.clone())
        .instruction("You help with Feishu.")
        .build()
        .unwrap();
    h.engine.set_agent(without).unwrap();
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert!(h.writes.lock().unwrap().is_empty(), "a removed tool ran");
    let done = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(done.status, CallStatus::Done);
    assert_ne!(done.outcome, Some(ToolOutcome::Completed));
}

#[tokio::test]
async fn an_agent_tree_with_two_agents_of_one_name_is_refused_and_the_old_one_kept() {
    let h = harness(vec![say("好。")]);
    let child = LlmAgent::builder("assistant", h.model.clone())
        .build()
        .unwrap();
    let broken = LlmAgent::builder("assistant", h.model.clone())
        .instruction("broken")
        .sub_agent(child)
        .build()
        .unwrap();
    assert!(h.engine.set_agent(broken).is_err());
    assert_eq!(h.engine.agent().instruction, "You help with Feishu.");
}

/// A tool that says where its code comes from, as a user's Python tool does; `fails` makes
/// its run fail, as a Python tool that raises does.
struct SourcedTool {
    runs: Runs,
    fails: bool,
}

#[async_trait::async_trait]
impl AgentTool for SourcedTool {
    fn name(&self) -> &str {
        "save_note"
    }
    fn description(&self) -> &str {
        "Saves a note."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"title": {"type": "string"}}})
    }
    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        true
    }
    fn source(&self) -> Option<Value> {
        Some(json!({"python_file": "notes.py", "function": "save_note"}))
    }
    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn {
        self.runs
            .lock()
            .unwrap()
            .push((ctx.idempotency_key.clone(), args));
        if self.fails {
            return ToolResult::new(ToolOutcome::Failed)
                .with_content("ValueError: the notebook is full")
                .into();
        }
        ToolReturn::from(json!({"saved": true}))
    }
}

#[tokio::test]
async fn the_audit_names_a_user_tools_file_and_function_when_it_is_held_and_dispatched() {
    let runs: Runs = Arc::default();
    let tool = SourcedTool {
        runs: runs.clone(),
        fails: false,
    };
    let h = harness_with(
        ScriptedModel::new(vec![
            call("save_note", json!({"title": "周会"})),
            say("记下了。"),
            call("send_message", json!({"chat": "a"})),
            say("发了。"),
        ]),
        |b| b.tool(tool),
    );
    h.send("记一条笔记").await;
    let held = h.only_pending();
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(runs.lock().unwrap().len(), 1);
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    for kind in ["approval.requested", "call.dispatched"] {
        let entry = audit
            .iter()
            .find(|a| a.kind == kind && a.tool.as_deref() == Some("save_note"))
            .unwrap_or_else(|| panic!("no {kind} entry"));
        assert_eq!(
            entry.detail["source"],
            json!({"python_file": "notes.py", "function": "save_note"}),
            "{kind}"
        );
    }
    // The app's own tools name no source.
    h.send("给 a 发消息").await;
    let held = h.only_pending();
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    let own: Vec<_> = audit
        .iter()
        .filter(|a| a.tool.as_deref() == Some("send_message"))
        .collect();
    assert!(own.iter().any(|a| a.kind == "call.dispatched"));
    assert!(own.iter().all(|a| a.detail.get("source").is_none()));
}

/// Every row of a user tool's call names its file, the answer's too: the trail showed the file
/// on the held and sent rows but only the tool's name on the completed one, whether the call
/// succeeded, failed or was rejected.
#[tokio::test]
async fn every_audit_row_of_a_user_tools_call_names_its_file_completed_failed_or_rejected() {
    let source = json!({"python_file": "notes.py", "function": "save_note"});
    for fails in [false, true] {
        let runs: Runs = Arc::default();
        let h = harness_with(
            ScriptedModel::new(vec![
                call("save_note", json!({"title": "周会"})),
                say("好。"),
                call("save_note", json!({"title": "周报"})),
                say("好，不记了。"),
            ]),
            |b| {
                b.tool(SourcedTool {
                    runs: runs.clone(),
                    fails,
                })
            },
        );
        h.send("记一条笔记").await;
        let held = h.only_pending();
        h.engine
            .decide(&held.call_id, Decision::Approve)
            .await
            .unwrap();
        h.send("再记一条").await;
        let held = h.only_pending();
        h.engine
            .decide(&held.call_id, Decision::Reject { reason: None })
            .await
            .unwrap();
        assert_eq!(runs.lock().unwrap().len(), 1);
        let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
        let rows: Vec<_> = audit
            .iter()
            .filter(|a| a.tool.as_deref() == Some("save_note"))
            .collect();
        let kinds: Vec<&str> = rows.iter().map(|a| a.kind.as_str()).collect();
        for kind in [
            "approval.requested",
            "approval.approved",
            "call.dispatched",
            "call.completed",
            "approval.rejected",
        ] {
            assert!(kinds.contains(&kind), "no {kind} row: {kinds:?}");
        }
        let completed = rows.iter().find(|a| a.kind == "call.completed").unwrap();
        let outcome = if fails { "failed" } else { "completed" };
        assert_eq!(completed.detail["outcome"], outcome, "{}", completed.detail);
        for row in &rows {
            assert_eq!(row.detail["source"], source, "{}: {}", row.kind, row.detail);
        }
    }
}
