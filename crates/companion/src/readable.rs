//! A read tool's result as a person reads it: the items of the list it returned (events, tasks,
//! chats, messages, documents, people), one line each, instead of the JSON the model was given.

use serde_json::{Map, Value};

/// The most lines a result shows.
const MAX_LINES: usize = 50;

/// The fields that name an item, in order of preference.
const NAMES: &[&str] = &[
    "summary",
    "title",
    "name",
    "subject",
    "text",
    "content",
    "description",
];

/// One line per item of the first list in `output`, or nothing when it holds no list of objects.
pub fn lines(output: &Value) -> Vec<String> {
    let Some(items) = first_list(output) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(line)
        .take(MAX_LINES)
        .collect()
}

/// The output itself when it is a list, or its first field that is a non-empty list of objects.
fn first_list(output: &Value) -> Option<&Vec<Value>> {
    match output {
        Value::Array(items) if items.iter().any(Value::is_object) => Some(items),
        Value::Object(map) => map.values().find_map(|v| match v {
            Value::Array(items) if items.iter().any(Value::is_object) => Some(items),
            _ => None,
        }),
        _ => None,
    }
}

fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Object(inner) => inner
            .get("name")
            .or_else(|| inner.get("date_time"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// `2026-12-02T15:00:00+08:00` as `12-02 15:00`; anything else as it is.
fn short_time(t: &str) -> String {
    match (t.get(5..10), t.get(11..16)) {
        (Some(date), Some(clock)) if t.as_bytes().get(10) == Some(&b'T') => {
            format!("{date} {clock}")
        }
        _ => t.to_owned(),
    }
}

fn line(item: &Map<String, Value>) -> Option<String> {
    let name = NAMES.iter().find_map(|k| text(item, k))?;
    let name: String = name
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect();
    let when = match (text(item, "start"), text(item, "end")) {
        (Some(start), Some(end)) => {
            let (s, e) = (short_time(&start), short_time(&end));
            // The end's date is left out when it is the start's.
            let e = match (s.split_once(' '), e.split_once(' ')) {
                (Some((sd, _)), Some((ed, et))) if sd == ed => et.to_owned(),
                _ => e,
            };
            Some(format!("{s}–{e}"))
        }
        (Some(start), None) => Some(short_time(&start)),
        _ => text(item, "due")
            .or_else(|| text(item, "time"))
            .map(|t| short_time(&t)),
    };
    Some(match when {
        Some(when) => format!("{when}  {name}"),
        None => name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_read_as_times_and_titles() {
        let out = json!({"time_zone": "Asia/Shanghai", "events": [
            {"event_id": "e1", "summary": "周会", "start": "2026-12-02T10:00:00+08:00", "end": "2026-12-02T11:00:00+08:00"},
            {"event_id": "e2", "summary": "产品评审", "start": "2026-12-02T15:00:00+08:00", "end": "2026-12-03T09:00:00+08:00"},
        ]});
        assert_eq!(
            lines(&out),
            [
                "12-02 10:00–11:00  周会",
                "12-02 15:00–12-03 09:00  产品评审"
            ]
        );
    }

    #[test]
    fn tasks_and_plain_lists_read_too_and_other_shapes_read_as_nothing() {
        let out = json!({"tasks": [{"summary": "提交周报", "due": "2026-12-04T18:00:00+08:00"}, {"guid": "x"}]});
        assert_eq!(lines(&out), ["12-04 18:00  提交周报"]);
        assert_eq!(lines(&json!([{"name": "产品周会"}])), ["产品周会"]);
        assert!(lines(&json!({"ok": true})).is_empty());
        assert!(lines(&json!("text")).is_empty());
    }
}
