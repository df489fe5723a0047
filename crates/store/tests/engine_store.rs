#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent::persist::{
    ApprovalDecision, AuditEntry, AuditFilter, CallFilter, CallRecord, CallStatus, Commit,
    EngineStore, InvocationRecord, InvocationStatus, JournalEntry, JournalOp, PersistError, Rule,
    RuleEffect, Verdict,
};
use agent::{Content, Event, EventActions, StateMap, ToolOutcome};
use serde_json::{Map, Value, json};
use store::{Store, StoreError};

fn obj(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn text_event(text: &str) -> Event {
    Event::new("inv-1", "user").with_content(Content::user_text(text))
}

fn delta_event(delta: Value) -> Event {
    Event::new("inv-1", "assistant").with_actions(EventActions {
        state_delta: obj(delta),
        ..EventActions::default()
    })
}

/// A store with sessions `s1` and `s2` (app `app`, user `u`).
fn store_with_sessions() -> Store {
    let store = Store::open_in_memory().unwrap();
    for id in ["s1", "s2"] {
        EngineStore::create_session(&store, "app", "u", Some(id), &StateMap::new()).unwrap();
    }
    store
}

fn invocation(id: &str, session_id: &str, status: InvocationStatus, at: i64) -> InvocationRecord {
    InvocationRecord {
        id: id.to_owned(),
        session_id: session_id.to_owned(),
        agent_name: "assistant".to_owned(),
        status,
        model_calls: 2,
        started_at: at,
        updated_at: at + 5,
    }
}

fn call(call_id: &str, session_id: &str, invocation_id: &str, created_at: i64) -> CallRecord {
    CallRecord {
        call_id: call_id.to_owned(),
        session_id: session_id.to_owned(),
        invocation_id: invocation_id.to_owned(),
        agent_name: "assistant".to_owned(),
        branch: None,
        tool: "create_calendar_event".to_owned(),
        args: obj(json!({"summary": "产品周会", "start": "2026-12-01T14:00:00+08:00"})),
        original_args: None,
        idempotency_key: format!("key-{call_id}"),
        status: CallStatus::AwaitingApproval,
        requires_approval: true,
        decision: None,
        preview: None,
        auth_scopes: Vec::new(),
        authorize_url: None,
        outcome: None,
        created_at,
        expires_at: None,
        updated_at: created_at,
        version: 1,
    }
}

/// A call with every optional field set, so the round trip covers them all.
fn full_call() -> CallRecord {
    CallRecord {
        branch: Some("assistant.calendar".to_owned()),
        original_args: Some(obj(json!({"summary": "周会", "attendees": ["a", "b"]}))),
        status: CallStatus::Done,
        decision: Some(ApprovalDecision {
            verdict: Verdict::ApprovedEdited,
            decided_by: "user".to_owned(),
            decided_at: 1_700_000_000_500,
            reason: Some("改一下标题".to_owned()),
            args_hash: Some("ab".repeat(32)),
        }),
        preview: Some(agent::Preview {
            summary: agent::Localized::new("创建日程「周会」", "Create the event “周会”"),
            risk: agent::Risk::High,
            fields: vec![agent::PreviewField {
                label: agent::Localized::new("时间", "Time"),
                value: "12月1日 14:00–15:00".to_owned(),
            }],
            changes: vec![agent::PreviewChange {
                field: agent::Localized::new("地点", "Location"),
                from: "A".to_owned(),
                to: "B".to_owned(),
            }],
        }),
        auth_scopes: vec!["calendar:calendar".to_owned(), "task:task".to_owned()],
        authorize_url: Some("https://example.com/authorize?x=1".to_owned()),
        outcome: Some(ToolOutcome::Completed),
        expires_at: Some(1_700_000_900_000),
        ..call("c-full", "s1", "inv-1", 1_700_000_000_000)
    }
}

fn rule(id: &str, created_at: i64) -> Rule {
    Rule {
        id: id.to_owned(),
        tool: "send_message".to_owned(),
        effect: RuleEffect::AlwaysAllow,
        arg_constraints: obj(json!({"chat_id": "oc_123"})),
        expires_at: Some(created_at + 3_600_000),
        created_by: "user".to_owned(),
        from_call_id: Some("c-1".to_owned()),
        created_at,
        revoked_at: None,
    }
}

fn journal(call_id: &str, attempt: u32, started_at: i64) -> JournalEntry {
    JournalEntry {
        call_id: call_id.to_owned(),
        attempt,
        session_id: "s1".to_owned(),
        tool: "send_message".to_owned(),
        idempotency_key: format!("key-{call_id}"),
        args_hash: "cd".repeat(32),
        started_at,
        finished_at: None,
        outcome: None,
    }
}

fn finish(call_id: &str, attempt: u32, at: i64) -> JournalOp {
    JournalOp::Finish {
        call_id: call_id.to_owned(),
        attempt,
        finished_at: at,
        outcome: Some(ToolOutcome::Completed),
    }
}

fn audit(at: i64, session: Option<&str>, tool: Option<&str>, kind: &str) -> AuditEntry {
    AuditEntry {
        at,
        session_id: session.map(str::to_owned),
        call_id: Some("c-1".to_owned()),
        tool: tool.map(str::to_owned),
        kind: kind.to_owned(),
        actor: "user".to_owned(),
        detail: json!({"note": kind}),
    }
}

fn commit(session_id: &str) -> Commit {
    Commit {
        session_id: session_id.to_owned(),
        ..Commit::default()
    }
}

fn ids<T>(records: &[T], id: impl Fn(&T) -> &str) -> Vec<String> {
    records.iter().map(|r| id(r).to_owned()).collect()
}

fn last_seq(store: &Store, session_id: &str) -> u64 {
    store.session_meta(session_id).unwrap().last_seq
}

fn assert_conflict<T: std::fmt::Debug>(result: Result<T, PersistError>, needle: &str) {
    match result {
        Err(PersistError::Conflict(message)) => {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}")
        }
        other => panic!("expected a conflict naming {needle:?}, got {other:?}"),
    }
}

#[test]
fn every_record_type_round_trips_through_commit() {
    let store = store_with_sessions();
    let event = delta_event(json!({"topic": "周会"}));
    let inv = invocation(
        "inv-1",
        "s1",
        InvocationStatus::Suspended,
        1_700_000_000_000,
    );
    let call = full_call();
    let rule = rule("r-1", 1_700_000_000_100);
    let started = journal("c-full", 1, 1_700_000_000_200);
    let entry = audit(
        1_700_000_000_300,
        Some("s1"),
        Some("send_message"),
        "approval.requested",
    );
    let seq = store
        .commit(&Commit {
            expected_seq: 0,
            events: vec![event.clone()],
            invocations: vec![inv.clone()],
            calls: vec![call.clone()],
            rules: vec![rule.clone()],
            journal: vec![JournalOp::Start(started.clone())],
            audit: vec![entry.clone()],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(seq, 1);

    let session = EngineStore::load_session(&store, "s1").unwrap();
    assert_eq!(
        (
            session.id.as_str(),
            session.app_name.as_str(),
            session.user_id.as_str()
        ),
        ("s1", "app", "u")
    );
    assert_eq!((session.events, session.last_seq), (vec![event], 1));
    assert_eq!(Value::Object(session.state), json!({"topic": "周会"}));
    assert_eq!(store.invocation("inv-1").unwrap(), Some(inv));
    assert_eq!(store.call("c-full").unwrap(), Some(call));
    assert_eq!(store.rules().unwrap(), vec![rule]);
    assert_eq!(store.dispatches("c-full").unwrap(), vec![started.clone()]);
    assert_eq!(
        store.unfinished_dispatches().unwrap(),
        vec![started.clone()]
    );
    assert_eq!(store.audit(&AuditFilter::default()).unwrap(), vec![entry]);
    assert_eq!(store.invocation("nope").unwrap(), None);
    assert_eq!(store.call("nope").unwrap(), None);

    // Finishing fills in the stored entry's finish and outcome, and nothing else.
    store
        .commit(&Commit {
            journal: vec![finish("c-full", 1, 1_700_000_000_400)],
            ..commit("s1")
        })
        .unwrap();
    let finished = JournalEntry {
        finished_at: Some(1_700_000_000_400),
        outcome: Some(ToolOutcome::Completed),
        ..started
    };
    assert_eq!(store.dispatches("c-full").unwrap(), vec![finished]);
}

#[test]
fn a_commit_is_all_or_nothing() {
    let store = store_with_sessions();
    let first = text_event("first");
    store
        .commit(&Commit {
            events: vec![first.clone()],
            calls: vec![call("c-a", "s1", "inv-1", 1)],
            ..commit("s1")
        })
        .unwrap();
    let before_a = store.call("c-a").unwrap().unwrap();

    let mut a2 = before_a.clone();
    a2.status = CallStatus::Approved;
    a2.version = 2;
    let mut b_wrong = call("c-b", "s1", "inv-1", 2);
    b_wrong.version = 3; // c-b does not exist, so only version 1 is acceptable
    let err = store.commit(&Commit {
        expected_seq: 1,
        events: vec![
            text_event("second"),
            delta_event(json!({"k": 1, "user:u": 2})),
        ],
        invocations: vec![invocation("inv-1", "s1", InvocationStatus::Running, 1)],
        calls: vec![a2.clone(), b_wrong],
        rules: vec![rule("r-1", 1)],
        journal: vec![JournalOp::Start(journal("c-a", 1, 3))],
        audit: vec![audit(3, Some("s1"), None, "approval.approved")],
        ..commit("s1")
    });
    assert_conflict(err, "c-b");

    // Nothing of the failed step is visible: not the events, their state, nor the first call.
    assert_eq!(last_seq(&store, "s1"), 1);
    let session = store.load_session("s1").unwrap();
    assert_eq!(session.events, vec![first]);
    assert!(session.state.is_empty());
    assert_eq!(store.call("c-a").unwrap(), Some(before_a));
    assert_eq!(store.call("c-b").unwrap(), None);
    assert_eq!(store.invocation("inv-1").unwrap(), None);
    assert!(store.rules().unwrap().is_empty());
    assert!(store.dispatches("c-a").unwrap().is_empty());
    assert!(store.audit(&AuditFilter::default()).unwrap().is_empty());

    // The same step with the right version goes through whole.
    let b = call("c-b", "s1", "inv-1", 2);
    let seq = store
        .commit(&Commit {
            expected_seq: 1,
            events: vec![text_event("second"), delta_event(json!({"k": 1}))],
            calls: vec![a2.clone(), b.clone()],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(seq, 3);
    assert_eq!(store.call("c-a").unwrap(), Some(a2));
    assert_eq!(store.call("c-b").unwrap(), Some(b));
    assert_eq!(store.load_state("s1").unwrap()["k"], 1);
}

#[test]
fn a_stale_expected_sequence_is_a_conflict() {
    let store = store_with_sessions();
    let seq = store
        .commit(&Commit {
            events: vec![text_event("a"), text_event("b")],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(seq, 2);
    for stale in [0, 1, 3] {
        let result = store.commit(&Commit {
            expected_seq: stale,
            events: vec![text_event("late")],
            calls: vec![call("c-1", "s1", "inv-1", 1)],
            ..commit("s1")
        });
        assert_conflict(result, "s1");
    }
    assert_eq!(last_seq(&store, "s1"), 2);
    assert_eq!(store.call("c-1").unwrap(), None);
    // The plain append path reports the same check as its own error.
    assert!(matches!(
        store.append_event("s1", 1, &text_event("late")),
        Err(StoreError::StaleSequence { actual: 2, .. })
    ));
    // Without events the sequence is not checked, and the current one comes back.
    let seq = store
        .commit(&Commit {
            expected_seq: 0,
            calls: vec![call("c-1", "s1", "inv-1", 1)],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(seq, 2);
}

#[test]
fn events_in_a_commit_follow_the_append_rules() {
    let store = store_with_sessions();
    let seq = store
        .commit(&Commit {
            events: vec![
                delta_event(json!({"a": 1, "temp:t": "草稿", "app:x": true})),
                delta_event(json!({"a": null, "user:b": 2})),
            ],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(seq, 2);
    let session = store.load_session("s1").unwrap();
    assert_eq!(
        Value::Object(session.state),
        json!({"app:x": true, "user:b": 2})
    );
    assert_eq!(
        Value::Object(session.events[0].actions.state_delta.clone()),
        json!({"a": 1, "app:x": true})
    );

    let mut chunk = text_event("half");
    chunk.partial = true;
    let result = store.commit(&Commit {
        expected_seq: 2,
        events: vec![text_event("whole"), chunk],
        ..commit("s1")
    });
    match result {
        Err(PersistError::Other(err)) => assert!(
            matches!(
                err.downcast_ref::<StoreError>(),
                Some(StoreError::PartialEvent)
            ),
            "{err}"
        ),
        other => panic!("expected the partial event to be refused, got {other:?}"),
    }
    assert_eq!(last_seq(&store, "s1"), 2);
}

#[test]
fn a_missing_session_is_not_found() {
    let store = store_with_sessions();
    for c in [
        Commit {
            events: vec![text_event("x")],
            ..commit("nope")
        },
        commit("nope"),
        // No commit session, but a call that names a missing one.
        Commit {
            calls: vec![call("c-1", "nope", "inv-1", 1)],
            ..commit("")
        },
        Commit {
            invocations: vec![invocation("inv-1", "nope", InvocationStatus::Running, 1)],
            ..commit("")
        },
    ] {
        match store.commit(&c) {
            Err(PersistError::NotFound(message)) => {
                assert!(message.contains("nope"), "{message}")
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
    assert!(matches!(
        EngineStore::load_session(&store, "nope"),
        Err(PersistError::NotFound(_))
    ));
    // A commit touching only what belongs to no session needs none.
    assert_eq!(
        store
            .commit(&Commit {
                rules: vec![rule("r-1", 1)],
                audit: vec![audit(1, None, None, "rule.created")],
                ..commit("")
            })
            .unwrap(),
        0
    );
}

#[test]
fn call_versions_are_compared_and_swapped() {
    let store = store_with_sessions();
    let new = call("c-1", "s1", "inv-1", 1);
    let add = |c: &CallRecord| {
        store.commit(&Commit {
            calls: vec![c.clone()],
            ..commit("s1")
        })
    };
    add(&new).unwrap();
    // A second "new" call with the same id: someone else created it first.
    assert_conflict(add(&new), "c-1");

    let mut approved = new.clone();
    approved.status = CallStatus::Approved;
    for wrong in [0, 1, 3, 7] {
        approved.version = wrong;
        assert_conflict(add(&approved), "c-1");
    }
    assert_eq!(store.call("c-1").unwrap(), Some(new));

    approved.version = 2;
    add(&approved).unwrap();
    assert_eq!(store.call("c-1").unwrap(), Some(approved.clone()));
    // Replaying the same write is now stale.
    assert_conflict(add(&approved), "c-1");
    let mut dispatching = approved.clone();
    dispatching.status = CallStatus::Dispatching;
    dispatching.version = 3;
    add(&dispatching).unwrap();
    assert_eq!(store.call("c-1").unwrap().unwrap().version, 3);

    // One commit may carry a call's creation and its next change, in order.
    let mut second = call("c-2", "s1", "inv-1", 2);
    let first = second.clone();
    second.version = 2;
    second.status = CallStatus::Approved;
    store
        .commit(&Commit {
            calls: vec![first, second.clone()],
            ..commit("s1")
        })
        .unwrap();
    assert_eq!(store.call("c-2").unwrap(), Some(second));
}

#[test]
fn concurrent_writers_of_one_call_never_lose_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    {
        let store = Store::open(&path).unwrap();
        EngineStore::create_session(&store, "app", "u", Some("s1"), &StateMap::new()).unwrap();
        let mut c = call("c-1", "s1", "inv-1", 1);
        c.args = obj(json!({"n": 0}));
        store
            .commit(&Commit {
                calls: vec![c],
                ..commit("s1")
            })
            .unwrap();
    }
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                let mut written = 0;
                while written < 40 {
                    let mut c = store.call("c-1").unwrap().unwrap();
                    let n = c.args["n"].as_u64().unwrap();
                    c.args = obj(json!({"n": n + 1}));
                    c.version += 1;
                    match store.commit(&Commit {
                        calls: vec![c],
                        ..commit("s1")
                    }) {
                        Ok(_) => written += 1,
                        Err(PersistError::Conflict(_)) => {}
                        Err(other) => panic!("{other}"),
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let c = Store::open(&path).unwrap().call("c-1").unwrap().unwrap();
    assert_eq!((c.version, c.args["n"].as_u64()), (81, Some(80)));
}

#[test]
fn the_journal_records_each_dispatch_once() {
    let store = store_with_sessions();
    let start = |e: JournalEntry| {
        store.commit(&Commit {
            journal: vec![JournalOp::Start(e)],
            ..commit("s1")
        })
    };
    let end = |call_id: &str, attempt: u32, at: i64| {
        store.commit(&Commit {
            journal: vec![finish(call_id, attempt, at)],
            ..commit("s1")
        })
    };
    start(journal("c-late", 1, 30)).unwrap();
    start(journal("c-1", 1, 10)).unwrap();
    start(journal("c-2", 1, 20)).unwrap();
    // The same attempt twice is refused; the next attempt is a new row.
    assert_conflict(start(journal("c-1", 1, 11)), "c-1");
    assert_eq!(
        store.dispatches("c-1").unwrap(),
        vec![journal("c-1", 1, 10)]
    );

    end("c-1", 1, 12).unwrap();
    start(journal("c-1", 2, 40)).unwrap();
    assert_conflict(end("c-1", 1, 13), "already finished");
    assert_conflict(end("c-1", 9, 13), "never started");
    assert_conflict(end("c-unknown", 1, 13), "c-unknown");

    let attempts: Vec<(u32, Option<i64>)> = store
        .dispatches("c-1")
        .unwrap()
        .iter()
        .map(|e| (e.attempt, e.finished_at))
        .collect();
    assert_eq!(attempts, vec![(1, Some(12)), (2, None)]);
    assert!(store.dispatches("c-unknown").unwrap().is_empty());

    let unfinished: Vec<(String, u32)> = store
        .unfinished_dispatches()
        .unwrap()
        .into_iter()
        .map(|e| (e.call_id, e.attempt))
        .collect();
    assert_eq!(
        unfinished,
        vec![
            ("c-2".to_owned(), 1),
            ("c-late".to_owned(), 1),
            ("c-1".to_owned(), 2)
        ]
    );
    end("c-2", 1, 50).unwrap();
    end("c-late", 1, 50).unwrap();
    end("c-1", 2, 50).unwrap();
    assert!(store.unfinished_dispatches().unwrap().is_empty());
}

#[test]
fn calls_are_filtered_by_session_invocation_and_status() {
    let store = store_with_sessions();
    let mut calls = vec![
        call("c-3", "s1", "inv-1", 30),
        call("c-1", "s1", "inv-1", 10),
        call("c-2", "s1", "inv-2", 20),
        call("c-4", "s2", "inv-3", 10),
        call("c-0", "s2", "inv-3", 10),
    ];
    calls[1].status = CallStatus::Done;
    calls[2].status = CallStatus::AwaitingAuth;
    calls[3].status = CallStatus::OutcomeUnknown;
    store
        .commit(&Commit {
            calls,
            ..commit("s1")
        })
        .unwrap();
    let list = |filter: CallFilter| -> Vec<String> {
        ids(&store.calls(&filter).unwrap(), |c| c.call_id.as_str())
    };
    // Oldest first, ties in the order the calls were recorded.
    assert_eq!(
        list(CallFilter::default()),
        ["c-1", "c-4", "c-0", "c-2", "c-3"]
    );
    assert_eq!(
        list(CallFilter {
            session_id: Some("s1".into()),
            ..CallFilter::default()
        }),
        ["c-1", "c-2", "c-3"]
    );
    assert_eq!(
        list(CallFilter {
            invocation_id: Some("inv-1".into()),
            ..CallFilter::default()
        }),
        ["c-1", "c-3"]
    );
    assert_eq!(
        list(CallFilter {
            statuses: vec![
                CallStatus::AwaitingApproval,
                CallStatus::AwaitingAuth,
                CallStatus::OutcomeUnknown
            ],
            ..CallFilter::default()
        }),
        ["c-4", "c-0", "c-2", "c-3"]
    );
    assert_eq!(
        list(CallFilter {
            session_id: Some("s1".into()),
            invocation_id: Some("inv-1".into()),
            statuses: vec![CallStatus::AwaitingApproval],
        }),
        ["c-3"]
    );
    assert!(
        list(CallFilter {
            statuses: vec![CallStatus::Dispatching],
            ..CallFilter::default()
        })
        .is_empty()
    );
}

#[test]
fn invocations_are_listed_by_status_oldest_first_and_replaced_on_upsert() {
    let store = store_with_sessions();
    store
        .commit(&Commit {
            invocations: vec![
                invocation("inv-b", "s1", InvocationStatus::Suspended, 20),
                invocation("inv-a", "s2", InvocationStatus::Running, 10),
                invocation("inv-c", "s1", InvocationStatus::Completed, 5),
            ],
            ..commit("s1")
        })
        .unwrap();
    let open = |store: &Store| {
        ids(
            &store
                .invocations_with_status(&[InvocationStatus::Running, InvocationStatus::Suspended])
                .unwrap(),
            |i| i.id.as_str(),
        )
    };
    assert_eq!(open(&store), ["inv-a", "inv-b"]);
    assert!(store.invocations_with_status(&[]).unwrap().is_empty());

    let mut interrupted = invocation("inv-a", "s2", InvocationStatus::Interrupted, 10);
    interrupted.model_calls = 9;
    store
        .commit(&Commit {
            invocations: vec![interrupted.clone()],
            ..commit("s2")
        })
        .unwrap();
    assert_eq!(open(&store), ["inv-b"]);
    assert_eq!(store.invocation("inv-a").unwrap(), Some(interrupted));
}

#[test]
fn rules_are_listed_oldest_first_revoked_included() {
    let store = store_with_sessions();
    store
        .commit(&Commit {
            rules: vec![rule("r-new", 30), rule("r-old", 10), rule("r-mid", 20)],
            ..commit("")
        })
        .unwrap();
    let mut revoked = rule("r-mid", 20);
    revoked.revoked_at = Some(40);
    revoked.effect = RuleEffect::NeverAllow;
    store
        .commit(&Commit {
            rules: vec![revoked.clone()],
            ..commit("")
        })
        .unwrap();
    let rules = store.rules().unwrap();
    assert_eq!(ids(&rules, |r| r.id.as_str()), ["r-old", "r-mid", "r-new"]);
    assert_eq!(rules[1], revoked);
}

#[test]
fn the_audit_trail_is_filtered_newest_first() {
    let store = store_with_sessions();
    let entries = [
        audit(10, Some("s1"), Some("send_message"), "approval.requested"),
        audit(20, Some("s1"), Some("send_message"), "approval.approved"),
        audit(30, Some("s2"), Some("create_task"), "approval_x.requested"),
        audit(30, Some("s2"), None, "call.dispatched"),
        audit(40, None, Some("send_message"), "APPROVAL.shouted"),
        audit(50, Some("s1"), Some("create_task"), "call.dispatched"),
    ];
    store
        .commit(&Commit {
            audit: entries[..3].to_vec(),
            ..commit("")
        })
        .unwrap();
    store
        .commit(&Commit {
            audit: entries[3..].to_vec(),
            ..commit("")
        })
        .unwrap();
    let kinds = |filter: AuditFilter| -> Vec<(i64, String)> {
        store
            .audit(&filter)
            .unwrap()
            .into_iter()
            .map(|e| (e.at, e.kind))
            .collect()
    };
    let k = |v: &[(i64, &str)]| -> Vec<(i64, String)> {
        v.iter().map(|(at, s)| (*at, (*s).to_owned())).collect()
    };
    // Newest first; the two entries at 30 in the order opposite to their writing.
    assert_eq!(
        kinds(AuditFilter::default()),
        k(&[
            (50, "call.dispatched"),
            (40, "APPROVAL.shouted"),
            (30, "call.dispatched"),
            (30, "approval_x.requested"),
            (20, "approval.approved"),
            (10, "approval.requested"),
        ])
    );
    assert_eq!(store.audit(&AuditFilter::default()).unwrap()[5], entries[0]);
    assert_eq!(
        kinds(AuditFilter {
            session_id: Some("s1".into()),
            ..AuditFilter::default()
        }),
        k(&[
            (50, "call.dispatched"),
            (20, "approval.approved"),
            (10, "approval.requested")
        ])
    );
    assert_eq!(
        kinds(AuditFilter {
            tool: Some("create_task".into()),
            ..AuditFilter::default()
        }),
        k(&[(50, "call.dispatched"), (30, "approval_x.requested")])
    );
    // `.` and `_` are literal, and the match is case-sensitive: `approval.` is not `approval_`.
    assert_eq!(
        kinds(AuditFilter {
            kind_prefix: Some("approval.".into()),
            ..AuditFilter::default()
        }),
        k(&[(20, "approval.approved"), (10, "approval.requested")])
    );
    assert_eq!(
        kinds(AuditFilter {
            kind_prefix: Some("approval_".into()),
            ..AuditFilter::default()
        }),
        k(&[(30, "approval_x.requested")])
    );
    assert!(
        kinds(AuditFilter {
            kind_prefix: Some("%".into()),
            ..AuditFilter::default()
        })
        .is_empty()
    );
    assert_eq!(
        kinds(AuditFilter {
            since: Some(30),
            limit: Some(2),
            ..AuditFilter::default()
        }),
        k(&[(50, "call.dispatched"), (40, "APPROVAL.shouted")])
    );
    assert_eq!(
        kinds(AuditFilter {
            session_id: Some("s1".into()),
            tool: Some("send_message".into()),
            kind_prefix: Some("approval.".into()),
            since: Some(15),
            limit: Some(10),
        }),
        k(&[(20, "approval.approved")])
    );
    assert!(
        kinds(AuditFilter {
            limit: Some(0),
            ..AuditFilter::default()
        })
        .is_empty()
    );
}

#[test]
fn deleting_a_session_keeps_its_audit_trail_but_not_its_calls() {
    let store = store_with_sessions();
    for s in ["s1", "s2"] {
        store
            .commit(&Commit {
                invocations: vec![invocation(
                    &format!("inv-{s}"),
                    s,
                    InvocationStatus::Suspended,
                    1,
                )],
                calls: vec![call(&format!("c-{s}"), s, &format!("inv-{s}"), 1)],
                journal: vec![JournalOp::Start(JournalEntry {
                    session_id: s.to_owned(),
                    ..journal(&format!("c-{s}"), 1, 1)
                })],
                audit: vec![audit(1, Some(s), None, "approval.requested")],
                ..commit(s)
            })
            .unwrap();
    }
    store.delete_session("s1").unwrap();
    assert_eq!(store.call("c-s1").unwrap(), None);
    assert_eq!(store.invocation("inv-s1").unwrap(), None);
    assert!(store.dispatches("c-s1").unwrap().is_empty());
    let s1_audit = store
        .audit(&AuditFilter {
            session_id: Some("s1".into()),
            ..AuditFilter::default()
        })
        .unwrap();
    assert_eq!(s1_audit.len(), 1);
    // The other session is untouched.
    assert!(store.call("c-s2").unwrap().is_some());
    assert!(store.invocation("inv-s2").unwrap().is_some());
    assert_eq!(store.dispatches("c-s2").unwrap().len(), 1);
    assert_eq!(
        ids(&store.unfinished_dispatches().unwrap(), |e| e
            .call_id
            .as_str()),
        ["c-s2"]
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_file_database_keeps_everything_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    let inv = invocation("inv-1", "s1", InvocationStatus::Suspended, 1);
    let c = full_call();
    let r = rule("r-1", 1);
    let j = journal("c-full", 1, 2);
    let a = audit(3, Some("s1"), Some("send_message"), "approval.requested");
    {
        let store = Store::open(&path).unwrap();
        EngineStore::create_session(&store, "app", "u", Some("s1"), &StateMap::new()).unwrap();
        store
            .commit(&Commit {
                events: vec![text_event("hi")],
                invocations: vec![inv.clone()],
                calls: vec![c.clone()],
                rules: vec![r.clone()],
                journal: vec![JournalOp::Start(j.clone())],
                audit: vec![a.clone()],
                ..commit("s1")
            })
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.session_meta("s1").unwrap().last_seq, 1);
    assert_eq!(
        store
            .invocations_with_status(&[InvocationStatus::Suspended])
            .unwrap(),
        vec![inv]
    );
    assert_eq!(store.call("c-full").unwrap(), Some(c));
    assert_eq!(store.rules().unwrap(), vec![r]);
    assert_eq!(store.unfinished_dispatches().unwrap(), vec![j]);
    assert_eq!(store.audit(&AuditFilter::default()).unwrap(), vec![a]);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_damaged_record_names_its_table_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    let store = Store::open(&path).unwrap();
    EngineStore::create_session(&store, "app", "u", Some("s1"), &StateMap::new()).unwrap();
    store
        .commit(&Commit {
            calls: vec![
                call("c-ok", "s1", "inv-1", 1),
                call("c-bad", "s1", "inv-1", 2),
            ],
            audit: vec![audit(1, None, None, "x")],
            ..commit("s1")
        })
        .unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE tool_calls SET data = json_set(data, '$.args', 5) WHERE call_id = 'c-bad'",
            [],
        )
        .unwrap();
        conn.execute("UPDATE audit_log SET data = '{\"at\": 1, ' ", [])
            .unwrap();
    }
    let check = |result: Result<(), PersistError>, table: &str, key: &str, field: &str| {
        let err = match result {
            Err(PersistError::Other(err)) => err,
            other => panic!("expected a damaged-record error, got {other:?}"),
        };
        let message = err.to_string();
        for needle in [table, key, field, &path.display().to_string()] {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        assert!(
            matches!(
                err.downcast_ref::<StoreError>(),
                Some(StoreError::CorruptRecord { .. })
            ),
            "{err:?}"
        );
    };
    check(
        store.call("c-bad").map(drop),
        "tool_calls",
        "c-bad",
        "`args`",
    );
    check(
        store.calls(&CallFilter::default()).map(drop),
        "tool_calls",
        "c-bad",
        "`args`",
    );
    check(
        store.audit(&AuditFilter::default()).map(drop),
        "audit_log",
        "row 1",
        "AuditEntry",
    );
    // The undamaged row still reads.
    assert!(store.call("c-ok").unwrap().is_some());
}
