//! The cached history must be exactly what rendering the window from scratch gives, whatever was
//! appended, however the window moved, and after the events were replaced.

use super::*;
use crate::content::ROLE_MODEL;

const SUB: &str = "root.sub";
const PEER: &str = "root.peer";

fn user(text: &str) -> Event {
    Event::new("inv", "user").with_content(Content::user_text(text))
}

fn say(text: &str) -> Event {
    Event::new("inv", "root").with_content(Content::model_text(text))
}

fn calls(ids: &[&str]) -> Event {
    let parts = ids
        .iter()
        .map(|id| {
            Part::FunctionCall(FunctionCall {
                id: Some((*id).to_owned()),
                name: "noop".to_owned(),
                args: Map::new(),
            })
        })
        .collect();
    Event::new("inv", "root").with_content(Content::new(ROLE_MODEL, parts))
}

fn answer(id: &str) -> Event {
    let response = FunctionResponse::from_output("noop", format!("done {id}")).with_id(id);
    Event::new("inv", "root").with_content(Content::new(
        ROLE_USER,
        vec![Part::FunctionResponse(response)],
    ))
}

fn on(branch: &str, mut event: Event) -> Event {
    event.branch = Some(branch.to_owned());
    event
}

fn partial(text: &str) -> Event {
    let mut event = say(text);
    event.partial = true;
    event
}

/// A session with every shape the rendering treats apart: calls answered on time, in parallel
/// (merged), late (after another user message), kept waiting over later messages and never
/// answered, partial chunks, and events of sub-agents' branches.
fn session() -> Vec<Event> {
    vec![
        user("hi"),
        say("hello"),
        user("run a"),
        calls(&["a"]),
        answer("a"),
        say("ran a"),
        user("run b and c"),
        calls(&["b", "c"]),
        answer("b"),
        answer("c"),
        say("ran both"),
        user("send d"),
        calls(&["d"]),
        // d waits for approval while the user goes on.
        user("meanwhile"),
        say("d is still waiting"),
        user("run e"),
        calls(&["e"]),
        answer("e"),
        say("ran e"),
        // d approved at last: its result comes as a late note.
        answer("d"),
        say("d was sent"),
        user("ask the sub-agent"),
        partial("thin"),
        say("thinking done"),
        on(SUB, calls(&["f"])),
        on(SUB, answer("f")),
        on(SUB, say("sub ran f")),
        user("ask the peer"),
        on(PEER, calls(&["g"])),
        on(PEER, answer("g")),
        user("send h"),
        calls(&["h"]),
        user("never mind h"),
        say("h waits"),
        user("run i"),
        calls(&["i"]),
        answer("i"),
        say("ran i"),
        user("bye"),
        say("bye"),
    ]
}

fn status(id: &str) -> Option<CallStatus> {
    (id == "h").then_some(CallStatus::AwaitingApproval)
}

/// Where the window of the last `turns` user messages starts, as the engine computes it.
fn window_start(events: &[Event], turns: usize) -> usize {
    let starts: Vec<usize> = (0..events.len()).filter(|&i| events[i].is_user()).collect();
    starts
        .len()
        .checked_sub(turns)
        .and_then(|i| starts.get(i).copied())
        .unwrap_or(0)
}

/// Appends the session's events one by one and, after each, checks the cache against rendering
/// from scratch for each branch and window size — keeping some requests alive and editing them
/// as a callback may, which must not change what the cache gives next.
#[test]
fn the_cached_history_is_the_history_rendered_from_scratch_after_every_append() {
    let all = session();
    for turns in [usize::MAX, 1, 2, 3] {
        let mut cache = HistoryCache::default();
        let mut kept = Vec::new();
        for len in 1..=all.len() {
            let events = &all[..len];
            let start = window_start(events, turns);
            for branch in [None, Some(SUB), Some(PEER)] {
                let mut got = cache.contents(events, start, branch, &status);
                assert_eq!(
                    *got,
                    render(&events[start..], branch, &status),
                    "after {len} events, window of {turns} turns, branch {branch:?}"
                );
                if len % 3 == 0 {
                    got.push(Content::user_text("a callback's note"));
                    kept.push(got);
                }
            }
        }
        assert!(!kept.is_empty());
    }
}

#[test]
fn late_and_waiting_calls_render_as_they_did_before_the_cache() {
    let events = session();
    let contents = HistoryCache::default().contents(&events, 0, None, &status);
    let texts: Vec<String> = contents.iter().map(Content::text).collect();
    // The late result of d is a note where it arrived.
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Update on the earlier call noop (d)")),
        "{texts:?}"
    );
    let responses: Vec<&FunctionResponse> = contents
        .iter()
        .flat_map(|c| c.function_responses())
        .collect();
    let of = |id: &str| {
        responses
            .iter()
            .find(|r| r.id.as_deref() == Some(id))
            .map(|r| Value::Object(r.response.clone()))
    };
    assert_eq!(
        of("d").and_then(|r| r.get("output").cloned()),
        Some(json!(
            "At this point the call was still waiting for the user's decision; its result is reported later in the conversation."
        ))
    );
    assert_eq!(
        of("h").and_then(|r| r.get("status").cloned()),
        Some(json!(CallStatus::AwaitingApproval))
    );
    // b and c answered in one content, as models want.
    assert!(contents.iter().any(|c| c.function_responses().count() == 2));
}

/// Events replaced by others (a reload, a rewrite) are noticed: the cache gives the new events'
/// history, not the one it had kept — which differs, so a stale cache would fail here.
#[test]
fn replaced_events_are_rendered_anew_not_from_the_stale_cache() {
    let before = session();
    let mut cache = HistoryCache::default();
    let stale = cache.contents(&before, 0, None, &status);
    // The same shape, other events: fresh ids, other words.
    let after: Vec<Event> = before
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.id = Event::new("inv", "x").id;
            if let Some(Part::Text(text)) = e.content.as_mut().and_then(|c| c.parts.first_mut()) {
                text.push_str(" (rewritten)");
            }
            e
        })
        .collect();
    let fresh = render(&after, None, &status);
    assert_ne!(*stale, fresh, "the rewrite must show in the history");
    assert_eq!(*cache.contents(&after, 0, None, &status), fresh);
    // Shorter than what was settled, then grown past it again.
    let cut = &before[..5];
    assert_eq!(
        *cache.contents(cut, 0, None, &status),
        render(cut, None, &status)
    );
    assert_eq!(
        *cache.contents(&after, 0, None, &status),
        fresh,
        "grown back with other events"
    );
}

/// A second answer to a call the settled part already answered, or a call reusing its id, would
/// render differently after that part than with it; the history is then rendered whole, exactly.
#[test]
fn a_call_id_named_again_later_is_rendered_exactly() {
    let answered_again = [user("again"), answer("a"), say("a again"), user("later")];
    let asked_again = [user("again"), calls(&["a"]), user("later"), say("a waits")];
    for again in [answered_again, asked_again] {
        let mut events = session();
        let mut cache = HistoryCache::default();
        cache.contents(&events, 0, None, &status);
        let settled = events.len();
        events.extend(again);
        for len in settled..=events.len() {
            assert_eq!(
                *cache.contents(&events[..len], 0, None, &status),
                render(&events[..len], None, &status)
            );
        }
    }
}
