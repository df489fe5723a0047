//! The contents the model is shown for a session's events, and the cache that keeps building them
//! from growing with the session (issue 26: with the whole history sent, turn 1000 must cost about
//! what turn 20 does).
//!
//! The cache holds the rendering of a *settled prefix*: the events up to a turn start (a user
//! message) before which every function call was answered. Appending events never changes how
//! such a prefix renders — parallel responses are merged only into the content right before them,
//! and a user message is never merged into anything; the "still waiting" answers and late-result
//! notes that depend on what comes later only concern calls the prefix leaves unanswered — so the
//! history is the cached prefix followed by the rendering of the events after it.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use crate::content::{Content, FunctionCall, FunctionResponse, Part, ROLE_USER};
use crate::event::Event;
use crate::llm::Contents;
use crate::persist::CallStatus;

/// Where a call stands in the store; asked only for calls the history shows still unanswered.
pub(super) type CallStatusOf<'a> = &'a dyn Fn(&str) -> Option<CallStatus>;

/// Per agent branch, what was last rendered of a session's window.
#[derive(Default)]
pub(super) struct HistoryCache {
    /// By agent branch; a session rarely has more than a few agents, so a list is enough.
    branches: Vec<(Option<String>, Settled)>,
}

/// The contents last built for the window `events[start..]`: first the rendering of its settled
/// prefix `events[start..end]` (`settled_len` contents), then that of the events after it.
#[derive(Default)]
struct Settled {
    start: usize,
    end: usize,
    /// The id of `events[end - 1]`: events are only ever appended, so while it is still there
    /// the prefix is unchanged; anything else (a reload, a rewrite) starts the cache over.
    last_id: Option<String>,
    /// Shared with the last request: when that request is gone (a provider drops it once its
    /// body is built), the next one reuses the list in place instead of copying the prefix.
    contents: Contents,
    settled_len: usize,
    /// The turn starts inside the prefix before which every call was answered, with where their
    /// rendering begins in `contents`. No call id crosses one, so the events before it render the
    /// same without those after it and vice versa: the window may move to one (as the default
    /// window of the last 40 turns does every turn) by dropping the contents before it.
    cuts: VecDeque<(usize, usize)>,
    /// Every call id the prefix asked or answered, with its event's index: a later event naming
    /// one (a second answer, a reused id) would render differently with the prefix than after it.
    ids: HashMap<String, usize>,
}

impl Settled {
    fn new(start: usize) -> Self {
        Settled {
            start,
            end: start,
            ..Settled::default()
        }
    }

    /// Whether the prefix is still the beginning of `events[self.start..]`, and the window
    /// starting at `start` begins where the prefix does or at one of its cuts.
    fn fits(&self, events: &[Event], start: usize) -> bool {
        let unchanged = self.end <= events.len()
            && (self.end == self.start
                || self
                    .end
                    .checked_sub(1)
                    .and_then(|i| events.get(i))
                    .map(|e| &e.id)
                    == self.last_id.as_ref());
        unchanged && (start == self.start || self.cuts.iter().any(|&(at, _)| at == start))
    }

    /// Drops what comes before `start`, one of the cuts.
    fn move_to(&mut self, start: usize) {
        let Some(&(_, dropped)) = self.cuts.iter().find(|&&(at, _)| at == start) else {
            return;
        };
        self.contents.drain(..dropped);
        self.settled_len -= dropped;
        while self.cuts.front().is_some_and(|&(at, _)| at <= start) {
            self.cuts.pop_front();
        }
        for cut in &mut self.cuts {
            cut.1 -= dropped;
        }
        self.ids.retain(|_, at| *at >= start);
        self.start = start;
    }
}

impl HistoryCache {
    /// The contents for `events[start..]` as seen from `branch`: the same as [`render`] of that
    /// slice, with only the events after the last settled turn start rendered again.
    pub(super) fn contents(
        &mut self,
        events: &[Event],
        start: usize,
        branch: Option<&str>,
        status: CallStatusOf<'_>,
    ) -> Contents {
        let Some(window) = events.get(start..) else {
            return Contents::default();
        };
        let index = match self
            .branches
            .iter()
            .position(|(b, _)| b.as_deref() == branch)
        {
            Some(index) => index,
            None => {
                self.branches
                    .push((branch.map(str::to_owned), Settled::default()));
                self.branches.len() - 1
            }
        };
        let settled = &mut self.branches[index].1;
        if !settled.fits(events, start) {
            *settled = Settled::new(start);
        } else if start != settled.start {
            settled.move_to(start);
        }
        let Some(cuts) = new_cuts(events, settled.end, branch, &settled.ids) else {
            tracing::debug!("a call id recurs after the settled history; rendering it whole");
            return render(window, branch, status).into();
        };
        // Copies only if the previous request is still alive somewhere.
        let contents = &mut *settled.contents;
        contents.truncate(settled.settled_len);
        let mut from = settled.end;
        for cut in cuts {
            let segment = &events[from..cut];
            contents.extend(render(segment, branch, status));
            settled
                .ids
                .extend(call_ids(segment, branch).map(|(at, id)| (id.to_owned(), from + at)));
            settled.cuts.push_back((cut, contents.len()));
            from = cut;
        }
        if from != settled.end {
            settled.end = from;
            settled.last_id = events.get(from - 1).map(|e| e.id.clone());
            settled.settled_len = contents.len();
        }
        contents.extend(render(&events[from..], branch, status));
        settled.contents.clone()
    }
}

/// The turn starts after `from` before which every call made since `from` was answered, in
/// order; `None` when an event after `from` names a call id already seen — by the settled prefix
/// (`prefix_ids`) or earlier in the scan — other than to answer it once.
fn new_cuts(
    events: &[Event],
    from: usize,
    branch: Option<&str>,
    prefix_ids: &HashMap<String, usize>,
) -> Option<Vec<usize>> {
    let mut open: HashSet<&str> = HashSet::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut cuts = Vec::new();
    for (i, event) in events.iter().enumerate().skip(from) {
        let Some(content) = visible(event, branch) else {
            continue;
        };
        if i > from && open.is_empty() && starts_turn(content) {
            cuts.push(i);
        }
        for part in &content.parts {
            match part {
                Part::FunctionCall(FunctionCall { id: Some(id), .. }) => {
                    if prefix_ids.contains_key(id) || !seen.insert(id) {
                        return None;
                    }
                    open.insert(id);
                }
                // Answering an open call closes it; any other answer must be the first word on
                // its id (an answer to a call before the window is shown as a note either way).
                Part::FunctionResponse(FunctionResponse { id: Some(id), .. })
                    if !open.remove(id.as_str())
                        && (prefix_ids.contains_key(id) || !seen.insert(id)) =>
                {
                    return None;
                }
                _ => {}
            }
        }
    }
    Some(cuts)
}

/// The call ids named in `events` as seen from `branch`, with the index of their event.
fn call_ids<'a>(
    events: &'a [Event],
    branch: Option<&'a str>,
) -> impl Iterator<Item = (usize, &'a str)> {
    events
        .iter()
        .enumerate()
        .filter_map(move |(at, e)| visible(e, branch).map(|c| (at, c)))
        .flat_map(|(at, c)| c.parts.iter().map(move |part| (at, part)))
        .filter_map(|(at, part)| match part {
            Part::FunctionCall(FunctionCall { id: Some(id), .. })
            | Part::FunctionResponse(FunctionResponse { id: Some(id), .. }) => {
                Some((at, id.as_str()))
            }
            _ => None,
        })
}

/// The content the model is shown of an event, if any.
fn visible<'a>(event: &'a Event, branch: Option<&str>) -> Option<&'a Content> {
    if event.partial || !branch_visible(event.branch.as_deref(), branch) {
        return None;
    }
    event.content.as_ref().filter(|c| !c.parts.is_empty())
}

/// A user message (not a function response): where [`render`] counts a new turn.
fn starts_turn(content: &Content) -> bool {
    content.is_user() && content.function_responses().next().is_none()
}

/// The contents the model is shown for `events`: every function call answered right after it, as
/// models require. A call still waiting for the user (kept when the user wrote again) is answered
/// with where it stands; a call answered only after a later message is shown as waiting at its
/// place, and its result comes as a note where it happened.
pub(super) fn render(
    events: &[Event],
    agent_branch: Option<&str>,
    status: CallStatusOf<'_>,
) -> Vec<Content> {
    let visible: Vec<&Content> = events
        .iter()
        .filter_map(|e| visible(e, agent_branch))
        .collect();
    // Which turn (counted by user messages) each call was made and answered in.
    let mut asked: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut on_time: HashSet<&str> = HashSet::new();
    let mut turn = 0;
    for content in &visible {
        if starts_turn(content) {
            turn += 1;
        }
        for part in &content.parts {
            match part {
                Part::FunctionCall(FunctionCall { id: Some(id), .. }) => {
                    asked.insert(id, turn);
                }
                Part::FunctionResponse(FunctionResponse { id: Some(id), .. }) => {
                    answered.insert(id);
                    if asked.get(id.as_str()) == Some(&turn) {
                        on_time.insert(id);
                    }
                }
                _ => {}
            }
        }
    }
    let mut contents: Vec<Content> = Vec::new();
    for content in visible {
        let mut content = content.clone();
        let mut notes = Vec::new();
        if content.function_responses().next().is_some() {
            content.parts.retain(|part| match part {
                Part::FunctionResponse(r @ FunctionResponse { id: Some(id), .. })
                    if !on_time.contains(id.as_str()) =>
                {
                    notes.push(late_result(r));
                    false
                }
                _ => true,
            });
        }
        if !content.parts.is_empty() {
            // Parallel function responses arrive as separate events; models want them together.
            match contents.last_mut() {
                Some(last)
                    if last.role == content.role
                        && content.function_responses().next().is_some()
                        && last.function_responses().next().is_some() =>
                {
                    last.parts.extend(content.parts);
                }
                _ => {
                    let waiting: Vec<Part> = content
                        .function_calls()
                        .filter_map(|call| {
                            let id = call.id.as_deref()?;
                            (!on_time.contains(id))
                                .then(|| still_waiting(call, answered.contains(id), status))
                        })
                        .collect();
                    contents.push(content);
                    if !waiting.is_empty() {
                        contents.push(Content::new(ROLE_USER, waiting));
                    }
                }
            }
        }
        if !notes.is_empty() {
            contents.push(Content::new(
                ROLE_USER,
                notes.into_iter().map(Part::from_text).collect(),
            ));
        }
    }
    contents
}

/// The answer shown in place of a call that had no result at that point of the conversation.
fn still_waiting(call: &FunctionCall, answered_later: bool, status: CallStatusOf<'_>) -> Part {
    // Where the call stands now matters only while it has no result at all.
    let status = (!answered_later)
        .then(|| call.id.as_deref().and_then(status))
        .flatten();
    let text = match (answered_later, status) {
        (true, _) => {
            "At this point the call was still waiting for the user's decision; its result is reported later in the conversation."
        }
        (false, Some(CallStatus::AwaitingApproval)) => {
            "Still waiting for the user's approval: it has not run. It runs only if the user approves it; do not propose it again unless the user asks."
        }
        (false, Some(CallStatus::AwaitingAuth)) => {
            "Still waiting for the user to sign in to Feishu: it has not run yet."
        }
        (false, Some(CallStatus::OutcomeUnknown)) => {
            "Its outcome is unknown; the user has been asked whether it took effect."
        }
        (false, _) => "No result was recorded for this call.",
    };
    let mut response = Map::new();
    response.insert("output".to_owned(), Value::String(text.to_owned()));
    if let Some(status) = status {
        response.insert("status".to_owned(), json!(status));
    }
    Part::FunctionResponse(FunctionResponse {
        id: call.id.clone(),
        name: call.name.clone(),
        response,
    })
}

/// A result that arrived after a later message, as a note the model reads in order.
fn late_result(response: &FunctionResponse) -> String {
    format!(
        "Update on the earlier call {} ({}): the user has since decided it, and it answered: {}",
        response.name,
        response.id.as_deref().unwrap_or_default(),
        Value::Object(response.response.clone())
    )
}

fn branch_visible(event_branch: Option<&str>, agent_branch: Option<&str>) -> bool {
    match (event_branch, agent_branch) {
        (None, _) => true,
        // The root sees everything; sub-agents see their ancestors' and descendants' events, not
        // their peers'.
        (Some(_), None) => true,
        (Some(event), Some(agent)) => {
            agent == event
                || agent.starts_with(&format!("{event}."))
                || event.starts_with(&format!("{agent}."))
        }
    }
}

#[cfg(test)]
mod tests;
